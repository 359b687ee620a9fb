//! Crash safety against the real binary: kill -9 the server while several clients create
//! databases and tables or append rows, restart it, and every acknowledged write is there,
//! complete; nothing is half-applied. A full disk refuses writes and recovers when space returns.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::{
    collections::{BTreeMap, BTreeSet},
    path::Path,
    sync::{Arc, Mutex},
    time::Duration,
};

use common::{Server, Signed, Tmpfs, account_with_key, docs_table};
use serde_json::{Value, json};

const CLIENTS: usize = 6;
const ROUNDS: usize = 3;

/// What the clients were told succeeded: database -> acknowledged tables.
type Acknowledged = Arc<Mutex<BTreeMap<String, BTreeSet<String>>>>;

async fn write_until_the_server_dies(client: common::Client, prefix: String, acked: Acknowledged) {
    for i in 0.. {
        let database = format!("{prefix}-{i}");
        let body = json!({ "name": database }).to_string();
        let Some(answer) = client
            .try_send(reqwest::Method::POST, "/v1/databases", Some(&body))
            .await
        else {
            return;
        };
        assert_eq!(answer.status, 201, "{answer:?}");
        acked
            .lock()
            .unwrap()
            .insert(database.clone(), BTreeSet::new());
        for table in ["a", "b"] {
            let body = docs_table(table).to_string();
            let path = format!("/v1/create_table/{database}");
            let Some(answer) = client
                .try_send(reqwest::Method::POST, &path, Some(&body))
                .await
            else {
                return;
            };
            assert_eq!(answer.status, 200, "{answer:?}");
            acked
                .lock()
                .unwrap()
                .get_mut(&database)
                .unwrap()
                .insert(table.to_owned());
        }
    }
}

