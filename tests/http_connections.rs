//! Connections over HTTP against the real servers of this machine: PostgreSQL and MariaDB (each
//! test makes its own database with the `psql` and `mariadb` clients), a SQLite file, and files
//! in the S3-compatible server scripts/test starts (STRATA_TEST_S3_ENDPOINT) and in a local
//! directory. For each: the catalogue, create, test, SQL in place with the pushed-down filter
//! seen in the source's own query log, a join with the account's own datasets, rights and
//! denied fields, sealed credentials, and a source that fails (a clear error, the connection
//! marked `error`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

// The broker and cache families, one file each, with the helpers below.
#[path = "connections/amqp.rs"]
mod amqp;
#[path = "connections/mqtt.rs"]
mod mqtt;
#[path = "connections/nats.rs"]
mod nats;
#[path = "connections/redis.rs"]
mod redis;

use std::{
    process::Command,
    sync::Arc,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use common::{Answer, Server, Signed, root_user, yaml};
use serde_json::{Value, json};

/// A name no other test run uses.
fn unique(prefix: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("{prefix}_{}_{nanos}", std::process::id())
}

/// Runs `sql` with psql as the `postgres` user on loopback; its unaligned output.
fn psql(database: &str, sql: &str) -> String {
    let out = Command::new("psql")
        .args(["-h", "127.0.0.1", "-U", "postgres", "-d", database])
        .args(["-v", "ON_ERROR_STOP=1", "-Atc", sql])
        .output()
        .expect("psql runs");
    assert!(
        out.status.success(),
        "psql {sql}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs `sql` with the mariadb client as root on loopback; its tab-separated output.
fn mariadb(sql: &str) -> String {
    let out = Command::new("mariadb")
        .args(["-h", "127.0.0.1", "-uroot", "-N", "-B", "-e", sql])
        .output()
        .expect("mariadb runs");
    assert!(
        out.status.success(),
        "mariadb {sql}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Creates role `role` from `permissions` (YAML entries) and user `name` holding it.
async fn user_with(root: &Signed, server: &Server, name: &str, permissions: &str) -> Signed {
    let role = format!("Version: 2025-01-01\nPermissions:\n{permissions}");
    let made = yaml(root, "PUT", &format!("/role/{name}-role"), &role).await;
    assert_eq!(made.status, 200, "{made:?}");
    common::user(root, server, name, &[&format!("{name}-role")]).await
}

async fn sql(client: &Signed, path: &str, query: &str) -> Answer {
    client
        .send("POST", path, Some(&json!({"query": query})))
        .await
}

fn message(answer: &Answer) -> String {
    answer.body["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// Creates a connection; its id.
async fn connect(root: &Signed, source_type: &str, name: &str, config: Value) -> String {
    let made = root
        .send(
            "POST",
            &format!("/source/{source_type}"),
            Some(&json!({"connector_id": source_type, "name": name, "config": config})),
        )
        .await;
    assert_eq!(made.status, 201, "{made:?}");
    assert_eq!(made.body["status"], "inactive", "{made:?}");
    made.body["connection_id"].as_str().unwrap().to_owned()
}

/// The rows of a SQL answer.
fn rows(answer: &Answer) -> Vec<Value> {
    assert_eq!(answer.status, 200, "{answer:?}");
    answer.body["rows"].as_array().unwrap().clone()
}

/// A PostgreSQL database of its own, logging every statement (to the server's log file).
struct Postgres {
    database: String,
}

impl Postgres {
    fn new() -> Postgres {
        let database = unique("strata_pg");
        psql("postgres", &format!("CREATE DATABASE {database}"));
        psql(
            "postgres",
            &format!("ALTER DATABASE {database} SET log_statement = 'all'"),
        );
        psql(
            &database,
            "CREATE TABLE orders (id int PRIMARY KEY, customer text, amount double precision, \
             secret text, placed timestamptz);
             INSERT INTO orders VALUES
               (1, 'ann', 50, 's1', '2026-11-01T10:00:00Z'),
               (2, 'bob', 150, 's2', '2026-11-02T10:00:00Z'),
               (3, 'ann', 250, 's3', '2026-11-03T10:00:00Z'),
               (4, 'cid', 350, 's4', '2026-11-04T10:00:00Z');
             CREATE SCHEMA sales;
             CREATE TABLE sales.targets (region text, target bigint);
             INSERT INTO sales.targets VALUES ('north', 10), ('south', 20);",
        );
        Postgres { database }
    }

    /// What the server logged of statements naming `needle`.
    fn logged(&self, needle: &str) -> String {
        let mut text = String::new();
        for entry in std::fs::read_dir("/var/log/postgresql").unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "log") {
                text.push_str(&std::fs::read_to_string(path).unwrap_or_default());
            }
        }
        text.lines()
            .filter(|line| line.contains(needle))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let _ = Command::new("psql")
            .args(["-h", "127.0.0.1", "-U", "postgres", "-d", "postgres", "-c"])
            .arg(format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.database
            ))
            .output();
    }
}

#[tokio::test]
async fn postgresql_is_connected_tested_and_queried_in_place() {
    let pg = Postgres::new();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let root = Signed::new(&server, &root_user(dir.path(), "acme"));

    // The catalogue.
    for path in ["/sources", "/_connector/connectors"] {
        let listed = root.send("GET", path, None).await;
        assert_eq!(listed.status, 200, "{listed:?}");
        let types = listed.body.as_array().unwrap();
        assert!(types.len() >= 48, "{} source types", types.len());
        let postgres = types.iter().find(|t| t["id"] == "postgresql").unwrap();
        assert_eq!(postgres["family"], "postgres");
        assert!(
            postgres["capabilities"]
                .as_array()
                .unwrap()
                .contains(&json!("sql"))
        );
    }

    // Create, read back without the password, test.
    let password = "pg-Pa55word-never-shown";
    let id = connect(
        &root,
        "postgresql",
        "pg",
        json!({"host": "127.0.0.1", "port": 5432, "username": "postgres",
               "password": password, "database": pg.database}),
    )
    .await;
    let got = root.send("GET", &format!("/source/{id}"), None).await;
    assert_eq!(got.status, 200, "{got:?}");
    assert_eq!(got.body["config"]["username"], "postgres");
    assert!(got.body["config"].get("password").is_none(), "{got:?}");
    assert!(got.body["last_used_at"].is_null(), "{got:?}");
    // A new connection was created and updated at one time: its event's.
    assert!(got.body["created_at"].is_string(), "{got:?}");
    assert_eq!(got.body["created_at"], got.body["updated_at"], "{got:?}");
    let tested = root.send("POST", &format!("/source/{id}/test"), None).await;
    assert_eq!(tested.status, 200, "{tested:?}");
    assert_eq!(tested.body["status"], "active");
    assert_eq!(tested.body["datasets_available"], 2, "{tested:?}");
    let listed = root.send("GET", "/sources/connections", None).await;
    let mine = &listed.body.as_array().unwrap()[0];
    assert_eq!(mine["status"], "active", "{listed:?}");
    assert!(mine["last_used_at"].is_string(), "{listed:?}");

    // SQL in place, by query parameter and by header; the filter reaches PostgreSQL.
    let answer = sql(
        &root,
        &format!("/sql?connection_id={id}"),
        "SELECT customer, amount FROM orders WHERE amount > 100 ORDER BY amount",
    )
    .await;
    assert_eq!(
        rows(&answer),
        vec![
            json!(["bob", 150.0]),
            json!(["ann", 250.0]),
            json!(["cid", 350.0])
        ]
    );
    assert_eq!(
        answer.body["columns"],
        json!([{"name": "customer", "type": "string"}, {"name": "amount", "type": "double"}])
    );
    let pushed = pg.logged("\"orders\"");
    assert!(
        pushed.contains("WHERE") && pushed.contains("100"),
        "the filter was not pushed to PostgreSQL:\n{pushed}"
    );
    let path = "/_sql";
    let body = json!({"query": "SELECT sum(target) AS total FROM sales.targets"}).to_string();
    let extra = [
        ("content-type", "application/json"),
        ("x-svc-connection-id", id.as_str()),
    ];
    let headers = root.sign("POST", path, &extra, body.as_bytes(), chrono::Utc::now());
    let by_header = root
        .send_raw("POST", path, &headers, body.into_bytes())
        .await;
    assert_eq!(rows(&by_header), vec![json!([30])]);
    let tables = sql(&root, &format!("/sql?connection_id={id}"), "SHOW TABLES").await;
    assert_eq!(
        rows(&tables),
        vec![json!(["orders"]), json!(["sales.targets"])]
    );
    let described = sql(&root, "/sql?connection_id=pg", "DESCRIBE orders").await;
    assert_eq!(rows(&described).len(), 5, "{described:?}");

    // A join of the connected table with the account's own dataset.
    let lines = [
        json!({"index": {"_index": "customers", "_id": "ann"}}),
        json!({"name": "ann", "tier": "gold"}),
        json!({"index": {"_index": "customers", "_id": "bob"}}),
        json!({"name": "bob", "tier": "silver"}),
    ];
    let written = root
        .send_ndjson("POST", "/_bulk?refresh=true", &lines)
        .await;
    assert_eq!(written.body["errors"], false, "{written:?}");
    let joined = sql(
        &root,
        "/sql",
        "SELECT c.tier, sum(o.amount) AS spent FROM \"pg\".\"orders\" o \
         JOIN customers c ON c.name = o.customer GROUP BY c.tier ORDER BY c.tier",
    )
    .await;
    assert_eq!(
        rows(&joined),
        vec![json!(["gold", 300.0]), json!(["silver", 150.0])]
    );

    // Query DSL in place, translated to SQL, at both paths.
    let search = root
        .send(
            "POST",
            &format!("/source/{id}/orders/dsl"),
            Some(&json!({
                "query": {"bool": {"filter": [
                    {"range": {"amount": {"gte": 100}}}, {"term": {"customer": "ann"}}]}},
                "aggs": {"spent": {"sum": {"field": "amount"}}}})),
        )
        .await;
    assert_eq!(search.status, 200, "{search:?}");
    assert_eq!(search.body["hits"]["total"]["value"], 1, "{search:?}");
    assert_eq!(search.body["hits"]["hits"][0]["_source"]["amount"], 250.0);
    assert_eq!(search.body["aggregations"]["spent"]["value"], 250.0);
    let by_index = root
        .send(
            "POST",
            &format!("/orders/_search?connection_id={id}"),
            Some(&json!({"size": 0, "aggs": {"by": {"terms": {"field": "customer"}}}})),
        )
        .await;
    assert_eq!(by_index.status, 200, "{by_index:?}");
    let buckets = &by_index.body["aggregations"]["by"]["buckets"];
    assert_eq!(
        buckets[0],
        json!({"key": "ann", "doc_count": 2}),
        "{by_index:?}"
    );
    let outside = root
        .send(
            "POST",
            &format!("/source/{id}/orders/dsl"),
            Some(&json!({"query": {"match_phrase": {"customer": "ann"}}})),
        )
        .await;
    assert_eq!(outside.status, 400, "{outside:?}");
    assert!(message(&outside).contains("match_phrase"), "{outside:?}");
    let metadata = root
        .send("GET", &format!("/source/{id}/orders/metadata"), None)
        .await;
    assert_eq!(
        metadata.body["fields"].as_array().unwrap().len(),
        5,
        "{metadata:?}"
    );

    // Bad requests and unknown things, in the documented shape.
    let unknown = sql(&root, "/sql?connection_id=nope", "SELECT 1").await;
    assert_eq!(unknown.status, 404, "{unknown:?}");
    let no_table = sql(
        &root,
        &format!("/sql?connection_id={id}"),
        "SELECT * FROM nothing",
    )
    .await;
    assert_eq!(no_table.status, 400, "{no_table:?}");
    assert!(message(&no_table).contains("[nothing]"), "{no_table:?}");
    let write = sql(
        &root,
        &format!("/sql?connection_id={id}"),
        "DELETE FROM orders",
    )
    .await;
    assert_eq!(write.status, 400, "{write:?}");
    let bad_key = root
        .send(
            "POST",
            "/source/postgresql",
            Some(
                &json!({"name": "x", "config": {"host": "h", "username": "u",
                         "database": "d", "bucket": "b"}}),
            ),
        )
        .await;
    assert_eq!(bad_key.status, 400, "{bad_key:?}");
    assert!(message(&bad_key).contains("config.bucket"), "{bad_key:?}");
    let bad_type = root
        .send(
            "POST",
            "/source/oracle-9i",
            Some(&json!({"name": "x", "config": {}})),
        )
        .await;
    assert_eq!(bad_type.status, 404, "{bad_type:?}");
    let taken = root
        .send(
            "POST",
            "/source/postgresql",
            Some(&json!({"name": "pg", "config": {"host": "h", "username": "u", "database": "d"}})),
        )
        .await;
    assert_eq!(taken.status, 409, "{taken:?}");

    // Rights: record read on pg/orders without its secret; nothing else of the connection.
    let ann = user_with(
        &root,
        &server,
        "ann",
        "  - ResourceType: record\n    Actions: [read]\n    Resources: [pg/orders]\n    \
         Fields: {Deny: [secret]}\n",
    )
    .await;
    let seen = sql(
        &ann,
        &format!("/sql?connection_id={id}"),
        "SELECT * FROM orders",
    )
    .await;
    assert_eq!(rows(&seen).len(), 4);
    let columns: Vec<&str> = seen.body["columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(columns, ["id", "customer", "amount", "placed"]);
    let secret = sql(
        &ann,
        &format!("/sql?connection_id={id}"),
        "SELECT secret FROM orders",
    )
    .await;
    assert_eq!(secret.status, 400, "{secret:?}");
    let other = sql(
        &ann,
        &format!("/sql?connection_id={id}"),
        "SELECT * FROM sales.targets",
    )
    .await;
    assert_eq!(other.status, 403, "{other:?}");
    let searched = ann
        .send(
            "POST",
            &format!("/source/{id}/orders/dsl"),
            Some(&json!({"size": 1})),
        )
        .await;
    assert_eq!(searched.status, 200, "{searched:?}");
    let source = &searched.body["hits"]["hits"][0]["_source"];
    assert!(
        source.get("secret").is_none() && source.get("customer").is_some(),
        "{searched:?}"
    );
    let described = ann
        .send("GET", &format!("/source/{id}/orders/metadata"), None)
        .await;
    assert_eq!(described.status, 403, "{described:?}");
    let manage = ann
        .send(
            "PATCH",
            &format!("/source/{id}"),
            Some(&json!({"name": "mine"})),
        )
        .await;
    assert_eq!(manage.status, 403, "{manage:?}");
    let listed = ann.send("GET", "/sources/connections", None).await;
    assert_eq!(listed.body.as_array().unwrap().len(), 1, "{listed:?}");

    // A record filter is a condition the source is sent.
    let bea = user_with(
        &root,
        &server,
        "bea",
        "  - ResourceType: record\n    Actions: [read]\n    Resources: [\"pg/*\"]\n    \
         Filter: {term: {customer: bob}}\n",
    )
    .await;
    let filtered = sql(&bea, "/sql?connection_id=pg", "SELECT id FROM orders").await;
    assert_eq!(rows(&filtered), vec![json!([2])]);

    // The password is sealed: neither the API, nor a dump, nor the log's bytes show it.
    let dumped = common::replay(dir.path(), &["dump"]);
    let dumped = String::from_utf8_lossy(&dumped.stdout);
    assert!(dumped.contains("connection_set"), "{dumped}");
    assert!(!dumped.contains(password));
    let mut log = Vec::new();
    for entry in walk(&dir.path().join("log")) {
        log.extend(std::fs::read(entry).unwrap());
    }
    assert!(
        !log.windows(password.len())
            .any(|w| w == password.as_bytes())
    );

    // The source goes away mid-query: a clear 500 naming the stage, the connection in error.
    psql(
        &pg.database,
        "CREATE VIEW slow AS SELECT o.id, (SELECT 1 FROM pg_sleep(3)) AS waited FROM orders o",
    );
    let database = pg.database.clone();
    let killer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(700));
        psql(
            "postgres",
            &format!(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                 WHERE datname = '{database}' AND pid <> pg_backend_pid()"
            ),
        );
    });
    let cut = sql(
        &root,
        &format!("/sql?connection_id={id}"),
        "SELECT * FROM slow",
    )
    .await;
    killer.join().unwrap();
    assert_eq!(cut.status, 500, "{cut:?}");
    assert!(message(&cut).contains("query pg"), "{cut:?}");
    let marked = root.send("GET", &format!("/source/{id}"), None).await;
    assert_eq!(marked.body["status"], "error", "{marked:?}");
    // Another port: the stage is the connection.
    let moved = root
        .send(
            "PATCH",
            &format!("/source/{id}"),
            Some(&json!({"config": {"port": 1}})),
        )
        .await;
    assert_eq!(moved.status, 200, "{moved:?}");
    assert!(moved.body["config"].get("password").is_none());
    assert_eq!(
        moved.body["status"], "inactive",
        "a changed config is untested: {moved:?}"
    );
    let refused = root.send("POST", &format!("/source/{id}/test"), None).await;
    assert_eq!(refused.status, 500, "{refused:?}");
    assert!(
        message(&refused).contains("connect to 127.0.0.1:1"),
        "{refused:?}"
    );
    // Back, with the password kept through the PATCH.
    let back = root
        .send(
            "PATCH",
            &format!("/source/{id}"),
            Some(&json!({"config": {"port": 5432}})),
        )
        .await;
    assert_eq!(back.status, 200, "{back:?}");
    let tested = root.send("POST", &format!("/source/{id}/test"), None).await;
    assert_eq!(tested.body["status"], "active", "{tested:?}");

    // Kept across a restart, then deleted.
    drop(server);
    let server = Server::start(dir.path(), &[]);
    let root = Signed::new(&server, &root.credentials);
    let again = sql(
        &root,
        "/sql?connection_id=pg",
        "SELECT count(*) AS n FROM orders",
    )
    .await;
    assert_eq!(rows(&again), vec![json!([4])]);
    let deleted = root.send("DELETE", &format!("/source/{id}"), None).await;
    assert_eq!(
        deleted.body,
        json!({"acknowledged": true, "connection_id": id})
    );
    let gone = root.send("GET", &format!("/source/{id}"), None).await;
    assert_eq!(gone.status, 404, "{gone:?}");
}

/// Every file under `dir`.
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        match path.is_dir() {
            true => files.extend(walk(&path)),
            false => files.push(path),
        }
    }
    files
}

