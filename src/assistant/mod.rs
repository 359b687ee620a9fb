//! Answering: each question added to a thread is planned, run and answered, and the answer is
//! appended to the thread as a message with role `assistant` (spec 001 section 6.1).
//!
//! An edge of the service like [`crate::alerting`]: it learns the thread's dataset as the asker
//! sees it (fields, types and known values, through the engine's access door), asks the
//! planner ([`crate::engine::assistant::planner`]) for a plan, runs the plan's query with the
//! asker's rights through the runner monitors use ([`crate::queries`]), and words the answer
//! from the result alone. Sockets subscribed to the thread (GET /assistant/nl) get a progress
//! frame for each stage, then the answer, or an error frame.

use std::{
    collections::HashMap,
    sync::Arc,
    time::{Duration, Instant},
};

use chrono::Utc;
use serde_json::{Value, json};
use tokio::sync::broadcast;

use crate::{
    engine::{
        Engine, PlatformPrincipal,
        assistant::{
            IndexFields,
            planner::{self, Field, Kind, MetricsSchema, Plan, Schema, render},
        },
    },
    error::{Error, Result},
    queries,
};
use strata_projections::assistant::Message;

pub mod model;

/// How long a dataset's schema and known values are reused before they are read again.
const SCHEMA_TTL: Duration = Duration::from_secs(30);

/// The most known values read per field.
const KNOWN_VALUES: usize = 100;

/// A frame for the sockets of one account that watch one thread.
#[derive(Clone, Debug)]
pub struct Frame {
    pub account: String,
    pub thread_id: String,
    /// The frame as sent: `{"type": "progress" | "answer" | "error", "thread_id", ...}`.
    pub body: Value,
}

/// Schemas by account, user and dataset, with when they were read.
type Schemas = HashMap<(String, String, String), (Instant, Arc<Schema>)>;

/// The node's answering.
pub struct Assistant {
    engine: Arc<Engine>,
    /// The configured model provider, asked before the built-in planner.
    model: Option<model::Model>,
    frames: broadcast::Sender<Arc<Frame>>,
    schemas: parking_lot::Mutex<Schemas>,
}

impl std::fmt::Debug for Assistant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Assistant").finish_non_exhaustive()
    }
}

/// A field's planner kind from its mapping type; `None` for what questions cannot name.
fn kind(es_type: &str) -> Option<Kind> {
    Some(match es_type {
        "text" | "match_only_text" | "wildcard" => Kind::Text,
        "keyword" | "constant_keyword" | "ip" => Kind::Keyword,
        "long" | "integer" | "short" | "byte" | "double" | "float" | "half_float"
        | "scaled_float" | "unsigned_long" => Kind::Number,
        "date" | "date_nanos" => Kind::Date,
        "boolean" => Kind::Bool,
        _ => return None,
    })
}

/// SQL rows (lists in column order) as objects by column name.
fn rows_by_name(rendered: &Value) -> Value {
    let names: Vec<String> = rendered["columns"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| c["name"].as_str().unwrap_or_default().to_owned())
        .collect();
    let rows: Vec<Value> = rendered["rows"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|row| {
            let cells = row.as_array().cloned().unwrap_or_default();
            Value::Object(names.iter().cloned().zip(cells).collect())
        })
        .collect();
    json!({"rows": rows})
}

impl Assistant {
    pub fn new(engine: Arc<Engine>) -> anyhow::Result<Arc<Assistant>> {
        let model = model::Model::from_config(&engine.config().assistant)?;
        Ok(Arc::new(Assistant {
            engine,
            model,
            frames: broadcast::channel(1024).0,
            schemas: parking_lot::Mutex::new(HashMap::new()),
        }))
    }

    /// Every frame this node sends from now on (a socket keeps those of its threads).
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Frame>> {
        self.frames.subscribe()
    }

    fn send(&self, account: &str, thread_id: &str, body: Value) {
        // Nobody listening is fine: the answer is in the thread either way.
        let _ = self.frames.send(Arc::new(Frame {
            account: account.to_owned(),
            thread_id: thread_id.to_owned(),
            body,
        }));
    }

