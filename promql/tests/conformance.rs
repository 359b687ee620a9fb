//! Runs Prometheus' PromQL conformance scripts (`promql/promqltest/testdata/*.test`, copied to
//! `../shared/conformance/promql`) against strata's evaluator, with the settings of
//! Prometheus' test engine (5m lookback, 10,000 samples per query, 1m subquery step, delayed
//! name removal).
//!
//! It prints `passed/total` per file and overall and one line per failing eval, and asserts
//! that at least [`PASSING`] evals pass (a ratchet to raise as the evaluator improves).
//!
//! - `STRATA_PROMQL_TESTS=<dir>`: where the scripts are (default: relative to the manifest);
//! - `STRATA_PROMQL_ONLY=<substring>`: only evals whose file name or expression contains it;
//! - `STRATA_PROMQL_VERBOSE=1`: also print expected and actual results of failures.

#[path = "promql/compare.rs"]
mod compare;
#[path = "promql/script.rs"]
mod script;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use script::{Command, Eval, Load};
use strata_promql::engine::{self, EngineOptions, QueryError, QueryOutput};
use strata_promql::histogram::ClassicHistogram;
use strata_promql::parser::SeriesItem;
use strata_promql::storage::MemStorage;
use strata_promql::value::{Labels, stale_nan};

/// The number of evals known to pass; the run fails below it.
const PASSING: usize = 2134;

fn tests_dir() -> PathBuf {
    match std::env::var("STRATA_PROMQL_TESTS") {
        Ok(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/conformance/promql"),
    }
}

fn options() -> EngineOptions {
    EngineOptions {
        lookback_ms: 300_000,
        max_samples: 10_000,
        subquery_step_ms: 60_000,
        deadline: Some(Instant::now() + Duration::from_secs(100)),
        delayed_name_removal: true,
    }
}

/// Adds a `load` block to the store.
fn load(store: &mut MemStorage, l: &Load) -> Result<(), String> {
    for (labels, items) in &l.series {
        for (i, item) in items.iter().enumerate() {
            let t = i as i64 * l.step_ms;
            match item {
                SeriesItem::Omitted => {}
                SeriesItem::Float(f) => store.add_float(labels, t, *f),
                SeriesItem::Stale => store.add_float(labels, t, stale_nan()),
                SeriesItem::Histogram(h) => store.add_histogram(labels, t, script::to_histogram(h)),
            }
        }
    }
    if l.with_nhcb {
        load_nhcb(store, l)?;
    }
    Ok(())
}

/// `load_with_nhcb`: classic histogram families also stored as custom-bucket histograms.
fn load_nhcb(store: &mut MemStorage, l: &Load) -> Result<(), String> {
    let mut families: BTreeMap<Labels, BTreeMap<i64, ClassicHistogram>> = BTreeMap::new();
    for (labels, items) in &l.series {
        let name = labels.name().unwrap_or("");
        let (base, kind) = if let Some(b) = name.strip_suffix("_bucket") {
            (b, 0)
        } else if let Some(b) = name.strip_suffix("_count") {
            (b, 1)
        } else if let Some(b) = name.strip_suffix("_sum") {
            (b, 2)
        } else {
            continue;
        };
        let le = match kind {
            0 => match labels.get("le").and_then(|v| v.parse::<f64>().ok()) {
                Some(le) if !le.is_nan() => le,
                _ => continue,
            },
            _ => 0.0,
        };
        let mut key = labels.filter(|n| n != "le");
        key.set("__name__", base);
        let family = families.entry(key).or_default();
        for (i, item) in items.iter().enumerate() {
            let SeriesItem::Float(f) = item else { continue };
            let h = family.entry(i as i64 * l.step_ms).or_default();
            match kind {
                0 => h.set_bucket_count(le, *f),
                1 => h.set_count(*f),
                _ => h.set_sum(*f),
            }
        }
    }
    for (labels, by_time) in families {
        for (t, h) in by_time {
            let fh = h
                .convert()
                .map_err(|e| format!("load_with_nhcb {labels}: {e}"))?;
            store.add_histogram(&labels, t, std::sync::Arc::new(fh));
        }
    }
    Ok(())
}

fn run_query(store: &MemStorage, ev: &Eval) -> Result<QueryOutput, QueryError> {
    let opts = options();
    match ev.range {
        Some((start, end, step)) => engine::range_query(store, &ev.expr, start, end, step, &opts),
        None => {
            let at = ev.range_vector.map_or(ev.at, |(_, end, _)| end);
            engine::instant_query(store, &ev.expr, at, &opts)
        }
    }
}

/// Runs one eval; `Err` says why it failed.
fn check(store: &MemStorage, ev: &Eval, verbose: bool) -> Result<(), String> {
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run_query(store, ev)))
        .map_err(|_| "evaluator panicked".to_string())?;
    let out = match result {
        Err(e) => {
            if !ev.fail {
                return Err(format!("error: {e}"));
            }
            return match &ev.fail_matcher {
                Some(m) if !m.matches(&e.to_string()) => Err(format!("wrong error: {e}")),
                _ => Ok(()),
            };
        }
        Ok(out) => out,
    };
    if ev.fail {
        return Err("expected an error but got none".to_string());
    }
    let outcome =
        compare::check_annotations(ev, &out).and_then(|()| compare::compare(ev, &out.value));
    if outcome.is_err() && verbose {
        println!(
            "    expected: {:?}",
            ev.expected
                .iter()
                .map(|(l, v, _)| (l.to_string(), v))
                .collect::<Vec<_>>()
        );
        println!("    scalar: {:?} string: {:?}", ev.scalar, ev.expect_string);
        println!("    actual: {:?}", out.value);
        println!("    warnings: {:?} infos: {:?}", out.warnings, out.infos);
    }
    outcome
}

#[test]
fn promql_conformance() {
    let dir = tests_dir();
    let only = std::env::var("STRATA_PROMQL_ONLY").unwrap_or_default();
    let verbose = std::env::var("STRATA_PROMQL_VERBOSE").is_ok_and(|v| v == "1");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "test"))
        .collect();
    files.sort();
    let (mut passed, mut total) = (0, 0);
    for path in &files {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default();
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let cmds = match script::parse_script(&text) {
            Ok(c) => c,
            Err(e) => {
                println!("{name}: cannot parse: {e}");
                continue;
            }
        };
        let mut store = MemStorage::new();
        let (mut fp, mut ft) = (0, 0);
        for cmd in &cmds {
            match cmd {
                Command::Clear => store.clear(),
                Command::Load(l) => {
                    if let Err(e) = load(&mut store, l) {
                        println!("{name}: load failed: {e}");
                    }
                }
                Command::Eval(ev) => {
                    if !only.is_empty() && !name.contains(&only) && !ev.expr.contains(&only) {
                        continue;
                    }
                    ft += 1;
                    match check(&store, ev, verbose) {
                        Ok(()) => fp += 1,
                        Err(why) => println!("FAIL {name}:{}: {} — {why}", ev.line, ev.expr),
                    }
                }
            }
        }
        println!("{name}: {fp}/{ft}");
        passed += fp;
        total += ft;
    }
    println!("overall: {passed}/{total}");
    // The summary reaches CI's log even though the test harness captures `println!`.
    let _ = writeln!(
        std::io::stderr(),
        "promql conformance: {passed}/{total} evals pass (at least {PASSING} expected)"
    );
    assert!(
        passed >= PASSING,
        "only {passed} evals passed, expected at least {PASSING}"
    );
}
