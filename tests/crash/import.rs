//! An import from the local PostgreSQL, killed twice mid-import.

use super::*;

/// The import job `id` once `done` holds of it (polled for up to three minutes).
async fn job_when(root: &Signed, id: &str, done: impl Fn(&Value) -> bool) -> Value {
    let job = Mutex::new(Value::Null);
    let (job_ref, done) = (&job, &done);
    let reached = common::eventually(180, move || async move {
        let listed = root.send_json("GET", "/import/jobs", None).await;
        assert_eq!(listed.status, 200, "{listed:?}");
        let jobs = listed.body["jobs"].as_array().unwrap();
        let found = jobs.iter().find(|job| job["job_id"] == id);
        *job_ref.lock().unwrap() = found.cloned().unwrap_or_default();
        found.is_some_and(done)
    })
    .await;
    let job = job.into_inner().unwrap();
    assert!(reached, "import {id} is still {job}");
    job
}

fn records_written(job: &Value) -> u64 {
    job["records_written"].as_u64().unwrap_or(0)
}

fn finished(job: &Value) -> bool {
    matches!(
        job["state"].as_str(),
        Some("succeeded" | "failed" | "cancelled")
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_import_killed_twice_mid_import_writes_every_row_once() {
    const ROWS: u64 = 6_000;
    let pg = common::PgDatabase::new(
        "crash_import",
        &format!(
            "CREATE TABLE readings (id bigint PRIMARY KEY, host text, value double precision);
             INSERT INTO readings SELECT n, 'host-' || (n % 7), n * 0.5
             FROM generate_series(1, {ROWS}) AS n;"
        ),
    );
    let args = [&ARGS[..], &["--set", "imports.batch_rows=200"][..]].concat();
    let (dir, mut server, root) = start(&args);
    let platform = Signed::new(&server, &root);
    dataset(&platform, "readings", json!({"v": {"type": "long"}})).await;
    let config = json!({"host": "127.0.0.1", "port": 5432, "username": "postgres",
                        "database": pg.name});
    let body = json!({"connector_id": "postgresql", "name": "pg", "config": config});
    let made = platform
        .send_json("POST", "/source/postgresql", Some(&body))
        .await;
    assert_eq!(made.status, 201, "{made:?}");
    let body =
        json!({"connection_id": "pg", "source": {"table": "readings"}, "dataset": "readings"});
    let started = platform
        .send_json("PUT", "/import/postgresql", Some(&body))
        .await;
    assert_eq!(started.status, 201, "{started:?}");
    let job = started.body["job_id"].as_str().unwrap().to_owned();
    // Clients write records of their own to the dataset the import writes, all along.
    let books = Books::default();
    let written_by_clients = |platform: Signed| async move {
        let mut found = Found::new();
        let query = "SELECT _id, v FROM readings WHERE id IS NULL";
        tally_sql(&mut found, &platform, query).await;
        found
    };
    for round in 0..ROUNDS {
        let platform = Signed::new(&server, &root);
        let writers: Vec<_> = (0..2)
            .map(|c| {
                let writer = super::writes::bulk_with_ids(
                    platform.clone(),
                    "readings",
                    format!("r{round}c{c}"),
                    books.clone(),
                );
                tokio::spawn(writer)
            })
            .collect();
        // Killed once the job has written more than it had when the server started.
        let written = records_written(&job_when(&platform, &job, |_| true).await);
        let midway = job_when(&platform, &job, |job| {
            records_written(job) > written || finished(job)
        })
        .await;
        crash(&mut server, &args, writers).await;
        assert_eq!(midway["state"], "running", "{midway}");
        assert!(records_written(&midway) < ROWS, "{midway}");
        let found = written_by_clients(Signed::new(&server, &root)).await;
        books.lock().unwrap().check(&found);
    }
    let platform = Signed::new(&server, &root);
    let done = job_when(&platform, &job, finished).await;
    assert_eq!(done["state"], "succeeded", "{done}");
    assert_eq!(records_written(&done), ROWS, "{done}");
    let query = "SELECT count(id), count(DISTINCT id), sum(id), count(DISTINCT _id) \
                 FROM readings WHERE id IS NOT NULL";
    let counted = platform
        .send_json("POST", "/sql", Some(&json!({ "query": query })))
        .await;
    let sum = ROWS * (ROWS + 1) / 2;
    assert_eq!(
        counted.body["rows"],
        json!([[ROWS, ROWS, sum, ROWS]]),
        "{counted:?}"
    );
    let found = written_by_clients(platform).await;
    books.lock().unwrap().check(&found);
    books.lock().unwrap().made_progress(&["bulk with ids"], 3);
    server.kill9();
    common::verify_passes(common::replay(dir.path(), &["verify"]));
}
