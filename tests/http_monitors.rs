//! Monitors and channels over HTTP: documents in YAML and JSON and their refusals, permissions
//! from roles' Notifications, monitors that fire by themselves and deliver to a webhook receiver
//! on loopback, dry runs, runs recorded in the log across a restart, an alert owed when the
//! server was killed during its delivery and delivered after the restart, and email through a
//! real SMTP server (aiosmtpd, tests/clients/smtp_sink.py).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::{
    collections::BTreeSet,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use axum::{Json, Router, extract::State, http::HeaderMap, routing::post};
use common::{Answer, Credentials, Server, Signed, eventually, root_user, yaml};
use serde_json::{Value, json};

/// A webhook receiver on loopback: what it was sent, and how long it waits before answering.
#[derive(Clone, Default)]
struct Receiver {
    received: Arc<parking_lot::Mutex<Vec<(HeaderMap, Value)>>>,
    delay_ms: Arc<AtomicU64>,
}

impl Receiver {
    /// Starts it; its URL.
    async fn start(&self) -> String {
        async fn hook(
            State(receiver): State<Receiver>,
            headers: HeaderMap,
            Json(body): Json<Value>,
        ) -> &'static str {
            receiver.received.lock().push((headers, body));
            let delay = receiver.delay_ms.load(Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(delay)).await;
            "ok"
        }
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        let app = Router::new()
            .route("/hook", post(hook))
            .with_state(self.clone());
        tokio::spawn(async move { axum::serve(listener, app).await });
        url
    }

    fn bodies(&self) -> Vec<Value> {
        self.received
            .lock()
            .iter()
            .map(|(_, b)| b.clone())
            .collect()
    }
}

/// A request with a JSON body (or none), a JSON answer asked for.
async fn send(client: &Signed, method: &str, path: &str, body: Option<&Value>) -> Answer {
    client.send_json(method, path, body).await
}

fn message(answer: &Answer) -> &str {
    answer.body["message"].as_str().unwrap_or_default()
}

fn refused(answer: &Answer, field: &str) {
    assert_eq!(answer.status, 400, "{answer:?}");
    assert!(
        message(answer).contains(field),
        "{:?} should name {field}",
        message(answer)
    );
}

/// Writes three log records, two of them errors.
async fn logs(root: &Signed) {
    let lines = [
        json!({"index": {"_index": "logs", "_id": "1"}}),
        json!({"level": "error", "msg": "disk full", "team": "a"}),
        json!({"index": {"_index": "logs", "_id": "2"}}),
        json!({"level": "error", "msg": "disk gone", "team": "b"}),
        json!({"index": {"_index": "logs", "_id": "3"}}),
        json!({"level": "info", "msg": "all fine", "team": "a"}),
    ];
    let written = root
        .send_ndjson("POST", "/_bulk?refresh=true", &lines)
        .await;
    assert_eq!(written.body["errors"], false, "{written:?}");
}

fn webhook_channel(id: &str, url: &str) -> Value {
    json!({
        "channel_id": id,
        "config": {
            "name": format!("{id} hook"),
            "channel_type": "webhook",
            "webhook": {"url": url, "headers": {"x-team": "ops"}},
        },
    })
}

/// A monitor of error logs with one trigger (count > `threshold`) alerting `channel`.
fn error_monitor(id: &str, cron: &str, threshold: u64, channel: &str) -> Value {
    json!({
        "_id": id,
        "name": format!("{id} errors"),
        "enabled": true,
        "schedule": {"cron": {"expression": cron, "timezone": "UTC"}},
        "query": {"type": "querydsl", "datasets": ["logs"], "body": {"query": {"term": {"level": "error"}}}},
        "triggers": [{
            "name": "many errors",
            "severity": 1,
            "condition": {"type": "count_greater_than", "threshold": threshold},
            "actions": [{
                "id": "notify",
                "name": "notify ops",
                "destination_id": channel,
                "subject_template": {"source": "{{monitor.name}}: {{ctx.results.0.hits.total.value}} errors"},
                "message_template": {"source": "first: {{results.0.hits.hits.0._source.msg}} ({{trigger.name}})"},
            }],
        }],
    })
}

async fn runs(client: &Signed, id: &str) -> Vec<Value> {
    let answer = send(client, "GET", &format!("/monitor/{id}/runs"), None).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    answer.body["runs"].as_array().cloned().unwrap_or_default()
}