/// A MariaDB database and a user of its own, with the general query log on (in a table).
struct Maria {
    database: String,
    user: String,
}

impl Maria {
    fn new() -> Maria {
        let database = unique("strata_my");
        let user = unique("strata_u");
        mariadb(&format!(
            "CREATE DATABASE {database};
             CREATE TABLE {database}.orders (id int PRIMARY KEY, customer varchar(20), amount double);
             INSERT INTO {database}.orders VALUES (1, 'ann', 50), (2, 'bob', 150), (3, 'ann', 250);
             CREATE TABLE {database}.payroll (id int, salary int);
             INSERT INTO {database}.payroll VALUES (1, 100);
             CREATE USER '{user}'@'%' IDENTIFIED BY 'right-Pa55';
             CREATE USER '{user}'@'localhost' IDENTIFIED BY 'right-Pa55';
             GRANT SELECT ON {database}.orders TO '{user}'@'%';
             GRANT SELECT ON {database}.orders TO '{user}'@'localhost';
             CREATE SQL SECURITY INVOKER VIEW {database}.salaries AS SELECT salary FROM {database}.payroll;
             GRANT SELECT ON {database}.salaries TO '{user}'@'%';
             GRANT SELECT ON {database}.salaries TO '{user}'@'localhost';
             SET GLOBAL log_output = 'TABLE';
             SET GLOBAL general_log = 1;"
        ));
        Maria { database, user }
    }

