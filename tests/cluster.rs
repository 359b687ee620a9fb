//! Two strata nodes on one Kafka log (the broker scripts/test starts on loopback): each database
//! is served by its owner and requests to the other node are forwarded; when the owner is killed
//! with SIGKILL under concurrent appends and bulk requests, the other node takes its databases
//! over, and every acknowledged row and record is there afterwards, once; when it comes back,
//! its databases move back to it.
//!
//! Runs on Kafka whatever STRATA_TEST_LOG says, and fails, never skips, without a broker.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use common::{
    Client, account_with_key,
    cluster::{account_served_by, members, node, see_each_other, sees, two_nodes},
    eventually,
};
use serde_json::{Value, json};

fn events_table() -> Value {
    json!({
        "name": "events",
        "schema": [
            {"name": "id", "type": "int64", "nullable": false},
            {"name": "writer", "type": "utf8"}
        ],
        "exact_columns": ["id"]
    })
}

/// Every `id` of the events table of `database`, and how many rows and distinct row ids there
/// are, read through `client`.
async fn read_back(client: &Client, database: &str) -> (BTreeSet<u64>, u64, u64) {
    let answer = client
        .post_json(
            &format!("/v1/query_sql/{database}"),
            &json!({"sql": "SELECT id FROM events"}),
        )
        .await;
    assert_eq!(answer.status, 200, "{answer:?}");
    let ids = answer.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row["id"].as_u64().unwrap())
        .collect();
    let counts = client
        .post_json(
            &format!("/v1/query_sql/{database}"),
            &json!({"sql": "SELECT COUNT(*) AS n, COUNT(DISTINCT _row_id) AS d FROM events"}),
        )
        .await;
    assert_eq!(counts.status, 200, "{counts:?}");
    let row = &counts.body["data"][0];
    (ids, row["n"].as_u64().unwrap(), row["d"].as_u64().unwrap())
}