/// The schema a table created with `docs_table` must have, as the server reports it.
async fn expected_schema(client: &common::Client) -> Value {
    client.create_database("reference").await;
    let created = client.create_table("reference", &docs_table("x")).await;
    created.body["schema"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn acknowledged_databases_and_tables_survive_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let key = account_with_key(dir.path(), "acme", None);
    let args = ["--set", "plans.free.max_databases=100000"];
    let acked: Acknowledged = Arc::default();
    let schema = {
        let server = Server::start(dir.path(), &args);
        expected_schema(&server.client(&key)).await
    };

    for round in 0..ROUNDS {
        let mut server = Server::start(dir.path(), &args);
        let writers: Vec<_> = (0..CLIENTS)
            .map(|c| {
                tokio::spawn(write_until_the_server_dies(
                    server.client(&key),
                    format!("r{round}c{c}"),
                    acked.clone(),
                ))
            })
            .collect();
        // Let the writers get going, then pull the plug mid-flight.
        tokio::time::sleep(Duration::from_millis(400 + 300 * round as u64)).await;
        server.kill9();
        for writer in writers {
            writer.await.unwrap();
        }

        let server = Server::start(dir.path(), &args);
        let client = server.client(&key);
        let listed = client.get("/v1/databases").await;
        let present: BTreeSet<String> = listed.body["databases"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["name"].as_str().unwrap().to_owned())
            .collect();
        let acked_now = acked.lock().unwrap().clone();
        let acked_tables: usize = acked_now.values().map(BTreeSet::len).sum();
        assert!(
            acked_now.len() > round,
            "round {round}: the writers made no progress"
        );
        for (database, tables) in &acked_now {
            assert!(
                present.contains(database),
                "acknowledged database {database} was lost"
            );
            let listed = client.list_tables(database).await;
            assert_eq!(listed.status, 200, "{listed:?}");
            let listed: BTreeSet<String> = serde_json::from_value(listed.body).unwrap();
            assert!(
                tables.is_subset(&listed),
                "acknowledged tables {tables:?} of {database}, found {listed:?}"
            );
        }
        // Nothing half-applied: every database that exists, acknowledged or not, is usable, and
        // every table that exists has its whole schema.
        for database in &present {
            let listed = client.list_tables(database).await;
            assert_eq!(listed.status, 200, "{database}: {listed:?}");
            for table in listed.body.as_array().unwrap() {
                let table = table.as_str().unwrap();
                let described = client.schema(database, table).await;
                assert_eq!(described.status, 200);
                assert_eq!(described.body, schema, "{database}.{table} is incomplete");
            }
        }
        // And the restarted server takes writes again.
        let fresh = format!("after-{round}");
        assert_eq!(client.create_database(&fresh).await.status, 201);
        assert_eq!(
            client.create_table(&fresh, &docs_table("t")).await.status,
            200
        );
        eprintln!(
            "round {round}: {} databases and {acked_tables} tables acknowledged so far, all present",
            acked_now.len()
        );
    }
}

/// Appends from several clients (to shared and separate tables) while the server is killed:
/// after a restart every acknowledged row is there with the row id it was given, and every
/// request is all or nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn acknowledged_rows_survive_kill_9_and_no_request_is_half_applied() {
    let dir = tempfile::tempdir().unwrap();
    let key = account_with_key(dir.path(), "acme", None);
    let args = [
        "--set",
        "tables.flush_rows=50",
        "--set",
        "server.write_wait_ms=200",
    ];
    let table = |name: &str| {
        json!({"name": name, "schema": [
            {"name": "request", "type": "utf8", "nullable": false},
            {"name": "i", "type": "int64", "nullable": false}]})
    };
    // request id -> row ids acknowledged for it
    let acked: Arc<Mutex<BTreeMap<String, Vec<u64>>>> = Arc::default();
    for round in 0..2 {
        let mut server = Server::start(dir.path(), &args);
        let client = server.client(&key);
        if round == 0 {
            assert_eq!(client.create_database("db").await.status, 201);
            for name in ["shared", "t0", "t1", "t2"] {
                assert_eq!(client.create_table("db", &table(name)).await.status, 200);
            }
        }
        let writers: Vec<_> = (0..4)
            .map(|c| {
                let client = server.client(&key);
                let acked = acked.clone();
                let target = if c == 3 {
                    "shared".to_owned()
                } else {
                    format!("t{c}")
                };
                tokio::spawn(async move {
                    for n in 0.. {
                        let request = format!("r{round}c{c}n{n}");
                        let rows: Vec<Value> = (0..5)
                            .map(|i| json!({"request": request, "i": i}))
                            .collect();
                        let body = json!({ "data": rows }).to_string();
                        let path = format!("/v1/append/db?table={target}");
                        let Some(answer) = client
                            .try_send_json(reqwest::Method::POST, &path, &body)
                            .await
                        else {
                            return;
                        };
                        if answer.status == 409 {
                            continue;
                        }
                        assert_eq!(answer.status, 200, "{answer:?}");
                        let ids = answer.body["data"]
                            .as_array()
                            .unwrap()
                            .iter()
                            .map(|r| r["_row_id"].as_u64().unwrap())
                            .collect();
                        acked
                            .lock()
                            .unwrap()
                            .insert(format!("{target}/{request}"), ids);
                    }
                })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(700)).await;
        server.kill9();
        for writer in writers {
            writer.await.unwrap();
        }
    }
    let server = Server::start(dir.path(), &args);
    let client = server.client(&key);
    let acked = acked.lock().unwrap().clone();
    assert!(
        acked.len() > 10,
        "the writers made little progress: {}",
        acked.len()
    );
    for target in ["shared", "t0", "t1", "t2"] {
        let body = json!({"sql": format!("SELECT _row_id, request, i FROM {target}")}).to_string();
        let answer = client
            .try_send_json(reqwest::Method::POST, "/v1/query_sql/db", &body)
            .await
            .unwrap();
        assert_eq!(answer.status, 200, "{answer:?}");
        let mut stored: BTreeMap<String, Vec<u64>> = BTreeMap::new();
        for row in answer.body["data"].as_array().unwrap() {
            stored
                .entry(format!("{target}/{}", row["request"].as_str().unwrap()))
                .or_default()
                .push(row["_row_id"].as_u64().unwrap());
        }
        for ids in stored.values_mut() {
            ids.sort_unstable();
            assert_eq!(ids.len(), 5, "a request was half applied: {ids:?}");
        }
        for (request, ids) in acked
            .iter()
            .filter(|(r, _)| r.starts_with(&format!("{target}/")))
        {
            assert_eq!(
                stored.get(request),
                Some(ids),
                "acknowledged {request} lost or changed"
            );
        }
    }
}

/// A table of requests: each request appends five rows that carry its name.
fn requests_table() -> Value {
    json!({"name": "t", "schema": [
        {"name": "request", "type": "utf8", "nullable": false},
        {"name": "i", "type": "int64", "nullable": false}]})
}

/// Appends the five rows of `request` to `db.t`.
async fn append_request(client: &common::Client, request: &str) -> common::Answer {
    let rows: Vec<Value> = (0..5)
        .map(|i| json!({"request": request, "i": i}))
        .collect();
    let body = json!({ "data": rows }).to_string();
    client
        .try_send_json(reqwest::Method::POST, "/v1/append/db?table=t", &body)
        .await
        .unwrap()
}

/// How many rows of `db.t` each request has.
async fn rows_per_request(client: &common::Client) -> BTreeMap<String, u64> {
    let body = json!({"sql": "SELECT request, count(*) AS n FROM t GROUP BY request"}).to_string();
    let answer = client
        .try_send_json(reqwest::Method::POST, "/v1/query_sql/db", &body)
        .await
        .unwrap();
    assert_eq!(answer.status, 200, "{answer:?}");
    answer.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| {
            (
                row["request"].as_str().unwrap().to_owned(),
                row["n"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// Every request of `acked` with its five rows: what `rows_per_request` must find.
fn five_each<'a>(acked: impl IntoIterator<Item = &'a String>) -> BTreeMap<String, u64> {
    acked.into_iter().map(|r| (r.clone(), 5)).collect()
}

/// A full disk, as a tmpfs of 64 MiB filled to the last byte: appends are refused with 507
/// `insufficient_storage` and nothing of them is applied; what was acknowledged stays readable;
/// once there is room again appends succeed without a restart, and after kill -9 every
/// acknowledged request is there exactly once and `strata-replay verify` agrees.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_full_disk_refuses_writes_with_507_and_writing_resumes_when_space_returns() {
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().join("data");
    let Some(tmpfs) = Tmpfs::mount(&dir, "64m") else {
        return;
    };
    let dir = tmpfs.dir.clone();
    tmpfs.strata(&dir, &["accounts", "create", "acme"]);
    let key: Value = serde_json::from_str(
        &tmpfs.strata(&dir, &["keys", "create", "--account", "acme", "--json"]),
    )
    .unwrap();
    let key = key["key"].as_str().unwrap();
    let root: Value = serde_json::from_str(&tmpfs.strata(
        &dir,
        &["users", "create-root", "--account", "acme", "--json"],
    ))
    .unwrap();
    let root = common::Credentials {
        access_key: root["access_key"].as_str().unwrap().to_owned(),
        secret_key: root["secret_key"].as_str().unwrap().to_owned(),
    };
    // Flushes of the memtable when its oldest row is 200 ms old: segments are written (and
    // fail to be) while the disk is full.
    let args = ["--set", "tables.flush_age_ms=200"];
    let mut server = Server::start_on(&tmpfs, &dir, &args);
    let client = server.client(key);
    assert_eq!(client.create_database("db").await.status, 201);
    assert_eq!(
        client.create_table("db", &requests_table()).await.status,
        200
    );
    let platform = Signed::new(&server, &root);
    let bulk = |id: String| {
        let platform = platform.clone();
        async move {
            let lines = [
                json!({"index": {"_index": "logs", "_id": id}}),
                json!({"id": id}),
            ];
            let answer = platform.send_ndjson("POST", "/_bulk", &lines).await;
            assert_eq!(answer.status, 200, "{answer:?}");
            answer.body["items"][0]["index"].clone()
        }
    };
    let mut bulked = BTreeSet::new();
    let mut acked = BTreeSet::new();
    for n in 0..20 {
        let id = format!("before-{n}");
        assert_eq!(bulk(id.clone()).await["status"], 201);
        bulked.insert(id);
    }
    for n in 0..20 {
        let request = format!("before-{n}");
        assert_eq!(append_request(&client, &request).await.status, 200);
        acked.insert(request);
    }

    // No room left: the segment's last page may still take a few appends, then one is refused.
    let filler = tmpfs.fill();
    let mut refused = None;
    for n in 0..1000 {
        let request = format!("full-{n}");
        let answer = append_request(&client, &request).await;
        match answer.status {
            200 => {
                acked.insert(request);
            }
            _ => {
                refused = Some(answer);
                break;
            }
        }
    }
    let refused = refused.expect("1000 appends fit on a full disk");
    assert_eq!(refused.status, 507, "{refused:?}");
    assert_eq!(refused.code(), "insufficient_storage", "{refused:?}");
    assert!(
        refused.body["message"]
            .as_str()
            .unwrap()
            .ends_with("No space left on device (os error 28)"),
        "the operating system's words, and no path: {refused:?}"
    );
    // A bulk item too, once its dataset's segment has no room left.
    let mut refused = None;
    for n in 0..1000 {
        let id = format!("full-{n}");
        let item = bulk(id.clone()).await;
        match item["status"].as_u64() {
            Some(201) => {
                bulked.insert(id);
            }
            _ => {
                refused = Some(item);
                break;
            }
        }
    }
    let refused = refused.expect("1000 bulk items fit on a full disk");
    assert_eq!(refused["status"], 507, "{refused}");
    assert_eq!(
        refused["error"]["type"], "insufficient_storage_exception",
        "{refused}"
    );
    // Still full, while flushes fail: refused again, and reads answer with exactly what was
    // acknowledged.
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    assert_eq!(append_request(&client, "still-full").await.status, 507);
    assert_eq!(rows_per_request(&client).await, five_each(&acked));
    let ids = |platform: Signed| async move {
        let body = json!({"size": 10_000, "_source": false, "query": {"match_all": {}}});
        let answer = platform
            .send_json("POST", "/logs/_search", Some(&body))
            .await;
        assert_eq!(answer.status, 200, "{answer:?}");
        common::hit_ids(&answer)
            .into_iter()
            .collect::<Vec<String>>()
    };
    let sorted = |set: &BTreeSet<String>| set.iter().cloned().collect::<Vec<String>>();
    assert_eq!(ids(platform.clone()).await, sorted(&bulked));

    // Room again: the next append succeeds, without a restart.
    std::fs::remove_file(&filler).unwrap();
    for n in 0..20 {
        let request = format!("after-{n}");
        let answer = append_request(&client, &request).await;
        assert_eq!(answer.status, 200, "{answer:?}");
        acked.insert(request);
    }
    assert_eq!(rows_per_request(&client).await, five_each(&acked));
    for n in 0..5 {
        let id = format!("after-{n}");
        assert_eq!(bulk(id.clone()).await["status"], 201);
        bulked.insert(id);
    }

    // The flushes that failed while the disk was full left nothing behind; the next one wrote
    // the segments.
    let files = || {
        let output = std::process::Command::new("find")
            .arg(tmpfs.outside(&dir))
            .output()
            .unwrap();
        String::from_utf8(output.stdout).unwrap()
    };
    assert!(
        common::eventually(10, || async {
            let files = files();
            files.contains(".parquet") && !files.contains(".building")
        })
        .await,
        "{}",
        files()
    );

    // And all of it survives kill -9, exactly once, as the log and the tables agree.
    server.kill9();
    common::verify_passes(tmpfs.replay(&dir, &["verify"]));
    let server = Server::start_on(&tmpfs, &dir, &args);
    assert_eq!(
        rows_per_request(&server.client(key)).await,
        five_each(&acked)
    );
    assert_eq!(
        ids(Signed::new(&server, &root)).await,
        sorted(&bulked),
        "each acknowledged record, once"
    );
}

/// The last segment file of every partition of the file log under `dir`: (partition directory,
/// segment file, its length).
fn last_segments(dir: &Path) -> Vec<(std::path::PathBuf, std::path::PathBuf, u64)> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(at) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&at) else {
            continue;
        };
        let mut segments = Vec::new();
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "log")
                && path.file_stem().is_some_and(|s| s.len() == 20)
            {
                segments.push(path);
            }
        }
        if at.join("NAME").exists()
            && let Some(last) = segments.into_iter().max()
        {
            let len = std::fs::metadata(&last).unwrap().len();
            found.push((at, last, len));
        }
    }
    found.sort();
    found
}

