//! `strata-replay audit` over a real FileLog: who changed what, in time order, scoped to a
//! database, without the writes a leader-epoch fence voided.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

use serde_json::Value;
use strata_log::{
    CommitLog, Envelope, FileLog, FileLogOptions, LeaderEpoch, PartitionId,
    conformance::event,
    envelope::Body,
    event::{DatabaseCreated, RowsDeleted, TableCreated},
};

fn audit(dir: &std::path::Path, args: &[&str]) -> (bool, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_strata-replay"))
        .arg("audit")
        .arg("--data-dir")
        .arg(dir)
        .args(args)
        .output()
        .unwrap();
    (
        output.status.success(),
        String::from_utf8(output.stdout).unwrap(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn at(mut event: Envelope, seconds: i64, principal: &str, body: Body) -> Envelope {
    event.timestamp_micros = 1_700_000_000_000_000 + seconds * 1_000_000;
    event.principal = principal.to_owned();
    event.body = Some(body);
    event
}

#[tokio::test]
async fn audit_lists_changes_in_time_order_by_principal() {
    let dir = tempfile::tempdir().unwrap();
    {
        let log = FileLog::open(dir.path().join("log"), FileLogOptions::default()).unwrap();
        let created = |name: &str| {
            Body::DatabaseCreated(DatabaseCreated {
                account: "acme".into(),
                name: name.into(),
                database_id: format!("id-{name}"),
                storage: None,
            })
        };
        log.append(
            &PartitionId::control(),
            vec![
                at(event("a", 0), 0, "admin", event("acme", 0).body.unwrap()),
                at(event("d1", 0), 10, "key:k1", created("shop")),
                at(event("d2", 0), 11, "key:k1", created("logs")),
            ],
        )
        .await
        .unwrap();
        let table = Body::TableCreated(TableCreated {
            name: "orders".into(),
            table_id: "t1".into(),
            ..Default::default()
        });
        log.append(
            &PartitionId::catalog("acme", "shop"),
            vec![at(event("t", 0), 20, "key:k2", table)],
        )
        .await
        .unwrap();
        let delete = |ids: Vec<u64>| {
            Body::RowsDeleted(RowsDeleted {
                table_id: "t1".into(),
                row_ids: ids,
                vector_count: 0,
            })
        };
        let marker = |epoch| {
            Body::LeaderEpoch(LeaderEpoch {
                epoch,
                node: "n1".into(),
            })
        };
        // The leader of epoch 1 is deposed by epoch 2; its late delete is void.
        log.append(
            &PartitionId::table("acme", "shop", "orders"),
            vec![
                at(event("m1", 1), 29, "system", marker(1)),
                at(event("x1", 1), 30, "key:k2", delete(vec![1, 2, 3])),
                at(event("m2", 2), 31, "system", marker(2)),
                at(event("x2", 1), 32, "key:old", delete(vec![9])),
                at(event("x3", 2), 33, "key:k3", delete(vec![4])),
            ],
        )
        .await
        .unwrap();
    }

    let (ok, out, stderr) = audit(dir.path(), &["--json"]);
    assert!(ok, "{stderr}");
    let changes: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let who: Vec<(&str, &str)> = changes
        .iter()
        .map(|c| {
            (
                c["principal"].as_str().unwrap(),
                c["action"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        who,
        [
            ("admin", "account_created"),
            ("key:k1", "database_created"),
            ("key:k1", "database_created"),
            ("key:k2", "table_created"),
            ("key:k2", "rows_deleted"),
            ("key:k3", "rows_deleted"),
        ],
        "markers and the void delete are left out"
    );
    assert_eq!(changes[4]["table"], "orders");
    assert_eq!(changes[4]["detail"], "3 rows: 1, 2, 3");
    assert_eq!(changes[3]["database"], "shop");

    let (_, out, _) = audit(dir.path(), &["--json", "--database", "acme/shop"]);
    let scoped: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(scoped.len(), 4, "{out}");
    assert!(scoped.iter().all(|c| c["database"] == "shop"));
    let (_, out, _) = audit(
        dir.path(),
        &[
            "--json",
            "--from",
            "2023-11-14T22:13:40Z",
            "--to",
            "2023-11-14T22:13:51Z",
        ],
    );
    assert_eq!(out.lines().count(), 2, "{out}");

    let (ok, table, _) = audit(dir.path(), &["--database", "shop"]);
    assert!(ok);
    let lines: Vec<&str> = table.lines().collect();
    assert!(
        lines[0].starts_with("TIME") && lines[0].contains("PRINCIPAL"),
        "{table}"
    );
    assert!(
        lines.iter().any(|l| l.contains("key:k2")
            && l.contains("acme/shop/orders")
            && l.contains("rows_deleted")),
        "{table}"
    );
}
