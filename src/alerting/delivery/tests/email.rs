//! Email delivery against aiosmtpd on loopback (tests/clients/smtp_sink.py, run by the Python
//! that $STRATA_TEST_PYTHON names: these tests fail without it).

use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

use super::{alert, closed_port, failure, silent_listener, tiny};
use crate::alerting::delivery::email::Email;
use crate::alerting::delivery::*;

const PASSWORD: &str = "s3cret-Pa55word";

/// The environment the email tests give `deliver_with_env` (Rust 2024 makes `set_var` unsafe).
fn env(name: &str) -> Option<String> {
    (name == "SINK_PASSWORD").then(|| PASSWORD.to_string())
}

/// tests/clients/smtp_sink.py on a free loopback port; killed when dropped.
struct SmtpSink {
    port: u16,
    dir: tempfile::TempDir,
    _child: tokio::process::Child,
}

impl SmtpSink {
    async fn start(args: &[&str]) -> Self {
        let python = std::env::var("STRATA_TEST_PYTHON")
            .expect("STRATA_TEST_PYTHON must name a Python with aiosmtpd==1.4.6 installed");
        let dir = tempfile::tempdir().unwrap();
        let mut child = tokio::process::Command::new(python)
            .arg(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/tests/clients/smtp_sink.py"
            ))
            .arg("--dir")
            .arg(dir.path())
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .await
            .unwrap();
        let port = line
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("smtp sink did not start: {line:?}"));
        Self {
            port,
            dir,
            _child: child,
        }
    }

    /// Each received message: the raw .eml and its sidecar JSON.
    fn messages(&self) -> Vec<(String, Value)> {
        let file = |n: usize, ext: &str| {
            std::fs::read_to_string(self.dir.path().join(format!("{n}.{ext}")))
        };
        (1..)
            .map_while(|n| {
                Some((
                    file(n, "eml").ok()?,
                    serde_json::from_str(&file(n, "json").ok()?).unwrap(),
                ))
            })
            .collect()
    }
}

/// A self-signed certificate for 127.0.0.1 and localhost: (cert.pem, key.pem) in `dir`.
fn self_signed(dir: &Path) -> (PathBuf, PathBuf) {
    let names = vec!["127.0.0.1".to_string(), "localhost".to_string()];
    let certified = rcgen::generate_simple_self_signed(names).unwrap();
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&cert, certified.cert.pem()).unwrap();
    std::fs::write(&key, certified.signing_key.serialize_pem()).unwrap();
    (cert, key)
}

/// An account for a relay on 127.0.0.1:`port`, without auth.
fn relay(port: u16, security: SmtpSecurity) -> SmtpAccount {
    SmtpAccount {
        host: "127.0.0.1".into(),
        port,
        security,
        username: None,
        password_env: None,
        from: "Strata Alerts <alerts@strata.test>".into(),
        ca_file: None,
        timeout_ms: 5_000,
    }
}

fn email(account: SmtpAccount, recipients: &[&str]) -> Destination {
    Destination::Email {
        account,
        recipients: recipients.iter().map(|r| r.to_string()).collect(),
    }
}

#[tokio::test]
async fn email_in_plain_text_with_auth_reaches_every_recipient() {
    let sink = SmtpSink::start(&[
        "--user",
        "alerts",
        "--password",
        PASSWORD,
        "--auth-without-tls",
    ])
    .await;
    let account = SmtpAccount {
        username: Some("alerts".into()),
        password_env: Some("SINK_PASSWORD".into()),
        ..relay(sink.port, SmtpSecurity::None)
    };
    let to = ["ops@example.com", "oncall@example.com"];
    let alert = alert("Disk full on host a", "Usage is 97 percent.");
    let delivery = deliver_with_env(
        &client().unwrap(),
        &email(account, &to),
        &alert,
        &tiny(2),
        &env,
    )
    .await;
    assert_eq!(
        delivery,
        Delivery {
            attempts: 1,
            outcome: Ok(())
        }
    );
    let messages = sink.messages();
    assert_eq!(messages.len(), 1);
    let (eml, sidecar) = &messages[0];
    assert_eq!(sidecar["mail_from"], "alerts@strata.test");
    assert_eq!(sidecar["rcpt_tos"], json!(to));
    for line in [
        "Subject: Disk full on host a",
        "From: \"Strata Alerts\" <alerts@strata.test>",
        "To: ops@example.com, oncall@example.com",
    ] {
        assert!(eml.lines().any(|l| l == line), "{line:?} not in {eml}");
    }
    assert!(
        eml.contains("Content-Type: text/plain; charset=utf-8"),
        "{eml}"
    );
    assert!(eml.contains("Usage is 97 percent."), "{eml}");
}