#[tokio::test]
async fn channels_and_monitors_are_documents_checked_field_by_field() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &["--set", "alerting.scheduler=false"]);
    let root = Signed::new(&server, &root_user(dir.path(), "acme"));

    // A channel in YAML, with its id given; another in JSON with a generated one.
    let created = yaml(
        &root,
        "POST",
        "/alert",
        "channel_id: ops-hook\nconfig:\n  name: ops\n  channel_type: webhook\n  webhook:\n    url: http://127.0.0.1:9/hook\n",
    )
    .await;
    assert_eq!(created.status, 200, "{created:?}");
    assert_eq!(created.body["channel_id"], "ops-hook");
    assert_eq!(created.body["config"]["is_enabled"], true);
    let slack = send(&root, "POST", "/alert", Some(&json!({"config": {"name": "chat", "channel_type": "slack", "slack": {"url": "http://127.0.0.1:9/slack"}}})))
        .await;
    assert_eq!(slack.status, 200, "{slack:?}");
    let generated = slack.body["channel_id"].as_str().unwrap().to_owned();
    assert!(uuid::Uuid::parse_str(&generated).is_ok(), "{generated}");
    let again = send(
        &root,
        "POST",
        "/alert",
        Some(&webhook_channel("ops-hook", "http://127.0.0.1:9/x")),
    )
    .await;
    assert_eq!(again.status, 409, "{again:?}");

    // Refusals name the field.
    let bad_type = send(
        &root,
        "POST",
        "/alert",
        Some(&json!({"config": {"name": "x", "channel_type": "pigeon"}})),
    )
    .await;
    refused(&bad_type, "config.channel_type");
    let bad_email = send(&root, "POST", "/alert", Some(&json!({"config": {"name": "x", "channel_type": "email", "email": {"smtp_account_id": "nowhere", "recipients": ["a@example.com"]}}})))
        .await;
    refused(&bad_email, "config.email.smtp_account_id");
    let bad_yaml = yaml(&root, "POST", "/alert", "config: [unclosed").await;
    assert_eq!(bad_yaml.status, 400, "{bad_yaml:?}");

    let got = send(&root, "GET", "/alert/ops-hook", None).await;
    assert_eq!(got.status, 200);
    assert_eq!(got.body["delivery"]["status"], "unused");
    let patched = send(
        &root,
        "PATCH",
        "/alert/ops-hook",
        Some(&json!({"config": {"description": "pages ops"}})),
    )
    .await;
    assert_eq!(patched.status, 200, "{patched:?}");
    assert_eq!(patched.body["config"]["description"], "pages ops");
    assert_eq!(
        patched.body["config"]["webhook"]["url"],
        "http://127.0.0.1:9/hook"
    );
    let listed = send(&root, "GET", "/alerts", None).await;
    assert_eq!(listed.body["total"], 2, "{listed:?}");
    assert_eq!(send(&root, "GET", "/alert/nope", None).await.status, 404);

    // Monitors.
    let monitor = send(
        &root,
        "POST",
        "/monitor",
        Some(&error_monitor("m1", "0 */5 * * * *", 0, "ops-hook")),
    )
    .await;
    assert_eq!(monitor.status, 200, "{monitor:?}");
    assert_eq!(monitor.body["_id"], "m1");
    assert_eq!(monitor.body["_version"], 1);
    assert_eq!(monitor.body["monitor"]["monitor_id"], "m1");
    assert_eq!(monitor.body["monitor"]["monitor_type"], "native");
    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "/schedule",
            json!({"cron": {"expression": "* * *"}}),
            "schedule.cron.expression",
        ),
        (
            "/schedule",
            json!({"period": {"interval": 1, "unit": "WEEKS"}}),
            "schedule.period.unit",
        ),
        ("/query/type", json!("assistant"), "query.body.query"),
        (
            "/triggers/0/condition",
            json!({"type": "field_equals", "path": "no-slash", "value": 1}),
            "triggers[0].condition.path",
        ),
        (
            "/triggers/0/actions/0/destination_id",
            json!("nowhere"),
            "triggers[0].actions[0].destination_id",
        ),
        (
            "/triggers/0/actions/0/message_template/source",
            json!("{{#open}}"),
            "triggers[0].actions[0].message_template.source",
        ),
        (
            "/triggers/0/condition",
            json!({"script": {"source": "ctx.results[0].hits.total.value >"}}),
            "triggers[0].condition.script.source",
        ),
    ];
    for (pointer, value, field) in cases {
        let mut doc = error_monitor("m2", "* * * * * *", 0, "ops-hook");
        *doc.pointer_mut(pointer).unwrap() = value;
        refused(&send(&root, "POST", "/monitor", Some(&doc)).await, field);
    }
    let patched = send(
        &root,
        "PATCH",
        "/monitor/m1",
        Some(&json!({"enabled": false})),
    )
    .await;
    assert_eq!(patched.status, 200, "{patched:?}");
    assert_eq!(patched.body["_version"], 2);
    assert_eq!(patched.body["monitor"]["enabled"], false);
    assert_eq!(patched.body["monitor"]["name"], "m1 errors");
    let listed = send(&root, "GET", "/monitors", None).await;
    assert_eq!(listed.body["total"], 1);
    assert_eq!(send(&root, "GET", "/monitor/none", None).await.status, 404);
    assert_eq!(
        send(
            &root,
            "PATCH",
            "/monitor/none",
            Some(&json!({"enabled": true}))
        )
        .await
        .status,
        404
    );

    // A bulk import is all or nothing: one bad monitor, nothing saved.
    let mut bad = error_monitor("m3", "* * * * * *", 0, "new-hook");
    bad["schedule"] = json!({"cron": {"expression": "nonsense"}});
    let import = json!({
        "channels": [{"type": "notification_channel", "channel_id": "new-hook", "config": {"name": "n", "channel_type": "webhook", "webhook": {"url": "http://127.0.0.1:9/n"}}}],
        "templates": [{"template_id": "t1", "name": "footer", "source": "-- sent by {{monitor.name}}"}],
        "monitors": [error_monitor("m1", "0 * * * * *", 5, "new-hook"), bad],
    });
    let refused_import = send(&root, "POST", "/alerts/config", Some(&import)).await;
    refused(&refused_import, "monitors[1].schedule.cron.expression");
    assert_eq!(
        send(&root, "GET", "/alert/new-hook", None).await.status,
        404
    );
    let mut good = import.clone();
    let mut with_partial = error_monitor("m3", "* * * * * *", 0, "new-hook");
    with_partial["triggers"][0]["actions"][0]["message_template"]["source"] = json!("{{> footer}}");
    good["monitors"] = json!([
        error_monitor("m1", "0 * * * * *", 5, "new-hook"),
        with_partial
    ]);
    let imported = send(&root, "POST", "/alerts/config", Some(&good)).await;
    assert_eq!(imported.status, 200, "{imported:?}");
    assert_eq!(
        (
            imported.body["created"].as_u64(),
            imported.body["updated"].as_u64()
        ),
        (Some(3), Some(1))
    );
    let m1 = send(&root, "GET", "/monitor/m1", None).await;
    assert_eq!(m1.body["_version"], 3);
    assert_eq!(
        m1.body["monitor"]["triggers"][0]["condition"]["threshold"],
        5
    );

    let deleted = send(&root, "DELETE", "/monitor/m3", None).await;
    assert_eq!(deleted.body, json!({"_id": "m3", "result": "deleted"}));
    let deleted = send(&root, "DELETE", "/alert/ops-hook", None).await;
    assert_eq!(
        deleted.body,
        json!({"channel_id": "ops-hook", "result": "deleted"})
    );
    assert_eq!(
        send(&root, "DELETE", "/alert/ops-hook", None).await.status,
        404
    );

    // The log tells who changed what.
    let audit = common::replay(dir.path(), &["audit"]);
    let text = String::from_utf8_lossy(&audit.stdout);
    assert!(text.contains("monitors set: m1 v3 by root"), "{text}");
    assert!(text.contains("monitors deleted: m3"), "{text}");
}