    /// Answers `question` (a user message just added) in the background.
    pub fn spawn_answer(self: &Arc<Self>, principal: PlatformPrincipal, question: Message) {
        if question.role != "user" {
            return;
        }
        let me = self.clone();
        tokio::spawn(async move { me.answer(&principal, &question).await });
    }

    /// Answers, in the background and one after another, the questions that were asked but
    /// not answered before this node last stopped (a crash between a question and its
    /// answer), so that every question gets its answer once. Called once at start, before the
    /// listeners take questions: the ones it finds are read then.
    pub async fn answer_unanswered(self: &Arc<Self>) -> Result<tokio::task::JoinHandle<()>> {
        let unanswered = self.engine.unanswered_questions().await?;
        if !unanswered.is_empty() {
            tracing::info!(
                count = unanswered.len(),
                "answering the questions left unanswered"
            );
        }
        let me = self.clone();
        Ok(tokio::spawn(async move {
            for (principal, question) in unanswered {
                me.answer(&principal, &question).await;
            }
        }))
    }

    /// Plans, runs and answers `question` for `principal`; the answer is appended to the
    /// thread, and the frames go to the thread's sockets.
    pub async fn answer(&self, principal: &PlatformPrincipal, question: &Message) {
        let account = &principal.account;
        let thread_id = &question.thread_id;
        let progress = |stage: &str| {
            self.send(
                account,
                thread_id,
                json!({"type": "progress", "thread_id": thread_id, "message_id": question.message_id, "stage": stage}),
            );
        };
        progress("planning");
        let content = match self.content(principal, question, &progress).await {
            Ok(content) => content,
            Err(error) => {
                let message = error.public_message();
                self.send(
                    account,
                    thread_id,
                    json!({"type": "error", "thread_id": thread_id, "message_id": question.message_id, "message": message}),
                );
                json!({"text": format!("I could not answer: {message}"), "error": message})
            }
        };
        let failed = content.get("error").is_some();
        if let Err(error) = self
            .engine
            .add_answer(principal, thread_id, &question.message_id, &content)
            .await
        {
            tracing::warn!(%error, thread = %thread_id, "the answer could not be added to its thread");
            if !failed {
                self.send(
                    account,
                    thread_id,
                    json!({"type": "error", "thread_id": thread_id, "message_id": question.message_id, "message": error.public_message()}),
                );
            }
            return;
        }
        if !failed {
            self.send(
                account,
                thread_id,
                json!({"type": "answer", "thread_id": thread_id, "message_id": question.message_id, "content": content}),
            );
        }
    }

    /// The answer's content: `{text, query: {language, text}, result, visualization, plan}`,
    /// or `{text, suggestions}` when the question could not be planned.
    async fn content(
        &self,
        principal: &PlatformPrincipal,
        question: &Message,
        progress: &impl Fn(&str),
    ) -> Result<Value> {
        let state = self.engine.assistant_state(&principal.account).await?;
        let thread = state
            .thread(&question.thread_id)
            .ok_or_else(|| Error::NotFound(format!("no thread {:?}", question.thread_id)))?;
        let asked: Value = serde_json::from_str(&question.content_json).unwrap_or_default();
        let text = asked["user_query"].as_str().unwrap_or_default();
        // The previous answer's plan, for follow-ups.
        let previous: Option<Plan> = state
            .messages(&question.thread_id)
            .iter()
            .rev()
            .filter(|m| m.role == "assistant" && m.message_id != question.message_id)
            .find_map(|m| {
                let content: Value = serde_json::from_str(&m.content_json).ok()?;
                serde_json::from_value(content.get("plan")?.clone()).ok()
            });
        let index = thread.index_name.clone();
        self.answer_question(principal, &index, text, previous.as_ref(), progress)
            .await
    }

