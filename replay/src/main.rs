//! `strata-replay`: audit and recovery tooling over the commit log.
//!
//! - `dump`: the events of the log as JSON lines (the format of docs/change-streams.md), filtered
//!   by partition, time, principal and kind.
//! - `audit`: who changed what and when, as a table or as JSON lines.
//! - `verify`: rebuild projections from the log and compare them with the live ones.
//! - `rebuild`: replace one table's projections by a rebuild from the log.
//! - `restore`: a point-in-time copy of a database as a new database.
//!
//! `dump` and `audit` only read: they open a read-only view of the log, whether or not a server
//! is writing it. `verify` and `restore` run in this process when no server holds the data
//! directory, and go through the running server's admin socket when one does. `rebuild`
//! replaces files a server has open, so it refuses to run beside one. Long runs show a progress
//! bar on a terminal.

mod audit;
mod progress;
mod rebuild;
mod restore;
mod verify;

use std::{
    path::{Path, PathBuf},
    sync::Arc,
};

use anyhow::{Context, bail};
use chrono::{DateTime, Utc};
use clap::{Args, Parser, Subcommand};
use strata_log::{CommitLog, FileLog, FileLogOptions, KafkaLog, KafkaOptions};
use strata_projections::changes::event_json;

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
    /// Who changed what and when: a table, or JSON lines with --json
    Audit(audit::Audit),
    /// Rebuild projections from the log and compare them with the live ones (exit 0: all match)
    Verify(verify::Verify),
    /// Replace one table's projections by a rebuild from the log (the server stopped)
    Rebuild(rebuild::Rebuild),
    /// Copy a database as it was at a time or offset into a new database (the server stopped)
    Restore(restore::Restore),
}

#[derive(Args)]
pub(crate) struct Location {
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
    pub(crate) fn data_dir(&self) -> anyhow::Result<PathBuf> {
        if let Some(dir) = &self.data_dir {
            return Ok(dir.clone());
        }
        if let Some(dir) = self
            .config_file()?
            .as_ref()
            .and_then(|t| t.get("data_dir"))
            .and_then(toml::Value::as_str)
        {
            return Ok(PathBuf::from(dir));
        }
        Ok(std::env::var_os("STRATA_DATA_DIR")
            .map_or_else(|| PathBuf::from("./data"), PathBuf::from))
    }

    /// The configuration file's keys, if there is one (--config or STRATA_CONFIG).
    fn config_file(&self) -> anyhow::Result<Option<toml::Table>> {
        let Some(file) = self
            .config
            .clone()
            .or_else(|| std::env::var_os("STRATA_CONFIG").map(PathBuf::from))
        else {
            return Ok(None);
        };
        let text = std::fs::read_to_string(&file)
            .with_context(|| format!("cannot read {}", file.display()))?;
        Ok(Some(
            toml::from_str(&text).with_context(|| format!("invalid {}", file.display()))?,
        ))
    }

    /// The server's log, as its configuration says: `[log] backend` and `[log.kafka]` in the
    /// file, overridden by STRATA_LOG_BACKEND and STRATA_LOG_KAFKA_* as for the server.
    fn backend(&self) -> anyhow::Result<Backend> {
        let file = self.config_file()?.unwrap_or_default();
        let log = file.get("log").and_then(toml::Value::as_table);
        let kafka = log
            .and_then(|l| l.get("kafka"))
            .and_then(toml::Value::as_table);
        let setting = |env: &str, table: Option<&toml::Table>, key: &str, default: &str| {
            std::env::var(env).ok().unwrap_or_else(|| {
                table
                    .and_then(|t| t.get(key))
                    .map(|v| match v {
                        toml::Value::String(text) => text.clone(),
                        other => other.to_string(),
                    })
                    .unwrap_or_else(|| default.to_owned())
            })
        };
        match setting("STRATA_LOG_BACKEND", log, "backend", "file").as_str() {
            "file" => Ok(Backend::File),
            "kafka" => {
                let replication = setting(
                    "STRATA_LOG_KAFKA_REPLICATION_FACTOR",
                    kafka,
                    "replication_factor",
                    "1",
                );
                Ok(Backend::Kafka(KafkaOptions {
                    replication_factor: replication.parse().with_context(|| {
                        format!("log.kafka.replication_factor {replication:?} is not a number")
                    })?,
                    ..KafkaOptions::new(
                        setting(
                            "STRATA_LOG_KAFKA_BROKERS",
                            kafka,
                            "brokers",
                            "127.0.0.1:9092",
                        ),
                        setting(
                            "STRATA_LOG_KAFKA_TOPIC_PREFIX",
                            kafka,
                            "topic_prefix",
                            "strata",
                        ),
                    )
                }))
            }
            other => bail!("log.backend {other:?}: use \"file\" or \"kafka\""),
        }
    }
}

