//! The scheduler: runs each enabled monitor of the accounts this node serves at the times of
//! its schedule, and delivers the alerts runs still owe.
//!
//! When a monitor runs next is decided from the runs partition, not from memory: the planned
//! start of its newest recorded run, and the schedule's next time after it (a new monitor's
//! first time comes after it was saved). So a restart neither repeats a recorded run nor skips
//! the next one, and a node that takes an account over (in a cluster, when its server stops)
//! continues where the other left. A monitor whose next time has passed more than once (the
//! node was down) runs once, for the latest of those times, never a burst of missed runs.
//!
//! It wakes at the earliest next time, or after `alerting.tick_ms` at the latest (to see new and
//! changed monitors), and compares each monitor's next time with the clock; a due
//! monitor runs in its own task, at most `alerting.max_concurrent_runs` at once, and never two
//! runs of one monitor at once.

use std::{collections::HashMap, sync::Arc, time::Duration};

use chrono::{DateTime, Utc};
use serde_json::Value;
use strata_projections::{control::Monitor, monitor_runs::RunsState};
use tokio::sync::Semaphore;

use super::{Alerting, Execution, run::sending_key};
use crate::engine::{DEFAULT_DATABASE, database_key, monitors::schedule::Schedule};

/// How many past times of a schedule are stepped through to find the latest one due; beyond,
/// the run is planned now.
const MAX_CATCH_UP_STEPS: usize = 100_000;

/// What the scheduler knows of one monitor: its version, schedule, and next planned start.
struct Plan {
    version: u64,
    schedule: Option<Schedule>,
    enabled: bool,
    next: Option<DateTime<Utc>>,
}

/// Starts the scheduler of `alerting`'s node.
pub fn spawn(alerting: Arc<Alerting>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let config = alerting.engine.config().alerting.clone();
        let tick = Duration::from_millis(config.tick_ms.max(10));
        let permits = Arc::new(Semaphore::new(config.max_concurrent_runs.max(1)));
        let mut plans: HashMap<(String, String), Plan> = HashMap::new();
        let mut owed_scan = tokio::time::Instant::now();
        let mut wait = tick;
        loop {
            tokio::time::sleep(wait).await;
            let scan_owed = owed_scan.elapsed() >= Duration::from_secs(2);
            if scan_owed {
                owed_scan = tokio::time::Instant::now();
            }
            // Until the next planned start, or the next tick (new monitors, changed ones).
            wait = match alerting.tick(&mut plans, &permits, scan_owed).await {
                Ok(Some(next)) => (next - Utc::now()).to_std().unwrap_or_default().min(tick),
                Ok(None) => tick,
                Err(error) => {
                    tracing::warn!(%error, "the monitor scheduler's tick failed");
                    tick
                }
            };
        }
    })
}

impl Alerting {
    async fn tick(
        self: &Arc<Self>,
        plans: &mut HashMap<(String, String), Plan>,
        permits: &Arc<Semaphore>,
        scan_owed: bool,
    ) -> crate::error::Result<Option<DateTime<Utc>>> {
        let state = self.engine.alerting_state();
        let now = Utc::now();
        plans.retain(|(account, id), _| state.monitor(account, id).is_some());
        let mut runs: HashMap<String, Option<Arc<RunsState>>> = HashMap::new();
        let mut earliest = None;
        for monitor in state.monitors.values() {
            let account = &monitor.account;
            if !runs.contains_key(account) {
                let served = self
                    .engine
                    .owner_elsewhere(&database_key(account, DEFAULT_DATABASE))
                    .is_none();
                let snapshot = match served {
                    true => Some(self.engine.monitor_runs_state(account).await?),
                    false => None,
                };
                runs.insert(account.clone(), snapshot);
            }
            let Some(Some(snapshot)) = runs.get(account) else {
                continue;
            };
            let key = (account.clone(), monitor.id.clone());
            if self.running.lock().contains(&key) {
                continue;
            }
            let plan = plans
                .entry(key.clone())
                .or_insert_with(|| plan_of(monitor, snapshot));
            if plan.version != monitor.version {
                *plan = plan_of(monitor, snapshot);
            }
            let (Some(next), Some(schedule), true) = (plan.next, &plan.schedule, plan.enabled)
            else {
                continue;
            };
            if next > now {
                earliest = Some(earliest.map_or(next, |e: DateTime<Utc>| e.min(next)));
                continue;
            }
            let planned = latest_due(schedule, next, now);
            let period_start = snapshot
                .history(&monitor.id)
                .and_then(|h| DateTime::from_timestamp_micros(h.last_planned_micros))
                .filter(|at| at.timestamp_micros() > 0)
                .unwrap_or(planned);
            // The plan moves on whether or not the run can be recorded (a failing partition
            // must not make the monitor run at every tick); a restart plans from the record.
            plan.next = schedule.next_after(planned);
            self.running.lock().insert(key.clone());
            let alerting = self.clone();
            let monitor = monitor.clone();
            let permits = permits.clone();
            tokio::spawn(async move {
                let _permit = permits.acquire_owned().await;
                let execution = Execution {
                    planned: Some(planned),
                    period_start,
                    period_end: planned,
                    dryrun: false,
                    triggers: None,
                };
                alerting.run(&monitor, &execution).await;
                alerting.running.lock().remove(&key);
            });
        }
        if scan_owed {
            for (account, snapshot) in &runs {
                if let Some(snapshot) = snapshot {
                    self.deliver_owed(account, snapshot);
                }
            }
        }
        Ok(earliest)
    }

