//! The runs of one account's monitors, from its `<account>/_monitors` partition.
//!
//! What the scheduler and GET /monitor/{id}/runs need, kept small: per monitor the planned start
//! of its newest scheduled run (a restarted scheduler neither repeats nor skips it), its most
//! recent runs with their deliveries, the alerts it still owes (a run recorded, its delivery not:
//! the node stopped in between), and when each action last sent (for throttles); per channel how
//! its deliveries go. Persisted in the `monitor_runs/<account>` tree of the [`StateStore`], one
//! record per monitor and per channel, with the checkpoint in the same atomic batch.

use std::{
    collections::{BTreeMap, VecDeque},
    sync::Arc,
};

use serde::{Deserialize, Serialize};
use strata_log::{
    Envelope, PartitionId,
    envelope::Body,
    event::{AlertDelivered, MonitorRan},
};

use crate::{
    error::Result,
    projection::{Checkpoint, Projection},
    store::{self, StateStore, Writes},
};

/// How many runs of a monitor are kept for GET /monitor/{id}/runs.
pub const RECENT_RUNS: usize = 50;

/// One run of a monitor and what became of the alerts it owed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Run {
    pub run_id: String,
    pub monitor_version: u64,
    /// 0 for a run asked for by POST execute.
    pub planned_micros: i64,
    pub started_micros: i64,
    pub ended_micros: i64,
    /// The execution result, JSON text.
    pub result_json: String,
    pub deliveries: Vec<Delivery>,
}

/// The outcome of one alert of a run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Delivery {
    pub trigger: String,
    pub action_id: String,
    pub channel_id: String,
    pub delivered: bool,
    pub attempts: u32,
    pub error: Option<String>,
    pub at_micros: i64,
}

/// An alert a run owes and has not delivered (nor given up on) yet.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Owed {
    pub run_id: String,
    pub trigger: String,
    pub action_id: String,
    pub channel_id: String,
    /// Subject, message, monitor, trigger and timestamp, JSON text.
    pub alert_json: String,
}

/// What the partition says of one monitor.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct History {
    pub monitor_id: String,
    /// The planned start of its newest scheduled run; 0 before the first.
    pub last_planned_micros: i64,
    /// The newest runs, oldest first, at most [`RECENT_RUNS`].
    pub recent: VecDeque<Run>,
    pub owed: Vec<Owed>,
    /// When each action (trigger name, action id) last delivered, for throttles.
    pub last_sent: BTreeMap<String, i64>,
}

impl History {
    /// The key of an action in `last_sent`.
    pub fn action_key(trigger: &str, action_id: &str) -> String {
        format!("{trigger}\u{1f}{action_id}")
    }
}

/// How a channel's deliveries go.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChannelHealth {
    pub channel_id: String,
    pub delivered: u64,
    pub failed: u64,
    /// Failures since the last delivery.
    pub consecutive_failures: u64,
    pub last_delivered_micros: Option<i64>,
    pub last_failed_micros: Option<i64>,
    pub last_error: Option<String>,
}

/// Everything the partition says, as of some offset.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunsState {
    pub monitors: BTreeMap<String, Arc<History>>,
    pub channels: BTreeMap<String, ChannelHealth>,
}

impl RunsState {
    pub fn history(&self, monitor_id: &str) -> Option<&History> {
        self.monitors.get(monitor_id).map(|h| h.as_ref())
    }

    /// Applies one event; returns the records it changed.
    fn apply(&mut self, event: &Envelope) -> Vec<RecordKey> {
        match &event.body {
            Some(Body::MonitorRan(ran)) => self.ran(ran),
            Some(Body::AlertDelivered(delivered)) => {
                self.delivered(delivered, event.timestamp_micros)
            }
            _ => Vec::new(),
        }
    }

    fn ran(&mut self, ran: &MonitorRan) -> Vec<RecordKey> {
        let history = Arc::make_mut(self.monitors.entry(ran.monitor_id.clone()).or_default());
        history.monitor_id = ran.monitor_id.clone();
        // Applying twice is harmless: a run already kept is not added again.
        if history.recent.iter().any(|r| r.run_id == ran.run_id) {
            return Vec::new();
        }
        history.last_planned_micros = history.last_planned_micros.max(ran.planned_micros);
        history.recent.push_back(Run {
            run_id: ran.run_id.clone(),
            monitor_version: ran.monitor_version,
            planned_micros: ran.planned_micros,
            started_micros: ran.started_micros,
            ended_micros: ran.ended_micros,
            result_json: ran.result_json.clone(),
            deliveries: Vec::new(),
        });
        while history.recent.len() > RECENT_RUNS {
            history.recent.pop_front();
        }
        history.owed.extend(ran.alerts.iter().map(|alert| Owed {
            run_id: ran.run_id.clone(),
            trigger: alert.trigger.clone(),
            action_id: alert.action_id.clone(),
            channel_id: alert.channel_id.clone(),
            alert_json: alert.alert_json.clone(),
        }));
        vec![RecordKey::Monitor(ran.monitor_id.clone())]
    }

