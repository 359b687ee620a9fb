//! Governance over HTTP: users and roles in YAML and JSON, their refusals, key rotation, deny by
//! default over every route of the platform API, and what a user whose role limits records and
//! fields sees on each read path. Signed with strata's own signer; tests/clients.rs repeats the
//! governance steps with botocore's.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{Answer, Credentials, Server, Signed, root_user, user, yaml};
use serde_json::{Value, json};

/// A request without a body, asking for JSON.
async fn get(client: &Signed, method: &str, path: &str) -> Answer {
    let extra = [("accept", "application/json")];
    let headers = client.sign(method, path, &extra, &[], chrono::Utc::now());
    client.send_raw(method, path, &headers, Vec::new()).await
}

fn credentials(answer: &Answer) -> Credentials {
    assert_eq!(answer.status, 200, "{answer:?}");
    Credentials {
        access_key: answer.body["access_key"].as_str().unwrap().to_owned(),
        secret_key: answer.body["secret_key"].as_str().unwrap().to_owned(),
    }
}

fn message(answer: &Answer) -> &str {
    answer.body["message"].as_str().unwrap_or_default()
}

/// Asserts a 400 whose message names `field`.
fn refused(answer: &Answer, field: &str) {
    assert_eq!(answer.status, 400, "{answer:?}");
    assert!(
        message(answer).contains(field),
        "{:?} should name {field:?}",
        message(answer)
    );
}

const READERS: &str = r#"
Version: 2025-01-01
Permissions:
  - ResourceType: record
    Actions: [read]
    Resources: ["logs-*"]
    Fields:
      Deny: ["secret_*"]
      Mask:
        email: redact
    Filter:
      term:
        team: a
  - ResourceType: metadata
    Actions: [read]
    Resources: ["logs-*"]
Notifications:
  Monitor:
    - Actions: [read, execute]
      Resources: ["team-a-*"]
"#;

