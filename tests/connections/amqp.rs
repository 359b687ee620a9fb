//! AMQP 0-9-1 connections over HTTP against the machine's RabbitMQ (127.0.0.1:5672,
//! guest/guest): each test declares queues of its own with lapin and deletes them at its end.
//! A queue is listed, refused in place (reading consumes it), imported until it is empty and
//! followed until cancelled; an import killed midway resumes with every message once; the
//! broker refusing the login or the vhost; and a broker lost (a TCP proxy in front of it,
//! dropped) mid-import and at connect.

use std::sync::Mutex;

use lapin::{
    BasicProperties, Channel, Connection, ConnectionProperties,
    options::{BasicPublishOptions, ConfirmSelectOptions, QueueDeclareOptions, QueueDeleteOptions},
    types::FieldTable,
};
use tokio::{net::TcpListener, task::JoinHandle};

use super::*;

/// The machine's broker.
const RABBITMQ: &str = "127.0.0.1:5672";

/// The config of a connection to the broker at `address`, listing `queues`.
fn amqp_config(address: &str, queues: &str) -> Value {
    json!({"url": format!("amqp://{address}/%2f"), "username": "guest", "password": "guest",
           "queues": queues})
}

/// A publisher on the machine's broker, with publisher confirms.
struct Publisher {
    _connection: Connection,
    channel: Channel,
}

impl Publisher {
    async fn new() -> Publisher {
        let connection = Connection::connect(
            &format!("amqp://guest:guest@{RABBITMQ}/%2f"),
            ConnectionProperties::default(),
        )
        .await
        .expect("the test broker runs on 127.0.0.1:5672 (scripts/test starts it)");
        let channel = connection.create_channel().await.unwrap();
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await
            .unwrap();
        Publisher {
            _connection: connection,
            channel,
        }
    }

    /// A new queue named after `prefix` (neither exclusive nor auto-deleted: strata's
    /// consumers come and go).
    async fn queue(&self, prefix: &str) -> String {
        let name = unique(prefix);
        self.channel
            .queue_declare(
                name.as_str().into(),
                QueueDeclareOptions::default(),
                FieldTable::default(),
            )
            .await
            .unwrap();
        name
    }

    /// Publishes `messages` (body, message id) to `queue` and waits for the broker's confirms.
    async fn publish(&self, queue: &str, messages: &[(Value, Option<String>)]) {
        for (body, id) in messages {
            let mut properties = BasicProperties::default().with_timestamp(1_790_000_000);
            if let Some(id) = id {
                properties = properties.with_message_id(id.as_str().into());
            }
            self.channel
                .basic_publish(
                    "".into(),
                    queue.into(),
                    BasicPublishOptions::default(),
                    body.to_string().as_bytes(),
                    properties,
                )
                .await
                .unwrap();
        }
        self.channel.wait_for_confirms().await.unwrap();
    }

    /// `queue` as the broker counts it: its ready messages and its consumers.
    async fn counts(&self, queue: &str) -> (u32, u32) {
        let options = QueueDeclareOptions {
            passive: true,
            ..QueueDeclareOptions::default()
        };
        let declared = self
            .channel
            .queue_declare(queue.into(), options, FieldTable::default())
            .await
            .unwrap();
        (declared.message_count(), declared.consumer_count())
    }

    /// The messages ready in `queue`.
    async fn ready(&self, queue: &str) -> u32 {
        self.counts(queue).await.0
    }

