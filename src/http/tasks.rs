//! Tasks: requests that go on after their answer, as Elasticsearch's task management API shows
//! them. A delete by query with `wait_for_completion=false` answers `{"task": "node:7"}` at
//! once and runs on; `GET /_tasks/node:7` shows it (`?wait_for_completion=true` waits for
//! it), with its response once it is done.
//!
//! Tasks live in the memory of the node that runs them (in a cluster, the node that serves the
//! account, where every platform request of it is forwarded): the last [`KEPT`] are kept after
//! they finish, and none survives a restart. A task is shown to the user who started it and
//! to the root user; to anyone else it does not exist, and asking is refused (403), so that
//! nobody learns of another's tasks.

use std::{
    collections::BTreeMap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use axum::{
    Json,
    extract::{Path, RawQuery},
    response::{IntoResponse, Response},
};
use serde_json::{Value, json};
use tokio::sync::watch;

use super::{Signed, error::PlatformError};
use crate::{engine::PlatformPrincipal, error::Error};

/// How many finished tasks are kept (the oldest finished are forgotten first).
pub const KEPT: usize = 1000;

/// How long `GET /_tasks/{id}?wait_for_completion=true` waits without a `timeout`.
const DEFAULT_WAIT: Duration = Duration::from_secs(30);

/// The tasks of this node.
pub struct Tasks {
    node: String,
    next: AtomicU64,
    tasks: Mutex<BTreeMap<u64, Arc<Task>>>,
}

/// One task: what it is, who started it, and how it ended.
pub struct Task {
    id: u64,
    /// Elasticsearch's action name, as `indices:data/write/delete/byquery`.
    action: &'static str,
    description: String,
    account: String,
    user: String,
    started_ms: i64,
    started: Instant,
    /// The status a running task shows (what it was asked to do).
    status: Mutex<Value>,
    outcome: watch::Sender<Option<Outcome>>,
}

/// How a task ended: its response (as the request would have answered it), or its error.
#[derive(Clone, Debug)]
pub enum Outcome {
    Done(Value),
    Failed { status: u16, error: Value },
}

impl Tasks {
    pub fn new(node: &str) -> Tasks {
        Tasks {
            node: node.to_owned(),
            next: AtomicU64::new(1),
            tasks: Mutex::new(BTreeMap::new()),
        }
    }

    /// Registers a task `principal` starts, and returns it; run it, then [`Task::finish`] it.
    pub fn start(
        &self,
        principal: &PlatformPrincipal,
        action: &'static str,
        description: String,
        status: Value,
    ) -> Arc<Task> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let task = Arc::new(Task {
            id,
            action,
            description,
            account: principal.account.clone(),
            user: principal.user.clone(),
            started_ms: chrono::Utc::now().timestamp_millis(),
            started: Instant::now(),
            status: Mutex::new(status),
            outcome: watch::channel(None).0,
        });
        let mut tasks = self.tasks.lock().unwrap_or_else(|e| e.into_inner());
        tasks.insert(id, task.clone());
        // The oldest finished tasks are forgotten past KEPT; running ones never are.
        let finished: Vec<u64> = tasks
            .values()
            .filter(|t| t.outcome.borrow().is_some())
            .map(|t| t.id)
            .collect();
        let excess = tasks.len().saturating_sub(KEPT);
        for id in finished.into_iter().take(excess) {
            tasks.remove(&id);
        }
        task
    }

    /// The task `text` (`node:n`) names, if `principal` may see it.
    fn find(&self, principal: &PlatformPrincipal, text: &str) -> Result<Arc<Task>, Error> {
        let (node, number) = text.rsplit_once(':').ok_or_else(|| {
            Error::BadRequest(format!(
                "[illegal_argument_exception] malformed task id {text}: a task id is node:number"
            ))
        })?;
        let number: u64 = number.parse().map_err(|_| {
            Error::BadRequest(format!(
                "[illegal_argument_exception] malformed task id {text}: a task id is node:number"
            ))
        })?;
        let found = (node == self.node)
            .then(|| {
                self.tasks
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .get(&number)
                    .cloned()
            })
            .flatten()
            .filter(|task| task.account == principal.account);
        match found {
            Some(task) if principal.root || task.user == principal.user => Ok(task),
            None if principal.root => Err(Error::NotFound(format!(
                "[resource_not_found_exception] task [{text}] isn't running and hasn't stored its results"
            ))),
            _ => Err(Error::Forbidden(format!(
                "[security_exception] task [{text}] is not one that user [{}] started",
                principal.user
            ))),
        }
    }

    fn id_of(&self, task: &Task) -> String {
        format!("{}:{}", self.node, task.id)
    }

    /// Elasticsearch's description of `task`.
    fn info(&self, task: &Task) -> Value {
        json!({
            "node": self.node,
            "id": task.id,
            "type": "transport",
            "action": task.action,
            "status": task.status.lock().unwrap_or_else(|e| e.into_inner()).clone(),
            "description": task.description,
            "start_time_in_millis": task.started_ms,
            "running_time_in_nanos": task.started.elapsed().as_nanos() as u64,
            "cancellable": false,
            "cancelled": false,
            "headers": {},
        })
    }
}

