//! The web console over HTTP (API.md "Console"): its page and files served without a
//! signature, with a content security policy and cache headers; sign-in sessions (a cookie and
//! a CSRF token) that call the platform routes with the rights of the user's keys; sign-out,
//! expiry by a change to the user, failed sign-ins slowed and refused; and that sessions are
//! events (a restart keeps them, the audit names them).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{Answer, Client, Server, Signed, root_user, user, yaml};
use serde_json::{Value, json};

/// A browser of the console: its cookie, and the CSRF token the sign-in gave.
struct Browser {
    http: reqwest::Client,
    base: String,
    cookie: Option<String>,
    csrf: Option<String>,
}

impl Browser {
    fn new(server: &Server) -> Browser {
        Browser {
            http: reqwest::Client::new(),
            base: server.platform_url.clone(),
            cookie: None,
            csrf: None,
        }
    }

    async fn request(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
        extra: &[(&str, &str)],
    ) -> Answer {
        let mut request = self.http.request(
            reqwest::Method::from_bytes(method.as_bytes()).unwrap(),
            format!("{}{path}", self.base),
        );
        if let Some(cookie) = &self.cookie {
            request = request.header("cookie", format!("theme=dark; strata_session={cookie}"));
        }
        if let Some(csrf) = &self.csrf {
            request = request.header("x-csrf-token", csrf);
        }
        for (name, value) in extra {
            request = request.header(*name, *value);
        }
        if let Some(body) = body {
            request = request
                .header("content-type", "application/json")
                .body(body.to_string());
        }
        Client::answer(request.send().await.unwrap()).await
    }

    async fn send(&self, method: &str, path: &str, body: Option<&Value>) -> Answer {
        self.request(method, path, body, &[]).await
    }

    /// Signs in; the answer (the cookie and the CSRF token are kept when it succeeds).
    async fn sign_in(&mut self, body: Value) -> Answer {
        let answer = self.send("POST", "/console/session", Some(&body)).await;
        if answer.status == 200 {
            let set = answer.headers["set-cookie"].to_str().unwrap().to_owned();
            let value = set
                .strip_prefix("strata_session=")
                .and_then(|rest| rest.split(';').next())
                .unwrap();
            self.cookie = Some(value.to_owned());
            self.csrf = answer.body["csrf_token"].as_str().map(str::to_owned);
        }
        answer
    }
}

fn header(answer: &Answer, name: &str) -> String {
    answer
        .headers
        .get(name)
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default()
}

/// A role that reads `logs` without its `secret` field, and may create `notes`.
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
    Resources: ["logs", "notes"]
  - ResourceType: dataset
    Actions: [create]
    Resources: ["notes"]
"#;

async fn seed(root: &Signed) {
    let lines = [
        json!({"index": {"_index": "logs", "_id": "1"}}),
        json!({"host": "a", "secret": "s3cr3t", "@timestamp": "2026-11-01T10:00:00Z"}),
    ];
    let written = root.send_ndjson("POST", "/_bulk", &lines).await;
    assert_eq!(written.body["errors"], false, "{written:?}");
    assert_eq!(yaml(root, "PUT", "/role/reader", READER).await.status, 200);
}

