//! Conversation threads and messages over HTTP (spec 001 sections 2, 3 and 4.5): their fields
//! and defaults, statuses and transitions, refusals, who sees which thread, the schema a thread
//! shows as its user sees it, and that everything is in the log (a restart keeps it, the audit
//! names it, a refused write appends nothing).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{Answer, Server, Signed, root_user, user, yaml};
use serde_json::{Value, json};

fn message(answer: &Answer) -> &str {
    answer.body["message"].as_str().unwrap_or_default()
}

/// Asserts `status` and a message that contains `text`.
fn refused(answer: &Answer, status: u16, text: &str) {
    assert_eq!(answer.status, status, "{answer:?}");
    assert!(
        message(answer).contains(text),
        "{:?} should say {text:?}",
        message(answer)
    );
}

/// A role that reads `logs` without its `secret` field.
const READER: &str = r#"
Version: 2025-01-01
Permissions:
  - ResourceType: record
    Actions: [read]
    Resources: ["logs"]
    Fields:
      Deny: ["secret"]
  - ResourceType: metadata
    Actions: [read]
    Resources: ["logs"]
"#;

async fn seed(root: &Signed) {
    let lines = [
        json!({"index": {"_index": "logs", "_id": "1"}}),
        json!({"host": "a", "status": 500, "secret": "s3cr3t", "@timestamp": "2026-11-01T10:00:00Z"}),
    ];
    let written = root.send_ndjson("POST", "/_bulk", &lines).await;
    assert_eq!(written.body["errors"], false, "{written:?}");
}

async fn create(client: &Signed, body: Value) -> Answer {
    client.send("POST", "/assistant/threads", Some(&body)).await
}

fn ask(thread: &str, question: &str) -> Value {
    json!({"thread_id": thread, "role": "user", "content": {"user_query": question}})
}

/// How many events the log holds, by the audit's count of lines.
fn audit(dir: &std::path::Path) -> String {
    let audit = common::replay(dir, &["audit"]);
    let text = String::from_utf8_lossy(&audit.stdout).into_owned();
    assert!(audit.status.success(), "{text}");
    text
}

