//! `strata-replay verify` and `restore` run inside a running server (through its admin
//! socket), so that they work whether the server is running or not.
//!
//! Verify compares the engine's own snapshots with a rebuild in a scratch directory over a
//! [`Prefix`] of the log that ends exactly where each snapshot ends: writes go on meanwhile, and
//! each comparison is of the same state. Restore writes its copy through the engine's leaders,
//! with the checks any new database gets (name, existing names, plan limits); if it fails
//! half-way, the partial copy is deleted.

use std::sync::Arc;

use serde::Serialize;
use strata_log::{CommitLog, PartitionId, Prefix, envelope::Body};
use strata_projections::{
    control::{Database, DatabaseStatus},
    restore::{Cut, plan},
    verify::{Report, Side, TableCheck, catalog_difference, compare_tables, control_difference},
};

use super::{Engine, Origin, Principal, quota::Counts};
use crate::error::{Error, Result};

/// What a restore wrote.
#[derive(Clone, Debug, Serialize)]
pub struct RestoreSummary {
    /// "<account>/<database>" copied.
    pub source: String,
    /// The cut as given.
    pub at: String,
    /// "<account>/<database>" created.
    pub into: String,
    pub tables: usize,
    pub row_events: usize,
}

/// A refusal of the projections crate (a bad cut, an unknown database) as a 400.
fn refusal(error: strata_projections::Error) -> Error {
    match error {
        strata_projections::Error::Refused(message) => Error::BadRequest(message),
        other => Error::Projection(other),
    }
}

impl Engine {
    /// Rebuilds the control state, and the catalogs and tables of every ready database (or of
    /// `database`, or one `table` of it), from the log, and compares them with this engine's.
    pub async fn verify(&self, database: Option<&str>, table: Option<&str>) -> Result<Report> {
        let scratch = tempfile::Builder::new()
            .prefix(".verify-")
            .tempdir_in(&self.config.data_dir)
            .map_err(|e| Error::Internal(format!("cannot create a scratch directory: {e}")))?;
        let rebuilt = Side::rebuild(scratch.path())?;
        let mut report = Report::default();

        let (checkpoint, control) = self.control.projector().applied();
        let prefix = self.prefix(PartitionId::control(), checkpoint.next_offset);
        let rebuilt_control = rebuilt.control(&prefix).await?;
        report.checked += 1;
        if *control != rebuilt_control {
            report
                .problems
                .push(control_difference(&control, &rebuilt_control));
        }
        let databases: Vec<Database> = match database {
            Some(spec) => vec![control.find_ready(spec).map_err(refusal)?.clone()],
            None => control
                .databases
                .values()
                .filter(|d| d.status == DatabaseStatus::Ready)
                .cloned()
                .collect(),
        };
        for database in &databases {
            self.verify_database(&rebuilt, database, table, &mut report)
                .await?;
        }
        Ok(report)
    }

    async fn verify_database(
        &self,
        rebuilt: &Side,
        database: &Database,
        only: Option<&str>,
        report: &mut Report,
    ) -> Result<()> {
        let name = format!("{}/{}", database.account, database.name);
        let runtime = self.runtime_beyond_capacity(database).await?;
        let (checkpoint, catalog) = runtime.catalog.projector().applied();
        let partition = PartitionId::catalog(&database.account, &database.name);
        let rebuilt_catalog = rebuilt
            .catalog(&self.prefix(partition, checkpoint.next_offset), database)
            .await?;
        report.checked += 1;
        if *catalog != rebuilt_catalog {
            report
                .problems
                .push(catalog_difference(&name, &catalog, &rebuilt_catalog));
        }
        if let Some(only) = only
            && !catalog.tables.contains_key(only)
        {
            return Err(Error::TableNotFound(format!("{name}/{only}")));
        }
        for (table, def) in &catalog.tables {
            if only.is_some_and(|t| t != table) {
                continue;
            }
            let target = format!("{name}/{table}");
            report.checked += 1;
            let outcome = async {
                let table = self.table_runtime(&runtime, def).await?;
                let (checkpoint, snapshot) = table.leader.projector().applied();
                let live = TableCheck::of(snapshot).await?;
                let (partition, _) = table.progress();
                let prefix = self.prefix(partition, checkpoint.next_offset);
                let rebuilt_table = rebuilt.table(&prefix, database, def).await?;
                Ok::<_, Error>(
                    compare_tables(self.log.as_ref(), database, def, live, rebuilt_table).await?,
                )
            };
            match outcome.await {
                Ok(None) => report.matched.push(target),
                Ok(Some(problem)) => report.problems.push(format!("{target}: {problem}")),
                Err(error) => report.problems.push(format!("{target}: {error}")),
            }
        }
        Ok(())
    }

