//! The platform API's front door: SigV4 signatures (who may come in, and the 401s of those who
//! may not), the API version, the root user, and `GET /` as Elasticsearch clients read it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use chrono::{Duration, Utc};
use common::{Server, Signed, root_user};
use serde_json::json;

#[tokio::test]
async fn a_signed_request_gets_in_and_the_others_get_401() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let root = root_user(dir.path(), "acme");
    assert!(root.access_key.starts_with("AKST") && root.access_key.len() == 20);
    assert_eq!(root.secret_key.len(), 40);
    let client = Signed::new(&server, &root);

    let info = client.send("GET", "/", None).await;
    assert_eq!(info.status, 200, "{info:?}");
    assert_eq!(info.body["tagline"], "You Know, for Search");
    assert_eq!(info.body["version"]["build_flavor"], "default");
    assert_eq!(
        info.headers.get("x-elastic-product").unwrap(),
        "Elasticsearch"
    );

    // Unsigned: 401 in the platform's error shape; /health needs no signature.
    let unsigned = client.send_raw("GET", "/", &[], Vec::new()).await;
    assert_eq!(unsigned.status, 401);
    assert_eq!(unsigned.body["status"], "error");
    let message = unsigned.body["message"].as_str().unwrap();
    assert!(message.starts_with("authentication: "), "{message}");
    assert!(message.contains("not signed"), "{message}");
    assert_eq!(
        client
            .send_raw("GET", "/health", &[], Vec::new())
            .await
            .status,
        200
    );
    // An unknown path is 401 before it is 404.
    assert_eq!(
        client
            .send_raw("GET", "/nowhere", &[], Vec::new())
            .await
            .status,
        401
    );
    assert_eq!(client.send("GET", "/nowhere", None).await.status, 404);

    let refused = |answer: common::Answer, needle: &str| {
        assert_eq!(answer.status, 401, "{answer:?}");
        let message = answer.body["message"].as_str().unwrap().to_owned();
        assert!(
            message.contains(needle),
            "{message:?} should say {needle:?}"
        );
    };

    // A wrong secret, an unknown access key.
    let mut wrong = client.clone();
    wrong.credentials.secret_key = "x".repeat(40);
    refused(
        wrong.send("GET", "/", None).await,
        "signature does not match",
    );
    let mut unknown = client.clone();
    unknown.credentials.access_key = "AKSTAAAAAAAAAAAAAAAA".to_owned();
    refused(unknown.send("GET", "/", None).await, "unknown access key");

    // Signed 20 minutes ago, or 20 minutes ahead: outside the 15 minutes of skew.
    for at in [
        Utc::now() - Duration::minutes(20),
        Utc::now() + Duration::minutes(20),
    ] {
        let headers = client.sign("GET", "/", &[], b"", at);
        refused(
            client.send_raw("GET", "/", &headers, Vec::new()).await,
            "away from the server's time",
        );
    }
    // Five minutes off is fine.
    let headers = client.sign("GET", "/", &[], b"", Utc::now() - Duration::minutes(5));
    assert_eq!(
        client
            .send_raw("GET", "/", &headers, Vec::new())
            .await
            .status,
        200
    );

    // A body or a query changed after signing.
    let body = json!({"a": 1}).to_string().into_bytes();
    let ct = [("content-type", "application/json")];
    let headers = client.sign("POST", "/", &ct, &body, Utc::now());
    refused(
        client
            .send_raw(
                "POST",
                "/",
                &headers,
                json!({"a": 2}).to_string().into_bytes(),
            )
            .await,
        "signature does not match",
    );
    let mut with_hash = client.sign("POST", "/", &ct, &body, Utc::now());
    with_hash.push((
        "x-amz-content-sha256".to_owned(),
        strata::sigv4::sha256_hex(&body),
    ));
    refused(
        client
            .send_raw(
                "POST",
                "/",
                &with_hash,
                json!({"a": 2}).to_string().into_bytes(),
            )
            .await,
        "does not match the body",
    );
    let headers = client.sign("GET", "/?size=1", &[], b"", Utc::now());
    refused(
        client
            .send_raw("GET", "/?size=2", &headers, Vec::new())
            .await,
        "signature does not match",
    );
    // `+` in a query is a space, as the handlers read it: a signature over `q=a%2Bb` (a plus)
    // does not admit `q=a+b` (a space), and one over `q=a%20b` does.
    let headers = client.sign("GET", "/?q=a%2Bb", &[], b"", Utc::now());
    refused(
        client
            .send_raw("GET", "/?q=a+b", &headers, Vec::new())
            .await,
        "signature does not match",
    );
    let headers = client.sign("GET", "/?q=a%20b", &[], b"", Utc::now());
    assert_eq!(
        client
            .send_raw("GET", "/?q=a+b", &headers, Vec::new())
            .await
            .status,
        200
    );
    // The signed body itself is accepted, and routed (POST / is not an endpoint).
    let headers = client.sign("POST", "/", &ct, &body, Utc::now());
    assert_eq!(
        client.send_raw("POST", "/", &headers, body).await.status,
        405
    );
}

#[tokio::test]
async fn the_api_version_is_checked_and_the_root_user_is_one_per_account() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let root = root_user(dir.path(), "acme");
    let client = Signed::new(&server, &root);
    assert_eq!(
        client
            .send("GET", "/?api-version=2025-06-30", None)
            .await
            .status,
        200
    );
    let answer = client.send("GET", "/?api-version=2024-01-01", None).await;
    assert_eq!(answer.status, 400, "{answer:?}");
    assert!(
        answer.body["message"]
            .as_str()
            .unwrap()
            .contains("unsupported API version"),
        "{answer:?}"
    );
    let headers = client.sign(
        "GET",
        "/",
        &[("x-api-version", "2030-01-01")],
        b"",
        Utc::now(),
    );
    assert_eq!(
        client
            .send_raw("GET", "/", &headers, Vec::new())
            .await
            .status,
        400
    );

    let again = common::strata(dir.path(), &["users", "create-root", "--account", "acme"]);
    assert!(!again.status.success());
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("has a root user already"),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    let missing = common::strata(dir.path(), &["users", "create-root", "--account", "nobody"]);
    assert!(!missing.status.success());

    // The secret is not in the log in clear: a dump shows the access key, never the secret.
    let dump = common::replay(dir.path(), &["dump", "--kind", "user_created"]);
    let text = String::from_utf8_lossy(&dump.stdout);
    assert!(text.contains(&root.access_key), "{text}");
    assert!(!text.contains(&root.secret_key));
    // On a FileLog, not in its files either (on Kafka the dump above read the topics).
    let log = walk(&dir.path().join("log"));
    assert!(
        !log.windows(root.secret_key.len())
            .any(|w| w == root.secret_key.as_bytes())
    );

    // A restart keeps the user (the seal key is in the data directory).
    drop(server);
    let server = Server::start(dir.path(), &[]);
    assert_eq!(
        Signed::new(&server, &root)
            .send("GET", "/", None)
            .await
            .status,
        200
    );
}

/// Every byte of every file under `dir` (none when it does not exist).
fn walk(dir: &std::path::Path) -> Vec<u8> {
    let mut bytes = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return bytes;
    };
    for entry in entries {
        let path = entry.unwrap().path();
        if path.is_dir() {
            bytes.extend(walk(&path));
        } else {
            bytes.extend(std::fs::read(&path).unwrap());
        }
    }
    bytes
}
