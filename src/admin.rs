//! Admin commands (`strata accounts ...`, `strata keys ...`, `strata users ...`): one set of operations, run either
//! in the server (through its admin socket, when a server owns the data directory) or in the
//! command's own process (when none does). Either way they are control-partition writes with the
//! principal "admin". `strata-replay verify` and `restore` send their requests here too when a
//! server runs (they run in their own process otherwise).
//!
//! Protocol on `<data_dir>/admin.sock`: one JSON request per line, one JSON answer per line:
//! `{"ok": <result>}` or `{"error": {"code": "...", "message": "..."}}`.

use std::{path::Path, sync::Arc, time::Duration};

use anyhow::Context;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::{
    io::{AsyncBufReadExt, AsyncWriteExt, BufReader},
    net::{UnixListener, UnixStream},
};

use crate::{
    config::Config,
    datadir::DataDir,
    engine::{Engine, Origin},
    error::{Error, ErrorCode},
    metrics::Metrics,
};

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum AdminRequest {
    CreateAccount {
        name: String,
        enterprise: bool,
    },
    SetPaymentMethod {
        name: String,
    },
    CreateKey {
        account: String,
        databases: Option<String>,
    },
    /// `strata users create-root`: answers `{"access_key", "secret_key"}`.
    CreateRootUser {
        account: String,
    },
    /// `strata-replay verify`: answers a `strata_projections::verify::Report`.
    Verify {
        database: Option<String>,
        table: Option<String>,
    },
    /// `strata-replay restore`: answers a `RestoreSummary`.
    Restore {
        database: String,
        at: String,
        into: String,
    },
}

/// Runs one admin request against an open engine.
pub async fn execute(engine: &Arc<Engine>, request: AdminRequest) -> Result<Value, Error> {
    let origin = Origin::admin();
    Ok(match request {
        AdminRequest::CreateAccount { name, enterprise } => {
            let account = engine.create_account(&name, enterprise, &origin).await?;
            json!({"name": account.name, "enterprise": account.enterprise})
        }
        AdminRequest::SetPaymentMethod { name } => {
            let account = engine.set_payment_method(&name, &origin).await?;
            json!({"name": account.name, "payment_method": account.payment_method})
        }
        AdminRequest::CreateKey { account, databases } => {
            let key = engine
                .create_key(&account, databases.as_deref(), &origin)
                .await?;
            json_of(&key)?
        }
        AdminRequest::CreateRootUser { account } => {
            let root = engine.create_root_user(&account, &origin).await?;
            json!({"access_key": root.access_key, "secret_key": root.secret_key})
        }
        AdminRequest::Verify { database, table } => {
            let report = engine.verify(database.as_deref(), table.as_deref()).await?;
            json_of(&report)?
        }
        AdminRequest::Restore { database, at, into } => {
            json_of(&engine.restore(&database, &at, &into, &origin).await?)?
        }
    })
}

fn json_of(value: &impl Serialize) -> Result<Value, Error> {
    serde_json::to_value(value).map_err(|e| Error::Internal(e.to_string()))
}