/// Waits until thread `id` holds `count` messages (questions are answered in the background);
/// its messages.
async fn settled(client: &Signed, id: &str, count: usize) -> Vec<Value> {
    let path = format!("/assistant/threads/{id}/messages");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let messages = client.send("GET", &path, None).await.body;
        let messages = messages.as_array().cloned().unwrap_or_default();
        if messages.len() >= count {
            return messages;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "thread {id} has {} messages, not {count}: {messages:?}",
            messages.len()
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn threads_have_the_spec_fields_defaults_and_transitions() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let root = Signed::new(&server, &root_user(dir.path(), "acme"));
    seed(&root).await;

    let created = create(&root, json!({"name": "errors", "index_name": "logs"})).await;
    assert_eq!(created.status, 201, "{created:?}");
    let thread = &created.body;
    let id = thread["id"].as_str().unwrap().to_owned();
    assert!(uuid::Uuid::parse_str(&id).is_ok(), "{id}");
    assert_eq!(thread["status"], "ongoing");
    assert_eq!(thread["workflow_name"], "alpha_v1");
    assert_eq!(thread["viz_context"], json!({}));
    assert_eq!(thread["index_name"], "logs");
    let created_at = thread["created_at"].as_str().unwrap().to_owned();
    assert!(
        chrono::DateTime::parse_from_rfc3339(&created_at).is_ok(),
        "{created_at}"
    );
    assert_eq!(thread["updated_at"], thread["created_at"]);
    for extra in ["user_context", "system_context", "schema"] {
        assert!(thread.get(extra).is_none(), "{extra} only on get-one");
    }

    // The list: without the get-one extras, newest first.
    let second = create(
        &root,
        json!({"name": "later", "index_name": "logs", "status": "paused",
               "viz_context": {"chart": "bar"}, "workflow_name": "beta"}),
    )
    .await;
    assert_eq!(second.status, 201, "{second:?}");
    assert_eq!(second.body["status"], "paused");
    assert_eq!(second.body["viz_context"], json!({"chart": "bar"}));
    let list = root.send("GET", "/assistant/threads", None).await;
    assert_eq!(list.status, 200, "{list:?}");
    let names: Vec<&str> = list
        .body
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["later", "errors"]);
    assert!(list.body[0].get("schema").is_none());

    // Get-one: the newest question, a system context, the schema as `[{name, type}]` text.
    let asked = root
        .send(
            "POST",
            "/assistant/message",
            Some(&ask(&id, "how many errors?")),
        )
        .await;
    assert_eq!(
        (asked.status, &asked.body),
        (200, &json!(true)),
        "{asked:?}"
    );
    let one = root
        .send("GET", &format!("/assistant/threads/{id}"), None)
        .await;
    assert_eq!(one.status, 200, "{one:?}");
    assert_eq!(one.body["user_context"], "how many errors?");
    assert!(
        one.body["system_context"]
            .as_str()
            .unwrap()
            .contains("logs")
    );
    let schema: Value = serde_json::from_str(one.body["schema"].as_str().unwrap()).unwrap();
    let fields: Vec<(&str, &str)> = schema
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["name"].as_str().unwrap(), f["type"].as_str().unwrap()))
        .collect();
    assert!(fields.contains(&("host", "text")), "{fields:?}");
    assert!(fields.contains(&("status", "long")), "{fields:?}");
    assert!(fields.contains(&("secret", "text")), "{fields:?}");

    // Completed: updated_at moves, and the thread takes no more messages (409).
    std::thread::sleep(std::time::Duration::from_millis(5));
    let done = root
        .send(
            "PUT",
            &format!("/assistant/threads/{id}"),
            Some(&json!({"status": "completed"})),
        )
        .await;
    assert_eq!(done.status, 200, "{done:?}");
    assert_eq!(done.body["status"], "completed");
    assert_ne!(done.body["updated_at"], done.body["created_at"]);
    assert_eq!(done.body["created_at"], json!(created_at));
    let closed = root
        .send("POST", "/assistant/message", Some(&ask(&id, "and now?")))
        .await;
    refused(&closed, 409, "completed");
    let back = root
        .send(
            "PATCH",
            &format!("/assistant/threads/{id}"),
            Some(&json!({"status": "ongoing"})),
        )
        .await;
    refused(&back, 409, "cannot become ongoing");
    let archived = root
        .send(
            "PATCH",
            &format!("/assistant/threads/{id}"),
            Some(&json!({"status": "archived", "name": "old errors"})),
        )
        .await;
    assert_eq!(archived.status, 200, "{archived:?}");
    assert_eq!(archived.body["name"], "old errors");

    // Paused refuses messages until resumed.
    let paused = second.body["id"].as_str().unwrap();
    let path = format!("/assistant/threads/{paused}/messages");
    let body = json!({"role": "user", "content": {"user_query": "q"}});
    refused(&root.send("POST", &path, Some(&body)).await, 409, "paused");
    let resumed = root
        .send(
            "PUT",
            &format!("/assistant/threads/{paused}"),
            Some(&json!({"status": "ongoing"})),
        )
        .await;
    assert_eq!(resumed.status, 200, "{resumed:?}");
    let added = root.send("POST", &path, Some(&body)).await;
    assert_eq!(
        (added.status, &added.body),
        (200, &json!(true)),
        "{added:?}"
    );

    // Refusals: 400 for bad bodies, 404 for an unknown thread.
    refused(
        &create(&root, json!({"index_name": "logs"})).await,
        400,
        "name is required",
    );
    refused(
        &create(
            &root,
            json!({"name": "x", "index_name": "logs", "status": "done"}),
        )
        .await,
        400,
        "status \"done\"",
    );
    refused(
        &create(
            &root,
            json!({"name": "x", "index_name": "logs", "status": "archived"}),
        )
        .await,
        400,
        "status \"archived\"",
    );
    refused(
        &root
            .send(
                "PUT",
                &format!("/assistant/threads/{paused}"),
                Some(&json!({"status": "over"})),
            )
            .await,
        400,
        "status \"over\"",
    );
    refused(
        &root
            .send("POST", &path, Some(&json!({"role": "user", "content": {}})))
            .await,
        400,
        "user_query is required",
    );
    refused(
        &root
            .send(
                "POST",
                "/assistant/message",
                Some(&json!({"role": "user", "content": {"user_query": "q"}})),
            )
            .await,
        400,
        "thread_id is required",
    );
    let unknown = "0190f0f0-0000-7000-8000-000000000000";
    refused(
        &root
            .send("GET", &format!("/assistant/threads/{unknown}"), None)
            .await,
        404,
        "no thread",
    );
    refused(
        &root
            .send("POST", "/assistant/message", Some(&ask(unknown, "q")))
            .await,
        404,
        "no thread",
    );
    refused(
        &root
            .send("DELETE", &format!("/assistant/threads/{unknown}"), None)
            .await,
        404,
        "no thread",
    );
    refused(
        &root
            .send(
                "GET",
                &format!("/assistant/threads/{unknown}/messages"),
                None,
            )
            .await,
        404,
        "no thread",
    );

    // Delete: `true`, and then it is gone with its messages.
    let deleted = root
        .send("DELETE", &format!("/assistant/threads/{paused}"), None)
        .await;
    assert_eq!(
        (deleted.status, &deleted.body),
        (200, &json!(true)),
        "{deleted:?}"
    );
    refused(&root.send("GET", &path, None).await, 404, "no thread");
    let list = root.send("GET", "/assistant/threads", None).await;
    assert_eq!(list.body.as_array().unwrap().len(), 1, "{list:?}");
}

