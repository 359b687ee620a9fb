//! The runs of an account's monitors: its `<account>/_monitors` partition, written by one leader
//! (the node that serves the account) and projected into [`RunsState`].
//!
//! A run is recorded with the alerts it owes before any is sent, and each delivery after it is
//! sent or given up on: a node that stops in between leaves the alert owed, and whoever serves
//! the account next delivers it (at least once). The newest planned start of each monitor is
//! there too, so a restarted scheduler neither repeats nor skips a run.

use std::sync::Arc;

use serde_json::{Value, json};
use strata_log::{
    envelope::Body,
    event::{AlertDelivered, MonitorRan},
};
use strata_projections::{
    control::{ControlState, Monitor},
    monitor_runs::{MonitorRunsProjection, RunsState},
};

use super::saved::monitor_info;
use crate::{
    engine::{
        Engine, Origin, PlatformPrincipal,
        leader::{AccountLeaders, Leader},
        platform::iso_time,
    },
    error::{Error, Result},
};

/// The writer of one account's runs partition.
pub(in crate::engine) type RunsLeader = Leader<Arc<RunsState>>;

/// The runs leaders this node has opened, by account.
pub(in crate::engine) type RunsLeaders = AccountLeaders<Arc<RunsState>>;

impl Engine {
    /// The leader of `account`'s runs partition, opened (its projection caught up with the
    /// log) on first use.
    async fn runs_leader(&self, account: &str) -> Result<Arc<RunsLeader>> {
        self.account_leader(&self.monitor_runs, account, MonitorRunsProjection::open)
            .await
    }

    /// What `account`'s runs partition says now.
    pub async fn monitor_runs_state(&self, account: &str) -> Result<Arc<RunsState>> {
        Ok(self.runs_leader(account).await?.snapshot())
    }

    /// Records a run of one of `account`'s monitors, with the alerts it owes.
    pub async fn record_run(&self, account: &str, run: MonitorRan) -> Result<()> {
        let leader = self.runs_leader(account).await?;
        let mut permit = leader.permit().await?;
        permit
            .write(Body::MonitorRan(run), &Origin::system())
            .await?;
        Ok(())
    }

    /// Records what became of one alert of a run.
    pub async fn record_delivery(&self, account: &str, delivery: AlertDelivered) -> Result<()> {
        let leader = self.runs_leader(account).await?;
        let mut permit = leader.permit().await?;
        permit
            .write(Body::AlertDelivered(delivery), &Origin::system())
            .await?;
        Ok(())
    }

    /// The control state as this node has applied it: every account's channels, templates and
    /// monitors, for the scheduler.
    pub fn alerting_state(&self) -> Arc<ControlState> {
        self.control_state()
    }

    /// Who a monitor's runs act as: the user that last saved it, with the grant its roles give
    /// now. A 403 when that user is gone.
    pub fn monitor_author(&self, monitor: &Monitor) -> Result<PlatformPrincipal> {
        self.acting_user(&monitor.account, &monitor.author)
            .ok_or_else(|| {
                Error::Forbidden(format!(
                    "user {} who last saved monitor {:?} no longer exists; save it again as another user",
                    monitor.author, monitor.id
                ))
            })
    }

    /// The monitor `id` of the caller's account, if the caller may `action` it (read,
    /// execute).
    pub async fn monitor_for(
        &self,
        principal: &PlatformPrincipal,
        id: &str,
        action: &str,
    ) -> Result<Monitor> {
        if !principal.grant.allows_notification("Monitor", action, id) {
            return Err(Error::Forbidden(format!(
                "user {} may not {action} monitor {id:?}: no role's Notifications grant it",
                principal.user
            )));
        }
        if self.clustered() {
            self.control_current().await?;
        }
        self.control_state()
            .monitor(&principal.account, id)
            .cloned()
            .ok_or_else(|| Error::NotFound(format!("no monitor {id:?}")))
    }

    /// GET /monitor/{id}/runs: its recent runs, newest first, each the execution result with
    /// its times and what became of its alerts.
    pub async fn list_monitor_runs(
        &self,
        principal: &PlatformPrincipal,
        id: &str,
    ) -> Result<Value> {
        let monitor = self.monitor_for(principal, id, "read").await?;
        let state = self.monitor_runs_state(&principal.account).await?;
        let runs: Vec<Value> = state
            .history(id)
            .into_iter()
            .flat_map(|h| h.recent.iter().rev())
            .map(|run| {
                let mut result: Value =
                    serde_json::from_str(&run.result_json).unwrap_or_else(|_| json!({}));
                result["run_id"] = json!(run.run_id);
                result["monitor_version"] = json!(run.monitor_version);
                result["planned_time"] = iso_time(Some(run.planned_micros).filter(|m| *m > 0));
                result["start_time"] = iso_time(Some(run.started_micros).filter(|m| *m > 0));
                result["end_time"] = iso_time(Some(run.ended_micros).filter(|m| *m > 0));
                result["deliveries"] = run
                    .deliveries
                    .iter()
                    .map(|d| {
                        json!({
                            "trigger": d.trigger,
                            "action_id": d.action_id,
                            "channel_id": d.channel_id,
                            "delivered": d.delivered,
                            "attempts": d.attempts,
                            "error": d.error,
                            "time": iso_time(Some(d.at_micros).filter(|m| *m > 0)),
                        })
                    })
                    .collect();
                result
            })
            .collect();
        let info = monitor_info(&monitor)?;
        Ok(json!({
            "monitor_id": info.id,
            "monitor_name": info.monitor["name"],
            "total": runs.len(),
            "runs": runs,
        }))
    }

    /// How the deliveries to one channel go, for GET /alert/{id}.
    pub(super) async fn channel_health(&self, account: &str, id: &str) -> Result<Value> {
        let state = self.monitor_runs_state(account).await?;
        let health = state.channels.get(id).cloned().unwrap_or_default();
        let status = match (health.delivered, health.consecutive_failures) {
            (0, 0) => "unused",
            (_, 0) => "ok",
            (_, n) if n >= 3 => "failing",
            _ => "degraded",
        };
        Ok(json!({
            "status": status,
            "delivered": health.delivered,
            "failed": health.failed,
            "consecutive_failures": health.consecutive_failures,
            "last_delivered_time": iso_time(health.last_delivered_micros.filter(|m| *m > 0)),
            "last_failed_time": iso_time(health.last_failed_micros.filter(|m| *m > 0)),
            "last_error": health.last_error,
        }))
    }
}