/// Serves admin requests on the socket until the task is dropped.
pub fn listen(engine: Arc<Engine>, socket: &Path) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    if socket.exists() {
        // Only the owner of the data directory gets here: a socket left by a killed server.
        std::fs::remove_file(socket)
            .with_context(|| format!("cannot remove stale {}", socket.display()))?;
    }
    let listener = UnixListener::bind(socket)
        .with_context(|| format!("cannot bind admin socket {}", socket.display()))?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(socket, std::fs::Permissions::from_mode(0o600))?;
    Ok(tokio::spawn(async move {
        loop {
            match listener.accept().await {
                Ok((stream, _)) => {
                    let engine = engine.clone();
                    tokio::spawn(async move {
                        if let Err(error) = answer(&engine, stream).await {
                            tracing::warn!(%error, "admin connection failed");
                        }
                    });
                }
                Err(error) => {
                    tracing::error!(%error, "admin socket accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    }))
}

async fn answer(engine: &Arc<Engine>, stream: UnixStream) -> anyhow::Result<()> {
    let (read, mut write) = stream.into_split();
    let mut line = String::new();
    BufReader::new(read).read_line(&mut line).await?;
    let reply = match serde_json::from_str::<AdminRequest>(&line) {
        Ok(request) => match execute(engine, request).await {
            Ok(result) => json!({ "ok": result }),
            Err(error) => error_json(&error),
        },
        Err(error) => json!({"error": {"code": "bad_request", "message": error.to_string()}}),
    };
    let mut text = reply.to_string();
    text.push('\n');
    write.write_all(text.as_bytes()).await?;
    Ok(())
}

fn error_json(error: &Error) -> Value {
    json!({"error": {"code": error.code().as_str(), "message": error.public_message()}})
}

/// How long an admin request is sent again while it is refused as transient.
const RETRY_FOR: Duration = Duration::from_secs(15);

/// Runs an admin request: through the running server if there is one, else in this process.
/// A transient refusal (a node activating, leadership of a partition moving, another write in
/// flight) applied nothing, so the request is sent again, as a Kafka client retries
/// NOT_LEADER, for up to [`RETRY_FOR`].
pub async fn run(config: Config, request: AdminRequest) -> anyhow::Result<Value> {
    let started = std::time::Instant::now();
    let mut pause = Duration::from_millis(50);
    loop {
        let reply = attempt(&config, request.clone()).await?;
        if !transient(&reply) || started.elapsed() >= RETRY_FOR {
            return strata_datadir::result_of(reply);
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_secs(1));
    }
}

/// Whether `reply` refuses its request for a while only: nothing of it was applied.
fn transient(reply: &Value) -> bool {
    let code = reply.pointer("/error/code").and_then(Value::as_str);
    [
        ErrorCode::Unavailable,
        ErrorCode::Busy,
        ErrorCode::ConcurrentChange,
    ]
    .iter()
    .any(|transient| code == Some(transient.as_str()))
}

/// One try of [`run`]: the reply, an error only when no server could be asked.
async fn attempt(config: &Config, request: AdminRequest) -> anyhow::Result<Value> {
    Ok(match DataDir::try_acquire(&config.data_dir)? {
        Some(data_dir) => {
            let engine = Engine::open(Arc::new(config.clone()), Arc::new(Metrics::new())).await?;
            let reply = match execute(&engine, request).await {
                Ok(result) => json!({ "ok": result }),
                Err(error) => error_json(&error),
            };
            engine.shutdown().await?;
            drop(engine);
            drop(data_dir);
            reply
        }
        // The owner may still be starting: give it a moment to open its socket.
        None => {
            let request = serde_json::to_value(&request)?;
            strata_datadir::send(&config.data_dir, &request, Duration::from_secs(15)).await?
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A process holding `dir` whose admin socket answers each request with the next of
    /// `replies`; the requests it got.
    async fn owner(dir: &Path, replies: Vec<Value>) -> tokio::task::JoinHandle<Vec<Value>> {
        let listener = UnixListener::bind(DataDir::admin_socket(dir)).unwrap();
        tokio::spawn(async move {
            let mut got = Vec::new();
            for reply in replies {
                let (stream, _) = listener.accept().await.unwrap();
                let (read, mut write) = stream.into_split();
                let mut line = String::new();
                BufReader::new(read).read_line(&mut line).await.unwrap();
                got.push(serde_json::from_str(&line).unwrap());
                write
                    .write_all(format!("{reply}\n").as_bytes())
                    .await
                    .unwrap();
            }
            got
        })
    }

    fn request() -> AdminRequest {
        AdminRequest::CreateAccount {
            name: "acme".into(),
            enterprise: false,
        }
    }

    #[tokio::test]
    async fn a_transient_refusal_is_sent_again_until_it_is_answered() {
        let dir = tempfile::tempdir().unwrap();
        let _held = DataDir::try_acquire(dir.path()).unwrap().unwrap();
        let moved = json!({"error": {"code": "unavailable",
            "message": "leadership of _control moved to another node; retry the request"}});
        let busy = json!({"error": {"code": "busy", "message": "another write is in flight"}});
        let owner = owner(
            dir.path(),
            vec![moved, busy, json!({"ok": {"name": "acme"}})],
        )
        .await;
        let config = Config {
            data_dir: dir.path().to_owned(),
            ..Config::default()
        };
        let result = run(config, request()).await.unwrap();
        assert_eq!(result, json!({"name": "acme"}));
        let got = owner.await.unwrap();
        assert_eq!(got.len(), 3);
        assert!(got.iter().all(|r| r["op"] == "create_account"), "{got:?}");
    }

    #[tokio::test]
    async fn a_refusal_that_lasts_is_reported_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let _held = DataDir::try_acquire(dir.path()).unwrap().unwrap();
        let exists = json!({"error": {"code": "account_exists", "message": "account acme exists"}});
        let owner = owner(dir.path(), vec![exists]).await;
        let config = Config {
            data_dir: dir.path().to_owned(),
            ..Config::default()
        };
        let error = run(config, request()).await.unwrap_err();
        assert_eq!(error.to_string(), "account acme exists");
        assert_eq!(owner.await.unwrap().len(), 1);
    }
}