#[tokio::test]
async fn messages_are_listed_oldest_first_and_cleared_with_their_count() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let root = Signed::new(&server, &root_user(dir.path(), "acme"));
    let created = create(&root, json!({"name": "t", "index_name": "logs"})).await;
    let id = created.body["id"].as_str().unwrap().to_owned();
    let path = format!("/assistant/threads/{id}/messages");

    let first = root
        .send("POST", "/assistant/message", Some(&ask(&id, "first?")))
        .await;
    assert_eq!(first.status, 200, "{first:?}");
    let second = json!({"role": "user", "content": {
        "user_query": "second?", "context": "c1", "filters": {"host": "a"}, "parameters": {"k": 2}
    }});
    assert_eq!(root.send("POST", &path, Some(&second)).await.status, 200);
    let answer = json!({"thread_id": id, "role": "assistant", "content": {"user_query": "first?"}});
    assert_eq!(root.send("POST", &path, Some(&answer)).await.status, 200);

    // Each question is answered too: three added, two answers.
    let all = settled(&root, &id, 5).await;
    let added: Vec<&Value> = all.iter().filter(|m| m.get("reply_to").is_none()).collect();
    assert_eq!(added.len(), 3, "{all:?}");
    let queries: Vec<&str> = added
        .iter()
        .map(|m| m["content"]["user_query"].as_str().unwrap())
        .collect();
    assert_eq!(queries, ["first?", "second?", "first?"]);
    assert_eq!(added[2]["role"], "assistant");
    assert_eq!(added[1]["content"]["filters"], json!({"host": "a"}));
    for m in &all {
        assert_eq!(m["thread_id"], json!(id));
        assert!(uuid::Uuid::parse_str(m["message_id"].as_str().unwrap()).is_ok());
        assert!(chrono::DateTime::parse_from_rfc3339(m["created_at"].as_str().unwrap()).is_ok());
    }
    // The newest question is the user context, not the assistant's message.
    let one = root
        .send("GET", &format!("/assistant/threads/{id}"), None)
        .await;
    assert_eq!(one.body["user_context"], "second?");

    let cleared = root.send("DELETE", &path, None).await;
    assert_eq!(cleared.status, 200, "{cleared:?}");
    assert_eq!(cleared.body["deleted_count"], 5);
    assert_eq!(cleared.body["thread_id"], json!(id));
    assert_eq!(cleared.body["status"], "success");
    assert!(cleared.body["message"].is_string());
    assert_eq!(root.send("GET", &path, None).await.body, json!([]));
    let again = root.send("DELETE", &path, None).await;
    assert_eq!(again.body["deleted_count"], 0);
    // The thread stays.
    assert_eq!(
        root.send("GET", &format!("/assistant/threads/{id}"), None)
            .await
            .status,
        200
    );
}

