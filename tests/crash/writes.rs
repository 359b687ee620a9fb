//! Data-plane append, update and delete; NDJSON bulk with explicit and generated ids; single
//! records.

use super::*;

/// A data-plane writer on `table` of database `db` (columns `k`, `v`): at each step n, appends
/// three rows, then updates a row of the step before and deletes another of it.
async fn data_plane(client: Client, table: String, name: String, books: Books) {
    let key = |n: i64, i: i64| format!("p-{name}n{n}-{i}");
    let path = |op: &str, key: Option<&str>| match key {
        Some(key) => format!("/v1/{op}/db?table={table}&predicate=k%20%3D%20%27{key}%27"),
        None => format!("/v1/{op}/db?table={table}"),
    };
    for n in 0i64.. {
        let effects: Effects = (0..3).map(|i| (key(n, i), Some(n * 10 + i))).collect();
        let rows: Vec<Value> = effects
            .iter()
            .map(|(k, v)| json!({"k": k, "v": v}))
            .collect();
        let body = json!({ "data": rows }).to_string();
        let sent = client
            .try_send_json(Method::POST, &path("append", None), &body)
            .await;
        if book(&books, "append", effects, sent, |a| a.status == 200).is_none() {
            return;
        }
        if n == 0 {
            continue;
        }
        let (updated, deleted) = (key(n - 1, 0), key(n - 1, 1));
        let body = json!({"data": [{"k": updated, "v": REPLACED + n}]}).to_string();
        let sent = client
            .try_send_json(Method::POST, &path("update", Some(&updated)), &body)
            .await;
        let effects = vec![(updated, Some(REPLACED + n))];
        if book(&books, "update", effects, sent, |a| a.body["matched"] == 1).is_none() {
            return;
        }
        let sent = client
            .try_send_json(Method::POST, &path("delete", Some(&deleted)), "")
            .await;
        if book(&books, "delete", vec![(deleted, None)], sent, |a| {
            a.body["n_tombstoned"] == 1
        })
        .is_none()
        {
            return;
        }
    }
}

/// An NDJSON bulk writer on `dataset` with explicit ids: each request indexes eight new records
/// (`v`), replaces one of the request before and deletes another of it.
pub(super) async fn bulk_with_ids(
    platform: Signed,
    dataset: &'static str,
    name: String,
    books: Books,
) {
    let id = |n: i64, i: i64| format!("x-{name}n{n}-{i}");
    for n in 0i64.. {
        let mut effects: Effects = (0..8).map(|i| (id(n, i), Some(n * 10 + i))).collect();
        if n > 0 {
            effects.push((id(n - 1, 0), Some(REPLACED + n)));
            effects.push((id(n - 1, 1), None));
        }
        let lines: Vec<Value> = effects
            .iter()
            .flat_map(|(id, v)| match v {
                Some(v) => vec![json!({"index": {"_id": id}}), json!({ "v": v })],
                None => vec![json!({"delete": {"_id": id}})],
            })
            .collect();
        let sent = try_bulk(&platform, dataset, &lines).await;
        if book(&books, "bulk with ids", effects, sent, bulk_ok).is_none() {
            return;
        }
    }
}

/// An NDJSON bulk writer on `records` with generated ids: each record has a unique `mark`, the
/// key it is found by.
async fn bulk_without_ids(platform: Signed, name: String, books: Books) {
    for n in 0i64.. {
        let effects: Effects = (0..8)
            .map(|i| (format!("a-{name}n{n}-{i}"), Some(n * 10 + i)))
            .collect();
        let lines: Vec<Value> = effects
            .iter()
            .flat_map(|(mark, v)| [json!({"index": {}}), json!({"mark": mark, "v": v})])
            .collect();
        let sent = try_bulk(&platform, "records", &lines).await;
        if book(&books, "bulk without ids", effects, sent, bulk_ok).is_none() {
            return;
        }
    }
}

/// A writer of single records of `records`: at each step n, puts a new record, replaces the one
/// of the step before and deletes the one of the step before that.
async fn documents(platform: Signed, name: String, books: Books) {
    let path = |n: i64| format!("/records/_doc/d-{name}n{n}");
    for n in 0i64.. {
        let mut steps = vec![("PUT", n, Some(n), 201)];
        if n > 0 {
            steps.push(("PUT", n - 1, Some(REPLACED + n), 200));
        }
        if n > 1 {
            steps.push(("DELETE", n - 2, None, 200));
        }
        for (method, of, value, status) in steps {
            let path = path(of);
            let body = value.map_or(Value::Null, |v| json!({ "v": v }));
            let sent = try_json(&platform, method, &path, &body).await;
            let effects = vec![(format!("d-{name}n{of}"), value)];
            if book(&books, "document", effects, sent, |a| a.status == status).is_none() {
                return;
            }
        }
    }
}

/// Every key of the data-plane tables and of dataset `records`.
async fn rows_and_records(server: &Server, key: &str, root: &Credentials) -> Found {
    let mut found = Found::new();
    let client = server.client(key);
    for c in 0..3 {
        let query = json!({"sql": format!("SELECT k, v FROM t{c}")});
        let answer = client.post_json("/v1/query_sql/db", &query).await;
        assert_eq!(answer.status, 200, "{answer:?}");
        let rows: Vec<Value> = answer.body["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|row| json!([row["k"], row["v"]]))
            .collect();
        tally(&mut found, &rows);
    }
    let query = "SELECT coalesce(mark, _id), v FROM records";
    tally_sql(&mut found, &Signed::new(server, root), query).await;
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn data_plane_writes_bulk_and_single_records_survive_kill_9() {
    let (dir, mut server, root) = start(&ARGS);
    let key = account_with_key(dir.path(), "acme", None);
    let client = server.client(&key);
    assert_eq!(client.create_database("db").await.status, 201);
    for c in 0..3 {
        let table = json!({"name": format!("t{c}"), "schema": [
            {"name": "k", "type": "utf8", "nullable": false},
            {"name": "v", "type": "int64", "nullable": false}]});
        assert_eq!(client.create_table("db", &table).await.status, 200);
    }
    let properties = json!({"mark": {"type": "keyword"}, "v": {"type": "long"}});
    dataset(&Signed::new(&server, &root), "records", properties).await;
    let books = Books::default();
    for round in 0..ROUNDS {
        let platform = Signed::new(&server, &root);
        let mut writers = Vec::new();
        for c in 0..3 {
            let (table, name) = (format!("t{c}"), format!("r{round}c{c}"));
            let writer = data_plane(server.client(&key), table, name, books.clone());
            writers.push(tokio::spawn(writer));
        }
        for c in 0..2 {
            let name = format!("r{round}c{c}");
            let writer = bulk_with_ids(platform.clone(), "records", name.clone(), books.clone());
            writers.push(tokio::spawn(writer));
            writers.push(tokio::spawn(documents(
                platform.clone(),
                name,
                books.clone(),
            )));
        }
        let writer = bulk_without_ids(platform.clone(), format!("r{round}"), books.clone());
        writers.push(tokio::spawn(writer));
        tokio::time::sleep(WRITING).await;
        crash(&mut server, &ARGS, writers).await;
        let found = rows_and_records(&server, &key, &root).await;
        books.lock().unwrap().check(&found);
    }
    let kinds = [
        "append",
        "update",
        "delete",
        "bulk with ids",
        "bulk without ids",
        "document",
    ];
    books.lock().unwrap().made_progress(&kinds, 3);
}
