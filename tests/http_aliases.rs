//! Dataset aliases over HTTP, as Elasticsearch's index aliases: made with a dataset, by PUT
//! /{index}/_alias/{name} and by POST /_aliases; searches and counts through them (filtered
//! ones too), writes to their write index, `require_alias`, `indices_boost`, listings, and
//! refusals that change nothing. Aliases are catalog events, so they survive a restart.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{Server, Signed, root_user};
use serde_json::{Value, json};

async fn bulk(platform: &Signed, path: &str, lines: &[Value]) -> Value {
    let answer = platform.send_ndjson("POST", path, lines).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    answer.body
}

async fn ok(platform: &Signed, method: &str, path: &str, body: Option<&Value>) -> Value {
    let answer = platform.send(method, path, body).await;
    assert_eq!(answer.status, 200, "{method} {path}: {answer:?}");
    answer.body
}

/// The `_index` of each hit, in order, and the total.
async fn search(platform: &Signed, path: &str, body: &Value) -> (Vec<String>, u64) {
    let answer = ok(platform, "POST", path, Some(body)).await;
    let hits = answer["hits"]["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["_index"].as_str().unwrap().to_owned())
        .collect();
    (hits, answer["hits"]["total"]["value"].as_u64().unwrap())
}

/// Datasets logs-1 (two records, one an error) and logs-2 (one record); alias `logs` over both
/// with logs-2 its write index, made at creation and by PUT; `errors`, filtered, over logs-1.
async fn logs(platform: &Signed) {
    ok(platform, "PUT", "/logs-1", None).await;
    let create = json!({"aliases": {"logs": {"is_write_index": true}}});
    ok(platform, "PUT", "/logs-2", Some(&create)).await;
    ok(platform, "PUT", "/logs-1/_alias/logs", None).await;
    let filter = json!({"filter": {"term": {"level": "error"}}});
    ok(platform, "PUT", "/logs-1/_alias/errors", Some(&filter)).await;
    bulk(
        platform,
        "/_bulk",
        &[
            json!({"index": {"_index": "logs-1", "_id": "a"}}),
            json!({"level": "error", "msg": "disk full"}),
            json!({"index": {"_index": "logs-1", "_id": "b"}}),
            json!({"level": "info", "msg": "disk fine"}),
            json!({"index": {"_index": "logs-2", "_id": "c"}}),
            json!({"level": "info", "msg": "all fine"}),
        ],
    )
    .await;
}

#[tokio::test]
async fn searches_and_counts_read_through_aliases_and_their_filters() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let platform = Signed::new(&server, &root_user(dir.path(), "acme"));
    logs(&platform).await;

    let all = json!({"query": {"match_all": {}}, "sort": ["_id"]});
    let (hits, total) = search(&platform, "/logs/_search", &all).await;
    assert_eq!(
        (hits, total),
        (vec!["logs-1".into(), "logs-1".into(), "logs-2".into()], 3)
    );
    // The filter of `errors` applies to what is searched through it...
    let (hits, total) = search(&platform, "/errors/_search", &all).await;
    assert_eq!((hits, total), (vec!["logs-1".to_owned()], 1));
    let count = ok(&platform, "GET", "/errors/_count", None).await;
    assert_eq!(count["count"], 1);
    // ... and is combined with the search's own query.
    let disk = json!({"query": {"match": {"msg": "fine"}}});
    assert_eq!(search(&platform, "/errors/_search", &disk).await.1, 0);
    assert_eq!(search(&platform, "/logs/_search", &disk).await.1, 2);
    // A dataset named as well as reached through a filtered alias is read whole.
    assert_eq!(search(&platform, "/errors,logs-1/_search", &all).await.1, 2);
    // Patterns match aliases too.
    assert_eq!(search(&platform, "/err*/_search", &all).await.1, 1);
    // An alias's mapping is its datasets'.
    let mapping = ok(&platform, "GET", "/logs/_mapping", None).await;
    let mut names: Vec<&String> = mapping.as_object().unwrap().keys().collect();
    names.sort();
    assert_eq!(names, ["logs-1", "logs-2"]);
    // A name that is neither a dataset nor an alias is a 404, unless unavailable ones are
    // ignored.
    assert_eq!(
        platform
            .send("POST", "/logs,nope/_search", Some(&all))
            .await
            .status,
        404
    );
    let lenient = search(
        &platform,
        "/logs,nope/_search?ignore_unavailable=true",
        &all,
    )
    .await;
    assert_eq!(lenient.1, 3);

    // indices_boost: the first entry that names a dataset (by name, pattern or alias) scales
    // its scores.
    let query = |boost: Value| json!({"query": {"match": {"msg": "disk fine all"}}, "indices_boost": boost});
    let (hits, _) = search(&platform, "/_search", &query(json!([{"logs-2": 10.0}]))).await;
    assert_eq!(hits[0], "logs-2");
    let (hits, _) = search(
        &platform,
        "/_search",
        &query(json!([{"errors": 100.0}, {"logs-2": 10.0}])),
    )
    .await;
    assert_eq!(hits[..2], ["logs-1", "logs-1"]);
    let (hits, _) = search(&platform, "/_search", &query(json!({"*-2": 10.0}))).await;
    assert_eq!(hits[0], "logs-2");
    let missing = platform
        .send("POST", "/_search", Some(&query(json!([{"nope": 2.0}]))))
        .await;
    assert_eq!(missing.status, 404, "{missing:?}");
    assert!(
        missing.body["message"]
            .as_str()
            .unwrap()
            .contains("no such index [nope]")
    );
}

