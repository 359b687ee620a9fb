use super::*;

fn channels() -> BTreeSet<String> {
    ["ops".to_owned()].into()
}

fn partials() -> BTreeMap<String, String> {
    [("footer".to_owned(), "-- {{monitor.name}}".to_owned())].into()
}

fn check(doc: Value) -> Result<Value> {
    let (channels, partials) = (channels(), partials());
    monitor(
        &doc,
        &MonitorContext {
            channels: &channels,
            partials: &partials,
        },
    )
}

fn valid() -> Value {
    json!({
        "name": "errors",
        "schedule": {"period": {"interval": 1, "unit": "MINUTES"}},
        "query": {"type": "querydsl", "datasets": ["logs"], "body": {"query": {"match": {"level": "error"}}}},
        "triggers": [{
            "name": "many",
            "severity": 1,
            "condition": {"type": "count_greater_than", "threshold": 5},
            "actions": [{
                "name": "page",
                "destination_id": "ops",
                "subject_template": {"source": "{{monitor.name}} fired"},
                "message_template": {"source": "{{ctx.results.0.hits.total.value}} errors {{> footer}}", "lang": "mustache"},
                "throttle": {"value": 10, "unit": "MINUTES"},
            }],
        }],
    })
}

fn refused(doc: Value) -> String {
    match check(doc) {
        Err(Error::BadRequest(message)) => message,
        other => panic!("expected a 400, got {other:?}"),
    }
}

#[test]
fn a_valid_monitor_is_normalized() {
    let normalized = check(valid()).expect("valid");
    assert_eq!(normalized["type"], "monitor");
    assert_eq!(normalized["monitor_type"], "native");
    assert_eq!(normalized["enabled"], true);
    let action = &normalized["triggers"][0]["actions"][0];
    assert!(action["id"].as_str().is_some_and(|id| !id.is_empty()));
    assert_eq!(action["throttle_enabled"], true);
    assert_eq!(throttle_micros(action), Some(600_000_000));
    assert!(normalized["triggers"][0]["id"].is_string());
    // Normalizing again changes nothing: what is stored reads back as itself.
    assert_eq!(check(normalized.clone()).expect("again"), normalized);
}

#[test]
fn every_invalid_field_is_named() {
    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "/schedule",
            json!({"cron": {"expression": "61 * * * * *"}}),
            "[schedule.cron.expression]",
        ),
        (
            "/schedule",
            json!({"period": {"interval": 0, "unit": "MINUTES"}}),
            "[schedule.period",
        ),
        ("/query/type", json!("graphql"), "[query.type]"),
        // A question monitor's body is the question in words.
        ("/query/type", json!("assistant"), "[query.body.query]"),
        ("/query/body", json!({"size": "ten"}), "[query.body]"),
        (
            "/triggers/0/condition",
            json!({"type": "field_equals", "path": "hits", "value": 1}),
            "[triggers[0].condition.path]",
        ),
        (
            "/triggers/0/condition",
            json!({"type": "sometimes"}),
            "[triggers[0].condition.type]",
        ),
        (
            "/triggers/0/actions/0/destination_id",
            json!("nowhere"),
            "[triggers[0].actions[0].destination_id] no channel",
        ),
        (
            "/triggers/0/actions/0/message_template/source",
            json!("{{#open}} never closed"),
            "[triggers[0].actions[0].message_template.source]",
        ),
        (
            "/triggers/0/actions/0/throttle/unit",
            json!("WEEKS"),
            "[triggers[0].actions[0].throttle.unit]",
        ),
        ("/name", json!(""), "[name]"),
    ];
    for (pointer, value, expected) in cases {
        let mut doc = valid();
        *doc.pointer_mut(pointer).expect("pointer exists") = value;
        let message = refused(doc);
        assert!(message.starts_with(expected), "{pointer}: {message}");
    }
    let mut doc = valid();
    doc["colour"] = json!("red");
    assert!(refused(doc).starts_with("[colour]"));
}

#[test]
fn trigger_names_and_action_ids_are_unique() {
    let mut doc = valid();
    let trigger = doc["triggers"][0].clone();
    doc["triggers"] = json!([trigger.clone(), trigger]);
    assert!(refused(doc).contains("another trigger is named"));
    let mut doc = valid();
    let mut action = doc["triggers"][0]["actions"][0].clone();
    action["id"] = json!("a1");
    doc["triggers"][0]["actions"] = json!([action.clone(), action]);
    assert!(refused(doc).contains("another action of the monitor has the id"));
}

#[test]
fn channels_are_checked_by_type() {
    let smtp: BTreeSet<String> = ["relay".to_owned()].into();
    let context = ChannelContext {
        smtp_accounts: &smtp,
    };
    let webhook = json!({"name": "hook", "channel_type": "webhook", "webhook": {"url": "http://127.0.0.1:9/x", "headers": {"x-token": "t"}}});
    let normalized = channel_config(&webhook, &context).expect("webhook");
    assert_eq!(normalized["is_enabled"], true);
    assert_eq!(normalized["webhook"]["headers"]["x-token"], "t");
    let email = json!({"name": "mail", "channel_type": "email", "email": {"smtp_account_id": "relay", "recipients": ["ops@example.com"]}});
    channel_config(&email, &context).expect("email");
    let cases = [
        (
            json!({"name": "x", "channel_type": "pigeon"}),
            "[config.channel_type]",
        ),
        (
            json!({"name": "x", "channel_type": "slack"}),
            "[config.slack] is required",
        ),
        (
            json!({"name": "x", "channel_type": "slack", "slack": {"url": "ftp://x"}}),
            "[config.slack.url]",
        ),
        (
            json!({"name": "x", "channel_type": "email", "email": {"smtp_account_id": "other", "recipients": ["a@b.c"]}}),
            "[config.email.smtp_account_id]",
        ),
        (
            json!({"name": "x", "channel_type": "email", "email": {"smtp_account_id": "relay", "recipients": ["not an address"]}}),
            "[config.email.recipients[0]]",
        ),
    ];
    for (config, expected) in cases {
        match channel_config(&config, &context) {
            Err(Error::BadRequest(message)) => assert!(message.starts_with(expected), "{message}"),
            other => panic!("expected a 400 for {config}, got {other:?}"),
        }
    }
}

#[test]
fn ids_are_names_fit_for_paths_and_patterns() {
    assert!(check_id("id", "team-a.monitor_1").is_ok());
    for bad in ["", "a/b", "a*", "a b", "x#y"] {
        assert!(check_id("id", bad).is_err(), "{bad:?}");
    }
    assert!(id_or_new(None, "id").is_ok_and(|id| uuid::Uuid::parse_str(&id).is_ok()));
}

#[test]
fn a_monitors_statement_must_read() {
    for statement in [
        "SELECT 1",
        "  with x as (select 1) select * from x",
        "(SELECT 1)",
        "SHOW TABLES",
        "DESCRIBE logs",
    ] {
        assert!(check_read_only(statement).is_ok(), "{statement}");
    }
    for statement in [
        "INSERT INTO logs VALUES (1)",
        "DELETE FROM logs",
        "DROP TABLE logs",
        "",
    ] {
        assert!(check_read_only(statement).is_err(), "{statement}");
    }
}