    /// Sends, in the background, the alerts of `account`'s runs that are owed and not being
    /// sent.
    fn deliver_owed(self: &Arc<Self>, account: &str, snapshot: &RunsState) {
        for history in snapshot.monitors.values() {
            for owed in &history.owed {
                let key = sending_key(&owed.run_id, &owed.trigger, &owed.action_id);
                if !self.sending.lock().insert(key) {
                    continue;
                }
                let alerting = self.clone();
                let (account, monitor_id, owed) =
                    (account.to_owned(), history.monitor_id.clone(), owed.clone());
                tokio::spawn(async move {
                    let state = alerting.engine.alerting_state();
                    tracing::info!(monitor = %monitor_id, run = %owed.run_id, "delivering an alert a run still owed");
                    alerting
                        .send_owed(&state, &account, &monitor_id, &owed)
                        .await;
                });
            }
        }
    }
}

/// When `monitor` runs next, from its newest recorded run (or when it was saved).
fn plan_of(monitor: &Monitor, runs: &RunsState) -> Plan {
    let doc: Value = serde_json::from_str(&monitor.monitor_json).unwrap_or_default();
    let schedule = Schedule::parse(&doc["schedule"]).ok();
    let last = runs
        .history(&monitor.id)
        .map_or(0, |h| h.last_planned_micros);
    let after = match last {
        0 => monitor.updated_at_micros,
        last => last,
    };
    let next = schedule
        .as_ref()
        .zip(DateTime::from_timestamp_micros(after))
        .and_then(|(schedule, after)| schedule.next_after(after));
    Plan {
        version: monitor.version,
        enabled: doc["enabled"] != Value::Bool(false),
        schedule,
        next,
    }
}

/// The latest time of `schedule` from `next` on that is not after `now`.
fn latest_due(schedule: &Schedule, next: DateTime<Utc>, now: DateTime<Utc>) -> DateTime<Utc> {
    let mut due = next;
    for _ in 0..MAX_CATCH_UP_STEPS {
        match schedule.next_after(due) {
            Some(following) if following <= now => due = following,
            _ => return due,
        }
    }
    now
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text)
            .expect("time")
            .with_timezone(&Utc)
    }

    #[test]
    fn an_overdue_monitor_runs_once_for_its_latest_time() {
        let schedule = Schedule::parse(&json!({"period": {"interval": 1, "unit": "MINUTES"}}))
            .expect("period");
        let next = at("2026-01-01T00:01:00Z");
        assert_eq!(
            latest_due(&schedule, next, at("2026-01-01T03:30:30Z")),
            at("2026-01-01T03:30:00Z")
        );
        assert_eq!(
            latest_due(&schedule, next, at("2026-01-01T00:01:00Z")),
            next
        );
        let every_second =
            Schedule::parse(&json!({"cron": {"expression": "* * * * * *"}})).expect("cron");
        assert_eq!(
            latest_due(&every_second, next, at("2026-01-01T00:01:09.500Z")),
            at("2026-01-01T00:01:09Z")
        );
    }

    #[test]
    fn the_next_run_follows_the_newest_recorded_one() {
        use strata_projections::monitor_runs::History;
        let monitor = Monitor {
            account: "acme".into(),
            id: "m".into(),
            version: 3,
            monitor_json:
                json!({"enabled": true, "schedule": {"period": {"interval": 5, "unit": "MINUTES"}}})
                    .to_string(),
            author: "root".into(),
            updated_at_micros: at("2026-01-01T00:00:00Z").timestamp_micros(),
        };
        let mut runs = RunsState::default();
        let fresh = plan_of(&monitor, &runs);
        assert_eq!(fresh.next, Some(at("2026-01-01T00:05:00Z")));
        runs.monitors.insert(
            "m".into(),
            Arc::new(History {
                monitor_id: "m".into(),
                last_planned_micros: at("2026-01-01T01:00:00Z").timestamp_micros(),
                ..Default::default()
            }),
        );
        let planned = plan_of(&monitor, &runs);
        assert_eq!(planned.next, Some(at("2026-01-01T01:05:00Z")));
        assert!(planned.enabled);
    }
}
