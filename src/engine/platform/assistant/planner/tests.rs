use chrono::{DateTime, Utc};
use serde_json::json;

use super::{render, *};

fn now() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-11-26T15:00:00Z")
        .unwrap()
        .with_timezone(&Utc)
}

fn field(name: &str, kind: Kind, values: &[&str]) -> Field {
    Field {
        name: name.to_owned(),
        kind,
        values: values.iter().map(|v| (*v).to_owned()).collect(),
    }
}

fn logs() -> Schema {
    Schema {
        dataset: "logs".to_owned(),
        connection: None,
        fields: vec![
            field("@timestamp", Kind::Date, &[]),
            field("host", Kind::Text, &["a", "b", "web-1"]),
            field("level", Kind::Text, &["error", "warn", "info"]),
            field(
                "message",
                Kind::Text,
                &["disk full", "all good", "timeout talking to db"],
            ),
            field("service", Kind::Text, &["api", "db", "web"]),
            field("status", Kind::Number, &[]),
            field("latency_ms", Kind::Number, &[]),
        ],
        time_field: Some("@timestamp".to_owned()),
        metrics: None,
    }
}

fn sql(question: &str) -> String {
    let plan = plan(question, &logs(), None, now()).unwrap_or_else(|r| panic!("{question}: {r:?}"));
    render::sql(&plan, now()).unwrap()
}

fn refused(question: &str) -> Refusal {
    match plan(question, &logs(), None, now()) {
        Err(refusal) => refusal,
        Ok(plan) => panic!("{question} should be refused, planned {plan:?}"),
    }
}

#[test]
fn counts_with_filters_and_windows() {
    assert_eq!(
        sql("how many records are in logs?"),
        r#"SELECT COUNT(*) AS "count" FROM "logs""#
    );
    assert_eq!(
        sql("how many errors are there?"),
        r#"SELECT COUNT(*) AS "count" FROM "logs" WHERE "level" = 'error'"#
    );
    assert_eq!(
        sql("count errors on host b in the last hour"),
        r#"SELECT COUNT(*) AS "count" FROM "logs" WHERE "host" = 'b' AND "level" = 'error' AND "@timestamp" >= '2026-11-26T14:00:00.000Z'"#
    );
    assert_eq!(
        sql("how many records where level is not info"),
        r#"SELECT COUNT(*) AS "count" FROM "logs" WHERE "level" <> 'info'"#
    );
    assert_eq!(
        sql("number of records with latency above 500 yesterday"),
        r#"SELECT COUNT(*) AS "count" FROM "logs" WHERE "latency_ms" > 500 AND "@timestamp" >= '2026-11-25T00:00:00.000Z' AND "@timestamp" < '2026-11-26T00:00:00.000Z'"#
    );
    assert_eq!(
        sql("how many logs containing 'disk full'"),
        r#"SELECT COUNT(*) AS "count" FROM "logs" WHERE "message" ILIKE '%disk full%'"#
    );
    assert_eq!(
        sql("how many records have status >= 500"),
        r#"SELECT COUNT(*) AS "count" FROM "logs" WHERE "status" >= 500"#
    );
    assert_eq!(
        sql("how many distinct hosts are there?"),
        r#"SELECT COUNT(DISTINCT "host") AS "distinct_host" FROM "logs""#
    );
}

#[test]
fn aggregates_of_numeric_fields() {
    assert_eq!(
        sql("what is the average latency?"),
        r#"SELECT AVG("latency_ms") AS "avg_latency_ms" FROM "logs""#
    );
    assert_eq!(
        sql("maximum latency_ms for service api"),
        r#"SELECT MAX("latency_ms") AS "max_latency_ms" FROM "logs" WHERE "service" = 'api'"#
    );
    assert_eq!(
        sql("p95 latency by host"),
        r#"SELECT "host", approx_percentile_cont("latency_ms", 0.95) AS "p95_latency_ms" FROM "logs" GROUP BY "host" ORDER BY "p95_latency_ms" DESC, "host" ASC LIMIT 10"#
    );
    assert_eq!(
        sql("median duration"),
        r#"SELECT approx_percentile_cont("latency_ms", 0.5) AS "p50_latency_ms" FROM "logs""#
    );
    let refusal = refused("average of the moon");
    assert!(refusal.reason.contains("numeric field"), "{refusal:?}");
    assert!(refusal.reason.contains("latency_ms"), "{refusal:?}");
}

