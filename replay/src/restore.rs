//! `strata-replay restore`: a point-in-time copy of a database, as a new database (see
//! `strata_projections::restore` for the cut).
//!
//! The copy is made of events, like everything else: a `database_created` for the new database,
//! a `table_created` for each table that existed at the cut (new table ids), and, per table, its
//! row events up to the cut, copied with the new table id. The events say `admin` did it, with
//! the request id `restore:<source>@<cut>`.
//!
//! With a server running, the request goes through its admin socket and the server writes the
//! copy through its own leaders, with the checks of any new database (name, plan limits); the
//! new database is queryable when the command returns. With none, the events are appended to
//! the log here, stamped with each partition's newest leader epoch, and the server projects the
//! new database when it next starts.

use anyhow::bail;
use chrono::Utc;
use clap::Args;
use serde_json::json;
use strata_log::{
    CommitLog, Envelope, PartitionId,
    envelope::Body,
    event::{DatabaseCreated, TableCreated},
    fence::fence_before,
};
use strata_projections::{
    Projector, StateStore,
    control::ControlProjection,
    restore::{Cut, plan},
};

use strata_datadir::DataDir;

use crate::{Location, admin, open_log, progress};

#[derive(Args)]
pub struct Restore {
    #[command(flatten)]
    location: Location,
    /// The database to copy: "<account>/<database>", or "<database>" when one account has it
    #[arg(long)]
    database: String,
    /// The cut: an RFC 3339 time, or an offset of the database's one table partition
    #[arg(long)]
    at: String,
    /// The new database's name (in the same account)
    #[arg(long)]
    into: String,
}

pub async fn run(restore: Restore) -> anyhow::Result<()> {
    let cut = Cut::parse(&restore.at)?;
    check_name(&restore.into)?;
    let data_dir = restore.location.data_dir()?;
    let Some(_lock) = DataDir::try_acquire(&data_dir)? else {
        let result = admin(
            &data_dir,
            json!({"op": "restore", "database": restore.database, "at": restore.at, "into": restore.into}),
        )
        .await?;
        println!("{}", summary(&result));
        return Ok(());
    };
    let log = open_log(&restore.location).await?;
    let state = StateStore::open(data_dir.join("state"))?;
    let control = Projector::start(log.clone(), ControlProjection::open(&state)?)
        .await?
        .snapshot();
    drop(state);
    let source = control.find_ready(&restore.database)?.clone();
    if control.database(&source.account, &restore.into).is_some() {
        bail!(
            "database {}/{} exists; restore into a new name",
            source.account,
            restore.into
        );
    }
    let plan = plan(log.as_ref(), &source, cut).await?;

    let request_id = format!("restore:{}/{}@{}", source.account, source.name, restore.at);
    let stamp = |body: Body, epoch: u64| Envelope {
        event_id: uuid::Uuid::now_v7().to_string(),
        timestamp_micros: Utc::now().timestamp_micros(),
        principal: "admin".to_owned(),
        request_id: request_id.clone(),
        epoch,
        body: Some(body),
        ..Default::default()
    };
    let database_id = uuid::Uuid::now_v7().to_string();
    let control_partition = PartitionId::control();
    let epoch = newest_epoch(log.as_ref(), &control_partition).await?;
    log.append(
        &control_partition,
        vec![stamp(
            Body::DatabaseCreated(DatabaseCreated {
                account: source.account.clone(),
                name: restore.into.clone(),
                database_id: database_id.clone(),
                storage: None,
            }),
            epoch,
        )],
    )
    .await?;

    let new_catalog = PartitionId::catalog(&source.account, &restore.into);
    let catalog_epoch = newest_epoch(log.as_ref(), &new_catalog).await?;
    let bar = progress::bar(plan.tables.len() as u64, "tables");
    for (name, table) in &plan.tables {
        let to = PartitionId::table(&source.account, &restore.into, name);
        let table_id = uuid::Uuid::now_v7().to_string();
        let created = TableCreated {
            table_id: table_id.clone(),
            database_id: database_id.clone(),
            start_offset: log.high_water_mark(&to).await?,
            ..table.created.clone()
        };
        log.append(
            &new_catalog,
            vec![stamp(Body::TableCreated(created), catalog_epoch)],
        )
        .await?;
        let epoch = newest_epoch(log.as_ref(), &to).await?;
        let copies: Vec<Envelope> = table
            .bodies_for(&table_id)
            .into_iter()
            .map(|body| stamp(body, epoch))
            .collect();
        for chunk in copies.chunks(256) {
            log.append(&to, chunk.to_vec()).await?;
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    println!(
        "{}",
        summary(&json!({
            "source": format!("{}/{}", source.account, source.name),
            "at": restore.at,
            "into": format!("{}/{}", source.account, restore.into),
            "tables": plan.tables.len(),
            "row_events": plan.row_events(),
        }))
    );
    Ok(())
}

/// The line restore prints, from its summary (the server's answer has the same fields).
fn summary(result: &serde_json::Value) -> String {
    let field = |name: &str| match &result[name] {
        serde_json::Value::String(text) => text.clone(),
        other => other.to_string(),
    };
    let count = match result["tables"].as_u64() {
        Some(1) => "1 table".to_owned(),
        _ => format!("{} tables", field("tables")),
    };
    format!(
        "restored {} at {} into {}: {count}, {} row events",
        field("source"),
        field("at"),
        field("into"),
        field("row_events")
    )
}

/// The newest leader epoch of `partition`: events written now must carry it, or every reader
/// would take them for a deposed leader's.
async fn newest_epoch(log: &dyn CommitLog, partition: &PartitionId) -> anyhow::Result<u64> {
    Ok(fence_before(log, partition, u64::MAX).await?.newest())
}

/// The database name rule (docs/api.md, "Names").
fn check_name(name: &str) -> anyhow::Result<()> {
    let ok = !name.is_empty()
        && name.chars().count() <= 128
        && !name.starts_with('_')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !ok {
        bail!(
            "--into {name:?} is not a database name: 1 to 128 of A-Z a-z 0-9 _ -, not starting with _"
        );
    }
    Ok(())
}