#[tokio::test]
async fn writes_to_an_alias_reach_its_write_index() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let platform = Signed::new(&server, &root_user(dir.path(), "acme"));
    logs(&platform).await;

    let answer = bulk(
        &platform,
        "/_bulk",
        &[
            json!({"index": {"_index": "logs", "_id": "d"}}),
            json!({"level": "warn"}),
            // Two datasets, no write index.
            json!({"index": {"_index": "errors-and-more", "require_alias": true}}),
            json!({"level": "warn"}),
        ],
    )
    .await;
    assert_eq!(answer["items"][0]["index"]["_index"], "logs-2");
    assert_eq!(answer["items"][0]["index"]["status"], 201);
    assert_eq!(answer["items"][1]["index"]["status"], 404);
    assert_eq!(
        answer["items"][1]["index"]["error"]["reason"],
        "no such index [errors-and-more] and [require_alias] request flag is [true] and [errors-and-more] is not an alias"
    );
    // Nothing was auto-created for the refused item.
    assert_eq!(
        platform.send("GET", "/errors-and-more", None).await.status,
        404
    );
    assert_eq!(search(&platform, "/logs-2/_search", &json!({})).await.1, 2);
    // The single-record API writes through an alias too.
    let put = platform
        .send("PUT", "/logs/_doc/e", Some(&json!({"level": "debug"})))
        .await;
    assert_eq!(put.status, 201, "{put:?}");
    assert_eq!(put.body["_index"], "logs-2");

    // Without a write index, writes to an alias of several datasets fail alone.
    let body = json!({"actions": [{"add": {"index": "logs-2", "alias": "logs", "is_write_index": false}}]});
    ok(&platform, "POST", "/_aliases", Some(&body)).await;
    let answer = bulk(
        &platform,
        "/logs/_bulk",
        &[json!({"index": {}}), json!({"level": "warn"})],
    )
    .await;
    let item = &answer["items"][0]["index"];
    assert_eq!(item["status"], 400);
    assert_eq!(item["error"]["type"], "illegal_argument_exception");
    assert!(
        item["error"]["reason"]
            .as_str()
            .unwrap()
            .starts_with("no write index is defined for alias [logs]")
    );
    // The request-level flag accepts an alias and refuses the rest.
    let answer = bulk(
        &platform,
        "/_bulk?require_alias=true",
        &[
            json!({"index": {"_index": "errors"}}),
            json!({"level": "error"}),
            json!({"index": {"_index": "fresh"}}),
            json!({"level": "error"}),
            json!({"index": {"_index": "fresh", "require_alias": false}}),
            json!({"level": "error"}),
        ],
    )
    .await;
    let statuses: Vec<u64> = answer["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["index"]["status"].as_u64().unwrap())
        .collect();
    assert_eq!(statuses, [201, 404, 201]);
    assert_eq!(answer["items"][0]["index"]["_index"], "logs-1");
}

