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
    error::Error,
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

/// Runs an admin request: through the running server if there is one, else in this process.
pub async fn run(config: Config, request: AdminRequest) -> anyhow::Result<Value> {
    let reply = match DataDir::try_acquire(&config.data_dir)? {
        Some(data_dir) => {
            let engine = Engine::open(Arc::new(config), Arc::new(Metrics::new())).await?;
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
    };
    strata_datadir::result_of(reply)
}