/// Where the server's log lives.
enum Backend {
    File,
    Kafka(KafkaOptions),
}

/// A view of the server's log for reading, as it is now; a server may be writing it. For a
/// FileLog, a read-only view of `<data_dir>/log`.
pub(crate) async fn read_log(location: &Location) -> anyhow::Result<Arc<dyn CommitLog>> {
    match location.backend()? {
        Backend::File => {
            let data_dir = location.data_dir()?;
            let root = data_dir.join("log");
            if !root.exists() {
                bail!("{} holds no log", data_dir.display());
            }
            Ok(Arc::new(FileLog::open_read_only(&root).with_context(
                || format!("cannot read the log in {}", root.display()),
            )?))
        }
        Backend::Kafka(options) => Ok(Arc::new(KafkaLog::connect(options).await?)),
    }
}

/// The server's log, for writing: no server may be using it (the caller holds the data
/// directory's lock).
pub(crate) async fn open_log(location: &Location) -> anyhow::Result<Arc<dyn CommitLog>> {
    let data_dir = location.data_dir()?;
    let options = match location.backend()? {
        Backend::Kafka(options) => return Ok(Arc::new(KafkaLog::connect(options).await?)),
        Backend::File => FileLogOptions::default(),
    };
    let root = data_dir.join("log");
    if !root.exists() {
        bail!("{} holds no log", data_dir.display());
    }
    match FileLog::open(&root, options) {
        Ok(log) => Ok(Arc::new(log)),
        Err(strata_log::Error::Locked { .. }) => bail!(
            "the log in {} is in use by a running server; stop it first",
            data_dir.display()
        ),
        Err(error) => Err(error.into()),
    }
}

fn main() -> anyhow::Result<std::process::ExitCode> {
    let cli = Cli::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let ok = match cli.command {
        Command::Dump(dump) => runtime.block_on(run_dump(dump)).map(|()| true),
        Command::Audit(audit) => runtime.block_on(audit::run(audit)).map(|()| true),
        Command::Verify(verify) => runtime.block_on(verify::run(verify)),
        Command::Rebuild(rebuild) => runtime.block_on(rebuild::run(rebuild)).map(|()| true),
        Command::Restore(restore) => runtime.block_on(restore::run(restore)).map(|()| true),
    }?;
    Ok(match ok {
        true => std::process::ExitCode::SUCCESS,
        false => std::process::ExitCode::FAILURE,
    })
}

async fn run_dump(dump: Dump) -> anyhow::Result<()> {
    let log = read_log(&dump.location).await?;
    let partitions = match &dump.partition {
        Some(name) => vec![strata_log::PartitionId::new(name.clone())?],
        None => log.partitions().await?,
    };
    let from = dump.from.map(|t| t.timestamp_micros());
    let to = dump.to.map(|t| t.timestamp_micros());
    let progress = progress::events(log.as_ref(), &partitions).await?;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for partition in partitions {
        let mut next = 0;
        loop {
            let events = log.read(&partition, next, 1024).await?;
            let Some(last) = events.last() else {
                break;
            };
            next = last.offset + 1;
            progress.inc(events.len() as u64);
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
                    writeln!(out, "{}", event_json(&event)?)?;
                }
            }
        }
    }
    progress.finish_and_clear();
    Ok(())
}

/// Sends one request to the admin socket of the server that holds `data_dir` (the server's
/// `admin` module answers it), so that the server's leaders stay the only writers of its log,
/// and returns its result.
async fn admin(data_dir: &Path, request: serde_json::Value) -> anyhow::Result<serde_json::Value> {
    let reply = strata_datadir::send(data_dir, &request, std::time::Duration::ZERO).await?;
    strata_datadir::result_of(reply)
}
