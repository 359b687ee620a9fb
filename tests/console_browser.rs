//! The console in a real browser: tests/console/e2e.mjs, run by Node.js against a server this
//! test starts, drives Debian's Chromium with playwright-core (both installed by scripts/test:
//! `STRATA_TEST_NODE_MODULES`). Screenshots of each page go to the target directory's
//! `tmp/console/`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Arc;

use axum::{Json, Router, extract::State, routing::post};
use common::{Server, Signed, root_user, user, yaml};
use serde_json::{Value, json};

/// A webhook on loopback, for the monitor's channel: the bodies it was sent.
async fn webhook() -> (String, Arc<parking_lot::Mutex<Vec<Value>>>) {
    let received = Arc::new(parking_lot::Mutex::new(Vec::new()));
    async fn hook(
        State(received): State<Arc<parking_lot::Mutex<Vec<Value>>>>,
        Json(body): Json<Value>,
    ) -> &'static str {
        received.lock().push(body);
        "ok"
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let app = Router::new()
        .route("/hook", post(hook))
        .with_state(received.clone());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, received)
}

/// A role that reads `logs` without its `secret` field.
const READER: &str = r#"
Version: 2025-01-01
Permissions:
  - ResourceType: record
    Actions: [read]
    Resources: ["logs"]
    Fields:
      Deny: ["secret"]
  - ResourceType: record
    Actions: [read]
    Resources: ["telemetry"]
  - ResourceType: metadata
    Actions: [read]
    Resources: ["logs", "telemetry"]
"#;

#[tokio::test]
async fn the_console_works_in_a_browser() {
    let modules = std::env::var("STRATA_TEST_NODE_MODULES").expect(
        "STRATA_TEST_NODE_MODULES: run the tests with scripts/test, which installs Chromium, \
         playwright-core and axe-core",
    );
    let pg = common::PgDatabase::new(
        "console",
        "CREATE TABLE items (name text, weight double precision); \
         INSERT INTO items VALUES ('nut', 1), ('bolt', 2.5);",
    );
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let root = Signed::new(&server, &root_user(dir.path(), "acme"));
    let mut lines = Vec::new();
    for (i, host) in ["a", "a", "b"].iter().enumerate() {
        lines.push(json!({"index": {"_index": "logs", "_id": i.to_string()}}));
        lines.push(json!({"host": host, "secret": "s", "@timestamp": "2026-11-01T10:00:00Z"}));
    }
    let written = root.send_ndjson("POST", "/_bulk", &lines).await;
    assert_eq!(written.body["errors"], false, "{written:?}");
    // Two series sampled every minute of the last half hour.
    let now = chrono::Utc::now().timestamp_millis();
    let mut text = String::new();
    for minute in 0..30 {
        let at = now - minute * 60_000;
        for (job, rate) in [("api", 2), ("web", 5)] {
            let value = (30 - minute) * 60 * rate;
            text.push_str(&format!(
                "http_requests_total{{job=\"{job}\"}} {value} {at}\n"
            ));
        }
    }
    let samples = root
        .send_text("POST", "/telemetry/metrics", "text/plain", &text)
        .await;
    assert_eq!(samples.status, 200, "{samples:?}");
    assert_eq!(yaml(&root, "PUT", "/role/reader", READER).await.status, 200);
    user(&root, &server, "ann", &["reader"]).await;
    let root_password = yaml(
        &root,
        "PATCH",
        "/user/root",
        "Version: 2025-01-01\nPassword: root-horse-battery\n",
    )
    .await;
    assert_eq!(root_password.status, 200, "{root_password:?}");
    let (hook, received) = webhook().await;
    let channel = root
        .send_json(
            "POST",
            "/alert",
            Some(&json!({"channel_id": "ops", "config": {
                "name": "ops", "channel_type": "webhook", "webhook": {"url": hook},
            }})),
        )
        .await;
    assert_eq!(channel.status, 200, "{channel:?}");

    let shots = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("console");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/console/e2e.mjs");
    let out = tokio::process::Command::new("node")
        .arg(script)
        .env("STRATA_URL", &server.platform_url)
        .env("STRATA_USER", "ann")
        .env("STRATA_PASSWORD", "correct-horse-battery")
        .env("STRATA_ROOT_PASSWORD", "root-horse-battery")
        .env("STRATA_PG_DATABASE", &pg.name)
        .env("STRATA_SHOTS", &shots)
        .env("STRATA_TEST_NODE_MODULES", modules)
        .output()
        .await
        .expect("node runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    assert!(
        out.status.success(),
        "the browser test failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for check in [
        "signed in",
        "datasets listed",
        "keyboard",
        "sql rows",
        "sort",
        "export",
        "time range",
        "promql line chart",
        "chat answer",
        "signed out",
    ] {
        assert_eq!(
            stdout.matches(&format!("\"check\":\"{check}\"")).count(),
            2,
            "{check} in both windows and themes:\n{stdout}"
        );
    }
    for check in [
        "upload",
        "dataset deleted",
        "channels",
        "monitor executed",
        "monitor edited",
        "connection queried",
        "import",
        "govern",
        "masked field",
    ] {
        assert!(
            stdout.contains(&format!("\"check\":\"{check}\"")),
            "{check}:\n{stdout}"
        );
    }
    assert!(shots.join("govern-light.png").exists());
    // The monitor's real execution alerted its channel once, with the subject it previewed.
    common::eventually(10, || async { !received.lock().is_empty() }).await;
    let sent = received.lock().clone();
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0]["subject"], "hosts a: 2 records", "{sent:?}");
    for page in ["sign-in", "datasets", "query-sql", "query-promql", "chat"] {
        for theme in ["light", "dark"] {
            let shot = shots.join(format!("{page}-{theme}.png"));
            assert!(shot.exists(), "{}", shot.display());
        }
    }
}
