//! One account's conversation threads and their messages, from its `<account>/_assistant`
//! partition.
//!
//! A thread is kept whole as its newest `ThreadSet` left it (its `updated_at` is that event's
//! time); its messages in the order they were added. Persisted in the `assistant/<account>` tree
//! of the [`StateStore`]: one record per thread (`t/<thread>`) and one per message
//! (`m/<thread>/<message>`), so that adding a message writes that message alone, with the
//! checkpoint in the same atomic batch.

use std::{collections::BTreeMap, sync::Arc};

use serde::{Deserialize, Serialize};
use strata_log::{
    Envelope, PartitionId,
    envelope::Body,
    event::{MessageAdded, ThreadSet},
};

use crate::{
    error::Result,
    projection::{Checkpoint, Projection},
    store::{self, StateStore, Writes},
};

/// A conversation thread.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Thread {
    pub thread_id: String,
    pub name: String,
    pub index_name: String,
    /// "ongoing", "completed", "paused" or "archived".
    pub status: String,
    /// JSON text.
    pub viz_context_json: String,
    pub workflow_name: String,
    /// The user who created it.
    pub owner: String,
    pub created_micros: i64,
    pub updated_micros: i64,
}

/// One message of a thread.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    pub message_id: String,
    pub thread_id: String,
    /// "user" or "assistant".
    pub role: String,
    /// JSON text.
    pub content_json: String,
    pub author: String,
    /// For an answer, the message it answers; empty otherwise.
    pub reply_to: String,
    pub created_micros: i64,
}

/// Everything the partition says, as of some offset.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AssistantState {
    pub threads: BTreeMap<String, Arc<Thread>>,
    /// Each thread's messages, oldest first (a thread without messages has no entry).
    pub messages: BTreeMap<String, Arc<Vec<Message>>>,
}

impl AssistantState {
    pub fn thread(&self, id: &str) -> Option<&Thread> {
        self.threads.get(id).map(|t| t.as_ref())
    }

    /// The messages of thread `id`, oldest first.
    pub fn messages(&self, id: &str) -> &[Message] {
        self.messages.get(id).map_or(&[], |m| m.as_slice())
    }

