//! NDJSON bulk ingestion over HTTP: POST /{dataset}/json, /_bulk and /{dataset}/_bulk. Items in
//! request order, conflicts and malformed records failing alone, the @timestamp rules, bodies
//! refused whole with nothing written, and a dataset's columns growing with its records (read
//! back through the data plane's SQL, which sees a dataset as a table of database `default`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{Client, Server, Signed, account_with_key, root_user};
use serde_json::{Value, json};

/// Fields drop in order: the server (which prints its log's tail when a test fails) before
/// its directory.
struct Setup {
    server: Server,
    platform: Signed,
    data: Client,
    _dir: tempfile::TempDir,
}

fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let platform = Signed::new(&server, &root_user(dir.path(), "acme"));
    let data = server.client(&account_with_key(dir.path(), "acme", None));
    Setup {
        _dir: dir,
        server,
        platform,
        data,
    }
}

/// Rows of a query over the account's datasets.
async fn sql(data: &Client, query: &str) -> Vec<Value> {
    let answer = data
        .post_json("/v1/query_sql/default", &json!({ "sql": query }))
        .await;
    assert_eq!(answer.status, 200, "{query}: {answer:?}");
    answer.body["data"].as_array().unwrap().clone()
}

/// Each item's action, result (or error type) and status.
fn summary(answer: &common::Answer) -> Vec<(String, String, u64)> {
    assert_eq!(answer.status, 200, "{answer:?}");
    answer.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| {
            let (action, body) = item.as_object().unwrap().iter().next().unwrap();
            let what = body["result"]
                .as_str()
                .or_else(|| body["error"]["type"].as_str())
                .unwrap()
                .to_owned();
            (action.clone(), what, body["status"].as_u64().unwrap())
        })
        .collect()
}

fn item(action: &str, what: &str, status: u64) -> (String, String, u64) {
    (action.to_owned(), what.to_owned(), status)
}