#[tokio::test]
async fn the_page_and_its_files_are_served_unsigned_with_a_policy_and_cache_headers() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let browser = Browser::new(&server);
    let page = browser.send("GET", "/console", None).await;
    assert_eq!(page.status, 200, "{page:?}");
    assert!(header(&page, "content-type").starts_with("text/html"));
    assert_eq!(header(&page, "cache-control"), "no-cache");
    let policy = header(&page, "content-security-policy");
    assert!(
        policy.contains("script-src 'self'") && !policy.contains("unsafe-inline"),
        "{policy}"
    );
    assert_eq!(header(&page, "x-frame-options"), "DENY");
    let html = reqwest::get(format!("{}/console/", server.platform_url))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let app = html
        .split('"')
        .find(|part| part.starts_with("/console/a/") && part.ends_with("/app.js"))
        .unwrap_or_else(|| panic!("no app.js in {html}"))
        .to_owned();
    assert!(!html.contains("<script>"), "an inline script: {html}");

    let file = browser.send("GET", &app, None).await;
    assert_eq!(file.status, 200, "{file:?}");
    assert_eq!(
        header(&file, "content-type"),
        "text/javascript; charset=utf-8"
    );
    assert_eq!(
        header(&file, "cache-control"),
        "public, max-age=31536000, immutable"
    );
    assert!(header(&file, "content-security-policy").contains("default-src 'self'"));
    assert_eq!(header(&file, "vary"), "accept-encoding");
    assert!(file.headers.get("content-encoding").is_none(), "{file:?}");
    // Compressed for a browser that takes gzip, and the same file once inflated; not for one
    // that refuses it.
    let plain = reqwest::get(format!("{}{app}", server.platform_url))
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    let gzipped = browser
        .http
        .get(format!("{}{app}", server.platform_url))
        .header("accept-encoding", "br, gzip;q=0.8")
        .send()
        .await
        .unwrap();
    assert_eq!(gzipped.headers()["content-encoding"], "gzip");
    let gzipped = gzipped.bytes().await.unwrap();
    assert!(
        gzipped.len() < plain.len(),
        "{} of {}",
        gzipped.len(),
        plain.len()
    );
    let mut inflated = Vec::new();
    std::io::Read::read_to_end(
        &mut flate2::read::GzDecoder::new(gzipped.as_ref()),
        &mut inflated,
    )
    .unwrap();
    assert_eq!(inflated, plain.as_ref());
    let refused = browser
        .request(
            "GET",
            &app,
            None,
            &[("accept-encoding", "gzip;q=0, identity")],
        )
        .await;
    assert!(
        refused.headers.get("content-encoding").is_none(),
        "{refused:?}"
    );
    // Another binary's files, or none: 404.
    let stale = app.replace("/console/a/", "/console/a/0000");
    assert_eq!(browser.send("GET", &stale, None).await.status, 404);
    let version = app.trim_end_matches("/app.js");
    for missing in ["/nope.js", "/index.html"] {
        let path = format!("{version}{missing}");
        assert_eq!(browser.send("GET", &path, None).await.status, 404, "{path}");
    }
    // Everything else still needs a signature or a session.
    let unsigned = browser.send("GET", "/_cat/indices", None).await;
    assert_eq!(unsigned.status, 401, "{unsigned:?}");
    let unsigned = browser.send("GET", "/console/session", None).await;
    assert_eq!(unsigned.status, 401, "{unsigned:?}");
}

