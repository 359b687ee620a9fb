//! The background purge of deleted databases.
//!
//! Deleting a database records `DatabaseDeleted` and answers at once; this task then closes the
//! database's runtime (waiting out a catalog change in flight), deletes its partitions (catalog
//! and tables) from the log, drops its catalog state, and records `DatabasePurged`, which frees
//! the name. Every step is idempotent: a purge cut short by a crash is resumed at start.

use std::{sync::Arc, sync::atomic::Ordering, time::Duration};

use strata_log::{PartitionId, envelope::Body, event::DatabasePurged};
use strata_projections::{
    catalog::CatalogProjection,
    control::{Database, DatabaseStatus},
};

use super::{Engine, Origin, blocking};
use crate::error::Result;

impl Engine {
    /// Starts the purge of every database whose deletion began before this process started.
    pub(super) fn resume_purges(self: &Arc<Self>) {
        let state = self.control_state();
        for database in state.databases.values() {
            if database.status == DatabaseStatus::Deleting {
                self.spawn_purge(database.clone());
            }
        }
    }

    pub(super) fn spawn_purge(self: &Arc<Self>, database: Database) {
        let engine = self.clone();
        tokio::spawn(async move {
            let delay = engine.config.debug.purge_delay_ms;
            if delay > 0 {
                tokio::time::sleep(Duration::from_millis(delay)).await;
            }
            let mut backoff = Duration::from_millis(100);
            loop {
                match engine.purge(&database).await {
                    Ok(()) => {
                        tracing::info!(account = %database.account, database = %database.name, "database purged");
                        return;
                    }
                    Err(error) => {
                        tracing::warn!(account = %database.account, database = %database.name, %error, "purge failed; retrying");
                        tokio::time::sleep(backoff).await;
                        backoff = (backoff * 2).min(Duration::from_secs(30));
                    }
                }
            }
        });
    }

    async fn purge(&self, database: &Database) -> Result<()> {
        if let Some(runtime) = self.retire_runtime(&database.id).await {
            let _permit = runtime.catalog.permit().await?;
            runtime.closed.store(true, Ordering::Release);
            for table in runtime.take_tables() {
                table.handle().close().await;
            }
        }
        self.forget_database_usage(&database.account, &database.id);
        if database.storage.is_some() {
            // In the account's own bucket only strata's files go: those of each table. With
            // no table there is nothing to do (and no reason to reach the bucket).
            let db = self.store.clone();
            let id = database.id.clone();
            let tables = blocking(move || CatalogProjection::stored_table_ids(&db, &id)).await??;
            if !tables.is_empty() {
                let bound = self.database_store(database)?;
                for table in tables {
                    let files = bound.prefix.clone().join(table.as_str());
                    super::remove_files(&bound.store, files.as_ref()).await?;
                }
            }
        } else {
            let bound = self.database_store(database)?;
            super::remove_files(&bound.store, &format!("{}/", bound.prefix)).await?;
        }
        super::remove_local_dir(&self.index_dir(&database.id, "")).await;
        let prefix = PartitionId::database_prefix(&database.account, &database.name);
        for partition in self.log.partitions().await? {
            if partition.as_str().starts_with(&prefix) {
                self.log.delete_partition(&partition).await?;
            }
        }
        let store = self.store.clone();
        let tree = CatalogProjection::tree_name(&database.id);
        blocking(move || store.drop_tree(&tree)).await??;
        let mut permit = self.control.permit().await?;
        let still_deleting = permit
            .snapshot()
            .database(&database.account, &database.name)
            .is_some_and(|d| d.id == database.id);
        if still_deleting {
            let body = Body::DatabasePurged(DatabasePurged {
                account: database.account.clone(),
                name: database.name.clone(),
                database_id: database.id.clone(),
            });
            permit.write(body, &Origin::system()).await?;
        }
        Ok(())
    }
}
