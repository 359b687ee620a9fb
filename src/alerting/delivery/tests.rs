//! Delivery against real servers on loopback: an axum receiver for webhooks and Slack, and
//! aiosmtpd (tests/clients/smtp_sink.py, run by $STRATA_TEST_PYTHON) for email.

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use serde_json::{Value, json};

use super::*;

mod email;

fn tiny(attempts: u32) -> Retry {
    Retry {
        attempts,
        first_delay: Duration::from_millis(5),
        max_delay: Duration::from_millis(20),
    }
}

fn alert(subject: &str, message: &str) -> Alert {
    Alert {
        subject: subject.into(),
        message: message.into(),
        monitor: json!({"id": "m1", "name": "disk"}),
        trigger: json!({"id": "t1", "severity": "1"}),
        timestamp: "2026-01-02T03:04:05Z".into(),
    }
}

/// What an HTTP receiver answers (in turn, the last one repeating) and what it was sent.
#[derive(Clone, Default)]
struct Receiver {
    answers: Arc<Mutex<Vec<u16>>>,
    seen: Arc<Mutex<Vec<(HeaderMap, Bytes)>>>,
}

async fn receiver(answers: &[u16]) -> (String, Receiver) {
    let state = Receiver {
        answers: Arc::new(Mutex::new(answers.iter().rev().copied().collect())),
        ..Default::default()
    };
    let app = Router::new()
        .route("/hook", post(record))
        .with_state(state.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, state)
}

async fn record(
    State(receiver): State<Receiver>,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, &'static str) {
    receiver.seen.lock().unwrap().push((headers, body));
    let mut answers = receiver.answers.lock().unwrap();
    let code = if answers.len() > 1 {
        answers.pop()
    } else {
        answers.last().copied()
    };
    (
        StatusCode::from_u16(code.unwrap_or(200)).unwrap(),
        "receiver says no",
    )
}

/// A loopback port nothing listens on.
fn closed_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A listener that accepts connections and never says a word.
async fn silent_listener() -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    port
}

fn failure(delivery: &Delivery) -> &DeliveryError {
    delivery
        .outcome
        .as_ref()
        .err()
        .unwrap_or_else(|| panic!("delivered: {delivery:?}"))
}

#[tokio::test]
async fn webhook_posts_the_alert_as_json_with_the_channel_headers() {
    let (url, receiver) = receiver(&[200]).await;
    let headers = BTreeMap::from([
        ("X-Token".to_string(), "t0k".to_string()),
        ("X-Team".into(), "ops".into()),
    ]);
    let alert = alert("Disk full", "host a: 97 %");
    let delivery = deliver(
        &client().unwrap(),
        &Destination::Webhook { url, headers },
        &alert,
        &tiny(3),
    )
    .await;
    assert_eq!(
        delivery,
        Delivery {
            attempts: 1,
            outcome: Ok(())
        }
    );
    let seen = receiver.seen.lock().unwrap();
    let (headers, body) = &seen[0];
    assert_eq!(headers["content-type"], "application/json");
    assert_eq!(headers["x-token"], "t0k");
    assert_eq!(headers["x-team"], "ops");
    assert_eq!(headers["user-agent"], "strata-alerting");
    let body: Value = serde_json::from_slice(body).unwrap();
    assert_eq!(
        body,
        json!({
            "subject": "Disk full",
            "message": "host a: 97 %",
            "monitor": {"id": "m1", "name": "disk"},
            "trigger": {"id": "t1", "severity": "1"},
            "timestamp": "2026-01-02T03:04:05Z",
        })
    );
}

#[tokio::test]
async fn webhook_retries_5xx_until_delivered() {
    let (url, receiver) = receiver(&[503, 503, 200]).await;
    let webhook = Destination::Webhook {
        url,
        headers: BTreeMap::new(),
    };
    let delivery = deliver(&client().unwrap(), &webhook, &alert("s", "m"), &tiny(4)).await;
    assert_eq!(
        delivery,
        Delivery {
            attempts: 3,
            outcome: Ok(())
        }
    );
    assert_eq!(receiver.seen.lock().unwrap().len(), 3);
}

#[tokio::test]
async fn webhook_4xx_is_not_retried_and_5xx_stops_after_the_attempts() {
    let (url, _) = receiver(&[400]).await;
    let webhook = Destination::Webhook {
        url,
        headers: BTreeMap::new(),
    };
    let delivery = deliver(&client().unwrap(), &webhook, &alert("s", "m"), &tiny(4)).await;
    assert_eq!(delivery.attempts, 1);
    assert_eq!(
        failure(&delivery),
        &DeliveryError::Rejected("webhook answered 400 Bad Request: receiver says no".into())
    );

    let (url, receiver) = receiver(&[500]).await;
    let webhook = Destination::Webhook {
        url,
        headers: BTreeMap::new(),
    };
    let delivery = deliver(&client().unwrap(), &webhook, &alert("s", "m"), &tiny(2)).await;
    assert_eq!(delivery.attempts, 2);
    assert_eq!(receiver.seen.lock().unwrap().len(), 2);
    let error = failure(&delivery);
    assert!(error.is_transient());
    assert_eq!(
        error.to_string(),
        "webhook answered 500 Internal Server Error: receiver says no"
    );
}

