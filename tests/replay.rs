//! `strata-replay` against data directories the real server wrote. verify passes on a consistent
//! one (also after losing index or segment files, which loading recovers from) and fails, naming
//! the table, the rows and the first offset, when a damaged manifest makes a projection disagree
//! with the log, run alone or through a running server. dump, audit, verify and restore work
//! beside a running server; rebuild refuses to. restore copies a database as it was at a time or
//! an offset.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::{
    path::{Path, PathBuf},
    process::Output,
};

use common::{Server, account_with_key, docs_table, replay, shop_with_docs};
use serde_json::json;

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// A data directory with two tables written through the server: several flushed segments (with
/// their indexes), updates and deletes across them, and an unflushed tail.
async fn written(dir: &Path) {
    let key = account_with_key(dir, "acme", None);
    let mut server = Server::start(
        dir,
        &[
            "--set",
            "tables.flush_rows=4",
            "--set",
            "tables.flush_age_ms=200",
        ],
    );
    let client = server.client(&key);
    assert_eq!(client.create_database("shop").await.status, 201);
    for table in ["docs", "more"] {
        assert_eq!(
            client.create_table("shop", &docs_table(table)).await.status,
            200
        );
    }
    for batch in 0..4 {
        let rows: Vec<_> = (0..3)
            .map(|i| {
                json!({
                    "title": format!("title {batch} {i}"),
                    "body": "the quick brown fox",
                    "year": 2000 + batch,
                    "embedding": [batch as f32, i as f32, 1.0, 0.5],
                })
            })
            .collect();
        for table in ["docs", "more"] {
            append_rows(&client, table, json!(rows)).await;
        }
    }
    // Every append of docs in segments (offsets: a leader marker, then one per write).
    wait_for_flush(dir, 5).await;
    update_title(&client, "docs", 3, "updated").await;
    let answer = client
        .post_empty("/v1/delete/shop?table=docs&predicate=year%20%3D%202002")
        .await;
    assert_eq!(answer.status, 200, "{answer:?}");
    // Enough rows for another flush of docs: its manifest's checkpoint is past the delete, so a
    // restart takes the delete from the manifest alone.
    append_rows(
        &client,
        "docs",
        json!([{"title": "x"}, {"title": "y"}, {"title": "z"}]),
    )
    .await;
    wait_for_flush(dir, 8).await;
    assert!(server.stop());
}

#[tokio::test]
async fn verify_passes_on_what_the_server_wrote_even_after_lost_files() {
    let dir = tempfile::tempdir().unwrap();
    written(dir.path()).await;

    let out = common::verify_passes(replay(dir.path(), &["verify"]));
    assert!(out.contains("ok acme/shop/docs"), "{out}");
    assert!(out.contains("ok acme/shop/more"), "{out}");
    let output = replay(
        dir.path(),
        &["verify", "--database", "acme/shop", "--table", "more"],
    );
    assert!(output.status.success(), "{}", text(&output));
    assert!(!text(&output).contains("docs"), "{}", text(&output));

    // Lost index directories are rebuilt from their segments when the table loads: no mismatch.
    std::fs::remove_dir_all(dir.path().join("indexes")).unwrap();
    let output = replay(dir.path(), &["verify"]);
    assert!(output.status.success(), "{}", text(&output));

    // A lost segment: its manifest is passed over for an older one and the log, so the table
    // loads whole, and verify agrees.
    let segment = files(&dir.path().join("tables"), "parquet").remove(0);
    std::fs::remove_file(&segment).unwrap();
    let output = replay(dir.path(), &["verify"]);
    assert!(output.status.success(), "{}", text(&output));
}

