//! Commands that change or read what a running server holds go through its admin socket
//! (`<data_dir>/admin.sock`, one JSON request line, one JSON answer line; see the server's
//! `admin` module), so that the server's leaders stay the only writers of its log.

use std::path::Path;

use anyhow::{Context, anyhow, bail};
use serde_json::Value;
use tokio::{
    io::{AsyncBufReadExt, AsyncWriteExt, BufReader},
    net::UnixStream,
};

/// Holds `<data_dir>/LOCK` as the server does, when no server holds it: `None` when one runs.
pub(crate) fn try_lock_data_dir(data_dir: &Path) -> anyhow::Result<Option<std::fs::File>> {
    let path = data_dir.join("LOCK");
    let file = std::fs::File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    match file.try_lock() {
        Ok(()) => Ok(Some(file)),
        Err(std::fs::TryLockError::WouldBlock) => Ok(None),
        Err(std::fs::TryLockError::Error(error)) => {
            Err(error).with_context(|| format!("cannot lock {}", path.display()))
        }
    }
}

/// Sends one admin request to the server running on `data_dir` and returns its result.
pub(crate) async fn call(data_dir: &Path, request: Value) -> anyhow::Result<Value> {
    let socket = data_dir.join("admin.sock");
    let stream = UnixStream::connect(&socket).await.with_context(|| {
        format!(
            "a server holds {} but its admin socket {} does not answer",
            data_dir.display(),
            socket.display()
        )
    })?;
    let (read, mut write) = stream.into_split();
    let mut line = request.to_string();
    line.push('\n');
    write.write_all(line.as_bytes()).await?;
    let mut reply = String::new();
    BufReader::new(read).read_line(&mut reply).await?;
    if reply.is_empty() {
        bail!("the server closed the admin connection without an answer");
    }
    let reply: Value =
        serde_json::from_str(&reply).with_context(|| format!("bad admin reply {reply:?}"))?;
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
