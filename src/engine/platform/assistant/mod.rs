//! Conversation threads and their messages (spec 001 sections 2, 3 and 4.5; API.md
//! "Conversation"): the account's `<account>/_assistant` partition, written by one leader (the
//! node that serves the account) and projected into [`AssistantState`].
//!
//! Each user sees and changes only the threads it created; the account's root user sees them
//! all. A thread of someone else is answered as one that does not exist (404). Only an ongoing
//! thread takes new messages: a paused one must be resumed first, a completed or archived one
//! is read-only (409).

pub mod document;
pub mod planner;

use std::{collections::BTreeMap, sync::Arc};

use serde_json::{Value, json};
use strata_log::{
    envelope::Body,
    event::{MessageAdded, MessagesCleared, ThreadDeleted, ThreadSet},
};
use strata_projections::assistant::{AssistantProjection, AssistantState, Message, Thread};

use self::document::{NewMessage, NewThread, ThreadChange};
use crate::{
    engine::{
        Engine, Origin, PlatformPrincipal,
        leader::{AccountLeaders, Leader},
        platform::iso_time,
    },
    error::{Error, Result},
};

/// The most threads one user keeps.
pub const MAX_THREADS_PER_USER: usize = 1_000;

/// The most messages one thread keeps (questions and answers).
pub const MAX_MESSAGES: usize = 1_000;

/// The fields of one dataset a thread's index names ([`Engine::index_fields`]).
#[derive(Clone, Debug, PartialEq)]
pub struct IndexFields {
    /// Its name: the account's dataset, or the dataset as its connection's source knows it.
    pub dataset: String,
    /// The connection (by name) whose dataset it is, queried in place.
    pub connection: Option<String>,
    /// A metrics dataset (questions about it are PromQL).
    pub metrics: bool,
    /// Its fields the reader sees, with their mapping types, internal ones left out.
    pub fields: Vec<(String, String)>,
}

/// `<connection>:<dataset>`, an index naming a connection's dataset: the two names (a `:` is
/// in no dataset name of the account's own).
pub fn connection_index(index: &str) -> Option<(&str, &str)> {
    index
        .split_once(':')
        .filter(|(connection, dataset)| !connection.is_empty() && !dataset.is_empty())
}

/// The writer of one account's conversation partition.
pub(in crate::engine) type AssistantLeader = Leader<Arc<AssistantState>>;

/// The conversation leaders this node has opened, by account.
pub(in crate::engine) type AssistantLeaders = AccountLeaders<Arc<AssistantState>>;

fn json_text(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or(Value::Null)
}

/// A thread as lists show it.
pub fn thread_json(thread: &Thread) -> Value {
    json!({
        "id": thread.thread_id,
        "name": thread.name,
        "index_name": thread.index_name,
        "status": thread.status,
        "created_at": iso_time(Some(thread.created_micros)),
        "updated_at": iso_time(Some(thread.updated_micros)),
        "viz_context": json_text(&thread.viz_context_json),
        "workflow_name": thread.workflow_name,
    })
}

/// A message as GET /assistant/threads/{id}/messages shows it.
pub fn message_json(message: &Message) -> Value {
    let mut value = json!({
        "message_id": message.message_id,
        "thread_id": message.thread_id,
        "role": message.role,
        "content": json_text(&message.content_json),
        "created_at": iso_time(Some(message.created_micros)),
    });
    if !message.reply_to.is_empty() {
        value["reply_to"] = json!(message.reply_to);
    }
    value
}

/// The newest question of a thread's messages: its user context.
fn newest_question(messages: &[Message]) -> String {
    messages
        .iter()
        .rev()
        .filter(|m| m.role == "user")
        .find_map(|m| {
            json_text(&m.content_json)
                .get("user_query")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .unwrap_or_default()
}

fn no_thread(id: &str) -> Error {
    Error::NotFound(format!("no thread {id:?}"))
}

/// The thread `id` if `principal` may see it: its creator's, or any for the root user.
fn visible<'a>(
    state: &'a AssistantState,
    principal: &PlatformPrincipal,
    id: &str,
) -> Result<&'a Thread> {
    state
        .thread(id)
        .filter(|t| principal.root || t.owner == principal.user)
        .ok_or_else(|| no_thread(id))
}

/// Threads belong to users that hold some grant: a user without roles has no access.
fn check_access(principal: &PlatformPrincipal) -> Result<()> {
    match principal.grant.is_nothing() {
        true => Err(crate::engine::platform::access::no_grants(principal)),
        false => Ok(()),
    }
}

impl Engine {
    /// The leader of `account`'s conversation partition, opened (its projection caught up
    /// with the log) on first use.
    async fn assistant_leader(&self, account: &str) -> Result<Arc<AssistantLeader>> {
        self.account_leader(&self.assistant, account, AssistantProjection::open)
            .await
    }