#[test]
fn top_n_grouping_and_trends() {
    assert_eq!(
        sql("top 3 hosts"),
        r#"SELECT "host", COUNT(*) AS "count" FROM "logs" GROUP BY "host" ORDER BY "count" DESC, "host" ASC LIMIT 3"#
    );
    assert_eq!(
        sql("most common level"),
        r#"SELECT "level", COUNT(*) AS "count" FROM "logs" GROUP BY "level" ORDER BY "count" DESC, "level" ASC LIMIT 10"#
    );
    assert_eq!(
        sql("top 2 hosts by average latency"),
        r#"SELECT "host", AVG("latency_ms") AS "avg_latency_ms" FROM "logs" GROUP BY "host" ORDER BY "avg_latency_ms" DESC, "host" ASC LIMIT 2"#
    );
    assert_eq!(
        sql("errors by service"),
        r#"SELECT "service", COUNT(*) AS "count" FROM "logs" WHERE "level" = 'error' GROUP BY "service" ORDER BY "count" DESC, "service" ASC LIMIT 10"#
    );
    assert_eq!(
        sql("errors per hour in the last day"),
        r#"SELECT date_trunc('hour', "@timestamp") AS "time", COUNT(*) AS "count" FROM "logs" WHERE "level" = 'error' AND "@timestamp" >= '2026-11-25T15:00:00.000Z' GROUP BY 1 ORDER BY 1"#
    );
    assert_eq!(
        sql("average latency over time in the last hour"),
        r#"SELECT date_trunc('minute', "@timestamp") AS "time", AVG("latency_ms") AS "avg_latency_ms" FROM "logs" WHERE "@timestamp" >= '2026-11-26T14:00:00.000Z' GROUP BY 1 ORDER BY 1"#
    );
    assert_eq!(
        sql("show the latest 5 errors"),
        r#"SELECT * FROM "logs" WHERE "level" = 'error' ORDER BY "@timestamp" DESC LIMIT 5"#
    );
    assert_eq!(
        sql("list the hosts"),
        r#"SELECT "host", COUNT(*) AS "count" FROM "logs" GROUP BY "host" ORDER BY "count" DESC, "host" ASC LIMIT 100"#
    );
}

#[test]
fn follow_ups_change_the_previous_plan() {
    let schema = logs();
    let first = plan("how many errors on host a?", &schema, None, now()).unwrap();
    let second = plan("and for host b?", &schema, Some(&first), now()).unwrap();
    assert_eq!(
        render::sql(&second, now()).unwrap(),
        r#"SELECT COUNT(*) AS "count" FROM "logs" WHERE "level" = 'error' AND "host" = 'b'"#
    );
    let third = plan("what about yesterday?", &schema, Some(&second), now()).unwrap();
    assert!(
        render::sql(&third, now())
            .unwrap()
            .contains("'2026-11-25T00:00:00.000Z'")
    );
    let fourth = plan("by service", &schema, Some(&third), now()).unwrap();
    assert_eq!(fourth.group_by.as_deref(), Some("service"));
    let only = plan("only warnings", &schema, Some(&first), now()).unwrap();
    assert_eq!(
        only.filters,
        vec![
            Filter {
                field: "host".into(),
                op: Cmp::Eq,
                value: json!("a")
            },
            Filter {
                field: "level".into(),
                op: Cmp::Eq,
                value: json!("warn")
            },
        ]
    );
}

#[test]
fn what_it_does_not_understand_is_refused_with_suggestions() {
    for question in [
        "how many errors from paris?",
        "what is the weather like?",
        "average by host",
        "count by colour",
        "",
    ] {
        let refusal = match plan(question, &logs(), None, now()) {
            Err(r) => r,
            Ok(p) => panic!("{question:?} planned {p:?}"),
        };
        assert!(!refusal.suggestions.is_empty());
        // Every suggestion is a question the planner answers.
        for suggestion in &refusal.suggestions {
            assert!(
                plan(suggestion, &logs(), None, now()).is_ok(),
                "{suggestion}"
            );
        }
    }
    assert!(
        refused("how many errors from paris?")
            .reason
            .contains("\"paris\"")
    );
}

