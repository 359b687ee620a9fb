//! Search benchmarks, each next to a baseline in the same run. Rows and queries come from a
//! seeded generator of English-like text and embedding-like vectors (benches/corpus.rs).
//!
//! `cargo bench -p strata --bench search -- bm25 [--rows 1000000] [--queries 1000]`
//!   bm25_search top-10 latency (p50, p99) through a release `strata serve`, against a raw
//!   tantivy search of the same segment indexes (the files the server wrote), in this process.
//!
//! `cargo bench -p strata --bench search -- hybrid [--rows 1000000] [--queries 200] [--ef-search 128,256]`
//!   hybrid_search top-10 latency with 384-dimension vectors, against raw tantivy plus raw
//!   hnsw_rs searches of the same segment indexes; and recall@10 of the vector index (a
//!   hybrid search weighted to the vector side) against exact search over every vector; for
//!   each ef_search, with the server restarted on the same data.
//!
//! `cargo bench -p strata --bench search -- append [--rows 100000]`
//!   Append throughput with two full-text columns and a 384-dimension vector column, against
//!   writing the same rows to a Parquet file, a tantivy index and an hnsw_rs graph directly
//!   (with the server's settings), each synced.
//!
//! Each prints a markdown table for docs/benchmarks.md.

// A benchmark program: failing loudly is its error handling, and `Server`'s Drop kills and
// waits for the server it spawns.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::zombie_processes
)]

mod corpus;
#[allow(dead_code)]
mod generator;
#[allow(dead_code)]
mod server;

use std::{
    collections::HashSet,
    io::Write,
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use arrow::array::{Array, AsArray, RecordBatch};
use clap::{Parser, Subcommand};
use corpus::{Corpus, DIM};
use hnsw_rs::prelude::{AnnT, Hnsw, HnswIo};
use serde_json::{Value, json};
use server::Server;
use strata_projections::table::{
    text,
    vector::{CosineDistance, VectorOptions},
};
use tantivy::{
    Index, Searcher, Term,
    collector::TopDocs,
    query::{BooleanQuery, Occur, Query, TermQuery},
    schema::{FAST, INDEXED, IndexRecordOption, Schema, TextFieldIndexing, TextOptions},
};

#[derive(Parser)]
struct Args {
    #[command(subcommand)]
    bench: Bench,
    /// Where the server's data and the baseline's files go (default: under /var/tmp).
    #[arg(long, global = true)]
    dir: Option<PathBuf>,
    /// Search the data an earlier run of the same bench with the same `--dir` and `--rows`
    /// loaded, if it finished loading, rather than load it again (the corpus is seeded).
    #[arg(long, global = true)]
    reuse: bool,
    /// Ignored: cargo bench passes it.
    #[arg(long, hide = true, global = true)]
    bench_flag: bool,
}

#[derive(Subcommand)]
enum Bench {
    Bm25 {
        #[arg(long, default_value_t = 1_000_000)]
        rows: usize,
        #[arg(long, default_value_t = 1000)]
        queries: usize,
    },
    Hybrid {
        #[arg(long, default_value_t = 1_000_000)]
        rows: usize,
        #[arg(long, default_value_t = 200)]
        queries: usize,
        /// hnsw ef_search values to measure (by default the server's default), each with the
        /// server restarted on the same data (tables.hnsw_ef_search) and the raw baseline
        /// searching with the same value.
        #[arg(long, value_delimiter = ',', default_value = "256")]
        ef_search: Vec<usize>,
    },
    Append {
        #[arg(long, default_value_t = 100_000)]
        rows: usize,
    },
}

const LOAD_BATCH: usize = 10_000;
const WARM_UP: usize = 20;

fn main() {
    let args = Args::parse_from(std::env::args().filter(|a| a != "--bench"));
    let scratch = args.dir.clone().unwrap_or_else(|| {
        PathBuf::from("/var/tmp").join(format!("strata-bench-{}", std::process::id()))
    });
    std::fs::create_dir_all(&scratch).unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    match args.bench {
        Bench::Bm25 { rows, queries } => {
            runtime.block_on(bm25(&scratch, rows, queries, args.reuse))
        }
        Bench::Hybrid {
            rows,
            queries,
            ef_search,
        } => runtime.block_on(hybrid(&scratch, rows, queries, &ef_search, args.reuse)),
        Bench::Append { rows } => runtime.block_on(append(&scratch, rows)),
    }
    if args.dir.is_none() {
        let _ = std::fs::remove_dir_all(&scratch);
    }
}

/// The corpus' batches, without the vector column when `vectors` is false.
fn batches(corpus: &Corpus, rows: usize, vectors: bool) -> impl Iterator<Item = RecordBatch> {
    (0..rows.div_ceil(LOAD_BATCH)).map(move |i| {
        let batch = corpus.batch(i, LOAD_BATCH.min(rows - i * LOAD_BATCH));
        if vectors {
            batch
        } else {
            batch.project(&[0, 1, 2]).unwrap()
        }
    })
}

/// A server holding `rows` rows of the corpus in table `docs` of database `bench`, settled into
/// segments with their indexes; returns it with the table's segment index directories.
async fn loaded_server(
    dir: &Path,
    corpus: &Corpus,
    rows: usize,
    vectors: bool,
    reuse: bool,
) -> (Server, reqwest::Client, Vec<PathBuf>) {
    let settings = ["--set", "tables.flush_age_ms=500"];
    let http = reqwest::Client::new();
    // Written once the load has settled, and named after what was loaded: only a finished
    // load of the same rows is reused.
    let kind = if vectors { "hybrid" } else { "text" };
    let loaded = dir.join(format!("bench-{kind}-{rows}.key"));
    if reuse && let Ok(key) = std::fs::read_to_string(&loaded) {
        let server = Server::resume(dir, key, &settings);
        eprintln!("reusing the {rows} rows loaded in {}", dir.display());
        return (server, http, segment_index_dirs(&dir.join("indexes")));
    }
    let server = Server::start(dir, &settings);
    server
        .post(&http, "/v1/databases", &json!({"name": "bench"}))
        .await;
    let mut request = Corpus::table_request("docs");
    if !vectors {
        let object = request.as_object_mut().unwrap();
        object.remove("vector_column");
        object.remove("vector_metric");
        object["schema"].as_array_mut().unwrap().pop();
    }
    server.post(&http, "/v1/create_table/bench", &request).await;
    let started = Instant::now();
    for batch in batches(corpus, rows, vectors) {
        server
            .append_ipc(&http, "docs", generator::ipc(&batch))
            .await;
    }
    let acknowledged = started.elapsed();
    server::settle(&dir.join("tables"), rows).await;
    eprintln!(
        "loaded {rows} rows: acknowledged in {:.1}s, in segments with their indexes in {:.1}s",
        acknowledged.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
    std::fs::write(&loaded, &server.key).unwrap();
    let indexes = segment_index_dirs(&dir.join("indexes"));
    (server, http, indexes)
}

/// The per-segment index directories (named by a 12-digit sequence number) under `dir`.
fn segment_index_dirs(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().to_string();
            if !path.is_dir() {
                continue;
            }
            if name.len() == 12 && name.chars().all(|c| c.is_ascii_digit()) {
                out.push(path);
            } else {
                stack.push(path);
            }
        }
    }
    out.sort();
    out
}

