//! What a dataset's mapping declares, over HTTP: declared fields keep their type (a value that
//! does not fit fails its record), `ignore_malformed` leaves such values out and names their
//! fields in `_ignored`, `ip` fields hold addresses (canonical, searched by address, CIDR block
//! and range, aggregated by `ip_range`), and `date_nanos` fields refuse dates before 1970. Also
//! the sibling pipeline aggregations over buckets.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{Answer, Server, Signed, root_user};
use serde_json::{Value, json};

async fn bulk(platform: &Signed, path: &str, lines: &[Value]) -> Value {
    let answer = platform.send_ndjson("POST", path, lines).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    answer.body
}

/// Each item's status.
fn statuses(answer: &Value) -> Vec<u64> {
    answer["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| {
            let (_, body) = item.as_object().unwrap().iter().next().unwrap();
            body["status"].as_u64().unwrap()
        })
        .collect()
}

fn ids(answer: &Answer) -> Vec<String> {
    common::hit_ids(answer)
}

fn start() -> (tempfile::TempDir, Server, Signed) {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let platform = Signed::new(&server, &root_user(dir.path(), "acme"));
    (dir, server, platform)
}

#[tokio::test]
async fn declared_fields_keep_their_type_or_leave_malformed_values_out() {
    let (_dir, _server, platform) = start();
    let mappings = json!({"mappings": {"properties": {
        "when": {"type": "date"},
        "count": {"type": "long"},
        "loose": {"type": "long", "ignore_malformed": true},
        "stamp": {"type": "date_nanos"},
    }}});
    assert_eq!(
        platform
            .send("PUT", "/strict", Some(&mappings))
            .await
            .status,
        200
    );
    let answer = bulk(
        &platform,
        "/strict/_bulk",
        &[
            // A declared field does not turn into text, as a dynamic one would.
            json!({"index": {"_id": "1"}}),
            json!({"when": "not a date"}),
            json!({"index": {"_id": "2"}}),
            json!({"count": "many"}),
            // Several values of its type are welcome.
            json!({"index": {"_id": "3"}}),
            json!({"count": [1, 2], "when": "2026-11-24"}),
            // Malformed values of an ignore_malformed field are left out, one by one.
            json!({"index": {"_id": "4"}}),
            json!({"loose": "lots", "count": 4}),
            json!({"index": {"_id": "5"}}),
            json!({"loose": [5, "five", 6]}),
            // Nanosecond dates start in 1970.
            json!({"index": {"_id": "6"}}),
            json!({"stamp": "1969-12-31T23:59:59Z"}),
            json!({"index": {"_id": "7"}}),
            json!({"stamp": "1970-01-01T00:00:01Z"}),
        ],
    )
    .await;
    assert_eq!(statuses(&answer), [400, 400, 201, 201, 201, 400, 201]);
    let error = &answer["items"][0]["index"]["error"];
    assert_eq!(error["type"], "mapper_parsing_exception");
    assert!(
        error["reason"]
            .as_str()
            .unwrap()
            .starts_with("failed to parse field [when] of type [date]"),
        "{error}"
    );
    assert_eq!(
        answer["items"][5]["index"]["error"]["caused_by"]["reason"],
        "date[1969-12-31T23:59:59Z] is before the epoch in 1970 and cannot be stored in nanosecond resolution"
    );
    let mapping = platform.send("GET", "/strict/_mapping", None).await;
    let properties = &mapping.body["strict"]["mappings"]["properties"];
    assert_eq!(properties["when"]["type"], "date");
    assert_eq!(properties["count"]["type"], "long");

    // `_ignored` names the fields whose values were left out: searchable, shown with hits.
    let search = |query: Value| {
        let platform = platform.clone();
        async move {
            let body = json!({"query": query});
            platform.send("POST", "/strict/_search", Some(&body)).await
        }
    };
    let with_ignored = search(json!({"exists": {"field": "_ignored"}})).await;
    assert_eq!(ids(&with_ignored), ["4", "5"]);
    assert_eq!(
        ids(&search(json!({"term": {"_ignored": "loose"}})).await),
        ["4", "5"]
    );
    let five = search(json!({"ids": {"values": ["5"]}})).await;
    let hit = &five.body["hits"]["hits"][0];
    assert_eq!(hit["_ignored"], json!(["loose"]));
    assert_eq!(hit["_source"]["loose"], json!([5, 6]));
    assert!(hit["_source"].get("_ignored").is_none(), "{hit}");
    let four = search(json!({"ids": {"values": ["4"]}})).await;
    assert!(
        four.body["hits"]["hits"][0]["_source"]
            .get("loose")
            .is_none()
    );
}