    /// What `account`'s conversation partition says now.
    pub async fn assistant_state(&self, account: &str) -> Result<Arc<AssistantState>> {
        Ok(self.assistant_leader(account).await?.snapshot())
    }

    /// The questions of the accounts this node serves that have no answer, with the user who
    /// asked each (its grant as its roles give it now): what was asked before a crash or a
    /// stop and not yet answered. Only the accounts whose conversations this node has kept
    /// are read; a question whose user is gone is left unanswered.
    pub async fn unanswered_questions(&self) -> Result<Vec<(PlatformPrincipal, Message)>> {
        let accounts: Vec<String> = self
            .store
            .tree_names("assistant/")
            .into_iter()
            .filter_map(|name| name.strip_prefix("assistant/").map(str::to_owned))
            .filter(|account| {
                let key = crate::engine::placement::database_key(
                    account,
                    crate::engine::DEFAULT_DATABASE,
                );
                self.owner_elsewhere(&key).is_none()
            })
            .collect();
        let mut unanswered = Vec::new();
        for account in accounts {
            let state = self.assistant_state(&account).await?;
            for messages in state.messages.values() {
                let answered: std::collections::HashSet<&str> = messages
                    .iter()
                    .filter(|m| m.role == "assistant")
                    .map(|m| m.reply_to.as_str())
                    .collect();
                for question in messages
                    .iter()
                    .filter(|m| m.role == "user" && !answered.contains(m.message_id.as_str()))
                {
                    match self.acting_user(&account, &question.author) {
                        Some(principal) => unanswered.push((principal, question.clone())),
                        None => tracing::info!(
                            %account, user = %question.author,
                            "a question of a user that is gone is left unanswered"
                        ),
                    }
                }
            }
        }
        Ok(unanswered)
    }

    /// GET /assistant/threads: the caller's threads (every thread for the root user), newest
    /// first.
    pub async fn list_threads(&self, principal: &PlatformPrincipal) -> Result<Vec<Value>> {
        check_access(principal)?;
        let state = self.assistant_state(&principal.account).await?;
        let mut threads: Vec<&Thread> = state
            .threads
            .values()
            .map(|t| t.as_ref())
            .filter(|t| principal.root || t.owner == principal.user)
            .collect();
        threads.sort_by(|a, b| {
            (b.created_micros, &b.thread_id).cmp(&(a.created_micros, &a.thread_id))
        });
        Ok(threads.into_iter().map(thread_json).collect())
    }

    /// POST /assistant/threads: creates a thread of the caller's.
    pub async fn create_thread(
        &self,
        principal: &PlatformPrincipal,
        doc: &Value,
        origin: &Origin,
    ) -> Result<Value> {
        check_access(principal)?;
        let NewThread {
            name,
            index_name,
            status,
            viz_context,
            workflow_name,
        } = document::new_thread(doc)?;
        let leader = self.assistant_leader(&principal.account).await?;
        let mut permit = leader.permit().await?;
        let owned = permit
            .snapshot()
            .threads
            .values()
            .filter(|t| t.owner == principal.user)
            .count();
        if owned >= MAX_THREADS_PER_USER {
            return Err(Error::Conflict(format!(
                "user {} has {owned} threads, the most one user keeps; delete one first",
                principal.user
            )));
        }
        let thread_id = uuid::Uuid::now_v7().to_string();
        let set = ThreadSet {
            thread_id: thread_id.clone(),
            name,
            index_name,
            status,
            viz_context_json: viz_context.to_string(),
            workflow_name,
            owner: principal.user.clone(),
            created_micros: chrono::Utc::now().timestamp_micros(),
        };
        let state = permit.write(Body::ThreadSet(set), origin).await?;
        let thread = state
            .thread(&thread_id)
            .ok_or_else(|| no_thread(&thread_id))?;
        Ok(thread_json(thread))
    }

    /// GET /assistant/threads/{id}: the thread with its user context (its newest question),
    /// system context and the schema of its index as the caller sees it.
    pub async fn get_thread(&self, principal: &PlatformPrincipal, id: &str) -> Result<Value> {
        check_access(principal)?;
        let state = self.assistant_state(&principal.account).await?;
        let thread = visible(&state, principal, id)?;
        let schema = self.thread_schema(principal, &thread.index_name).await;
        let mut value = thread_json(thread);
        value["user_context"] = json!(newest_question(state.messages(id)));
        value["system_context"] = json!(format!(
            "Answers questions about {:?} (workflow {}) from the fields its schema lists, with \
             the rights of user {}.",
            thread.index_name, thread.workflow_name, principal.user
        ));
        value["schema"] = json!(Value::Array(schema).to_string());
        Ok(value)
    }