/// Raw tantivy over the server's segment indexes: top `k` per segment by BM25 over both text
/// fields, merged by score.
struct RawText {
    searchers: Vec<Searcher>,
    fields: Vec<tantivy::schema::Field>,
    analyzer: tantivy::tokenizer::TextAnalyzer,
}

impl RawText {
    fn open(segments: &[PathBuf]) -> RawText {
        let searchers: Vec<Searcher> = segments
            .iter()
            .map(|s| {
                let index = Index::open_in_dir(s.join("text")).unwrap();
                index.reader().unwrap().searcher()
            })
            .collect();
        let schema = searchers[0].schema();
        let fields = ["text.title", "text.body"]
            .iter()
            .map(|f| schema.get_field(f).unwrap())
            .collect();
        RawText {
            searchers,
            fields,
            analyzer: text::analyzer(),
        }
    }

    fn search(&mut self, query: &str, k: usize) -> Vec<f32> {
        let terms = text::tokens(&mut self.analyzer, query);
        let query = BooleanQuery::new(
            self.fields
                .iter()
                .flat_map(|f| terms.iter().map(|t| Term::from_field_text(*f, t)))
                .map(|t| {
                    let q: Box<dyn Query> =
                        Box::new(TermQuery::new(t, IndexRecordOption::WithFreqs));
                    (Occur::Should, q)
                })
                .collect(),
        );
        let mut scores: Vec<f32> = Vec::new();
        for searcher in &self.searchers {
            let top = searcher
                .search(&query, &TopDocs::with_limit(k).order_by_score())
                .unwrap();
            scores.extend(top.into_iter().map(|(score, _)| score));
        }
        scores.sort_by(|a, b| b.total_cmp(a));
        scores.truncate(k);
        scores
    }
}

fn percentile(times: &mut [Duration], p: f64) -> f64 {
    times.sort();
    let i = ((times.len() as f64 - 1.0) * p).round() as usize;
    times[i].as_secs_f64() * 1e3
}