    fn delivered(&mut self, delivered: &AlertDelivered, at: i64) -> Vec<RecordKey> {
        let history = Arc::make_mut(
            self.monitors
                .entry(delivered.monitor_id.clone())
                .or_default(),
        );
        let before = history.owed.len();
        history.owed.retain(|owed| {
            !(owed.run_id == delivered.run_id
                && owed.trigger == delivered.trigger
                && owed.action_id == delivered.action_id)
        });
        if history.owed.len() == before {
            // Nothing was owed: a second outcome of the same alert (applied twice, or a
            // delivery repeated after a restart) counts once.
            return Vec::new();
        }
        let error = (!delivered.delivered).then(|| delivered.error.clone());
        if let Some(run) = history
            .recent
            .iter_mut()
            .find(|r| r.run_id == delivered.run_id)
        {
            run.deliveries.push(Delivery {
                trigger: delivered.trigger.clone(),
                action_id: delivered.action_id.clone(),
                channel_id: delivered.channel_id.clone(),
                delivered: delivered.delivered,
                attempts: delivered.attempts,
                error: error.clone(),
                at_micros: at,
            });
        }
        if delivered.delivered {
            history.last_sent.insert(
                History::action_key(&delivered.trigger, &delivered.action_id),
                at,
            );
        }
        let channel = self
            .channels
            .entry(delivered.channel_id.clone())
            .or_default();
        channel.channel_id = delivered.channel_id.clone();
        match delivered.delivered {
            true => {
                channel.delivered += 1;
                channel.consecutive_failures = 0;
                channel.last_delivered_micros = Some(at);
            }
            false => {
                channel.failed += 1;
                channel.consecutive_failures += 1;
                channel.last_failed_micros = Some(at);
                channel.last_error = error;
            }
        }
        vec![
            RecordKey::Monitor(delivered.monitor_id.clone()),
            RecordKey::Channel(delivered.channel_id.clone()),
        ]
    }
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum RecordKey {
    Monitor(String),
    Channel(String),
}

impl RecordKey {
    fn text(&self) -> String {
        match self {
            RecordKey::Monitor(id) => format!("m/{id}"),
            RecordKey::Channel(id) => format!("c/{id}"),
        }
    }
}

/// The projection of one account's `<account>/_monitors` partition.
pub struct MonitorRunsProjection {
    partition: PartitionId,
    tree: sled::Tree,
    state: Arc<RunsState>,
    checkpoint: Checkpoint,
}

impl MonitorRunsProjection {
    /// The name of the state tree of `account`'s runs.
    pub fn tree_name(account: &str) -> String {
        format!("monitor_runs/{account}")
    }

    /// Loads the runs state of `account` from `store`. Blocking.
    pub fn open(store: &StateStore, account: &str) -> Result<MonitorRunsProjection> {
        let tree = store.tree(&Self::tree_name(account))?;
        let mut state = RunsState::default();
        for history in store::scan::<History>(&tree, "m/")? {
            state
                .monitors
                .insert(history.monitor_id.clone(), Arc::new(history));
        }
        for channel in store::scan::<ChannelHealth>(&tree, "c/")? {
            state.channels.insert(channel.channel_id.clone(), channel);
        }
        let checkpoint = store::load_checkpoint(&tree)?;
        Ok(MonitorRunsProjection {
            partition: PartitionId::monitor_runs(account),
            tree,
            state: Arc::new(state),
            checkpoint,
        })
    }
}

impl Projection for MonitorRunsProjection {
    type Snapshot = Arc<RunsState>;

    fn partition(&self) -> &PartitionId {
        &self.partition
    }

    fn checkpoint(&self) -> Checkpoint {
        self.checkpoint
    }

    fn apply(&mut self, events: &[Envelope], checkpoint: Checkpoint) -> Result<()> {
        // Histories are shared with earlier snapshots and copied only when changed.
        let mut next = (*self.state).clone();
        let mut touched = Vec::new();
        for event in events {
            touched.extend(next.apply(event));
        }
        touched.sort();
        touched.dedup();
        let mut writes = Writes::default();
        for key in touched {
            let text = key.text();
            match &key {
                RecordKey::Monitor(id) => match next.monitors.get(id) {
                    Some(history) => writes.put(&text, history.as_ref())?,
                    None => writes.delete(&text),
                },
                RecordKey::Channel(id) => match next.channels.get(id) {
                    Some(channel) => writes.put(&text, channel)?,
                    None => writes.delete(&text),
                },
            }
        }
        writes.commit(&self.tree, checkpoint)?;
        self.state = Arc::new(next);
        self.checkpoint = checkpoint;
        Ok(())
    }