    /// The statements the server's general log holds that name `needle`.
    fn logged(&self, needle: &str) -> String {
        mariadb(&format!(
            "SELECT argument FROM mysql.general_log WHERE argument LIKE '%{needle}%'"
        ))
    }
}

impl Drop for Maria {
    fn drop(&mut self) {
        let _ = Command::new("mariadb")
            .args(["-h", "127.0.0.1", "-uroot", "-e"])
            .arg(format!(
                "DROP DATABASE IF EXISTS {0}; DROP USER IF EXISTS '{1}'@'%'; \
                 DROP USER IF EXISTS '{1}'@'localhost';",
                self.database, self.user
            ))
            .output();
    }
}

#[tokio::test]
async fn mariadb_refuses_bad_credentials_and_rights_and_takes_pushed_filters() {
    let maria = Maria::new();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let root = Signed::new(&server, &root_user(dir.path(), "acme"));
    let config = |password: &str| {
        json!({"host": "127.0.0.1", "username": maria.user, "password": password,
               "database": maria.database})
    };

    // The source refuses the credentials: 401, and the connection is in error.
    let wrong = connect(&root, "mariadb", "maria-wrong", config("wrong")).await;
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

    let id = connect(&root, "mariadb", "maria", config("right-Pa55")).await;
    let tested = root.send("POST", &format!("/source/{id}/test"), None).await;
    assert_eq!(tested.status, 200, "{tested:?}");
    assert_eq!(tested.body["datasets_available"], 2, "{tested:?}");
    let answer = sql(
        &root,
        &format!("/sql?connection_id={id}"),
        "SELECT customer FROM orders WHERE amount >= 150 ORDER BY customer",
    )
    .await;
    assert_eq!(rows(&answer), vec![json!(["ann"]), json!(["bob"])]);
    let logged = maria.logged(&format!("{}`.`orders", maria.database));
    let logged = format!("{logged}{}", maria.logged("`orders`"));
    assert!(
        logged.contains("WHERE") && logged.contains("150"),
        "the filter was not pushed to MariaDB:\n{logged}"
    );

    // The source refuses a right (a view over a table the user may not read): 403.
    let denied = sql(
        &root,
        &format!("/sql?connection_id={id}"),
        "SELECT * FROM salaries",
    )
    .await;
    assert_eq!(denied.status, 403, "{denied:?}");
    assert!(message(&denied).contains("refused the right"), "{denied:?}");
}