#[tokio::test]
async fn items_come_back_in_request_order_and_failures_stay_alone() {
    let s = setup();
    let before = chrono::Utc::now().timestamp_millis();
    let body = concat!(
        "{\"index\": {\"_id\": \"1\"}}\n",
        "{\"status\": 200, \"path\": \"/a\", \"@timestamp\": \"2026-11-23T10:00:00Z\"}\n",
        "{\"create\": {}}\n",
        "{\"status\": 404, \"path\": \"/b\", \"@timestamp\": 1795428000000}\n",
        "{\"create\": {\"_id\": \"1\"}}\n",
        "{\"status\": 500}\n",
        "{\"index\": {\"_id\": \"2\"}}\n",
        "{\"status\": 201, \"path\": \n",
        "{\"delete\": {\"_id\": \"nobody\"}}\n",
        "{\"index\": {\"_id\": \"3\"}}\n",
        "{\"status\": 302, \"@timestamp\": \"in a while\"}\n",
        "{\"index\": {\"_id\": \"4\"}}\n",
        "{\"status\": 204}\n",
    );
    let answer = s
        .platform
        .send_text("POST", "/logs/json", "application/x-ndjson", body)
        .await;
    assert_eq!(
        summary(&answer),
        [
            item("index", "created", 201),
            item("create", "created", 201),
            item("create", "version_conflict_engine_exception", 409),
            item("index", "mapper_parsing_exception", 400),
            item("delete", "not_found", 404),
            item("index", "created", 201),
            item("index", "created", 201),
        ]
    );
    assert_eq!(answer.body["errors"], true);
    assert!(answer.body["took"].is_u64(), "{answer:?}");
    let items = answer.body["items"].as_array().unwrap();
    let first = &items[0]["index"];
    assert_eq!(first["_index"], "logs");
    assert_eq!(first["_id"], "1");
    assert_eq!(first["_version"], 1);
    assert_eq!(
        first["_shards"],
        json!({"total": 1, "successful": 1, "failed": 0})
    );
    // Without an _id, one is generated.
    let generated = items[1]["create"]["_id"].as_str().unwrap();
    assert_eq!(generated.len(), 20);
    let conflict = &items[2]["create"];
    assert_eq!(conflict["error"]["index"], "logs");
    assert!(
        conflict["error"]["reason"]
            .as_str()
            .unwrap()
            .contains("document already exists"),
        "{conflict}"
    );
    assert!(items[4]["delete"].get("_shards").is_none());

    // The five records are there, each as written; the @timestamp rules hold.
    let rows = sql(
        &s.data,
        "SELECT _id, status, path, CAST(\"@timestamp\" AS BIGINT) AS at FROM logs ORDER BY status",
    )
    .await;
    let after = chrono::Utc::now().timestamp_millis();
    let ids: Vec<&str> = rows.iter().map(|r| r["_id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["1", "4", "3", generated]);
    assert_eq!(rows[0]["at"], 1_795_428_000_000_i64, "a valid date is kept");
    assert_eq!(
        rows[3]["at"], 1_795_428_000_000_i64,
        "milliseconds are kept"
    );
    for row in &rows[1..3] {
        // An invalid @timestamp, and a missing one, are the upload time.
        let at = row["at"].as_i64().unwrap();
        assert!((before..=after).contains(&at), "{row}");
    }
    assert_eq!(rows[0]["path"], "/a");
    assert_eq!(rows[1]["path"], Value::Null);
}

#[tokio::test]
async fn index_replaces_a_record_and_delete_removes_it() {
    let s = setup();
    let write = |lines: Vec<Value>| {
        let platform = s.platform.clone();
        async move { platform.send_ndjson("POST", "/people/json", &lines).await }
    };
    let answer = write(vec![
        json!({"index": {"_id": "ann"}}),
        json!({"name": "Ann", "visits": 1}),
        json!({"index": {"_id": "bob"}}),
        json!({"name": "Bob", "visits": 1}),
    ])
    .await;
    assert_eq!(answer.body["errors"], false, "{answer:?}");

    let events = "strata_log_appended_events_total";
    let before = s.data.counter(events).await;
    let answer = write(vec![
        json!({"index": {"_id": "ann"}}),
        json!({"name": "Ann", "visits": 2}),
        json!({"delete": {"_id": "bob"}}),
        // Within one request, operations see the ones before them.
        json!({"create": {"_id": "cid"}}),
        json!({"name": "Cid", "visits": 1}),
        json!({"index": {"_id": "cid"}}),
        json!({"name": "Cid", "visits": 2}),
        json!({"create": {"_id": "dee"}}),
        json!({"name": "Dee", "visits": 1}),
        json!({"delete": {"_id": "dee"}}),
        json!({"create": {"_id": "dee"}}),
        json!({"name": "Dee", "visits": 3}),
    ])
    .await;
    assert_eq!(
        summary(&answer),
        [
            item("index", "updated", 200),
            item("delete", "deleted", 200),
            item("create", "created", 201),
            item("index", "updated", 200),
            item("create", "created", 201),
            item("delete", "deleted", 200),
            item("create", "created", 201),
        ]
    );
    // Replacements, deletes and creates of one dataset are one event (ADR 2).
    assert_eq!(s.data.counter(events).await, before + 1.0);
    let rows = sql(&s.data, "SELECT _id, visits FROM people ORDER BY _id").await;
    assert_eq!(
        rows,
        [
            json!({"_id": "ann", "visits": 2}),
            json!({"_id": "cid", "visits": 2}),
            json!({"_id": "dee", "visits": 3}),
        ]
    );
    let info = s.platform.send("GET", "/people/metadata", None).await;
    assert_eq!(info.body["docs.count"], "3", "{info:?}");
}

#[tokio::test]
async fn a_body_that_is_not_bulk_ndjson_is_refused_whole() {
    let s = setup();
    let events = "strata_log_appended_events_total";
    let before = s.data.counter(events).await;
    let refused = |answer: common::Answer, needle: &str| {
        assert_eq!(answer.status, 400, "{answer:?}");
        assert_eq!(answer.body["status"], "error", "{answer:?}");
        let message = answer.body["message"].as_str().unwrap();
        assert!(message.starts_with("bulk: "), "{message}");
        assert!(
            message.contains(needle),
            "{message:?} should say {needle:?}"
        );
    };
    let array = json!([{"index": {}}, {"a": 1}]).to_string() + "\n";
    refused(
        s.platform
            .send_text("POST", "/logs/json", "application/json", &array)
            .await,
        "not a JSON array",
    );
    refused(
        s.platform
            .send_text(
                "POST",
                "/logs/json",
                "application/x-ndjson",
                "{\"index\": {}}\n{\"a\": 1}",
            )
            .await,
        "terminated by a newline",
    );
    refused(
        s.platform
            .send_text(
                "POST",
                "/logs/json",
                "application/x-ndjson",
                "{\"index\": {\"_id\": \"1\"}}\n{\"a\": 1}\n{}\n",
            )
            .await,
        "Malformed action/metadata line [3], expected FIELD_NAME but found [END_OBJECT]",
    );
    refused(
        s.platform
            .send_text("POST", "/logs/json", "text/csv", "a,b\n")
            .await,
        "Content-Type \"text/csv\" is not supported",
    );
    refused(
        s.platform
            .send_ndjson(
                "POST",
                "/logs/json?colour=blue",
                &[json!({"index": {}}), json!({})],
            )
            .await,
        "unrecognized parameter: [colour]",
    );
    // Nothing was written: not even the dataset.
    assert_eq!(s.data.counter(events).await, before);
    let listed = s.platform.send("GET", "/metadata", None).await;
    assert_eq!(listed.body, json!([]), "{listed:?}");
    // A name the platform refuses fails the item.
    let answer = s
        .platform
        .send_ndjson(
            "POST",
            "/_bulk",
            &[json!({"index": {"_index": "_x"}}), json!({"a": 1})],
        )
        .await;
    assert_eq!(
        summary(&answer),
        [item("index", "invalid_index_name_exception", 400)]
    );
}

#[tokio::test]
async fn bulk_routes_each_operation_to_its_dataset() {
    let s = setup();
    let answer = s
        .platform
        .send_ndjson(
            "POST",
            "/_bulk?refresh=true",
            &[
                json!({"index": {"_index": "web", "_id": "1"}}),
                json!({"f": 1}),
                json!({"index": {"_index": "app"}}),
                json!({"f": 2}),
                json!({"index": {}}),
                json!({"f": 3}),
                json!({"delete": {"_index": "nowhere", "_id": "1"}}),
                json!({"index": {"_index": "web", "_id": ""}}),
                json!({"f": 4}),
            ],
        )
        .await;
    assert_eq!(
        summary(&answer),
        [
            item("index", "created", 201),
            item("index", "created", 201),
            item("index", "action_request_validation_exception", 400),
            item("delete", "index_not_found_exception", 404),
            item("index", "illegal_argument_exception", 400),
        ]
    );
    let items = answer.body["items"].as_array().unwrap();
    assert_eq!(
        items[4]["index"]["error"]["reason"],
        "if _id is specified it must not be empty"
    );
    // The datasets were made on their first record; a delete makes none.
    let listed = s.platform.send("GET", "/metadata", None).await;
    let names: Vec<&str> = listed
        .body
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["index"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["app", "web"]);
    // /{dataset}/_bulk: the path names the dataset, an action line may name another.
    let answer = s
        .platform
        .send_ndjson(
            "PUT",
            "/web/_bulk",
            &[
                json!({"create": {"_id": "2"}}),
                json!({"f": 5}),
                json!({"create": {"_index": "app", "_id": "2"}}),
                json!({"f": 6}),
            ],
        )
        .await;
    assert_eq!(answer.body["errors"], false, "{answer:?}");
    let web = sql(&s.data, "SELECT f FROM web ORDER BY f").await;
    let app = sql(&s.data, "SELECT f FROM app ORDER BY f").await;
    assert_eq!(web, [json!({"f": 1}), json!({"f": 5})]);
    assert_eq!(app, [json!({"f": 2}), json!({"f": 6})]);
}

#[tokio::test]
async fn columns_grow_and_change_type_and_records_survive_a_restart() {
    let mut s = setup();
    let steps = [
        json!({"n": 1, "user": {"name": "ann"}}),
        json!({"n": 2.5, "ok": true}),
        json!({"n": "many", "at": "2026-11-23T10:00:00Z"}),
        json!({"at": "not a date", "tags": ["a", "b"]}),
    ];
    for (i, record) in steps.iter().enumerate() {
        let answer = s
            .platform
            .send_ndjson(
                "POST",
                "/events/json",
                &[json!({"index": {"_id": i.to_string()}}), record.clone()],
            )
            .await;
        assert_eq!(answer.body["errors"], false, "{answer:?}");
    }
    let expected_columns = [
        ("_id", "utf8"),
        ("@timestamp", "timestamp[ms,UTC]"),
        ("n", "utf8"),
        ("user.name", "utf8"),
        ("ok", "bool"),
        ("at", "utf8"),
        ("tags", "list<utf8>"),
    ];
    let schema = s.data.schema("default", "events").await;
    let columns: Vec<(&str, &str)> = schema
        .body
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["name"].as_str().unwrap(), c["type"].as_str().unwrap()))
        .collect();
    assert_eq!(columns, expected_columns);
    let query = "SELECT _id, n, \"user.name\" AS name, ok, at, tags FROM events ORDER BY _id";
    let expected = [
        json!({"_id": "0", "n": "1", "name": "ann", "ok": null, "at": null, "tags": null}),
        json!({"_id": "1", "n": "2.5", "name": null, "ok": true, "at": null, "tags": null}),
        json!({"_id": "2", "n": "many", "name": null, "ok": null, "at": "2026-11-23T10:00:00Z", "tags": null}),
        json!({"_id": "3", "n": null, "name": null, "ok": null, "at": "not a date", "tags": ["a", "b"]}),
    ];
    assert_eq!(sql(&s.data, query).await, expected);

    // The mapping in force, as Elasticsearch shows one.
    let mapping = s.platform.send("GET", "/events/_mapping", None).await;
    assert_eq!(mapping.status, 200, "{mapping:?}");
    let properties = &mapping.body["events"]["mappings"]["properties"];
    assert_eq!(properties["@timestamp"]["type"], "date");
    assert_eq!(properties["n"]["type"], "text");
    assert_eq!(properties["n"]["fields"]["keyword"]["type"], "keyword");
    assert_eq!(properties["ok"]["type"], "boolean");
    assert_eq!(properties["user"]["properties"]["name"]["type"], "text");
    assert!(properties.get("_id").is_none(), "{properties}");
    let all = s.platform.send("GET", "/_mapping", None).await;
    assert_eq!(all.body["events"], mapping.body["events"]);
    assert_eq!(
        s.platform.send("GET", "/nope/_mapping", None).await.status,
        404
    );

    // After a restart the records come from segments and the log, in the same schema.
    assert!(s.server.stop());
    s.server = Server::start(s._dir.path(), &[]);
    let data = s
        .server
        .client(&account_with_key(s._dir.path(), "acme", None));
    assert_eq!(sql(&data, query).await, expected);
}

