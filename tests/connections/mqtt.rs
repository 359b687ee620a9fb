//! MQTT connections over HTTP: topic filters of the machine's Mosquitto (127.0.0.1:1883)
//! imported and followed in a persistent session, resumed after a kill -9 of strata with no
//! message twice; and a private Mosquitto over TLS with a password file (a wrong password, its
//! retained topics listed, killed under a following job).

use rumqttc::{AsyncClient, Event, MqttOptions, Packet, QoS};

use super::*;

/// A topic prefix no other test run uses.
fn prefix() -> String {
    format!("strata-test/{}", unique("mqtt"))
}

/// A client that publishes to the broker on `port` (as `credentials`), its event loop polled
/// by a task of its own.
fn publisher(port: u16, credentials: Option<(&str, &str)>) -> AsyncClient {
    let mut options = MqttOptions::new(unique("strata-pub"), "127.0.0.1", port);
    if let Some((user, password)) = credentials {
        options.set_credentials(user, password);
    }
    let (client, mut events) = AsyncClient::new(options, 100);
    tokio::spawn(async move { while events.poll().await.is_ok() {} });
    client
}

/// Publishes `{"id": "m-<n>", "n": n, "device": "d<n % 2>"}` for each n of `range` with QoS 1
/// on `<prefix>/events/d<n % 2>`.
async fn publish(client: &AsyncClient, prefix: &str, range: std::ops::RangeInclusive<u32>) {
    for n in range {
        let device = format!("d{}", n % 2);
        let payload = json!({"id": format!("m-{n}"), "n": n, "device": device}).to_string();
        client
            .publish(
                format!("{prefix}/events/{device}"),
                QoS::AtLeastOnce,
                false,
                payload,
            )
            .await
            .unwrap();
    }
}

/// Publishes the retained state of `<prefix>/state` (an empty payload clears it).
async fn retain(client: &AsyncClient, prefix: &str, payload: &str) {
    client
        .publish(format!("{prefix}/state"), QoS::AtLeastOnce, true, payload)
        .await
        .unwrap();
}

/// Whether the broker on `port` holds a persistent session of `client_id`; a session found is
/// ended (the test cleans up).
async fn session_of(port: u16, client_id: &str) -> bool {
    let mut options = MqttOptions::new(client_id, "127.0.0.1", port);
    options.set_clean_session(false);
    let (client, mut events) = AsyncClient::new(options, 10);
    let present = match events.poll().await.unwrap() {
        Event::Incoming(Packet::ConnAck(ack)) => ack.session_present,
        other => panic!("{other:?}"),
    };
    client.disconnect().await.unwrap();
    while events.poll().await.is_ok() {}
    let mut options = MqttOptions::new(client_id, "127.0.0.1", port);
    options.set_clean_session(true);
    let (client, mut events) = AsyncClient::new(options, 10);
    events.poll().await.unwrap();
    client.disconnect().await.unwrap();
    while events.poll().await.is_ok() {}
    present
}

/// The value of a one-row, one-column SQL answer.
async fn one(root: &Signed, query: &str) -> Value {
    rows(&sql(root, "/sql", query).await)[0][0].clone()
}