    /// The log up to `end` of `partition`, and nothing of any other.
    fn prefix(&self, partition: PartitionId, end: u64) -> Arc<dyn CommitLog> {
        Arc::new(Prefix::new(self.log.clone(), [(partition, end)]))
    }

    /// Copies database `source` ("<account>/<database>", or "<database>" when one account has
    /// it) as it was at `at` (an RFC 3339 time or an offset of its one table partition) into a
    /// new database `into` of the same account.
    pub async fn restore(
        self: &Arc<Self>,
        source: &str,
        at: &str,
        into: &str,
        origin: &Origin,
    ) -> Result<RestoreSummary> {
        let cut = Cut::parse(at).map_err(refusal)?;
        let source = self
            .control_state()
            .find_ready(source)
            .map_err(refusal)?
            .clone();
        // As the offline restore stamps its events.
        let origin = &Origin {
            principal: origin.principal.clone(),
            request_id: format!("restore:{}/{}@{at}", source.account, source.name),
        };
        let plan = plan(self.log.as_ref(), &source, cut)
            .await
            .map_err(refusal)?;
        let principal = Principal {
            account: source.account.clone(),
            key_id: "admin".to_owned(),
            databases_pattern: "*".to_owned(),
        };
        let (rows, vectors) = plan.tables.values().fold((0, 0), |(r, v), table| {
            let (rows, vectors) = table.net_counts();
            (r + rows, v + vectors)
        });
        let reservation = self
            .reserve(&source.account, Counts { rows, vectors })
            .await?;
        self.create_database(&principal, into, None, origin).await?;
        let copied = self.copy_tables(&principal, into, &plan, origin).await;
        drop(reservation);
        if let Err(error) = copied {
            tracing::warn!(%error, database = %into, "restore failed; deleting its partial copy");
            if let Err(cleanup) = self.delete_database(&principal, into, origin).await {
                tracing::error!(%cleanup, database = %into, "cannot delete a failed restore's copy");
            }
            return Err(error);
        }
        Ok(RestoreSummary {
            source: format!("{}/{}", source.account, source.name),
            at: at.to_owned(),
            into: format!("{}/{into}", source.account),
            tables: plan.tables.len(),
            row_events: plan.row_events(),
        })
    }

    async fn copy_tables(
        &self,
        principal: &Principal,
        into: &str,
        plan: &strata_projections::restore::Plan,
        origin: &Origin,
    ) -> Result<()> {
        let database = self.ready_database(principal, into)?;
        let runtime = self.runtime_beyond_capacity(&database).await?;
        for (name, table) in &plan.tables {
            let partition = PartitionId::table(&database.account, &database.name, name);
            let mut created = table.created.clone();
            created.table_id = uuid::Uuid::now_v7().to_string();
            created.database_id = database.id.clone();
            created.start_offset = self.log.high_water_mark(&partition).await?;
            let catalog = runtime
                .catalog
                .permit()
                .await?
                .write(Body::TableCreated(created), origin)
                .await?;
            let def = catalog.tables.get(name).cloned().ok_or_else(|| {
                Error::Internal(format!("table {name} missing after its creation"))
            })?;
            let target = self.table_runtime(&runtime, &def).await?;
            let mut permit = target.leader.permit().await?;
            let mut after = permit.snapshot();
            for body in table.bodies_for(&def.id) {
                after = permit.write(body, origin).await?;
            }
            drop(permit);
            self.record_usage(&database.account, &database.id, &def.id, Counts::of(&after));
        }
        Ok(())
    }
}