#[tokio::test]
async fn concurrent_writers_each_bringing_new_fields_all_land() {
    // Four datasets at once, eight writers each: every write that brings a field replaces
    // its dataset's writer while others write, which is the race this test exists for (a
    // replaced writer's projection stopping on its successor's rows failed writes with 500).
    let s = setup();
    let datasets = ["busy", "busy_b", "busy_c", "busy_d"];
    let mut tasks = Vec::new();
    for dataset in datasets {
        for writer in 0..8 {
            let platform = s.platform.clone();
            tasks.push(tokio::spawn(async move {
                let mut lines = Vec::new();
                for i in 0..25 {
                    lines.push(json!({"index": {"_id": format!("{writer}-{i}")}}));
                    lines.push(json!({ format!("field_{writer}"): i, "shared": writer }));
                }
                platform
                    .send_ndjson("POST", &format!("/{dataset}/json"), &lines)
                    .await
            }));
        }
    }
    for task in tasks {
        let answer = task.await.unwrap();
        assert_eq!(answer.status, 200, "{answer:?}");
        assert_eq!(answer.body["errors"], false, "{answer:?}");
    }
    for dataset in datasets {
        let rows = sql(
            &s.data,
            &format!("SELECT COUNT(*) AS n, COUNT(field_0) AS a, COUNT(field_1) AS b, COUNT(field_2) AS c, COUNT(field_3) AS d, COUNT(field_7) AS h FROM {dataset}"),
        )
        .await;
        assert_eq!(
            rows,
            [json!({"n": 200, "a": 25, "b": 25, "c": 25, "d": 25, "h": 25})],
            "{dataset}"
        );
    }
}

