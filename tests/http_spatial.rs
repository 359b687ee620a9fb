//! geo_point and knn_vector fields over HTTP: declared in the mappings at PUT /{dataset}, written
//! by NDJSON bulk in every geo point form, searched by geo_distance, geo_bounding_box and knn
//! (with and without a filter, as a query and in Elasticsearch's top-level form), in segments
//! and in the memtable alike.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::BTreeSet;

use common::{Server, Signed, root_user};
use serde_json::{Value, json};

/// Cities: id, [lon, lat] and a 3-dimension vector.
const CITIES: &[(&str, [f64; 2], [f32; 3])] = &[
    ("paris", [2.3522, 48.8566], [1.0, 0.0, 0.0]),
    ("london", [-0.1278, 51.5074], [0.9, 0.1, 0.0]),
    ("brussels", [4.3517, 50.8503], [0.8, 0.2, 0.0]),
    ("berlin", [13.4050, 52.5200], [0.0, 1.0, 0.0]),
    ("madrid", [-3.7038, 40.4168], [0.0, 0.9, 0.1]),
    ("new-york", [-74.0060, 40.7128], [0.0, 0.0, 1.0]),
    ("fiji", [178.4419, -18.1416], [0.1, 0.0, 0.9]),
    ("samoa", [-171.7513, -13.8333], [0.2, 0.0, 0.8]),
];

/// The bulk lines of the cities, their points written in the forms in turn.
fn lines(cities: &[(&str, [f64; 2], [f32; 3])]) -> Vec<Value> {
    let mut lines = Vec::new();
    for (i, (id, [lon, lat], vector)) in cities.iter().enumerate() {
        let location = match i % 4 {
            0 => json!({"lat": lat, "lon": lon}),
            1 => json!(format!("{lat},{lon}")),
            2 => json!([lon, lat]),
            _ => json!(format!("POINT ({lon} {lat})")),
        };
        lines.push(json!({"index": {"_id": id}}));
        lines.push(
            json!({"name": id, "location": location, "embedding": vector, "big": i % 2 == 0}),
        );
    }
    lines
}

async fn ids(client: &Signed, body: Value) -> Vec<String> {
    let answer = client.send("POST", "/cities/_search", Some(&body)).await;
    assert_eq!(answer.status, 200, "{body}: {answer:?}");
    answer.body["hits"]["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["_id"].as_str().unwrap().to_owned())
        .collect()
}

async fn id_set(client: &Signed, body: Value) -> BTreeSet<String> {
    ids(client, body).await.into_iter().collect()
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|n| n.to_string()).collect()
}

