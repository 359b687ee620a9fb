//! The access layer is the only door: a grant that hides field `secret`, masks field `pii`
//! (redacted) and shows only the records of `team: a` is applied through it, and every read
//! path shows the hidden field absent, the masked one masked, and the other team's records
//! invisible. The engine runs here whole, on a temporary data directory; the reader's grant is
//! the test's own (roles fill grants in production).

#![allow(clippy::unwrap_used, clippy::panic, clippy::expect_used)]

use std::sync::Arc;

use bytes::Bytes;
use serde_json::{Value, json};

use super::*;
use crate::{
    documents::{bulk, mapping},
    engine::{
        Engine, Origin, SampleRow, SearchOptions, SearchResult,
        platform::testing::{TestEngine, principal},
    },
    promql::value::Labels,
};

struct Fixture {
    engine: Arc<Engine>,
    root: PlatformPrincipal,
    reader: PlatformPrincipal,
    test: TestEngine,
}

/// The test grant: records and metadata of `people`, `cpu` and the aliases `staff` (of
/// `people`), `secret` hidden, `pii` redacted, `team: a` only.
fn test_grant(actions: &[Action]) -> Grant {
    Grant {
        all: false,
        notifications: Vec::new(),
        permissions: vec![Permission {
            actions: actions.to_vec(),
            resources: vec!["people".into(), "cpu".into(), "staff".into()],
            filter: Some(json!({"term": {"team": "a"}})),
            fields: FieldRule {
                allow: None,
                deny: vec!["secret".into()],
                mask: vec![("pii".into(), Mask::Redact)],
            },
        }],
    }
}

async fn bulk_into(engine: &Engine, root: &PlatformPrincipal, dataset: &str, lines: &[Value]) {
    let mut body = String::new();
    for line in lines {
        body.push_str(&line.to_string());
        body.push('\n');
    }
    let operations = bulk::parse(&Bytes::from(body)).unwrap();
    let items = engine
        .bulk(root, Some(dataset), operations, &Origin::system())
        .await;
    for item in &items {
        assert!(
            matches!(item.outcome, crate::engine::Outcome::Done { .. }),
            "{item:?}"
        );
    }
}

async fn fixture() -> Fixture {
    let test = TestEngine::open().await;
    let engine = test.engine.clone();
    let root = test.root.clone();
    let mappings = json!({"properties": {
        "team": {"type": "keyword"},
        "name": {"type": "text"},
        "secret": {"type": "keyword"},
        "pii": {"type": "keyword"},
        "n": {"type": "long"},
        "v": {"type": "knn_vector", "dimension": 2},
    }});
    engine
        .create_dataset(
            &root,
            "people",
            mapping::declared_columns(&mappings, false).unwrap(),
            &[("staff".to_owned(), Default::default())],
            &Origin::system(),
        )
        .await
        .unwrap();
    let person = |id: &str, team: &str, name: &str, secret: &str, pii: &str, n: i64| {
        [
            json!({"index": {"_id": id}}),
            json!({"team": team, "name": name, "secret": secret, "pii": pii, "n": n,
                   "v": [n as f32, 1.0]}),
        ]
    };
    let mut lines = Vec::new();
    lines.extend(person("1", "a", "ann lee", "zebra", "555-1234", 1));
    lines.extend(person("2", "b", "bob ray", "yak", "555-9999", 2));
    lines.extend(person("3", "a", "cat kim", "zebra", "555-0000", 3));
    bulk_into(&engine, &root, "people", &lines).await;
    // A dataset the grant does not name.
    bulk_into(
        &engine,
        &root,
        "other",
        &[json!({"index": {"_id": "x"}}), json!({"team": "a"})],
    )
    .await;
    // Metrics: two series of team a that differ only by the hidden label, one of team b.
    let now = chrono::Utc::now().timestamp_millis();
    let sample = |team: &str, secret: &str, v: f64| {
        SampleRow::new(
            vec![
                ("__name__".into(), "cpu".into()),
                ("team".into(), team.into()),
                ("secret".into(), secret.into()),
                ("pii".into(), "host-1".into()),
            ],
            now - 1_000,
            v,
        )
    };
    engine
        .write_samples(
            &root,
            "cpu",
            &[
                sample("a", "s1", 1.0),
                sample("a", "s2", 2.0),
                sample("b", "s3", 3.0),
            ],
            &Origin::system(),
        )
        .await
        .unwrap();
    // Aliases with a filter: team b's records, and series.
    let team_b = crate::engine::AliasSpec {
        filter: Some(json!({"term": {"team": "b"}})),
        is_write_index: None,
    };
    engine
        .update_aliases(
            &root,
            &[
                crate::engine::AliasAction::Add {
                    indices: vec!["people".into()],
                    aliases: vec!["people-b".into()],
                    spec: team_b.clone(),
                },
                crate::engine::AliasAction::Add {
                    indices: vec!["cpu".into()],
                    aliases: vec!["cpu-b".into()],
                    spec: team_b,
                },
            ],
            &Origin::system(),
        )
        .await
        .unwrap();
    let reader = principal(
        "reader",
        test_grant(&[Action::RecordRead, Action::MetadataRead]),
    );
    Fixture {
        engine,
        root,
        reader,
        test,
    }
}