#[tokio::test]
async fn verify_finds_what_a_damaged_manifest_changed_and_rebuild_repairs_it() {
    let dir = tempfile::tempdir().unwrap();
    written(dir.path()).await;
    // Forget the deletes the manifests recorded: three deleted rows of docs come back to life
    // in the live projection, which the log says are gone.
    let tables = dir.path().join("tables");
    assert!(deleted_in_manifests(&tables).contains(6));
    resurrect(&tables, 6..=8);
    assert!(!deleted_in_manifests(&tables).contains(6));
    let output = replay(dir.path(), &["verify"]);
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    let out = text(&output);
    assert!(out.contains("ok acme/shop/more"), "{out}");
    let mismatch = out
        .lines()
        .find(|l| l.starts_with("MISMATCH acme/shop/docs:"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        mismatch.contains("live 15 rows, rebuilt 12; 3 rows differ (first row id 6)"),
        "{out}"
    );
    assert!(mismatch.contains("first offset "), "{out}");
    assert!(out.contains(" 1 mismatched"), "{out}");

    // A server loads the same damaged manifest: verify through it finds the same difference.
    let mut server = Server::start(dir.path(), &[]);
    let output = replay(dir.path(), &["verify"]);
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    let through_server = text(&output);
    assert!(
        through_server.contains(
            "MISMATCH acme/shop/docs: live 15 rows, rebuilt 12; 3 rows differ (first row id 6)"
        ),
        "{through_server}"
    );
    assert!(
        through_server.contains("ok acme/shop/more"),
        "{through_server}"
    );
    assert!(server.stop());

    // rebuild replaces the damaged table's projections by the log's, and verify agrees again.
    let output = replay(
        dir.path(),
        &["rebuild", "--database", "shop", "--table", "docs"],
    );
    assert!(output.status.success(), "{}", text(&output));
    assert!(
        text(&output).contains("rebuilt acme/shop/docs: 12 rows"),
        "{}",
        text(&output)
    );
    let output = replay(dir.path(), &["verify"]);
    assert!(output.status.success(), "{}", text(&output));

    // And the server answers from the rebuilt files.
    let key = account_with_key(dir.path(), "acme", None);
    let server = Server::start(dir.path(), &[]);
    let answer: serde_json::Value = reqwest::Client::new()
        .post(format!("{}/v1/query_sql/shop", server.data_url))
        .bearer_auth(&key)
        .header("accept", "application/json")
        .body(json!({"sql": "SELECT count(*) AS n FROM docs"}).to_string())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(answer["data"][0]["n"], 12, "{answer}");
}

/// Waits until docs (the first table created, so the first table directory: ids are time
/// ordered) has a manifest whose checkpoint reaches `offset`.
async fn wait_for_flush(dir: &Path, offset: u64) {
    let flushed = || {
        // tables/<database id>/<table id>/manifests/, once the first flush has written it.
        let Some(database) = std::fs::read_dir(dir.join("tables"))
            .ok()
            .and_then(|mut d| d.next())
        else {
            return false;
        };
        let mut tables: Vec<PathBuf> = std::fs::read_dir(database.unwrap().path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        tables.sort();
        // Until both tables have written segments, the first directory may be the other's.
        tables.len() == 2
            && tables.first().is_some_and(|docs| {
                files(docs, "manifest").iter().any(|path| {
                    let body: serde_json::Value =
                        serde_json::from_slice(&std::fs::read(path).unwrap()[14..]).unwrap();
                    body["checkpoint"]["next_offset"].as_u64().unwrap() >= offset
                })
            })
    };
    assert!(
        common::eventually(30, || {
            let done = flushed();
            async move { done }
        })
        .await,
        "docs was not flushed up to offset {offset}"
    );
}

/// The row ids the table manifests under `dir` record as deleted.
fn deleted_in_manifests(dir: &Path) -> roaring::RoaringTreemap {
    let mut deleted = roaring::RoaringTreemap::new();
    for path in files(dir, "manifest") {
        let body: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap()[14..]).unwrap();
        for segment in body["segments"].as_array().unwrap() {
            deleted |= bitmap(segment["deleted"].as_str().unwrap());
        }
    }
    deleted
}

fn bitmap(text: &str) -> roaring::RoaringTreemap {
    use base64::Engine;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text)
        .unwrap();
    roaring::RoaringTreemap::deserialize_from(&bytes[..]).unwrap()
}

