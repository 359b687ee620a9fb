//! Plan ceilings on stored rows and vectors, per account.
//!
//! An account's usage is the sum of the live rows and vectors of its tables, which the table
//! projections know exactly. The engine keeps a ledger per account: the counts of each table
//! (filled in once per table, then updated after every write) and the rows and vectors of
//! appends in flight, reserved before their event is appended. So two concurrent appends cannot
//! both pass a check that only one of them fits. Deletes and reads are never refused; deleted
//! rows free their quota at once.

use std::collections::HashMap;

use strata_projections::{control::DatabaseStatus, table::TableSnapshot};

use super::Engine;
use crate::error::{Error, LimitDetails, Result};

/// Rows and vectors.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub rows: u64,
    pub vectors: u64,
}

impl Counts {
    pub fn of(snapshot: &TableSnapshot) -> Counts {
        Counts {
            rows: snapshot.live_rows,
            vectors: snapshot.live_vectors,
        }
    }
}

/// One account's usage.
#[derive(Debug, Default)]
pub(super) struct Ledger {
    /// Live counts by table id (with the table's database id), for the tables counted so far.
    tables: HashMap<String, (String, Counts)>,
    /// Appends in flight.
    reserved: Counts,
}

impl Ledger {
    fn used(&self) -> Counts {
        self.tables
            .values()
            .fold(self.reserved, |sum, (_, c)| Counts {
                rows: sum.rows + c.rows,
                vectors: sum.vectors + c.vectors,
            })
    }
}

/// Room reserved for an append in flight; given back when dropped (the append then counts
/// through its table, or failed).
pub(super) struct Reservation<'a> {
    engine: &'a Engine,
    account: String,
    counts: Counts,
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        let mut usage = self.engine.usage.lock();
        if let Some(ledger) = usage.get_mut(&self.account) {
            ledger.reserved.rows -= self.counts.rows;
            ledger.reserved.vectors -= self.counts.vectors;
        }
    }
}

impl Engine {
    /// Reserves room for `add` within the account's plan, or refuses with 403.
    pub(super) async fn reserve(&self, account: &str, add: Counts) -> Result<Reservation<'_>> {
        self.count_tables(account).await?;
        let state = self.control_state();
        let owner = state
            .accounts
            .get(account)
            .ok_or_else(|| Error::AccountNotFound(account.to_owned()))?;
        let plan = self.plan(owner);
        let paid = &self.config.plans.paid;
        let mut usage = self.usage.lock();
        let ledger = usage.entry(account.to_owned()).or_default();
        let used = ledger.used();
        let check = |limit: &'static str, used: u64, requested: u64, max: u64, paid_max: u64| {
            if used + requested <= max {
                return Ok(());
            }
            let raises = !owner.payment_method && paid_max > max;
            Err(Error::LimitReached {
                message: format!(
                    "account {account:?} stores {used} {limit}; adding {requested} would pass the {max} its plan allows{}",
                    if raises {
                        "; adding a payment method raises the limit"
                    } else {
                        "; delete rows to make room"
                    }
                ),
                details: LimitDetails {
                    limit,
                    used,
                    requested,
                    max,
                    payment_method_raises: raises,
                },
            })
        };
        check("rows", used.rows, add.rows, plan.max_rows, paid.max_rows)?;
        check(
            "vectors",
            used.vectors,
            add.vectors,
            plan.max_vectors,
            paid.max_vectors,
        )?;
        ledger.reserved.rows += add.rows;
        ledger.reserved.vectors += add.vectors;
        Ok(Reservation {
            engine: self,
            account: account.to_owned(),
            counts: add,
        })
    }

    /// Records a table's counts after a write to it.
    pub(super) fn record_usage(
        &self,
        account: &str,
        database_id: &str,
        table_id: &str,
        counts: Counts,
    ) {
        self.usage
            .lock()
            .entry(account.to_owned())
            .or_default()
            .tables
            .insert(table_id.to_owned(), (database_id.to_owned(), counts));
    }

    /// Forgets a dropped table.
    pub(super) fn forget_table_usage(&self, account: &str, table_id: &str) {
        if let Some(ledger) = self.usage.lock().get_mut(account) {
            ledger.tables.remove(table_id);
        }
    }

    /// Forgets every table of a purged database.
    pub(super) fn forget_database_usage(&self, account: &str, database_id: &str) {
        if let Some(ledger) = self.usage.lock().get_mut(account) {
            ledger
                .tables
                .retain(|_, (database, _)| database != database_id);
        }
    }

    /// Makes sure every table of the account is in its ledger, activating the ones whose counts
    /// this process does not know yet.
    async fn count_tables(&self, account: &str) -> Result<()> {
        let state = self.control_state();
        for database in state
            .databases_of(account)
            .filter(|d| d.status == DatabaseStatus::Ready)
        {
            let runtime = self.runtime_beyond_capacity(database).await?;
            for def in runtime.catalog.snapshot().tables.values() {
                let known = self
                    .usage
                    .lock()
                    .get(account)
                    .is_some_and(|ledger| ledger.tables.contains_key(&def.id));
                if !known {
                    let table = self.table_runtime(&runtime, def).await?;
                    let counts = Counts::of(&table.snapshot());
                    self.usage
                        .lock()
                        .entry(account.to_owned())
                        .or_default()
                        .tables
                        .entry(def.id.clone())
                        .or_insert((database.id.clone(), counts));
                }
            }
        }
        Ok(())
    }
}
