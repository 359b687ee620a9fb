//! OpenSearch's YAML REST tests (../shared/conformance/opensearch-yaml, the files covering bulk,
//! search, aggregations, count, msearch and delete by query) against the real binary, run by
//! tests/clients/opensearch_yaml.py with the test venv's Python. It prints passed/total and every
//! failure; docs/compat.md lists them with their reasons. The test fails if fewer pass than
//! [`PASSING`], the count this code reached when it was last measured, so that a change that
//! breaks a passing test is seen.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::io::Write;
use std::process::Command;

use common::{Server, root_user};

/// How many of the suite's tests passed when last measured (docs/compat.md).
const PASSING: usize = 199;

#[test]
fn opensearch_yaml_rest_tests() {
    let python = std::env::var("STRATA_TEST_PYTHON")
        .expect("STRATA_TEST_PYTHON is not set: run the tests with scripts/test");
    let suite = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../shared/conformance/opensearch-yaml"
    );
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let root = root_user(dir.path(), "acme");
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/clients/opensearch_yaml.py"
    );
    // STRATA_YAML_RESULTS keeps the results (JSON) for docs/compat.md.
    let results = std::env::var("STRATA_YAML_RESULTS")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| dir.path().join("results.json"));
    let output = Command::new(python)
        .arg(script)
        .env("STRATA_PLATFORM_URL", &server.platform_url)
        .env("STRATA_ACCESS_KEY", &root.access_key)
        .env("STRATA_SECRET_KEY", &root.secret_key)
        .env("STRATA_YAML_DIR", suite)
        .env("STRATA_YAML_RESULTS", &results)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    println!("{stdout}");
    assert!(
        output.status.success(),
        "the runner failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let summary = stdout
        .lines()
        .find_map(|line| line.strip_prefix("opensearch yaml: "))
        .expect("a summary line");
    let passed: usize = summary.split('/').next().unwrap().parse().unwrap();
    // The summary reaches CI's log even though the test harness captures `println!`.
    let _ = writeln!(
        std::io::stderr(),
        "opensearch yaml: {summary} (at least {PASSING} expected)"
    );
    assert!(
        passed >= PASSING,
        "{passed} tests passed, fewer than the {PASSING} that passed before: {summary}"
    );
}