#[tokio::test]
async fn a_sqlite_file_is_queried_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("shop.db");
    let made = Command::new("sqlite3")
        .arg(&file)
        .arg(
            "CREATE TABLE items (sku TEXT, price REAL, stock INTEGER);
             INSERT INTO items VALUES ('a', 1.5, 10), ('b', 2.5, 0), ('c', 9.0, 3);",
        )
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    let server = Server::start(dir.path(), &[]);
    let root = Signed::new(&server, &root_user(dir.path(), "acme"));
    let id = connect(
        &root,
        "sqlite",
        "lite",
        json!({"path": file.to_str().unwrap()}),
    )
    .await;
    let tested = root.send("POST", &format!("/source/{id}/test"), None).await;
    assert_eq!(tested.body["datasets_available"], 1, "{tested:?}");
    let answer = sql(
        &root,
        &format!("/sql?connection_id={id}"),
        "SELECT sku FROM items WHERE stock > 0 ORDER BY price DESC LIMIT 5",
    )
    .await;
    assert_eq!(rows(&answer), vec![json!(["c"]), json!(["a"])]);

    let missing = connect(&root, "sqlite", "gone", json!({"path": "/nowhere/x.db"})).await;
    let failed = root
        .send("POST", &format!("/source/{missing}/test"), None)
        .await;
    assert_eq!(failed.status, 500, "{failed:?}");
    assert!(
        message(&failed).contains("open /nowhere/x.db"),
        "{failed:?}"
    );
    let relative = root
        .send(
            "POST",
            "/source/sqlite",
            Some(&json!({"name": "rel", "config": {"path": "x.db"}})),
        )
        .await;
    assert_eq!(relative.status, 400, "{relative:?}");
    assert!(message(&relative).contains("config.path"), "{relative:?}");
}

/// A Parquet file of `(city, temp)` rows.
fn parquet(rows: &[(&str, f64)]) -> Vec<u8> {
    use arrow::array::{Float64Array, StringArray};
    let schema = Arc::new(arrow::datatypes::Schema::new(vec![
        arrow::datatypes::Field::new("city", arrow::datatypes::DataType::Utf8, false),
        arrow::datatypes::Field::new("temp", arrow::datatypes::DataType::Float64, false),
    ]));
    let batch = arrow::array::RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(StringArray::from(
                rows.iter().map(|r| r.0).collect::<Vec<_>>(),
            )),
            Arc::new(Float64Array::from(
                rows.iter().map(|r| r.1).collect::<Vec<_>>(),
            )),
        ],
    )
    .unwrap();
    let mut bytes = Vec::new();
    let mut writer = parquet::arrow::ArrowWriter::try_new(&mut bytes, schema, None).unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();
    bytes
}

#[tokio::test]
async fn files_in_an_s3_bucket_and_a_directory_are_queried_in_place() {
    let endpoint = std::env::var("STRATA_TEST_S3_ENDPOINT").expect(
        "STRATA_TEST_S3_ENDPOINT is not set: run the tests with scripts/test, which starts an S3-compatible server",
    );
    let bucket = unique("strata-files").replace('_', "-");
    let http = reqwest::Client::new();
    let put = |key: String, body: Vec<u8>| {
        let http = http.clone();
        let url = format!("{endpoint}/{bucket}{key}");
        async move {
            let made = http.put(url).body(body).send().await.unwrap();
            assert!(made.status().is_success(), "{made:?}");
        }
    };
    put(String::new(), Vec::new()).await;
    put(
        "/lake/weather/2026-01.parquet".into(),
        parquet(&[("oslo", -3.0), ("rome", 11.0)]),
    )
    .await;
    put(
        "/lake/weather/2026-02.parquet".into(),
        parquet(&[("oslo", -1.0), ("rome", 13.0)]),
    )
    .await;
    put("/lake/sales.csv".into(), b"sku,qty\na,3\nb,5\n".to_vec()).await;
    put(
        "/lake/events.ndjson".into(),
        b"{\"kind\":\"x\",\"n\":1}\n{\"kind\":\"y\",\"n\":2}\n".to_vec(),
    )
    .await;

    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let root = Signed::new(&server, &root_user(dir.path(), "acme"));
    let id = connect(
        &root,
        "minio",
        "lake",
        json!({"url": format!("s3://{bucket}/lake"), "endpoint": endpoint, "region": "us-east-1",
               "access_key_id": "testing", "secret_access_key": "testing-secret"}),
    )
    .await;
    let tested = root.send("POST", &format!("/source/{id}/test"), None).await;
    assert_eq!(tested.status, 200, "{tested:?}");
    assert_eq!(tested.body["datasets_available"], 4, "{tested:?}");
    let on = format!("/sql?connection_id={id}");
    let cold = sql(
        &root,
        &on,
        "SELECT city, min(temp) AS low FROM \"weather/*.parquet\" GROUP BY city ORDER BY city",
    )
    .await;
    assert_eq!(
        rows(&cold),
        vec![json!(["oslo", -3.0]), json!(["rome", 11.0])]
    );
    let one = sql(
        &root,
        &on,
        "SELECT count(*) AS n FROM \"weather/2026-02.parquet\"",
    )
    .await;
    assert_eq!(rows(&one), vec![json!([2])]);
    let directory = sql(&root, &on, "SELECT count(*) AS n FROM \"weather/\"").await;
    assert_eq!(rows(&directory), vec![json!([4])]);
    let csv = sql(&root, &on, "SELECT sum(qty) AS q FROM \"sales.csv\"").await;
    assert_eq!(rows(&csv), vec![json!([8])]);
    let ndjson = sql(&root, &on, "SELECT kind FROM \"events.ndjson\" WHERE n > 1").await;
    assert_eq!(rows(&ndjson), vec![json!(["y"])]);
    let none = sql(&root, &on, "SELECT * FROM \"nothing/*.parquet\"").await;
    assert_eq!(none.status, 400, "{none:?}");

    // A local directory, and one that does not exist.
    let local = tempfile::tempdir().unwrap();
    std::fs::write(local.path().join("t.csv"), "a,b\n1,2\n3,4\n").unwrap();
    let url = format!("file://{}", local.path().display());
    let here = connect(&root, "local_files", "here", json!({"url": url})).await;
    let tested = root
        .send("POST", &format!("/source/{here}/test"), None)
        .await;
    assert_eq!(tested.body["datasets_available"], 1, "{tested:?}");
    let answer = sql(
        &root,
        &format!("/sql?connection_id={here}"),
        "SELECT sum(b) AS s FROM \"t.csv\"",
    )
    .await;
    assert_eq!(rows(&answer), vec![json!([6])]);
    let nowhere = connect(
        &root,
        "local_files",
        "nowhere",
        json!({"url": "file:///no/such/dir"}),
    )
    .await;
    let failed = root
        .send("POST", &format!("/source/{nowhere}/test"), None)
        .await;
    assert_eq!(failed.status, 500, "{failed:?}");
}

