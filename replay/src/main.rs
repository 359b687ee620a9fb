//! `strata-replay`: audit and recovery tooling over the commit log.
//!
//! Today: `dump`, the events of the log as JSON lines, filtered by partition, time, principal and
//! kind. It opens the log of a data directory that no server is using (the log's lock tells).

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use chrono::{DateTime, Utc};
use clap::{Args, Parser, Subcommand};
use serde_json::{Value, json};
use strata_log::{CommitLog, Envelope, FileLog, FileLogOptions, envelope::Body};

#[derive(Parser)]
#[command(
    name = "strata-replay",
    version,
    about = "Audit and recovery tooling over the strata commit log"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print events as JSON lines
    Dump(Dump),
}

#[derive(Args)]
struct Location {
    /// The data directory of the server [env: STRATA_DATA_DIR] (default ./data)
    #[arg(long, value_name = "DIR", conflicts_with = "config")]
    data_dir: Option<PathBuf>,
    /// The server's configuration file; its data_dir is used [env: STRATA_CONFIG]
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
}

#[derive(Args)]
struct Dump {
    #[command(flatten)]
    location: Location,
    /// Only this partition ("_control", "<account>/<database>/_catalog", "<account>/<database>/<table>")
    #[arg(long)]
    partition: Option<String>,
    /// Only events at or after this time (RFC 3339)
    #[arg(long)]
    from: Option<DateTime<Utc>>,
    /// Only events before this time (RFC 3339)
    #[arg(long)]
    to: Option<DateTime<Utc>>,
    /// Only events caused by this principal ("admin", "system", "key:<id>")
    #[arg(long)]
    principal: Option<String>,
    /// Only events of this kind ("table_created", "database_deleted", ...)
    #[arg(long)]
    kind: Option<String>,
}

impl Location {
    fn data_dir(&self) -> anyhow::Result<PathBuf> {
        if let Some(dir) = &self.data_dir {
            return Ok(dir.clone());
        }
        let config = self
            .config
            .clone()
            .or_else(|| std::env::var_os("STRATA_CONFIG").map(PathBuf::from));
        if let Some(file) = config {
            let text = std::fs::read_to_string(&file)
                .with_context(|| format!("cannot read {}", file.display()))?;
            let table: toml::Table =
                toml::from_str(&text).with_context(|| format!("invalid {}", file.display()))?;
            if let Some(dir) = table.get("data_dir").and_then(toml::Value::as_str) {
                return Ok(PathBuf::from(dir));
            }
        }
        Ok(std::env::var_os("STRATA_DATA_DIR")
            .map_or_else(|| PathBuf::from("./data"), PathBuf::from))
    }
}

fn open_log(data_dir: &Path) -> anyhow::Result<FileLog> {
    let root = data_dir.join("log");
    if !root.exists() {
        bail!("{} holds no log", data_dir.display());
    }
    match FileLog::open(&root, FileLogOptions::default()) {
        Ok(log) => Ok(log),
        Err(strata_log::Error::Locked { .. }) => bail!(
            "the log in {} is in use by a running server; stop it first",
            data_dir.display()
        ),
        Err(error) => Err(error.into()),
    }
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    match cli.command {
        Command::Dump(dump) => runtime.block_on(run_dump(dump)),
    }
}

async fn run_dump(dump: Dump) -> anyhow::Result<()> {
    let log = open_log(&dump.location.data_dir()?)?;
    let partitions = match &dump.partition {
        Some(name) => vec![strata_log::PartitionId::new(name.clone())?],
        None => log.partitions().await?,
    };
    let from = dump.from.map(|t| t.timestamp_micros());
    let to = dump.to.map(|t| t.timestamp_micros());
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for partition in partitions {
        let mut next = 0;
        loop {
            let events = log.read(&partition, next, 1024).await?;
            let Some(last) = events.last() else {
                break;
            };
            next = last.offset + 1;
            for event in events {
                let keep = from.is_none_or(|t| event.timestamp_micros >= t)
                    && to.is_none_or(|t| event.timestamp_micros < t)
                    && dump
                        .principal
                        .as_ref()
                        .is_none_or(|p| *p == event.principal)
                    && dump.kind.as_ref().is_none_or(|k| k == event.kind());
                if keep {
                    use std::io::Write;
                    writeln!(out, "{}", to_json(&event))?;
                }
            }
        }
    }
    Ok(())
}