#[tokio::test]
async fn each_user_sees_its_own_threads_and_its_own_view_of_the_schema() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let root = Signed::new(&server, &root_user(dir.path(), "acme"));
    seed(&root).await;
    assert_eq!(yaml(&root, "PUT", "/role/reader", READER).await.status, 200);
    let ann = user(&root, &server, "ann", &["reader"]).await;
    let bob = user(&root, &server, "bob", &["reader"]).await;
    let nobody = user(&root, &server, "nobody", &[]).await;

    let anns = create(&ann, json!({"name": "ann's", "index_name": "logs"})).await;
    assert_eq!(anns.status, 201, "{anns:?}");
    let id = anns.body["id"].as_str().unwrap().to_owned();
    assert_eq!(
        create(&bob, json!({"name": "bob's", "index_name": "logs"}))
            .await
            .status,
        201
    );

    // Ann's schema leaves out the field her role denies.
    let one = ann
        .send("GET", &format!("/assistant/threads/{id}"), None)
        .await;
    assert_eq!(one.status, 200, "{one:?}");
    let schema = one.body["schema"].as_str().unwrap();
    assert!(schema.contains("\"host\""), "{schema}");
    assert!(!schema.contains("secret"), "{schema}");

    // Bob neither lists nor reaches Ann's thread: it does not exist for him.
    let bobs = bob.send("GET", "/assistant/threads", None).await;
    let names: Vec<&str> = bobs
        .body
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["bob's"]);
    for (method, path, body) in [
        ("GET", format!("/assistant/threads/{id}"), None),
        (
            "PUT",
            format!("/assistant/threads/{id}"),
            Some(json!({"name": "mine"})),
        ),
        ("DELETE", format!("/assistant/threads/{id}"), None),
        ("GET", format!("/assistant/threads/{id}/messages"), None),
        ("DELETE", format!("/assistant/threads/{id}/messages"), None),
        (
            "POST",
            "/assistant/message".to_owned(),
            Some(ask(&id, "hers?")),
        ),
    ] {
        refused(
            &bob.send(method, &path, body.as_ref()).await,
            404,
            "no thread",
        );
    }
    // The root user sees every thread of the account.
    let all = root.send("GET", "/assistant/threads", None).await;
    assert_eq!(all.body.as_array().unwrap().len(), 2, "{all:?}");
    assert_eq!(
        root.send("GET", &format!("/assistant/threads/{id}"), None)
            .await
            .status,
        200
    );
    // A user without roles has no access at all.
    refused(
        &nobody.send("GET", "/assistant/threads", None).await,
        403,
        "no role",
    );
    refused(
        &create(&nobody, json!({"name": "n", "index_name": "logs"})).await,
        403,
        "no role",
    );
}

#[tokio::test]
async fn threads_and_messages_are_events_that_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(dir.path(), &[]);
    let root = Signed::new(&server, &root_user(dir.path(), "acme"));
    let kept = create(&root, json!({"name": "kept", "index_name": "logs"})).await;
    let kept = kept.body["id"].as_str().unwrap().to_owned();
    let gone = create(&root, json!({"name": "gone", "index_name": "logs"})).await;
    let gone = gone.body["id"].as_str().unwrap().to_owned();
    for q in ["one?", "two?"] {
        assert_eq!(
            root.send("POST", "/assistant/message", Some(&ask(&kept, q)))
                .await
                .status,
            200
        );
        settled(&root, &kept, if q == "one?" { 2 } else { 4 }).await;
    }
    assert_eq!(
        root.send("POST", "/assistant/message", Some(&ask(&gone, "x?")))
            .await
            .status,
        200
    );
    settled(&root, &gone, 2).await;
    assert_eq!(
        root.send("DELETE", &format!("/assistant/threads/{gone}"), None)
            .await
            .status,
        200
    );
    let done = root
        .send(
            "PATCH",
            &format!("/assistant/threads/{kept}"),
            Some(&json!({"status": "completed"})),
        )
        .await;
    assert_eq!(done.status, 200);
    let before = root
        .send("GET", &format!("/assistant/threads/{kept}/messages"), None)
        .await;
    let thread_before = root
        .send("GET", &format!("/assistant/threads/{kept}"), None)
        .await;

    // Refused writes append nothing.
    let events_before = audit(dir.path()).lines().count();
    refused(
        &root
            .send("POST", "/assistant/message", Some(&ask(&kept, "more?")))
            .await,
        409,
        "completed",
    );
    refused(
        &root
            .send(
                "PATCH",
                &format!("/assistant/threads/{kept}"),
                Some(&json!({"status": "paused"})),
            )
            .await,
        409,
        "cannot become",
    );
    refused(
        &create(
            &root,
            json!({"name": "bad", "index_name": "logs", "status": "x"}),
        )
        .await,
        400,
        "status",
    );
    assert_eq!(audit(dir.path()).lines().count(), events_before);

    assert!(server.stop());
    let server = Server::start(dir.path(), &[]);
    let root = Signed::new(&server, &root.credentials);
    let after = root
        .send("GET", &format!("/assistant/threads/{kept}/messages"), None)
        .await;
    assert_eq!(after.body, before.body);
    let thread_after = root
        .send("GET", &format!("/assistant/threads/{kept}"), None)
        .await;
    assert_eq!(thread_after.body, thread_before.body);
    refused(
        &root
            .send("GET", &format!("/assistant/threads/{gone}"), None)
            .await,
        404,
        "no thread",
    );

    let text = audit(dir.path());
    for needle in [
        format!("thread {kept} (\"kept\" on logs) ongoing by root"),
        format!("thread {kept} (\"kept\" on logs) completed by root"),
        format!("thread {kept}: user message"),
        format!("thread {gone} deleted with its messages"),
    ] {
        assert!(text.contains(&needle), "{needle:?} missing from\n{text}");
    }
}