/// Rewrites every table manifest under `dir` without the deletes of `rows` (and with a valid
/// checksum).
fn resurrect(dir: &Path, rows: std::ops::RangeInclusive<u64>) {
    use base64::Engine;
    for path in files(dir, "manifest") {
        let bytes = std::fs::read(&path).unwrap();
        let mut body: serde_json::Value = serde_json::from_slice(&bytes[14..]).unwrap();
        for segment in body["segments"].as_array_mut().unwrap() {
            let mut deleted = bitmap(segment["deleted"].as_str().unwrap());
            deleted.remove_range(rows.clone());
            let mut out = Vec::new();
            deleted.serialize_into(&mut out).unwrap();
            segment["deleted"] = base64::engine::general_purpose::STANDARD.encode(out).into();
        }
        let body = serde_json::to_vec(&body).unwrap();
        let mut out = bytes[..10].to_vec();
        out.extend_from_slice(&crc32c::crc32c(&body).to_le_bytes());
        out.extend_from_slice(&body);
        std::fs::write(&path, out).unwrap();
    }
}

/// The files under `dir` with extension `extension`.
fn files(dir: &Path, extension: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == extension) {
                found.push(path);
            }
        }
    }
    found
}

/// Appends one row at a time, each with a unique title, until the server dies; returns the
/// titles the server acknowledged.
async fn append_until_killed(client: common::Client, writer: usize) -> Vec<String> {
    let mut acknowledged = Vec::new();
    for i in 0.. {
        let title = format!("w{writer}-{i}");
        let body = json!({"data": [{"title": title, "year": i}]}).to_string();
        let Some(answer) = client
            .try_send(
                reqwest::Method::POST,
                "/v1/append/shop?table=docs",
                Some(&body),
            )
            .await
        else {
            return acknowledged;
        };
        match answer.status {
            200 => acknowledged.push(title),
            // Another writer holds the table: try again.
            409 => {}
            _ => panic!("{answer:?}"),
        }
    }
    unreachable!()
}

#[tokio::test]
async fn after_kill_9_under_writes_verify_passes_and_dump_holds_every_acknowledged_row() {
    let dir = tempfile::tempdir().unwrap();
    let key = account_with_key(dir.path(), "acme", None);
    let mut server = Server::start(
        dir.path(),
        &[
            "--set",
            "tables.flush_rows=50",
            "--set",
            "server.write_wait_ms=50",
        ],
    );
    shop_with_docs(&server, &key).await;
    let writers: Vec<_> = (0..3)
        .map(|w| tokio::spawn(append_until_killed(server.client(&key), w)))
        .collect();
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    server.kill9();
    let mut acknowledged = Vec::new();
    for writer in writers {
        acknowledged.extend(writer.await.unwrap());
    }
    assert!(
        acknowledged.len() > 10,
        "only {} writes",
        acknowledged.len()
    );

    let output = replay(dir.path(), &["verify"]);
    assert!(output.status.success(), "{}", text(&output));
    assert_every_title_dumped(dir.path(), &acknowledged);
}

#[tokio::test]
async fn rebuild_refuses_to_run_beside_a_server() {
    let dir = tempfile::tempdir().unwrap();
    account_with_key(dir.path(), "acme", None);
    let _server = Server::start(dir.path(), &[]);
    let output = replay(
        dir.path(),
        &["rebuild", "--database", "shop", "--table", "docs"],
    );
    assert!(!output.status.success());
    assert!(text(&output).contains("stop it first"), "{}", text(&output));
}

/// Every title in `acknowledged` is in a `rows_appended` event of shop.docs's log.
fn assert_every_title_dumped(dir: &Path, acknowledged: &[String]) {
    let output = replay(dir, &["dump", "--partition", "acme/shop/docs"]);
    assert!(output.status.success(), "{}", text(&output));
    let dumped = appended_titles(&output);
    let missing: Vec<&String> = acknowledged
        .iter()
        .filter(|t| !dumped.contains(*t))
        .collect();
    assert!(
        missing.is_empty(),
        "acknowledged but not in the log: {missing:?}"
    );
}

/// Titles of the rows of `rows_appended` events in dump's output.
fn appended_titles(dump: &Output) -> std::collections::HashSet<String> {
    String::from_utf8(dump.stdout.clone())
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
        .filter(|event| event["kind"] == "rows_appended")
        .flat_map(|event| {
            event["body"]["rows"]
                .as_array()
                .unwrap()
                .iter()
                .map(|row| row["title"].as_str().unwrap().to_owned())
                .collect::<Vec<_>>()
        })
        .collect()
}