#[tokio::test]
async fn email_over_starttls_and_implicit_tls_trusts_the_ca_file() {
    let certs = tempfile::tempdir().unwrap();
    let (cert, key) = self_signed(certs.path());
    let (cert_arg, key_arg) = (cert.to_str().unwrap(), key.to_str().unwrap());
    let alert = alert("Disque plein ≥ 90 %", "Hôte « a » : 97 %\nÀ voir.");
    for (flag, security) in [
        ("--starttls", SmtpSecurity::Starttls),
        ("--tls", SmtpSecurity::Tls),
    ] {
        let sink = SmtpSink::start(&[
            flag,
            cert_arg,
            key_arg,
            "--user",
            "alerts",
            "--password",
            PASSWORD,
        ])
        .await;
        let account = SmtpAccount {
            username: Some("alerts".into()),
            password_env: Some("SINK_PASSWORD".into()),
            ca_file: Some(cert.clone()),
            ..relay(sink.port, security)
        };
        let delivery = deliver_with_env(
            &client().unwrap(),
            &email(account.clone(), &["ops@example.com"]),
            &alert,
            &tiny(2),
            &env,
        )
        .await;
        assert_eq!(
            delivery,
            Delivery {
                attempts: 1,
                outcome: Ok(())
            },
            "{flag}"
        );
        let messages = sink.messages();
        assert_eq!(messages[0].1["subject"], alert.subject, "{flag}");
        assert_eq!(
            messages[0].1["text"]
                .as_str()
                .map(|t| t.replace("\r\n", "\n")),
            Some(format!("{}\n", alert.message)),
            "{flag}"
        );

        // Without the CA file the self-signed certificate is refused (and that is retried).
        let untrusted = SmtpAccount {
            ca_file: None,
            ..account
        };
        let delivery = deliver_with_env(
            &client().unwrap(),
            &email(untrusted, &["ops@example.com"]),
            &alert,
            &tiny(2),
            &env,
        )
        .await;
        assert_eq!(delivery.attempts, 2, "{flag}");
        assert!(
            failure(&delivery)
                .to_string()
                .contains("invalid peer certificate: UnknownIssuer"),
            "{delivery:?}"
        );
        assert_eq!(sink.messages().len(), 1, "{flag}");
    }
}

#[tokio::test]
async fn email_replies_5xx_fail_at_once_and_4xx_are_retried() {
    let sink = SmtpSink::start(&["--reject", "nobody@example.com"]).await;
    let destination = email(
        relay(sink.port, SmtpSecurity::None),
        &["nobody@example.com"],
    );
    let delivery = deliver(&client().unwrap(), &destination, &alert("s", "m"), &tiny(3)).await;
    assert_eq!(delivery.attempts, 1);
    assert_eq!(
        failure(&delivery),
        &DeliveryError::Rejected("smtp 550 5.1.1 recipient rejected".into())
    );

    let sink = SmtpSink::start(&[
        "--reject",
        "later@example.com",
        "--reject-reply",
        "451 4.3.0 try again later",
    ])
    .await;
    let destination = email(relay(sink.port, SmtpSecurity::None), &["later@example.com"]);
    let delivery = deliver(&client().unwrap(), &destination, &alert("s", "m"), &tiny(3)).await;
    assert_eq!(delivery.attempts, 3);
    assert_eq!(
        failure(&delivery),
        &DeliveryError::Transient("smtp 451 4.3.0 try again later".into())
    );
    assert!(sink.messages().is_empty());
}