#[tokio::test]
async fn an_mqtt_topic_filter_is_imported_and_followed_until_cancelled() {
    let prefix = prefix();
    let filter = format!("{prefix}/#");
    let publisher = publisher(1883, None);
    retain(
        &publisher,
        &prefix,
        r#"{"id": "state", "n": 0, "device": "all"}"#,
    )
    .await;

    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let root = Signed::new(&server, &root_user(dir.path(), "acme"));
    let id = connect(
        &root,
        "mosquitto",
        "plant",
        json!({"url": "mqtt://127.0.0.1:1883"}),
    )
    .await;
    let tested = root.send("POST", &format!("/source/{id}/test"), None).await;
    assert_eq!(tested.status, 200, "{tested:?}");
    assert_eq!(tested.body["status"], "active", "{tested:?}");
    // The topics of retained messages (this test's among them).
    assert!(
        tested.body["datasets_available"].as_u64().unwrap() >= 1,
        "{tested:?}"
    );
    // No history to query in place.
    let in_place = sql(
        &root,
        &format!("/sql?connection_id={id}"),
        &format!("SELECT * FROM \"{filter}\""),
    )
    .await;
    assert_eq!(in_place.status, 400, "{in_place:?}");
    assert!(
        message(&in_place).contains("not queried in place"),
        "{in_place:?}"
    );

    // Once: what the subscription gives (the retained state), then the job ends and its
    // session with it.
    let once = import(
        &root,
        "mosquitto",
        json!({"connection_id": id, "source": {"topic": filter}, "dataset": "state"}),
    )
    .await;
    let done = job_when(&root, &once, finished).await;
    assert_eq!(done["state"], "succeeded", "{done}");
    assert_eq!(done["records_written"], 1, "{done}");
    let state = sql(
        &root,
        "/sql",
        "SELECT \"mqtt.topic\", \"mqtt.retained\", device FROM state",
    )
    .await;
    assert_eq!(
        rows(&state),
        vec![json!([format!("{prefix}/state"), true, "all"])]
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!session_of(1883, &format!("strata-{once}")).await);

    // Followed: subscribed (the retained state arrives), then what is published arrives.
    let follow = import(
        &root,
        "mosquitto",
        json!({"connection_id": id, "source": {"topic": filter}, "dataset": "telemetry",
               "follow": true}),
    )
    .await;
    job_when(&root, &follow, |job| job["records_written"] == 1).await;
    publish(&publisher, &prefix, 1..=5).await;
    let caught_up = job_when(&root, &follow, |job| job["records_written"] == 6).await;
    assert_eq!(caught_up["state"], "running", "{caught_up}");
    assert_eq!(caught_up["source"], json!({"topic": filter}), "{caught_up}");
    let counted = sql(
        &root,
        "/sql",
        "SELECT count(*), sum(n), min(\"mqtt.qos\") FROM telemetry WHERE NOT \"mqtt.retained\"",
    )
    .await;
    assert_eq!(rows(&counted), vec![json!([5, 15, 1])]);
    let placed = sql(
        &root,
        "/sql",
        "SELECT \"mqtt.topic\", device FROM telemetry WHERE n = 3",
    )
    .await;
    assert_eq!(
        rows(&placed),
        vec![json!([format!("{prefix}/events/d1"), "d1"])]
    );
    let timed = one(
        &root,
        "SELECT count(*) FROM telemetry WHERE \"@timestamp\" > '2020-01-01'",
    )
    .await;
    assert_eq!(timed, 6);

    let cancelled = root
        .send("DELETE", &format!("/import/jobs/{follow}"), None)
        .await;
    assert_eq!(cancelled.body["result"], "cancelled", "{cancelled:?}");
    let stopped = job_when(&root, &follow, finished).await;
    assert_eq!(stopped["state"], "cancelled", "{stopped}");
    // The runner tells the job's task to stop at its next tick (a batch read before is still
    // written): what is published after that is not imported.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    publish(&publisher, &prefix, 6..=6).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(one(&root, "SELECT count(*) FROM telemetry").await, 6);

    // The cancelled job's session is ended on the broker (nothing queued for it any more).
    assert!(!session_of(1883, &format!("strata-{follow}")).await);
    retain(&publisher, &prefix, "").await;
}