#[tokio::test]
async fn an_index_wide_ignore_malformed_yields_to_a_fields_own() {
    let (_dir, _server, platform) = start();
    let body = json!({
        "settings": {"index.mapping.ignore_malformed": true},
        "mappings": {"properties": {
            "a": {"type": "date"},
            "b": {"type": "date", "ignore_malformed": false},
            "c": {"type": "keyword"},
        }},
    });
    assert_eq!(
        platform.send("PUT", "/lenient", Some(&body)).await.status,
        200
    );
    let answer = bulk(
        &platform,
        "/lenient/_bulk",
        &[
            json!({"index": {}}),
            json!({"a": "nope", "c": "x"}),
            json!({"index": {}}),
            json!({"b": "nope"}),
        ],
    )
    .await;
    assert_eq!(statuses(&answer), [201, 400]);
    // A keyword field takes no ignore_malformed.
    let refused =
        json!({"mappings": {"properties": {"k": {"type": "keyword", "ignore_malformed": true}}}});
    assert_eq!(
        platform.send("PUT", "/other", Some(&refused)).await.status,
        400
    );
}

#[tokio::test]
async fn ip_fields_hold_addresses_searched_by_address_block_and_range() {
    let (_dir, _server, platform) = start();
    let body = json!({"mappings": {"properties": {"ip": {"type": "ip"}, "v": {"type": "long"}}}});
    assert_eq!(platform.send("PUT", "/net", Some(&body)).await.status, 200);
    let answer = bulk(
        &platform,
        "/net/_bulk",
        &[
            json!({"index": {"_id": "loopback"}}),
            json!({"ip": "0:0:0:0:0:0:0:1", "v": 1}),
            json!({"index": {"_id": "one"}}),
            json!({"ip": "192.168.0.1", "v": 2}),
            json!({"index": {"_id": "seven"}}),
            json!({"ip": "::ffff:192.168.0.7", "v": 3}),
            json!({"index": {"_id": "both"}}),
            json!({"ip": ["10.0.0.1", "192.168.1.1"], "v": 4}),
            json!({"index": {"_id": "bad"}}),
            json!({"ip": "not an address"}),
        ],
    )
    .await;
    assert_eq!(statuses(&answer), [201, 201, 201, 201, 400]);
    // Addresses are kept in their canonical form (the field holds several values in one
    // record, so `_source` lists every record's).
    let seven = platform.send("GET", "/net/_doc/seven", None).await;
    assert_eq!(seven.body["_source"]["ip"], json!(["192.168.0.7"]));
    let loopback = platform.send("GET", "/net/_doc/loopback", None).await;
    assert_eq!(loopback.body["_source"]["ip"], json!(["::1"]));

    let search = |query: Value| {
        let platform = platform.clone();
        async move {
            let body = json!({"query": query, "size": 10});
            platform.send("POST", "/net/_search", Some(&body)).await
        }
    };
    assert_eq!(
        ids(&search(json!({"term": {"ip": "::1"}})).await),
        ["loopback"]
    );
    assert_eq!(
        ids(&search(json!({"term": {"ip": "192.168.0.0/16"}})).await),
        ["both", "one", "seven"]
    );
    assert_eq!(
        ids(&search(json!({"range": {"ip": {"gt": "192.168.0.1", "lte": "192.168.0.7"}}})).await),
        ["seven"]
    );
    assert_eq!(
        ids(&search(json!({"terms": {"ip": ["10.0.0.0/8", "::1"]}})).await),
        ["both", "loopback"]
    );

    // ip_range buckets, with their sub-aggregations, and a pipeline over them.
    let aggs = json!({"size": 0, "aggs": {
        "nets": {
            "ip_range": {"field": "ip", "ranges": [
                {"to": "192.168.0.0"},
                {"from": "192.168.0.0", "to": "192.169.0.0"},
                {"mask": "10.0.0.0/8"},
                {"from": "200.0.0.0"},
            ]},
            "aggs": {"total": {"sum": {"field": "v"}}},
        },
        "average": {"avg_bucket": {"buckets_path": "nets>total"}},
        "most": {"max_bucket": {"buckets_path": "nets._count"}},
    }});
    let answer = platform.send("POST", "/net/_search", Some(&aggs)).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    let buckets = &answer.body["aggregations"]["nets"]["buckets"];
    let summary: Vec<(String, u64, f64)> = buckets
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            (
                b["key"].as_str().unwrap().to_owned(),
                b["doc_count"].as_u64().unwrap(),
                b["total"]["value"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("*-192.168.0.0".to_owned(), 2, 5.0),
            ("192.168.0.0-192.169.0.0".to_owned(), 3, 9.0),
            ("10.0.0.0/8".to_owned(), 1, 4.0),
            ("200.0.0.0-*".to_owned(), 0, 0.0),
        ]
    );
    assert_eq!(buckets[2]["from"], "10.0.0.0");
    assert_eq!(buckets[2]["to"], "11.0.0.0");
    assert!(buckets[0].get("from").is_none());
    // The empty bucket is a gap the average skips.
    assert_eq!(answer.body["aggregations"]["average"]["value"], json!(6.0));
    assert_eq!(answer.body["aggregations"]["most"]["value"], json!(3.0));

    // A terms aggregation on addresses takes lists of them, not patterns.
    let pattern = json!({"size": 0, "aggs": {"t": {"terms": {"field": "ip", "exclude": "192.*"}}}});
    let refused = platform.send("POST", "/net/_search", Some(&pattern)).await;
    assert_eq!(refused.status, 400, "{refused:?}");
}