#[tokio::test]
async fn another_strata_is_searched_through_its_elasticsearch_api() {
    // The source: a second strata, with a dataset of two teams' records.
    let upstream_dir = tempfile::tempdir().unwrap();
    let upstream = Server::start(upstream_dir.path(), &[]);
    let keys = root_user(upstream_dir.path(), "upstream");
    let lines = [
        json!({"index": {"_index": "logs", "_id": "1"}}),
        json!({"team": "a", "msg": "disk full", "email": "ann@example.com", "secret": "s1", "n": 1}),
        json!({"index": {"_index": "logs", "_id": "2"}}),
        json!({"team": "b", "msg": "disk ok", "email": "bob@example.com", "secret": "s2", "n": 2}),
        json!({"index": {"_index": "logs", "_id": "3"}}),
        json!({"team": "a", "msg": "cpu hot", "email": "cid@example.com", "secret": "s3", "n": 3}),
    ];
    let written = Signed::new(&upstream, &keys)
        .send_ndjson("POST", "/_bulk?refresh=true", &lines)
        .await;
    assert_eq!(written.body["errors"], false, "{written:?}");

    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let root = Signed::new(&server, &root_user(dir.path(), "acme"));
    let config = |secret: &str| {
        json!({"url": upstream.platform_url, "access_key_id": keys.access_key,
               "secret_access_key": secret})
    };
    let wrong = connect(&root, "strata", "wrong", config("not-the-secret")).await;
    let refused = root
        .send("POST", &format!("/source/{wrong}/test"), None)
        .await;
    assert_eq!(refused.status, 401, "{refused:?}");
    let id = connect(&root, "strata", "up", config(&keys.secret_key)).await;
    let tested = root.send("POST", &format!("/source/{id}/test"), None).await;
    assert_eq!(tested.status, 200, "{tested:?}");
    assert_eq!(tested.body["datasets_available"], 1, "{tested:?}");

    // The search is forwarded as it is (match is no SQL source's, but a search engine's).
    let found = root
        .send(
            "POST",
            &format!("/source/{id}/logs/dsl"),
            Some(&json!({"query": {"match": {"msg": "disk"}}, "sort": [{"n": "asc"}]})),
        )
        .await;
    assert_eq!(found.status, 200, "{found:?}");
    assert_eq!(found.body["hits"]["total"]["value"], 2, "{found:?}");
    assert_eq!(found.body["hits"]["hits"][0]["_source"]["secret"], "s1");
    let metadata = root
        .send("GET", &format!("/source/{id}/logs/metadata"), None)
        .await;
    assert_eq!(metadata.status, 200, "{metadata:?}");
    let names: Vec<&str> = metadata.body["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"secret") && names.contains(&"team"),
        "{metadata:?}"
    );
    let not_sql = sql(
        &root,
        &format!("/sql?connection_id={id}"),
        "SELECT * FROM logs",
    )
    .await;
    assert_eq!(not_sql.status, 400, "{not_sql:?}");

    // A reader's Deny, Mask and record filter hold on what the source answers.
    let ann = user_with(
        &root,
        &server,
        "ann",
        "  - ResourceType: record\n    Actions: [read]\n    Resources: [up/logs]\n    \
         Fields: {Deny: [secret], Mask: {email: redact}}\n    Filter: {term: {team: a}}\n",
    )
    .await;
    let seen = ann
        .send(
            "POST",
            &format!("/logs/_search?connection_id={id}"),
            Some(&json!({"sort": [{"n": "asc"}]})),
        )
        .await;
    assert_eq!(seen.status, 200, "{seen:?}");
    let hits = seen.body["hits"]["hits"].as_array().unwrap();
    assert_eq!(hits.len(), 2, "{seen:?}");
    for hit in hits {
        assert_eq!(hit["_source"]["team"], "a");
        assert!(hit["_source"].get("secret").is_none(), "{hit}");
        assert!(
            hit["_source"]["email"]
                .as_str()
                .unwrap()
                .starts_with("****"),
            "{hit}"
        );
    }
    let by_secret = ann
        .send(
            "POST",
            &format!("/source/{id}/logs/dsl"),
            Some(&json!({"query": {"term": {"secret": "s1"}}})),
        )
        .await;
    assert_eq!(by_secret.body["hits"]["total"]["value"], 0, "{by_secret:?}");
    let script = ann
        .send(
            "POST",
            &format!("/source/{id}/logs/dsl"),
            Some(&json!({"query": {"script": {"script": "doc['secret'].value == 's1'"}}})),
        )
        .await;
    assert_eq!(script.status, 400, "{script:?}");
}