#[tokio::test]
async fn a_monitor_fires_by_itself_and_its_runs_are_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &["--set", "alerting.first_retry_ms=20"]);
    let root = Signed::new(&server, &root_user(dir.path(), "acme"));
    logs(&root).await;
    let receiver = Receiver::default();
    let url = receiver.start().await;
    assert_eq!(
        send(
            &root,
            "POST",
            "/alert",
            Some(&webhook_channel("hook", &url))
        )
        .await
        .status,
        200
    );

    // Fires every second by itself; a monitor whose condition is false delivers nothing.
    let firing = send(
        &root,
        "POST",
        "/monitor",
        Some(&error_monitor("every-second", "* * * * * *", 1, "hook")),
    )
    .await;
    assert_eq!(firing.status, 200, "{firing:?}");
    let quiet = send(
        &root,
        "POST",
        "/monitor",
        Some(&error_monitor("quiet", "* * * * * *", 10, "hook")),
    )
    .await;
    assert_eq!(quiet.status, 200, "{quiet:?}");
    assert!(
        eventually(20, || async { receiver.bodies().len() >= 2 }).await,
        "no alert arrived"
    );
    let body = &receiver.bodies()[0];
    assert_eq!(body["subject"], "every-second errors: 2 errors");
    assert!(
        body["message"].as_str().unwrap().starts_with("first: disk"),
        "{body}"
    );
    assert!(
        body["message"].as_str().unwrap().ends_with("(many errors)"),
        "{body}"
    );
    assert_eq!(body["monitor"]["_id"], "every-second");
    assert_eq!(body["trigger"]["name"], "many errors");
    assert!(chrono::DateTime::parse_from_rfc3339(body["timestamp"].as_str().unwrap()).is_ok());
    assert_eq!(receiver.received.lock()[0].0["x-team"], "ops");
    assert!(
        receiver
            .bodies()
            .iter()
            .all(|b| b["monitor"]["_id"] == "every-second")
    );

    // Runs: each with its planned time, the trigger's result, and the delivery.
    let recorded = runs(&root, "every-second").await;
    assert!(recorded.len() >= 2, "{recorded:?}");
    let delivered = recorded
        .iter()
        .find(|r| !r["deliveries"].as_array().unwrap().is_empty())
        .unwrap();
    assert_eq!(
        delivered["trigger_results"]["many errors"]["triggered"],
        true
    );
    assert_eq!(delivered["deliveries"][0]["delivered"], true);
    assert_eq!(
        delivered["input_results"]["results"][0]["hits"]["total"]["value"],
        2
    );
    let quiet_runs = runs(&root, "quiet").await;
    assert!(!quiet_runs.is_empty());
    assert!(
        quiet_runs
            .iter()
            .all(|r| r["trigger_results"]["many errors"]["triggered"] == false)
    );

    // A dry run renders without sending; execute with trigger_ids runs those only.
    assert_eq!(
        send(
            &root,
            "PATCH",
            "/monitor/every-second",
            Some(&json!({"enabled": false}))
        )
        .await
        .status,
        200
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let before = receiver.bodies().len();
    let dry = send(
        &root,
        "POST",
        "/monitor/every-second/execute?dryrun=true",
        None,
    )
    .await;
    assert_eq!(dry.status, 200, "{dry:?}");
    let action = &dry.body["trigger_results"]["many errors"]["action_results"]["notify"];
    assert_eq!(
        action["output"]["subject"], "every-second errors: 2 errors",
        "{dry:?}"
    );
    assert_eq!(dry.body["monitor_name"], "every-second errors");
    let sent = send(
        &root,
        "POST",
        "/monitor/every-second/execute",
        Some(&json!({"trigger_ids": ["many errors"]})),
    )
    .await;
    assert_eq!(sent.status, 200, "{sent:?}");
    assert_eq!(
        sent.body["trigger_results"]["many errors"]["triggered"],
        true
    );
    assert!(eventually(5, || async { receiver.bodies().len() == before + 1 }).await);
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(
        receiver.bodies().len(),
        before + 1,
        "a disabled monitor ran by itself"
    );

    // A CEL script condition, as OpenSearch's Painless one-liners read.
    let mut scripted = error_monitor("scripted", "0 0 0 1 1 *", 0, "hook");
    scripted["triggers"][0]["condition"] = json!({"script": {"source": "return ctx.results[0].hits.total.value > 1;", "lang": "painless"}});
    assert_eq!(
        send(&root, "POST", "/monitor", Some(&scripted))
            .await
            .status,
        200
    );
    let executed = send(&root, "POST", "/monitor/scripted/execute?dryrun=true", None).await;
    assert_eq!(
        executed.body["trigger_results"]["many errors"]["triggered"], true,
        "{executed:?}"
    );

    let audit = common::replay(dir.path(), &["audit"]);
    let text = String::from_utf8_lossy(&audit.stdout);
    assert!(text.contains("monitor every-second v1 run"), "{text}");
    assert!(text.contains("delivered to channel hook"), "{text}");
}