/// A conversation socket of `client`, signed in its headers.
async fn socket(
    client: &Signed,
) -> tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>> {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let url = format!("{}/assistant/nl", client.base.replacen("http", "ws", 1));
    let mut request = url.into_client_request().unwrap();
    for (name, value) in client.sign("GET", "/assistant/nl", &[], &[], chrono::Utc::now()) {
        request.headers_mut().insert(
            reqwest::header::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            value.parse().unwrap(),
        );
    }
    let (socket, response) = tokio_tungstenite::connect_async(request).await.unwrap();
    assert_eq!(response.status(), 101);
    socket
}

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn send(socket: &mut Socket, frame: Value) {
    use futures::SinkExt;
    socket
        .send(tokio_tungstenite::tungstenite::Message::text(
            frame.to_string(),
        ))
        .await
        .unwrap();
}

/// The next JSON frame (pings are skipped), within 20 seconds.
async fn next(socket: &mut Socket) -> Value {
    use futures::StreamExt;
    loop {
        let frame = tokio::time::timeout(std::time::Duration::from_secs(20), socket.next())
            .await
            .expect("a frame in time")
            .expect("the socket is open")
            .unwrap();
        if let tokio_tungstenite::tungstenite::Message::Text(text) = frame {
            return serde_json::from_str(text.as_str()).unwrap();
        }
    }
}

/// Frames until the answer (or error) to one question; the progress stages on the way.
async fn answer(socket: &mut Socket) -> (Vec<String>, Value) {
    let mut stages = Vec::new();
    loop {
        let frame = next(socket).await;
        match frame["type"].as_str() {
            Some("progress") => stages.push(frame["stage"].as_str().unwrap().to_owned()),
            Some("answer") | Some("error") => return (stages, frame),
            _ => {}
        }
    }
}

async fn seed_requests(root: &Signed) {
    let mut lines = Vec::new();
    let records = [
        ("a", "error", 500, 120),
        ("a", "info", 200, 80),
        ("b", "error", 503, 300),
        ("b", "info", 200, 60),
        ("b", "warn", 404, 40),
    ];
    for (i, (host, level, status, latency)) in records.iter().enumerate() {
        lines.push(json!({"index": {"_index": "requests", "_id": i.to_string()}}));
        lines.push(json!({
            "host": host, "level": level, "status": status, "latency_ms": latency,
            "@timestamp": chrono::Utc::now().to_rfc3339(),
        }));
    }
    let written = root.send_ndjson("POST", "/_bulk", &lines).await;
    assert_eq!(written.body["errors"], false, "{written:?}");
}