impl Task {
    /// Sets how the task ended, and what its status shows from then on.
    pub fn finish(&self, outcome: Outcome, status: Option<Value>) {
        if let Some(status) = status {
            *self.status.lock().unwrap_or_else(|e| e.into_inner()) = status;
        }
        self.outcome.send_replace(Some(outcome));
    }

    /// Changes the status a running task shows.
    pub fn update_status(&self, change: impl FnOnce(&mut Value)) {
        change(&mut self.status.lock().unwrap_or_else(|e| e.into_inner()));
    }

    fn outcome(&self) -> Option<Outcome> {
        self.outcome.borrow().clone()
    }

    /// Waits at most `wait` for the task to end.
    async fn ended(&self, wait: Duration) -> Option<Outcome> {
        let mut seen = self.outcome.subscribe();
        let ended = tokio::time::timeout(wait, seen.wait_for(Option::is_some)).await;
        match ended {
            Ok(Ok(outcome)) => outcome.clone(),
            _ => self.outcome(),
        }
    }

    /// The task as the answer of the request that started it: `{"task": "node:n"}`.
    pub fn started_answer(tasks: &Tasks, task: &Task) -> Response {
        Json(json!({"task": tasks.id_of(task)})).into_response()
    }
}

/// Query parameters: a value by name, the last one given.
fn param(query: &Option<String>, name: &str) -> Result<Option<String>, Error> {
    let params: Vec<(String, String)> = serde_urlencoded::from_str(query.as_deref().unwrap_or(""))
        .map_err(|e| Error::BadRequest(format!("invalid query parameters: {e}")))?;
    Ok(params
        .into_iter()
        .rev()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v))
}

/// An Elasticsearch time value (`30s`, `1m`, `500ms`).
fn time_value(text: &str) -> Result<Duration, Error> {
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    let (number, unit) = text.split_at(digits);
    let number: u64 = number.parse().map_err(|_| {
        Error::BadRequest(format!(
            "[illegal_argument_exception] failed to parse setting [timeout] with value [{text}] as a time value"
        ))
    })?;
    let ms = match unit {
        "ms" => 1,
        "s" | "" => 1000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => {
            return Err(Error::BadRequest(format!(
                "[illegal_argument_exception] failed to parse setting [timeout] with value [{text}] as a time value: unit is missing or unrecognized"
            )));
        }
    };
    Ok(Duration::from_millis(number.saturating_mul(ms)))
}

