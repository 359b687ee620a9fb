//! FileLog append throughput and latency with fsync, next to the raw limit measured in the same
//! run.
//!
//! For each record size (200 B, 64 KiB) and writer count (1, 16):
//! - `raw`: one thread writes the same bytes to one file with `write` + `fdatasync`, no framing,
//!   batched as an ideal group commit would batch them (as many records per sync as there are
//!   writers), starting a new file every 64 MiB as the FileLog rolls its segments. This is the
//!   ceiling the FileLog is measured against.
//! - `raw, sync per record` (16 writers only): 16 threads each `pwrite` + `fdatasync` their own
//!   record to one shared file: what durable appends cost without group commit.
//! - `FileLog`: that many tokio tasks each appending one record at a time and waiting for it,
//!   on a runtime of `--workers` threads (several values: the flusher thread competes with the
//!   runtime's workers for the cores, which is most of what separates the FileLog from raw).
//!
//! The disk of a shared machine is noisy (the same loop can differ 2x from one minute to the
//! next), so raw and FileLog runs alternate, `--pairs` times per configuration, and the table
//! gives the median of each figure and the median of the per-pair ratios.
//!
//! `cargo bench -p strata-log --bench filelog_append -- [--seconds 2] [--pairs 3] [--dir DIR]`
//! prints a markdown table; docs/benchmarks.md records it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::{
    fs::OpenOptions,
    io::Write,
    os::unix::fs::FileExt,
    path::{Path, PathBuf},
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use clap::Parser;
use common::{Figure, file_log, histogram, median, median_of, row};

#[derive(Parser)]
struct Args {
    /// Seconds each measurement runs.
    #[arg(long, default_value_t = 2.0)]
    seconds: f64,
    /// Alternating raw/FileLog pairs per configuration.
    #[arg(long, default_value_t = 3)]
    pairs: usize,
    /// Tokio worker threads of the appenders' runtime (repeatable).
    #[arg(long = "workers", default_values_t = [1usize, 2])]
    workers: Vec<usize>,
    /// Directory on the disk to measure (default: a temporary directory under /var/tmp).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Ignored: cargo bench passes it.
    #[arg(long, hide = true)]
    bench: bool,
}

const ROLL_BYTES: usize = 64 << 20;

/// One thread, `batch` records per write + fdatasync, a new file every [`ROLL_BYTES`].
fn raw_batched(dir: &Path, size: usize, batch: usize, run: Duration) -> Figure {
    let open = |n: usize| {
        OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .open(dir.join(format!("raw-batched-{n}")))
            .unwrap()
    };
    let mut files = 0;
    let mut file = open(files);
    let mut written = 0;
    let buf = vec![0x5au8; size * batch];
    let mut latency = histogram();
    let mut records = 0;
    let started = Instant::now();
    while started.elapsed() < run {
        let t = Instant::now();
        if written + buf.len() > ROLL_BYTES && written > 0 {
            files += 1;
            file = open(files);
            written = 0;
        }
        file.write_all(&buf).unwrap();
        file.sync_data().unwrap();
        written += buf.len();
        let micros = t.elapsed().as_micros() as u64;
        // Every record of the batch waited for the whole write and sync.
        latency.record_n(micros.max(1), batch as u64).unwrap();
        records += batch as u64;
    }
    let elapsed = started.elapsed();
    for n in 0..=files {
        std::fs::remove_file(dir.join(format!("raw-batched-{n}"))).unwrap();
    }
    Figure {
        records,
        elapsed,
        latency,
    }
}

/// `writers` threads, each pwrite + fdatasync of one record at a time to one shared file.
fn raw_sync_per_record(dir: &Path, size: usize, writers: usize, run: Duration) -> Figure {
    let path = dir.join("raw-per-record");
    let file = Arc::new(
        OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .open(&path)
            .unwrap(),
    );
    let position = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let threads: Vec<_> = (0..writers)
        .map(|_| {
            let (file, position) = (file.clone(), position.clone());
            std::thread::spawn(move || {
                let buf = vec![0x5au8; size];
                let mut latency = histogram();
                let mut records = 0u64;
                while started.elapsed() < run {
                    let t = Instant::now();
                    let at = position.fetch_add(size as u64, Ordering::Relaxed);
                    file.write_all_at(&buf, at).unwrap();
                    file.sync_data().unwrap();
                    latency
                        .record((t.elapsed().as_micros() as u64).max(1))
                        .unwrap();
                    records += 1;
                }
                (records, latency)
            })
        })
        .collect();
    let mut latency = histogram();
    let mut records = 0;
    for thread in threads {
        let (n, h) = thread.join().unwrap();
        records += n;
        latency.add(h).unwrap();
    }
    let elapsed = started.elapsed();
    std::fs::remove_file(path).unwrap();
    Figure {
        records,
        elapsed,
        latency,
    }
}

/// An event whose encoding is `size` bytes.
fn main() {
    let args = Args::parse();
    let run = Duration::from_secs_f64(args.seconds);
    let scratch = args.dir.clone().unwrap_or_else(|| {
        let dir = PathBuf::from("/var/tmp").join(format!("strata-bench-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    });
    println!(
        "| what | record | writers | records/s | MiB/s | p50 µs | p99 µs | ratio to raw (median of {} pairs) |",
        args.pairs
    );
    println!("|---|---|---|---|---|---|---|---|");
    let runtimes: Vec<(usize, tokio::runtime::Runtime)> = args
        .workers
        .iter()
        .map(|&n| {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(n)
                .enable_all()
                .build()
                .unwrap();
            (n, runtime)
        })
        .collect();
    for size in [200usize, 64 << 10] {
        for writers in [1usize, 16] {
            let mut raws = Vec::new();
            let (mut naives, mut naive_ratios) = (Vec::new(), Vec::new());
            let mut logs: Vec<(Vec<Figure>, Vec<f64>)> =
                runtimes.iter().map(|_| (Vec::new(), Vec::new())).collect();
            for _ in 0..args.pairs.max(1) {
                let raw = raw_batched(&scratch, size, writers, run);
                if writers > 1 {
                    let naive = raw_sync_per_record(&scratch, size, writers, run);
                    naive_ratios.push(naive.per_second() / raw.per_second());
                    naives.push(naive);
                }
                for ((_, runtime), (figures, ratios)) in runtimes.iter().zip(&mut logs) {
                    let log =
                        runtime.block_on(file_log(&scratch.join("filelog"), size, writers, run));
                    ratios.push(log.per_second() / raw.per_second());
                    figures.push(log);
                }
                raws.push(raw);
            }
            row("raw write+fdatasync", size, writers, &median(raws), None);
            if writers > 1 {
                let ratio = median_of(naive_ratios);
                row(
                    "raw, sync per record",
                    size,
                    writers,
                    &median(naives),
                    Some(ratio),
                );
            }
            for ((workers, _), (figures, ratios)) in runtimes.iter().zip(logs) {
                let label = format!("FileLog append, {workers} tokio worker(s)");
                row(
                    &label,
                    size,
                    writers,
                    &median(figures),
                    Some(median_of(ratios)),
                );
            }
        }
    }
    if args.dir.is_none() {
        let _ = std::fs::remove_dir_all(&scratch);
    }
}