#[tokio::test]
async fn notifications_permissions_decide_what_a_user_sees_and_runs_read_as_their_author() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &["--set", "alerting.scheduler=false"]);
    let root = Signed::new(&server, &root_user(dir.path(), "acme"));
    logs(&root).await;
    let receiver = Receiver::default();
    let url = receiver.start().await;
    assert_eq!(
        send(
            &root,
            "POST",
            "/alert",
            Some(&webhook_channel("team-hook", &url))
        )
        .await
        .status,
        200
    );
    assert_eq!(
        send(
            &root,
            "POST",
            "/alert",
            Some(&webhook_channel("root-hook", &url))
        )
        .await
        .status,
        200
    );
    let role = "Version: 2025-01-01\nPermissions:\n  - ResourceType: record\n    Actions: [read]\n    Resources: [logs]\nNotifications:\n  Monitor:\n    - Actions: [read, write, execute]\n      Resources: ['team-*']\n  Channel:\n    - Actions: [read]\n      Resources: ['team-*']\n";
    assert_eq!(yaml(&root, "PUT", "/role/team", role).await.status, 200);
    let created = yaml(
        &root,
        "PUT",
        "/user/ann",
        "Version: 2025-01-01\nPassword: correct-horse-battery\nRoles: [team]\n",
    )
    .await;
    let ann = Signed::new(
        &server,
        &Credentials {
            access_key: created.body["access_key"].as_str().unwrap().to_owned(),
            secret_key: created.body["secret_key"].as_str().unwrap().to_owned(),
        },
    );
    // Lists are filtered; other ids are 403.
    let channels = send(&ann, "GET", "/alerts", None).await;
    assert_eq!(channels.body["total"], 1, "{channels:?}");
    assert_eq!(channels.body["channels"][0]["channel_id"], "team-hook");
    assert_eq!(
        send(&ann, "GET", "/alert/root-hook", None).await.status,
        403
    );
    assert_eq!(
        send(&ann, "DELETE", "/alert/team-hook", None).await.status,
        403
    );
    assert_eq!(
        send(
            &ann,
            "POST",
            "/monitor",
            Some(&error_monitor("other", "0 0 * * * *", 0, "team-hook"))
        )
        .await
        .status,
        403
    );
    let mine = send(
        &ann,
        "POST",
        "/monitor",
        Some(&error_monitor("team-errors", "0 0 * * * *", 0, "team-hook")),
    )
    .await;
    assert_eq!(mine.status, 200, "{mine:?}");
    assert_eq!(
        send(
            &root,
            "POST",
            "/monitor",
            Some(&error_monitor("root-only", "0 0 * * * *", 0, "root-hook"))
        )
        .await
        .status,
        200
    );
    let listed = send(&ann, "GET", "/monitors", None).await;
    assert_eq!(listed.body["total"], 1, "{listed:?}");
    assert_eq!(
        send(&ann, "POST", "/monitor/root-only/execute", None)
            .await
            .status,
        403
    );
    assert_eq!(
        send(
            &ann,
            "POST",
            "/alerts/config",
            Some(&json!({"channels": []}))
        )
        .await
        .status,
        200
    );
    let import = json!({"monitors": [error_monitor("team-two", "0 0 * * * *", 0, "team-hook")]});
    assert_eq!(
        send(&ann, "POST", "/alerts/config", Some(&import))
            .await
            .status,
        403
    );

    // The monitor reads as ann: it fires while she may read logs.
    let run = send(&ann, "POST", "/monitor/team-errors/execute", None).await;
    assert_eq!(
        run.body["trigger_results"]["many errors"]["triggered"], true,
        "{run:?}"
    );
    assert!(eventually(5, || async { receiver.bodies().len() == 1 }).await);
    // She loses the right: the run records a 403 and alerts nothing, even run by root.
    let narrower = role.replace("Resources: [logs]", "Resources: [metrics]");
    assert_eq!(
        yaml(&root, "PUT", "/role/team", &narrower).await.status,
        200
    );
    let run = send(&root, "POST", "/monitor/team-errors/execute", None).await;
    assert_eq!(run.status, 200);
    assert!(
        run.body["error"].as_str().unwrap().starts_with("403"),
        "{run:?}"
    );
    assert_eq!(
        run.body["trigger_results"]["many errors"]["triggered"],
        false
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(receiver.bodies().len(), 1);
    let recorded = runs(&root, "team-errors").await;
    assert!(
        recorded[0]["input_results"]["error"]
            .as_str()
            .unwrap()
            .contains("403"),
        "{recorded:?}"
    );
}