#[tokio::test]
async fn users_and_roles_round_trip_in_yaml_and_json() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let root = Signed::new(&server, &root_user(dir.path(), "acme"));

    let created = yaml(&root, "PUT", "/role/readers", READERS).await;
    assert_eq!(created.status, 200, "{created:?}");
    assert_eq!(created.body["status"], "OK");
    assert!(message(&created).contains("created"), "{created:?}");

    let read = get(&root, "GET", "/role/readers").await;
    assert_eq!(
        read.body,
        json!({"readers": {
            "Version": "2025-01-01",
            "Permissions": [
                {
                    "ResourceType": "record",
                    "Actions": ["read"],
                    "Resources": ["logs-*"],
                    "Fields": {"Deny": ["secret_*"], "Mask": {"email": "redact"}},
                    "Filter": {"term": {"team": "a"}},
                },
                {"ResourceType": "metadata", "Actions": ["read"], "Resources": ["logs-*"]},
            ],
            "Notifications": {"Monitor": [{"Actions": ["read", "execute"], "Resources": ["team-a-*"]}]},
        }}),
        "{read:?}"
    );
    // YAML by default, the same document.
    let headers = root.sign("GET", "/role/readers", &[], &[], chrono::Utc::now());
    let as_yaml = root
        .send_raw("GET", "/role/readers", &headers, Vec::new())
        .await;
    assert_eq!(
        as_yaml.headers.get("content-type").unwrap(),
        "application/yaml"
    );
    let text = as_yaml.body.as_str().unwrap();
    let parsed: Value = serde_norway::from_str(text).unwrap();
    assert_eq!(parsed, read.body);

    // PATCH replaces the blocks it gives and keeps the others.
    let patched = yaml(
        &root,
        "PATCH",
        "/role/readers",
        "Notifications:\n  Channel:\n    - Actions: [read]\n      Resources: ['*']\n",
    )
    .await;
    assert_eq!(patched.status, 200, "{patched:?}");
    let read = get(&root, "GET", "/role/readers").await;
    assert_eq!(
        read.body["readers"]["Notifications"],
        json!({"Channel": [{"Actions": ["read"], "Resources": ["*"]}]})
    );
    assert_eq!(
        read.body["readers"]["Permissions"][0]["Resources"],
        json!(["logs-*"])
    );

    // JSON in, too.
    let body = json!({"Version": "2025-01-01", "Permissions": [
        {"ResourceType": "record", "Actions": ["write"], "Resources": ["logs-*"]}
    ]});
    let writers = root.send("PUT", "/role/writers", Some(&body)).await;
    assert_eq!(writers.status, 200, "{writers:?}");
    let roles = get(&root, "GET", "/roles").await;
    let names: Vec<&str> = roles
        .body
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["role"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["readers", "writers"]);
    assert_eq!(roles.body[1]["Version"], "2025-01-01");

    // A user: its first key pair once, never its password.
    let ann = yaml(
        &root,
        "PUT",
        "/user/ann",
        "Version: 2025-01-01\nPassword: correct-horse-battery\nRoles: [readers]\n",
    )
    .await;
    let keys = credentials(&ann);
    assert!(keys.access_key.starts_with("AKST") && keys.secret_key.len() == 40);
    let again = yaml(
        &root,
        "PUT",
        "/user/ann",
        "Version: 2025-01-01\nRoles: [readers, writers]\n",
    )
    .await;
    assert_eq!(again.status, 200, "{again:?}");
    assert!(again.body.get("secret_key").is_none(), "{again:?}");
    let shown = get(&root, "GET", "/user/ann").await;
    assert_eq!(
        shown.body,
        json!({"ann": {"Version": "2025-01-01", "Roles": ["readers", "writers"], "account_id": "acme"}})
    );
    let patched = yaml(&root, "PATCH", "/user/ann", "Roles: [readers]\n").await;
    assert_eq!(patched.status, 200, "{patched:?}");
    let users = get(&root, "GET", "/users").await;
    assert_eq!(
        users.body,
        json!([
            {"username": "ann", "Version": "2025-01-01", "Roles": ["readers"], "account_id": "acme"},
            {"username": "root", "Version": "2025-01-01", "Roles": [], "account_id": "acme"},
        ])
    );
    assert!(!users.body.to_string().contains("Password"));

    // Refusals name the field, and write nothing.
    let cases = [
        ("/role/x", "Permissions: []\n", "Version"),
        ("/role/x", "Version: 2024-01-01\n", "Version"),
        (
            "/role/x",
            "Version: 2025-01-01\nPermissions:\n  - {ResourceType: table, Actions: [read], Resources: ['*']}\n",
            "Permissions[0].ResourceType",
        ),
        (
            "/role/x",
            "Version: 2025-01-01\nPermissions:\n  - {ResourceType: record, Actions: [read, fly], Resources: ['*']}\n",
            "Permissions[0].Actions[1]",
        ),
        (
            "/role/x",
            "Version: 2025-01-01\nPermissions:\n  - {ResourceType: record, Actions: [read], Resources: ['logs-?']}\n",
            "Permissions[0].Resources[0]",
        ),
        (
            "/role/x",
            "Version: 2025-01-01\nPermissions:\n  - {ResourceType: record, Actions: [read], Resources: ['*'], Fields: {Mask: {email: blur}}}\n",
            "Permissions[0].Fields.Mask.email",
        ),
        (
            "/role/x",
            "Version: 2025-01-01\nPermissions:\n  - {ResourceType: record, Actions: [read], Resources: ['*'], Filter: {nope: {}}}\n",
            "Permissions[0].Filter",
        ),
        (
            "/role/x",
            "Version: 2025-01-01\nPermissions:\n  - {ResourceType: metadata, Actions: [read], Resources: ['*'], Filter: {match_all: {}}}\n",
            "Permissions[0].Filter",
        ),
        (
            "/role/x",
            "Version: 2025-01-01\nNotifications:\n  Config:\n    - {Actions: [read], Resources: ['*']}\n",
            "Notifications.Config[0].Actions[0]",
        ),
        (
            "/role/x",
            "Version: 2025-01-01\nPermision: []\n",
            "Permision",
        ),
        ("/role/x", "Version: [2025\n", "malformed YAML"),
        ("/user/bob", "Version: 2025-01-01\nRoles: []\n", "Password"),
        (
            "/user/bob",
            "Version: 2025-01-01\nPassword: short\nRoles: []\n",
            "Password",
        ),
        ("/user/bob", "Password: correct-horse-battery\n", "Version"),
    ];
    for (path, body, field) in cases {
        refused(&yaml(&root, "PUT", path, body).await, field);
    }
    assert_eq!(
        get(&root, "GET", "/roles")
            .await
            .body
            .as_array()
            .unwrap()
            .len(),
        2
    );
    assert_eq!(
        get(&root, "GET", "/users")
            .await
            .body
            .as_array()
            .unwrap()
            .len(),
        2
    );
    for path in ["/role/nope", "/user/nope"] {
        assert_eq!(get(&root, "GET", path).await.status, 404, "{path}");
        assert_eq!(get(&root, "DELETE", path).await.status, 404, "{path}");
    }

    // Only the root user governs; a user reads itself.
    let ann = Signed::new(&server, &keys);
    assert_eq!(get(&ann, "GET", "/user/ann").await.status, 200);
    for (method, path) in [
        ("GET", "/user/root"),
        ("GET", "/users"),
        ("GET", "/roles"),
        ("GET", "/role/readers"),
        ("DELETE", "/role/readers"),
        ("DELETE", "/user/ann"),
    ] {
        let answer = get(&ann, method, path).await;
        assert_eq!(answer.status, 403, "{method} {path}: {answer:?}");
    }
    let grab = yaml(
        &ann,
        "PUT",
        "/role/readers",
        "Version: 2025-01-01\nPermissions: []\n",
    )
    .await;
    assert_eq!(grab.status, 403, "{grab:?}");
    assert_eq!(
        get(&root, "DELETE", "/user/root").await.status,
        400,
        "the root user stays"
    );
}

