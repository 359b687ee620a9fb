//! Redis connections over HTTP: keys of the machine's Redis server (127.0.0.1:6379, databases
//! 3 and 4; each test writes keys under a prefix of its own with the redis crate and deletes them)
//! and of a private `redis-server` (a password; killed to show a server that is gone).

use super::*;

use ::redis::{Client, aio::MultiplexedConnection};

/// The machine's Redis server, database `db` (each test uses one of its own, so that no other
/// test's writes make SCAN give a key twice).
fn redis_url(db: u8) -> String {
    format!("redis://127.0.0.1:6379/{db}")
}

/// Keys of a test under a prefix of its own on the server at `url`; deleted on drop.
struct Keys {
    url: String,
    prefix: String,
}

impl Keys {
    /// A prefix named after `name` on the machine's server, database `db`.
    fn new(name: &str, db: u8) -> Keys {
        Keys {
            url: redis_url(db),
            prefix: unique(&format!("strata_{name}")),
        }
    }

    /// `<prefix>_<suffix>`: a name of this test's.
    fn name(&self, suffix: &str) -> String {
        format!("{}_{suffix}", self.prefix)
    }

    async fn connection(&self) -> MultiplexedConnection {
        Client::open(self.url.as_str())
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap()
    }

    /// Runs `commands` (each its words) in one pipeline.
    async fn run(&self, commands: &[Vec<String>]) {
        let mut pipeline = ::redis::pipe();
        for words in commands {
            let mut command = ::redis::cmd(&words[0]);
            for word in &words[1..] {
                command.arg(word);
            }
            pipeline.add_command(command).ignore();
        }
        let mut connection = self.connection().await;
        pipeline.query_async::<()>(&mut connection).await.unwrap();
    }
}

impl Drop for Keys {
    fn drop(&mut self) {
        let Ok(client) = Client::open(self.url.as_str()) else {
            return;
        };
        let Ok(mut connection) = client.get_connection() else {
            return;
        };
        let pattern = format!("{}*", self.prefix);
        let keys: Vec<String> = ::redis::cmd("KEYS")
            .arg(&pattern)
            .query(&mut connection)
            .unwrap_or_default();
        if !keys.is_empty() {
            let _ = ::redis::cmd("DEL").arg(keys).exec(&mut connection);
        }
    }
}

/// The words of a command.
fn words(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|p| (*p).to_owned()).collect()
}

/// `count` orders under `<prefix>_orders:<n>`: JSON strings, `customer` ann for even numbers.
fn orders(keys: &Keys, count: u64) -> Vec<Vec<String>> {
    (1..=count)
        .map(|n| {
            let value = json!({"n": n, "customer": if n % 2 == 0 { "ann" } else { "bob" }});
            vec![
                "SET".to_owned(),
                format!("{}:{n}", keys.name("orders")),
                value.to_string(),
            ]
        })
        .collect()
}