#[tokio::test]
async fn the_single_record_api_writes_reads_and_deletes_by_id() {
    let s = setup();
    let put = s
        .platform
        .send(
            "PUT",
            "/people/_doc/ann",
            Some(&json!({"name": "Ann", "visits": 1})),
        )
        .await;
    assert_eq!(
        (put.status, &put.body["result"]),
        (201, &json!("created")),
        "{put:?}"
    );
    assert_eq!(put.body["_id"], "ann");
    let again = s
        .platform
        .send(
            "PUT",
            "/people/_doc/ann",
            Some(&json!({"name": "Ann", "visits": 2})),
        )
        .await;
    assert_eq!(
        (again.status, &again.body["result"]),
        (200, &json!("updated"))
    );
    let conflict = s
        .platform
        .send(
            "PUT",
            "/people/_create/ann",
            Some(&json!({"name": "Other"})),
        )
        .await;
    assert_eq!(conflict.status, 409, "{conflict:?}");
    assert_eq!(
        conflict.body["error"]["type"],
        "version_conflict_engine_exception"
    );
    let posted = s
        .platform
        .send("POST", "/people/_doc", Some(&json!({"name": "Bob"})))
        .await;
    assert_eq!(posted.status, 201, "{posted:?}");
    assert_eq!(posted.body["_id"].as_str().unwrap().len(), 20);

    let got = s.platform.send("GET", "/people/_doc/ann", None).await;
    assert_eq!(got.status, 200, "{got:?}");
    assert_eq!(got.body["found"], true);
    assert_eq!(got.body["_source"]["visits"], 2);
    assert!(got.body["_source"]["@timestamp"].is_string());

    let deleted = s.platform.send("DELETE", "/people/_doc/ann", None).await;
    assert_eq!(
        (deleted.status, &deleted.body["result"]),
        (200, &json!("deleted"))
    );
    let gone = s.platform.send("GET", "/people/_doc/ann", None).await;
    assert_eq!((gone.status, &gone.body["found"]), (404, &json!(false)));
    let again = s.platform.send("DELETE", "/people/_doc/ann", None).await;
    assert_eq!(
        (again.status, &again.body["result"]),
        (404, &json!("not_found"))
    );
    let bad = s
        .platform
        .send_text("PUT", "/people/_doc/x", "application/json", "[1, 2]")
        .await;
    assert_eq!(bad.status, 400, "{bad:?}");
    assert_eq!(bad.body["error"]["type"], "mapper_parsing_exception");
}