    /// Waits until no one consumes `queue` (a cancelled job's consumer is gone at its runner's
    /// next tick).
    async fn unconsumed(&self, queue: &str) {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while self.counts(queue).await.1 > 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "queue {queue} is still consumed"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until `queue` holds `count` ready messages (the broker's count lags a little).
    async fn ready_becomes(&self, queue: &str, count: u32) {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let ready = self.ready(queue).await;
            if ready == count {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "queue {queue} holds {ready} messages, not {count}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn delete(&self, queue: &str) {
        self.channel
            .queue_delete(queue.into(), QueueDeleteOptions::default())
            .await
            .unwrap();
    }
}

/// Orders `range`: `{"n", "customer"}`, the even ones with a message id, the odd ones without.
fn orders(range: std::ops::RangeInclusive<u64>) -> Vec<(Value, Option<String>)> {
    range
        .map(|n| {
            let customer = if n % 2 == 0 { "ann" } else { "bob" };
            let id = (n % 2 == 0).then(|| format!("order-{n}"));
            (json!({"n": n, "customer": customer}), id)
        })
        .collect()
}

/// A TCP proxy on loopback in front of `target`; dropped, it closes every connection through
/// it and listens no more.
struct Proxy {
    port: u16,
    tasks: Arc<Mutex<Vec<JoinHandle<()>>>>,
}

impl Proxy {
    async fn start(target: &'static str) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let tasks: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
        let held = tasks.clone();
        let accepting = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let piping = tokio::spawn(async move {
                    if let Ok(mut outbound) = tokio::net::TcpStream::connect(target).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
                held.lock().unwrap().push(piping);
            }
        });
        tasks.lock().unwrap().push(accepting);
        Proxy { port, tasks }
    }

    fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        for task in self.tasks.lock().unwrap().drain(..) {
            task.abort();
        }
    }
}

#[tokio::test]
async fn an_amqp_queue_is_listed_refused_in_place_imported_and_followed() {
    let broker = Publisher::new().await;
    let queue = broker.queue("strata_orders").await;
    broker.publish(&queue, &orders(1..=4)).await;
    // The same message published twice without an id is one record: its content names it.
    broker
        .publish(&queue, &[(json!({"n": 5, "customer": "cid"}), None)])
        .await;
    broker
        .publish(&queue, &[(json!({"n": 5, "customer": "cid"}), None)])
        .await;

    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let root = Signed::new(&server, &root_user(dir.path(), "acme"));
    let missing = unique("strata_missing");
    let id = connect(
        &root,
        "rabbitmq",
        "broker",
        amqp_config(RABBITMQ, &format!("{queue}, {missing}")),
    )
    .await;

    // Listed: the configured queues that exist.
    let tested = root.send("POST", &format!("/source/{id}/test"), None).await;
    assert_eq!(tested.status, 200, "{tested:?}");
    assert_eq!(tested.body["status"], "active", "{tested:?}");
    assert_eq!(tested.body["datasets_available"], 1, "{tested:?}");
    let tables = sql(&root, &format!("/sql?connection_id={id}"), "SHOW TABLES").await;
    assert_eq!(rows(&tables), vec![json!([queue])]);
    let described = root
        .send("GET", &format!("/source/{id}/{queue}/metadata"), None)
        .await;
    assert_eq!(described.status, 200, "{described:?}");
    let fields: Vec<&str> = described.body["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert!(
        fields.contains(&"_routing_key") && fields.contains(&"value"),
        "{described:?}"
    );

    // Not in place: reading a queue consumes it.
    let refused = sql(
        &root,
        &format!("/sql?connection_id={id}"),
        &format!("SELECT * FROM \"{queue}\""),
    )
    .await;
    assert_eq!(refused.status, 400, "{refused:?}");
    assert!(
        message(&refused).contains("consumed by reading"),
        "{refused:?}"
    );
    assert!(message(&refused).contains("import"), "{refused:?}");
    let absent = sql(
        &root,
        &format!("/sql?connection_id={id}"),
        &format!("SELECT * FROM \"{missing}\""),
    )
    .await;
    assert_eq!(absent.status, 400, "{absent:?}");
    assert!(message(&absent).contains("has no dataset"), "{absent:?}");
    assert_eq!(broker.ready(&queue).await, 6);

    // Imported until the queue is empty (named as a table, it is read as a queue).
    let once = import(
        &root,
        "rabbitmq",
        json!({"connection_id": id, "source": {"table": queue}, "dataset": "orders"}),
    )
    .await;
    let done = job_when(&root, &once, finished).await;
    assert_eq!(done["state"], "succeeded", "{done}");
    assert_eq!(done["source"], json!({"queue": queue}), "{done}");
    assert_eq!(done["records_written"], 5, "{done}");
    broker.ready_becomes(&queue, 0).await;
    let counted = sql(&root, "/sql", "SELECT count(*), sum(n) FROM orders").await;
    assert_eq!(rows(&counted), vec![json!([5, 15])]);
    let placed = sql(
        &root,
        "/sql",
        "SELECT n, \"amqp.routing_key\", \"amqp.exchange\", \"amqp.message_id\", \
         \"amqp.redelivered\", customer FROM orders WHERE n IN (2, 3) ORDER BY n",
    )
    .await;
    assert_eq!(
        rows(&placed),
        vec![
            json!([2, queue, "", "order-2", false, "ann"]),
            json!([3, queue, "", null, false, "bob"]),
        ]
    );
    let timed = sql(
        &root,
        "/sql",
        "SELECT count(*) FROM orders WHERE \"@timestamp\" > '2026-01-01'",
    )
    .await;
    assert_eq!(rows(&timed), vec![json!([5])]);

    // Followed: messages published later arrive, until the job is cancelled.
    broker.publish(&queue, &orders(6..=8)).await;
    let follow = import(
        &root,
        "rabbitmq",
        json!({"connection_id": id, "source": {"queue": queue}, "dataset": "live",
               "follow": true}),
    )
    .await;
    job_when(&root, &follow, |job| job["records_written"] == 3).await;
    broker.publish(&queue, &orders(9..=10)).await;
    let caught_up = job_when(&root, &follow, |job| job["records_written"] == 5).await;
    assert_eq!(caught_up["state"], "running", "{caught_up}");
    let cancelled = root
        .send("DELETE", &format!("/import/jobs/{follow}"), None)
        .await;
    assert_eq!(cancelled.body["result"], "cancelled", "{cancelled:?}");
    let stopped = job_when(&root, &follow, finished).await;
    assert_eq!(stopped["state"], "cancelled", "{stopped}");
    broker.unconsumed(&queue).await;
    broker.publish(&queue, &orders(11..=11)).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let live = sql(&root, "/sql", "SELECT count(*), min(n), max(n) FROM live").await;
    assert_eq!(rows(&live), vec![json!([5, 6, 10])]);
    // What came after the cancel stays in the queue for the next reader.
    broker.ready_becomes(&queue, 1).await;
    broker.delete(&queue).await;
}

#[tokio::test]
async fn an_amqp_import_killed_midway_resumes_with_every_message_once() {
    const MESSAGES: u64 = 5000;
    let broker = Publisher::new().await;
    let queue = broker.queue("strata_big").await;
    broker.publish(&queue, &orders(1..=MESSAGES)).await;

    let dir = tempfile::tempdir().unwrap();
    let flags = ["--set", "imports.batch_rows=100"];
    let mut server = Server::start(dir.path(), &flags);
    let credentials = root_user(dir.path(), "acme");
    let root = Signed::new(&server, &credentials);
    let id = connect(&root, "rabbitmq", "broker", amqp_config(RABBITMQ, &queue)).await;
    let job = import(
        &root,
        "rabbitmq",
        json!({"connection_id": id, "source": {"queue": queue}, "dataset": "big"}),
    )
    .await;
    killed_midway(&root, &mut server, &job, MESSAGES).await;

    // The broker delivers again what was not acknowledged; the ids make those copies one.
    let server = Server::start(dir.path(), &flags);
    let root = Signed::new(&server, &credentials);
    let done = job_when(&root, &job, finished).await;
    assert_eq!(done["state"], "succeeded", "{done}");
    assert!(
        done["records_written"].as_u64().unwrap() >= MESSAGES,
        "{done}"
    );
    let counted = sql(
        &root,
        "/sql",
        "SELECT count(*), count(DISTINCT n), sum(n), count(\"amqp.message_id\") FROM big",
    )
    .await;
    assert_eq!(
        rows(&counted),
        vec![json!([
            MESSAGES,
            MESSAGES,
            MESSAGES * (MESSAGES + 1) / 2,
            MESSAGES / 2
        ])]
    );
    broker.ready_becomes(&queue, 0).await;
    broker.delete(&queue).await;
}

#[tokio::test]
async fn an_amqp_broker_refuses_a_wrong_password_and_a_vhost() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let root = Signed::new(&server, &root_user(dir.path(), "acme"));
    let mut wrong = amqp_config(RABBITMQ, "orders");
    wrong["password"] = json!("not-the-password");
    let id = connect(&root, "rabbitmq", "wrong", wrong).await;
    let refused = root.send("POST", &format!("/source/{id}/test"), None).await;
    assert_eq!(refused.status, 401, "{refused:?}");
    assert!(
        message(&refused).contains("refused the credentials"),
        "{refused:?}"
    );
    assert!(message(&refused).contains("ACCESS_REFUSED"), "{refused:?}");
    let connection = root.send("GET", &format!("/source/{id}"), None).await;
    assert_eq!(connection.body["status"], "error", "{connection:?}");