#[tokio::test]
async fn beside_a_running_server_under_writes_dump_audit_and_verify_work() {
    use std::sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    };
    let dir = tempfile::tempdir().unwrap();
    let key = account_with_key(dir.path(), "acme", None);
    let server = Server::start(
        dir.path(),
        &[
            "--set",
            "tables.flush_rows=6",
            "--set",
            "tables.flush_age_ms=100",
        ],
    );
    let client = shop_with_docs(&server, &key).await;
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (client, stop) = (client.clone(), stop.clone());
        tokio::spawn(async move {
            let mut acknowledged = Vec::new();
            for n in 0.. {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let titles = [format!("w{n}a"), format!("w{n}b")];
                let rows: Vec<_> = titles.iter().map(|t| json!({"title": t})).collect();
                append_rows(&client, "docs", json!(rows)).await;
                acknowledged.extend(titles);
                if n % 5 == 4 {
                    update_title(&client, "docs", n, &format!("u{n}")).await;
                }
            }
            acknowledged
        })
    };
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;

    // verify goes through the server: its snapshots against a rebuild of the same prefix.
    for _ in 0..3 {
        let output = replay(dir.path(), &["verify"]);
        assert!(output.status.success(), "{}", text(&output));
        assert!(
            text(&output).contains("ok acme/shop/docs"),
            "{}",
            text(&output)
        );
    }
    let output = replay(
        dir.path(),
        &["verify", "--database", "shop", "--table", "nope"],
    );
    assert!(!output.status.success());
    assert!(
        text(&output).contains("does not exist"),
        "{}",
        text(&output)
    );

    // dump and audit read a view of the log as it is, the server writing on.
    let output = replay(dir.path(), &["audit", "--json", "--database", "shop"]);
    assert!(output.status.success(), "{}", text(&output));
    assert!(text(&output).contains("rows_appended"), "{}", text(&output));
    stop.store(true, Ordering::Relaxed);
    let acknowledged = writer.await.unwrap();
    assert!(acknowledged.len() >= 4);
    assert_every_title_dumped(dir.path(), &acknowledged);
}

#[tokio::test]
async fn rebuild_names_what_it_cannot_find() {
    let dir = tempfile::tempdir().unwrap();
    written(dir.path()).await;
    for (args, message) in [
        (
            ["--database", "nope", "--table", "docs"],
            "no such database: nope",
        ),
        (
            ["--database", "acme/shop", "--table", "nope"],
            "no such table: acme/shop/nope",
        ),
    ] {
        let output = replay(dir.path(), &[&["rebuild"][..], &args[..]].concat());
        assert!(!output.status.success());
        assert!(text(&output).contains(message), "{}", text(&output));
    }
}

/// The titles of `table` in `database`, in row-id order.
async fn titles(server: &Server, key: &str, database: &str, table: &str) -> Vec<String> {
    rows_of(server, key, database, table)
        .await
        .unwrap_or_else(|| panic!("{database} has no table {table}"))
        .into_iter()
        .map(|(_, title)| title)
        .collect()
}

/// Appends `rows` (a JSON array) to shop.`table`.
async fn append_rows(client: &common::Client, table: &str, rows: serde_json::Value) {
    let answer = client
        .post(
            &format!("/v1/append/shop?table={table}"),
            &json!({ "data": rows }).to_string(),
        )
        .await;
    assert_eq!(answer.status, 200, "{answer:?}");
}

/// Updates the title of row `id` of shop.`table`.
async fn update_title(client: &common::Client, table: &str, id: u64, title: &str) {
    let answer = client
        .post(
            &format!("/v1/update/shop?table={table}&predicate=_row_id%20%3D%20{id}"),
            &json!({"data": [{"title": title}]}).to_string(),
        )
        .await;
    assert_eq!(answer.status, 200, "{answer:?}");
}

/// Deletes row `id` of shop.`table`.
async fn delete_row(client: &common::Client, table: &str, id: u64) {
    let answer = client
        .post_empty(&format!(
            "/v1/delete/shop?table={table}&predicate=_row_id%20%3D%20{id}"
        ))
        .await;
    assert_eq!(answer.status, 200, "{answer:?}");
}