#[tokio::test]
async fn an_http_json_api_is_queried_in_place_with_its_sealed_token() {
    use axum::{Json, Router, http::HeaderMap, routing::get};
    async fn items(headers: HeaderMap) -> Result<Json<Value>, axum::http::StatusCode> {
        match headers.get("authorization").and_then(|v| v.to_str().ok()) {
            Some("Bearer t0ken-of-the-api") => Ok(Json(json!({"data": {"items": [
                {"sku": "a", "price": 1.5, "tags": ["x"]},
                {"sku": "b", "price": 7.0, "tags": []},
                {"sku": "c", "price": 3.25}
            ]}}))),
            _ => Err(axum::http::StatusCode::UNAUTHORIZED),
        }
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1/items", listener.local_addr().unwrap());
    let app = Router::new().route("/v1/items", get(items));
    tokio::spawn(async move { axum::serve(listener, app).await });

    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let root = Signed::new(&server, &root_user(dir.path(), "acme"));
    let config = |token: &str| {
        json!({"url": url, "records_path": "/data/items",
               "headers": {"Authorization": format!("Bearer {token}")}})
    };
    let wrong = connect(&root, "http_json", "api-wrong", config("nope")).await;
    let refused = root
        .send("POST", &format!("/source/{wrong}/test"), None)
        .await;
    assert_eq!(refused.status, 401, "{refused:?}");
    let id = connect(&root, "http_json", "api", config("t0ken-of-the-api")).await;
    let got = root.send("GET", &format!("/source/{id}"), None).await;
    assert!(got.body["config"].get("headers").is_none(), "{got:?}");
    let tested = root.send("POST", &format!("/source/{id}/test"), None).await;
    assert_eq!(tested.body["datasets_available"], 1, "{tested:?}");
    let answer = sql(
        &root,
        &format!("/sql?connection_id={id}"),
        "SELECT sku FROM records WHERE price > 2 ORDER BY price",
    )
    .await;
    assert_eq!(rows(&answer), vec![json!(["c"]), json!(["b"])]);
    let searched = root
        .send(
            "POST",
            &format!("/source/{id}/records/dsl"),
            Some(&json!({"query": {"term": {"sku": "a"}}})),
        )
        .await;
    assert_eq!(searched.body["hits"]["total"]["value"], 1, "{searched:?}");
    let bad = root
        .send(
            "POST",
            "/source/http_json",
            Some(&json!({"name": "h", "config": {"url": "x", "headers": {"a": 1}}})),
        )
        .await;
    assert_eq!(bad.status, 400, "{bad:?}");
}

/// The test broker (STRATA_TEST_KAFKA), a new topic of two partitions named after `prefix`
/// on it, and a producer.
async fn kafka_topic(prefix: &str) -> (String, String, rdkafka::producer::BaseProducer) {
    use rdkafka::{
        ClientConfig,
        admin::{AdminClient, AdminOptions, NewTopic, TopicReplication},
        client::DefaultClientContext,
    };
    let brokers = std::env::var("STRATA_TEST_KAFKA").expect(
        "STRATA_TEST_KAFKA is not set: run the tests with scripts/test, which starts a broker",
    );
    let topic = unique(prefix).replace('_', "-");
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", &brokers)
        .create()
        .unwrap();
    let made = admin
        .create_topics(
            &[NewTopic::new(&topic, 2, TopicReplication::Fixed(1))],
            &AdminOptions::new(),
        )
        .await
        .unwrap();
    assert!(made.iter().all(Result::is_ok), "{made:?}");
    let producer = ClientConfig::new()
        .set("bootstrap.servers", &brokers)
        .create()
        .unwrap();
    (brokers, topic, producer)
}

#[tokio::test]
async fn a_kafka_topic_is_read_in_place() {
    use rdkafka::producer::{BaseRecord, Producer};
    let (brokers, topic, producer) = kafka_topic("orders").await;
    for n in 1..=4 {
        let value = json!({"n": n, "customer": if n % 2 == 0 { "ann" } else { "bob" }}).to_string();
        let key = format!("k{n}");
        producer
            .send(
                BaseRecord::to(&topic)
                    .key(&key)
                    .payload(&value)
                    .partition(n % 2),
            )
            .unwrap();
    }
    producer.flush(Duration::from_secs(10)).unwrap();

    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let root = Signed::new(&server, &root_user(dir.path(), "acme"));
    let id = connect(&root, "kafka", "events", json!({"url": brokers})).await;
    let tested = root.send("POST", &format!("/source/{id}/test"), None).await;
    assert_eq!(tested.status, 200, "{tested:?}");
    let tables = sql(&root, &format!("/sql?connection_id={id}"), "SHOW TABLES").await;
    assert!(rows(&tables).contains(&json!([topic])), "{tables:?}");
    let answer = sql(
        &root,
        &format!("/sql?connection_id={id}"),
        &format!("SELECT _key, n FROM \"{topic}\" WHERE customer = 'ann' ORDER BY n"),
    )
    .await;
    assert_eq!(rows(&answer), vec![json!(["k2", 2]), json!(["k4", 4])]);
    let counted = sql(
        &root,
        &format!("/sql?connection_id={id}"),
        &format!("SELECT count(*) AS n, count(DISTINCT _partition) AS p FROM \"{topic}\""),
    )
    .await;
    assert_eq!(rows(&counted), vec![json!([4, 2])]);
    let nowhere = connect(&root, "kafka", "nowhere", json!({"url": "127.0.0.1:1"})).await;
    let failed = root
        .send("POST", &format!("/source/{nowhere}/test"), None)
        .await;
    assert_eq!(failed.status, 500, "{failed:?}");
}

/// Debian's Prometheus, scraping itself every second; killed on drop.
struct Prometheus {
    child: std::process::Child,
    url: String,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test]
async fn a_prometheus_metric_is_read_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let port = common::free_port();
    let config = dir.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: self\n    \
             static_configs:\n      - targets: [\"127.0.0.1:{port}\"]\n"
        ),
    )
    .unwrap();
    let child = Command::new("prometheus")
        .arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.path().join("tsdb").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("prometheus is not installed: run the tests with scripts/test, which installs it");
    let prometheus = Prometheus {
        child,
        url: format!("http://127.0.0.1:{port}"),
    };
    // Until its own `up` has two samples.
    let http = reqwest::Client::new();
    let scraped = common::eventually(30, || {
        let (http, url) = (http.clone(), prometheus.url.clone());
        async move {
            let Ok(answer) = http
                .get(format!("{url}/api/v1/query?query=count_over_time(up[1m])"))
                .send()
                .await
            else {
                return false;
            };
            let answer: Value = answer.json().await.unwrap_or_default();
            answer["data"]["result"][0]["value"][1]
                .as_str()
                .and_then(|n| n.parse::<f64>().ok())
                .is_some_and(|n| n >= 2.0)
        }
    })
    .await;
    assert!(scraped, "prometheus did not scrape itself");

    let server = Server::start(dir.path(), &[]);
    let root = Signed::new(&server, &root_user(dir.path(), "acme"));
    let bad = root
        .send(
            "POST",
            "/source/prometheus",
            Some(&json!({"name": "p", "config": {"url": prometheus.url, "lookback": "an hour"}})),
        )
        .await;
    assert_eq!(bad.status, 400, "{bad:?}");
    assert!(message(&bad).contains("config.lookback"), "{bad:?}");
    let id = connect(
        &root,
        "prometheus",
        "prom",
        json!({"url": prometheus.url, "lookback": "5m", "step": "1s"}),
    )
    .await;
    let tested = root.send("POST", &format!("/source/{id}/test"), None).await;
    assert_eq!(tested.status, 200, "{tested:?}");
    assert!(
        tested.body["datasets_available"].as_u64().unwrap() > 10,
        "{tested:?}"
    );
    let answer = sql(
        &root,
        &format!("/sql?connection_id={id}"),
        "SELECT job, max(value) AS up, count(*) >= 2 AS samples FROM up GROUP BY job",
    )
    .await;
    assert_eq!(rows(&answer), vec![json!(["self", 1.0, true])]);
    let searched = root
        .send(
            "POST",
            &format!("/source/{id}/up/dsl"),
            Some(&json!({"size": 0, "query": {"term": {"job": "self"}},
                         "aggs": {"v": {"max": {"field": "value"}}}})),
        )
        .await;
    assert_eq!(
        searched.body["aggregations"]["v"]["value"], 1.0,
        "{searched:?}"
    );
    let no_metric = sql(
        &root,
        &format!("/sql?connection_id={id}"),
        "SELECT * FROM \"no-such\"",
    )
    .await;
    assert_eq!(no_metric.status, 400, "{no_metric:?}");
}

