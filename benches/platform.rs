//! A platform-API client for the benchmarks: requests signed with SigV4 by the root user of
//! the benchmark's account, and NDJSON bulk bodies.

use std::path::Path;

use serde_json::Value;

use crate::server::{self, Server};

/// Records a bulk request carries.
pub const PER_REQUEST: usize = 1000;
/// The dataset the document benchmarks write and search.
pub const DATASET: &str = "logs";

/// A platform-API client signing with the root user's keys.
#[derive(Clone)]
pub struct Platform {
    http: reqwest::Client,
    base: String,
    keys: (String, String),
}

impl Platform {
    /// Creates the root user of the account `bench`, keeping its keys in `dir` (a later run
    /// over the same data loads them).
    pub fn of(server: &Server, dir: &Path) -> Platform {
        let created = server::admin(
            dir,
            &["users", "create-root", "--account", "bench", "--json"],
        );
        std::fs::write(dir.join("root-user.json"), &created).unwrap();
        Platform::load(server, dir)
    }

    /// The client of the root user whose keys a run kept in `dir`.
    pub fn load(server: &Server, dir: &Path) -> Platform {
        let kept = std::fs::read(dir.join("root-user.json"))
            .expect("a directory with strata's data (a run that created its user makes one)");
        let user: Value = serde_json::from_slice(&kept).unwrap();
        Platform {
            http: reqwest::Client::new(),
            base: server.platform_url.clone(),
            keys: (
                user["access_key"].as_str().unwrap().to_owned(),
                user["secret_key"].as_str().unwrap().to_owned(),
            ),
        }
    }

    /// A client signing with the keys of another user.
    pub fn with_keys(server: &Server, access_key: &str, secret_key: &str) -> Platform {
        Platform {
            http: reqwest::Client::new(),
            base: server.platform_url.clone(),
            keys: (access_key.to_owned(), secret_key.to_owned()),
        }
    }

    /// Sends a signed request; it must succeed. Its status and body.
    pub async fn send_raw(
        &self,
        method: &str,
        path: &str,
        content_type: &str,
        body: Vec<u8>,
    ) -> (reqwest::StatusCode, Vec<u8>) {
        let headers = strata::sigv4::sign(
            &strata::sigv4::Outgoing {
                method,
                host: self.base.trim_start_matches("http://"),
                path_and_query: path,
                headers: &[("content-type", content_type)],
                body: &body,
            },
            (&self.keys.0, &self.keys.1),
            ("us-east-1", "strata"),
            chrono::Utc::now(),
        );
        let mut request = self.http.request(
            reqwest::Method::from_bytes(method.as_bytes()).unwrap(),
            format!("{}{path}", self.base),
        );
        for (name, value) in headers {
            request = request.header(name, value);
        }
        let response = request.body(body).send().await.unwrap();
        let status = response.status();
        let bytes = response.bytes().await.unwrap().to_vec();
        assert!(
            status.is_success(),
            "{method} {path}: {status} {}",
            String::from_utf8_lossy(&bytes)
        );
        (status, bytes)
    }

    /// Sends a signed request; it must succeed. Its JSON answer (null when it is none).
    pub async fn send(&self, method: &str, path: &str, content_type: &str, body: Vec<u8>) -> Value {
        let (_, bytes) = self.send_raw(method, path, content_type, body).await;
        serde_json::from_slice(&bytes).unwrap_or(Value::Null)
    }

    /// Sends one bulk body to the benchmarks' dataset; every record must be taken.
    pub async fn bulk(&self, body: Vec<u8>) {
        let answer = self
            .send(
                "POST",
                &format!("/{DATASET}/_bulk"),
                "application/x-ndjson",
                body,
            )
            .await;
        assert_eq!(answer["errors"], serde_json::json!(false), "{answer}");
    }

    pub async fn search(&self, body: &Value) -> Value {
        self.send(
            "POST",
            &format!("/{DATASET}/_search"),
            "application/json",
            body.to_string().into_bytes(),
        )
        .await
    }
}

/// The bulk bodies: `PER_REQUEST` records each, every one an index action.
pub fn bulk_bodies(records: &[String]) -> Vec<Vec<u8>> {
    records
        .chunks(PER_REQUEST)
        .map(|chunk| {
            let mut body = String::with_capacity(chunk.iter().map(|r| r.len() + 14).sum());
            for record in chunk {
                body.push_str("{\"index\":{}}\n");
                body.push_str(record);
                body.push('\n');
            }
            body.into_bytes()
        })
        .collect()
}