#[tokio::test]
async fn refused_connections_are_retried_and_the_url_is_not_shown() {
    let port = closed_port();
    let slack = Destination::Slack {
        url: format!("http://127.0.0.1:{port}/services/T0/B0/SECRETTOKEN"),
    };
    let delivery = deliver(&client().unwrap(), &slack, &alert("s", "m"), &tiny(3)).await;
    assert_eq!(delivery.attempts, 3);
    assert_eq!(
        failure(&delivery),
        &DeliveryError::Transient(format!("connection refused to 127.0.0.1:{port}"))
    );
    assert!(!format!("{delivery:?} {slack:?}").contains("SECRETTOKEN"));
}

#[tokio::test]
async fn a_silent_receiver_times_out_each_attempt() {
    let url = format!("http://127.0.0.1:{}/hook", silent_listener().await);
    let client = reqwest::Client::builder()
        .timeout(Duration::from_millis(200))
        .build()
        .unwrap();
    let webhook = Destination::Webhook {
        url,
        headers: BTreeMap::new(),
    };
    let delivery = deliver(&client, &webhook, &alert("s", "m"), &tiny(2)).await;
    assert_eq!(delivery.attempts, 2);
    assert!(failure(&delivery).is_transient());
    assert!(
        failure(&delivery).to_string().contains("timed out"),
        "{delivery:?}"
    );
}

#[tokio::test]
async fn bad_webhook_configuration_fails_before_any_attempt() {
    let bad_value = BTreeMap::from([(
        "Authorization".to_string(),
        "Bearer x\nInjected: 1".to_string(),
    )]);
    for (url, headers) in [
        ("not a url", BTreeMap::new()),
        ("ftp://127.0.0.1/x", BTreeMap::new()),
        ("http://127.0.0.1:9/", bad_value),
    ] {
        let delivery = deliver(
            &client().unwrap(),
            &Destination::Webhook {
                url: url.into(),
                headers,
            },
            &alert("s", "m"),
            &tiny(3),
        )
        .await;
        assert_eq!(delivery.attempts, 0, "{url}");
        assert!(
            matches!(failure(&delivery), DeliveryError::Config(m) if !m.contains("Bearer")),
            "{delivery:?}"
        );
    }
}

#[tokio::test]
async fn slack_posts_bold_subject_then_message() {
    let (url, receiver) = receiver(&[200]).await;
    let alert = alert("Disk \"full\"", "host a\nline 2");
    let delivery = deliver(
        &client().unwrap(),
        &Destination::Slack { url },
        &alert,
        &tiny(1),
    )
    .await;
    assert_eq!(
        delivery,
        Delivery {
            attempts: 1,
            outcome: Ok(())
        }
    );
    let body: Value = serde_json::from_slice(&receiver.seen.lock().unwrap()[0].1).unwrap();
    assert_eq!(body, json!({"text": "*Disk \"full\"*\nhost a\nline 2"}));
}

#[test]
fn smtp_accounts_are_read_from_toml() {
    let config = r#"
        [smtp_accounts.relay]
        host = "smtp.example.com"
        port = 587
        security = "starttls"
        username = "alerts"
        password_env = "STRATA_SMTP_PASSWORD"
        from = "alerts@example.com"
    "#;
    #[derive(Deserialize)]
    struct Config {
        smtp_accounts: BTreeMap<String, SmtpAccount>,
    }
    let config: Config = toml::from_str(config).unwrap();
    let relay = &config.smtp_accounts["relay"];
    assert_eq!(
        (relay.security, relay.timeout_ms, relay.ca_file.as_ref()),
        (SmtpSecurity::Starttls, 10_000, None)
    );
    assert!(
        toml::from_str::<SmtpAccount>(
            "host = \"h\"\nport = 25\nsecurity = \"none\"\nfrom = \"a@b.c\"\npassword = \"x\""
        )
        .is_err()
    );
    assert!(
        toml::from_str::<SmtpAccount>(
            "host = \"h\"\nport = 25\nsecurity = \"ssl\"\nfrom = \"a@b.c\""
        )
        .is_err()
    );
}

#[test]
fn backoff_doubles_with_jitter_up_to_the_cap() {
    let retry = Retry::default();
    for _ in 0..100 {
        let first = retry.backoff(1);
        assert!(
            first >= Duration::from_millis(250) && first <= Duration::from_millis(500),
            "{first:?}"
        );
        let third = retry.backoff(3);
        assert!(
            third >= Duration::from_secs(1) && third <= Duration::from_secs(2),
            "{third:?}"
        );
        let late = retry.backoff(40);
        assert!(
            late >= Duration::from_secs(4) && late <= Duration::from_secs(8),
            "{late:?}"
        );
    }
}