#[tokio::test]
async fn a_restart_neither_repeats_a_run_nor_loses_an_owed_alert() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(dir.path(), &["--set", "alerting.first_retry_ms=20"]);
    let credentials = root_user(dir.path(), "acme");
    let root = Signed::new(&server, &credentials);
    logs(&root).await;
    let receiver = Receiver::default();
    let url = receiver.start().await;
    assert_eq!(
        send(
            &root,
            "POST",
            "/alert",
            Some(&webhook_channel("hook", &url))
        )
        .await
        .status,
        200
    );
    // Every two seconds; the receiver holds its answer, so the server dies mid-delivery.
    receiver.delay_ms.store(60_000, Ordering::SeqCst);
    assert_eq!(
        send(
            &root,
            "POST",
            "/monitor",
            Some(&error_monitor("m", "*/2 * * * * *", 0, "hook"))
        )
        .await
        .status,
        200
    );
    assert!(
        eventually(20, || async { !receiver.bodies().is_empty() }).await,
        "no alert was sent"
    );
    server.kill9();
    let planned_before: Vec<String> = {
        let restarted = Server::start(dir.path(), &["--set", "alerting.scheduler=false"]);
        let client = Signed::new(&restarted, &credentials);
        let recorded = runs(&client, "m").await;
        assert!(
            recorded
                .iter()
                .any(|r| r["deliveries"].as_array().unwrap().is_empty()),
            "{recorded:?}"
        );
        recorded
            .iter()
            .map(|r| r["planned_time"].as_str().unwrap().to_owned())
            .collect()
    };
    receiver.delay_ms.store(0, Ordering::SeqCst);
    let sent_before = receiver.bodies().len();
    let server = Server::start(dir.path(), &["--set", "alerting.first_retry_ms=20"]);
    let root = Signed::new(&server, &credentials);
    // The owed alert is delivered again, and recorded as delivered.
    let delivered_owed = eventually(20, || async {
        runs(&root, "m").await.iter().any(|r| {
            planned_before.contains(&r["planned_time"].as_str().unwrap_or_default().to_owned())
                && r["deliveries"][0]["delivered"] == true
        })
    })
    .await;
    assert!(delivered_owed, "{:?}", runs(&root, "m").await);
    assert!(receiver.bodies().len() > sent_before);
    // Runs go on, each planned time once.
    assert!(
        eventually(20, || async {
            runs(&root, "m").await.len() >= planned_before.len() + 2
        })
        .await
    );
    let planned: Vec<String> = runs(&root, "m")
        .await
        .iter()
        .map(|r| r["planned_time"].as_str().unwrap().to_owned())
        .collect();
    let unique: BTreeSet<&String> = planned.iter().collect();
    assert_eq!(
        unique.len(),
        planned.len(),
        "a planned time ran twice: {planned:?}"
    );
}