#[tokio::test]
async fn enrich_gives_records_the_fields_of_the_matching_source_record() {
    let s = setup();
    let users = [
        json!({"index": {}}),
        json!({"email": "a@x", "name": "Ann", "city": "Oslo"}),
        json!({"index": {}}),
        json!({"email": "b@x", "name": "Bob", "city": "Rome"}),
        json!({"index": {}}),
        json!({"email": "a@x", "name": "Ann again", "city": "Later"}),
    ];
    let orders = [
        json!({"index": {"_id": "1"}}),
        json!({"order": 1, "email": "a@x", "@timestamp": "2026-11-23T10:00:00Z"}),
        json!({"index": {"_id": "2"}}),
        json!({"order": 2, "email": "b@x"}),
        json!({"index": {"_id": "3"}}),
        json!({"order": 3, "email": "c@x"}),
        json!({"index": {"_id": "4"}}),
        json!({"order": 4, "email": "a@x", "city": "Old"}),
    ];
    for (dataset, lines) in [("customers", &users[..]), ("orders", &orders[..])] {
        let written = s
            .platform
            .send_ndjson("POST", &format!("/{dataset}/json"), lines)
            .await;
        assert_eq!(written.body["errors"], false, "{written:?}");
    }
    let policy = json!({"enrich_policy": {
        "indices": "customers", "match_field": "email", "enrich_fields": ["name", "city"],
    }});
    let answer = s
        .platform
        .send("POST", "/orders/enrich_dataset", Some(&policy))
        .await;
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(answer.body, json!({"acknowledged": true, "enriched": 3}));
    let rows = sql(
        &s.data,
        "SELECT _id, name, city, CAST(\"@timestamp\" AS BIGINT) AS at FROM orders ORDER BY _id",
    )
    .await;
    let got: Vec<(Value, Value, Value)> = rows
        .iter()
        .map(|r| (r["_id"].clone(), r["name"].clone(), r["city"].clone()))
        .collect();
    assert_eq!(
        got,
        [
            (json!("1"), json!("Ann"), json!("Oslo")),
            (json!("2"), json!("Bob"), json!("Rome")),
            (json!("3"), Value::Null, Value::Null),
            (json!("4"), json!("Ann"), json!("Oslo")),
        ]
    );
    // The record's own fields, its time included, are kept.
    assert_eq!(rows[0]["at"], 1_795_428_000_000_i64);
    // Nothing left to change.
    let again = s
        .platform
        .send("POST", "/orders/enrich_dataset", Some(&policy))
        .await;
    assert_eq!(again.body["enriched"], 0, "{again:?}");

    // Without a source, a dataset enriches itself: records gain what another with the same key has.
    let people = [
        json!({"index": {"_id": "p1"}}),
        json!({"team": "red", "colour": "#f00"}),
        json!({"index": {"_id": "p2"}}),
        json!({"team": "red"}),
    ];
    let written = s
        .platform
        .send_ndjson("POST", "/people/json", &people)
        .await;
    assert_eq!(written.body["errors"], false, "{written:?}");
    let own = json!({"enrich_policy": {"match_field": "team", "enrich_fields": ["colour"]}});
    let answer = s
        .platform
        .send("POST", "/people/enrich_dataset", Some(&own))
        .await;
    assert_eq!(answer.body["enriched"], 1, "{answer:?}");
    let rows = sql(&s.data, "SELECT _id, colour FROM people ORDER BY _id").await;
    assert_eq!(
        rows,
        [
            json!({"_id": "p1", "colour": "#f00"}),
            json!({"_id": "p2", "colour": "#f00"})
        ]
    );

    for (path, body, status, needle) in [
        (
            "/orders/enrich_dataset",
            json!({"policy": {}}),
            400,
            "enrich_policy",
        ),
        (
            "/orders/enrich_dataset",
            json!({"enrich_policy": {"indices": "customers", "match_field": "email", "enrich_fields": ["age"]}}),
            400,
            "has no field \"age\"",
        ),
        (
            "/orders/enrich_dataset",
            json!({"enrich_policy": {"indices": "nobody", "match_field": "email", "enrich_fields": ["name"]}}),
            404,
            "does not exist",
        ),
    ] {
        let answer = s.platform.send("POST", path, Some(&body)).await;
        assert_eq!(answer.status, status, "{body}: {answer:?}");
        let message = answer.body["message"].as_str().unwrap();
        assert!(message.contains(needle), "{message}");
    }
}