#[tokio::test]
async fn restore_copies_a_database_as_it_was_at_a_time_or_an_offset() {
    restore_copies_a_database(Running::No).await;
}

#[tokio::test]
async fn restore_through_a_running_server_copies_a_database_queryable_at_once() {
    restore_copies_a_database(Running::Yes).await;
}

/// Whether a server runs on the data directory while strata-replay does.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Running {
    Yes,
    No,
}

async fn restore_copies_a_database(running: Running) {
    let dir = tempfile::tempdir().unwrap();
    let key = account_with_key(dir.path(), "acme", None);
    let mut server = Server::start(dir.path(), &[]);
    let client = shop_with_docs(&server, &key).await;
    let append = |titles: &[&str]| {
        let rows: Vec<_> = titles.iter().map(|t| json!({"title": t})).collect();
        let client = client.clone();
        async move { append_rows(&client, "docs", json!(rows)).await }
    };
    // Offsets of docs: 0 the leader's marker, 1 the first append, 2 the update, 3 the delete.
    append(&["a", "b", "c"]).await;
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let after_first = chrono::Utc::now().to_rfc3339();
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    update_title(&client, "docs", 0, "a2").await;
    delete_row(&client, "docs", 1).await;
    append(&["d"]).await;
    let now = titles(&server, &key, "shop", "docs").await;
    assert_eq!(now, ["a2", "c", "d"]);
    if running == Running::No {
        assert!(server.stop());
    }

    for (at, into) in [
        (after_first.as_str(), "at-time"),
        ("1", "at-offset-1"),
        ("2", "at-offset-2"),
        ("4", "at-offset-4"),
    ] {
        let output = replay(
            dir.path(),
            &["restore", "--database", "shop", "--at", at, "--into", into],
        );
        assert!(output.status.success(), "{}", text(&output));
        assert!(text(&output).contains(": 1 table,"), "{}", text(&output));
    }
    for (args, message) in [
        (["--at", "2", "--into", "at-time"], "exists"),
        (
            ["--at", "yesterday", "--into", "x"],
            "neither an RFC 3339 time nor an offset",
        ),
        (["--at", "99", "--into", "x"], "beyond"),
        (["--at", "1", "--into", "_x"], "not a database name"),
    ] {
        let output = replay(
            dir.path(),
            &[&["restore", "--database", "shop"][..], &args[..]].concat(),
        );
        assert!(!output.status.success());
        assert!(text(&output).contains(message), "{}", text(&output));
    }
    let output = replay(dir.path(), &["verify"]);
    assert!(output.status.success(), "{}", text(&output));
    assert!(
        text(&output).contains("ok acme/at-offset-2/docs"),
        "{}",
        text(&output)
    );

    if running == Running::No {
        server = Server::start(dir.path(), &[]);
    }
    assert_eq!(
        titles(&server, &key, "at-time", "docs").await,
        ["a", "b", "c"]
    );
    assert_eq!(
        titles(&server, &key, "at-offset-1", "docs").await,
        ["a", "b", "c"]
    );
    assert_eq!(
        titles(&server, &key, "at-offset-2", "docs").await,
        ["a2", "b", "c"]
    );
    assert_eq!(titles(&server, &key, "at-offset-4", "docs").await, now);
    assert_eq!(titles(&server, &key, "shop", "docs").await, now);
    // A restored database takes writes like any other.
    let answer = server
        .client(&key)
        .post(
            "/v1/append/at-time?table=docs",
            &json!({"data": [{"title": "e"}]}).to_string(),
        )
        .await;
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(
        titles(&server, &key, "at-time", "docs").await,
        ["a", "b", "c", "e"]
    );
}

/// `(_row_id, title)` of every row of `table` in `database`, in row-id order, or `None` when
/// there is no such table.
async fn rows_of(
    server: &Server,
    key: &str,
    database: &str,
    table: &str,
) -> Option<Vec<(u64, String)>> {
    let response = reqwest::Client::new()
        .post(format!("{}/v1/query_sql/{database}", server.data_url))
        .bearer_auth(key)
        .header("accept", "application/json")
        .body(
            json!({"sql": format!("SELECT _row_id, title FROM {table} ORDER BY _row_id")})
                .to_string(),
        )
        .send()
        .await
        .unwrap();
    if response.status() != 200 {
        return None;
    }
    let answer: serde_json::Value = response.json().await.unwrap();
    Some(
        answer["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["_row_id"].as_u64().unwrap(),
                    r["title"].as_str().unwrap().to_owned(),
                )
            })
            .collect(),
    )
}

