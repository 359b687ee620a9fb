//! One run of a monitor: its query, through the access door with its author's rights; its
//! triggers' conditions over the rendered result; its actions' templates; then, unless it is a
//! dry run, the run recorded with the alerts it owes, and each alert delivered and recorded.

use std::collections::BTreeMap;

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Map, Value, json};
use strata_log::event::{AlertDelivered, MonitorRan, PendingAlert};
use strata_projections::{
    control::{ControlState, Monitor},
    monitor_runs::History,
};

use super::{
    Alerting,
    delivery::{self, Alert, Destination},
};
use crate::{
    engine::monitors::{
        condition::{Condition, Input},
        document::throttle_micros,
        template,
    },
    queries::{self, failure},
};

/// The longest stored result of a run; a larger one is summarized in the runs partition.
const MAX_STORED_RESULT: usize = 16 * 1024;

/// How a run was asked for.
#[derive(Clone, Debug)]
pub struct Execution {
    /// The planned start of a scheduled run; `None` for POST execute.
    pub planned: Option<DateTime<Utc>>,
    pub period_start: DateTime<Utc>,
    pub period_end: DateTime<Utc>,
    /// Render the actions, send nothing, record nothing.
    pub dryrun: bool,
    /// Only these triggers (by name or id); `None`: all.
    pub triggers: Option<Vec<String>>,
}

