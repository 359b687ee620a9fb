//! Alerting: monitors run on their schedules, and their alerts reach channels.
//!
//! An edge of the service like the HTTP layer: it reads through the engine's access door with
//! the rights of each monitor's author, renders the results as the HTTP API would, and records
//! every run and delivery in the account's `<account>/_monitors` partition: a run with the
//! alerts it owes before any is sent, each delivery after. An alert owed when the node stops is
//! delivered by whoever serves the account next: at least once.
//!
//! One [`Alerting`] per node; its scheduler ([`scheduler`]) runs the monitors of the accounts
//! this node serves (all of them alone, its share in a cluster).

use std::{collections::HashSet, sync::Arc};

use chrono::Utc;
use serde_json::Value;

use crate::{
    engine::{Engine, PlatformPrincipal},
    error::{Error, Result},
};

pub mod delivery;
mod run;
pub mod scheduler;

pub use run::Execution;

/// The node's alerting: the HTTP client and retries alerts are sent with, and what is in
/// flight.
pub struct Alerting {
    engine: Arc<Engine>,
    client: reqwest::Client,
    retry: delivery::Retry,
    /// Alerts being sent now (run, trigger, action): the scan of owed alerts leaves them be.
    sending: parking_lot::Mutex<HashSet<String>>,
    /// Monitors running now (account, id): a run is not started twice at once.
    running: parking_lot::Mutex<HashSet<(String, String)>>,
}

impl std::fmt::Debug for Alerting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Alerting").finish_non_exhaustive()
    }
}

impl Alerting {
    pub fn new(engine: Arc<Engine>) -> Result<Arc<Alerting>> {
        let client = delivery::client().map_err(|e| Error::Internal(e.to_string()))?;
        let retry = delivery::Retry {
            attempts: engine.config().alerting.attempts,
            first_delay: std::time::Duration::from_millis(engine.config().alerting.first_retry_ms),
            ..delivery::Retry::default()
        };
        Ok(Arc::new(Alerting {
            engine,
            client,
            retry,
            sending: Default::default(),
            running: Default::default(),
        }))
    }

    /// POST /monitor/{id}/execute: runs the monitor now (only `triggers` when given); a dry
    /// run renders its actions and sends and records nothing.
    pub async fn execute(
        &self,
        principal: &PlatformPrincipal,
        id: &str,
        triggers: Option<Vec<String>>,
        dryrun: bool,
    ) -> Result<Value> {
        let monitor = self.engine.monitor_for(principal, id, "execute").await?;
        let now = Utc::now();
        let last = self
            .engine
            .monitor_runs_state(&monitor.account)
            .await?
            .history(id)
            .map_or(0, |h| h.last_planned_micros);
        let execution = Execution {
            planned: None,
            period_start: chrono::DateTime::from_timestamp_micros(last)
                .filter(|_| last > 0)
                .unwrap_or(now),
            period_end: now,
            dryrun,
            triggers,
        };
        Ok(self.run(&monitor, &execution).await)
    }

    /// POST /monitor/_execute: a test run of the unsaved monitor `doc` (checked as saving it
    /// would, run as `principal`, a dry run: its actions rendered, nothing sent or recorded),
    /// with the next five times its schedule would run it from now (`next_runs`).
    pub async fn execute_draft(&self, principal: &PlatformPrincipal, doc: &Value) -> Result<Value> {
        let monitor = self.engine.draft_monitor(principal, doc)?;
        let saved: Value = serde_json::from_str(&monitor.monitor_json)
            .map_err(|e| Error::Internal(format!("a checked monitor is not JSON: {e}")))?;
        let now = Utc::now();
        let schedule = crate::engine::monitors::schedule::Schedule::parse(&saved["schedule"])
            .map_err(|e| Error::BadRequest(format!("schedule: {e}")))?;
        let mut next_runs = Vec::new();
        let mut after = now;
        while next_runs.len() < 5 {
            let Some(next) = schedule.next_after(after) else {
                break;
            };
            next_runs.push(Value::String(
                next.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            ));
            after = next;
        }
        let execution = Execution {
            planned: None,
            period_start: now,
            period_end: now,
            dryrun: true,
            triggers: None,
        };
        let mut result = self.run(&monitor, &execution).await;
        result["next_runs"] = Value::Array(next_runs);
        Ok(result)
    }
}