    /// Applies one event at `at` (its time), adding the record writes it makes to `writes`
    /// (when given).
    fn apply(&mut self, event: &Envelope, mut writes: Option<&mut Writes>) -> Result<()> {
        let at = event.timestamp_micros;
        match &event.body {
            Some(Body::ThreadSet(set)) => {
                let thread = self.set(set, at);
                if let Some(writes) = writes {
                    writes.put(&thread_key(&thread.thread_id), &thread)?;
                }
            }
            Some(Body::ThreadDeleted(deleted)) => {
                self.threads.remove(&deleted.thread_id);
                let messages = self.messages.remove(&deleted.thread_id);
                if let Some(writes) = writes.as_deref_mut() {
                    writes.delete(&thread_key(&deleted.thread_id));
                    for message in messages.iter().flat_map(|m| m.iter()) {
                        writes.delete(&message_key(message));
                    }
                }
            }
            Some(Body::MessageAdded(added)) => {
                if let Some(message) = self.add(added, at)
                    && let Some(writes) = writes
                {
                    writes.put(&message_key(&message), &message)?;
                }
            }
            Some(Body::MessagesCleared(cleared)) => {
                let messages = self.messages.remove(&cleared.thread_id);
                if let Some(writes) = writes {
                    for message in messages.iter().flat_map(|m| m.iter()) {
                        writes.delete(&message_key(message));
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn set(&mut self, set: &ThreadSet, at: i64) -> Thread {
        // A thread is created at its first event's time, so that a new thread's `created_at`
        // and `updated_at` are one time; later events keep it (and so does applying the first
        // again).
        let created_micros = self
            .threads
            .get(&set.thread_id)
            .map_or(at, |t| t.created_micros);
        let thread = Thread {
            thread_id: set.thread_id.clone(),
            name: set.name.clone(),
            index_name: set.index_name.clone(),
            status: set.status.clone(),
            viz_context_json: set.viz_context_json.clone(),
            workflow_name: set.workflow_name.clone(),
            owner: set.owner.clone(),
            created_micros,
            updated_micros: at,
        };
        self.threads
            .insert(thread.thread_id.clone(), Arc::new(thread.clone()));
        thread
    }

    /// Adds a message to a thread that exists; `None` when there is none, or when the message
    /// is there already (the event applied twice).
    fn add(&mut self, added: &MessageAdded, at: i64) -> Option<Message> {
        if !self.threads.contains_key(&added.thread_id) {
            return None;
        }
        let messages = Arc::make_mut(self.messages.entry(added.thread_id.clone()).or_default());
        if messages.iter().any(|m| m.message_id == added.message_id) {
            return None;
        }
        let message = Message {
            message_id: added.message_id.clone(),
            thread_id: added.thread_id.clone(),
            role: added.role.clone(),
            content_json: added.content_json.clone(),
            author: added.author.clone(),
            reply_to: added.reply_to.clone(),
            created_micros: at,
        };
        messages.push(message.clone());
        Some(message)
    }
}

fn thread_key(id: &str) -> String {
    format!("t/{id}")
}

fn message_key(message: &Message) -> String {
    format!("m/{}/{}", message.thread_id, message.message_id)
}

/// The projection of one account's `<account>/_assistant` partition.
pub struct AssistantProjection {
    partition: PartitionId,
    tree: sled::Tree,
    state: Arc<AssistantState>,
    checkpoint: Checkpoint,
}

impl AssistantProjection {
    /// The name of the state tree of `account`'s threads.
    pub fn tree_name(account: &str) -> String {
        format!("assistant/{account}")
    }

    /// Loads the threads of `account` from `store`. Blocking.
    pub fn open(store: &StateStore, account: &str) -> Result<AssistantProjection> {
        let tree = store.tree(&Self::tree_name(account))?;
        let mut state = AssistantState::default();
        for thread in store::scan::<Thread>(&tree, "t/")? {
            state
                .threads
                .insert(thread.thread_id.clone(), Arc::new(thread));
        }
        let mut messages: BTreeMap<String, Vec<Message>> = BTreeMap::new();
        for message in store::scan::<Message>(&tree, "m/")? {
            messages
                .entry(message.thread_id.clone())
                .or_default()
                .push(message);
        }
        for (thread, mut list) in messages {
            list.sort_by(|a, b| {
                (a.created_micros, &a.message_id).cmp(&(b.created_micros, &b.message_id))
            });
            state.messages.insert(thread, Arc::new(list));
        }
        let checkpoint = store::load_checkpoint(&tree)?;
        Ok(AssistantProjection {
            partition: PartitionId::assistant(account),
            tree,
            state: Arc::new(state),
            checkpoint,
        })
    }
}

impl Projection for AssistantProjection {
    type Snapshot = Arc<AssistantState>;

    fn partition(&self) -> &PartitionId {
        &self.partition
    }

    fn checkpoint(&self) -> Checkpoint {
        self.checkpoint
    }

    fn apply(&mut self, events: &[Envelope], checkpoint: Checkpoint) -> Result<()> {
        // Threads and message lists are shared with earlier snapshots and copied when changed.
        let mut next = (*self.state).clone();
        // A batch keeps the last write of a key: writes made in event order leave what the
        // last event says.
        let mut writes = Writes::default();
        for event in events {
            next.apply(event, Some(&mut writes))?;
        }
        writes.commit(&self.tree, checkpoint)?;
        self.state = Arc::new(next);
        self.checkpoint = checkpoint;
        Ok(())
    }

    fn snapshot(&self) -> Arc<AssistantState> {
        self.state.clone()
    }
}

#[cfg(test)]
mod tests {
    use strata_log::event::{MessagesCleared, ThreadDeleted};

    use super::*;

    fn at(body: Body, micros: i64) -> Envelope {
        Envelope {
            timestamp_micros: micros,
            body: Some(body),
            ..Default::default()
        }
    }

    fn set(id: &str, status: &str, micros: i64) -> Envelope {
        at(
            Body::ThreadSet(ThreadSet {
                thread_id: id.into(),
                name: format!("thread {id}"),
                index_name: "logs".into(),
                status: status.into(),
                viz_context_json: "{}".into(),
                workflow_name: "alpha_v1".into(),
                owner: "ann".into(),
                created_micros: 1_000,
            }),
            micros,
        )
    }

    fn added(thread: &str, id: &str, micros: i64) -> Envelope {
        at(
            Body::MessageAdded(MessageAdded {
                thread_id: thread.into(),
                message_id: id.into(),
                role: "user".into(),
                content_json: format!(r#"{{"user_query":"question {id}"}}"#),
                author: "ann".into(),
                reply_to: String::new(),
            }),
            micros,
        )
    }

    fn history() -> Vec<Envelope> {
        vec![
            set("t1", "ongoing", 1_000),
            added("t1", "m1", 1_100),
            added("t1", "m2", 1_200),
            set("t2", "ongoing", 1_300),
            added("t2", "m3", 1_400),
            set("t1", "paused", 1_500),
            at(
                Body::MessagesCleared(MessagesCleared {
                    thread_id: "t2".into(),
                }),
                1_600,
            ),
            added("t2", "m4", 1_700),
            set("t3", "ongoing", 1_800),
            added("t3", "m5", 1_900),
            at(
                Body::ThreadDeleted(ThreadDeleted {
                    thread_id: "t3".into(),
                }),
                2_000,
            ),
            // A message to a thread that is gone is not kept.
            added("t3", "m6", 2_100),
        ]
    }

    fn applied(events: &[Envelope]) -> AssistantState {
        let mut state = AssistantState::default();
        for event in events {
            state.apply(event, None).expect("apply");
        }
        state
    }

    fn ids(messages: &[Message]) -> Vec<&str> {
        messages.iter().map(|m| m.message_id.as_str()).collect()
    }

    #[test]
    fn keeps_threads_as_last_set_and_their_messages_in_order() {
        let state = applied(&history());
        let t1 = state.thread("t1").expect("kept");
        assert_eq!(t1.status, "paused");
        assert_eq!((t1.created_micros, t1.updated_micros), (1_000, 1_500));
        assert_eq!(ids(state.messages("t1")), ["m1", "m2"]);
        assert_eq!(state.messages("t1")[1].created_micros, 1_200);
        // Cleared, then one more.
        assert_eq!(ids(state.messages("t2")), ["m4"]);
        assert!(state.thread("t3").is_none());
        assert!(state.messages("t3").is_empty());
    }

    #[test]
    fn applying_twice_is_harmless() {
        let events = history();
        let doubled: Vec<Envelope> = events.iter().flat_map(|e| [e.clone(), e.clone()]).collect();
        assert_eq!(applied(&events), applied(&doubled));
    }

    #[test]
    fn state_survives_reopening_whatever_the_batches() {
        let events = history();
        for batch in [1, 3, events.len()] {
            let dir = tempfile::tempdir().expect("dir");
            let store = StateStore::open(dir.path()).expect("store");
            let mut projection = AssistantProjection::open(&store, "acme").expect("open");
            for (i, chunk) in events.chunks(batch).enumerate() {
                let checkpoint = Checkpoint {
                    next_offset: ((i + 1) * batch).min(events.len()) as u64,
                    epoch: 0,
                };
                projection.apply(chunk, checkpoint).expect("apply");
            }
            let reopened = AssistantProjection::open(&store, "acme").expect("reopen");
            assert_eq!(reopened.checkpoint(), projection.checkpoint());
            assert_eq!(*reopened.snapshot(), applied(&events), "batches of {batch}");
            assert_eq!(reopened.partition().as_str(), "acme/_assistant");
        }
    }

    #[test]
    fn accounts_keep_their_threads_apart() {
        let dir = tempfile::tempdir().expect("dir");
        let store = StateStore::open(dir.path()).expect("store");
        let mut acme = AssistantProjection::open(&store, "acme").expect("open");
        acme.apply(&history(), Checkpoint::default())
            .expect("apply");
        let other = AssistantProjection::open(&store, "other").expect("open");
        assert!(other.snapshot().threads.is_empty());
        assert_eq!(other.partition().as_str(), "other/_assistant");
    }
}
