//! A database as it was at a point of its log: the tables that existed then and, per table, the
//! row events that made its content. `strata-replay restore` turns this into a new database,
//! either by appending to a stopped server's log or through a running server's leaders; both
//! copy the same events, so the copy is replayable and verifiable like any database.
//!
//! The cut is a time (every event at or before it), or an offset of the database's one table
//! partition (every event of the table up to and including it; the catalog as of that event's
//! time). A database with several tables is cut by time, since offsets of different partitions
//! are not comparable.

use std::collections::BTreeMap;

use strata_log::{
    CommitLog, Envelope, PartitionId,
    envelope::Body,
    event::TableCreated,
    fence::{EpochFence, Verdict},
};

use crate::{
    control::Database,
    error::{Error, Result},
};

/// Where a restore stops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cut {
    /// Microseconds since the epoch: every event stamped at or before it.
    Time(i64),
    /// An offset of the database's one table partition, included.
    Offset(u64),
}

impl Cut {
    /// An offset ("1234") or an RFC 3339 time.
    pub fn parse(text: &str) -> Result<Cut> {
        if let Ok(offset) = text.parse::<u64>() {
            return Ok(Cut::Offset(offset));
        }
        chrono::DateTime::parse_from_rfc3339(text)
            .map(|time| Cut::Time(time.timestamp_micros()))
            .map_err(|_| {
                Error::Refused(format!(
                    "--at {text:?} is neither an RFC 3339 time nor an offset"
                ))
            })
    }
}

/// One table of the database at the cut.
#[derive(Clone, Debug)]
pub struct TablePlan {
    /// The source table's creation event (its id, schema and options).
    pub created: TableCreated,
    /// Its admitted row events up to the cut, in log order, still naming the source table.
    pub rows: Vec<Body>,
}

impl TablePlan {
    /// The row events, naming `table_id` instead of the source table.
    pub fn bodies_for(&self, table_id: &str) -> Vec<Body> {
        self.rows
            .iter()
            .cloned()
            .map(|body| match body {
                Body::RowsAppended(mut b) => {
                    b.table_id = table_id.to_owned();
                    Body::RowsAppended(b)
                }
                Body::RowsDeleted(mut b) => {
                    b.table_id = table_id.to_owned();
                    Body::RowsDeleted(b)
                }
                Body::RowsUpdated(mut b) => {
                    b.table_id = table_id.to_owned();
                    Body::RowsUpdated(b)
                }
                other => other,
            })
            .collect()
    }

    /// Live rows and vectors after the row events: what the copy adds to its account's usage.
    pub fn net_counts(&self) -> (u64, u64) {
        let (mut rows, mut vectors) = (0i128, 0i128);
        for body in &self.rows {
            match body {
                Body::RowsAppended(b) => {
                    rows += i128::from(b.row_count) - b.tombstoned_row_ids.len() as i128;
                    vectors += i128::from(b.vector_count) - i128::from(b.tombstoned_vector_count);
                }
                Body::RowsDeleted(b) => {
                    rows -= b.row_ids.len() as i128;
                    vectors -= i128::from(b.vector_count);
                }
                Body::RowsUpdated(b) => {
                    vectors += i128::from(b.vectors_added) - i128::from(b.vectors_removed);
                }
                _ => {}
            }
        }
        (rows.max(0) as u64, vectors.max(0) as u64)
    }
}

/// The database `source` at `cut`: its tables by name.
#[derive(Clone, Debug)]
pub struct Plan {
    pub tables: BTreeMap<String, TablePlan>,
}

impl Plan {
    pub fn row_events(&self) -> usize {
        self.tables.values().map(|t| t.rows.len()).sum()
    }
}