/// An event as one JSON object.
fn to_json(event: &Envelope) -> Value {
    let time = DateTime::from_timestamp_micros(event.timestamp_micros)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Micros, true));
    json!({
        "partition": event.partition,
        "offset": event.offset,
        "time": time,
        "principal": event.principal,
        "request_id": event.request_id,
        "event_id": event.event_id,
        "epoch": event.epoch,
        "kind": event.kind(),
        "body": body_json(event.body.as_ref()),
    })
}

fn body_json(body: Option<&Body>) -> Value {
    match body {
        None => Value::Null,
        Some(Body::LeaderEpoch(b)) => json!({"epoch": b.epoch, "node": b.node}),
        Some(Body::AccountCreated(b)) => json!({"name": b.name, "enterprise": b.enterprise}),
        Some(Body::PaymentMethodSet(b)) => json!({"account": b.account}),
        Some(Body::ApiKeyCreated(b)) => json!({
            "key_id": b.key_id,
            "account": b.account,
            "key_sha256": hex(&b.key_sha256),
            "databases_pattern": b.databases_pattern,
        }),
        Some(Body::DatabaseCreated(b)) => json!({
            "account": b.account,
            "name": b.name,
            "database_id": b.database_id,
            // Credentials stay out of dumps.
            "storage": b.storage.as_ref().map(|s| json!({
                "url": s.url,
                "region": s.region,
                "endpoint": s.endpoint,
                "access_key_id": (!s.access_key_id.is_empty()).then_some("***"),
                "secret_access_key": (!s.secret_access_key.is_empty()).then_some("***"),
            })),
        }),
        Some(Body::StorageVerified(b)) => {
            json!({"account": b.account, "name": b.name, "database_id": b.database_id})
        }
        Some(Body::DatabaseDeleted(b)) => {
            json!({"account": b.account, "name": b.name, "database_id": b.database_id})
        }
        Some(Body::DatabasePurged(b)) => {
            json!({"account": b.account, "name": b.name, "database_id": b.database_id})
        }
        Some(Body::TableCreated(b)) => json!({
            "name": b.name,
            "table_id": b.table_id,
            "database_id": b.database_id,
            "schema": b.columns.iter().map(|c| json!({
                "name": c.name, "type": c.r#type, "nullable": c.nullable,
            })).collect::<Vec<_>>(),
            "fts_columns": b.fts_columns,
            "exact_columns": b.exact_columns,
            "vector_column": (!b.vector_column.is_empty()).then_some(&b.vector_column),
            "vector_metric": (!b.vector_metric.is_empty()).then_some(&b.vector_metric),
            "start_offset": b.start_offset,
        }),
        Some(Body::TableDropped(b)) => {
            json!({"name": b.name, "table_id": b.table_id, "database_id": b.database_id})
        }
        Some(Body::RowsAppended(b)) => json!({
            "table_id": b.table_id,
            "first_row_id": b.first_row_id,
            "row_count": b.row_count,
            "vector_count": b.vector_count,
            "arrow_ipc_bytes": b.arrow_ipc.len(),
        }),
        Some(Body::RowsDeleted(b)) => json!({
            "table_id": b.table_id,
            "row_ids": b.row_ids,
            "vector_count": b.vector_count,
        }),
        Some(Body::RowsUpdated(b)) => json!({
            "table_id": b.table_id,
            "row_ids": b.row_ids,
            "arrow_ipc_bytes": b.arrow_ipc.len(),
            "vectors_removed": b.vectors_removed,
            "vectors_added": b.vectors_added,
        }),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
