//! TLS on both listeners: HTTPS with the certificate of `[server.tls]`, nothing in plain HTTP
//! beside it, and the certificate read again on SIGHUP (a file that does not load leaves the
//! served one in place). tests/clients.rs drives the platform over HTTPS with botocore and
//! opensearch-py.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::Duration;

use common::{Client, Server, Signed, account_with_key, root_user, self_signed, tls_flags};

/// A client that trusts only the certificate `pem`, with a fresh connection each time.
fn trusting(pem: &str) -> reqwest::Client {
    reqwest::Client::builder()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(pem.as_bytes()).unwrap())
        .pool_max_idle_per_host(0)
        .build()
        .unwrap()
}

async fn health(client: &reqwest::Client, base: &str) -> Result<u16, reqwest::Error> {
    Ok(client
        .get(format!("{base}/health"))
        .send()
        .await?
        .status()
        .as_u16())
}

fn hangup(server: &Server) {
    let sent = std::process::Command::new("kill")
        .args(["-HUP", &server.pid().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
}

#[tokio::test]
async fn both_listeners_serve_https_and_read_the_certificate_again_on_sighup() {
    let dir = tempfile::tempdir().unwrap();
    let certs = tempfile::tempdir().unwrap();
    let (cert, key, first) = self_signed(certs.path(), "first");
    let flags = tls_flags(&cert, &key);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let key_text = account_with_key(dir.path(), "acme", None);
    let server = Server::start(dir.path(), &flags);
    assert!(
        server.data_url.starts_with("https://"),
        "{}",
        server.data_url
    );
    assert!(server.platform_url.starts_with("https://"));

    // Both listeners, signed and keyed requests alike.
    let client = trusting(&first);
    assert_eq!(health(&client, &server.data_url).await.unwrap(), 200);
    assert_eq!(health(&client, &server.platform_url).await.unwrap(), 200);
    let data = Client {
        http: client.clone(),
        base: server.data_url.clone(),
        key: Some(key_text),
    };
    let created = data.create_database("shop").await;
    assert_eq!(created.status, 201, "{created:?}");
    let mut platform = Signed::new(&server, &root_user(dir.path(), "acme"));
    platform.http = client.clone();
    let info = platform.send("GET", "/", None).await;
    assert_eq!(info.status, 200, "{info:?}");

    // No plain HTTP on those ports, and no client that does not trust the certificate.
    for url in [&server.data_url, &server.platform_url] {
        let plain = url.replacen("https://", "http://", 1);
        let answer = health(&reqwest::Client::new(), &plain).await;
        assert!(answer.is_err(), "plain HTTP answered: {answer:?}");
    }
    let (_, _, stranger) = self_signed(certs.path(), "stranger");
    assert!(
        health(&trusting(&stranger), &server.data_url)
            .await
            .is_err()
    );

    // A renewed certificate is served after SIGHUP, to new connections.
    let (_, _, second) = self_signed(certs.path(), "second");
    std::fs::copy(certs.path().join("second.pem"), &cert).unwrap();
    std::fs::copy(certs.path().join("second.key"), &key).unwrap();
    hangup(&server);
    let renewed = common::eventually(10, || async {
        health(&trusting(&second), &server.platform_url)
            .await
            .is_ok()
    })
    .await;
    assert!(renewed, "the second certificate is not served after SIGHUP");
    assert!(health(&trusting(&first), &server.data_url).await.is_err());

    // A certificate file that does not load: logged, and the served one stays.
    std::fs::write(&cert, "not a certificate").unwrap();
    hangup(&server);
    let logged = common::eventually(10, || async {
        std::fs::read_to_string(&server.log)
            .unwrap()
            .contains("the TLS certificate was not reloaded")
    })
    .await;
    assert!(logged, "the failed reload is not logged");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        health(&trusting(&second), &server.data_url).await.unwrap(),
        200
    );
}

#[test]
fn a_certificate_without_its_key_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let certs = tempfile::tempdir().unwrap();
    let (cert, _, _) = self_signed(certs.path(), "lonely");
    let out = common::strata(
        dir.path(),
        &[
            "serve",
            "--set",
            &format!("server.tls.cert_file={}", cert.display()),
        ],
    );
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("server.tls.key_file"), "{stderr}");
}