#[tokio::test]
async fn field_aliases_and_multi_fields_read_their_fields_values() {
    let (_dir, _server, platform) = start();
    let body = json!({"mappings": {"properties": {
        "title": {"type": "text", "fields": {"raw": {"type": "keyword"}}},
        "at": {"type": "date", "fields": {"nanos": {"type": "date_nanos"}}},
        "name": {"type": "alias", "path": "title"},
    }}});
    assert_eq!(
        platform.send("PUT", "/books", Some(&body)).await.status,
        200
    );
    let answer = bulk(
        &platform,
        "/books/_bulk",
        &[
            json!({"index": {"_id": "1"}}),
            json!({"title": "hello world", "at": "2026-01-05"}),
            json!({"index": {"_id": "2"}}),
            json!({"title": "goodbye", "at": "2026-02-05"}),
            // An alias holds no values of its own.
            json!({"index": {"_id": "3"}}),
            json!({"name": "written to the alias"}),
        ],
    )
    .await;
    assert_eq!(statuses(&answer), [201, 201, 400]);
    assert!(
        answer["items"][2]["index"]["error"]["reason"]
            .as_str()
            .unwrap()
            .starts_with("Cannot write to a field alias [name]")
    );
    let search = |body: Value| {
        let platform = platform.clone();
        async move { platform.send("POST", "/books/_search", Some(&body)).await }
    };
    // Queries, query strings (with regular expressions), sorts and aggregations read through
    // aliases and multi-fields.
    let hello = search(json!({"query": {"match": {"name": "hello"}}})).await;
    assert_eq!(ids(&hello), ["1"]);
    let raw = search(json!({"query": {"term": {"title.raw": "goodbye"}}})).await;
    assert_eq!(ids(&raw), ["2"]);
    let regex = search(json!({"query": {"query_string": {"query": "name: /h[a-z]+o/"}}})).await;
    assert_eq!(ids(&regex), ["1"]);
    let sorted = search(json!({"sort": [{"at.nanos": "desc"}]})).await;
    assert_eq!(sorted.body["hits"]["hits"][0]["_id"], "2");
    let histogram = search(json!({"size": 0, "aggs": {"months": {"date_histogram": {"field": "at.nanos", "calendar_interval": "month"}}}})).await;
    assert_eq!(
        histogram.body["aggregations"]["months"]["buckets"]
            .as_array()
            .unwrap()
            .len(),
        2,
        "{histogram:?}"
    );
    let fields =
        search(json!({"query": {"ids": {"values": ["1"]}}, "docvalue_fields": ["name"]})).await;
    assert_eq!(
        fields.body["hits"]["hits"][0]["fields"]["name"],
        json!(["hello world"])
    );
    // The mapping shows them as declared.
    let mapping = platform.send("GET", "/books/_mapping", None).await;
    let properties = &mapping.body["books"]["mappings"]["properties"];
    assert_eq!(
        properties["name"],
        json!({"type": "alias", "path": "title"})
    );
    assert_eq!(
        properties["title"]["fields"]["raw"],
        json!({"type": "keyword"})
    );
    // An alias must name a field of the mapping.
    let dangling = json!({"mappings": {"properties": {"a": {"type": "alias", "path": "nowhere"}}}});
    assert_eq!(
        platform
            .send("PUT", "/dangling", Some(&dangling))
            .await
            .status,
        400
    );
}