    /// The fields of what `index` names, as `principal` sees them (hidden fields left out),
    /// `[{name, type}]` with the field types of the mapping, the first of a name kept when it
    /// names several datasets. Empty when the caller may not read them or there are none (yet).
    async fn thread_schema(&self, principal: &PlatformPrincipal, index: &str) -> Vec<Value> {
        let named = match self.index_fields(principal, index).await {
            Ok(named) => named,
            Err(error) => {
                tracing::debug!(%index, %error, "no schema for a thread");
                return Vec::new();
            }
        };
        let mut fields: BTreeMap<String, String> = BTreeMap::new();
        for (name, kind) in named.into_iter().flat_map(|n| n.fields) {
            fields.entry(name).or_insert(kind);
        }
        fields
            .into_iter()
            .map(|(name, kind)| json!({"name": name, "type": kind}))
            .collect()
    }

    /// What a thread's `index` names, as `principal` sees it: the account's datasets it
    /// names (a name, a comma-separated list or a pattern), or dataset `<dataset>` of a
    /// connection written `<connection>:<dataset>` (as a search names a remote cluster's
    /// index), its fields read from the source.
    pub async fn index_fields(
        &self,
        principal: &PlatformPrincipal,
        index: &str,
    ) -> Result<Vec<IndexFields>> {
        if let Some((connection, dataset)) = connection_index(index) {
            let described = self
                .connection_dataset_metadata(principal, connection, dataset)
                .await?;
            let fields = described["fields"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|f| {
                    let name = f["name"].as_str()?.to_owned();
                    // SQL's type names as the mapping's: a string is a keyword.
                    let kind = match f["type"].as_str()? {
                        "string" => "keyword",
                        other => other,
                    };
                    Some((name, kind.to_owned()))
                })
                .collect();
            return Ok(vec![IndexFields {
                dataset: dataset.to_owned(),
                connection: described["connection"].as_str().map(str::to_owned),
                metrics: false,
                fields,
            }]);
        }
        let defs = self.dataset_defs(principal, Some(index)).await?;
        Ok(defs
            .iter()
            .map(|def| IndexFields {
                dataset: def.name.clone(),
                connection: None,
                metrics: def.metrics,
                fields: def
                    .columns
                    .iter()
                    .filter(|c| c.name != crate::engine::ID_FIELD && !c.name.starts_with('_'))
                    .map(|c| (c.name.clone(), crate::documents::mapping::es_type(def, c)))
                    .collect(),
            })
            .collect())
    }

    /// The thread `id`, if `principal` may see it (a 404 otherwise).
    pub async fn thread(&self, principal: &PlatformPrincipal, id: &str) -> Result<Thread> {
        check_access(principal)?;
        let state = self.assistant_state(&principal.account).await?;
        visible(&state, principal, id).cloned()
    }

    /// PUT or PATCH /assistant/threads/{id}: changes its name, status or viz_context.
    pub async fn update_thread(
        &self,
        principal: &PlatformPrincipal,
        id: &str,
        doc: &Value,
        origin: &Origin,
    ) -> Result<Value> {
        check_access(principal)?;
        let ThreadChange {
            name,
            status,
            viz_context,
        } = document::thread_change(doc)?;
        let leader = self.assistant_leader(&principal.account).await?;
        let mut permit = leader.permit().await?;
        let state = permit.snapshot();
        let thread = visible(&state, principal, id)?;
        if let Some(status) = &status {
            document::transition(&thread.status, status)?;
        }
        let set = ThreadSet {
            thread_id: thread.thread_id.clone(),
            name: name.unwrap_or_else(|| thread.name.clone()),
            index_name: thread.index_name.clone(),
            status: status.unwrap_or_else(|| thread.status.clone()),
            viz_context_json: viz_context
                .map(|v| v.to_string())
                .unwrap_or_else(|| thread.viz_context_json.clone()),
            workflow_name: thread.workflow_name.clone(),
            owner: thread.owner.clone(),
            created_micros: thread.created_micros,
        };
        let state = permit.write(Body::ThreadSet(set), origin).await?;
        let thread = state.thread(id).ok_or_else(|| no_thread(id))?;
        Ok(thread_json(thread))
    }

    /// DELETE /assistant/threads/{id}: removes the thread and all its messages.
    pub async fn delete_thread(
        &self,
        principal: &PlatformPrincipal,
        id: &str,
        origin: &Origin,
    ) -> Result<()> {
        check_access(principal)?;
        let leader = self.assistant_leader(&principal.account).await?;
        let mut permit = leader.permit().await?;
        visible(&permit.snapshot(), principal, id)?;
        let deleted = ThreadDeleted {
            thread_id: id.to_owned(),
        };
        permit.write(Body::ThreadDeleted(deleted), origin).await?;
        Ok(())
    }