/// Reads what `source` held at `cut` from `log`.
pub async fn plan(log: &dyn CommitLog, source: &Database, cut: Cut) -> Result<Plan> {
    if source.storage.is_some() {
        return Err(Error::Refused(
            "restoring a database with its own bucket is not supported".to_owned(),
        ));
    }
    let prefix = PartitionId::database_prefix(&source.account, &source.name);
    let catalog = PartitionId::catalog(&source.account, &source.name);
    let catalog_events = admitted(log, &catalog).await?;
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
                return Err(Error::Refused(format!(
                    "an offset names a point in one table's log, and database {}/{} has {} table partitions: restore at a time instead",
                    source.account,
                    source.name,
                    table_partitions.len()
                )));
            };
            let end = log.high_water_mark(partition).await?;
            let event = match offset < end {
                true => log.read(partition, offset, 1).await?.into_iter().next(),
                false => None,
            };
            let Some(event) = event else {
                return Err(Error::Refused(format!(
                    "offset {offset} is beyond the end of {partition}, which holds offsets 0 to {}",
                    end.saturating_sub(1)
                )));
            };
            event.timestamp_micros
        }
    };

    // The catalog at the cut: table name -> its creation event.
    let mut created: BTreeMap<String, TableCreated> = BTreeMap::new();
    for event in catalog_events
        .iter()
        .filter(|e| e.timestamp_micros <= cut_time)
    {
        match &event.body {
            Some(Body::TableCreated(table)) if table.database_id == source.id => {
                created.insert(table.name.clone(), table.clone());
            }
            Some(Body::TableDropped(dropped))
                if dropped.database_id == source.id
                    && created
                        .get(&dropped.name)
                        .is_some_and(|t| t.table_id == dropped.table_id) =>
            {
                created.remove(&dropped.name);
            }
            // The copy gets the aliases the table had at the cut.
            Some(Body::AliasesChanged(changed)) if changed.database_id == source.id => {
                for alias in &changed.removed {
                    if let Some(table) = created
                        .get_mut(&alias.dataset)
                        .filter(|t| t.table_id == alias.table_id)
                    {
                        table.aliases.retain(|a| a.alias != alias.alias);
                    }
                }
                for alias in &changed.added {
                    if let Some(table) = created
                        .get_mut(&alias.dataset)
                        .filter(|t| t.table_id == alias.table_id)
                    {
                        table.aliases.retain(|a| a.alias != alias.alias);
                        table.aliases.push(alias.clone());
                    }
                }
            }
            // The copy gets the columns the table had at the cut.
            Some(Body::TableColumnsChanged(changed)) if changed.database_id == source.id => {
                if let Some(table) = created
                    .get_mut(&changed.name)
                    .filter(|t| t.table_id == changed.table_id)
                {
                    table.columns = changed.columns.clone();
                    table.declared.extend(changed.declared.clone());
                    table.date_formats.extend(changed.date_formats.clone());
                }
            }
            _ => {}
        }
    }

    let mut tables = BTreeMap::new();
    for (name, table) in created {
        let partition = PartitionId::table(&source.account, &source.name, &name);
        let mut rows = Vec::new();
        for event in admitted(log, &partition).await? {
            let included = match cut {
                Cut::Offset(offset) => event.offset <= offset,
                Cut::Time(micros) => event.timestamp_micros <= micros,
            };
            if !included || event.offset < table.start_offset {
                continue;
            }
            match event.body {
                Some(Body::RowsAppended(b)) if b.table_id == table.table_id => {
                    rows.push(Body::RowsAppended(b))
                }
                Some(Body::RowsDeleted(b)) if b.table_id == table.table_id => {
                    rows.push(Body::RowsDeleted(b))
                }
                Some(Body::RowsUpdated(b)) if b.table_id == table.table_id => {
                    rows.push(Body::RowsUpdated(b))
                }
                _ => {}
            }
        }
        tables.insert(
            name,
            TablePlan {
                created: table,
                rows,
            },
        );
    }
    Ok(Plan { tables })
}

/// Every event of `partition` the leader-epoch fence admits, markers left out.
async fn admitted(log: &dyn CommitLog, partition: &PartitionId) -> Result<Vec<Envelope>> {
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