#[tokio::test]
async fn the_socket_answers_questions_asked_over_it_and_over_http() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &["--set", "assistant.ping_ms=300"]);
    let root = Signed::new(&server, &root_user(dir.path(), "acme"));
    seed_requests(&root).await;
    let created = create(&root, json!({"name": "t", "index_name": "requests"})).await;
    let id = created.body["id"].as_str().unwrap().to_owned();

    let mut ws = socket(&root).await;
    send(&mut ws, json!({"type": "subscribe", "thread_id": id})).await;
    assert_eq!(
        next(&mut ws).await,
        json!({"type": "subscribed", "thread_id": id})
    );

    // A question over the socket: accepted, progress, then the answer.
    send(&mut ws, ask(&id, "how many errors?")).await;
    let accepted = next(&mut ws).await;
    assert_eq!(accepted["type"], "accepted", "{accepted}");
    let question_id = accepted["message_id"].as_str().unwrap().to_owned();
    let (stages, frame) = answer(&mut ws).await;
    assert_eq!(stages, ["planning", "running"]);
    assert_eq!(frame["type"], "answer", "{frame}");
    assert_eq!(frame["message_id"], json!(question_id));
    let content = &frame["content"];
    assert_eq!(content["query"]["language"], "sql");
    assert_eq!(
        content["query"]["text"],
        r#"SELECT COUNT(*) AS "count" FROM "requests" WHERE "level" = 'error'"#
    );
    assert_eq!(content["result"]["rows"], json!([[2]]));
    assert_eq!(content["visualization"], "number");
    assert!(
        content["text"].as_str().unwrap().ends_with(" is 2."),
        "{content}"
    );

    // A question over HTTP reaches the subscribed socket too; a follow-up keeps the filter.
    let asked = root
        .send(
            "POST",
            "/assistant/message",
            Some(&ask(&id, "and for host b?")),
        )
        .await;
    assert_eq!(asked.status, 200, "{asked:?}");
    let (_, frame) = answer(&mut ws).await;
    assert_eq!(frame["content"]["result"]["rows"], json!([[1]]), "{frame}");

    // Top-N as bars, an average, a refusal with suggestions.
    send(&mut ws, ask(&id, "top 2 hosts by average latency")).await;
    next(&mut ws).await;
    let (_, frame) = answer(&mut ws).await;
    assert_eq!(frame["content"]["visualization"], "bar", "{frame}");
    assert_eq!(
        frame["content"]["result"]["rows"],
        json!([["b", 133.33333333333334], ["a", 100.0]])
    );
    send(&mut ws, ask(&id, "what is the weather in paris?")).await;
    next(&mut ws).await;
    let (_, frame) = answer(&mut ws).await;
    assert_eq!(frame["type"], "answer");
    assert!(frame["content"].get("query").is_none(), "{frame}");
    assert!(
        !frame["content"]["suggestions"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    assert!(
        frame["content"]["text"]
            .as_str()
            .unwrap()
            .contains("\"paris\"")
    );

    // Bad frames are error frames, and the socket stays open; idle, it is pinged.
    send(&mut ws, json!("hello")).await;
    assert_eq!(next(&mut ws).await["type"], "error");
    send(&mut ws, ask(&id, "")).await;
    let refused = next(&mut ws).await;
    assert_eq!(refused["type"], "error");
    assert!(
        refused["message"].as_str().unwrap().contains("user_query"),
        "{refused}"
    );
    send(&mut ws, json!({"type": "subscribe", "thread_id": "nope"})).await;
    assert!(
        next(&mut ws).await["message"]
            .as_str()
            .unwrap()
            .contains("no thread")
    );
    {
        use futures::StreamExt;
        let frame = tokio::time::timeout(std::time::Duration::from_secs(5), ws.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert!(frame.is_ping(), "{frame:?}");
    }

    // Every answer is in the thread, after the question it answers.
    let messages = root
        .send("GET", &format!("/assistant/threads/{id}/messages"), None)
        .await;
    let messages = messages.body.as_array().unwrap();
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        [
            "user",
            "assistant",
            "user",
            "assistant",
            "user",
            "assistant",
            "user",
            "assistant"
        ]
    );
    assert_eq!(messages[1]["reply_to"], json!(question_id));
    assert_eq!(messages[1]["content"]["result"]["rows"], json!([[2]]));
}

#[tokio::test]
async fn a_socket_is_signed_in_its_headers_or_presigned_in_its_query() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let root = Signed::new(&server, &root_user(dir.path(), "acme"));
    assert_eq!(yaml(&root, "PUT", "/role/reader", READER).await.status, 200);
    let ann = user(&root, &server, "ann", &["reader"]).await;
    let bob = user(&root, &server, "bob", &["reader"]).await;
    let anns = create(&ann, json!({"name": "a", "index_name": "logs"})).await;
    let id = anns.body["id"].as_str().unwrap().to_owned();

    // Presigned, as a browser opens it.
    let host = ann.base.trim_start_matches("http://").to_owned();
    let path = strata::sigv4::presign(
        &strata::sigv4::Outgoing {
            method: "GET",
            host: &host,
            path_and_query: "/assistant/nl",
            headers: &[],
            body: &[],
        },
        (&ann.credentials.access_key, &ann.credentials.secret_key),
        ("us-east-1", "strata"),
        chrono::Utc::now(),
        300,
    );
    let (mut ws, _) = tokio_tungstenite::connect_async(format!("ws://{host}{path}"))
        .await
        .unwrap();
    send(&mut ws, json!({"type": "subscribe", "thread_id": id})).await;
    assert_eq!(next(&mut ws).await["type"], "subscribed");

    // Bob's socket cannot watch Ann's thread, nor ask in it.
    let mut bobs = socket(&bob).await;
    send(&mut bobs, json!({"type": "subscribe", "thread_id": id})).await;
    let refused = next(&mut bobs).await;
    assert_eq!(refused["type"], "error");
    assert!(
        refused["message"].as_str().unwrap().contains("no thread"),
        "{refused}"
    );
    send(&mut bobs, ask(&id, "how many records?")).await;
    assert_eq!(next(&mut bobs).await["type"], "error");

    // Unsigned, or signed badly: refused before the upgrade.
    let unsigned = tokio_tungstenite::connect_async(format!("ws://{host}/assistant/nl")).await;
    match unsigned {
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            assert_eq!(response.status(), 401)
        }
        other => panic!("an unsigned socket was not refused: {other:?}"),
    }
    let tampered = path.replace("X-Amz-Expires=300", "X-Amz-Expires=600");
    assert!(
        tokio_tungstenite::connect_async(format!("ws://{host}{tampered}"))
            .await
            .is_err()
    );
}