#[tokio::test]
async fn redis_keys_are_connected_tested_and_queried_in_place() {
    let keys = Keys::new("redis_sql", 3);
    let (users, accounts, log) = (keys.name("users"), keys.name("accounts"), keys.name("log"));
    keys.run(&[
        words(&[
            "SET",
            &format!("{users}:1"),
            r#"{"name":"ann","age":31,"city":"oslo"}"#,
        ]),
        words(&[
            "SET",
            &format!("{users}:2"),
            r#"{"name":"bob","age":25,"city":"rome"}"#,
        ]),
        words(&[
            "SET",
            &format!("{users}:3"),
            r#"{"name":"cid","age":40,"city":"oslo"}"#,
        ]),
        words(&["EXPIRE", &format!("{users}:3"), "3600"]),
        words(&[
            "HSET",
            &format!("{accounts}:1"),
            "name",
            "ann",
            "plan",
            "gold",
        ]),
        words(&[
            "HSET",
            &format!("{accounts}:2"),
            "name",
            "bob",
            "plan",
            "free",
        ]),
        words(&["RPUSH", &log, "a", "b", "c"]),
        words(&["SADD", &format!("{accounts}:tags"), "y", "x"]),
    ])
    .await;

    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let root = Signed::new(&server, &root_user(dir.path(), "acme"));

    // The catalogue has the family's types.
    let listed = root.send("GET", "/sources", None).await;
    let types = listed.body.as_array().unwrap();
    for id in ["redis", "valkey", "keydb", "dragonfly", "upstash_redis"] {
        let found = types.iter().find(|t| t["id"] == id).unwrap();
        assert_eq!(found["family"], "redis", "{found}");
    }

    let id = connect(&root, "valkey", "cache", json!({"url": keys.url})).await;
    let tested = root.send("POST", &format!("/source/{id}/test"), None).await;
    assert_eq!(tested.status, 200, "{tested:?}");
    assert_eq!(tested.body["status"], "active", "{tested:?}");
    assert!(
        tested.body["datasets_available"].as_u64().unwrap() >= 3,
        "{tested:?}"
    );
    let path = format!("/sql?connection_id={id}");
    // Keys with a `:` are listed by their prefix, keys without one by their name.
    let tables = rows(&sql(&root, &path, "SHOW TABLES").await);
    for name in [format!("{users}:*"), format!("{accounts}:*"), log.clone()] {
        assert!(tables.contains(&json!([name])), "{name} not in {tables:?}");
    }

    // JSON strings: their fields are columns, filtered.
    let answer = sql(
        &root,
        &path,
        &format!(
            "SELECT _key, name, age FROM \"{users}:*\" WHERE city = 'oslo' AND age > 30 \
             ORDER BY name"
        ),
    )
    .await;
    assert_eq!(
        rows(&answer),
        vec![
            json!([format!("{users}:1"), "ann", 31]),
            json!([format!("{users}:3"), "cid", 40])
        ]
    );
    let expiring = sql(
        &root,
        &path,
        &format!("SELECT _key FROM \"{users}:*\" WHERE _ttl > 0"),
    )
    .await;
    assert_eq!(rows(&expiring), vec![json!([format!("{users}:3")])]);

    // A name without glob characters: its keys below it; hashes' fields are columns, a set
    // is the JSON text of its sorted members.
    let answer = sql(
        &root,
        &path,
        &format!("SELECT _key, _type, plan, value FROM \"{accounts}\" ORDER BY _key"),
    )
    .await;
    assert_eq!(
        rows(&answer),
        vec![
            json!([format!("{accounts}:1"), "hash", "gold", null]),
            json!([format!("{accounts}:2"), "hash", "free", null]),
            json!([format!("{accounts}:tags"), "set", null, r#"["x","y"]"#]),
        ]
    );
    let filtered = sql(
        &root,
        &path,
        &format!("SELECT plan FROM \"{accounts}:*\" WHERE name = 'bob'"),
    )
    .await;
    assert_eq!(rows(&filtered), vec![json!(["free"])]);
    // A key without `:`, a list: the JSON text of its items.
    let listed = sql(
        &root,
        &path,
        &format!("SELECT _type, value, _ttl FROM \"{log}\""),
    )
    .await;
    assert_eq!(
        rows(&listed),
        vec![json!(["list", r#"["a","b","c"]"#, null])]
    );
    // A pattern that matches nothing is an empty table.
    let none = sql(
        &root,
        &path,
        &format!("SELECT count(*) FROM \"{}:*\"", keys.name("nothing")),
    )
    .await;
    assert_eq!(rows(&none), vec![json!([0])]);

    // A server that is not there.
    let nowhere = connect(
        &root,
        "redis",
        "nowhere",
        json!({"url": format!("redis://127.0.0.1:{}", common::free_port())}),
    )
    .await;
    let failed = root
        .send("POST", &format!("/source/{nowhere}/test"), None)
        .await;
    assert_eq!(failed.status, 500, "{failed:?}");
    assert!(
        message(&failed).contains("connect to 127.0.0.1:"),
        "{failed:?}"
    );
    // Credentials in the URL are refused.
    let refused = root
        .send(
            "POST",
            "/source/redis",
            Some(&json!({"connector_id": "redis", "name": "inline",
                         "config": {"url": "redis://user:pw@127.0.0.1:6379"}})),
        )
        .await;
    assert_eq!(refused.status, 400, "{refused:?}");
}

#[tokio::test]
async fn redis_keys_are_imported_and_imported_again_without_duplicates() {
    const ORDERS: u64 = 230;
    let keys = Keys::new("redis_import", 4);
    keys.run(&orders(&keys, ORDERS)).await;
    let accounts = keys.name("accounts");
    keys.run(&[
        words(&[
            "HSET",
            &format!("{accounts}:1"),
            "name",
            "ann",
            "plan",
            "gold",
        ]),
        words(&[
            "HSET",
            &format!("{accounts}:2"),
            "name",
            "bob",
            "plan",
            "free",
        ]),
        words(&["PEXPIRE", &format!("{accounts}:2"), "86400000"]),
    ])
    .await;

    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &["--set", "imports.batch_rows=40"]);
    let root = Signed::new(&server, &root_user(dir.path(), "acme"));
    let id = connect(&root, "redis", "cache", json!({"url": keys.url})).await;
    let pattern = format!("{}:*", keys.name("orders"));

    // A key set is read once: it cannot be followed as a stream is, and nothing starts.
    let refused = root
        .send(
            "PUT",
            "/import/redis",
            Some(
                &json!({"connection_id": id, "source": {"key_pattern": pattern},
                         "dataset": "orders", "follow": true}),
            ),
        )
        .await;
    assert_eq!(refused.status, 400, "{refused:?}");
    assert!(refused.body.to_string().contains("follow"), "{refused:?}");
    let jobs = root.send("GET", "/import/jobs", None).await;
    assert_eq!(jobs.status, 200, "{jobs:?}");
    assert!(!jobs.body.to_string().contains("orders"), "{jobs:?}");

    let first = import(
        &root,
        "redis",
        json!({"connection_id": id, "source": {"key_pattern": pattern}, "dataset": "orders"}),
    )
    .await;
    let done = job_when(&root, &first, finished).await;
    assert_eq!(done["state"], "succeeded", "{done}");
    assert_eq!(done["records_written"], ORDERS, "{done}");
    let counted = sql(
        &root,
        "/sql",
        "SELECT count(*), count(DISTINCT \"redis.key\"), sum(n) FROM orders",
    )
    .await;
    assert_eq!(
        rows(&counted),
        vec![json!([ORDERS, ORDERS, ORDERS * (ORDERS + 1) / 2])]
    );
    let placed = sql(
        &root,
        "/sql",
        "SELECT \"redis.key\", \"redis.type\", customer FROM orders WHERE n = 4",
    )
    .await;
    assert_eq!(
        rows(&placed),
        vec![json!([
            format!("{}:4", keys.name("orders")),
            "string",
            "ann"
        ])]
    );

    // The same keys again (one changed, one more), named as a table, into the same dataset:
    // each key's record replaces itself.
    keys.run(&[
        words(&[
            "SET",
            &format!("{}:4", keys.name("orders")),
            r#"{"n":4,"customer":"dee"}"#,
        ]),
        words(&[
            "SET",
            &format!("{}:{}", keys.name("orders"), ORDERS + 1),
            &json!({"n": ORDERS + 1, "customer": "bob"}).to_string(),
        ]),
    ])
    .await;
    let second = import(
        &root,
        "redis",
        json!({"connection_id": id, "source": {"table": pattern}, "dataset": "orders"}),
    )
    .await;
    let done = job_when(&root, &second, finished).await;
    assert_eq!(done["state"], "succeeded", "{done}");
    assert_eq!(done["source"], json!({"key_pattern": pattern}), "{done}");
    assert_eq!(done["records_written"], ORDERS + 1, "{done}");
    let counted = sql(
        &root,
        "/sql",
        "SELECT count(*), count(DISTINCT \"redis.key\"), max(n) FROM orders",
    )
    .await;
    assert_eq!(
        rows(&counted),
        vec![json!([ORDERS + 1, ORDERS + 1, ORDERS + 1])]
    );
    let changed = sql(&root, "/sql", "SELECT customer FROM orders WHERE n = 4").await;
    assert_eq!(rows(&changed), vec![json!(["dee"])]);

    // Hashes: their fields, and the time they have left.
    let hashes = import(
        &root,
        "redis",
        json!({"connection_id": id, "source": {"key_pattern": accounts}, "dataset": "accounts"}),
    )
    .await;
    let done = job_when(&root, &hashes, finished).await;
    assert_eq!(done["state"], "succeeded", "{done}");
    assert_eq!(done["records_written"], 2, "{done}");
    let answer = sql(
        &root,
        "/sql",
        "SELECT name, plan, \"redis.ttl\" > 0 FROM accounts ORDER BY name",
    )
    .await;
    assert_eq!(
        rows(&answer),
        vec![json!(["ann", "gold", null]), json!(["bob", "free", true])]
    );
}

/// A private `redis-server` on a free port with a password, nothing saved; killed on drop.
struct PrivateRedis {
    port: u16,
    child: Option<std::process::Child>,
}

impl PrivateRedis {
    const PASSWORD: &str = "s3cret-horse";

    fn start() -> PrivateRedis {
        Self::start_on(common::free_port())
    }

    /// A server on `port`.
    fn start_on(port: u16) -> PrivateRedis {
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .args(["--requirepass", Self::PASSWORD])
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("redis-server runs");
        let server = PrivateRedis {
            port,
            child: Some(child),
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "redis-server on {port}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        server
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for PrivateRedis {
    fn drop(&mut self) {
        self.kill();
    }
}

#[tokio::test]
async fn a_redis_server_refuses_a_wrong_password_and_once_gone_fails_reads_and_imports() {
    let mut private = PrivateRedis::start();
    let keys = Keys {
        url: format!(
            "redis://:{}@127.0.0.1:{}/0",
            PrivateRedis::PASSWORD,
            private.port
        ),
        prefix: "item".to_owned(),
    };
    keys.run(&[
        words(&["SET", "item:1", r#"{"n":1}"#]),
        words(&["SET", "item:2", r#"{"n":2}"#]),
    ])
    .await;

    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let root = Signed::new(&server, &root_user(dir.path(), "acme"));

    // Credentials refused: a wrong password, and none.
    for config in [
        json!({"url": private.url(), "password": "wrong"}),
        json!({"url": private.url(), "username": "default", "password": "wrong"}),
        json!({"url": private.url()}),
    ] {
        let name = unique("wrong");
        let wrong = connect(&root, "redis", &name, config.clone()).await;
        let tested = root
            .send("POST", &format!("/source/{wrong}/test"), None)
            .await;
        assert_eq!(tested.status, 401, "{config}: {tested:?}");
        assert!(
            message(&tested).contains("refused the credentials"),
            "{tested:?}"
        );
    }

    let id = connect(
        &root,
        "redis",
        "private",
        json!({"url": private.url(), "password": PrivateRedis::PASSWORD}),
    )
    .await;
    let tested = root.send("POST", &format!("/source/{id}/test"), None).await;
    assert_eq!(tested.status, 200, "{tested:?}");
    let path = format!("/sql?connection_id={id}");
    let read = sql(&root, &path, "SELECT sum(n) FROM \"item:*\"").await;
    assert_eq!(rows(&read), vec![json!([3])]);

    // Gone: SQL fails naming the stage, the connection is in error, an import fails with
    // nothing written.
    private.kill();
    let failed = sql(&root, &path, "SELECT sum(n) FROM \"item:*\"").await;
    assert_eq!(failed.status, 500, "{failed:?}");
    let said = message(&failed);
    assert!(
        said.contains("read the keys item:*") && said.contains("connect"),
        "{failed:?}"
    );
    let connection = root.send("GET", &format!("/source/{id}"), None).await;
    assert_eq!(connection.body["status"], "error", "{connection:?}");
    let job = import(
        &root,
        "redis",
        json!({"connection_id": id, "source": {"key_pattern": "item:*"}, "dataset": "items"}),
    )
    .await;
    let done = job_when(&root, &job, finished).await;
    assert_eq!(done["state"], "failed", "{done}");
    assert_eq!(done["records_written"], 0, "{done}");
    assert!(
        done["error"]
            .as_str()
            .unwrap()
            .contains("read the keys item:*"),
        "{done}"
    );
    let counted = sql(&root, "/sql", "SELECT count(*) FROM items").await;
    assert_ne!(counted.status, 200, "{counted:?}");

    // Back (empty: nothing was saved), it is found again by the same connection.
    let _back = PrivateRedis::start_on(private.port);
    let read = sql(&root, &path, "SELECT count(*) FROM \"item:*\"").await;
    assert_eq!(rows(&read), vec![json!([0])]);
    let connection = root.send("GET", &format!("/source/{id}"), None).await;
    assert_eq!(connection.body["status"], "active", "{connection:?}");
}