/// POSTs a search and returns its rows (JSON answer).
async fn search(server: &Server, http: &reqwest::Client, path: &str, body: &Value) -> Vec<Value> {
    let answer = server.post(http, path, body).await;
    answer["data"].as_array().cloned().unwrap_or_default()
}

async fn bm25(scratch: &Path, rows: usize, queries: usize, reuse: bool) {
    let corpus = Corpus::new(11);
    let (server, http, segments) =
        loaded_server(&scratch.join("server"), &corpus, rows, false, reuse).await;
    let mut raw = RawText::open(&segments);
    eprintln!("{} segments", segments.len());
    let (mut baseline, mut strata, mut ids_only) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..queries + WARM_UP {
        let (query, _) = corpus.query(i);
        let started = Instant::now();
        let top = raw.search(&query, 10);
        let b = started.elapsed();
        let body = json!({"table": "docs", "query": query, "limit": 10});
        let started = Instant::now();
        let found = search(&server, &http, "/v1/bm25_search/bench", &body).await;
        let s = started.elapsed();
        assert_eq!(
            found.len(),
            top.len(),
            "{query}: both sides find as many rows"
        );
        let body = json!({"table": "docs", "query": query, "limit": 10, "columns": ["id"]});
        let started = Instant::now();
        search(&server, &http, "/v1/bm25_search/bench", &body).await;
        let s_ids = started.elapsed();
        if i >= WARM_UP {
            baseline.push(b);
            strata.push(s);
            ids_only.push(s_ids);
        }
    }
    let (b50, b99) = (
        percentile(&mut baseline, 0.5),
        percentile(&mut baseline, 0.99),
    );
    println!("| what | rows | queries | p50 ms | p99 ms | p50 ratio to baseline | added p50 ms |");
    println!("|---|---|---|---|---|---|---|");
    println!(
        "| raw tantivy top-10 over the same segment indexes, in process | {rows} | {queries} | {b50:.2} | {b99:.2} | 1.00 (baseline) | |"
    );
    for (what, times) in [
        (
            "strata bm25_search top-10, every column (HTTP, JSON rows)",
            &mut strata,
        ),
        (
            "strata bm25_search top-10, column id only (HTTP, JSON rows)",
            &mut ids_only,
        ),
    ] {
        let (s50, s99) = (percentile(times, 0.5), percentile(times, 0.99));
        println!(
            "| {what} | {rows} | {queries} | {s50:.2} | {s99:.2} | {:.2} | {:.2} |",
            s50 / b50,
            s50 - b50
        );
    }
}

/// Raw hnsw_rs over the server's segment graphs.
struct RawVectors {
    graphs: Vec<Hnsw<'static, f32, CosineDistance>>,
}

impl RawVectors {
    fn open(segments: &[PathBuf]) -> RawVectors {
        let graphs = segments
            .iter()
            .map(|s| {
                let loader: &'static mut HnswIo =
                    Box::leak(Box::new(HnswIo::new(&s.join("vectors"), "hnsw")));
                loader.load_hnsw::<f32, CosineDistance>().unwrap()
            })
            .collect();
        RawVectors { graphs }
    }

    fn search(&self, query: &[f32], k: usize, ef: usize) -> usize {
        self.graphs
            .iter()
            .map(|g| g.search(query, k, ef.max(k)).len())
            .sum()
    }

    /// The row ids of the `k` nearest over every graph (each searched for `k`), nearest first.
    fn top(&self, query: &[f32], k: usize, ef: usize) -> Vec<usize> {
        let mut found: Vec<(f32, usize)> = self
            .graphs
            .iter()
            .flat_map(|g| g.search(query, k, ef.max(k)))
            .map(|n| (n.distance, n.d_id))
            .collect();
        found.sort_by(|a, b| a.0.total_cmp(&b.0));
        found.into_iter().take(k).map(|(_, id)| id).collect()
    }
}

/// Row positions of the `k` vectors nearest to `query` by cosine (the vectors are unit length,
/// so by the largest dot product).
fn exact_top(vectors: &[f32], query: &[f32], k: usize) -> Vec<usize> {
    let mut scored: Vec<(f32, usize)> = vectors
        .chunks_exact(DIM)
        .enumerate()
        .map(|(i, v)| {
            let mut acc = [0f32; 8];
            for (a, b) in v.chunks_exact(8).zip(query.chunks_exact(8)) {
                for j in 0..8 {
                    acc[j] += a[j] * b[j];
                }
            }
            (acc.iter().sum(), i)
        })
        .collect();
    let k = k.min(scored.len());
    scored.select_nth_unstable_by(k.saturating_sub(1), |a, b| b.0.total_cmp(&a.0));
    scored.truncate(k);
    scored.into_iter().map(|(_, i)| i).collect()
}