#[tokio::test]
async fn geo_and_knn_queries_over_declared_fields() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &["--set", "tables.flush_rows=4"]);
    let client = Signed::new(&server, &root_user(dir.path(), "acme"));
    let mappings = json!({"mappings": {"properties": {
        "location": {"type": "geo_point"},
        "embedding": {"type": "knn_vector", "dimension": 3, "space_type": "l2"},
    }}});
    let created = client.send("PUT", "/cities", Some(&mappings)).await;
    assert_eq!(created.status, 200, "{created:?}");
    // Four cities go to a segment (flush_rows), the other four stay in the memtable.
    let all = lines(CITIES);
    for half in [&all[..8], &all[8..]] {
        let written = client.send_ndjson("POST", "/cities/json", half).await;
        assert_eq!(written.body["errors"], false, "{written:?}");
    }

    let mapping = client.send("GET", "/cities/_mapping", None).await;
    let properties = &mapping.body["cities"]["mappings"]["properties"];
    assert_eq!(properties["location"], json!({"type": "geo_point"}));
    assert_eq!(
        properties["embedding"],
        json!({"type": "knn_vector", "dimension": 3, "space_type": "l2"})
    );

    // Every form reads back as {lat, lon}; vectors as given.
    let london = client.send("GET", "/cities/_doc/london", None).await;
    assert_eq!(london.status, 200, "{london:?}");
    assert_eq!(
        london.body["_source"]["location"],
        json!({"lat": 51.5074, "lon": -0.1278})
    );
    assert_eq!(london.body["_source"]["embedding"], json!([0.9, 0.1, 0.0]));

    // Within 400 km of Paris: London (344 km) and Brussels (264 km), not Berlin (878 km).
    for distance in [json!("400km"), json!(400_000), json!("248.5mi")] {
        let near_paris = json!({"query": {"geo_distance": {
            "distance": distance, "location": {"lat": 48.8566, "lon": 2.3522}}}});
        assert_eq!(
            id_set(&client, near_paris).await,
            set(&["paris", "london", "brussels"]),
            "{distance}"
        );
    }
    let filtered = json!({"query": {"bool": {
        "must": {"term": {"big": true}},
        "filter": {"geo_distance": {"distance": "1100km", "location": "48.8566,2.3522"}},
    }}});
    assert_eq!(
        id_set(&client, filtered).await,
        set(&["paris", "brussels", "madrid"])
    );
    // Across the antimeridian: Fiji and Samoa are 1150 km apart.
    let pacific = json!({"query": {"geo_distance": {
        "distance": "1500km", "location": [178.4419, -18.1416]}}});
    assert_eq!(id_set(&client, pacific).await, set(&["fiji", "samoa"]));

    // Western Europe's box, in two of its forms; one crossing the antimeridian.
    for bbox in [
        json!({"top_left": {"lat": 53.0, "lon": -5.0}, "bottom_right": {"lat": 40.0, "lon": 5.0}}),
        json!({"wkt": "BBOX (-5.0, 5.0, 53.0, 40.0)"}),
    ] {
        let query = json!({"query": {"geo_bounding_box": {"location": bbox}}});
        assert_eq!(
            id_set(&client, query).await,
            set(&["paris", "london", "brussels", "madrid"]),
            "{bbox}"
        );
    }
    let across = json!({"query": {"geo_bounding_box": {"location": {
        "top": -10.0, "bottom": -20.0, "left": 170.0, "right": -170.0}}}});
    assert_eq!(id_set(&client, across).await, set(&["fiji", "samoa"]));
    let count = client
        .send(
            "POST",
            "/cities/_count",
            Some(&json!({"query": {"geo_bounding_box": {"location": {
                "top_left": [-80.0, 45.0], "bottom_right": [-70.0, 35.0]}}}})),
        )
        .await;
    assert_eq!(count.body["count"], 1, "{count:?}");

    // The three nearest vectors, nearest first, scored 1 / (1 + d²).
    let knn =
        json!({"size": 3, "query": {"knn": {"embedding": {"vector": [1.0, 0.0, 0.0], "k": 3}}}});
    let answer = client.send("POST", "/cities/_search", Some(&knn)).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    let hits = answer.body["hits"]["hits"].as_array().unwrap();
    let found: Vec<&str> = hits.iter().map(|h| h["_id"].as_str().unwrap()).collect();
    assert_eq!(found, ["paris", "london", "brussels"]);
    assert_eq!(hits[0]["_score"], 1.0);
    let london_score = hits[1]["_score"].as_f64().unwrap();
    assert!((london_score - 1.0 / 1.02).abs() < 1e-4, "{london_score}");
    assert_eq!(answer.body["hits"]["total"]["value"], 3);

    // With a filter: the nearest among the records it matches (Samoa is nearer than Berlin).
    let knn_filtered = json!({"query": {"knn": {"embedding": {
        "vector": [1.0, 0.0, 0.0], "k": 2, "filter": {"term": {"big": false}}}}}});
    assert_eq!(ids(&client, knn_filtered).await, ["london", "samoa"]);
    // Elasticsearch's top-level form, and knn beside a query (their union).
    let top_level = json!({"knn": {"field": "embedding", "query_vector": [0.0, 0.0, 1.0], "k": 2}});
    assert_eq!(ids(&client, top_level).await, ["new-york", "fiji"]);
    let union = json!({
        "query": {"term": {"name": "berlin"}},
        "knn": {"field": "embedding", "query_vector": [0.0, 0.0, 1.0], "k": 1},
    });
    assert_eq!(id_set(&client, union).await, set(&["berlin", "new-york"]));
    // A knn query aggregates like any other.
    let aggregated = json!({"size": 0,
        "query": {"knn": {"embedding": {"vector": [1.0, 0.0, 0.0], "k": 4}}},
        "aggs": {"names": {"terms": {"field": "name"}}}});
    let answer = client
        .send("POST", "/cities/_search", Some(&aggregated))
        .await;
    assert_eq!(answer.status, 200, "{answer:?}");
    let names: BTreeSet<&str> = answer.body["aggregations"]["names"]["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["key"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        BTreeSet::from(["paris", "london", "brussels", "samoa"])
    );

    // Bad input: a 400 naming the problem, never a 500.
    for (body, needle) in [
        (
            json!({"query": {"geo_distance": {"distance": "12 parsecs", "location": [0, 0]}}}),
            "unknown distance unit",
        ),
        (
            json!({"query": {"geo_distance": {"distance": "1km", "location": {"lat": 95, "lon": 0}}}}),
            "illegal latitude",
        ),
        (
            json!({"query": {"geo_bounding_box": {"location": {"top": 1}}}}),
            "a bounding box needs",
        ),
        (
            json!({"query": {"knn": {"embedding": {"vector": [1.0, 0.0], "k": 2}}}}),
            "has 3",
        ),
        (
            json!({"query": {"knn": {"name": {"vector": [1.0, 0.0, 0.0], "k": 2}}}}),
            "not a knn_vector field",
        ),
    ] {
        let answer = client.send("POST", "/cities/_search", Some(&body)).await;
        assert_eq!(answer.status, 400, "{body}: {answer:?}");
        assert!(
            answer.body.to_string().contains(needle),
            "{body}: {answer:?}"
        );
    }
    // A point or vector that does not fit fails its own item.
    let bad = [
        json!({"index": {"_id": "nowhere"}}),
        json!({"location": {"lat": 91.0, "lon": 0.0}}),
        json!({"index": {"_id": "flat"}}),
        json!({"embedding": [1.0, 2.0]}),
        json!({"index": {"_id": "fine"}}),
        json!({"name": "fine", "location": {"lat": 1.0, "lon": 1.0}}),
    ];
    let written = client.send_ndjson("POST", "/cities/json", &bad).await;
    let statuses: Vec<i64> = written.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item["index"]["status"].as_i64().unwrap())
        .collect();
    assert_eq!(statuses, [400, 400, 201], "{written:?}");
}

