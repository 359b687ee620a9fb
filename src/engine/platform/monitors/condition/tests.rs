use super::compare::timestamp_of;
use super::*;

fn parse(doc: Value) -> Condition {
    match Condition::parse(&doc) {
        Ok(condition) => condition,
        Err(e) => panic!("{doc} did not parse: {e}"),
    }
}

fn parse_err(doc: Value) -> ConditionError {
    match Condition::parse(&doc) {
        Ok(condition) => panic!("{doc} parsed as {condition:?}"),
        Err(e) => e,
    }
}

fn search_ctx(total: u64) -> Value {
    let result = json!({
        "hits": {
            "total": {"value": total, "relation": "eq"},
            "hits": [{"_source": {"status": 503, "msg": "upstream error", "tags": ["a", "b"]}}],
        }
    });
    json!({
        "results": [result],
        "monitor": {"name": "m"},
        "trigger": {"name": "t", "severity": "1"},
        "periodStart": "2024-05-01T00:00:00Z",
        "periodEnd": "2024-05-01T00:05:00Z",
    })
}

fn eval(condition: &Condition, count: u64, result: &Value) -> Result<bool, String> {
    let ctx = json!({"results": [result]});
    condition.evaluate(&Input {
        count,
        result,
        ctx: &ctx,
    })
}

fn eval_script(source: &str, ctx: &Value) -> Result<bool, String> {
    let condition = parse(json!({"script": {"source": source, "lang": "painless"}}));
    let result = ctx.pointer("/results/0").cloned().unwrap_or(Value::Null);
    condition.evaluate(&Input {
        count: 0,
        result: &result,
        ctx,
    })
}

fn field(op: &str, path: &str, value: Value, result: &Value) -> Result<bool, String> {
    eval(
        &parse(json!({"type": op, "path": path, "value": value})),
        0,
        result,
    )
}

#[test]
fn always_fires() {
    let condition = parse(json!({"type": "always"}));
    assert_eq!(eval(&condition, 0, &Value::Null), Ok(true));
}

#[test]
fn count_conditions() {
    let cases = [
        ("count_greater_than", json!(5), 6, true),
        ("count_greater_than", json!(5), 5, false),
        ("count_greater_than", json!(-1), 0, true),
        ("count_greater_than", json!(4.5), 5, true),
        ("count_less_than", json!(5), 4, true),
        ("count_less_than", json!(5), 5, false),
        ("count_less_than", json!(0.5), 0, true),
        ("count_equals", json!(3), 3, true),
        ("count_equals", json!(3.0), 3, true),
        ("count_equals", json!(3), 4, false),
        ("count_equals", json!(2.5), 2, false),
    ];
    for (op, threshold, count, expected) in cases {
        let condition = parse(json!({"type": op, "threshold": threshold}));
        assert_eq!(
            eval(&condition, count, &Value::Null),
            Ok(expected),
            "{op} {threshold} {count}"
        );
    }
}

#[test]
fn field_equals_and_not_equals() {
    let result = json!({"a": 1, "s": "200", "t": "x", "arr": [1, 2.0], "o": {"k": 1}, "n": null});
    assert_eq!(field("field_equals", "/a", json!(1.0), &result), Ok(true));
    assert_eq!(field("field_equals", "/a", json!("1"), &result), Ok(true));
    assert_eq!(field("field_equals", "/s", json!(200), &result), Ok(true));
    assert_eq!(field("field_equals", "/t", json!("x"), &result), Ok(true));
    assert_eq!(field("field_equals", "/t", json!("y"), &result), Ok(false));
    assert_eq!(
        field("field_equals", "/arr", json!([1.0, 2]), &result),
        Ok(true)
    );
    assert_eq!(
        field("field_equals", "/o", json!({"k": 1.0}), &result),
        Ok(true)
    );
    assert_eq!(field("field_equals", "/n", Value::Null, &result), Ok(true));
    assert_eq!(field("field_equals", "/a", json!(true), &result), Ok(false));
    assert_eq!(field("field_not_equals", "/a", json!(2), &result), Ok(true));
    assert_eq!(
        field("field_not_equals", "/a", json!(1), &result),
        Ok(false)
    );
    assert_eq!(
        field("field_not_equals", "/missing", json!(1), &result),
        Err("no value at /missing".into())
    );
}