#[tokio::test]
async fn put_mapping_declares_fields_on_a_dataset_that_exists() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(dir.path(), &[]);
    let root = root_user(dir.path(), "acme");
    let platform = Signed::new(&server, &root);
    let answer = bulk(
        &platform,
        "/logs/_bulk",
        &[json!({"index": {}}), json!({"count": 1, "host": "a"})],
    )
    .await;
    assert_eq!(statuses(&answer), [201]);
    // A new field, and a field records brought, declared as the type it has.
    let body = json!({"properties": {
        "client": {"type": "ip"},
        "count": {"type": "long"},
        "name": {"type": "alias", "path": "host"},
    }});
    let put = platform.send("PUT", "/logs/_mapping", Some(&body)).await;
    assert_eq!(put.status, 200, "{put:?}");
    // Declared now: a value of another type fails its record instead of widening the column.
    let answer = bulk(
        &platform,
        "/logs/_bulk",
        &[
            json!({"index": {}}),
            json!({"count": "many"}),
            json!({"index": {}}),
            json!({"client": "10.1.2.3", "count": 2}),
        ],
    )
    .await;
    assert_eq!(statuses(&answer), [400, 201]);
    // A declared field's type does not change.
    for body in [
        json!({"properties": {"count": {"type": "keyword"}}}),
        json!({"properties": {"host": {"type": "long"}}}),
    ] {
        let refused = platform.send("PUT", "/logs/_mapping", Some(&body)).await;
        assert_eq!(refused.status, 400, "{body}: {refused:?}");
        assert!(
            refused.body["message"]
                .as_str()
                .unwrap()
                .contains("cannot be changed from type")
        );
    }
    assert_eq!(
        platform
            .send("PUT", "/nope/_mapping", Some(&json!({"properties": {}})))
            .await
            .status,
        404
    );

    // Settings that mean nothing here are acknowledged; another is refused, never dropped.
    let noop = json!({"index": {"number_of_replicas": 2, "refresh_interval": "30s"}});
    assert_eq!(
        platform
            .send("PUT", "/logs/_settings", Some(&noop))
            .await
            .status,
        200
    );
    let other = json!({"index.blocks.write": true});
    let refused = platform.send("PUT", "/logs/_settings", Some(&other)).await;
    assert_eq!(refused.status, 400, "{refused:?}");
    let settings = platform.send("GET", "/logs/_settings", None).await;
    assert_eq!(
        settings.body["logs"]["settings"]["index"]["number_of_shards"],
        "1"
    );

    // The declarations are in the log: they survive a restart.
    assert!(server.stop());
    let server = Server::start(dir.path(), &[]);
    let platform = Signed::new(&server, &root);
    let mapping = platform.send("GET", "/logs/_mapping", None).await;
    let properties = &mapping.body["logs"]["mappings"]["properties"];
    assert_eq!(properties["client"], json!({"type": "ip"}));
    assert_eq!(properties["name"], json!({"type": "alias", "path": "host"}));
    let body = json!({"query": {"term": {"client": "10.0.0.0/8"}}});
    let found = platform.send("POST", "/logs/_search", Some(&body)).await;
    assert_eq!(found.body["hits"]["total"]["value"], 1, "{found:?}");
    let by_alias = json!({"query": {"term": {"name": "a"}}});
    let found = platform
        .send("POST", "/logs/_search", Some(&by_alias))
        .await;
    assert_eq!(found.body["hits"]["total"]["value"], 1, "{found:?}");
}
