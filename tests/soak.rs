//! The soak's short form (issue 28; the long one is benches/soak.rs, run by hand): a few
//! clients drive the real server with the mixed load of benches/mixed_load.rs for a short
//! while. Every kind of request must be answered, never with a 5xx, and never refused as bad
//! (the load only sends valid requests); transient refusals (409/429/503) are allowed.
//! `STRATA_TEST_SOAK_SECS` sets the time (default 20).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
// The long run's p99 drift is not measured in a run of one window.
#[allow(dead_code)]
#[path = "../benches/mixed_load.rs"]
mod mixed_load;

use std::time::Duration;

use common::{Server, account_with_key, root_user};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_mixed_load_is_answered_without_server_errors() {
    let seconds: u64 = std::env::var("STRATA_TEST_SOAK_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let root = root_user(dir.path(), "acme");
    let key = account_with_key(dir.path(), "acme", None);
    let target = mixed_load::Target {
        data_url: server.data_url.clone(),
        key,
        platform_url: server.platform_url.clone(),
        access_key: root.access_key.clone(),
        secret_key: root.secret_key.clone(),
        pid: server.pid(),
    };
    mixed_load::prepare(&target).await;
    let report = mixed_load::run(&target, 4, Duration::from_secs(seconds), seconds).await;
    println!(
        "{}\nresident memory over the run: {:+.1}%",
        report.markdown(),
        report.rss_growth(seconds) * 100.0
    );
    assert_eq!(report.server_errors(), 0, "{:#?}", report.examples());
    assert_eq!(report.errors(), 0, "{:#?}", report.examples());
    for (op, stats) in &report.ops {
        assert!(stats.ok > 0, "no {} succeeded: {stats:?}", op.name());
    }
    assert!(
        report
            .samples
            .iter()
            .all(|s| s.rss_bytes > 0 && s.open_files > 0)
    );
}
