//! A strata data directory: its layout, its lock, and the admin socket of the process that owns
//! it. Shared by the server (`strata`) and the offline tools (`strata-replay`), which must agree
//! on all three.
//!
//! One process at a time owns a data directory: the server, or a command run while no server
//! is. The owner holds an exclusive lock on `<data_dir>/LOCK` for its lifetime; the lock goes
//! away with the process, however it ends. A running server answers admin requests on its
//! socket: one JSON request line, one JSON answer line, `{"ok": result}` or
//! `{"error": {"code", "message"}}`.
//!
//! ```text
//! <data_dir>/LOCK         the lock
//! <data_dir>/log/         the FileLog
//! <data_dir>/state/       the projections' sled store
//! <data_dir>/admin.sock   the running server's admin socket (mode 0600)
//! <data_dir>/server.json  the running server's pid and bound addresses
//! ```

use std::{
    fs::{File, TryLockError},
    path::{Path, PathBuf},
    time::Duration,
};

use anyhow::{Context, Result, anyhow, bail};
use serde_json::Value;
use tokio::{
    io::{AsyncBufReadExt, AsyncWriteExt, BufReader},
    net::UnixStream,
};

#[derive(Debug)]
pub struct DataDir {
    path: PathBuf,
    _lock: File,
}

impl DataDir {
    /// Takes the data directory, creating it if needed; `None` while another process has it.
    pub fn try_acquire(path: &Path) -> Result<Option<DataDir>> {
        std::fs::create_dir_all(path)
            .with_context(|| format!("cannot create data directory {}", path.display()))?;
        let lock_path = path.join("LOCK");
        let lock = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .with_context(|| format!("cannot open {}", lock_path.display()))?;
        match lock.try_lock() {
            Ok(()) => Ok(Some(DataDir {
                path: path.to_owned(),
                _lock: lock,
            })),
            Err(TryLockError::WouldBlock) => Ok(None),
            Err(TryLockError::Error(error)) => {
                Err(error).with_context(|| format!("cannot lock {}", lock_path.display()))
            }
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn admin_socket(data_dir: &Path) -> PathBuf {
        data_dir.join("admin.sock")
    }

    pub fn server_file(data_dir: &Path) -> PathBuf {
        data_dir.join("server.json")
    }
}

/// Sends one admin request to the process that owns `data_dir` and returns its answer line as
/// it is. The owner may still be starting: its socket is retried for up to `wait`.
pub async fn send(data_dir: &Path, request: &Value, wait: Duration) -> Result<Value> {
    let socket = DataDir::admin_socket(data_dir);
    let deadline = tokio::time::Instant::now() + wait;
    let stream = loop {
        match UnixStream::connect(&socket).await {
            Ok(stream) => break stream,
            Err(error) if tokio::time::Instant::now() >= deadline => {
                return Err(error).with_context(|| {
                    format!(
                        "another process holds {} but its admin socket {} does not answer",
                        data_dir.display(),
                        socket.display()
                    )
                });
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    };
    let (read, mut write) = stream.into_split();
    let mut line = request.to_string();
    line.push('\n');
    write.write_all(line.as_bytes()).await?;
    let mut reply = String::new();
    BufReader::new(read).read_line(&mut reply).await?;
    if reply.is_empty() {
        bail!("the server closed the admin connection without an answer");
    }
    serde_json::from_str(&reply).with_context(|| format!("bad admin reply {reply:?}"))
}

/// The result an answer carries, or its error as the message the operator sees.
pub fn result_of(reply: Value) -> Result<Value> {
    match (reply.get("ok"), reply.get("error")) {
        (Some(result), _) => Ok(result.clone()),
        (None, Some(error)) => Err(anyhow!(
            "{}",
            error
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("the server refused the request")
        )),
        (None, None) => bail!("the server answered an admin request with {reply}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_process_at_a_time_owns_a_data_directory() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data");
        let owner = DataDir::try_acquire(&path).unwrap().unwrap();
        assert!(DataDir::try_acquire(&path).unwrap().is_none());
        drop(owner);
        assert!(DataDir::try_acquire(&path).unwrap().is_some());
    }

    #[test]
    fn answers_are_results_or_the_errors_message() {
        let ok = result_of(serde_json::json!({"ok": {"n": 1}})).unwrap();
        assert_eq!(ok, serde_json::json!({"n": 1}));
        let refused = result_of(serde_json::json!({"error": {"code": "x", "message": "no"}}));
        assert_eq!(refused.unwrap_err().to_string(), "no");
        assert!(result_of(serde_json::json!({})).is_err());
    }

    #[tokio::test]
    async fn a_request_goes_to_the_owners_socket_and_its_answer_comes_back() {
        let dir = tempfile::tempdir().unwrap();
        let listener = tokio::net::UnixListener::bind(DataDir::admin_socket(dir.path())).unwrap();
        let server = tokio::spawn(async move {
            let (stream, _) = listener.accept().await.unwrap();
            let (read, mut write) = stream.into_split();
            let mut line = String::new();
            BufReader::new(read).read_line(&mut line).await.unwrap();
            let request: Value = serde_json::from_str(&line).unwrap();
            let answer = serde_json::json!({"ok": request["ping"]});
            write
                .write_all(format!("{answer}\n").as_bytes())
                .await
                .unwrap();
        });
        let reply = send(
            dir.path(),
            &serde_json::json!({"ping": "pong"}),
            Duration::ZERO,
        )
        .await
        .unwrap();
        assert_eq!(result_of(reply).unwrap(), "pong");
        server.await.unwrap();
        let missing = tempfile::tempdir().unwrap();
        let error = send(missing.path(), &serde_json::json!({}), Duration::ZERO)
            .await
            .unwrap_err();
        assert!(
            format!("{error:#}").contains("does not answer"),
            "{error:#}"
        );
    }
}