    /// The answer to `text`, a question about `index` asked by `principal` after `previous`
    /// (the thread's previous plan): planned, run and worded, outside any thread. What a
    /// thread's answer holds, and what the benchmark times.
    pub async fn answer_question(
        &self,
        principal: &PlatformPrincipal,
        index: &str,
        text: &str,
        previous: Option<&Plan>,
        progress: &impl Fn(&str),
    ) -> Result<Value> {
        let schema = self.schema(principal, index).await?;
        let now = Utc::now();
        // The model first, when there is one; the built-in planner when it has no plan that
        // holds.
        let mut planned_by = "rules";
        let mut planned = None;
        if let Some(model) = &self.model {
            match model.plan(text, &schema, previous).await {
                Ok(plan) => {
                    planned = Some(Ok(plan));
                    planned_by = "model";
                }
                Err(why) => {
                    tracing::info!(%why, "the built-in planner answers instead of the model")
                }
            }
        }
        let planned = planned.unwrap_or_else(|| planner::plan(text, &schema, previous, now));
        let plan = match planned {
            Ok(plan) => plan,
            Err(refusal) => {
                return Ok(json!({
                    "text": format!(
                        "I cannot answer that: {}. Questions I can answer about {} include: {}",
                        refusal.reason,
                        schema.dataset,
                        refusal.suggestions.join(" / ")
                    ),
                    "suggestions": refusal.suggestions,
                }));
            }
        };
        progress("running");
        let query = render::query(&plan, now).map_err(Error::BadRequest)?;
        let answered = queries::run(&self.engine, principal, &query)
            .await
            .map_err(|message| Error::BadRequest(format!("the query failed: {message}")))?;
        let readable = match plan.promql {
            Some(_) => answered.rendered.clone(),
            None => rows_by_name(&answered.rendered),
        };
        Ok(json!({
            "text": render::answer_text(&plan, &readable),
            "query": render::shown(&query),
            "result": answered.rendered,
            "visualization": render::visualization(&plan),
            "plan": plan,
            "planner": planned_by,
        }))
    }

    /// The plan of a monitor's question about `dataset` (a monitor of query type `assistant`),
    /// made once when the monitor is saved; a 400 saying what was not understood otherwise.
    pub async fn plan_monitor(
        &self,
        principal: &PlatformPrincipal,
        dataset: &str,
        question: &str,
    ) -> Result<Plan> {
        let schema = self.schema(principal, dataset).await?;
        planner::plan(question, &schema, None, Utc::now()).map_err(|refusal| {
            Error::BadRequest(format!(
                "query.body.query: {}; questions it can answer include: {}",
                refusal.reason,
                refusal.suggestions.join(" / ")
            ))
        })
    }

    /// Fills in the plan of a monitor document whose query is a question (`assistant`),
    /// replacing any plan the document carries.
    pub async fn plan_monitor_document(
        &self,
        principal: &PlatformPrincipal,
        doc: &mut Value,
    ) -> Result<()> {
        let query = &doc["query"];
        if query["type"] != "assistant" {
            return Ok(());
        }
        let (Some(dataset), Some(question)) = (
            query["datasets"].get(0).and_then(Value::as_str),
            query["body"]["query"].as_str(),
        ) else {
            // The monitor's own checks say what is missing.
            return Ok(());
        };
        let plan = self.plan_monitor(principal, dataset, question).await?;
        doc["query"]["plan"] =
            serde_json::to_value(&plan).map_err(|e| Error::Internal(e.to_string()))?;
        Ok(())
    }

    /// What the planner knows of `index` as `principal` sees it, read again after
    /// [`SCHEMA_TTL`].
    pub async fn schema(&self, principal: &PlatformPrincipal, index: &str) -> Result<Arc<Schema>> {
        let key = (
            principal.account.clone(),
            principal.user.clone(),
            index.to_owned(),
        );
        if let Some((at, schema)) = self.schemas.lock().get(&key)
            && at.elapsed() < SCHEMA_TTL
        {
            return Ok(schema.clone());
        }
        let schema = Arc::new(self.read_schema(principal, index).await?);
        let mut schemas = self.schemas.lock();
        // Stale entries go when a new one comes, so the cache holds what was asked lately.
        schemas.retain(|_, (at, _)| at.elapsed() < SCHEMA_TTL);
        schemas.insert(key, (Instant::now(), schema.clone()));
        Ok(schema)
    }