#[test]
fn field_contains_starts_ends() {
    let result = json!({"msg": "upstream error 503", "tags": ["a", 2], "n": 12345});
    assert_eq!(
        field("field_contains", "/msg", json!("error"), &result),
        Ok(true)
    );
    assert_eq!(
        field("field_contains", "/msg", json!(503), &result),
        Ok(true)
    );
    assert_eq!(
        field("field_contains", "/msg", json!("warn"), &result),
        Ok(false)
    );
    assert_eq!(
        field("field_contains", "/tags", json!("a"), &result),
        Ok(true)
    );
    assert_eq!(
        field("field_contains", "/tags", json!(2.0), &result),
        Ok(true)
    );
    assert_eq!(
        field("field_contains", "/tags", json!("c"), &result),
        Ok(false)
    );
    let err = field("field_contains", "/n", json!(1), &result);
    assert!(err.is_err_and(|e| e.contains("a number")));
    assert_eq!(
        field("field_starts_with", "/msg", json!("up"), &result),
        Ok(true)
    );
    assert_eq!(
        field("field_starts_with", "/msg", json!("down"), &result),
        Ok(false)
    );
    assert_eq!(
        field("field_starts_with", "/n", json!(123), &result),
        Ok(true)
    );
    assert_eq!(
        field("field_ends_with", "/msg", json!("503"), &result),
        Ok(true)
    );
    assert_eq!(
        field("field_ends_with", "/msg", json!("error"), &result),
        Ok(false)
    );
    assert_eq!(
        field("field_ends_with", "/n", json!("45"), &result),
        Ok(true)
    );
}

#[test]
fn field_matches() {
    let result = json!({"msg": "upstream error 503", "n": 503});
    assert_eq!(
        field("field_matches", "/msg", json!("error \\d+"), &result),
        Ok(true)
    );
    assert_eq!(
        field("field_matches", "/msg", json!("^error"), &result),
        Ok(false)
    );
    assert_eq!(
        field("field_matches", "/n", json!("^5\\d\\d$"), &result),
        Ok(true)
    );
}

#[test]
fn field_greater_and_less() {
    let result = json!({
        "v": 10, "f": 2.5, "s": "42", "big": 18446744073709551615u64,
        "t": "2024-05-01T10:00:00+02:00", "word": "abc", "rows": [["x", "7.5"]],
    });
    assert_eq!(
        field("field_greater_than", "/v", json!(9.5), &result),
        Ok(true)
    );
    assert_eq!(
        field("field_greater_than", "/v", json!(10), &result),
        Ok(false)
    );
    assert_eq!(field("field_less_than", "/f", json!(3), &result), Ok(true));
    assert_eq!(
        field("field_less_than", "/f", json!("2"), &result),
        Ok(false)
    );
    assert_eq!(
        field("field_greater_than", "/s", json!(41), &result),
        Ok(true)
    );
    assert_eq!(
        field("field_greater_than", "/rows/0/1", json!(7), &result),
        Ok(true)
    );
    assert_eq!(
        field(
            "field_greater_than",
            "/big",
            json!(9223372036854775807i64),
            &result
        ),
        Ok(true)
    );
    // 10:00+02:00 is 08:00Z.
    assert_eq!(
        field(
            "field_greater_than",
            "/t",
            json!("2024-05-01T07:59:59.5Z"),
            &result
        ),
        Ok(true)
    );
    assert_eq!(
        field(
            "field_less_than",
            "/t",
            json!("2024-05-01T08:00:00.000000001Z"),
            &result
        ),
        Ok(true)
    );
    assert_eq!(
        field(
            "field_less_than",
            "/t",
            json!("2024-05-01T08:00:00Z"),
            &result
        ),
        Ok(false)
    );
    assert_eq!(
        field("field_greater_than", "/word", json!(1), &result),
        Err("cannot compare a string at /word with a number".into())
    );
    assert_eq!(
        field("field_greater_than", "/t", json!(1), &result),
        Err("cannot compare a timestamp string at /t with a number".into())
    );
    assert_eq!(
        field("field_less_than", "/nope", json!(1), &result),
        Err("no value at /nope".into())
    );
}

