//! Clusters of strata nodes on one Kafka log, for the tests that need two nodes and a failover
//! (tests/cluster.rs, tests/change_consumers.rs).

use std::path::{Path, PathBuf};

use super::{Credentials, Server, Signed, eventually, kafka_env, root_user};

/// How long a node counts another after its latest heartbeat, in these tests.
pub const LEASE_MS: u64 = 1_500;

/// Starts node `name` on `dir`, in the cluster of the log `log_env` names.
pub fn node(dir: &Path, name: &str, log_env: &[(&'static str, String)]) -> Server {
    let node_id = format!("cluster.node_id={name}");
    let lease = format!("cluster.lease_ms={LEASE_MS}");
    Server::start_with(
        dir,
        &[
            "--set",
            &node_id,
            "--set",
            "cluster.heartbeat_ms=200",
            "--set",
            &lease,
            "--set",
            "tables.flush_rows=50",
            // One seal key for the cluster: users' secrets are sealed with it in the log.
            "--set",
            "platform.seal_key=5eb1a7e5eb1a7e5eb1a7e5eb1a7e5eb1a7e5eb1a7e5eb1a7e5eb1a7e5eb1a7e5",
        ],
        log_env,
    )
}

/// The members a node sees, by name.
pub async fn members(server: &Server) -> Vec<String> {
    let health = server.anonymous().get("/health").await;
    health.body["members"]
        .as_array()
        .map(|members| {
            members
                .iter()
                .map(|m| m["node"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

pub async fn sees(server: &Server, expected: &[&str]) -> bool {
    members(server).await == expected
}

/// An account whose `default` database (where its datasets live) node `owner` serves, and its
/// root user, creating accounts until one is; its dataset `records` is made.
pub async fn account_served_by(dir: &Path, node: &Server, owner: &str) -> (String, Credentials) {
    for i in 0..16 {
        let account = format!("tenant{i}");
        let root = root_user(dir, &account);
        let created = Signed::new(node, &root).send("PUT", "/records", None).await;
        assert_eq!(created.status, 200, "{created:?}");
        if created.node.as_deref() == Some(owner) {
            return (account, root);
        }
    }
    panic!("none of 16 accounts' default database is served by {owner}");
}

/// Waits until nodes `a` and `b` each count both as members; panics after 20 s.
pub async fn see_each_other(a: &Server, b: &Server) {
    assert!(
        eventually(20, || async {
            sees(a, &["a", "b"]).await && sees(b, &["a", "b"]).await
        })
        .await,
        "the nodes do not see each other: {:?} {:?}",
        members(a).await,
        members(b).await
    );
}

/// Nodes `a` and `b` on one Kafka log in `root` (see [`kafka_env`]), once they see each other:
/// the log's environment, their data directories and the nodes.
pub async fn two_nodes(root: &Path) -> (Vec<(&'static str, String)>, [PathBuf; 2], Server, Server) {
    let log_env = kafka_env(&root.join("log"));
    let (dir_a, dir_b) = (root.join("a"), root.join("b"));
    let a = node(&dir_a, "a", &log_env);
    let b = node(&dir_b, "b", &log_env);
    see_each_other(&a, &b).await;
    (log_env, [dir_a, dir_b], a, b)
}