#[tokio::test]
async fn keys_rotate_only_by_their_user_and_the_old_pair_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let root = Signed::new(&server, &root_user(dir.path(), "acme"));
    let ann = user(&root, &server, "ann", &[]).await;
    assert_eq!(get(&ann, "GET", "/user/ann").await.status, 200);

    let by_root = get(&root, "PATCH", "/user/ann/keys").await;
    assert_eq!(by_root.status, 403, "{by_root:?}");
    let rotated = get(&ann, "PATCH", "/user/ann/keys").await;
    assert_eq!(rotated.body["status"], "OK");
    let fresh = Signed::new(&server, &credentials(&rotated));
    assert_ne!(
        fresh.credentials.access_key, ann.credentials.access_key,
        "a new access key"
    );
    assert_eq!(get(&ann, "GET", "/user/ann").await.status, 401);
    assert_eq!(get(&fresh, "GET", "/user/ann").await.status, 200);

    // The root user rotates its own.
    let rotated = get(&root, "PATCH", "/user/root/keys").await;
    let new_root = Signed::new(&server, &credentials(&rotated));
    assert_eq!(get(&root, "GET", "/users").await.status, 401);
    assert_eq!(get(&new_root, "GET", "/users").await.status, 200);

    // A deleted user's keys are refused at once.
    assert_eq!(get(&new_root, "DELETE", "/user/ann").await.status, 200);
    assert_eq!(get(&fresh, "GET", "/user/ann").await.status, 401);

    // The audit says who changed what, and when.
    let audit = common::replay(dir.path(), &["audit"]);
    let text = String::from_utf8_lossy(&audit.stdout);
    assert!(audit.status.success(), "{text}");
    for needle in [
        "user ann rotated its keys",
        "user root rotated its keys",
        "user ann deleted",
    ] {
        assert!(text.contains(needle), "{needle:?} missing from\n{text}");
    }
}