async fn search(f: &Fixture, who: &PlatformPrincipal, index: &str, body: Value) -> SearchResult {
    f.engine
        .search_dataset(who, Some(index), &body, &SearchOptions::default())
        .await
        .unwrap()
}

fn ids(result: &SearchResult) -> Vec<String> {
    let mut ids: Vec<String> = result.hits.iter().map(|h| h.id.clone().unwrap()).collect();
    ids.sort();
    ids
}

async fn sql(f: &Fixture, who: &PlatformPrincipal, statement: &str) -> Result<Vec<Value>> {
    f.test.sql(who, statement).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_grant_applies_on_every_read_path() {
    let f = fixture().await;
    let (root, reader) = (&f.root, &f.reader);

    // --- Query DSL: hits, _source, hits.total, fields ---
    let all = search(&f, root, "people", json!({})).await;
    assert_eq!(ids(&all), ["1", "2", "3"]);
    let seen = search(
        &f,
        reader,
        "people",
        json!({"fields": ["secret", "pii", "name"]}),
    )
    .await;
    assert_eq!(ids(&seen), ["1", "3"]);
    assert_eq!(seen.total.unwrap().value, 2);
    for hit in &seen.hits {
        let source = hit.source.as_ref().unwrap();
        assert!(!source.contains_key("secret"), "{hit:?}");
        assert_eq!(source["pii"], "********", "{hit:?}");
        assert_eq!(source["team"], "a");
        assert!(!hit.fields.contains_key("secret"), "{hit:?}");
        assert_eq!(hit.fields["pii"], json!(["********"]));
    }

    // --- The hidden and the masked field cannot be found by their values ---
    let found_by = |query: Value| {
        let f = &f;
        async move {
            let as_root = ids(&search(f, root, "people", json!({"query": query.clone()})).await);
            let as_reader = ids(&search(f, reader, "people", json!({"query": query})).await);
            (as_root, as_reader)
        }
    };
    for query in [
        json!({"query_string": {"query": "zebra"}}),
        json!({"query_string": {"query": "secret:zebra"}}),
        json!({"query_string": {"query": "zebra", "default_field": "*"}}),
        json!({"simple_query_string": {"query": "zebra"}}),
        json!({"multi_match": {"query": "zebra"}}),
        json!({"term": {"secret": "zebra"}}),
        json!({"term": {"secret.keyword": "zebra"}}),
        json!({"match": {"secret": "zebra"}}),
        json!({"prefix": {"secret": "zeb"}}),
        json!({"wildcard": {"secret": "z*"}}),
        json!({"regexp": {"secret": "z.*"}}),
        json!({"exists": {"field": "secret"}}),
        json!({"term": {"pii": "555-1234"}}),
        json!({"query_string": {"query": "1234"}}),
    ] {
        let (as_root, as_reader) = found_by(query.clone()).await;
        assert!(!as_root.is_empty(), "root finds {query}");
        assert!(
            as_reader.is_empty(),
            "the reader finds {query}: {as_reader:?}"
        );
    }
    // What the reader may search still finds what it may see.
    let (_, by_name) = found_by(json!({"query_string": {"query": "ann OR bob"}})).await;
    assert_eq!(by_name, ["1"]);
    let (_, by_catch_all) = found_by(json!({"multi_match": {"query": "kim"}})).await;
    assert_eq!(by_catch_all, ["3"]);

    // --- Sort: by a hidden field, as by a field that is not mapped ---
    let sorted = search(
        &f,
        reader,
        "people",
        json!({"sort": [{"secret": "asc"}, {"n": "desc"}]}),
    )
    .await;
    let order: Vec<&str> = sorted
        .hits
        .iter()
        .map(|h| h.id.as_deref().unwrap())
        .collect();
    assert_eq!(order, ["3", "1"]);
    for hit in &sorted.hits {
        assert_eq!(hit.sort.as_ref().unwrap()[0], None, "{hit:?}");
    }

    // --- Aggregations ---
    let aggs = json!({"size": 0, "aggs": {
        "secrets": {"terms": {"field": "secret"}},
        "piis": {"terms": {"field": "pii"}},
        "teams": {"terms": {"field": "team"}},
        "total": {"sum": {"field": "n"}},
    }});
    let as_root = search(&f, root, "people", aggs.clone()).await;
    let named = |result: &SearchResult, name: &str| {
        result
            .aggregations
            .as_ref()
            .and_then(|a| a.get(name))
            .cloned()
            .unwrap()
    };
    assert_eq!(named(&as_root, "secrets").buckets().len(), 2);
    let as_reader = search(&f, reader, "people", aggs).await;
    assert!(named(&as_reader, "secrets").buckets().is_empty());
    assert!(named(&as_reader, "piis").buckets().is_empty());
    let teams = named(&as_reader, "teams");
    let teams: Vec<(&Value, u64)> = teams
        .buckets()
        .iter()
        .map(|b| (&b.key, b.doc_count))
        .collect();
    assert_eq!(teams, [(&json!("a"), 2)]);
    assert_eq!(named(&as_reader, "total").value(), Some(4.0));

    // --- Count, and the alias (its datasets through the grant too) ---
    let count = f
        .engine
        .count_dataset(reader, Some("people"), &Value::Null)
        .await
        .unwrap();
    assert_eq!(count, 2);
    assert_eq!(
        ids(&search(&f, reader, "staff", json!({})).await),
        ["1", "3"]
    );
    // A dataset the grant does not name: named, a 403; through a wildcard, left out.
    let refused = f
        .engine
        .search_dataset(reader, Some("other"), &json!({}), &SearchOptions::default())
        .await;
    assert!(matches!(refused, Err(Error::Forbidden(_))), "{refused:?}");
    assert_eq!(ids(&search(&f, reader, "*", json!({})).await), ["1", "3"]);

    // --- SQL: rows and columns, counts, DESCRIBE, SHOW TABLES, KNN_SEARCH ---
    let rows = sql(&f, reader, "SELECT * FROM people ORDER BY n")
        .await
        .unwrap();
    assert_eq!(rows.len(), 2);
    for row in &rows {
        let row = row.as_object().unwrap();
        assert!(!row.contains_key("secret"), "{row:?}");
        assert_eq!(row["pii"], "********");
        assert_eq!(row["team"], "a");
    }
    let hidden = sql(&f, reader, "SELECT secret FROM people").await;
    assert!(matches!(hidden, Err(Error::BadRequest(_))), "{hidden:?}");
    let by_masked = sql(&f, reader, "SELECT n FROM people WHERE pii = '555-1234'")
        .await
        .unwrap();
    assert!(by_masked.is_empty(), "{by_masked:?}");
    let counted = sql(&f, reader, "SELECT count(*) AS c FROM people")
        .await
        .unwrap();
    assert_eq!(counted, [json!({"c": 2})]);
    let described = sql(&f, reader, "DESCRIBE people").await.unwrap();
    let columns: Vec<&str> = described
        .iter()
        .map(|r| r["column"].as_str().unwrap())
        .collect();
    assert!(!columns.contains(&"secret"), "{columns:?}");
    let pii = described.iter().find(|r| r["column"] == "pii").unwrap();
    assert_eq!(pii["type"], "string");
    let tables = sql(&f, reader, "SHOW TABLES").await.unwrap();
    let names: Vec<&str> = tables.iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["cpu", "people"]);
    let nearest = sql(
        &f,
        reader,
        "SELECT * FROM KNN_SEARCH('people', 'v', '[2.0, 1.0]', 3)",
    )
    .await
    .unwrap();
    assert_eq!(nearest.len(), 2, "{nearest:?}");
    for row in &nearest {
        let row = row.as_object().unwrap();
        assert!(!row.contains_key("secret"), "{row:?}");
        assert_eq!(row["pii"], "********");
        assert_eq!(row["team"], "a");
    }
    let through_alias = sql(&f, reader, "SELECT count(*) AS c FROM staff")
        .await
        .unwrap();
    assert_eq!(through_alias, [json!({"c": 2})]);

    // --- Mappings and metadata lists ---
    let defs = f.engine.dataset_defs(reader, Some("people")).await.unwrap();
    let mappings = mapping::of(&defs[0]);
    let properties = mappings["mappings"]["properties"].as_object().unwrap();
    assert!(!properties.contains_key("secret"), "{mappings}");
    assert!(properties.contains_key("pii"), "{mappings}");
    let listed = f.engine.datasets(reader).await.unwrap();
    let listed: Vec<(&str, &str)> = listed
        .iter()
        .map(|d| (d.index.as_str(), d.docs_count.as_str()))
        .collect();
    assert_eq!(listed, [("cpu", "2"), ("people", "2")]);
    let info = f.engine.dataset_info(reader, "people").await.unwrap();
    assert_eq!(info.docs_count, "2");

    // --- PromQL: series, label names and values ---
    let now = chrono::Utc::now().timestamp_millis();
    let series = |who: &PlatformPrincipal, selector: &str| {
        let (engine, selector) = (f.engine.clone(), selector.to_owned());
        let who = who.clone();
        async move {
            engine
                .promql_series(&who, None, &[selector], now - 60_000, now)
                .await
                .unwrap()
        }
    };
    let as_root = series(root, "cpu").await;
    assert_eq!(as_root.len(), 3);
    let as_reader: Vec<Labels> = series(reader, "cpu").await;
    // Team a's two series are one once `secret` is hidden.
    assert_eq!(as_reader.len(), 1, "{as_reader:?}");
    let labels = &as_reader[0];
    assert_eq!(labels.get("team"), Some("a"));
    assert_eq!(labels.get("secret"), None);
    assert_eq!(labels.get("pii"), Some("******"));
    assert!(series(reader, "cpu{secret=\"s1\"}").await.is_empty());
    assert!(series(reader, "cpu{pii=\"host-1\"}").await.is_empty());
    assert!(series(reader, "cpu{team=\"b\"}").await.is_empty());
    let evaluated = f
        .engine
        .promql_query(
            reader,
            None,
            "count(cpu)",
            crate::engine::promql::Evaluation::Instant { time: now },
            std::time::Duration::from_secs(10),
        )
        .await
        .unwrap();
    // One series, whose last sample is the one written last.
    let crate::promql::engine::QueryValue::Vector(samples) = evaluated.value else {
        panic!("{evaluated:?}")
    };
    assert_eq!(samples.len(), 1, "{samples:?}");
    assert_eq!(
        samples[0].value,
        crate::promql::value::SampleValue::Float(1.0)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alias_filters_hold_for_sql_and_promql_too() {
    let f = fixture().await;
    let root = &f.root;
    assert_eq!(ids(&search(&f, root, "people-b", json!({})).await), ["2"]);
    let rows = sql(&f, root, "SELECT name FROM \"people-b\"")
        .await
        .unwrap();
    assert_eq!(rows, [json!({"name": "bob ray"})]);
    let now = chrono::Utc::now().timestamp_millis();
    let series = f
        .engine
        .promql_series(root, Some("cpu-b"), &[], now - 60_000, now)
        .await
        .unwrap();
    assert_eq!(series.len(), 1, "{series:?}");
    assert_eq!(series[0].get("team"), Some("b"));
    let all = f
        .engine
        .promql_series(root, Some("cpu"), &[], now - 60_000, now)
        .await
        .unwrap();
    assert_eq!(all.len(), 3);
    // The reader may read the dataset behind the alias, but not team b's records.
    let none = sql(&f, &f.reader, "SELECT name FROM \"people-b\"")
        .await
        .unwrap();
    assert_eq!(none, Vec::<Value>::new());
    let counted = sql(&f, root, "SELECT count(*) AS c FROM \"people-b\"")
        .await
        .unwrap();
    assert_eq!(counted, [json!({"c": 1})]);
    let listed = f.engine.datasets(&f.reader).await.unwrap();
    assert!(listed.iter().all(|d| d.index != "other"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_through_the_door_match_and_copy_only_what_the_writer_may_read() {
    let f = fixture().await;
    // Delete by query deletes only what the user may read: team a's records.
    let writer = principal(
        "writer",
        test_grant(&[Action::RecordRead, Action::RecordWrite]),
    );
    let deleted = f
        .engine
        .delete_by_query(
            &writer,
            "people",
            &json!({"match_all": {}}),
            Default::default(),
            &Origin::system(),
        )
        .await
        .unwrap();
    assert_eq!(deleted.deleted, 2);
    let left = search(&f, &f.root, "people", json!({})).await;
    assert_eq!(ids(&left), ["2"]);
    // Nor may it match by a hidden field's value.
    let none = f
        .engine
        .delete_by_query(
            &writer,
            "people",
            &json!({"term": {"secret": "yak"}}),
            Default::default(),
            &Origin::system(),
        )
        .await
        .unwrap();
    assert_eq!(none.deleted, 0);
    // Without the right to read, nothing is matched at all.
    let blind = principal(
        "blind",
        Grant {
            all: false,
            notifications: Vec::new(),
            permissions: vec![Permission {
                actions: vec![Action::RecordWrite],
                resources: vec!["people".into()],
                ..Permission::default()
            }],
        },
    );
    let refused = f
        .engine
        .delete_by_query(
            &blind,
            "people",
            &json!({"match_all": {}}),
            Default::default(),
            &Origin::system(),
        )
        .await;
    assert!(matches!(refused, Err(Error::Forbidden(_))), "{refused:?}");

    // Enrich copies from the source only what the user may read as it is.
    let enricher = principal(
        "enricher",
        Grant {
            all: false,
            notifications: Vec::new(),
            permissions: vec![
                Permission {
                    actions: vec![Action::RecordWrite],
                    resources: vec!["other".into()],
                    ..Permission::default()
                },
                test_grant(&[Action::RecordRead]).permissions.remove(0),
            ],
        },
    );
    let policy = |fields: &[&str]| crate::engine::EnrichPolicy {
        source: Some("people".into()),
        match_field: "team".into(),
        enrich_fields: fields.iter().map(|f| (*f).to_owned()).collect(),
    };
    // The one record left is team b's, which the user may not read: nothing to copy.
    let copied = f
        .engine
        .enrich_dataset(&enricher, "other", &policy(&["name"]), &Origin::system())
        .await
        .unwrap();
    assert_eq!(copied, 0);
    for field in ["secret", "pii"] {
        let refused = f
            .engine
            .enrich_dataset(&enricher, "other", &policy(&[field]), &Origin::system())
            .await;
        assert!(
            matches!(refused, Err(Error::BadRequest(_))),
            "{field}: {refused:?}"
        );
    }
}

/// A dataset of the given columns, for the grant's rules alone.
fn dataset_of(columns: &[&str]) -> TableDef {
    use strata_projections::{catalog::ColumnDef, schema::ColumnType};
    TableDef {
        name: "people".into(),
        id: "id-people".into(),
        columns: columns
            .iter()
            .map(|name| ColumnDef {
                name: (*name).to_owned(),
                data_type: ColumnType::Utf8,
                nullable: true,
            })
            .collect(),
        dataset: true,
        ..Default::default()
    }
}

fn read(resources: &[&str], filter: Option<Value>, fields: FieldRule) -> Permission {
    Permission {
        actions: vec![Action::RecordRead],
        resources: resources.iter().map(|r| (*r).to_owned()).collect(),
        filter,
        fields,
    }
}

#[test]
fn several_permissions_are_one_union_as_api_md_states() {
    let def = dataset_of(&[
        "_id",
        "@timestamp",
        "team",
        "secret",
        "pii",
        "phone",
        "user.name",
        "user.email",
    ]);
    let grant = |permissions: Vec<Permission>| Grant {
        all: false,
        notifications: Vec::new(),
        permissions,
    };
    let seen = |g: &Grant| g.visibility(Action::RecordRead, &def, &[]).unwrap();

    // A field denied by one entry and shown by another is shown; masks give way to an entry
    // that shows the field as it is, else to the least restrictive mask.
    let both = grant(vec![
        read(
            &["people"],
            Some(json!({"term": {"team": "a"}})),
            FieldRule {
                deny: vec!["secret".into(), "user".into()],
                mask: vec![
                    ("pii".into(), Mask::Remove),
                    ("phone".into(), Mask::Nullify),
                ],
                ..FieldRule::default()
            },
        ),
        read(
            &["peo*"],
            Some(json!({"term": {"team": "b"}})),
            FieldRule {
                allow: Some(vec![
                    "team".into(),
                    "pii".into(),
                    "phone".into(),
                    "user".into(),
                ]),
                mask: vec![("pii".into(), Mask::Redact), ("phone".into(), Mask::Remove)],
                deny: vec!["user.email".into()],
            },
        ),
    ]);
    let v = seen(&both);
    assert_eq!(v.fields.shows("secret"), None);
    assert_eq!(v.fields.shows("user.name"), Some(None));
    // Denied by both: the first denies `user` and its sub-fields, the second `user.email`.
    assert_eq!(v.fields.shows("user.email"), None);
    assert_eq!(v.fields.shows("pii"), Some(Some(Mask::Redact)));
    assert_eq!(v.fields.shows("phone"), Some(Some(Mask::Nullify)));
    assert_eq!(v.fields.shows("_id"), Some(None));
    assert_eq!(v.fields.shows("@timestamp"), Some(None));
    // Filtered entries are ORed.
    assert_eq!(
        v.filter,
        Some(json!({"bool": {"should": [
            {"term": {"team": "a"}},
            {"term": {"team": "b"}},
        ], "minimum_should_match": 1}}))
    );

    // An allow list shows only its fields (and their sub-fields), `_id` and `@timestamp`.
    let allow = grant(vec![read(
        &["people"],
        None,
        FieldRule {
            allow: Some(vec!["user".into()]),
            ..FieldRule::default()
        },
    )]);
    let v = seen(&allow);
    assert_eq!(v.filter, None);
    for (field, shown) in [
        ("user.name", true),
        ("user.email", true),
        ("team", false),
        ("_id", true),
        ("@timestamp", true),
    ] {
        assert_eq!(v.fields.shows(field).is_some(), shown, "{field}");
    }

    // An entry without a filter lifts the others'; an entry for another dataset counts not.
    let lifted = grant(vec![
        read(
            &["people"],
            Some(json!({"term": {"team": "a"}})),
            FieldRule::default(),
        ),
        read(&["people"], None, FieldRule::default()),
        read(
            &["others"],
            Some(json!({"match_none": {}})),
            FieldRule::default(),
        ),
    ]);
    assert_eq!(seen(&lifted).filter, None);
    assert!(seen(&lifted).fields.is_open());

    // No entry for the dataset (nor the action): no visibility at all.
    let elsewhere = grant(vec![read(&["others"], None, FieldRule::default())]);
    assert!(
        elsewhere
            .visibility(Action::RecordRead, &def, &[])
            .is_none()
    );
    assert!(both.visibility(Action::MetadataRead, &def, &[]).is_none());
    // Through an alias the entry names, the dataset is granted.
    assert!(
        elsewhere
            .visibility(Action::RecordRead, &def, &["others".to_owned()])
            .is_some()
    );
}

/// A pattern matcher that is obviously right (and slow): `*` matches any run, other
/// characters themselves.
fn matches_by_definition(pattern: &[char], name: &[char]) -> bool {
    match pattern.split_first() {
        None => name.is_empty(),
        Some(('*', rest)) => (0..=name.len()).any(|at| matches_by_definition(rest, &name[at..])),
        Some((c, rest)) => name.first() == Some(c) && matches_by_definition(rest, &name[1..]),
    }
}

/// How one entry shows a field, by API.md's words: allowed (or `_id`/`@timestamp`) and not
/// denied; masked by its mask.
fn shown_by_definition(rule: &FieldRule, field: &str) -> Option<Option<Mask>> {
    let always = field == ID_FIELD || field == TIMESTAMP_FIELD;
    let allowed = always
        || rule
            .allow
            .as_ref()
            .is_none_or(|a| a.iter().any(|p| p == field));
    let denied = !always && rule.deny.iter().any(|p| p == field);
    (allowed && !denied).then(|| {
        rule.mask
            .iter()
            .find(|(p, _)| p == field)
            .map(|(_, mask)| *mask)
    })
}

const FIELDS: [&str; 6] = ["_id", "@timestamp", "a", "b", "c", "d"];

fn field_rule() -> impl proptest::strategy::Strategy<Value = FieldRule> {
    use proptest::prelude::*;
    let names = || proptest::sample::subsequence(&FIELDS[2..], 0..=4);
    let mask = prop_oneof![Just(Mask::Redact), Just(Mask::Nullify), Just(Mask::Remove)];
    (
        proptest::option::of(names()),
        names(),
        proptest::collection::vec((proptest::sample::select(&FIELDS[2..]), mask), 0..3),
    )
        .prop_map(|(allow, deny, mask)| FieldRule {
            allow: allow.map(|a| a.into_iter().map(str::to_owned).collect()),
            deny: deny.into_iter().map(str::to_owned).collect(),
            mask: mask.into_iter().map(|(f, m)| (f.to_owned(), m)).collect(),
        })
}

proptest::proptest! {
    #[test]
    fn patterns_match_as_the_definition_says(
        pattern in "[ab*-]{0,8}",
        name in "[ab-]{0,8}",
    ) {
        let (p, n): (Vec<char>, Vec<char>) = (pattern.chars().collect(), name.chars().collect());
        proptest::prop_assert_eq!(pattern_matches(&pattern, &name), matches_by_definition(&p, &n));
    }

    /// Several roles' field rules: a field is shown when any entry shows it (Allow ∩ not Deny,
    /// per entry); it shows unmasked when any entry that shows it leaves it so, else with the
    /// least restrictive mask of those entries (redact, then nullify, then remove). Adding an
    /// entry never hides a field that was shown.
    #[test]
    fn roles_combine_as_api_md_states(rules in proptest::collection::vec(field_rule(), 1..4)) {
        let def = dataset_of(&FIELDS);
        let grant = |rules: &[FieldRule]| Grant {
            all: false,
            notifications: Vec::new(),
            permissions: rules.iter().map(|r| read(&["people"], None, r.clone())).collect(),
        };
        let all = grant(&rules).visibility(Action::RecordRead, &def, &[]).unwrap();
        for field in FIELDS {
            let shown: Vec<Option<Mask>> =
                rules.iter().filter_map(|r| shown_by_definition(r, field)).collect();
            let expected = match shown.is_empty() {
                true => None,
                false if shown.contains(&None) => Some(None),
                false => Some(shown.iter().flatten().min().copied()),
            };
            proptest::prop_assert_eq!(all.fields.shows(field), expected, "{}", field);
            let fewer = grant(&rules[..rules.len() - 1]);
            if let Some(fewer) = fewer.visibility(Action::RecordRead, &def, &[])
                && fewer.fields.shows(field).is_some()
            {
                proptest::prop_assert!(all.fields.shows(field).is_some(), "{} hidden by more", field);
            }
        }
    }
}

#[test]
fn mappings_hide_what_the_record_entries_hide() {
    let def = dataset_of(&["_id", "team", "secret"]);
    let metadata = Permission {
        actions: vec![Action::MetadataRead],
        resources: vec!["*".into()],
        filter: None,
        fields: FieldRule::default(),
    };
    let hiding = read(
        &["people"],
        None,
        FieldRule {
            deny: vec!["secret".into()],
            ..FieldRule::default()
        },
    );
    let grant = Grant {
        all: false,
        notifications: Vec::new(),
        permissions: vec![metadata.clone(), hiding],
    };
    let seen = grant.visibility(Action::MetadataRead, &def, &[]).unwrap();
    assert_eq!(seen.fields.shows("secret"), None);
    assert_eq!(seen.fields.shows("team"), Some(None));
    // Without a record entry for the dataset, metadata shows every field.
    let only_metadata = Grant {
        all: false,
        notifications: Vec::new(),
        permissions: vec![metadata],
    };
    let seen = only_metadata
        .visibility(Action::MetadataRead, &def, &[])
        .unwrap();
    assert!(seen.fields.is_open());
}