/// tests/clients/smtp_sink.py on a free loopback port, with the Python $STRATA_TEST_PYTHON names.
async fn smtp_sink(mail: &std::path::Path) -> (u16, tokio::process::Child) {
    use tokio::io::AsyncBufReadExt;
    let python = std::env::var("STRATA_TEST_PYTHON")
        .expect("STRATA_TEST_PYTHON must name a Python with aiosmtpd (scripts/test sets it)");
    let mut child = tokio::process::Command::new(python)
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/clients/smtp_sink.py"
        ))
        .arg("--dir")
        .arg(mail)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut line = String::new();
    tokio::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .await
        .unwrap();
    (
        line.trim().parse().expect("the sink prints its port"),
        child,
    )
}

#[tokio::test]
async fn an_email_channel_sends_through_the_configured_smtp_account() {
    let dir = tempfile::tempdir().unwrap();
    let mail = dir.path().join("mail");
    std::fs::create_dir_all(&mail).unwrap();
    let (port, _sink) = smtp_sink(&mail).await;
    let config = dir.path().join("strata.toml");
    std::fs::write(
        &config,
        format!("[smtp_accounts.relay]\nhost = \"127.0.0.1\"\nport = {port}\nsecurity = \"none\"\nfrom = \"alerts@example.com\"\n"),
    )
    .unwrap();
    let server = Server::start(
        dir.path(),
        &[
            "--config",
            config.to_str().unwrap(),
            "--set",
            "alerting.scheduler=false",
        ],
    );
    let root = Signed::new(&server, &root_user(dir.path(), "acme"));
    logs(&root).await;
    let channel = json!({"channel_id": "mail", "config": {"name": "mail", "channel_type": "email", "email": {"smtp_account_id": "relay", "recipients": ["ops@example.com"]}}});
    assert_eq!(
        send(&root, "POST", "/alert", Some(&channel)).await.status,
        200
    );
    assert_eq!(
        send(
            &root,
            "POST",
            "/monitor",
            Some(&error_monitor("m", "0 0 * * * *", 0, "mail"))
        )
        .await
        .status,
        200
    );
    let run = send(&root, "POST", "/monitor/m/execute", None).await;
    assert_eq!(run.status, 200, "{run:?}");
    assert_eq!(
        run.body["trigger_results"]["many errors"]["action_results"]["notify"]["error"],
        Value::Null,
        "{run:?}"
    );
    let arrived = eventually(10, || async {
        std::fs::read_dir(&mail)
            .unwrap()
            .any(|e| e.unwrap().path().extension().is_some_and(|x| x == "eml"))
    })
    .await;
    assert!(arrived);
    let eml = std::fs::read_dir(&mail)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "eml"))
        .unwrap();
    let text = std::fs::read_to_string(eml).unwrap();
    assert!(text.contains("Subject: m errors: 2 errors"), "{text}");
    assert!(text.contains("To: ops@example.com"), "{text}");
    assert!(text.contains("first: disk"), "{text}");
}