#[tokio::test]
async fn aliases_are_listed_changed_at_once_and_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(dir.path(), &[]);
    let root = root_user(dir.path(), "acme");
    let platform = Signed::new(&server, &root);
    logs(&platform).await;

    let listing = ok(&platform, "GET", "/_alias", None).await;
    assert_eq!(
        listing,
        json!({
            "logs-1": {"aliases": {"errors": {"filter": {"term": {"level": "error"}}}, "logs": {}}},
            "logs-2": {"aliases": {"logs": {"is_write_index": true}}},
        })
    );
    let named = ok(&platform, "GET", "/_alias/errors", None).await;
    assert_eq!(
        named.as_object().unwrap().keys().collect::<Vec<_>>(),
        ["logs-1"]
    );
    let of_one = ok(&platform, "GET", "/logs-2/_alias", None).await;
    assert_eq!(
        of_one,
        json!({"logs-2": {"aliases": {"logs": {"is_write_index": true}}}})
    );
    assert_eq!(platform.send("GET", "/_alias/nope", None).await.status, 404);
    assert_eq!(
        platform.send("HEAD", "/_alias/logs", None).await.status,
        200
    );
    assert_eq!(
        platform.send("HEAD", "/_alias/nope", None).await.status,
        404
    );
    let index = ok(&platform, "GET", "/logs-2", None).await;
    assert_eq!(
        index["logs-2"]["aliases"],
        json!({"logs": {"is_write_index": true}})
    );
    assert_eq!(
        index["logs-2"]["settings"]["index"]["number_of_shards"],
        "1"
    );
    let cat = ok(&platform, "GET", "/_cat/aliases?format=json", None).await;
    assert_eq!(cat.as_array().unwrap().len(), 3);

    // A request that fails in any action changes nothing.
    let before = listing.clone();
    for (body, status) in [
        // The second action names a dataset that does not exist.
        (
            json!({"actions": [
                {"remove": {"index": "logs-1", "alias": "logs"}},
                {"add": {"index": "nope", "alias": "x"}},
            ]}),
            404,
        ),
        // Two write indexes.
        (
            json!({"actions": [{"add": {"index": "logs-1", "alias": "logs", "is_write_index": true}}]}),
            400,
        ),
        // An alias may not take a dataset's name, nor a dataset an alias's.
        (
            json!({"actions": [{"add": {"index": "logs-1", "alias": "logs-2"}}]}),
            400,
        ),
        (
            json!({"actions": [{"add": {"index": "logs-1", "alias": "x", "filter": {"bogus": {}}}}]}),
            400,
        ),
    ] {
        let answer = platform.send("POST", "/_aliases", Some(&body)).await;
        assert_eq!(answer.status, status, "{body}: {answer:?}");
        assert_eq!(ok(&platform, "GET", "/_alias", None).await, before);
    }
    assert_eq!(platform.send("PUT", "/logs", None).await.status, 400);
    assert_eq!(
        platform
            .send("DELETE", "/logs-1/_alias/nope", None)
            .await
            .status,
        404
    );

    // Several changes at once.
    let body = json!({"actions": [
        {"remove": {"index": "logs-1", "alias": "logs"}},
        {"add": {"indices": ["logs-1", "logs-2"], "alias": "every"}},
    ]});
    ok(&platform, "POST", "/_aliases", Some(&body)).await;
    ok(&platform, "DELETE", "/logs-1/_alias/errors", None).await;
    let expected = json!({
        "logs-1": {"aliases": {"every": {}}},
        "logs-2": {"aliases": {"every": {}, "logs": {"is_write_index": true}}},
    });
    assert_eq!(ok(&platform, "GET", "/_alias", None).await, expected);

    // Kept through a restart.
    assert!(server.stop());
    let server = Server::start(dir.path(), &[]);
    let platform = Signed::new(&server, &root);
    assert_eq!(ok(&platform, "GET", "/_alias", None).await, expected);
    assert_eq!(search(&platform, "/every/_search", &json!({})).await.1, 3);

    // A dataset's aliases go with it.
    ok(&platform, "DELETE", "/logs-2", None).await;
    assert_eq!(
        ok(&platform, "GET", "/_alias", None).await,
        json!({"logs-1": {"aliases": {"every": {}}}})
    );
    assert_eq!(
        platform.send("GET", "/logs/_search", None).await.status,
        404
    );
}