#[test]
fn timestamps() {
    let ts = |s: &str| timestamp_of(&json!(s));
    assert_eq!(ts("1970-01-01T00:00:00Z"), Some((0, 0)));
    assert_eq!(ts("2000-03-01T00:00:00Z"), Some((951_868_800, 0)));
    assert_eq!(ts("1969-12-31T23:59:59.25-00:00"), Some((-1, 250_000_000)));
    assert_eq!(ts("2024-02-29t12:00:00z").map(|t| t.0), Some(1_709_208_000));
    for bad in [
        "2023-02-29T00:00:00Z",
        "2024-01-01",
        "2024-01-01T00:00:00",
        "2024-01-01T00:00:00.Z",
    ] {
        assert_eq!(ts(bad), None, "{bad}");
    }
}

#[test]
fn pointer_escaping() {
    let result = json!({"a/b": 1, "m~n": 2, "": {"": 3}});
    assert_eq!(field("field_equals", "/a~1b", json!(1), &result), Ok(true));
    assert_eq!(field("field_equals", "/m~0n", json!(2), &result), Ok(true));
    assert_eq!(field("field_equals", "//", json!(3), &result), Ok(true));
    assert_eq!(field("field_equals", "", result.clone(), &result), Ok(true));
    for bad in ["a/b", "/m~n", "/m~2", "/trailing~"] {
        let e = parse_err(json!({"type": "field_equals", "path": bad, "value": 1}));
        assert_eq!(e.field, "path", "{bad}");
    }
}

#[test]
fn parse_errors_name_the_field() {
    let cases = [
        (json!("always"), ""),
        (json!({}), "type"),
        (json!({"type": 1}), "type"),
        (json!({"type": "sometimes"}), "type"),
        (json!({"type": "always", "threshold": 1}), "threshold"),
        (json!({"type": "count_equals"}), "threshold"),
        (
            json!({"type": "count_equals", "threshold": "5"}),
            "threshold",
        ),
        (
            json!({"type": "count_equals", "threshold": 5, "extra": 1}),
            "extra",
        ),
        (json!({"type": "field_equals", "value": 1}), "path"),
        (json!({"type": "field_equals", "path": "/a"}), "value"),
        (
            json!({"type": "field_matches", "path": "/a", "value": "(unclosed"}),
            "value",
        ),
        (
            json!({"type": "field_matches", "path": "/a", "value": 5}),
            "value",
        ),
        (
            json!({"type": "field_greater_than", "path": "/a", "value": "abc"}),
            "value",
        ),
        (
            json!({"type": "field_less_than", "path": "/a", "value": [1]}),
            "value",
        ),
        (json!({"script": "x > 1"}), "script"),
        (json!({"script": {}}), "script.source"),
        (json!({"script": {"source": "1 +"}}), "script.source"),
        (json!({"script": {"source": "return ;"}}), "script.source"),
        (
            json!({"script": {"source": "true", "lang": "groovy"}}),
            "script.lang",
        ),
        (
            json!({"script": {"source": "true", "params": {}}}),
            "script.params",
        ),
        (json!({"script": {"source": "true"}, "name": "x"}), "name"),
    ];
    for (doc, field) in cases {
        assert_eq!(parse_err(doc.clone()).field, field, "{doc}");
    }
    let e = parse_err(json!({"type": "count_equals"}));
    assert_eq!(e.to_string(), "condition.threshold: missing");
    let long = format!("{} == 1", "1 + ".repeat(1100));
    assert!(
        parse_err(json!({"script": {"source": long}}))
            .reason
            .contains("4096")
    );
    let deep = format!("{}true{}", "(".repeat(500), ")".repeat(500));
    assert_eq!(
        parse_err(json!({"script": {"source": deep}})).field,
        "script.source"
    );
}

#[test]
fn to_json_round_trips() {
    let docs = [
        json!({"type": "always"}),
        json!({"type": "count_greater_than", "threshold": 3}),
        json!({"type": "count_less_than", "threshold": 2.5}),
        json!({"type": "field_matches", "path": "/a~1b/0", "value": "^x"}),
        json!({"type": "field_equals", "path": "", "value": {"k": [1, null]}}),
        json!({"script": {"source": "return ctx.results[0].hits.total.value > 0;", "lang": "painless"}}),
        json!({"script": {"source": "true"}}),
    ];
    for doc in docs {
        let normalized = parse(doc.clone()).to_json();
        assert_eq!(normalized, doc);
        assert_eq!(parse(normalized.clone()).to_json(), normalized);
    }
    let typed = json!({"type": "script", "script": {"source": "true", "lang": "cel"}});
    assert_eq!(
        parse(typed).to_json(),
        json!({"script": {"source": "true", "lang": "cel"}})
    );
}