#[tokio::test]
async fn a_monitor_asks_a_question_planned_once_when_it_is_saved() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &["--set", "alerting.scheduler=false"]);
    let root = Signed::new(&server, &root_user(dir.path(), "acme"));
    seed_requests(&root).await;
    let monitor = json!({
        "_id": "errors",
        "name": "errors on b",
        "schedule": {"period": {"interval": 1, "unit": "MINUTES"}},
        "query": {"type": "assistant", "datasets": ["requests"], "body": {"query": "how many errors on host b in the last hour?"}},
        "triggers": [{
            "name": "any", "severity": 1,
            "condition": {"type": "field_greater_than", "path": "/rows/0/0", "value": 0},
        }],
    });
    let created = root.send_json("POST", "/monitor", Some(&monitor)).await;
    assert_eq!(created.status, 200, "{created:?}");
    // The plan is kept with the monitor, the window relative (it moves with each run).
    let saved = root.send_json("GET", "/monitor/errors", None).await;
    let plan = &saved.body["monitor"]["query"]["plan"];
    assert_eq!(plan["measure"]["op"], "count", "{saved:?}");
    assert_eq!(plan["window"]["from"], "now-1h", "{saved:?}");
    assert_eq!(
        plan["filters"],
        json!([{"field": "host", "op": "eq", "value": "b"}, {"field": "level", "op": "eq", "value": "error"}])
    );

    let run = root
        .send_json("POST", "/monitor/errors/execute", None)
        .await;
    assert_eq!(run.status, 200, "{run:?}");
    assert_eq!(
        run.body["input_results"]["results"][0]["rows"],
        json!([[1]]),
        "{run:?}"
    );
    assert_eq!(
        run.body["trigger_results"]["any"]["triggered"], true,
        "{run:?}"
    );

    // A question the planner cannot read is refused when the monitor is saved.
    let mut unclear = monitor.clone();
    unclear["_id"] = json!("unclear");
    unclear["query"]["body"]["query"] = json!("how many errors from paris?");
    let refused = root.send_json("POST", "/monitor", Some(&unclear)).await;
    assert_eq!(refused.status, 400, "{refused:?}");
    assert!(message(&refused).contains("\"paris\""), "{refused:?}");
    // A plan sent by the client is replaced by the server's.
    let mut forged = monitor.clone();
    forged["_id"] = json!("forged");
    forged["query"]["plan"] = json!({"dataset": "requests", "measure": {"op": "count"}});
    assert_eq!(
        root.send_json("POST", "/monitor", Some(&forged))
            .await
            .status,
        200
    );
    let saved = root.send_json("GET", "/monitor/forged", None).await;
    assert_eq!(
        saved.body["monitor"]["query"]["plan"]["window"]["from"],
        "now-1h"
    );
}