    let nobody = connect(
        &root,
        "cloudamqp",
        "nobody",
        json!({"url": format!("amqp://{RABBITMQ}")}),
    )
    .await;
    let refused = root
        .send("POST", &format!("/source/{nobody}/test"), None)
        .await;
    assert_eq!(refused.status, 401, "{refused:?}");
    assert!(message(&refused).contains("no username"), "{refused:?}");

    let mut elsewhere = amqp_config(RABBITMQ, "orders");
    elsewhere["url"] = json!(format!("amqp://{RABBITMQ}/{}", unique("strata_vhost")));
    let id = connect(&root, "lavinmq", "elsewhere", elsewhere).await;
    let refused = root.send("POST", &format!("/source/{id}/test"), None).await;
    assert_eq!(refused.status, 403, "{refused:?}");
    assert!(message(&refused).contains("vhost"), "{refused:?}");

    let mut credentials_in_url = amqp_config(RABBITMQ, "orders");
    credentials_in_url["url"] = json!(format!("amqp://guest:guest@{RABBITMQ}/%2f"));
    let made = root
        .send(
            "POST",
            "/source/rabbitmq",
            Some(&json!({"connector_id": "rabbitmq", "name": "inline",
                         "config": credentials_in_url})),
        )
        .await;
    assert_eq!(made.status, 400, "{made:?}");
}