#[tokio::test]
async fn a_user_without_grants_is_refused_on_every_route() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let root = Signed::new(&server, &root_user(dir.path(), "acme"));
    let lines = [
        json!({"index": {"_index": "logs", "_id": "1"}}),
        json!({"n": 1}),
    ];
    let written = root.send_ndjson("POST", "/_bulk", &lines).await;
    assert_eq!(written.body["errors"], false, "{written:?}");
    let nobody = user(&root, &server, "nobody", &[]).await;

    let mut walked = 0;
    for (route, methods) in strata::http::PLATFORM_ROUTES {
        // Unsigned (health, the console's page, files and sign-in), or about the console
        // session itself.
        if *route == "/health" || route.starts_with("/console") {
            continue;
        }
        let path = route
            .replace("{name}", "logs")
            .replace("{index}", "logs")
            .replace("{pattern}", "logs")
            .replace("{id}", "1");
        for method in *methods {
            let method = method.to_ascii_uppercase();
            let body = json!({"query": {"match_all": {}}});
            let answer = nobody.send(&method, &path, Some(&body)).await;
            assert!(
                answer.status == 401 || answer.status == 403,
                "{method} {route} answered a user without grants {}: {:?}",
                answer.status,
                answer.body
            );
            walked += 1;
        }
    }
    assert!(walked > 90, "{walked} routes and methods walked");
}

/// A dataset of two teams' records, with a secret and an e-mail address in each.
async fn two_teams(root: &Signed) {
    let lines = [
        json!({"index": {"_index": "logs-app", "_id": "1"}}),
        json!({"team": "a", "msg": "disk full", "email": "ann@example.com", "secret_token": "s3cr3t-a", "n": 1}),
        json!({"index": {"_index": "logs-app", "_id": "2"}}),
        json!({"team": "b", "msg": "disk ok", "email": "bob@example.com", "secret_token": "s3cr3t-b", "n": 2}),
        json!({"index": {"_index": "other", "_id": "1"}}),
        json!({"team": "a", "msg": "elsewhere"}),
    ];
    let written = root.send_ndjson("POST", "/_bulk", &lines).await;
    assert_eq!(written.body["errors"], false, "{written:?}");
}