#[tokio::test]
async fn restores_at_every_tenth_offset_equal_what_the_server_answered_then() {
    use rand::{Rng, SeedableRng, rngs::StdRng};
    let dir = tempfile::tempdir().unwrap();
    let key = account_with_key(dir.path(), "acme", None);
    let args = [
        "--set",
        "tables.flush_rows=7",
        "--set",
        "tables.flush_age_ms=200",
    ];
    let mut server = Server::start(dir.path(), &args);
    assert_eq!(
        server.client(&key).create_database("shop").await.status,
        201
    );
    let table =
        json!({"name": "t", "schema": [{"name": "title", "type": "utf8", "nullable": false}]});
    assert_eq!(
        server
            .client(&key)
            .create_table("shop", &table)
            .await
            .status,
        200
    );
    let mut rng = StdRng::seed_from_u64(7);
    // The table's state after each write, in the order of the writes' events in its partition.
    let mut states: Vec<Vec<(u64, String)>> = Vec::new();
    let mut rows: Vec<(u64, String)> = Vec::new();
    let (mut drops, mut restarts) = (0, 0);
    for step in 0..70 {
        let client = server.client(&key);
        let roll = rng.random_range(0..100);
        let target = (!rows.is_empty()).then(|| rows[rng.random_range(0..rows.len())].0);
        let answer = match (roll, target) {
            (0..55, _) | (_, None) => {
                let n = rng.random_range(1..4);
                let data: Vec<_> = (0..n)
                    .map(|i| json!({"title": format!("s{step}-{i}")}))
                    .collect();
                Some(
                    client
                        .post(
                            "/v1/append/shop?table=t",
                            &json!({ "data": data }).to_string(),
                        )
                        .await,
                )
            }
            (55..72, Some(id)) => {
                update_title(&client, "t", id, &format!("u{step}")).await;
                None
            }
            (72..88, Some(id)) => {
                delete_row(&client, "t", id).await;
                None
            }
            (88..94, _) => {
                // Drop and create again: the new table continues the same partition.
                let drop = client
                    .post("/v1/drop_table/shop", &json!({"name": "t"}).to_string())
                    .await;
                assert_eq!(drop.status, 200, "{drop:?}");
                assert_eq!(client.create_table("shop", &table).await.status, 200);
                rows.clear();
                drops += 1;
                continue;
            }
            _ => {
                assert!(server.stop());
                server = Server::start(dir.path(), &args);
                restarts += 1;
                continue;
            }
        };
        if let Some(answer) = answer {
            assert_eq!(answer.status, 200, "{answer:?}");
        }
        rows = rows_of(&server, &key, "shop", "t").await.unwrap();
        states.push(rows.clone());
    }
    assert!(server.stop());
    assert!(
        drops > 0 && restarts > 0,
        "{drops} drops, {restarts} restarts"
    );

    // The k-th write is the k-th event of the partition that is not a leader's marker.
    let output = replay(dir.path(), &["dump", "--partition", "acme/shop/t"]);
    assert!(output.status.success(), "{}", text(&output));
    let offsets: Vec<u64> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
        .filter(|event| event["kind"] != "leader_epoch")
        .map(|event| event["offset"].as_u64().unwrap())
        .collect();
    assert_eq!(offsets.len(), states.len());
    let picked: Vec<usize> = (0..states.len()).step_by(10).collect();
    for &k in &picked {
        let offset = offsets[k].to_string();
        let into = format!("at-{offset}");
        let output = replay(
            dir.path(),
            &[
                "restore",
                "--database",
                "shop",
                "--at",
                &offset,
                "--into",
                &into,
            ],
        );
        assert!(output.status.success(), "{}", text(&output));
    }
    let output = replay(dir.path(), &["verify"]);
    assert!(output.status.success(), "{}", text(&output));

    let server = Server::start(dir.path(), &args);
    for &k in &picked {
        let into = format!("at-{}", offsets[k]);
        let restored = rows_of(&server, &key, &into, "t")
            .await
            .unwrap_or_else(|| panic!("{into} has no table t"));
        assert_eq!(restored, states[k], "restore at offset {}", offsets[k]);
    }
}