async fn hybrid(scratch: &Path, rows: usize, queries: usize, ef_search: &[usize], reuse: bool) {
    let corpus = Corpus::new(13);
    let dir = scratch.join("server");
    let (server, http, segments) = loaded_server(&dir, &corpus, rows, true, reuse).await;
    eprintln!("{} segments", segments.len());
    let mut raw_text = RawText::open(&segments);
    let raw_vectors = RawVectors::open(&segments);
    let candidates = 100;
    // Recall@10 of the vector index: the vector side alone, against every vector.
    let vectors: Vec<f32> = batches(&corpus, rows, true)
        .flat_map(|b| {
            let list = b.column(3).as_fixed_size_list().clone();
            let values = list
                .values()
                .as_primitive::<arrow::datatypes::Float32Type>();
            values.values().to_vec()
        })
        .collect();
    let recall_queries = queries.min(100);
    let exact: Vec<Vec<usize>> = (0..recall_queries)
        .map(|i| exact_top(&vectors, &corpus.query(i).1, 10))
        .collect();
    drop(vectors);
    println!(
        "| what | ef_search | rows | queries | p50 ms | p99 ms | p50 ratio to baseline | recall@10 |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let key = server.key.clone();
    let mut server = Some(server);
    for &ef in ef_search {
        // The server reads ef_search at start: restart it on the same data for each value.
        drop(server.take());
        let current = Server::resume(
            &dir,
            key.clone(),
            &["--set", &format!("tables.hnsw_ef_search={ef}")],
        );
        let (mut baseline, mut strata) = (Vec::new(), Vec::new());
        for i in 0..queries + WARM_UP {
            let (query, vector) = corpus.query(i);
            let started = Instant::now();
            raw_text.search(&query, candidates);
            raw_vectors.search(&vector, candidates, ef);
            let b = started.elapsed();
            let body = json!({"table": "docs", "query": query, "vector": vector, "limit": 10,
                              "columns": ["id"]});
            let started = Instant::now();
            let found = if i == 0 {
                // The first search activates the database and loads the table: wait for it.
                first_search(&current, &http, &body).await
            } else {
                search(&current, &http, "/v1/hybrid_search/bench", &body).await
            };
            let s = started.elapsed();
            assert_eq!(found.len(), 10);
            if i >= WARM_UP {
                baseline.push(b);
                strata.push(s);
            }
        }
        let (mut hits, mut raw_hits) = (0, 0);
        for (i, exact) in exact.iter().enumerate() {
            let (query, vector) = corpus.query(i);
            let body = json!({"table": "docs", "query": query, "vector": vector, "limit": 10,
                              "weights": {"bm25": 0.0, "vector": 1.0}, "columns": ["id"]});
            let found: HashSet<i64> = search(&current, &http, "/v1/hybrid_search/bench", &body)
                .await
                .iter()
                .map(|r| r["id"].as_i64().unwrap())
                .collect();
            hits += exact
                .iter()
                .filter(|i| found.contains(&(**i as i64)))
                .count();
            // The same graphs searched directly: tells the graphs' recall from strata's merge.
            let raw: HashSet<usize> = raw_vectors.top(&vector, 10, ef).into_iter().collect();
            raw_hits += exact.iter().filter(|i| raw.contains(*i)).count();
        }
        let recall = hits as f64 / (recall_queries * 10) as f64;
        let raw_recall = raw_hits as f64 / (recall_queries * 10) as f64;
        let (b50, b99) = (
            percentile(&mut baseline, 0.5),
            percentile(&mut baseline, 0.99),
        );
        let (s50, s99) = (percentile(&mut strata, 0.5), percentile(&mut strata, 0.99));
        println!(
            "| raw tantivy top-{candidates} + raw hnsw_rs top-{candidates} over the same segment indexes, in process | {ef} | {rows} | {queries} | {b50:.2} | {b99:.2} | 1.00 (baseline) | raw hnsw_rs top-10: {raw_recall:.3} |"
        );
        println!(
            "| strata hybrid_search top-10 ({candidates} candidates a side, HTTP, JSON rows) | {ef} | {rows} | {queries} | {s50:.2} | {s99:.2} | {:.2} | {recall:.3} ({recall_queries} queries) |",
            s50 / b50
        );
        server = Some(current);
    }
}

/// A search right after a start: retried while the database activates (503).
async fn first_search(server: &Server, http: &reqwest::Client, body: &Value) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let response = http
            .post(format!("{}/v1/hybrid_search/bench", server.url))
            .bearer_auth(&server.key)
            .header("accept", "application/json")
            .json(body)
            .send()
            .await
            .unwrap();
        if response.status().is_success() {
            let answer: Value = response.json().await.unwrap();
            return answer["data"].as_array().cloned().unwrap_or_default();
        }
        assert!(Instant::now() < deadline, "the table did not load");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The baseline of `append`: the rows to one Parquet file, one tantivy index of the two text
/// columns and one hnsw_rs graph of the vectors, with the server's settings, each synced.
fn write_directly(dir: &Path, batches: &[RecordBatch]) {
    let all = arrow::compute::concat_batches(&batches[0].schema(), batches).unwrap();
    let parquet = generator::parquet(&all);
    let mut file = std::fs::File::create(dir.join("rows.parquet")).unwrap();
    file.write_all(&parquet).unwrap();
    file.sync_all().unwrap();

    let mut builder = Schema::builder();
    let id = builder.add_u64_field("_row_id", FAST | INDEXED);
    let options = TextOptions::default().set_indexing_options(
        TextFieldIndexing::default()
            .set_tokenizer("default")
            .set_index_option(IndexRecordOption::WithFreqs),
    );
    let title = builder.add_text_field("text.title", options.clone());
    let body = builder.add_text_field("text.body", options);
    let text_dir = dir.join("text");
    std::fs::create_dir_all(&text_dir).unwrap();
    let index = Index::create_in_dir(&text_dir, builder.build()).unwrap();
    index.tokenizers().register("default", text::analyzer());
    let mut writer: tantivy::IndexWriter = index.writer_with_num_threads(1, 64 << 20).unwrap();
    let (titles, bodies) = (
        all.column(1).as_string::<i32>(),
        all.column(2).as_string::<i32>(),
    );
    for row in 0..all.num_rows() {
        let mut doc = tantivy::TantivyDocument::new();
        doc.add_u64(id, row as u64);
        if titles.is_valid(row) {
            doc.add_text(title, titles.value(row));
        }
        if bodies.is_valid(row) {
            doc.add_text(body, bodies.value(row));
        }
        writer.add_document(doc).unwrap();
    }
    writer.commit().unwrap();
    writer.wait_merging_threads().unwrap();

    let vectors = all.column(3).as_fixed_size_list();
    let values = vectors
        .values()
        .as_primitive::<arrow::datatypes::Float32Type>()
        .values();
    let points: Vec<(&[f32], usize)> = values.chunks_exact(DIM).zip(0..).collect();
    // The server's graph settings, so that both sides build the same graph.
    let settings = VectorOptions::default();
    let graph = Hnsw::new(
        settings.max_connections,
        points.len(),
        16,
        settings.ef_construction,
        CosineDistance,
    );
    graph.parallel_insert_slice(&points);
    let graph_dir = dir.join("vectors");
    std::fs::create_dir_all(&graph_dir).unwrap();
    graph.file_dump(&graph_dir, "hnsw").unwrap();
    for entry in std::fs::read_dir(&graph_dir).unwrap() {
        std::fs::File::open(entry.unwrap().path())
            .unwrap()
            .sync_all()
            .unwrap();
    }
}

async fn append(scratch: &Path, rows: usize) {
    let corpus = Corpus::new(17);
    let decoded: Vec<RecordBatch> = batches(&corpus, rows, true).collect();
    let ipc: Vec<Vec<u8>> = decoded.iter().map(generator::ipc).collect();

    let direct = scratch.join("direct");
    std::fs::create_dir_all(&direct).unwrap();
    let started = Instant::now();
    write_directly(&direct, &decoded);
    let baseline = started.elapsed();

    // strata: the rows become one segment (flushed when the last append arrives), so it does
    // the same indexing work as the baseline.
    let server_dir = scratch.join("server");
    let flush_rows = format!("tables.flush_rows={rows}");
    let server = Server::start(&server_dir, &["--set", &flush_rows]);
    let http = reqwest::Client::new();
    server
        .post(&http, "/v1/databases", &json!({"name": "bench"}))
        .await;
    server
        .post(
            &http,
            "/v1/create_table/bench",
            &Corpus::table_request("docs"),
        )
        .await;
    let times = server::timed_appends(
        &server,
        &http,
        "docs",
        ipc,
        &server_dir.join("tables"),
        rows,
    )
    .await;
    server::append_table(
        "Parquet + tantivy + hnsw_rs written directly, synced",
        "every row is in a segment with its indexes",
        rows,
        baseline,
        times,
    );
}
