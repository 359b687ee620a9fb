//! `strata-replay restore`: a point-in-time copy of a database, as a new database.
//!
//! The copy is made of events, like everything else: a `database_created` for the new database,
//! a `table_created` for each table that existed at the cut (new table ids), and, per table, its
//! row events up to the cut, copied with the new table id. They are appended to the log of the
//! stopped server, which projects the new database when it next starts, as it projects any
//! other: queryable, replayable, verifiable. The events say `admin` did it, with the request id
//! `restore:<source>@<cut>`.
//!
//! The cut is a time (every event at or before it), or an offset of the database's one table
//! partition (every event of the table up to and including it; the catalog as of that event's
//! time). A database with several tables is cut by time.

use std::{collections::BTreeMap, sync::Arc};

use anyhow::{Context, bail};
use chrono::{DateTime, Utc};
use clap::Args;
use strata_log::{
    CommitLog, Envelope, PartitionId,
    envelope::Body,
    event::{DatabaseCreated, TableCreated},
    fence::{EpochFence, Verdict, fence_before},
};
use strata_projections::{Projector, StateStore, control::ControlProjection};

use crate::{Location, find_database, open_log, progress, verify::lock_data_dir};

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

/// Where the copy stops.
enum Cut {
    Time(i64),
    Offset(u64),
}

pub async fn run(restore: Restore) -> anyhow::Result<()> {
    let cut = match restore.at.parse::<u64>() {
        Ok(offset) => Cut::Offset(offset),
        Err(_) => Cut::Time(
            restore
                .at
                .parse::<DateTime<Utc>>()
                .with_context(|| {
                    format!(
                        "--at {:?} is neither an RFC 3339 time nor an offset",
                        restore.at
                    )
                })?
                .timestamp_micros(),
        ),
    };
    check_name(&restore.into)?;
    let data_dir = restore.location.data_dir()?;
    let _lock = lock_data_dir(&data_dir)?;
    let log: Arc<dyn CommitLog> = Arc::new(open_log(&data_dir)?);
    let state = StateStore::open(data_dir.join("state"))?;
    let control = Projector::start(log.clone(), ControlProjection::open(&state)?)
        .await?
        .snapshot();
    drop(state);
    let source = find_database(&control, &restore.database)?;
    if control.database(&source.account, &restore.into).is_some() {
        bail!(
            "database {}/{} exists; restore into a new name",
            source.account,
            restore.into
        );
    }
    if source.storage.is_some() {
        bail!("restoring a database with its own bucket is not supported");
    }

    // The source's table partitions with events of this incarnation.
    let prefix = PartitionId::database_prefix(&source.account, &source.name);
    let catalog = PartitionId::catalog(&source.account, &source.name);
    let catalog_events = admitted(log.as_ref(), &catalog).await?;
    let table_partitions: Vec<PartitionId> = log
        .partitions()
        .await?
        .into_iter()
        .filter(|p| p.as_str().starts_with(&prefix) && *p != catalog)
        .collect();
    let cut_time = match cut {
        Cut::Time(micros) => micros,
        Cut::Offset(offset) => {
            let [partition] = table_partitions.as_slice() else {
                bail!(
                    "an offset names a point in one table's log, and database {} has {} table partitions: restore at a time instead",
                    restore.database,
                    table_partitions.len()
                );
            };
            let event = log
                .read(partition, offset, 1)
                .await?
                .into_iter()
                .next()
                .with_context(|| format!("offset {offset} is beyond the end of {partition}"))?;
            event.timestamp_micros
        }
    };

    // The catalog at the cut: table name -> its creation event.
    let mut tables: BTreeMap<String, TableCreated> = BTreeMap::new();
    for event in catalog_events
        .iter()
        .filter(|e| e.timestamp_micros <= cut_time)
    {
        match &event.body {
            Some(Body::TableCreated(created)) if created.database_id == source.id => {
                tables.insert(created.name.clone(), created.clone());
            }
            Some(Body::TableDropped(dropped))
                if dropped.database_id == source.id
                    && tables
                        .get(&dropped.name)
                        .is_some_and(|t| t.table_id == dropped.table_id) =>
            {
                tables.remove(&dropped.name);
            }
            _ => {}
        }
    }

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
    let bar = progress::bar(tables.len() as u64, "tables");
    let mut rows_events = 0;
    for created in tables.values() {
        let from = PartitionId::table(&source.account, &source.name, &created.name);
        let to = PartitionId::table(&source.account, &restore.into, &created.name);
        let table_id = uuid::Uuid::now_v7().to_string();
        let table = TableCreated {
            table_id: table_id.clone(),
            database_id: database_id.clone(),
            start_offset: log.high_water_mark(&to).await?,
            ..created.clone()
        };
        log.append(
            &new_catalog,
            vec![stamp(Body::TableCreated(table), catalog_epoch)],
        )
        .await?;
        let epoch = newest_epoch(log.as_ref(), &to).await?;
        let mut copies = Vec::new();
        for event in admitted(log.as_ref(), &from).await? {
            let included = match cut {
                Cut::Offset(offset) => event.offset <= offset,
                Cut::Time(micros) => event.timestamp_micros <= micros,
            };
            if !included || event.offset < created.start_offset {
                continue;
            }
            let body = match event.body {
                Some(Body::RowsAppended(mut b)) if b.table_id == created.table_id => {
                    b.table_id = table_id.clone();
                    Body::RowsAppended(b)
                }
                Some(Body::RowsDeleted(mut b)) if b.table_id == created.table_id => {
                    b.table_id = table_id.clone();
                    Body::RowsDeleted(b)
                }
                Some(Body::RowsUpdated(mut b)) if b.table_id == created.table_id => {
                    b.table_id = table_id.clone();
                    Body::RowsUpdated(b)
                }
                _ => continue,
            };
            copies.push(stamp(body, epoch));
        }
        rows_events += copies.len();
        for chunk in copies.chunks(256) {
            log.append(&to, chunk.to_vec()).await?;
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    let count = match tables.len() {
        1 => "1 table".to_owned(),
        n => format!("{n} tables"),
    };
    println!(
        "restored {}/{} at {} into {}/{}: {count}, {rows_events} row events",
        source.account, source.name, restore.at, source.account, restore.into,
    );
    Ok(())
}

/// Every event of `partition` the leader-epoch fence admits, markers left out.
async fn admitted(log: &dyn CommitLog, partition: &PartitionId) -> anyhow::Result<Vec<Envelope>> {
    let mut fence = EpochFence::default();
    let mut out = Vec::new();
    let mut next = 0;
    loop {
        let events = log.read(partition, next, 1024).await?;
        let Some(last) = events.last() else {
            return Ok(out);
        };
        next = last.offset + 1;
        out.extend(
            events
                .into_iter()
                .filter(|e| fence.judge(e) == Verdict::Admit),
        );
    }
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