#[tokio::test]
async fn updates_merge_partial_records_create_upserts_and_skip_noops() {
    let s = setup();
    let put = s
        .platform
        .send(
            "PUT",
            "/people/_doc/ann",
            Some(&json!({"name": "Ann", "address": {"city": "Oslo"}, "age": 40})),
        )
        .await;
    assert_eq!(put.status, 201, "{put:?}");
    let answer = s
        .platform
        .send_ndjson(
            "POST",
            "/people/_bulk?_source_excludes=age",
            &[
                // Merged field by field, objects too; a new field grows a column.
                json!({"update": {"_id": "ann"}}),
                json!({"doc": {"address": {"zip": "0150"}, "team": "red"}}),
                // The same again changes nothing.
                json!({"update": {"_id": "ann", "_source": false}}),
                json!({"doc": {"team": "red"}}),
                json!({"update": {"_id": "nobody"}}),
                json!({"doc": {"team": "blue"}}),
                json!({"update": {"_id": "bob"}}),
                json!({"doc": {"team": "blue"}, "upsert": {"name": "Bob", "team": "green"}}),
                json!({"update": {"_id": "cy"}}),
                json!({"doc": {"name": "Cy"}, "doc_as_upsert": true}),
                // An update of a record written earlier in the same request.
                json!({"index": {"_id": "dee"}}),
                json!({"name": "Dee", "age": 30}),
                json!({"update": {"_id": "dee"}}),
                json!({"doc": {"age": 31}}),
                json!({"update": {"_id": "ann"}}),
                json!({"script": {"source": "ctx._source.age += 1"}}),
                json!({"update": {}}),
                json!({"doc": {"age": 1}}),
            ],
        )
        .await;
    assert_eq!(
        summary(&answer),
        vec![
            item("update", "updated", 200),
            item("update", "noop", 200),
            item("update", "document_missing_exception", 404),
            item("update", "created", 201),
            item("update", "created", 201),
            item("index", "created", 201),
            item("update", "updated", 200),
            item("update", "illegal_argument_exception", 400),
            item("update", "action_request_validation_exception", 400),
        ]
    );
    let items = &answer.body["items"];
    assert_eq!(
        items[0]["update"]["get"]["_source"],
        json!({"name": "Ann", "address": {"city": "Oslo", "zip": "0150"}, "team": "red", "@timestamp": items[0]["update"]["get"]["_source"]["@timestamp"]})
    );
    assert!(items[1]["update"].get("get").is_none());
    assert_eq!(
        items[2]["update"]["error"]["reason"],
        "[nobody]: document missing"
    );

    let source = |id: &str| {
        let platform = s.platform.clone();
        let path = format!("/people/_doc/{id}");
        async move {
            let got = platform.send("GET", &path, None).await;
            assert_eq!(got.status, 200, "{got:?}");
            got.body["_source"].clone()
        }
    };
    let ann = source("ann").await;
    assert_eq!(ann["address"], json!({"city": "Oslo", "zip": "0150"}));
    assert_eq!(
        (ann["age"].clone(), ann["team"].clone()),
        (json!(40), json!("red"))
    );
    assert_eq!(source("bob").await["team"], "green");
    assert_eq!(source("cy").await["name"], "Cy");
    assert_eq!(source("dee").await["age"], 31);
    // One live record per id: the updated ones replaced theirs.
    let count = s.platform.send("GET", "/people/_count", None).await;
    assert_eq!(count.body["count"], 4);
    let rows = sql(&s.data, "SELECT team FROM people WHERE _id = 'ann'").await;
    assert_eq!(rows, vec![json!({"team": "red"})]);

    // The single-record update API.
    let updated = s
        .platform
        .send(
            "POST",
            "/people/_update/bob?_source=true",
            Some(&json!({"doc": {"team": "gold"}})),
        )
        .await;
    assert_eq!(updated.status, 200, "{updated:?}");
    assert_eq!(updated.body["result"], "updated");
    assert_eq!(updated.body["get"]["_source"]["team"], "gold");
    let missing = s
        .platform
        .send(
            "POST",
            "/people/_update/zed",
            Some(&json!({"doc": {"a": 1}})),
        )
        .await;
    assert_eq!(missing.status, 404, "{missing:?}");
    assert_eq!(missing.body["error"]["type"], "document_missing_exception");

    // An update of a dataset that does not exist finds no record, and creates nothing.
    let answer = s
        .platform
        .send_ndjson(
            "POST",
            "/_bulk",
            &[
                json!({"update": {"_index": "nowhere", "_id": "1"}}),
                json!({"doc": {"a": 1}}),
            ],
        )
        .await;
    assert_eq!(
        summary(&answer),
        vec![item("update", "document_missing_exception", 404)]
    );
    assert_eq!(
        s.platform
            .send("GET", "/nowhere/metadata", None)
            .await
            .status,
        404
    );
}