#[tokio::test]
async fn a_session_acts_with_the_users_rights_and_needs_its_csrf_token_to_change_anything() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let root = Signed::new(&server, &root_user(dir.path(), "acme"));
    seed(&root).await;
    let ann = user(&root, &server, "ann", &["reader"]).await;

    // Wrong password, unknown user, missing fields: refused, without saying which was wrong.
    let mut browser = Browser::new(&server);
    for (body, status) in [
        (
            json!({"username": "ann", "password": "wrong-horse-battery"}),
            401,
        ),
        (
            json!({"username": "nobody", "password": "correct-horse-battery"}),
            401,
        ),
        (json!({"username": "ann"}), 400),
        (json!({"username": "ann", "password": "x", "extra": 1}), 400),
    ] {
        let refused = browser.sign_in(body.clone()).await;
        assert_eq!(refused.status, status, "{body}: {refused:?}");
        assert!(refused.headers.get("set-cookie").is_none());
    }
    let wrong = browser
        .sign_in(json!({"username": "ann", "password": "wrong-horse-battery"}))
        .await;
    let unknown = browser
        .sign_in(json!({"username": "nobody", "password": "wrong-horse-battery"}))
        .await;
    assert_eq!(wrong.body, unknown.body);

    // The one account is assumed; the answer holds the CSRF token and sets the cookie.
    let signed_in = browser
        .sign_in(json!({"username": "ann", "password": "correct-horse-battery"}))
        .await;
    assert_eq!(signed_in.status, 200, "{signed_in:?}");
    assert_eq!(signed_in.body["account"], "acme");
    assert_eq!(signed_in.body["user"], "ann");
    assert_eq!(signed_in.body["root"], false);
    assert!(signed_in.body["expires_at"].is_string());
    let cookie = header(&signed_in, "set-cookie");
    for part in ["HttpOnly", "SameSite=Strict", "Path=/", "Max-Age=43200"] {
        assert!(cookie.contains(part), "{cookie}");
    }
    let csrf = browser.csrf.clone().unwrap();
    assert!(!cookie.contains(&csrf));

    // Reads: what ann's keys read, no more (the denied field is not there).
    let by_session = browser
        .send(
            "POST",
            "/logs/_search",
            Some(&json!({"query": {"match_all": {}}})),
        )
        .await;
    let by_keys = ann
        .send(
            "POST",
            "/logs/_search",
            Some(&json!({"query": {"match_all": {}}})),
        )
        .await;
    assert_eq!(by_session.status, 200, "{by_session:?}");
    assert_eq!(
        by_session.body["hits"]["hits"][0]["_source"],
        by_keys.body["hits"]["hits"][0]["_source"]
    );
    assert!(by_session.body["hits"]["hits"][0]["_source"]["secret"].is_null());
    let current = browser.send("GET", "/console/session", None).await;
    assert_eq!(current.status, 200, "{current:?}");
    assert_eq!(current.body["csrf_token"], csrf.as_str());
    assert_eq!(current.body["user"], "ann");

    // A change without the CSRF token, or from another site's page, is refused; with it, done.
    let mut forgetful = Browser::new(&server);
    forgetful.cookie = browser.cookie.clone();
    let refused = forgetful.send("PUT", "/notes", None).await;
    assert_eq!(refused.status, 403, "{refused:?}");
    assert!(
        refused.body["message"]
            .as_str()
            .unwrap()
            .contains("x-csrf-token")
    );
    let foreign = browser
        .request("PUT", "/notes", None, &[("origin", "http://evil.example")])
        .await;
    assert_eq!(foreign.status, 403, "{foreign:?}");
    let created = browser.send("PUT", "/notes", None).await;
    assert_eq!(created.status, 200, "{created:?}");
    // What ann may not do, she may not do in the console either.
    let denied = browser.send("PUT", "/other", None).await;
    assert_eq!(denied.status, 403, "{denied:?}");
    // A request signed with keys has no console session.
    let keys = ann.send("GET", "/console/session", None).await;
    assert_eq!(keys.status, 400, "{keys:?}");

    // Sign-out ends the session; the cookie is cleared.
    let out = browser.send("DELETE", "/console/session", None).await;
    assert_eq!(out.status, 200, "{out:?}");
    assert!(header(&out, "set-cookie").contains("Max-Age=0"));
    let ended = browser.send("GET", "/logs/_search", None).await;
    assert_eq!(ended.status, 401, "{ended:?}");
    assert!(ended.body["message"].as_str().unwrap().contains("sign in"));
}

/// The status of a search of `logs` by `browser`.
async fn read(browser: &Browser) -> u16 {
    browser.send("GET", "/logs/_search", None).await.status
}

#[tokio::test]
async fn a_change_to_the_user_ends_its_sessions_which_are_events_that_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(dir.path(), &[]);
    let root = Signed::new(&server, &root_user(dir.path(), "acme"));
    seed(&root).await;
    user(&root, &server, "ann", &["reader"]).await;
    user(&root, &server, "bob", &["reader"]).await;
    let sign_in = |name: &'static str| {
        let server = &server;
        async move {
            let mut browser = Browser::new(server);
            let answer = browser
                .sign_in(json!({"account": "acme", "username": name, "password": "correct-horse-battery"}))
                .await;
            assert_eq!(answer.status, 200, "{answer:?}");
            browser
        }
    };
    let (ann, bob, kept) = (
        sign_in("ann").await,
        sign_in("bob").await,
        sign_in("ann").await,
    );
    assert_eq!(read(&ann).await, 200);

    // The sessions outlive a restart.
    assert!(server.stop());
    let server = Server::start(dir.path(), &[]);
    let root = Signed::new(&server, &root.credentials);
    let moved = |mut browser: Browser| {
        browser.base = server.platform_url.clone();
        browser
    };
    let (ann, bob, kept) = (moved(ann), moved(bob), moved(kept));
    assert_eq!(read(&ann).await, 200);
    assert_eq!(read(&kept).await, 200);

    // Ann's roles change: her sessions end. Bob is deleted: his end too.
    let changed = yaml(
        &root,
        "PUT",
        "/user/ann",
        "Version: 2025-01-01\nPassword: correct-horse-battery\nRoles: [reader, writer]\n",
    )
    .await;
    assert_eq!(changed.status, 200, "{changed:?}");
    assert_eq!(read(&ann).await, 401);
    assert_eq!(read(&kept).await, 401);
    assert_eq!(read(&bob).await, 200);
    assert_eq!(root.send("DELETE", "/user/bob", None).await.status, 200);
    assert_eq!(read(&bob).await, 401);

    let audit = common::replay(dir.path(), &["audit"]);
    let text = String::from_utf8_lossy(&audit.stdout).into_owned();
    assert!(audit.status.success(), "{text}");
    assert!(
        text.contains("user ann signed in to the console: session")
            && text.contains("user bob signed in to the console: session"),
        "{text}"
    );
}