/// What this round of the platform API writes (arrays, partial updates, aliases, declared
/// fields, SQL upserts, metrics samples) replays to the state the server holds: verify passes, catalog and
/// datasets alike.
#[tokio::test]
async fn platform_writes_replay_to_what_the_server_holds() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(
        dir.path(),
        &[
            "--set",
            "tables.flush_rows=3",
            "--set",
            "tables.flush_age_ms=200",
        ],
    );
    let platform = common::Signed::new(&server, &common::root_user(dir.path(), "acme"));
    let mapping = json!({"mappings": {"properties": {"client": {"type": "ip"}}}, "aliases": {"all-events": {}}});
    assert_eq!(
        platform.send("PUT", "/events", Some(&mapping)).await.status,
        200
    );
    let lines = [
        json!({"index": {"_id": "1"}}),
        json!({"tags": ["a", "b"], "client": "10.0.0.1", "n": 1}),
        json!({"index": {"_id": "2"}}),
        json!({"tags": "c", "n": 2}),
        json!({"update": {"_id": "1"}}),
        json!({"doc": {"n": 10, "extra": true}}),
        json!({"index": {"_id": "3"}}),
        json!({"n": 3}),
    ];
    let written = platform.send_ndjson("POST", "/events/_bulk", &lines).await;
    assert_eq!(written.body["errors"], false, "{written:?}");
    let body = json!({"properties": {"level": {"type": "keyword"}}});
    assert_eq!(
        platform
            .send("PUT", "/events/_mapping", Some(&body))
            .await
            .status,
        200
    );
    let actions = json!({"actions": [{"add": {"index": "events", "alias": "recent", "filter": {"range": {"n": {"gte": 3}}}}}]});
    assert_eq!(
        platform
            .send("POST", "/_aliases", Some(&actions))
            .await
            .status,
        200
    );
    let upsert = json!({"query": "INSERT INTO events (_id, n, level) VALUES ('2', 20, 'warn'), ('4', 4, 'info') ON CONFLICT (_id) DO UPDATE SET n = EXCLUDED.n"});
    let answer = platform.send("POST", "/sql", Some(&upsert)).await;
    assert_eq!(answer.body["rows_affected"], 2, "{answer:?}");
    // DO NOTHING: '3' exists and is kept as it is; '5' is new.
    let upsert = json!({"query": "INSERT INTO events (_id, n) VALUES ('3', 30), ('5', 5) ON CONFLICT (_id) DO NOTHING"});
    let answer = platform.send("POST", "/sql", Some(&upsert)).await;
    assert_eq!(answer.body["rows_affected"], 1, "{answer:?}");
    let kept = json!({"query": "SELECT _id, n FROM events WHERE _id IN ('3', '5') ORDER BY _id"});
    let answer = platform.send("POST", "/sql", Some(&kept)).await;
    assert_eq!(
        answer.body["rows"],
        json!([["3", 3], ["5", 5]]),
        "{answer:?}"
    );
    // Samples, the second write bringing a new label (a column).
    for body in [
        "up{job=\"a\"} 1 1000\nup{job=\"b\"} 0 1000\n",
        "up{job=\"a\",zone=\"z1\"} 1 2000\nup{job=\"a\"} 1 2000\n",
    ] {
        let answer = platform
            .send_text("POST", "/node/metrics", "text/plain", body)
            .await;
        assert_eq!(answer.body["indexed"], 2, "{answer:?}");
    }
    assert!(server.stop());

    let out = common::verify_passes(replay(dir.path(), &["verify"]));
    assert!(out.contains("ok acme/default/events"), "{out}");
    assert!(out.contains("ok acme/default/node"), "{out}");
    // The dump tells each step.
    let dump = text(&replay(dir.path(), &["dump", "--kind", "aliases_changed"]));
    assert!(dump.contains("\"alias\":\"recent\""), "{dump}");
}