#[tokio::test]
async fn an_mqtt_import_killed_while_following_resumes_with_no_message_twice() {
    const BEFORE: u32 = 300;
    const ALL: u32 = 400;
    let prefix = prefix();
    let filter = format!("{prefix}/#");
    let publisher = publisher(1883, None);
    retain(
        &publisher,
        &prefix,
        r#"{"id": "state", "n": 0, "device": "all"}"#,
    )
    .await;

    let dir = tempfile::tempdir().unwrap();
    let flags = ["--set", "imports.batch_rows=50"];
    let mut server = Server::start(dir.path(), &flags);
    let credentials = root_user(dir.path(), "acme");
    let root = Signed::new(&server, &credentials);
    let id = connect(
        &root,
        "mosquitto",
        "plant",
        json!({"url": "mqtt://127.0.0.1:1883", "client_id": "plant"}),
    )
    .await;
    let job = import(
        &root,
        "mosquitto",
        json!({"connection_id": id, "source": {"topic": filter}, "dataset": "telemetry",
               "follow": true}),
    )
    .await;
    job_when(&root, &job, |job| job["records_written"] == 1).await;
    // Killed while messages stream in: a batch read may not be written or acknowledged.
    publish(&publisher, &prefix, 1..=BEFORE).await;
    let midway = job_when(&root, &job, |job| {
        job["records_written"].as_u64().is_some_and(|n| n > 50)
    })
    .await;
    server.kill9();
    assert_eq!(midway["state"], "running", "{midway}");
    // Published while strata is down: the persistent session queues them.
    publish(&publisher, &prefix, BEFORE + 1..=ALL).await;

    let server = Server::start(dir.path(), &flags);
    let root = Signed::new(&server, &credentials);
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    loop {
        let counted = sql(
            &root,
            "/sql",
            "SELECT count(DISTINCT n) FROM telemetry WHERE NOT \"mqtt.retained\"",
        )
        .await;
        if counted.status == 200 && rows(&counted)[0][0] == ALL {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{counted:?}, {}",
            job_when(&root, &job, |_| true).await
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // None twice: each message once, the retained state once (sent again at the second
    // subscription, it replaced itself).
    let counted = sql(
        &root,
        "/sql",
        "SELECT count(*), count(DISTINCT n), sum(n) FROM telemetry",
    )
    .await;
    assert_eq!(
        rows(&counted),
        vec![json!([ALL + 1, ALL + 1, ALL * (ALL + 1) / 2])]
    );
    let running = job_when(&root, &job, |_| true).await;
    assert_eq!(running["state"], "running", "{running}");
    let cancelled = root
        .send("DELETE", &format!("/import/jobs/{job}"), None)
        .await;
    assert_eq!(cancelled.body["result"], "cancelled", "{cancelled:?}");
    job_when(&root, &job, finished).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    // The session, named by the connection's client_id and the job, ended with the job.
    assert!(!session_of(1883, &format!("plant-{job}")).await);
    retain(&publisher, &prefix, "").await;
}

/// A Mosquitto of the test's own: a TLS listener (the certificate `cert`) and a plain one, a
/// password file with alice/secret; killed on drop.
struct Mosquitto {
    child: std::process::Child,
    tls_port: u16,
    plain_port: u16,
}

impl Mosquitto {
    fn start(dir: &std::path::Path, cert: &std::path::Path, key: &std::path::Path) -> Mosquitto {
        let passwords = dir.join("passwords");
        let made = Command::new("mosquitto_passwd")
            .arg("-c")
            .arg("-b")
            .arg(&passwords)
            .args(["alice", "secret"])
            .output()
            .unwrap();
        assert!(made.status.success(), "{made:?}");
        let (tls_port, plain_port) = (common::free_port(), common::free_port());
        let config = dir.join("mosquitto.conf");
        // `user root`: a broker started by root keeps its rights (to read the test's
        // directory); no effect otherwise.
        std::fs::write(
            &config,
            format!(
                "user root\npersistence false\nallow_anonymous false\npassword_file {}\n\
                 listener {tls_port} 127.0.0.1\ncertfile {}\nkeyfile {}\n\
                 listener {plain_port} 127.0.0.1\n",
                passwords.display(),
                cert.display(),
                key.display()
            ),
        )
        .unwrap();
        let child = Command::new("mosquitto")
            .arg("-c")
            .arg(&config)
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(dir.join("mosquitto.log")).unwrap())
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", tls_port)).is_err()
            || std::net::TcpStream::connect(("127.0.0.1", plain_port)).is_err()
        {
            assert!(
                std::time::Instant::now() < deadline,
                "mosquitto did not start: {}",
                std::fs::read_to_string(dir.join("mosquitto.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Mosquitto {
            child,
            tls_port,
            plain_port,
        }
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Mosquitto {
    fn drop(&mut self) {
        self.kill();
    }
}

#[tokio::test]
async fn an_mqtt_broker_over_tls_refuses_a_wrong_password_and_its_loss_fails_the_job() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key, _) = common::self_signed(dir.path(), "mosquitto");
    let mut mosquitto = Mosquitto::start(dir.path(), &cert, &key);
    let publisher = publisher(mosquitto.plain_port, Some(("alice", "secret")));
    retain(
        &publisher,
        "line-1",
        r#"{"id": "state", "n": 0, "device": "all"}"#,
    )
    .await;
    retain(
        &publisher,
        "line-2",
        r#"{"id": "state", "n": 0, "device": "all"}"#,
    )
    .await;

    // strata trusts the broker's certificate (SSL_CERT_FILE).
    let mut env = common::log_env(dir.path());
    env.push(("SSL_CERT_FILE", cert.display().to_string()));
    let server = Server::start_with(&dir.path().join("strata"), &[], &env);
    let root = Signed::new(&server, &root_user(&dir.path().join("strata"), "acme"));
    let url = format!("mqtts://127.0.0.1:{}", mosquitto.tls_port);

    let wrong = connect(
        &root,
        "emqx",
        "wrong",
        json!({"url": url, "username": "alice", "password": "nope"}),
    )
    .await;
    let refused = root
        .send("POST", &format!("/source/{wrong}/test"), None)
        .await;
    assert_eq!(refused.status, 401, "{refused:?}");
    assert!(
        message(&refused).contains("refused the credentials"),
        "{refused:?}"
    );
    let marked = root.send("GET", &format!("/source/{wrong}"), None).await;
    assert_eq!(marked.body["status"], "error", "{marked:?}");

    let id = connect(
        &root,
        "mosquitto",
        "line",
        json!({"url": url, "username": "alice", "password": "secret"}),
    )
    .await;
    let tested = root.send("POST", &format!("/source/{id}/test"), None).await;
    assert_eq!(tested.status, 200, "{tested:?}");
    assert_eq!(tested.body["status"], "active", "{tested:?}");
    assert_eq!(tested.body["datasets_available"], 2, "{tested:?}");

    let job = import(
        &root,
        "mosquitto",
        json!({"connection_id": id, "source": {"topic": "line-1/#"}, "dataset": "line",
               "follow": true}),
    )
    .await;
    job_when(&root, &job, |job| job["records_written"] == 1).await;
    publish(&publisher, "line-1", 1..=3).await;
    job_when(&root, &job, |job| job["records_written"] == 4).await;

    // The broker goes away: the job fails saying where, the connection is in error.
    mosquitto.kill();
    let failed = job_when(&root, &job, finished).await;
    assert_eq!(failed["state"], "failed", "{failed}");
    let error = failed["error"].as_str().unwrap();
    assert!(
        error.contains(&format!("line-1/# on 127.0.0.1:{}", mosquitto.tls_port)),
        "{failed}"
    );
    assert_eq!(failed["records_written"], 4, "{failed}");
    let connection = root.send("GET", &format!("/source/{id}"), None).await;
    assert_eq!(connection.body["status"], "error", "{connection:?}");
    // What was written stays whole.
    assert_eq!(one(&root, "SELECT count(*) FROM line").await, 4);
    assert_eq!(one(&root, "SELECT sum(n) FROM line").await, 6);

    // A job started while the broker is gone fails at its connection, writing nothing.
    let again = import(
        &root,
        "mosquitto",
        json!({"connection_id": id, "source": {"topic": "line-2/#"}, "dataset": "again"}),
    )
    .await;
    let failed = job_when(&root, &again, finished).await;
    assert_eq!(failed["state"], "failed", "{failed}");
    assert_eq!(failed["records_written"], 0, "{failed}");
    assert!(
        failed["error"]
            .as_str()
            .unwrap()
            .contains(&format!("connect to 127.0.0.1:{}", mosquitto.tls_port)),
        "{failed}"
    );
}