/// A write torn by the crash: the last segment of a table's partition ends with half a frame
/// (a copy of its last frame, cut short). The restart cuts it off; every acknowledged request is
/// there exactly once, writing resumes, and `strata-replay verify` agrees.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_torn_write_at_the_end_of_the_log_is_cut_off_and_nothing_acknowledged_is_lost() {
    let dir = tempfile::tempdir().unwrap();
    let key = account_with_key(dir.path(), "acme", None);
    let mut server = Server::start(dir.path(), &[]);
    let client = server.client(&key);
    assert_eq!(client.create_database("db").await.status, 201);
    assert_eq!(
        client.create_table("db", &requests_table()).await.status,
        200
    );
    let mut acked: Vec<String> = (0..11).map(|n| format!("r{n}")).collect();
    for request in &acked[..10] {
        assert_eq!(append_request(&client, request).await.status, 200);
    }
    // The frame of one more append: the bytes its acknowledgement added to one partition.
    let before = last_segments(dir.path());
    assert_eq!(append_request(&client, &acked[10]).await.status, 200);
    let after = last_segments(dir.path());
    let grown: Vec<_> = before
        .iter()
        .zip(&after)
        .filter(|(b, a)| b.1 == a.1 && a.2 > b.2)
        .map(|(b, a)| (a.1.clone(), b.2, a.2))
        .collect();
    assert_eq!(grown.len(), 1, "one append grew one segment: {grown:?}");
    let (segment, from, to) = grown[0].clone();
    server.kill9();

    let bytes = std::fs::read(&segment).unwrap();
    let frame = &bytes[from as usize..to as usize];
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&segment)
        .unwrap();
    std::io::Write::write_all(&mut file, &frame[..frame.len() / 2]).unwrap();
    drop(file);

    let server = Server::start(dir.path(), &[]);
    assert_eq!(
        std::fs::metadata(&segment).unwrap().len(),
        to,
        "the torn frame is cut off"
    );
    let client = server.client(&key);
    assert_eq!(rows_per_request(&client).await, five_each(&acked));
    acked.push("r11".to_owned());
    assert_eq!(append_request(&client, &acked[11]).await.status, 200);
    assert_eq!(rows_per_request(&client).await, five_each(&acked));
    drop(server);
    common::verify_passes(common::replay(dir.path(), &["verify"]));
}