#[tokio::test]
async fn a_refused_password_is_not_retried_and_never_shown() {
    let sink = SmtpSink::start(&[
        "--user",
        "alerts",
        "--password",
        "another-one",
        "--auth-without-tls",
    ])
    .await;
    let account = SmtpAccount {
        username: Some("alerts".into()),
        password_env: Some("SINK_PASSWORD".into()),
        ..relay(sink.port, SmtpSecurity::None)
    };
    let delivery = deliver_with_env(
        &client().unwrap(),
        &email(account, &["ops@example.com"]),
        &alert("s", "m"),
        &tiny(3),
        &env,
    )
    .await;
    assert_eq!(delivery.attempts, 1, "{delivery:?}");
    let error = failure(&delivery);
    assert!(error.to_string().starts_with("smtp 535 "), "{error}");
    assert!(!format!("{delivery:?} {error}").contains(PASSWORD));
}

#[tokio::test]
async fn email_connection_failures_are_retried() {
    let port = closed_port();
    let account = SmtpAccount {
        port,
        ..relay(0, SmtpSecurity::None)
    };
    let delivery = deliver(
        &client().unwrap(),
        &email(account, &["ops@example.com"]),
        &alert("s", "m"),
        &tiny(2),
    )
    .await;
    assert_eq!(delivery.attempts, 2);
    assert_eq!(
        failure(&delivery),
        &DeliveryError::Transient(format!("connection refused to 127.0.0.1:{port}"))
    );

    let account = SmtpAccount {
        timeout_ms: 200,
        ..relay(silent_listener().await, SmtpSecurity::None)
    };
    let delivery = deliver(
        &client().unwrap(),
        &email(account, &["ops@example.com"]),
        &alert("s", "m"),
        &tiny(2),
    )
    .await;
    assert_eq!(delivery.attempts, 2);
    assert!(
        failure(&delivery).is_transient() && failure(&delivery).to_string().contains("timed out"),
        "{delivery:?}"
    );
}

#[tokio::test]
async fn bad_email_configuration_fails_before_any_attempt() {
    let base = relay(closed_port(), SmtpSecurity::None);
    let cases = [
        (
            SmtpAccount {
                username: Some("u".into()),
                password_env: Some("STRATA_TEST_UNSET_VARIABLE_7F3C".into()),
                ..base.clone()
            },
            "ops@example.com",
            "STRATA_TEST_UNSET_VARIABLE_7F3C is not set",
        ),
        (
            SmtpAccount {
                username: Some("u".into()),
                ..base.clone()
            },
            "ops@example.com",
            "password_env is not",
        ),
        (
            SmtpAccount {
                from: "not an address".into(),
                ..base.clone()
            },
            "ops@example.com",
            "from address",
        ),
        (base.clone(), "ops at example", "recipient address"),
        (
            SmtpAccount {
                security: SmtpSecurity::Starttls,
                ca_file: Some("/nonexistent/ca.pem".into()),
                ..base.clone()
            },
            "ops@example.com",
            "ca_file",
        ),
    ];
    for (account, recipient, expected) in cases {
        let delivery = deliver(
            &client().unwrap(),
            &email(account, &[recipient]),
            &alert("s", "m"),
            &tiny(3),
        )
        .await;
        assert_eq!(delivery.attempts, 0);
        assert!(
            matches!(failure(&delivery), DeliveryError::Config(m) if m.contains(expected)),
            "{delivery:?}"
        );
    }
    // A password in plain text goes only to loopback (checked without connecting anywhere).
    let remote = SmtpAccount {
        host: "mail.example.com".into(),
        username: Some("u".into()),
        password_env: Some("SINK_PASSWORD".into()),
        ..base
    };
    let refused = Email::new(&remote, &["ops@example.com".into()], &alert("s", "m"), &env).err();
    assert!(matches!(refused, Some(DeliveryError::Config(m)) if m.contains("plain text")));
}