#[test]
fn answers_state_only_the_numbers_of_the_result() {
    let schema = logs();
    let count = plan("how many errors?", &schema, None, now()).unwrap();
    let text = render::answer_text(&count, &json!({"rows": [{"count": 42}]}));
    assert_eq!(
        text,
        r#"The number of records of logs where level is "error" is 42."#
    );
    let top = plan("top 2 hosts", &schema, None, now()).unwrap();
    let text = render::answer_text(
        &top,
        &json!({"rows": [{"host": "a", "count": 5}, {"host": "b", "count": 3}]}),
    );
    assert_eq!(
        text,
        "The number of records of logs, for the top 2 host values: a (5), b (3)."
    );
    assert_eq!(render::visualization(&top), "bar");
    assert_eq!(render::visualization(&count), "number");
    let avg = plan("average latency", &schema, None, now()).unwrap();
    let text = render::answer_text(&avg, &json!({"rows": [{"avg_latency_ms": null}]}));
    assert!(text.ends_with("is none (no records matched)."), "{text}");
}

fn metrics_schema() -> Schema {
    Schema {
        dataset: "metrics".to_owned(),
        connection: None,
        fields: Vec::new(),
        time_field: Some("@timestamp".to_owned()),
        metrics: Some(MetricsSchema {
            names: vec!["http_requests_total".to_owned(), "cpu_usage".to_owned()],
            labels: vec![
                field("job", Kind::Keyword, &["api", "db"]),
                field("instance", Kind::Keyword, &["a:9090", "b:9090"]),
            ],
        }),
    }
}

fn promql(question: &str) -> String {
    plan(question, &metrics_schema(), None, now())
        .unwrap_or_else(|r| panic!("{question}: {r:?}"))
        .promql
        .unwrap()
}

#[test]
fn metrics_questions_are_promql() {
    assert_eq!(
        promql("rate of http requests"),
        "rate(http_requests_total[5m])"
    );
    assert_eq!(
        promql("sum of http_requests_total by job"),
        "sum by (job) (http_requests_total)"
    );
    assert_eq!(
        promql("per second rate of http requests for job api"),
        "rate(http_requests_total{job=\"api\"}[5m])"
    );
    assert_eq!(
        promql("top 1 instance by cpu usage"),
        "topk(1, sum by (instance) (cpu_usage))"
    );
    assert_eq!(promql("average cpu_usage"), "avg(cpu_usage)");
    let range = plan(
        "rate of http requests over the last hour",
        &metrics_schema(),
        None,
        now(),
    )
    .unwrap();
    let query = render::query(&range, now()).unwrap();
    assert_eq!(query["start"], json!(now().timestamp_millis() - 3_600_000));
    assert_eq!(render::visualization(&range), "line");
    let first = plan("cpu_usage for job api", &metrics_schema(), None, now()).unwrap();
    let next = plan("and for job db?", &metrics_schema(), Some(&first), now()).unwrap();
    assert_eq!(next.promql.as_deref(), Some("cpu_usage{job=\"db\"}"));
    assert!(plan("what is the moon made of", &metrics_schema(), None, now()).is_err());
}

#[test]
fn a_connections_dataset_is_queried_in_place() {
    let schema = Schema {
        dataset: "sales.orders".to_owned(),
        connection: Some("shop".to_owned()),
        ..logs()
    };
    let plan = plan("how many errors on host a?", &schema, None, now()).unwrap();
    assert_eq!(plan.connection.as_deref(), Some("shop"));
    let query = render::query(&plan, now()).unwrap();
    assert_eq!(query["connection"], "shop");
    assert_eq!(
        query["statement"],
        "SELECT COUNT(*) AS \"count\" FROM \"sales\".\"orders\" WHERE \"host\" = 'a' AND \"level\" = 'error'"
    );
    assert_eq!(
        render::shown(&query),
        json!({"language": "sql", "text": query["statement"], "connection": "shop"})
    );
    // A plan from elsewhere runs where the thread's dataset is, whatever it says.
    let mut elsewhere = plan.clone();
    elsewhere.connection = Some("other".to_owned());
    assert_eq!(
        check::checked(elsewhere, &schema)
            .unwrap()
            .connection
            .as_deref(),
        Some("shop")
    );
    // The account's own datasets are read by their bare name, dots and all.
    let own = Schema {
        dataset: "web.logs".to_owned(),
        ..logs()
    };
    let plan = super::plan("how many errors?", &own, None, now()).unwrap();
    assert!(
        render::sql(&plan, now())
            .unwrap()
            .contains("FROM \"web.logs\""),
        "{plan:?}"
    );
}