/// One writer: appends one row at a time to `database`, alternating between the nodes, until
/// told to stop; returns the ids acknowledged, and when it was first acknowledged after `since`
/// was set.
async fn writer(
    clients: Vec<Client>,
    database: String,
    first_id: u64,
    stop: Arc<AtomicBool>,
    since: Arc<AtomicU64>,
    started: Instant,
) -> (BTreeSet<u64>, Option<Duration>) {
    let mut acknowledged = BTreeSet::new();
    let mut first_after = None;
    let mut id = first_id;
    let mut turn = 0usize;
    while !stop.load(Ordering::Acquire) {
        let client = &clients[turn % clients.len()];
        turn += 1;
        id += 1;
        let body = json!({"data": [{"id": id, "writer": database}]}).to_string();
        let answer = client
            .try_send_json(
                reqwest::Method::POST,
                &format!("/v1/append/{database}?table=events"),
                &body,
            )
            .await;
        match answer {
            Some(answer) if answer.status == 200 => {
                acknowledged.insert(id);
                let killed_at = since.load(Ordering::Acquire);
                if killed_at > 0 && first_after.is_none() {
                    let now = started.elapsed().as_millis() as u64;
                    first_after = Some(Duration::from_millis(now.saturating_sub(killed_at)));
                }
            }
            // Refused or unanswered while the cluster changes: not acknowledged, try again.
            _ => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
    (acknowledged, first_after)
}

/// One bulk writer: five records a request, each with its own `n` and no `_id` (so a request
/// applied twice would show as two records of one `n`), alternating between the nodes, until
/// told to stop; returns the `n`s whose items were acknowledged, and how many of them were
/// acknowledged once `killed` was set.
async fn bulk_writer(
    clients: Vec<common::Signed>,
    stop: Arc<AtomicBool>,
    killed: Arc<AtomicU64>,
) -> (BTreeSet<u64>, usize) {
    let mut acknowledged = BTreeSet::new();
    let mut after_kill = 0;
    let mut next = 0u64;
    let mut turn = 0usize;
    while !stop.load(Ordering::Acquire) {
        let client = &clients[turn % clients.len()];
        turn += 1;
        let ns: Vec<u64> = (next..next + 5).collect();
        next += 5;
        let lines: Vec<Value> = ns
            .iter()
            .flat_map(|n| [json!({"index": {}}), json!({"n": n})])
            .collect();
        match client.try_send_ndjson("/records/_bulk", &lines).await {
            Some(answer) if answer.status == 200 => {
                for (n, item) in ns.iter().zip(answer.body["items"].as_array().unwrap()) {
                    if item["index"]["status"] == 201 {
                        acknowledged.insert(*n);
                        after_kill += usize::from(killed.load(Ordering::Acquire) > 0);
                    }
                }
            }
            _ => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
    (acknowledged, after_kill)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_killed_owners_databases_move_to_the_other_node_with_every_acknowledged_row() {
    let root = tempfile::tempdir().unwrap();
    let (log_env, [dir_a, _], mut a, b) = two_nodes(root.path()).await;

    // A key created through a's admin socket works through b at once.
    let key = account_with_key(&dir_a, "acme", None);
    let (via_a, via_b) = (a.client(&key), b.client(&key));

    // Databases created through b; each served by its owner, whichever node is asked.
    let mut owners: BTreeMap<String, String> = BTreeMap::new();
    for i in 0..6 {
        let name = format!("db{i}");
        let created = via_b.create_database(&name).await;
        assert_eq!(created.status, 201, "{created:?}");
        let table = via_b.create_table(&name, &events_table()).await;
        assert_eq!(table.status, 200, "{table:?}");
        let owner = table.node.clone().unwrap();
        for client in [&via_a, &via_b] {
            let listed = client.list_tables(&name).await;
            assert_eq!(listed.status, 200, "{listed:?}");
            assert_eq!(listed.node.as_deref(), Some(owner.as_str()), "{name}");
        }
        owners.insert(name, owner);
    }
    let owned_by_a: Vec<String> = owners
        .iter()
        .filter(|(_, owner)| *owner == "a")
        .map(|(name, _)| name.clone())
        .collect();
    assert!(
        !owned_by_a.is_empty() && owned_by_a.len() < owners.len(),
        "both nodes should own some of six databases: {owners:?}"
    );

    // The platform API too: dataset requests through either node are served by the owner of
    // the account's `default` database, the signature checked again there.
    let root = common::root_user(&dir_a, "acme");
    let (platform_a, platform_b) = (
        common::Signed::new(&a, &root),
        common::Signed::new(&b, &root),
    );
    let created = platform_b.send("PUT", "/events", None).await;
    assert_eq!(created.status, 200, "{created:?}");
    let default_owner = created.node.clone().unwrap();
    for client in [&platform_a, &platform_b] {
        let listed = client.send("GET", "/metadata", None).await;
        assert_eq!(listed.status, 200, "{listed:?}");
        assert_eq!(listed.body[0]["index"], "events");
        assert_eq!(listed.node.as_deref(), Some(default_owner.as_str()));
    }

    // Governance holds on every node from the moment it is acknowledged: a user created through
    // one node rotates its keys through the other; both refuse the old pair at once.
    let user = json!({"Version": "2025-01-01", "Password": "correct-horse-battery", "Roles": []});
    let created = platform_b.send("PUT", "/user/ann", Some(&user)).await;
    assert_eq!(created.status, 200, "{created:?}");
    // Answers are YAML unless the request is JSON (the key rotation sends no body).
    let keys = |answer: &common::Answer| {
        let body: Value = match &answer.body {
            Value::String(yaml) => serde_norway::from_str(yaml).unwrap(),
            json => json.clone(),
        };
        common::Credentials {
            access_key: body["access_key"].as_str().unwrap().to_owned(),
            secret_key: body["secret_key"].as_str().unwrap().to_owned(),
        }
    };
    let old = keys(&created);
    let rotated = common::Signed::new(&a, &old)
        .send("PATCH", "/user/ann/keys", None)
        .await;
    assert_eq!(rotated.status, 200, "{rotated:?}");
    let new = keys(&rotated);
    for server in [&a, &b] {
        let refused = common::Signed::new(server, &old)
            .send("GET", "/user/ann", None)
            .await;
        assert_eq!(refused.status, 401, "{refused:?}");
        let served = common::Signed::new(server, &new)
            .send("GET", "/user/ann", None)
            .await;
        assert_eq!(served.status, 200, "{served:?}");
    }

    // Bulk records of an account whose datasets a serves.
    let (_, tenant) = account_served_by(&dir_a, &a, "a").await;
    let tenant_clients = vec![
        common::Signed::new(&a, &tenant),
        common::Signed::new(&b, &tenant),
    ];

    // Writers on every database through both nodes; a is killed while they write.
    let stop = Arc::new(AtomicBool::new(false));
    let killed_at = Arc::new(AtomicU64::new(0));
    let bulk = tokio::spawn(bulk_writer(
        tenant_clients.clone(),
        stop.clone(),
        killed_at.clone(),
    ));
    let started = Instant::now();
    let writers: Vec<_> = owners
        .keys()
        .enumerate()
        .map(|(i, name)| {
            tokio::spawn(writer(
                vec![via_a.clone(), via_b.clone()],
                name.clone(),
                (i as u64) * 1_000_000,
                stop.clone(),
                killed_at.clone(),
                started,
            ))
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    a.kill9();
    killed_at.store(
        started.elapsed().as_millis().max(1) as u64,
        Ordering::Release,
    );
    assert!(
        eventually(20, || async { sees(&b, &["b"]).await }).await,
        "b still counts a: {:?}",
        members(&b).await
    );
    // Write on for a while after the takeover.
    tokio::time::sleep(Duration::from_millis(2_000)).await;
    stop.store(true, Ordering::Release);
    let mut acknowledged: BTreeMap<String, BTreeSet<u64>> = BTreeMap::new();
    for (name, handle) in owners.keys().zip(writers) {
        let (ids, first_after) = handle.await.unwrap();
        assert!(!ids.is_empty(), "no append to {name} was acknowledged");
        let first_after = first_after
            .unwrap_or_else(|| panic!("no append to {name} was acknowledged after the kill"));
        assert!(
            first_after < Duration::from_secs(15),
            "{name} took {first_after:?} to accept writes again after the kill"
        );
        eprintln!(
            "{name} (owned by {}): {} appends acknowledged; first after the kill {first_after:?} after it",
            owners[name],
            ids.len()
        );
        acknowledged.insert(name.clone(), ids);
    }

    // Every acknowledged row is on b, each with its own row id, whoever owned it before.
    for (name, ids) in &acknowledged {
        let (read, rows, distinct) = read_back(&via_b, name).await;
        let missing: Vec<_> = ids.difference(&read).collect();
        assert!(
            missing.is_empty(),
            "{name}: {} acknowledged rows missing, e.g. {:?}",
            missing.len(),
            &missing[..missing.len().min(5)]
        );
        assert_eq!(rows, distinct, "{name}: two rows share a row id");
    }
    // Every acknowledged bulk record is on b, once; none of them is there twice.
    let (bulked, after_kill) = bulk.await.unwrap();
    assert!(
        after_kill > 0,
        "no bulk record was acknowledged after the kill ({} before)",
        bulked.len()
    );
    let counted = tenant_clients[1]
        .send_json(
            "POST",
            "/sql",
            Some(&json!({"query": "SELECT n, COUNT(*) AS c FROM records GROUP BY n"})),
        )
        .await;
    assert_eq!(counted.status, 200, "{counted:?}");
    let mut stored = BTreeSet::new();
    for row in counted.body["rows"].as_array().unwrap() {
        let (n, c) = (row[0].as_u64().unwrap(), row[1].as_u64().unwrap());
        assert_eq!(c, 1, "bulk record n={n} is there {c} times");
        stored.insert(n);
    }
    let missing: Vec<_> = bulked.difference(&stored).collect();
    assert!(
        missing.is_empty(),
        "{} acknowledged bulk records missing, e.g. {:?}",
        missing.len(),
        &missing[..missing.len().min(5)]
    );
    eprintln!(
        "bulk: {} records acknowledged ({after_kill} after the kill), {} stored",
        bulked.len(),
        stored.len()
    );

    // The control partition moved too: b creates databases now.
    let created = via_b.create_database("after").await;
    assert_eq!(created.status, 201, "{created:?}");
    assert_eq!(created.node.as_deref(), Some("b"));

    // a comes back: its databases move back to it, with the rows b took meanwhile.
    let a = node(&dir_a, "a", &log_env);
    see_each_other(&a, &b).await;
    let via_a = a.client(&key);
    for name in &owned_by_a {
        let ids = &acknowledged[name];
        let (read, rows, distinct) = read_back(&via_b, name).await;
        assert!(ids.is_subset(&read), "{name} lost rows when a came back");
        assert_eq!(rows, distinct);
        let appended = via_b
            .post_json(
                &format!("/v1/append/{name}?table=events"),
                &json!({"data": [{"id": 42, "writer": "after"}]}),
            )
            .await;
        assert_eq!(appended.status, 200, "{appended:?}");
        assert_eq!(appended.node.as_deref(), Some("a"), "{name}");
        let (read, _, _) = read_back(&via_a, name).await;
        assert!(read.contains(&42) && ids.is_subset(&read));
    }
}

/// A webhook receiver on loopback that counts what it is sent; its URL.
async fn webhook_receiver(count: Arc<AtomicU64>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move || {
            let count = count.clone();
            async move {
                count.fetch_add(1, Ordering::SeqCst);
                "ok"
            }
        }),
    );
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

/// The planned times of a monitor's recorded runs.
async fn planned_times(client: &common::Signed, id: &str) -> Vec<String> {
    let answer = client
        .send("GET", &format!("/monitor/{id}/runs"), None)
        .await;
    let body: Value = match &answer.body {
        Value::String(yaml) => serde_norway::from_str(yaml).unwrap(),
        other => other.clone(),
    };
    body["runs"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| r["planned_time"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test]
async fn monitors_run_once_on_the_node_that_serves_the_account_and_move_with_it() {
    let root = tempfile::tempdir().unwrap();
    let (_, [dir_a, _], a, b) = two_nodes(root.path()).await;
    let credentials = common::root_user(&dir_a, "acme");
    let (platform_a, platform_b) = (
        common::Signed::new(&a, &credentials),
        common::Signed::new(&b, &credentials),
    );
    let lines = [
        json!({"index": {"_index": "logs", "_id": "1"}}),
        json!({"level": "error"}),
    ];
    let written = platform_b.send_ndjson("POST", "/_bulk", &lines).await;
    assert_eq!(written.body["errors"], false, "{written:?}");
    let owner = written.node.clone().unwrap();
    let delivered = Arc::new(AtomicU64::new(0));
    let url = webhook_receiver(delivered.clone()).await;
    let channel = json!({"channel_id": "hook", "config": {"name": "hook", "channel_type": "webhook", "webhook": {"url": url}}});
    assert_eq!(
        platform_a
            .send("POST", "/alert", Some(&channel))
            .await
            .status,
        200
    );
    let monitor = json!({
        "_id": "every-second",
        "name": "errors",
        "schedule": {"cron": {"expression": "* * * * * *"}},
        "query": {"type": "querydsl", "datasets": ["logs"], "body": {"query": {"match_all": {}}}},
        "triggers": [{"name": "any", "condition": {"type": "count_greater_than", "threshold": 0},
            "actions": [{"id": "a", "name": "notify", "destination_id": "hook",
                "subject_template": {"source": "{{monitor.name}}"}, "message_template": {"source": "x"}}]}],
    });
    let created = platform_b.send("POST", "/monitor", Some(&monitor)).await;
    assert_eq!(created.status, 200, "{created:?}");
    assert!(eventually(30, || async { delivered.load(Ordering::SeqCst) >= 4 }).await);
    // Each planned time ran once: only the account's node runs its monitors.
    let planned = planned_times(&platform_a, "every-second").await;
    let unique: BTreeSet<&String> = planned.iter().collect();
    assert_eq!(unique.len(), planned.len(), "{planned:?}");

    // The account's node is killed: the other takes its monitors over and runs them on.
    let (mut gone, survivor, survivor_name) = match owner.as_str() {
        "a" => (a, platform_b, "b"),
        _ => (b, platform_a, "a"),
    };
    gone.kill9();
    let before = planned.len();
    let moved = eventually(60, || async {
        planned_times(&survivor, "every-second").await.len() >= before + 3
    })
    .await;
    assert!(
        moved,
        "the monitor did not run on {survivor_name} after the owner stopped"
    );
    let planned = planned_times(&survivor, "every-second").await;
    let unique: BTreeSet<&String> = planned.iter().collect();
    assert_eq!(unique.len(), planned.len(), "{planned:?}");
}