/// The import job `id` once `done` says so of it (polled for up to three minutes: on a
/// Kafka-backed log each batch is two appends to the test broker).
async fn job_when(root: &Signed, id: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = std::time::Instant::now() + Duration::from_secs(180);
    loop {
        let listed = root.send("GET", "/import/jobs", None).await;
        assert_eq!(listed.status, 200, "{listed:?}");
        let job = listed.body["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|job| job["job_id"] == id)
            .cloned()
            .unwrap_or(Value::Null);
        if done(&job) {
            return job;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "import {id} is still {job}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Starts an import job; its id.
async fn import(root: &Signed, source_type: &str, doc: Value) -> String {
    let started = root
        .send("PUT", &format!("/import/{source_type}"), Some(&doc))
        .await;
    assert_eq!(started.status, 201, "{started:?}");
    assert_eq!(started.body["state"], "queued", "{started:?}");
    started.body["job_id"].as_str().unwrap().to_owned()
}

/// Import `job` once it has written some records and not all `total`: the server is killed
/// (kill -9) there, and the job is asserted to have been running.
async fn killed_midway(root: &Signed, server: &mut Server, job: &str, total: u64) {
    let midway = job_when(root, job, |job| {
        job["records_written"].as_u64().is_some_and(|n| n > 0) || finished(job)
    })
    .await;
    server.kill9();
    assert_eq!(midway["state"], "running", "{midway}");
    assert!(
        midway["records_written"].as_u64().unwrap() < total,
        "{midway}"
    );
}

fn finished(job: &Value) -> bool {
    matches!(
        job["state"].as_str(),
        Some("succeeded" | "failed" | "cancelled")
    )
}

/// Connection `pg` to the database of `pg`; its id.
async fn connect_readings(root: &Signed, pg: &Postgres) -> String {
    connect(
        root,
        "postgresql",
        "pg",
        json!({"host": "127.0.0.1", "port": 5432, "username": "postgres",
               "database": pg.database}),
    )
    .await
}

/// An import of table `readings` of connection `id` into the dataset `readings`; its id.
async fn import_readings(root: &Signed, id: &str) -> String {
    import(
        root,
        "postgresql",
        json!({"connection_id": id, "source": {"table": "readings"}, "dataset": "readings"}),
    )
    .await
}

/// A PostgreSQL database of its own with table `readings` of `rows` rows of several types.
fn readings(rows: u64) -> Postgres {
    let pg = Postgres::new();
    psql(
        &pg.database,
        &format!(
            "CREATE TABLE readings (id bigint PRIMARY KEY, host text, value double precision, \
             ok boolean, price numeric(10,2), taken timestamptz);
             INSERT INTO readings SELECT n, 'host-' || (n % 7), n * 0.5, n % 2 = 0, n % 1000, \
             '2026-11-01T00:00:00Z'::timestamptz + n * interval '1 second' \
             FROM generate_series(1, {rows}) AS n;"
        ),
    );
    pg
}

#[tokio::test]
async fn a_postgresql_table_and_a_query_are_imported_with_their_types() {
    let pg = readings(2500);
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &["--set", "imports.batch_rows=500"]);
    let credentials = root_user(dir.path(), "acme");
    let root = Signed::new(&server, &credentials);
    let id = connect_readings(&root, &pg).await;

    let job = import_readings(&root, &id).await;
    let done = job_when(&root, &job, finished).await;
    assert_eq!(done["state"], "succeeded", "{done}");
    assert_eq!(done["records_read"], 2500, "{done}");
    assert_eq!(done["records_written"], 2500, "{done}");
    assert!(done["bytes_read"].as_u64().unwrap() > 0, "{done}");
    assert!(done["rate"].as_f64().unwrap() > 0.0, "{done}");
    assert!(done["started_at"].is_string() && done["finished_at"].is_string());
    assert_eq!(done["error"], Value::Null);
    let counted = sql(
        &root,
        "/sql",
        "SELECT count(*), count(DISTINCT id), sum(value), min(taken) FROM readings",
    )
    .await;
    assert_eq!(
        rows(&counted),
        vec![json!([2500, 2500, 1_563_125.0, "2026-11-01T00:00:01.000Z"])]
    );
    // The columns keep their types: numbers, booleans, decimals and times, not text.
    let mapping = root.send("GET", "/readings/_mapping", None).await;
    let properties = &mapping.body["readings"]["mappings"]["properties"];
    assert_eq!(properties["id"]["type"], "long", "{mapping:?}");
    assert_eq!(properties["value"]["type"], "double", "{mapping:?}");
    assert_eq!(properties["ok"]["type"], "boolean", "{mapping:?}");
    assert_eq!(properties["taken"]["type"], "date", "{mapping:?}");

    // A query's result, replacing what the dataset held: twice gives the same records.
    for _ in 0..2 {
        let job = import(
            &root,
            "postgresql",
            json!({"connection_id": "pg", "dataset": "per_host", "mode": "replace",
                   "source": {"query": "SELECT host, count(*) AS n FROM readings GROUP BY host"}}),
        )
        .await;
        let done = job_when(&root, &job, finished).await;
        assert_eq!(done["state"], "succeeded", "{done}");
        assert_eq!(done["records_written"], 7, "{done}");
    }
    let hosts = sql(&root, "/sql", "SELECT count(*), sum(n) FROM per_host").await;
    assert_eq!(rows(&hosts), vec![json!([7, 2500])]);

    // `strata import` starts one and waits for it, its progress on stderr.
    let cli = Command::new(common::bin())
        .args(["import", "postgresql", "--url", &server.platform_url])
        .args(["--connection", "pg", "--dataset", "by_cli", "--query"])
        .arg("SELECT id, host FROM readings WHERE id <= 1200")
        .env("STRATA_ACCESS_KEY", &credentials.access_key)
        .env("STRATA_SECRET_KEY", &credentials.secret_key)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&cli.stdout);
    assert!(
        cli.status.success(),
        "{said} {}",
        String::from_utf8_lossy(&cli.stderr)
    );
    assert!(
        said.starts_with("imported 1200 records into by_cli"),
        "{said}"
    );
    let counted = sql(&root, "/sql", "SELECT count(*) FROM by_cli").await;
    assert_eq!(rows(&counted), vec![json!([1200])]);
    let refused = Command::new(common::bin())
        .args(["import", "postgresql", "--url", &server.platform_url])
        .args(["--connection", "nope", "--dataset", "x", "--table", "t"])
        .env("STRATA_ACCESS_KEY", &credentials.access_key)
        .env("STRATA_SECRET_KEY", &credentials.secret_key)
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("connection \"nope\" not found"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );

    // What an import cannot be is refused before anything runs.
    for (doc, status, needle) in [
        (
            json!({"connection_id": id, "source": {"table": "t"}}),
            400,
            "dataset",
        ),
        (
            json!({"connection_id": "nope", "source": {"table": "t"}, "dataset": "d"}),
            404,
            "nope",
        ),
        (
            json!({"connection_id": id, "source": {"topic": "t"}, "dataset": "d"}),
            400,
            "topic",
        ),
        (
            json!({"connection_id": id, "source": {"table": "t"}, "dataset": "d", "follow": true}),
            400,
            "follow",
        ),
        (
            json!({"connection_id": id, "source": {"query": "DROP TABLE readings"}, "dataset": "d"}),
            400,
            "query",
        ),
        (
            json!({"connection_id": id, "source": {"table": "t"}, "dataset": "d", "mode": "merge"}),
            400,
            "mode",
        ),
        (
            json!({"connection_id": id, "source": {"table": "t"}, "dataset": "d", "rows": 1}),
            400,
            "rows",
        ),
    ] {
        let refused = root.send("PUT", "/import/postgresql", Some(&doc)).await;
        assert_eq!(refused.status, status, "{doc}: {refused:?}");
        assert!(
            refused.body.to_string().contains(needle),
            "{doc}: {refused:?}"
        );
    }
    let wrong_type = root
        .send(
            "PUT",
            "/import/mysql",
            Some(&json!({"connection_id": id, "source": {"table": "t"}, "dataset": "d"})),
        )
        .await;
    assert_eq!(wrong_type.status, 400, "{wrong_type:?}");

    // A user who may read the table but not manage the connection may not import it.
    let reader = user_with(
        &root,
        &server,
        "reader",
        "  - ResourceType: record\n    Actions: [read, write]\n    Resources: [\"pg/*\", mine]\n",
    )
    .await;
    let refused = reader
        .send(
            "PUT",
            "/import/postgresql",
            Some(&json!({"connection_id": id, "source": {"table": "readings"}, "dataset": "mine"})),
        )
        .await;
    assert_eq!(refused.status, 403, "{refused:?}");
    let theirs = reader.send("GET", "/import/jobs", None).await;
    assert_eq!(theirs.body["jobs"], json!([]), "{theirs:?}");

    // A finished job is removed from the list.
    let removed = root
        .send("DELETE", &format!("/import/jobs/{job}"), None)
        .await;
    assert_eq!(removed.body["result"], "deleted", "{removed:?}");
    let again = root
        .send("DELETE", &format!("/import/jobs/{job}"), None)
        .await;
    assert_eq!(again.status, 404, "{again:?}");
}

#[tokio::test]
async fn an_import_killed_midway_resumes_with_no_record_twice() {
    const ROWS: u64 = 20_000;
    let pg = readings(ROWS);
    let dir = tempfile::tempdir().unwrap();
    let flags = ["--set", "imports.batch_rows=200"];
    let mut server = Server::start(dir.path(), &flags);
    let credentials = root_user(dir.path(), "acme");
    let root = Signed::new(&server, &credentials);
    let id = connect_readings(&root, &pg).await;
    let job = import_readings(&root, &id).await;
    killed_midway(&root, &mut server, &job, ROWS).await;

    let server = Server::start(dir.path(), &flags);
    let root = Signed::new(&server, &credentials);
    let done = job_when(&root, &job, finished).await;
    assert_eq!(done["state"], "succeeded", "{done}");
    assert_eq!(done["records_written"], ROWS, "{done}");
    let counted = sql(
        &root,
        "/sql",
        "SELECT count(*), count(DISTINCT id), sum(id) FROM readings",
    )
    .await;
    assert_eq!(
        rows(&counted),
        vec![json!([ROWS, ROWS, ROWS * (ROWS + 1) / 2])]
    );
}

#[tokio::test]
async fn an_import_from_a_source_that_is_gone_fails_and_writes_nothing() {
    let pg = readings(10);
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let root = Signed::new(&server, &root_user(dir.path(), "acme"));
    let id = connect_readings(&root, &pg).await;
    drop(pg);
    let job = import_readings(&root, &id).await;
    let done = job_when(&root, &job, finished).await;
    assert_eq!(done["state"], "failed", "{done}");
    assert_eq!(done["records_written"], 0, "{done}");
    assert!(
        done["error"].as_str().unwrap().contains("does not exist"),
        "{done}"
    );
    let connection = root.send("GET", &format!("/source/{id}"), None).await;
    assert_eq!(connection.body["status"], "error", "{connection:?}");
    let counted = sql(&root, "/sql", "SELECT count(*) FROM readings").await;
    assert_ne!(counted.status, 200, "{counted:?}");
}

#[tokio::test]
async fn a_kafka_topic_is_imported_and_followed_until_cancelled() {
    use rdkafka::producer::{BaseRecord, Producer};
    let (brokers, topic, producer) = kafka_topic("clicks").await;
    let produce = |range: std::ops::RangeInclusive<i32>| {
        for n in range {
            let value = json!({"n": n, "page": format!("/p{}", n % 3)}).to_string();
            producer
                .send(
                    BaseRecord::to(&topic)
                        .key(&format!("k{n}"))
                        .payload(&value)
                        .partition(n % 2),
                )
                .unwrap();
        }
        producer.flush(Duration::from_secs(10)).unwrap();
    };
    produce(1..=6);

    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let root = Signed::new(&server, &root_user(dir.path(), "acme"));
    let id = connect(&root, "kafka", "events", json!({"url": brokers})).await;

    // Once, to the topic's end (named as a table, it is read as a topic: by offset).
    let once = import(
        &root,
        "kafka",
        json!({"connection_id": id, "source": {"table": topic}, "dataset": "clicks"}),
    )
    .await;
    let done = job_when(&root, &once, finished).await;
    assert_eq!(done["state"], "succeeded", "{done}");
    assert_eq!(done["source"], json!({"topic": topic}), "{done}");
    assert_eq!(done["records_written"], 6, "{done}");
    let counted = sql(&root, "/sql", "SELECT count(*), sum(n) FROM clicks").await;
    assert_eq!(rows(&counted), vec![json!([6, 21])]);
    // The record's place, key and time, under names a dataset takes.
    let placed = sql(
        &root,
        "/sql",
        "SELECT \"kafka.partition\", \"kafka.key\", page FROM clicks WHERE n = 4",
    )
    .await;
    assert_eq!(rows(&placed), vec![json!([0, "k4", "/p1"])]);
    let timed = sql(
        &root,
        "/sql",
        "SELECT count(*) FROM clicks WHERE \"@timestamp\" > '2020-01-01'",
    )
    .await;
    assert_eq!(rows(&timed), vec![json!([6])]);

    // Followed: records produced later arrive, until the job is cancelled.
    let follow = import(
        &root,
        "kafka",
        json!({"connection_id": id, "source": {"topic": topic}, "dataset": "live",
               "follow": true}),
    )
    .await;
    job_when(&root, &follow, |job| job["records_written"] == 6).await;
    produce(7..=9);
    let caught_up = job_when(&root, &follow, |job| job["records_written"] == 9).await;
    assert_eq!(caught_up["state"], "running", "{caught_up}");
    let cancelled = root
        .send("DELETE", &format!("/import/jobs/{follow}"), None)
        .await;
    assert_eq!(cancelled.body["result"], "cancelled", "{cancelled:?}");
    let stopped = job_when(&root, &follow, finished).await;
    assert_eq!(stopped["state"], "cancelled", "{stopped}");
    produce(10..=10);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let live = sql(&root, "/sql", "SELECT count(*), max(n) FROM live").await;
    assert_eq!(rows(&live), vec![json!([9, 9])]);
}