    async fn read_schema(&self, principal: &PlatformPrincipal, index: &str) -> Result<Schema> {
        let named = self.engine.index_fields(principal, index).await?;
        let found = match named.as_slice() {
            [found] => found.clone(),
            [] => return Err(Error::NotFound(format!("no dataset {index:?}"))),
            many => {
                return Err(Error::BadRequest(format!(
                    "{index:?} names {} datasets; a thread's questions are answered over one",
                    many.len()
                )));
            }
        };
        let mut schema = Schema {
            dataset: found.dataset.clone(),
            connection: found.connection.clone(),
            ..Schema::default()
        };
        if found.metrics {
            schema.metrics = Some(self.metrics_schema(principal, &found.dataset).await?);
            return Ok(schema);
        }
        for (name, es_type) in &found.fields {
            let Some(kind) = kind(es_type) else {
                continue;
            };
            let values = match kind {
                Kind::Text | Kind::Keyword => self.known_values(principal, &found, name).await,
                _ => Vec::new(),
            };
            schema.fields.push(Field {
                name: name.clone(),
                kind,
                values,
            });
        }
        schema.time_field = schema
            .fields
            .iter()
            .find(|f| f.name == crate::engine::TIMESTAMP_FIELD)
            .or_else(|| schema.fields.iter().find(|f| f.kind == Kind::Date))
            .map(|f| f.name.clone());
        Ok(schema)
    }

    /// The metric names of a metrics dataset, and its labels with their known values.
    async fn metrics_schema(
        &self,
        principal: &PlatformPrincipal,
        dataset: &str,
    ) -> Result<MetricsSchema> {
        let end = Utc::now().timestamp_millis() + 60_000;
        let series = self
            .engine
            .promql_series(principal, Some(dataset), &[], 0, end)
            .await
            .map_err(|e| Error::BadRequest(e.message))?;
        let mut names = std::collections::BTreeSet::new();
        let mut labels: std::collections::BTreeMap<String, std::collections::BTreeSet<String>> =
            Default::default();
        for set in &series {
            for (name, value) in set.iter() {
                match name {
                    "__name__" => {
                        names.insert(value.to_owned());
                    }
                    _ => {
                        labels
                            .entry(name.to_owned())
                            .or_default()
                            .insert(value.to_owned());
                    }
                }
            }
        }
        Ok(MetricsSchema {
            names: names.into_iter().collect(),
            labels: labels
                .into_iter()
                .map(|(name, values)| Field {
                    name,
                    kind: Kind::Keyword,
                    values: values.into_iter().take(KNOWN_VALUES).collect(),
                })
                .collect(),
        })
    }

    /// The most frequent values of a field, as `principal` reads them (none when it cannot).
    async fn known_values(
        &self,
        principal: &PlatformPrincipal,
        found: &IndexFields,
        field: &str,
    ) -> Vec<String> {
        let f = format!("\"{}\"", field.replace('"', "\"\""));
        let statement = format!(
            "SELECT {f} FROM {d} WHERE {f} IS NOT NULL GROUP BY {f} ORDER BY COUNT(*) DESC, {f} LIMIT {KNOWN_VALUES}",
            d = render::table(&found.dataset, found.connection.as_deref()),
        );
        let mut query = json!({"type": "sql", "statement": statement});
        if let Some(connection) = &found.connection {
            query["connection"] = json!(connection);
        }
        match queries::run(&self.engine, principal, &query).await {
            Ok(answered) => answered.rendered["rows"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|row| match &row[0] {
                    Value::String(s) if s.chars().count() <= 200 => Some(s.clone()),
                    Value::Null => None,
                    other if !other.is_string() => Some(other.to_string()),
                    _ => None,
                })
                .collect(),
            Err(error) => {
                tracing::debug!(dataset = %found.dataset, %field, %error, "no known values");
                Vec::new()
            }
        }
    }
}