#[tokio::test]
async fn a_role_shows_only_its_records_and_fields_on_every_read_path() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let root = Signed::new(&server, &root_user(dir.path(), "acme"));
    two_teams(&root).await;
    let metrics = "  - ResourceType: record\n    Actions: [read]\n    Resources: [metrics-a]\n    Fields: {Deny: [secret]}\nNotifications:";
    let role = READERS.replacen("Notifications:", metrics, 1);
    assert_eq!(yaml(&root, "PUT", "/role/readers", &role).await.status, 200);
    let ann = user(&root, &server, "ann", &["readers"]).await;

    // Query DSL: team a's record only, without its secret, its e-mail starred.
    let search = ann
        .send(
            "POST",
            "/logs-app/_search",
            Some(&json!({"query": {"match_all": {}}})),
        )
        .await;
    assert_eq!(search.status, 200, "{search:?}");
    assert_eq!(search.body["hits"]["total"]["value"], 1, "{search:?}");
    let source = &search.body["hits"]["hits"][0]["_source"];
    assert_eq!(source["team"], "a");
    assert!(source.get("secret_token").is_none(), "{source}");
    assert_eq!(source["email"], "***************");
    let count = ann.send("GET", "/logs-app/_count", None).await;
    assert_eq!(count.body["count"], 1, "{count:?}");
    // Neither a hidden nor a masked field is found by its real value.
    for query in [
        json!({"term": {"secret_token": "s3cr3t-a"}}),
        json!({"match": {"email": "ann@example.com"}}),
        json!({"query_string": {"query": "s3cr3t-a"}}),
        json!({"term": {"team": "b"}}),
    ] {
        let found = ann
            .send("POST", "/logs-app/_search", Some(&json!({"query": query})))
            .await;
        assert_eq!(
            found.body["hits"]["total"]["value"], 0,
            "{query}: {found:?}"
        );
    }
    let aggs = ann
        .send(
            "POST",
            "/logs-app/_search",
            Some(&json!({"size": 0, "aggs": {"teams": {"terms": {"field": "team"}}}})),
        )
        .await;
    assert_eq!(
        aggs.body["aggregations"]["teams"]["buckets"],
        json!([{"key": "a", "doc_count": 1}]),
        "{aggs:?}"
    );
    // A wildcard reaches only what the role reads; a name it does not read is a 403, in an
    // msearch that entry's error.
    let everything = ann
        .send(
            "POST",
            "/_search",
            Some(&json!({"query": {"match_all": {}}})),
        )
        .await;
    assert_eq!(
        everything.body["hits"]["total"]["value"], 1,
        "{everything:?}"
    );
    assert_eq!(ann.send("GET", "/other/_search", None).await.status, 403);
    let lines = [
        json!({"index": "logs-app"}),
        json!({"query": {"match_all": {}}}),
        json!({"index": "other"}),
        json!({"query": {"match_all": {}}}),
    ];
    let msearch = ann.send_ndjson("POST", "/_msearch", &lines).await;
    assert_eq!(msearch.body["responses"][0]["hits"]["total"]["value"], 1);
    assert_eq!(msearch.body["responses"][1]["status"], 403, "{msearch:?}");

    // SQL: the hidden column does not exist, the masked one shows masked.
    let sql = |query: &str| json!({"query": query});
    let rows = ann
        .send(
            "POST",
            "/sql",
            Some(&sql("SELECT * FROM \"logs-app\" ORDER BY n")),
        )
        .await;
    assert_eq!(rows.status, 200, "{rows:?}");
    assert_eq!(rows.body["size"], 1, "{rows:?}");
    let columns: Vec<&str> = rows.body["columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert!(!columns.contains(&"secret_token"), "{columns:?}");
    let email = columns.iter().position(|c| *c == "email").unwrap();
    assert_eq!(rows.body["rows"][0][email], "***************");
    let hidden = ann
        .send(
            "POST",
            "/sql",
            Some(&sql("SELECT secret_token FROM \"logs-app\"")),
        )
        .await;
    assert_eq!(hidden.status, 400, "{hidden:?}");
    let other = ann
        .send("POST", "/sql", Some(&sql("SELECT * FROM other")))
        .await;
    assert_eq!(other.status, 403, "{other:?}");
    assert!(message(&other).contains("other"), "{other:?}");

    // Metadata: only what the role reads, without the hidden field.
    let mapping = ann.send("GET", "/logs-app/_mapping", None).await;
    assert_eq!(mapping.status, 200, "{mapping:?}");
    let properties = &mapping.body["logs-app"]["mappings"]["properties"];
    assert!(properties.get("secret_token").is_none(), "{properties}");
    assert!(properties.get("team").is_some(), "{properties}");
    let listed = ann.send("GET", "/metadata", None).await;
    assert_eq!(listed.status, 200, "{listed:?}");
    assert!(!listed.body.to_string().contains("\"other\""), "{listed:?}");

    // Writes need a write grant.
    let write = ann
        .send("POST", "/logs-app/_doc", Some(&json!({"team": "a"})))
        .await;
    assert_eq!(write.status, 403, "{write:?}");

    // PromQL over every metrics dataset reads the readable ones, without the denied label.
    for (dataset, job) in [("metrics-a", "a"), ("metrics-b", "b")] {
        let text = format!("up{{job=\"{job}\",secret=\"x\"}} 1\n");
        let sent = root
            .send_text(
                "POST",
                &format!("/{dataset}/metrics"),
                "text/plain; version=0.0.4",
                &text,
            )
            .await;
        assert!(sent.status < 300, "{sent:?}");
    }
    let up = ann.send("GET", "/api/v1/query?query=up", None).await;
    assert_eq!(up.status, 200, "{up:?}");
    let result = up.body["data"]["result"].as_array().unwrap();
    assert_eq!(result.len(), 1, "{up:?}");
    assert_eq!(result[0]["metric"]["job"], "a");
    assert!(result[0]["metric"].get("secret").is_none(), "{up:?}");
    let labels = ann.send("GET", "/api/v1/labels", None).await;
    assert!(
        !labels.body["data"].to_string().contains("secret"),
        "{labels:?}"
    );

    // Deleting the role takes its grants away at once.
    assert_eq!(get(&root, "DELETE", "/role/readers").await.status, 200);
    assert_eq!(ann.send("GET", "/logs-app/_search", None).await.status, 403);
}

