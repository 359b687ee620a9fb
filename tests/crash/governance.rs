//! Roles, users and monitors.

use super::*;

/// A writer of governance and alerting documents of one kind (`role`, `user` or `monitor`): at
/// each step n, creates `<kind>-<name>n<n>`, replaces (a monitor: patches) the one of the step
/// before and deletes the one of the step before that. Each document holds the number it is
/// found by; users' keys go to `keys`.
async fn governance(
    platform: Signed,
    kind: &'static str,
    name: String,
    books: Books,
    keys: Arc<Mutex<BTreeMap<String, Credentials>>>,
) {
    let id = |n: i64| format!("{kind}-{name}n{n}");
    let document = |n: i64, v: i64, create: bool| match (kind, create) {
        ("role", _) => json!({"Version": "2025-01-01", "Permissions": [
            {"ResourceType": "record", "Actions": ["read"], "Resources": [format!("ds-{v}")]}]}),
        ("user", true) => json!({"Version": "2025-01-01",
            "Password": "correct-horse-battery", "Roles": [format!("r{v}")]}),
        ("user", false) => json!({"Version": "2025-01-01", "Roles": [format!("r{v}")]}),
        (_, true) => json!({"_id": id(n), "name": format!("v{v}"), "enabled": false,
            "schedule": {"cron": {"expression": "0 0 * * * *", "timezone": "UTC"}},
            "query": {"type": "querydsl", "datasets": ["watched"],
                      "body": {"query": {"match_all": {}}, "size": 1}},
            "triggers": [{"name": "any", "severity": 1, "actions": [],
                          "condition": {"type": "count_greater_than", "threshold": 0}}]}),
        (_, false) => json!({ "name": format!("v{v}") }),
    };
    let path = |n: i64| format!("/{kind}/{}", id(n));
    let (create, replace) = match kind {
        "monitor" => ("POST", "PATCH"),
        _ => ("PUT", "PUT"),
    };
    for n in 0i64.. {
        let made = try_json(
            &platform,
            create,
            &if kind == "monitor" {
                "/monitor".to_owned()
            } else {
                path(n)
            },
            &document(n, n, true),
        )
        .await;
        let Some(made) = book(&books, kind, vec![(id(n), Some(n))], made, success) else {
            return;
        };
        if kind == "user" {
            let key = |name: &str| made.body[name].as_str().unwrap().to_owned();
            let credentials = Credentials {
                access_key: key("access_key"),
                secret_key: key("secret_key"),
            };
            keys.lock().unwrap().insert(id(n), credentials);
        }
        let mut changes = Vec::new();
        if n > 0 {
            let body = document(n - 1, REPLACED + n, false);
            changes.push((replace, n - 1, body, Some(REPLACED + n)));
        }
        if n > 1 {
            changes.push(("DELETE", n - 2, Value::Null, None));
        }
        for (method, of, body, value) in changes {
            let sent = try_json(&platform, method, &path(of), &body).await;
            if book(&books, kind, vec![(id(of), value)], sent, success).is_none() {
                return;
            }
        }
    }
}

/// The number in a document's text (`ds-12`, `r12`, `v12`): 12.
fn number(text: &Value) -> Value {
    let digits = text
        .as_str()
        .unwrap()
        .trim_start_matches(|c: char| !c.is_ascii_digit());
    json!(digits.parse::<i64>().unwrap())
}

/// Every role, user and monitor the writers of this test made.
async fn documents_found(root: &Signed) -> Found {
    let list = move |path: &'static str| async move {
        let answer = root.send_json("GET", path, None).await;
        assert_eq!(answer.status, 200, "{answer:?}");
        answer.body
    };
    let mut rows = Vec::new();
    for role in list("/roles").await.as_array().unwrap() {
        rows.push(json!([
            role["role"],
            number(&role["Permissions"][0]["Resources"][0])
        ]));
    }
    for user in list("/users").await.as_array().unwrap() {
        if user["username"] != "root" {
            rows.push(json!([user["username"], number(&user["Roles"][0])]));
        }
    }
    for monitor in list("/monitors").await["monitors"].as_array().unwrap() {
        rows.push(json!([monitor["_id"], number(&monitor["monitor"]["name"])]));
    }
    let mut found = Found::new();
    tally(&mut found, &rows);
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn roles_users_and_monitors_survive_kill_9() {
    let (_dir, mut server, root) = start(&ARGS);
    dataset(&Signed::new(&server, &root), "watched", json!({})).await;
    let books = Books::default();
    let keys: Arc<Mutex<BTreeMap<String, Credentials>>> = Arc::default();
    for round in 0..ROUNDS {
        let platform = Signed::new(&server, &root);
        let mut writers = Vec::new();
        for kind in ["role", "user", "monitor"] {
            for c in 0..2 {
                let name = format!("r{round}c{c}");
                let writer = governance(platform.clone(), kind, name, books.clone(), keys.clone());
                writers.push(tokio::spawn(writer));
            }
        }
        tokio::time::sleep(WRITING).await;
        crash(&mut server, &ARGS, writers).await;
        let found = documents_found(&Signed::new(&server, &root)).await;
        books.lock().unwrap().check(&found);
        let live: Vec<(String, Credentials)> = {
            let keys = keys.lock().unwrap();
            keys.iter()
                .filter(|(user, _)| found.contains_key(*user))
                .map(|(user, keys)| (user.clone(), keys.clone()))
                .collect()
        };
        // The users' keys came back with them: each signs its own requests.
        for (user, credentials) in live {
            let answer = Signed::new(&server, &credentials)
                .send_json("GET", &format!("/user/{user}"), None)
                .await;
            assert_eq!(answer.status, 200, "{user}: {answer:?}");
        }
    }
    books
        .lock()
        .unwrap()
        .made_progress(&["role", "user", "monitor"], 3);
}
