//! A change-stream consumer: follows `GET /v1/changes/{database}` (server-sent events), prints
//! each change, and keeps the id of the last one in a file so that a restart of this program, or
//! of the server, resumes where it stopped with no gap and no duplicate.
//!
//! ```sh
//! STRATA_KEY=$KEY cargo run --example change_stream -- quickstart            # every table
//! STRATA_KEY=$KEY cargo run --example change_stream -- quickstart products   # one table
//! ```
//!
//! Environment: STRATA_URL (default http://127.0.0.1:7070), STRATA_KEY, and STRATA_CURSOR (the
//! file holding the last event id; default ./change_stream.cursor).

use std::time::Duration;

use futures::StreamExt;
use serde_json::Value;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let base = std::env::var("STRATA_URL").unwrap_or_else(|_| "http://127.0.0.1:7070".into());
    let key = std::env::var("STRATA_KEY")
        .map_err(|_| anyhow::anyhow!("set STRATA_KEY to a key from `strata keys create`"))?;
    let cursor_file =
        std::env::var("STRATA_CURSOR").unwrap_or_else(|_| "change_stream.cursor".into());
    let mut args = std::env::args().skip(1);
    let database = args
        .next()
        .ok_or_else(|| anyhow::anyhow!("usage: change_stream DATABASE [TABLE]"))?;
    let url = match args.next() {
        Some(table) => format!("{base}/v1/changes/{database}?table={table}"),
        None => format!("{base}/v1/changes/{database}"),
    };
    let http = reqwest::Client::new();
    loop {
        let last_id = std::fs::read_to_string(&cursor_file).ok();
        let mut request = http.get(&url).bearer_auth(&key);
        if let Some(id) = last_id
            .as_deref()
            .map(str::trim)
            .filter(|id| !id.is_empty())
        {
            request = request.header("Last-Event-ID", id);
        }
        match request.send().await {
            Ok(response) if response.status().is_success() => {
                follow(response, &cursor_file).await?;
                eprintln!("the stream ended; reconnecting");
            }
            Ok(response) => {
                // A 4xx will not get better by retrying.
                let status = response.status();
                let body = response.text().await.unwrap_or_default();
                anyhow::bail!("{status}: {body}");
            }
            Err(error) => eprintln!("cannot connect ({error}); retrying"),
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Reads events until the connection ends, recording each one's id after printing it.
async fn follow(response: reqwest::Response, cursor_file: &str) -> anyhow::Result<()> {
    let mut body = response.bytes_stream();
    let mut buffer = String::new();
    while let Some(chunk) = body.next().await {
        let Ok(chunk) = chunk else {
            return Ok(());
        };
        buffer.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = buffer.find("\n\n") {
            let block: String = buffer.drain(..end + 2).collect();
            let (mut id, mut kind, mut data) = (None, None, String::new());
            for line in block.lines() {
                match line.split_once(':') {
                    Some(("id", value)) => id = Some(value.trim().to_owned()),
                    Some(("event", value)) => kind = Some(value.trim().to_owned()),
                    Some(("data", value)) => data.push_str(value.trim_start()),
                    _ => {}
                }
            }
            if data.is_empty() {
                continue; // a keep-alive comment
            }
            let event: Value = serde_json::from_str(&data)?;
            if kind.as_deref() == Some("error") {
                anyhow::bail!("the stream failed: {event}");
            }
            print(&event);
            if let Some(id) = id {
                std::fs::write(cursor_file, id)?;
            }
        }
    }
    Ok(())
}

fn print(event: &Value) {
    let table = event["table"].as_str().unwrap_or("-");
    let what = match event["kind"].as_str().unwrap_or("") {
        "rows_appended" | "rows_updated" => event["body"]["rows"].to_string(),
        "rows_deleted" => format!("row ids {}", event["body"]["row_ids"]),
        _ => event["body"].to_string(),
    };
    println!(
        "{} {} {table} @{}: {what}",
        event["time"].as_str().unwrap_or(""),
        event["kind"].as_str().unwrap_or(""),
        event["offset"]
    );
}