#[test]
fn painless_one_liners() {
    let fired = search_ctx(3);
    let quiet = search_ctx(0);
    for source in [
        "return ctx.results[0].hits.total.value > 0;",
        "ctx.results[0].hits.total.value > 0",
        "  return   ctx.results[0].hits.total.value > 0 ;  ",
        "ctx.results[0].hits.total.value > 0.5",
        "ctx.results[0].hits.total.value >= 1u",
        "return(ctx.results[0].hits.total.value > 0);",
    ] {
        assert_eq!(eval_script(source, &fired), Ok(true), "{source}");
        assert_eq!(eval_script(source, &quiet), Ok(false), "{source}");
    }
}

#[test]
fn scripts_see_the_whole_context() {
    let ctx = search_ctx(3);
    for source in [
        "size(ctx.results[0].hits.hits) > 0",
        "ctx.results[0].hits.hits.size() > 0",
        "ctx.results[0].hits.hits[0]._source.status == 503.0",
        "ctx.results[0].hits.hits.exists(h, h._source.status >= 500)",
        "ctx.results[0].hits.hits[0]._source.msg.contains('error')",
        "ctx.results[0].hits.hits[0]._source.msg.matches('err(or)?')",
        "'b' in ctx.results[0].hits.hits[0]._source.tags",
        "ctx.trigger.name == 't' && ctx.monitor.name == 'm'",
        "ctx.periodStart < ctx.periodEnd",
        "has(ctx.results[0].hits) && !has(ctx.results[0].aggregations)",
        "ctx.results[0]['hits']['total']['value'] == 3",
    ] {
        assert_eq!(eval_script(source, &ctx), Ok(true), "{source}");
    }
    let big = json!({"results": [{"v": 18446744073709551615u64, "f": 0.25}]});
    assert_eq!(
        eval_script("ctx.results[0].v > 9223372036854775807", &big),
        Ok(true)
    );
    assert_eq!(eval_script("ctx.results[0].f < 1", &big), Ok(true));
}

#[test]
fn script_errors_and_non_booleans() {
    let ctx = search_ctx(3);
    let missing = eval_script("ctx.results[0].aggregations.x > 0", &ctx);
    assert!(
        missing.as_ref().is_err_and(|e| e.contains("aggregations")),
        "{missing:?}"
    );
    let out_of_range = eval_script("ctx.results[5].hits.total.value > 0", &ctx);
    assert!(out_of_range.is_err(), "{out_of_range:?}");
    let bad_types = eval_script("ctx.monitor.name > 1", &ctx);
    assert!(bad_types.is_err(), "{bad_types:?}");
    assert_eq!(
        eval_script("ctx.results[0].hits.total.value", &ctx),
        Err("the condition gave 3, not a boolean".into())
    );
    assert_eq!(
        eval_script("ctx.monitor.name", &ctx),
        Err("the condition gave \"m\", not a boolean".into())
    );
    assert_eq!(
        eval_script("ctx.results", &ctx),
        Err("the condition gave a list of 1 items, not a boolean".into())
    );
    let no_files = eval_script("read('/etc/passwd') == ''", &ctx);
    assert!(no_files.is_err_and(|e| e.contains("read")));
}

#[test]
fn conditions_are_shareable() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Condition>();
}

#[test]
fn deep_scripts_stay_off_the_callers_stack() {
    // Unoptimized, cel needs far more than a test thread's 2 MiB for these.
    let ctx = search_ctx(1);
    let parens = format!("{}true{}", "(".repeat(95), ")".repeat(95));
    assert_eq!(eval_script(&parens, &ctx), Ok(true));
    let nested = format!("{}true{}", "[1].exists(x, ".repeat(30), ")".repeat(30));
    assert_eq!(eval_script(&nested, &ctx), Ok(true));
    let chain = format!("{}1 > 0", "1 + ".repeat(95));
    assert_eq!(eval_script(&chain, &ctx), Ok(true));
    let too_long = format!("{}1 > 0", "1 + ".repeat(200));
    let e = parse_err(json!({"script": {"source": too_long}}));
    assert_eq!(
        (e.field.as_str(), e.reason.as_str()),
        ("script.source", "nests deeper than 100 levels")
    );
}