fn iso(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// One action of a fired trigger, rendered, before it is sent.
struct Rendered {
    trigger: String,
    action_id: String,
    channel_id: String,
    alert: Alert,
    destination: Destination,
}

impl Alerting {
    /// Runs `monitor` as `execution` says; the execution result (OpenSearch's shape).
    pub(super) async fn run(&self, monitor: &Monitor, execution: &Execution) -> Value {
        let started = Utc::now();
        let doc: Value = serde_json::from_str(&monitor.monitor_json).unwrap_or_default();
        let state = self.engine.alerting_state();
        let history = match self.engine.monitor_runs_state(&monitor.account).await {
            Ok(runs) => runs.history(&monitor.id).cloned().unwrap_or_default(),
            Err(error) => {
                tracing::warn!(%error, monitor = %monitor.id, "the runs of the monitor's account cannot be read");
                History::default()
            }
        };
        let input = match self.engine.monitor_author(monitor) {
            Ok(author) => queries::run(&self.engine, &author, &doc["query"]).await,
            Err(error) => Err(failure(&error)),
        };
        let monitor_view = json!({
            "_id": monitor.id,
            "name": doc["name"],
            "type": doc["type"],
            "monitor_type": doc["monitor_type"],
            "enabled": doc["enabled"],
            "schedule": doc["schedule"],
        });
        let mut context = json!({
            "monitor": monitor_view,
            "results": [],
            "periodStart": iso(execution.period_start),
            "periodEnd": iso(execution.period_end),
            "period_start": iso(execution.period_start),
            "period_end": iso(execution.period_end),
            "timestamp": iso(started),
        });
        let (input_results, count, input_error) = match &input {
            Ok(answered) => {
                context["results"] = json!([answered.rendered]);
                (json!([answered.rendered]), answered.count, None)
            }
            Err(error) => (json!([]), 0, Some(error.clone())),
        };
        let partials: BTreeMap<String, String> = state
            .templates_of(&monitor.account)
            .map(|t| (t.name.clone(), t.source.clone()))
            .collect();
        let mut trigger_results = Map::new();
        let mut owed = Vec::new();
        for trigger in doc["triggers"].as_array().into_iter().flatten() {
            let name = trigger["name"].as_str().unwrap_or_default();
            let id = trigger["id"].as_str().unwrap_or_default();
            if let Some(only) = &execution.triggers
                && !only.iter().any(|t| t == name || t == id)
            {
                continue;
            }
            let (triggered, error) = match (&input_error, &input) {
                (Some(error), _) => (false, Some(format!("the query failed: {error}"))),
                (None, Ok(answered)) => {
                    evaluate(&trigger["condition"], count, &answered.rendered, &context)
                }
                (None, Err(_)) => (false, None),
            };
            let mut action_results = Map::new();
            if triggered {
                let mut trigger_context = context.clone();
                trigger_context["trigger"] =
                    json!({"id": id, "name": name, "severity": trigger["severity"]});
                for action in trigger["actions"].as_array().into_iter().flatten() {
                    let (result, rendered) = self.action(
                        &state,
                        monitor,
                        &history,
                        name,
                        action,
                        &trigger_context,
                        &partials,
                        started,
                    );
                    if let Some(rendered) = rendered {
                        owed.push(rendered);
                    }
                    action_results
                        .insert(action["id"].as_str().unwrap_or_default().to_owned(), result);
                }
            }
            trigger_results.insert(
                name.to_owned(),
                json!({
                    "name": name,
                    "triggered": triggered,
                    "error": error,
                    "action_results": action_results,
                }),
            );
        }
        let mut result = json!({
            "monitor_name": doc["name"],
            "period_start": iso(execution.period_start),
            "period_end": iso(execution.period_end),
            "error": input_error,
            "input_results": {"results": input_results, "error": input_error},
            "trigger_results": trigger_results,
        });
        if execution.dryrun {
            return result;
        }
        let run_id = uuid::Uuid::now_v7().to_string();
        let keys: Vec<String> = owed
            .iter()
            .map(|r| sending_key(&run_id, &r.trigger, &r.action_id))
            .collect();
        // Marked as being sent before the run is recorded: the scan of owed alerts leaves them
        // to this run.
        self.sending.lock().extend(keys.iter().cloned());
        let ran = MonitorRan {
            monitor_id: monitor.id.clone(),
            monitor_version: monitor.version,
            run_id: run_id.clone(),
            planned_micros: execution.planned.map_or(0, |p| p.timestamp_micros()),
            started_micros: started.timestamp_micros(),
            ended_micros: Utc::now().timestamp_micros(),
            result_json: stored(&result),
            alerts: owed
                .iter()
                .map(|r| PendingAlert {
                    trigger: r.trigger.clone(),
                    action_id: r.action_id.clone(),
                    channel_id: r.channel_id.clone(),
                    alert_json: serde_json::to_string(&r.alert).unwrap_or_default(),
                })
                .collect(),
        };
        if let Err(error) = self.engine.record_run(&monitor.account, ran).await {
            self.sending.lock().retain(|k| !keys.contains(k));
            tracing::warn!(%error, monitor = %monitor.id, "the run could not be recorded; nothing is sent");
            result["error"] = json!(format!(
                "the run could not be recorded: {}",
                failure(&error)
            ));
            return result;
        }
        let sent = futures::future::join_all(owed.into_iter().map(|rendered| {
            let run_id = run_id.clone();
            async move {
                let error = self
                    .send(&monitor.account, &monitor.id, &run_id, &rendered)
                    .await;
                (rendered, error)
            }
        }))
        .await;
        for (rendered, error) in sent {
            if let Some(error) = error {
                result["trigger_results"][&rendered.trigger]["action_results"]
                    [&rendered.action_id]["error"] = json!(error);
            }
        }
        result
    }

    /// Renders one action of a fired trigger: its entry of `action_results`, and what to send
    /// (nothing when it is throttled, its channel is gone or disabled, or a template fails).
    #[allow(clippy::too_many_arguments)]
    fn action(
        &self,
        state: &ControlState,
        monitor: &Monitor,
        history: &History,
        trigger: &str,
        action: &Value,
        context: &Value,
        partials: &BTreeMap<String, String>,
        now: DateTime<Utc>,
    ) -> (Value, Option<Rendered>) {
        let id = action["id"].as_str().unwrap_or_default();
        let name = action["name"].as_str().unwrap_or_default();
        let subject = template::render(
            action["subject_template"]["source"]
                .as_str()
                .unwrap_or_default(),
            partials,
            context,
        );
        let message = template::render(
            action["message_template"]["source"]
                .as_str()
                .unwrap_or_default(),
            partials,
            context,
        );
        let throttled = throttle_micros(action).is_some_and(|window| {
            history
                .last_sent
                .get(&History::action_key(trigger, id))
                .is_some_and(|last| now.timestamp_micros() - last < window)
        });
        let channel_id = action["destination_id"].as_str().unwrap_or_default();
        let (subject, message) = match (subject, message) {
            (Ok(subject), Ok(message)) => (subject, message),
            (Err(error), _) | (_, Err(error)) => {
                let result = json!({"id": id, "name": name, "output": {}, "throttled": throttled,
                    "error": format!("the template failed: {error}")});
                return (result, None);
            }
        };
        let mut result = json!({
            "id": id,
            "name": name,
            "output": {"subject": subject, "message": message},
            "throttled": throttled,
            "error": null,
        });
        if throttled {
            return (result, None);
        }
        let destination = match self.destination(state, &monitor.account, channel_id) {
            Ok(destination) => destination,
            Err(error) => {
                result["error"] = json!(error);
                return (result, None);
            }
        };
        let alert = Alert {
            subject,
            message,
            monitor: context["monitor"].clone(),
            trigger: context["trigger"].clone(),
            timestamp: iso(now),
        };
        let rendered = Rendered {
            trigger: trigger.to_owned(),
            action_id: id.to_owned(),
            channel_id: channel_id.to_owned(),
            alert,
            destination,
        };
        (result, Some(rendered))
    }

    /// Where channel `id` of `account` delivers.
    pub(super) fn destination(
        &self,
        state: &ControlState,
        account: &str,
        id: &str,
    ) -> Result<Destination, String> {
        let channel = state
            .channel(account, id)
            .ok_or_else(|| format!("no channel {id:?}"))?;
        let config: Value = serde_json::from_str(&channel.config_json)
            .map_err(|e| format!("channel {id:?} does not parse: {e}"))?;
        if config["is_enabled"] == Value::Bool(false) {
            return Err(format!("channel {id:?} is disabled"));
        }
        let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
        match config["channel_type"].as_str() {
            Some("webhook") => Ok(Destination::Webhook {
                url: text(&config["webhook"]["url"]),
                headers: config["webhook"]["headers"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(k, v)| (k.clone(), text(v)))
                    .collect(),
            }),
            Some("slack") => Ok(Destination::Slack {
                url: text(&config["slack"]["url"]),
            }),
            Some("email") => {
                let account_id = text(&config["email"]["smtp_account_id"]);
                let smtp = self
                    .engine
                    .config()
                    .smtp_accounts
                    .get(&account_id)
                    .cloned()
                    .ok_or_else(|| {
                        format!("no SMTP account {account_id:?} in the configuration")
                    })?;
                Ok(Destination::Email {
                    account: smtp,
                    recipients: config["email"]["recipients"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(text)
                        .collect(),
                })
            }
            other => Err(format!("channel {id:?} has no type we send to ({other:?})")),
        }
    }

    /// Delivers one owed alert and records the outcome; the error, if it failed.
    async fn send(
        &self,
        account: &str,
        monitor_id: &str,
        run_id: &str,
        rendered: &Rendered,
    ) -> Option<String> {
        let key = sending_key(run_id, &rendered.trigger, &rendered.action_id);
        let outcome = delivery::deliver(
            &self.client,
            &rendered.destination,
            &rendered.alert,
            &self.retry,
        )
        .await;
        let error = outcome.outcome.as_ref().err().map(ToString::to_string);
        let record = AlertDelivered {
            monitor_id: monitor_id.to_owned(),
            run_id: run_id.to_owned(),
            trigger: rendered.trigger.clone(),
            action_id: rendered.action_id.clone(),
            channel_id: rendered.channel_id.clone(),
            delivered: error.is_none(),
            attempts: outcome.attempts,
            error: error.clone().unwrap_or_default(),
        };
        if let Err(failed) = self.engine.record_delivery(account, record).await {
            // Left owed: it is sent again, at least once, by the scan of owed alerts.
            tracing::warn!(error = %failed, monitor = %monitor_id, "a delivery could not be recorded");
        }
        self.sending.lock().remove(&key);
        error
    }

    /// Delivers an alert a run owed and did not deliver (the node stopped in between).
    pub(super) async fn send_owed(
        &self,
        state: &ControlState,
        account: &str,
        monitor_id: &str,
        owed: &strata_projections::monitor_runs::Owed,
    ) {
        let alert: Alert = match serde_json::from_str(&owed.alert_json) {
            Ok(alert) => alert,
            Err(error) => {
                tracing::warn!(%error, monitor = %monitor_id, "an owed alert does not parse");
                return;
            }
        };
        let destination = match self.destination(state, account, &owed.channel_id) {
            Ok(destination) => destination,
            Err(error) => {
                // Given up on: recorded as failed, so that it is not owed forever.
                let record = AlertDelivered {
                    monitor_id: monitor_id.to_owned(),
                    run_id: owed.run_id.clone(),
                    trigger: owed.trigger.clone(),
                    action_id: owed.action_id.clone(),
                    channel_id: owed.channel_id.clone(),
                    delivered: false,
                    attempts: 0,
                    error,
                };
                let _ = self.engine.record_delivery(account, record).await;
                self.sending.lock().remove(&sending_key(
                    &owed.run_id,
                    &owed.trigger,
                    &owed.action_id,
                ));
                return;
            }
        };
        let rendered = Rendered {
            trigger: owed.trigger.clone(),
            action_id: owed.action_id.clone(),
            channel_id: owed.channel_id.clone(),
            alert,
            destination,
        };
        self.send(account, monitor_id, &owed.run_id, &rendered)
            .await;
    }
}

/// Whether a trigger fires, and why not when its condition failed.
fn evaluate(
    condition: &Value,
    count: u64,
    rendered: &Value,
    context: &Value,
) -> (bool, Option<String>) {
    let condition = match Condition::parse(condition) {
        Ok(condition) => condition,
        Err(error) => return (false, Some(error.to_string())),
    };
    let input = Input {
        count,
        result: rendered,
        ctx: context,
    };
    match condition.evaluate(&input) {
        Ok(fired) => (fired, None),
        Err(error) => (false, Some(error)),
    }
}

/// The execution result as the runs partition keeps it: whole when small, else with its
/// query results summarized.
fn stored(result: &Value) -> String {
    let text = result.to_string();
    if text.len() <= MAX_STORED_RESULT {
        return text;
    }
    let mut smaller = result.clone();
    smaller["input_results"]["results"] = json!([{
        "truncated": true,
        "bytes": result["input_results"]["results"].to_string().len(),
    }]);
    smaller.to_string()
}

/// The key of one alert of a run in [`Alerting::sending`].
pub(super) fn sending_key(run_id: &str, trigger: &str, action_id: &str) -> String {
    format!("{run_id}\u{1f}{trigger}\u{1f}{action_id}")
}