/// GET /_tasks/{id}: the task, and its response or error once it has ended; with
/// `wait_for_completion=true`, once it has ended or `timeout` (30s) passed.
pub async fn get_task(
    Signed {
        state, principal, ..
    }: Signed,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Response, PlatformError> {
    let failed = PlatformError::of("get task");
    let tasks = &state.tasks;
    let task = tasks.find(&principal, &id).map_err(failed)?;
    let wait = param(&query, "wait_for_completion")
        .map_err(failed)?
        .is_some_and(|v| v == "true" || v.is_empty());
    let outcome = match wait {
        true => {
            let timeout = match param(&query, "timeout").map_err(failed)? {
                Some(text) => time_value(&text).map_err(failed)?,
                None => DEFAULT_WAIT,
            };
            let outcome = task.ended(timeout).await;
            if outcome.is_none() {
                return Err(failed(Error::Unavailable(format!(
                    "[elasticsearch_timeout_exception] timed out waiting for completion of task [{id}]"
                ))));
            }
            outcome
        }
        false => task.outcome(),
    };
    let mut answer = json!({
        "completed": outcome.is_some(),
        "task": tasks.info(&task),
    });
    match outcome {
        Some(Outcome::Done(response)) => answer["response"] = response,
        Some(Outcome::Failed { status, error }) => {
            answer["error"] =
                json!({"type": "exception", "reason": error["message"], "status": status});
        }
        None => {}
    }
    Ok(Json(answer).into_response())
}

/// POST /_delete_by_query/{id}/_rethrottle (and `/_reindex/...`, `/_update_by_query/...`,
/// which Elasticsearch serves for any such task alike): sets the `requests_per_second` a task
/// shows.
/// strata does not throttle a delete by query (it runs at full speed in one turn of the
/// dataset's leader), so the value changes what the task reports, not how fast it goes.
pub async fn rethrottle(
    Signed {
        state, principal, ..
    }: Signed,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Response, PlatformError> {
    let failed = PlatformError::of("rethrottle");
    let rate = match param(&query, "requests_per_second").map_err(failed)? {
        None => {
            return Err(failed(Error::BadRequest(
                "[action_request_validation_exception] requests_per_second must be set".to_owned(),
            )));
        }
        Some(text) => match text.parse::<f64>() {
            Ok(r) if r == -1.0 || r > 0.0 => r,
            _ => {
                return Err(failed(Error::BadRequest(format!(
                    "[illegal_argument_exception] [requests_per_second] must be a float greater than 0. Use -1 to disable throttling. Found [{text}]"
                ))));
            }
        },
    };
    let tasks = &state.tasks;
    let task = tasks.find(&principal, &id).map_err(failed)?;
    let running = task.outcome().is_none();
    let mut listed = serde_json::Map::new();
    if running {
        task.update_status(|status| status["requests_per_second"] = json!(rate));
        listed.insert(tasks.id_of(&task), tasks.info(&task));
    }
    let nodes = match listed.is_empty() {
        true => json!({}),
        false => json!({ tasks.node.clone(): {"name": tasks.node, "tasks": listed} }),
    };
    Ok(Json(json!({"nodes": nodes})).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Grant;

    fn principal(user: &str, root: bool) -> PlatformPrincipal {
        PlatformPrincipal {
            account: "acme".into(),
            user: user.into(),
            access_key: String::new(),
            root,
            grant: Arc::new(Grant::default()),
        }
    }

    #[tokio::test]
    async fn a_task_is_seen_by_its_user_and_root_only_and_ends_once() {
        let tasks = Tasks::new("n1");
        let ann = principal("ann", false);
        let task = tasks.start(
            &ann,
            "indices:data/write/delete/byquery",
            "x".into(),
            json!({}),
        );
        let id = tasks.id_of(&task);
        assert_eq!(id, "n1:1");
        assert!(tasks.find(&ann, &id).is_ok());
        assert!(tasks.find(&principal("root", true), &id).is_ok());
        assert!(matches!(
            tasks.find(&principal("bob", false), &id),
            Err(Error::Forbidden(_))
        ));
        assert!(matches!(
            tasks.find(&principal("root", true), "n1:9"),
            Err(Error::NotFound(_))
        ));
        assert!(matches!(tasks.find(&ann, "n1:9"), Err(Error::Forbidden(_))));
        assert!(matches!(
            tasks.find(&ann, "nine"),
            Err(Error::BadRequest(_))
        ));
        assert!(task.ended(Duration::from_millis(10)).await.is_none());
        task.finish(Outcome::Done(json!({"deleted": 1})), None);
        assert!(matches!(
            task.ended(Duration::from_millis(10)).await,
            Some(Outcome::Done(v)) if v["deleted"] == 1
        ));
    }

    #[test]
    fn finished_tasks_are_forgotten_oldest_first_past_the_limit() {
        let tasks = Tasks::new("n1");
        let ann = principal("ann", false);
        let running = tasks.start(&ann, "a", String::new(), json!({}));
        for _ in 0..KEPT + 5 {
            let task = tasks.start(&ann, "a", String::new(), json!({}));
            task.finish(Outcome::Done(json!({})), None);
        }
        let kept = tasks.tasks.lock().unwrap();
        assert!(kept.len() <= KEPT + 1, "{}", kept.len());
        assert!(
            kept.contains_key(&running.id),
            "a running task is never forgotten"
        );
    }
}