#[tokio::test]
async fn sql_and_promql_monitors_throttles_and_a_failing_channel() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(
        dir.path(),
        &[
            "--set",
            "alerting.scheduler=false",
            "--set",
            "alerting.first_retry_ms=10",
        ],
    );
    let root = Signed::new(&server, &root_user(dir.path(), "acme"));
    logs(&root).await;
    let now_ms = chrono::Utc::now().timestamp_millis();
    let samples = format!("up{{host=\"a\"}} 1 {now_ms}\nup{{host=\"b\"}} 0 {now_ms}\n");
    let written = root
        .send_text(
            "POST",
            "/node/metrics",
            "text/plain; version=0.0.4",
            &samples,
        )
        .await;
    assert_eq!(written.status, 200, "{written:?}");
    let receiver = Receiver::default();
    let url = receiver.start().await;
    assert_eq!(
        send(
            &root,
            "POST",
            "/alert",
            Some(&webhook_channel("hook", &url))
        )
        .await
        .status,
        200
    );

    // SQL: the count is the rows' number; a pointer reads a cell.
    let mut sql = error_monitor("sql", "0 0 * * * *", 0, "hook");
    sql["query"] = json!({"type": "sql", "statement": "SELECT level, COUNT(*) AS n FROM logs GROUP BY level ORDER BY level"});
    sql["triggers"][0]["condition"] =
        json!({"type": "field_equals", "path": "/rows/0/1", "value": 2});
    sql["triggers"][0]["actions"][0]["subject_template"]["source"] =
        json!("{{ctx.results.0.size}} levels");
    sql["triggers"][0]["actions"][0]["throttle"] = json!({"value": 10, "unit": "MINUTES"});
    assert_eq!(
        send(&root, "POST", "/monitor", Some(&sql)).await.status,
        200
    );
    let first = send(&root, "POST", "/monitor/sql/execute", None).await;
    let action = &first.body["trigger_results"]["many errors"]["action_results"]["notify"];
    assert_eq!(action["output"]["subject"], "2 levels", "{first:?}");
    assert_eq!(action["throttled"], false);
    assert!(eventually(5, || async { receiver.bodies().len() == 1 }).await);
    // Within the throttle's ten minutes the action holds back.
    let second = send(&root, "POST", "/monitor/sql/execute", None).await;
    assert_eq!(
        second.body["trigger_results"]["many errors"]["triggered"],
        true
    );
    assert_eq!(
        second.body["trigger_results"]["many errors"]["action_results"]["notify"]["throttled"],
        true,
        "{second:?}"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(receiver.bodies().len(), 1);
    let mut writing = sql.clone();
    writing["_id"] = json!("writer");
    writing["query"]["statement"] = json!("INSERT INTO logs (level) VALUES ('x')");
    refused(
        &send(&root, "POST", "/monitor", Some(&writing)).await,
        "query.statement",
    );

    // PromQL: the count is the series' number; the pointer reads Prometheus' JSON.
    let mut promql = error_monitor("promql", "0 0 * * * *", 0, "hook");
    promql["query"] = json!({"type": "promql", "index": "node", "query": "up == 0"});
    promql["triggers"][0]["condition"] = json!({"type": "count_equals", "threshold": 1});
    promql["triggers"].as_array_mut().unwrap().push(json!({
        "name": "host b down",
        "severity": 2,
        "condition": {"type": "field_equals", "path": "/data/result/0/metric/host", "value": "b"},
        "actions": [],
    }));
    assert_eq!(
        send(&root, "POST", "/monitor", Some(&promql)).await.status,
        200
    );
    let ran = send(&root, "POST", "/monitor/promql/execute?dryrun=true", None).await;
    assert_eq!(
        ran.body["trigger_results"]["many errors"]["triggered"], true,
        "{ran:?}"
    );
    assert_eq!(
        ran.body["trigger_results"]["host b down"]["triggered"], true,
        "{ran:?}"
    );
    let only = send(
        &root,
        "POST",
        "/monitor/promql/execute?dryrun=true",
        Some(&json!({"trigger_ids": ["host b down"]})),
    )
    .await;
    let names: Vec<&String> = only.body["trigger_results"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    assert_eq!(names, ["host b down"]);

    // A channel that refuses: each run records the failure after its retries, and GET
    // /alert/{id} shows it failing.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead = format!("http://{}/hook", closed.local_addr().unwrap());
    drop(closed);
    assert_eq!(
        send(
            &root,
            "POST",
            "/alert",
            Some(&webhook_channel("dead", &dead))
        )
        .await
        .status,
        200
    );
    assert_eq!(
        send(
            &root,
            "POST",
            "/monitor",
            Some(&error_monitor("to-dead", "0 0 * * * *", 0, "dead"))
        )
        .await
        .status,
        200
    );
    for _ in 0..3 {
        let run = send(&root, "POST", "/monitor/to-dead/execute", None).await;
        let error = run.body["trigger_results"]["many errors"]["action_results"]["notify"]["error"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(
            error.contains("refused") || error.contains("connect"),
            "{run:?}"
        );
    }
    let channel = send(&root, "GET", "/alert/dead", None).await;
    assert_eq!(channel.body["delivery"]["status"], "failing", "{channel:?}");
    assert_eq!(channel.body["delivery"]["failed"], 3);
    let recorded = runs(&root, "to-dead").await;
    assert_eq!(recorded[0]["deliveries"][0]["attempts"], 4, "{recorded:?}");
    assert_eq!(
        send(&root, "GET", "/alert/hook", None).await.body["delivery"]["status"],
        "ok"
    );
}

#[tokio::test]
async fn an_unsaved_monitor_is_test_run_with_its_next_run_times_and_nothing_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &["--set", "alerting.scheduler=false"]);
    let root = Signed::new(&server, &root_user(dir.path(), "acme"));
    logs(&root).await;
    let hook = send(
        &root,
        "POST",
        "/alert",
        Some(&webhook_channel("ops-hook", "http://127.0.0.1:9/never")),
    )
    .await;
    assert_eq!(hook.status, 200, "{hook:?}");

    // Every five minutes from 00:00 UTC: the next five such times from now.
    let draft = error_monitor("draft", "0 */5 * * * *", 1, "ops-hook");
    let tested = send(&root, "POST", "/monitor/_execute", Some(&draft)).await;
    assert_eq!(tested.status, 200, "{tested:?}");
    let trigger = &tested.body["trigger_results"]["many errors"];
    assert_eq!(trigger["triggered"], true, "{tested:?}");
    assert_eq!(
        trigger["action_results"]["notify"]["output"]["subject"],
        "draft errors: 2 errors"
    );
    let next: Vec<chrono::DateTime<chrono::Utc>> = tested.body["next_runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap().parse().unwrap())
        .collect();
    assert_eq!(next.len(), 5, "{tested:?}");
    let now = chrono::Utc::now();
    assert!(
        next[0] > now - chrono::TimeDelta::seconds(5)
            && next[0] <= now + chrono::TimeDelta::minutes(5)
    );
    for pair in next.windows(2) {
        assert_eq!(pair[1] - pair[0], chrono::TimeDelta::minutes(5));
        assert_eq!(pair[1].timestamp() % 300, 0);
    }

    // Nothing was saved, run or sent; a document that would not save is refused the same way.
    let listed = send(&root, "GET", "/monitors", None).await;
    assert_eq!(listed.body["total"], 0, "{listed:?}");
    assert_eq!(
        send(&root, "GET", "/monitor/draft/runs", None).await.status,
        404
    );
    let mut bad = draft.clone();
    bad["triggers"][0]["actions"][0]["destination_id"] = json!("nowhere");
    refused(
        &send(&root, "POST", "/monitor/_execute", Some(&bad)).await,
        "nowhere",
    );
    let mut period = draft;
    period["schedule"] = json!({"period": {"interval": 2, "unit": "HOURS"}});
    let tested = send(&root, "POST", "/monitor/_execute", Some(&period)).await;
    let next = tested.body["next_runs"].as_array().unwrap();
    let first: chrono::DateTime<chrono::Utc> = next[0].as_str().unwrap().parse().unwrap();
    let second: chrono::DateTime<chrono::Utc> = next[1].as_str().unwrap().parse().unwrap();
    assert_eq!(second - first, chrono::TimeDelta::hours(2), "{tested:?}");
}