/// What a reader with a record filter counts, by the Query DSL and by SQL, and the ids its
/// search finds.
async fn seen_by(reader: &Signed) -> (u64, u64, Vec<String>) {
    let count = reader.send("GET", "/logs-app/_count", None).await;
    assert_eq!(count.status, 200, "{count:?}");
    let query = json!({"query": "SELECT count(*) AS n FROM \"logs-app\""});
    let rows = reader.send("POST", "/sql", Some(&query)).await;
    assert_eq!(rows.status, 200, "{rows:?}");
    let body = json!({"query": {"match": {"msg": "disk"}}, "size": 100});
    let search = reader.send("POST", "/logs-app/_search", Some(&body)).await;
    assert_eq!(search.status, 200, "{search:?}");
    let mut ids: Vec<String> = search.body["hits"]["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|hit| hit["_id"].as_str().unwrap().to_owned())
        .collect();
    ids.sort();
    (
        count.body["count"].as_u64().unwrap(),
        rows.body["rows"][0][0].as_u64().unwrap(),
        ids,
    )
}

#[tokio::test]
async fn a_record_filter_follows_records_as_they_come_change_and_go() {
    // Small segments that compact often: the filter's kept matches are per segment.
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "--set",
        "tables.flush_rows=4",
        "--set",
        "tables.compact_min_segments=3",
    ];
    let server = Server::start(dir.path(), &args);
    let root = Signed::new(&server, &root_user(dir.path(), "acme"));
    two_teams(&root).await;
    assert_eq!(
        yaml(&root, "PUT", "/role/readers", READERS).await.status,
        200
    );
    let ann = user(&root, &server, "ann", &["readers"]).await;
    assert_eq!(seen_by(&ann).await, (1, 1, vec!["1".to_owned()]));

    let mut team_a = vec!["1".to_owned()];
    for round in 0..4 {
        let mut lines = Vec::new();
        for i in 0..5 {
            let id = format!("r{round}-{i}");
            let team = if i % 2 == 0 { "a" } else { "b" };
            if team == "a" {
                team_a.push(id.clone());
            }
            lines.push(json!({"index": {"_index": "logs-app", "_id": id}}));
            lines.push(json!({"team": team, "msg": "disk busy", "n": i}));
        }
        let written = root.send_ndjson("POST", "/_bulk", &lines).await;
        assert_eq!(written.body["errors"], false, "{written:?}");
        team_a.sort();
        let n = team_a.len() as u64;
        assert_eq!(seen_by(&ann).await, (n, n, team_a.clone()), "round {round}");
    }

    // A record that moves to team b leaves the reader's view; one deleted is gone.
    let lines = [
        json!({"index": {"_index": "logs-app", "_id": "r0-0"}}),
        json!({"team": "b", "msg": "disk moved", "n": 0}),
        json!({"delete": {"_index": "logs-app", "_id": "r1-2"}}),
    ];
    let written = root.send_ndjson("POST", "/_bulk", &lines).await;
    assert_eq!(written.body["errors"], false, "{written:?}");
    team_a.retain(|id| id != "r0-0" && id != "r1-2");
    let n = team_a.len() as u64;
    assert_eq!(seen_by(&ann).await, (n, n, team_a.clone()));

    // A changed filter is a new filter: team b's records now.
    let role = READERS.replace("team: a", "team: b");
    assert_eq!(yaml(&root, "PUT", "/role/readers", &role).await.status, 200);
    let (count, sql, ids) = seen_by(&ann).await;
    assert_eq!((count, sql), (10, 10), "{ids:?}");
    assert!(ids.contains(&"r0-0".to_owned()) && !ids.contains(&"1".to_owned()));
}