#[tokio::test]
async fn an_amqp_broker_lost_mid_import_and_at_connect_fails_the_job() {
    const MESSAGES: u64 = 3000;
    let broker = Publisher::new().await;
    let queue = broker.queue("strata_lost").await;
    broker.publish(&queue, &orders(1..=MESSAGES)).await;

    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &["--set", "imports.batch_rows=50"]);
    let root = Signed::new(&server, &root_user(dir.path(), "acme"));
    let proxy = Proxy::start(RABBITMQ).await;
    let id = connect(
        &root,
        "rabbitmq",
        "proxied",
        amqp_config(&proxy.address(), &queue),
    )
    .await;
    let tested = root.send("POST", &format!("/source/{id}/test"), None).await;
    assert_eq!(tested.status, 200, "{tested:?}");

    // Lost mid-import: the job fails saying where, the connection is in error, and what was
    // not acknowledged goes back to the queue.
    let job = import(
        &root,
        "rabbitmq",
        json!({"connection_id": id, "source": {"queue": queue}, "dataset": "lost"}),
    )
    .await;
    let midway = job_when(&root, &job, |job| {
        job["records_written"].as_u64().is_some_and(|n| n > 0) || finished(job)
    })
    .await;
    drop(proxy);
    assert_eq!(midway["state"], "running", "{midway}");
    let failed = job_when(&root, &job, finished).await;
    assert_eq!(failed["state"], "failed", "{failed}");
    let written = failed["records_written"].as_u64().unwrap();
    assert!(written < MESSAGES, "{failed}");
    let error = failed["error"].as_str().unwrap();
    assert!(error.contains(&format!("queue {queue}")), "{failed}");
    let connection = root.send("GET", &format!("/source/{id}"), None).await;
    assert_eq!(connection.body["status"], "error", "{connection:?}");

    // Lost at connect: nothing is read, nothing written.
    let again = import(
        &root,
        "rabbitmq",
        json!({"connection_id": id, "source": {"queue": queue}, "dataset": "never"}),
    )
    .await;
    let failed = job_when(&root, &again, finished).await;
    assert_eq!(failed["state"], "failed", "{failed}");
    assert_eq!(failed["records_written"], 0, "{failed}");
    assert!(
        failed["error"].as_str().unwrap().contains("connect to"),
        "{failed}"
    );
    let tested = root.send("POST", &format!("/source/{id}/test"), None).await;
    assert_eq!(tested.status, 500, "{tested:?}");
    assert!(
        message(&tested).contains("connect to RabbitMQ at"),
        "{tested:?}"
    );
    let never = sql(&root, "/sql", "SELECT count(*) FROM never").await;
    assert_ne!(never.status, 200, "{never:?}");

    // The rest, read straight from the broker into the same dataset: every message once.
    let direct = connect(&root, "rabbitmq", "direct", amqp_config(RABBITMQ, &queue)).await;
    let rest = import(
        &root,
        "rabbitmq",
        json!({"connection_id": direct, "source": {"queue": queue}, "dataset": "lost"}),
    )
    .await;
    let done = job_when(&root, &rest, finished).await;
    assert_eq!(done["state"], "succeeded", "{done}");
    let counted = sql(
        &root,
        "/sql",
        "SELECT count(*), count(DISTINCT n) FROM lost",
    )
    .await;
    assert_eq!(rows(&counted), vec![json!([MESSAGES, MESSAGES])]);
    broker.delete(&queue).await;
}