#[tokio::test]
async fn without_a_vector_field_knn_is_refused_and_filters_have_an_other_bucket() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let client = Signed::new(&server, &root_user(dir.path(), "acme"));
    let written = client
        .send_ndjson("POST", "/cities/json", &lines(&CITIES[..4]))
        .await;
    assert_eq!(written.body["errors"], false, "{written:?}");
    // Not declared: the vector is text, the point is two numbers; knn names the problem.
    let knn = json!({"query": {"knn": {"embedding": {"vector": [1.0, 0.0, 0.0], "k": 2}}}});
    let answer = client.send("POST", "/cities/_search", Some(&knn)).await;
    assert_eq!(answer.status, 400, "{answer:?}");
    assert!(answer.body.to_string().contains("has none"), "{answer:?}");
    let aggs = json!({"size": 0, "aggs": {"f": {"filters": {
        "other_bucket_key": "rest",
        "filters": {"paris": {"term": {"name": "paris"}}, "london": {"term": {"name": "london"}}},
    }}}});
    let answer = client.send("POST", "/cities/_search", Some(&aggs)).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    let buckets = &answer.body["aggregations"]["f"]["buckets"];
    assert_eq!(buckets["paris"]["doc_count"], 1);
    assert_eq!(buckets["rest"]["doc_count"], 2, "{buckets}");
    let listed = json!({"size": 0, "aggs": {"f": {"filters": {
        "other_bucket": true,
        "filters": [{"term": {"name": "paris"}}],
    }}}});
    let answer = client.send("POST", "/cities/_search", Some(&listed)).await;
    let counts: Vec<i64> = answer.body["aggregations"]["f"]["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["doc_count"].as_i64().unwrap())
        .collect();
    assert_eq!(counts, [1, 3], "{answer:?}");
}
