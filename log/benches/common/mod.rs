//! What the log benches share: figures with latency histograms, events of a given encoded size,
//! closed-loop writers over any `CommitLog`, medians and the markdown row.

#![allow(dead_code)]

use std::{
    io::Write,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use hdrhistogram::Histogram;
use prost::Message;
use strata_log::{CommitLog, Envelope, PartitionId};

/// What one run measured.
pub struct Figure {
    pub records: u64,
    pub elapsed: Duration,
    pub latency: Histogram<u64>,
}

impl Figure {
    pub fn per_second(&self) -> f64 {
        self.records as f64 / self.elapsed.as_secs_f64()
    }
    pub fn mib_per_second(&self, size: usize) -> f64 {
        self.per_second() * size as f64 / (1024.0 * 1024.0)
    }
    /// Latency quantile in microseconds.
    pub fn p(&self, q: f64) -> f64 {
        self.latency.value_at_quantile(q) as f64
    }
}

pub fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000, 3).unwrap()
}

/// Bytes per file before the raw baseline starts a new one, as FileLog's default segment size.
/// An event whose protobuf encoding is exactly `size` bytes.
pub fn event_of_size(size: usize) -> Envelope {
    let mut event = Envelope {
        event_id: "01a20000-0000-7000-8000-000000000000".to_owned(),
        timestamp_micros: 1_700_000_000_000_000,
        principal: "bench".to_owned(),
        epoch: 1,
        ..Default::default()
    };
    let base = event.encoded_len();
    // The request id carries the padding; its length prefix grows with it.
    let mut pad = size.saturating_sub(base + 3);
    event.request_id = "x".repeat(pad);
    while event.encoded_len() > size && pad > 0 {
        pad -= 1;
        event.request_id = "x".repeat(pad);
    }
    while event.encoded_len() < size {
        pad += 1;
        event.request_id = "x".repeat(pad);
    }
    event
}

/// `writers` tasks each appending `event` to `partition` one at a time, waiting for each, for
/// `run`.
pub async fn append_loop(
    log: Arc<dyn CommitLog>,
    partition: &PartitionId,
    event: &Envelope,
    writers: usize,
    run: Duration,
) -> Figure {
    closed_loop(writers, run, |_| {
        let (log, partition, event) = (log.clone(), partition.clone(), event.clone());
        move || {
            let (log, partition, event) = (log.clone(), partition.clone(), event.clone());
            async move {
                log.append(&partition, vec![event]).await.unwrap();
            }
        }
    })
    .await
}

/// FileLog appends in a fresh log at `root` (removed afterwards).
pub async fn file_log(
    root: &std::path::Path,
    size: usize,
    writers: usize,
    run: Duration,
) -> Figure {
    let _ = std::fs::remove_dir_all(root);
    let log: Arc<dyn CommitLog> =
        Arc::new(strata_log::FileLog::open(root, strata_log::FileLogOptions::default()).unwrap());
    let partition = PartitionId::table("bench", "db", "t");
    let event = event_of_size(size);
    assert_eq!(event.encoded_len(), size);
    log.append(&partition, vec![event.clone()]).await.unwrap();
    let figure = append_loop(log, &partition, &event, writers, run).await;
    let _ = std::fs::remove_dir_all(root);
    figure
}

/// `writers` tasks each running the operation `make(writer)` gives, one at a time, for `run`.
pub async fn closed_loop<M, F, Fut>(writers: usize, run: Duration, make: M) -> Figure
where
    M: Fn(usize) -> F,
    F: Fn() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let tasks: Vec<_> = (0..writers)
        .map(|writer| {
            let (operation, stop) = (make(writer), stop.clone());
            tokio::spawn(async move {
                let mut latency = histogram();
                let mut records = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let t = Instant::now();
                    operation().await;
                    latency
                        .record((t.elapsed().as_micros() as u64).max(1))
                        .unwrap();
                    records += 1;
                }
                (records, latency)
            })
        })
        .collect();
    tokio::time::sleep(run).await;
    stop.store(true, Ordering::Relaxed);
    let mut latency = histogram();
    let mut records = 0;
    for task in tasks {
        let (n, h) = task.await.unwrap();
        records += n;
        latency.add(h).unwrap();
    }
    Figure {
        records,
        elapsed: started.elapsed(),
        latency,
    }
}

pub fn median(mut runs: Vec<Figure>) -> Figure {
    runs.sort_by(|a, b| a.per_second().total_cmp(&b.per_second()));
    let middle = runs.len() / 2;
    runs.swap_remove(middle)
}

pub fn median_of(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

pub fn row(label: &str, size: usize, writers: usize, figure: &Figure, ratio: Option<f64>) {
    let ratio = ratio.map_or("1.00 (baseline)".to_owned(), |r| format!("{r:.2}"));
    println!(
        "| {label} | {} | {writers} | {:.0} | {:.1} | {:.0} | {:.0} | {ratio} |",
        if size >= 1024 {
            format!("{} KiB", size / 1024)
        } else {
            format!("{size} B")
        },
        figure.per_second(),
        figure.mib_per_second(size),
        figure.p(0.5),
        figure.p(0.99),
    );
    std::io::stdout().flush().unwrap();
}
