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