    fn snapshot(&self) -> Arc<RunsState> {
        self.state.clone()
    }
}

#[cfg(test)]
mod tests {
    use strata_log::event::PendingAlert;

    use super::*;

    fn at(body: Body, micros: i64) -> Envelope {
        Envelope {
            timestamp_micros: micros,
            body: Some(body),
            ..Default::default()
        }
    }

    fn ran(run: &str, planned: i64, alerts: usize) -> Envelope {
        at(
            Body::MonitorRan(MonitorRan {
                monitor_id: "m1".into(),
                monitor_version: 1,
                run_id: run.into(),
                planned_micros: planned,
                started_micros: planned + 5,
                ended_micros: planned + 9,
                result_json: "{}".into(),
                alerts: (0..alerts)
                    .map(|i| PendingAlert {
                        trigger: "t".into(),
                        action_id: format!("a{i}"),
                        channel_id: "c1".into(),
                        alert_json: "{}".into(),
                    })
                    .collect(),
            }),
            planned + 10,
        )
    }

    fn delivered(run: &str, action: &str, ok: bool, micros: i64) -> Envelope {
        at(
            Body::AlertDelivered(AlertDelivered {
                monitor_id: "m1".into(),
                run_id: run.into(),
                trigger: "t".into(),
                action_id: action.into(),
                channel_id: "c1".into(),
                delivered: ok,
                attempts: if ok { 1 } else { 4 },
                error: if ok { String::new() } else { "refused".into() },
            }),
            micros,
        )
    }

    fn history() -> Vec<Envelope> {
        vec![
            ran("r1", 1_000, 2),
            delivered("r1", "a0", true, 1_100),
            ran("r2", 2_000, 1),
            delivered("r1", "a1", false, 2_100),
            delivered("r2", "a0", false, 2_200),
            ran("r3", 0, 0),
        ]
    }

    fn applied(events: &[Envelope]) -> RunsState {
        let mut state = RunsState::default();
        for event in events {
            state.apply(event);
        }
        state
    }

    #[test]
    fn keeps_the_newest_plan_what_is_owed_and_channel_health() {
        let mut events = history();
        events.truncate(3);
        let state = applied(&events);
        let m1 = state.history("m1").expect("kept");
        assert_eq!(m1.last_planned_micros, 2_000);
        let owed: Vec<(&str, &str)> = m1
            .owed
            .iter()
            .map(|o| (o.run_id.as_str(), o.action_id.as_str()))
            .collect();
        assert_eq!(owed, [("r1", "a1"), ("r2", "a0")]);

        let state = applied(&history());
        let m1 = state.history("m1").expect("kept");
        assert!(m1.owed.is_empty());
        // An execute (planned 0) does not move the schedule back.
        assert_eq!(m1.last_planned_micros, 2_000);
        assert_eq!(m1.recent.len(), 3);
        assert_eq!(m1.recent[0].deliveries.len(), 2);
        assert_eq!(
            m1.last_sent.get(&History::action_key("t", "a0")),
            Some(&1_100)
        );
        let c1 = &state.channels["c1"];
        assert_eq!(
            (c1.delivered, c1.failed, c1.consecutive_failures),
            (1, 2, 2)
        );
        assert_eq!(c1.last_error.as_deref(), Some("refused"));
    }

    #[test]
    fn applying_twice_is_harmless() {
        let events = history();
        let doubled: Vec<Envelope> = events.iter().flat_map(|e| [e.clone(), e.clone()]).collect();
        assert_eq!(applied(&events), applied(&doubled));
    }

    #[test]
    fn keeps_only_the_newest_runs() {
        let events: Vec<Envelope> = (1..=RECENT_RUNS as i64 + 7)
            .map(|i| ran(&format!("r{i}"), i * 1_000, 0))
            .collect();
        let state = applied(&events);
        let m1 = state.history("m1").expect("kept");
        assert_eq!(m1.recent.len(), RECENT_RUNS);
        assert_eq!(m1.recent[0].run_id, "r8");
    }

    #[test]
    fn state_survives_reopening() {
        let dir = tempfile::tempdir().expect("dir");
        let store = StateStore::open(dir.path()).expect("store");
        let mut projection = MonitorRunsProjection::open(&store, "acme").expect("open");
        let events = history();
        let checkpoint = Checkpoint {
            next_offset: events.len() as u64,
            epoch: 0,
        };
        projection.apply(&events, checkpoint).expect("apply");
        let reopened = MonitorRunsProjection::open(&store, "acme").expect("reopen");
        assert_eq!(reopened.checkpoint(), checkpoint);
        assert_eq!(*reopened.snapshot(), applied(&events));
        assert_eq!(reopened.partition().as_str(), "acme/_monitors");
    }
}