#[tokio::test]
async fn failed_sign_ins_are_slowed_then_refused_and_the_account_is_asked_for_when_there_are_several()
 {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(
        dir.path(),
        &[
            "--set",
            "console.sign_in_slow_after=5",
            "--set",
            "console.sign_in_refuse_after=3",
        ],
    );
    let root = Signed::new(&server, &root_user(dir.path(), "acme"));
    seed(&root).await;
    user(&root, &server, "ann", &["reader"]).await;
    let mut browser = Browser::new(&server);
    for _ in 0..3 {
        let wrong = browser
            .sign_in(json!({"username": "ann", "password": "wrong-horse-battery"}))
            .await;
        assert_eq!(wrong.status, 401, "{wrong:?}");
    }
    // Even the right password is refused now, with when to try again.
    let refused = browser
        .sign_in(json!({"username": "ann", "password": "correct-horse-battery"}))
        .await;
    assert_eq!(refused.status, 429, "{refused:?}");
    let wait: u64 = refused.retry_after.as_deref().unwrap().parse().unwrap();
    assert!(wait > 800 && wait <= 900, "{wait}");
    // Another user name is not held back.
    let other = browser
        .sign_in(json!({"username": "root", "password": "wrong-horse-battery"}))
        .await;
    assert_eq!(other.status, 401, "{other:?}");

    // With a second account, the account must be named.
    root_user(dir.path(), "globex");
    let ambiguous = browser
        .sign_in(json!({"username": "root", "password": "wrong-horse-battery"}))
        .await;
    assert_eq!(ambiguous.status, 400, "{ambiguous:?}");
    assert!(
        ambiguous.body["message"]
            .as_str()
            .unwrap()
            .contains("account is required")
    );
}

#[tokio::test]
async fn the_conversation_socket_takes_the_session_from_the_consoles_own_origin_only() {
    use futures::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::{Message, client::IntoClientRequest};
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let root = Signed::new(&server, &root_user(dir.path(), "acme"));
    seed(&root).await;
    user(&root, &server, "ann", &["reader"]).await;
    let mut browser = Browser::new(&server);
    let signed_in = browser
        .sign_in(json!({"username": "ann", "password": "correct-horse-battery"}))
        .await;
    assert_eq!(signed_in.status, 200, "{signed_in:?}");
    let thread = browser
        .send(
            "POST",
            "/assistant/threads",
            Some(&json!({"name": "t", "index_name": "logs"})),
        )
        .await;
    assert_eq!(thread.status, 201, "{thread:?}");
    let id = thread.body["id"].as_str().unwrap().to_owned();

    let open = |origin: String| {
        let url = format!(
            "{}/assistant/nl",
            server.platform_url.replacen("http", "ws", 1)
        );
        let mut request = url.into_client_request().unwrap();
        let cookie = format!("strata_session={}", browser.cookie.as_deref().unwrap());
        request
            .headers_mut()
            .insert("cookie", cookie.parse().unwrap());
        request
            .headers_mut()
            .insert("origin", origin.parse().unwrap());
        tokio_tungstenite::connect_async(request)
    };
    // Another site's page cannot open it with the user's cookie.
    match open("http://evil.example".to_owned()).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            assert_eq!(response.status(), 403)
        }
        other => panic!(
            "a foreign origin opened the socket: {:?}",
            other.map(|_| ())
        ),
    }
    let (mut socket, response) = open(server.platform_url.clone()).await.unwrap();
    assert_eq!(response.status(), 101);
    let frame = json!({"type": "subscribe", "thread_id": id}).to_string();
    socket.send(Message::text(frame)).await.unwrap();
    let reply = loop {
        let frame = tokio::time::timeout(std::time::Duration::from_secs(20), socket.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        if let Message::Text(text) = frame {
            break serde_json::from_str::<Value>(text.as_str()).unwrap();
        }
    };
    assert_eq!(reply, json!({"type": "subscribed", "thread_id": id}));
}
