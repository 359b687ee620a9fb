//! Clients our users use, against the real binary: tests/clients/*.py run with the Python of
//! the test venv (STRATA_TEST_PYTHON, set by scripts/test) against a live server.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::process::Command;

use common::{Server, account_with_key, root_user, self_signed, tls_flags};

fn python() -> String {
    std::env::var("STRATA_TEST_PYTHON").expect(
        "STRATA_TEST_PYTHON is not set: run the tests with scripts/test, which prepares a Python with pyarrow",
    )
}

#[test]
fn pyarrow_appends_and_reads_arrow_ipc() {
    let dir = tempfile::tempdir().unwrap();
    let key = account_with_key(dir.path(), "acme", None);
    let server = Server::start(dir.path(), &[]);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/clients/arrow_client.py");
    let output = Command::new(python())
        .arg(script)
        .env("STRATA_URL", &server.data_url)
        .env("STRATA_KEY", &key)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "the pyarrow client failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(String::from_utf8_lossy(&output.stdout).contains("pyarrow client: ok"));
}

/// Runs a platform client script against a live server with a root user; asserts that it says
/// `done`.
fn run_platform_client(script: &str, done: &str) {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let root = root_user(dir.path(), "acme");
    run_against(&server, &root, script, done, &[]);
}

fn run_against(
    server: &Server,
    root: &common::Credentials,
    script: &str,
    done: &str,
    env: &[(&str, &std::path::Path)],
) {
    let output = Command::new(python())
        .arg(script)
        .env("STRATA_PLATFORM_URL", &server.platform_url)
        .env("STRATA_ACCESS_KEY", &root.access_key)
        .env("STRATA_SECRET_KEY", &root.secret_key)
        .envs(env.iter().copied())
        // requests lets these override the certificate a client was given to trust.
        .env_remove("REQUESTS_CA_BUNDLE")
        .env_remove("CURL_CA_BUNDLE")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{script} failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(String::from_utf8_lossy(&output.stdout).contains(done));
}

#[test]
fn botocore_signs_platform_requests() {
    run_platform_client(
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests/clients/sigv4_client.py"),
        "sigv4 client: ok",
    );
}

#[test]
fn opensearch_py_ingests_searches_pages_counts_and_msearches() {
    run_platform_client(
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/clients/opensearch_client.py"
        ),
        "opensearch client: ok",
    );
}

#[test]
fn botocore_governs_users_and_roles_in_yaml() {
    run_platform_client(
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/clients/governance_client.py"
        ),
        "governance client: ok",
    );
}

#[test]
fn botocore_and_opensearch_py_work_over_https() {
    let dir = tempfile::tempdir().unwrap();
    let certs = tempfile::tempdir().unwrap();
    let (cert, key, _) = self_signed(certs.path(), "server");
    let flags = tls_flags(&cert, &key);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let server = Server::start(dir.path(), &flags);
    assert!(server.platform_url.starts_with("https://"));
    let root = root_user(dir.path(), "acme");
    let ca = [("STRATA_CA_FILE", cert.as_path())];
    for (script, done) in [
        ("sigv4_client.py", "sigv4 client: ok"),
        ("opensearch_client.py", "opensearch client: ok"),
    ] {
        let script = format!("{}/tests/clients/{script}", env!("CARGO_MANIFEST_DIR"));
        run_against(&server, &root, &script, done, &ca);
    }
}

/// The API description holds (issue 28, point 7): schemathesis generates requests for every
/// operation of docs/openapi.yaml and sends them to both listeners (the platform's signed by
/// botocore), checking each answer with `not_a_server_error` and
/// `response_schema_conformance` (tests/clients/schemathesis_run.py). A short, derandomized
/// run: `STRATA_TEST_SCHEMATHESIS_EXAMPLES` generated requests per operation (default 5); the
/// long run by hand is recorded in docs/compat.md.
#[test]
fn schemathesis_finds_the_server_as_its_description_says() {
    let dir = tempfile::tempdir().unwrap();
    let key = account_with_key(dir.path(), "acme", None);
    let root = root_user(dir.path(), "acme");
    let server = Server::start(dir.path(), &[]);
    let report = dir.path().join("schemathesis.json");
    let examples =
        std::env::var("STRATA_TEST_SCHEMATHESIS_EXAMPLES").unwrap_or_else(|_| "5".to_owned());
    let output = Command::new(python())
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/clients/schemathesis_run.py"
        ))
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/openapi.yaml"))
        .env("STRATA_DATA_URL", &server.data_url)
        .env("STRATA_DATA_KEY", &key)
        .env("STRATA_PLATFORM_URL", &server.platform_url)
        .env("STRATA_ACCESS_KEY", &root.access_key)
        .env("STRATA_SECRET_KEY", &root.secret_key)
        .env("STRATA_SCHEMATHESIS_EXAMPLES", &examples)
        .env("STRATA_SCHEMATHESIS_REPORT", &report)
        .output()
        .unwrap();
    let said = format!(
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.status.success(),
        "schemathesis found failures:\n{said}"
    );
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    let totals = &report["totals"];
    // Every operation the description lists was run, and none left out.
    assert_eq!(
        totals["operations_run"], totals["operations_described"],
        "{said}"
    );
    assert!(
        totals["operations_described"].as_u64().unwrap() > 150,
        "{said}"
    );
    assert_eq!(totals["operations_left_out"], 0, "{said}");
    assert_eq!(totals["failures"], 0, "{said}");
    // Requests reached real data, not only 404s.
    assert!(
        totals["operations_with_2xx"].as_u64().unwrap() > 60,
        "{said}"
    );
}