    /// POST /assistant/message and POST /assistant/threads/{id}/messages: adds the message
    /// `doc` (to thread `thread`, when the path names one) to an ongoing thread of the
    /// caller's. Returns the message as kept.
    pub async fn add_message(
        &self,
        principal: &PlatformPrincipal,
        doc: &Value,
        thread: Option<&str>,
        origin: &Origin,
    ) -> Result<Message> {
        check_access(principal)?;
        let message: NewMessage = document::new_message(doc, thread)?;
        let id = message
            .thread_id
            .clone()
            .ok_or_else(|| Error::BadRequest("thread_id is required".to_owned()))?;
        let leader = self.assistant_leader(&principal.account).await?;
        let mut permit = leader.permit().await?;
        let state = permit.snapshot();
        let thread = visible(&state, principal, &id)?;
        match thread.status.as_str() {
            "ongoing" => {}
            "paused" => {
                return Err(Error::Conflict(format!(
                    "thread {id:?} is paused; resume it (status ongoing) to add messages"
                )));
            }
            status => {
                return Err(Error::Conflict(format!(
                    "thread {id:?} is {status} and takes no new messages"
                )));
            }
        }
        let held = state.messages(&id).len();
        if held >= MAX_MESSAGES {
            return Err(Error::Conflict(format!(
                "thread {id:?} holds {held} messages, the most a thread keeps; clear its \
                 messages or start a new thread"
            )));
        }
        let message_id = uuid::Uuid::now_v7().to_string();
        let added = MessageAdded {
            thread_id: id.clone(),
            message_id: message_id.clone(),
            role: message.role,
            content_json: Value::Object(message.content).to_string(),
            author: principal.user.clone(),
            reply_to: String::new(),
        };
        let state = permit.write(Body::MessageAdded(added), origin).await?;
        state
            .messages(&id)
            .iter()
            .rev()
            .find(|m| m.message_id == message_id)
            .cloned()
            .ok_or_else(|| Error::Internal(format!("message {message_id} was not kept")))
    }

    /// Appends the assistant's answer to question `reply_to` of thread `id` (whatever the
    /// thread's status now: the question was taken while it was ongoing).
    pub async fn add_answer(
        &self,
        principal: &PlatformPrincipal,
        id: &str,
        reply_to: &str,
        content: &Value,
    ) -> Result<Message> {
        let leader = self.assistant_leader(&principal.account).await?;
        let mut permit = leader.permit().await?;
        visible(&permit.snapshot(), principal, id)?;
        let message_id = uuid::Uuid::now_v7().to_string();
        let added = MessageAdded {
            thread_id: id.to_owned(),
            message_id: message_id.clone(),
            role: "assistant".to_owned(),
            content_json: content.to_string(),
            author: principal.user.clone(),
            reply_to: reply_to.to_owned(),
        };
        let origin = principal.origin(&uuid::Uuid::now_v7().to_string());
        let state = permit.write(Body::MessageAdded(added), &origin).await?;
        state
            .messages(id)
            .iter()
            .rev()
            .find(|m| m.message_id == message_id)
            .cloned()
            .ok_or_else(|| Error::Internal(format!("message {message_id} was not kept")))
    }

    /// GET /assistant/threads/{id}/messages: the thread's messages, oldest first.
    pub async fn list_messages(
        &self,
        principal: &PlatformPrincipal,
        id: &str,
    ) -> Result<Vec<Value>> {
        check_access(principal)?;
        let state = self.assistant_state(&principal.account).await?;
        visible(&state, principal, id)?;
        Ok(state.messages(id).iter().map(message_json).collect())
    }

    /// DELETE /assistant/threads/{id}/messages: removes every message, keeps the thread.
    pub async fn clear_messages(
        &self,
        principal: &PlatformPrincipal,
        id: &str,
        origin: &Origin,
    ) -> Result<Value> {
        check_access(principal)?;
        let leader = self.assistant_leader(&principal.account).await?;
        let mut permit = leader.permit().await?;
        let state = permit.snapshot();
        visible(&state, principal, id)?;
        let deleted = state.messages(id).len();
        if deleted > 0 {
            let cleared = MessagesCleared {
                thread_id: id.to_owned(),
            };
            permit.write(Body::MessagesCleared(cleared), origin).await?;
        }
        Ok(json!({
            "status": "success",
            "message": format!("deleted {deleted} messages of thread {id}"),
            "thread_id": id,
            "deleted_count": deleted,
        }))
    }
}
