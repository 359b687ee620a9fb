//! The command line: admin commands with and without a running server, configuration layers,
//! and one owner per data directory.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::process::Command;

use common::{Server, admin, bin, strata};
use serde_json::Value;

fn stderr(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[tokio::test]
async fn admin_commands_work_whether_the_server_runs_or_not() {
    let dir = tempfile::tempdir().unwrap();
    // No server: the command opens the data directory itself.
    let created = admin(dir.path(), &["accounts", "create", "acme", "--json"]);
    let created: Value = serde_json::from_str(&created).unwrap();
    assert_eq!(created["name"], "acme");
    assert_eq!(created["enterprise"], false);
    let human = admin(dir.path(), &["accounts", "create", "beta", "--enterprise"]);
    assert_eq!(human.trim(), "created account beta");
    let duplicate = strata(dir.path(), &["accounts", "create", "acme"]);
    assert!(!duplicate.status.success());
    assert!(
        stderr(&duplicate).contains("already exists"),
        "{}",
        stderr(&duplicate)
    );
    let offline_key = admin(dir.path(), &["keys", "create", "--account", "acme"]);
    let offline_key = offline_key.trim().to_owned();
    assert!(offline_key.starts_with("sk_"), "{offline_key}");

    // With a server: the same commands go through its admin socket, and take effect at once.
    let mut server = Server::start(dir.path(), &[]);
    let online = admin(
        dir.path(),
        &["keys", "create", "--account", "beta", "--json"],
    );
    let online: Value = serde_json::from_str(&online).unwrap();
    let online_key = online["key"].as_str().unwrap();
    assert_eq!(online["account"], "beta");
    assert_eq!(online["databases"], "*");
    for key in [offline_key.as_str(), online_key] {
        assert_eq!(server.client(key).get("/v1/databases").await.status, 200);
    }
    let missing = strata(dir.path(), &["accounts", "set-payment-method", "nobody"]);
    assert!(!missing.status.success());
    assert!(stderr(&missing).contains("nobody"), "{}", stderr(&missing));
    let no_account = strata(dir.path(), &["keys", "create", "--account", "nobody"]);
    assert!(!no_account.status.success());
    let bad_pattern = strata(
        dir.path(),
        &["keys", "create", "--account", "acme", "--databases", "a/b"],
    );
    assert!(!bad_pattern.status.success());
    assert!(stderr(&bad_pattern).contains("a/b"));
    admin(dir.path(), &["accounts", "create", "gamma"]);

    // Stopped again: what the server recorded is there for the offline command.
    assert!(server.stop());
    let again = strata(dir.path(), &["accounts", "create", "gamma"]);
    assert!(
        stderr(&again).contains("already exists"),
        "{}",
        stderr(&again)
    );
    let paid = admin(
        dir.path(),
        &["accounts", "set-payment-method", "gamma", "--json"],
    );
    assert_eq!(
        serde_json::from_str::<Value>(&paid).unwrap()["payment_method"],
        true
    );
    // The key is stored hashed: its text appears nowhere on disk.
    let found = Command::new("grep")
        .args(["-r", "-F", "-l", &offline_key[20..]])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        found.stdout.is_empty(),
        "key text found in {}",
        String::from_utf8_lossy(&found.stdout)
    );
}

/// The server's allocator takes the options .cargo/config.toml compiles in (jemalloc prints
/// where each option came from when asked to in its environment).
#[cfg(not(feature = "system-allocator"))]
#[test]
fn the_allocator_keeps_large_allocations_with_the_others() {
    let output = Command::new(bin())
        .arg("--version")
        .env("_RJEM_MALLOC_CONF", "confirm_conf:true")
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let compiled = stderr(&output)
        .lines()
        .find(|line| line.contains("(string specified via --with-malloc-conf)"))
        .map(str::to_owned);
    assert_eq!(
        compiled.as_deref(),
        Some(
            "<jemalloc>: malloc_conf #1 (string specified via --with-malloc-conf): \"oversize_threshold:0\""
        ),
        "{}",
        stderr(&output)
    );
    assert!(
        stderr(&output).contains("-- Set conf value: oversize_threshold:0"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn a_data_directory_has_one_server() {
    let dir = tempfile::tempdir().unwrap();
    let _server = Server::start(dir.path(), &[]);
    let second = Command::new(bin())
        .args([
            "serve",
            "--data-addr",
            "127.0.0.1:0",
            "--platform-addr",
            "127.0.0.1:0",
        ])
        .arg("--data-dir")
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(!second.status.success());
    assert!(stderr(&second).contains("in use"), "{}", stderr(&second));
}

#[test]
fn configuration_comes_from_file_environment_and_flags_and_errors_name_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("from-file");
    let config = dir.path().join("strata.toml");
    std::fs::write(
        &config,
        format!("data_dir = {:?}\n", data.display().to_string()),
    )
    .unwrap();
    let run = |args: &[&str], env: &[(&str, &str)]| {
        let mut command = Command::new(bin());
        command.args(args).env_remove("STRATA_DATA_DIR");
        for (k, v) in env {
            command.env(k, v);
        }
        command.output().unwrap()
    };
    // The file decides the data directory...
    let out = run(
        &[
            "accounts",
            "create",
            "a",
            "--config",
            config.to_str().unwrap(),
        ],
        &[],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(data.join("log").exists());
    // ...the environment overrides the file, through STRATA_CONFIG too...
    let env_data = dir.path().join("from-env");
    let out = run(
        &["accounts", "create", "b"],
        &[
            ("STRATA_CONFIG", config.to_str().unwrap()),
            ("STRATA_DATA_DIR", env_data.to_str().unwrap()),
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(env_data.join("log").exists());
    // ...and flags override both.
    let flag_data = dir.path().join("from-flag");
    let out = run(
        &[
            "accounts",
            "create",
            "c",
            "--config",
            config.to_str().unwrap(),
            "--data-dir",
            flag_data.to_str().unwrap(),
        ],
        &[("STRATA_DATA_DIR", env_data.to_str().unwrap())],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(flag_data.join("log").exists());

    for (args, env, needle) in [
        (
            vec!["serve", "--set", "server.nope=1"],
            vec![],
            "server.nope",
        ),
        (
            vec!["serve", "--set", "plans.free.max_rows=lots"],
            vec![],
            "plans.free.max_rows",
        ),
        (vec!["serve"], vec![("STRATA_LOG_BACKEND", "tape")], "tape"),
        (vec!["serve", "--set", "novalue"], vec![], "KEY=VALUE"),
    ] {
        let mut args = args.clone();
        let data = dir.path().join("unused");
        args.extend(["--data-dir", data.to_str().unwrap()]);
        let out = run(&args, &env);
        assert!(!out.status.success());
        assert!(stderr(&out).contains(needle), "{needle}: {}", stderr(&out));
    }
}
