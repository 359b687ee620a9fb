//! `strata-replay dump` over a real FileLog.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

use serde_json::Value;
use strata_log::{
    CommitLog, FileLog, FileLogOptions, PartitionId, conformance::event, envelope::Body,
    event::TableCreated,
};

fn dump(dir: &std::path::Path, args: &[&str]) -> (bool, Vec<Value>, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_strata-replay"))
        .arg("dump")
        .arg("--data-dir")
        .arg(dir)
        .args(args)
        .output()
        .unwrap();
    let lines = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    (
        output.status.success(),
        lines,
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[tokio::test]
async fn dump_prints_every_event_and_filters() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = PartitionId::catalog("acme", "shop");
    {
        let log = FileLog::open(dir.path().join("log"), FileLogOptions::default()).unwrap();
        let mut created = event("t1", 1);
        created.principal = "key:abc".into();
        created.body = Some(Body::TableCreated(TableCreated {
            name: "orders".into(),
            table_id: "t1".into(),
            ..Default::default()
        }));
        log.append(&PartitionId::control(), vec![event("a", 1), event("b", 1)])
            .await
            .unwrap();
        log.append(&catalog, vec![created]).await.unwrap();
    }
    let (ok, all, stderr) = dump(dir.path(), &[]);
    assert!(ok, "{stderr}");
    assert_eq!(all.len(), 3);
    let table = all.iter().find(|e| e["kind"] == "table_created").unwrap();
    assert_eq!(table["partition"], "acme/shop/_catalog");
    assert_eq!(table["offset"], 0);
    assert_eq!(table["body"]["name"], "orders");
    assert_eq!(table["principal"], "key:abc");
    assert!(table["time"].as_str().unwrap().starts_with("2023-11-14T"));

    let (_, control, _) = dump(dir.path(), &["--partition", "_control"]);
    assert_eq!(
        control
            .iter()
            .map(|e| e["offset"].as_u64().unwrap())
            .collect::<Vec<_>>(),
        [0, 1]
    );
    let (_, by_principal, _) = dump(dir.path(), &["--principal", "key:abc"]);
    assert_eq!(by_principal.len(), 1);
    let (_, by_kind, _) = dump(dir.path(), &["--kind", "account_created"]);
    assert_eq!(by_kind.len(), 2);
    let (_, later, _) = dump(dir.path(), &["--from", "2024-01-01T00:00:00Z"]);
    assert!(later.is_empty());
    let (_, earlier, _) = dump(dir.path(), &["--to", "2024-01-01T00:00:00Z"]);
    assert_eq!(earlier.len(), 3);
}

#[test]
fn a_directory_without_a_log_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let (ok, _, stderr) = dump(dir.path(), &[]);
    assert!(!ok);
    assert!(stderr.contains("holds no log"), "{stderr}");
}