/// A stand-in for an OpenAI-compatible chat completions API on loopback: it answers from a
/// fixed table of questions and records what it was sent.
async fn fake_model(
    answers: Vec<(&'static str, String)>,
) -> (
    String,
    std::sync::Arc<std::sync::Mutex<Vec<(String, Value)>>>,
) {
    use axum::{Json, Router, extract::State, http::HeaderMap, routing::post};
    type Seen = std::sync::Arc<std::sync::Mutex<Vec<(String, Value)>>>;
    type Table = std::sync::Arc<Vec<(&'static str, String)>>;
    let seen: Seen = Default::default();
    async fn complete(
        State((answers, seen)): State<(Table, Seen)>,
        headers: HeaderMap,
        Json(body): Json<Value>,
    ) -> Json<Value> {
        let key = headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        seen.lock().unwrap().push((key, body.clone()));
        let question = body["messages"][2]["content"].as_str().unwrap_or_default();
        let content = answers
            .iter()
            .find(|(q, _)| *q == question)
            .map(|(_, a)| a.clone())
            .unwrap_or_else(|| "{\"refuse\": \"not in my table\"}".to_owned());
        Json(
            json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": content}}]}),
        )
    }
    let app = Router::new()
        .route("/v1/chat/completions", post(complete))
        .with_state((std::sync::Arc::new(answers), seen.clone()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, seen)
}

#[tokio::test]
async fn a_configured_model_plans_first_and_the_planner_takes_over_when_its_plan_does_not_hold() {
    let (url, seen) = fake_model(vec![
        (
            "how bad was it on host b?",
            json!({"dataset": "requests", "measure": {"op": "count"},
                   "filters": [{"field": "host", "op": "eq", "value": "b"}, {"field": "level", "op": "eq", "value": "error"}]})
            .to_string(),
        ),
        // A field the dataset does not have: not used.
        (
            "how many errors?",
            json!({"dataset": "requests", "measure": {"op": "count"},
                   "filters": [{"field": "severity", "op": "eq", "value": "error"}]})
            .to_string(),
        ),
        ("average latency", "I would say about 100".to_owned()),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start_with(
        dir.path(),
        &[
            "--set",
            "assistant.provider=openai-compatible",
            "--set",
            &format!("assistant.base_url={url}"),
            "--set",
            "assistant.model=fixed-table",
            "--set",
            "assistant.api_key_env=MODEL_KEY_OF_THE_TEST",
        ],
        &[("MODEL_KEY_OF_THE_TEST", "sk-test".to_owned())],
    );
    let root = Signed::new(&server, &root_user(dir.path(), "acme"));
    seed_requests(&root).await;
    let created = create(&root, json!({"name": "t", "index_name": "requests"})).await;
    let id = created.body["id"].as_str().unwrap().to_owned();
    let mut asked = 0;
    let mut answer_to = |question: &'static str| {
        asked += 1;
        let (root, id, asked) = (root.clone(), id.clone(), asked);
        async move {
            let posted = root
                .send("POST", "/assistant/message", Some(&ask(&id, question)))
                .await;
            assert_eq!(posted.status, 200, "{posted:?}");
            settled(&root, &id, asked * 2).await.last().unwrap()["content"].clone()
        }
    };

    // The model's plan, checked, is run: a question the built-in planner would refuse.
    let content = answer_to("how bad was it on host b?").await;
    assert_eq!(content["planner"], "model", "{content}");
    assert_eq!(content["result"]["rows"], json!([[1]]), "{content}");
    // A plan naming a field that is not there falls back to the built-in planner.
    let content = answer_to("how many errors?").await;
    assert_eq!(content["planner"], "rules", "{content}");
    assert_eq!(content["result"]["rows"], json!([[2]]), "{content}");
    // So does an answer that is no plan.
    let content = answer_to("average latency").await;
    assert_eq!(content["planner"], "rules", "{content}");
    assert_eq!(
        content["query"]["text"],
        r#"SELECT AVG("latency_ms") AS "avg_latency_ms" FROM "requests""#
    );

    // The model got the key, the schema and the question.
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 3);
    assert_eq!(seen[0].0, "Bearer sk-test");
    let context = seen[0].1["messages"][1]["content"].as_str().unwrap();
    assert!(
        context.contains("latency_ms") && context.contains("\"error\""),
        "{context}"
    );
    assert_eq!(seen[0].1["model"], "fixed-table");
}

#[tokio::test]
async fn a_question_left_unanswered_by_a_crash_is_answered_after_the_restart() {
    // A model that never answers holds the question between its message and its answer.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let app = axum::Router::new().route(
        "/v1/chat/completions",
        axum::routing::post(|| async {
            tokio::time::sleep(std::time::Duration::from_secs(600)).await;
            "{}"
        }),
    );
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(
        dir.path(),
        &[
            "--set",
            "assistant.provider=openai-compatible",
            "--set",
            &format!("assistant.base_url={url}"),
            "--set",
            "assistant.model=silent",
            "--set",
            "assistant.timeout_ms=600000",
        ],
    );
    let root = Signed::new(&server, &root_user(dir.path(), "acme"));
    seed_requests(&root).await;
    let created = create(&root, json!({"name": "t", "index_name": "requests"})).await;
    let id = created.body["id"].as_str().unwrap().to_owned();
    let posted = root
        .send(
            "POST",
            "/assistant/message",
            Some(&ask(&id, "how many errors?")),
        )
        .await;
    assert_eq!(posted.status, 200, "{posted:?}");
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let path = format!("/assistant/threads/{id}/messages");
    let asked = root.send("GET", &path, None).await.body;
    assert_eq!(asked.as_array().unwrap().len(), 1, "{asked}");
    let question = asked[0]["message_id"].clone();
    server.kill9();

    // Started again (without the model), the node answers it, once.
    let server = Server::start(dir.path(), &[]);
    let root = Signed::new(&server, &root.credentials);
    let messages = settled(&root, &id, 2).await;
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert_eq!(messages[1]["role"], "assistant");
    assert_eq!(messages[1]["reply_to"], question);
    assert_eq!(messages[1]["content"]["result"]["rows"], json!([[2]]));
    drop(server);
    let server = Server::start(dir.path(), &[]);
    let root = Signed::new(&server, &root.credentials);
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let after = root.send("GET", &path, None).await.body;
    assert_eq!(after.as_array().unwrap().len(), 2, "{after}");
}
