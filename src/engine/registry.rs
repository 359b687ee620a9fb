//! Active databases: activation on first use, hibernation when idle, and the node's capacity.
//!
//! A database's runtime (its catalog's projection and leader, and its active tables) is started
//! by the first request that needs it, in a task of its own. The request waits for it at most
//! `databases.activation_wait_ms`; if it is not ready by then the answer is 503 with
//! Retry-After, and the activation goes on, so a retry finds it ready. At
//! `databases.max_active` active databases, the least recently used idle one (no request in
//! flight) is hibernated to make room; when none is idle the answer is 503 too. A sweeper
//! hibernates databases idle for `databases.idle_ms`. Hibernating flushes the database's tables
//! and drops its runtime; the log and the segments hold everything, so the next activation
//! replays only what no manifest covers.
//!
//! Every operation holds a [`DatabaseGuard`] while it runs: the registry's lock is taken both to
//! hand out a guard and to pick a database to hibernate, so a database in use is never
//! hibernated.

use std::{
    collections::HashMap,
    ops::Deref,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use parking_lot::Mutex;
use strata_projections::control::Database;
use tokio::sync::watch;

use super::{DatabaseRuntime, Engine};
use crate::error::{Error, Result};

#[derive(Clone)]
enum Activation {
    Pending,
    Ready(Arc<DatabaseRuntime>),
    Failed(String),
}

/// One database's place in the registry.
pub(super) struct Slot {
    activation: watch::Sender<Activation>,
    in_flight: AtomicUsize,
    last_used: Mutex<Instant>,
}

impl Slot {
    fn ready(&self) -> Option<Arc<DatabaseRuntime>> {
        match &*self.activation.borrow() {
            Activation::Ready(runtime) => Some(runtime.clone()),
            _ => None,
        }
    }

    fn idle(&self) -> bool {
        self.in_flight.load(Ordering::Acquire) == 0
    }
}

#[derive(Default)]
pub(super) struct Registry {
    slots: Mutex<HashMap<String, Arc<Slot>>>,
    /// Databases being hibernated: a new activation waits until their tables are closed, so two
    /// runtimes never write one table's files.
    closing: Mutex<HashMap<String, watch::Receiver<bool>>>,
}

/// A database taken out of the registry to hibernate; `finish` says it is closed.
struct Closing {
    runtime: Arc<DatabaseRuntime>,
    done: watch::Sender<bool>,
}

impl Registry {
    /// Takes an idle, active database out; the caller must hibernate it and call `finished`.
    fn take_for_hibernation(
        &self,
        slots: &mut HashMap<String, Arc<Slot>>,
        id: &str,
    ) -> Option<Closing> {
        let runtime = slots.remove(id)?.ready()?;
        let (done, receiver) = watch::channel(false);
        self.closing.lock().insert(id.to_owned(), receiver);
        Some(Closing { runtime, done })
    }

    fn finished(&self, closing: &Closing) {
        closing.done.send_replace(true);
        let mut map = self.closing.lock();
        if map.get(&closing.runtime.id).is_some_and(|r| *r.borrow()) {
            map.remove(&closing.runtime.id);
        }
    }

    async fn wait_closed(&self, id: &str) {
        let receiver = self.closing.lock().get(id).cloned();
        if let Some(mut receiver) = receiver {
            let _ = receiver.wait_for(|done| *done).await;
        }
    }
}

/// A database runtime held by an operation in flight.
pub struct DatabaseGuard {
    runtime: Arc<DatabaseRuntime>,
    slot: Arc<Slot>,
}

impl Deref for DatabaseGuard {
    type Target = DatabaseRuntime;

    fn deref(&self) -> &DatabaseRuntime {
        &self.runtime
    }
}

impl Drop for DatabaseGuard {
    fn drop(&mut self) {
        *self.slot.last_used.lock() = Instant::now();
        self.slot.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Gives back a slot's use if the request stops before it gets a guard.
struct Use(Option<Arc<Slot>>);

impl Drop for Use {
    fn drop(&mut self) {
        if let Some(slot) = self.0.take() {
            slot.in_flight.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

impl Engine {
    /// The runtime of `database`, activating it if needed; 503 while it activates or when the
    /// node has no room for it.
    pub(super) async fn runtime(&self, database: &Database) -> Result<DatabaseGuard> {
        self.runtime_with(database, true).await
    }

    /// As [`Engine::runtime`], past the node's capacity: for the engine's own needs (counting an
    /// account's rows) which must not be refused because other databases are busy. The database
    /// is idle right after, so it is the first to make room when another needs it.
    pub(super) async fn runtime_beyond_capacity(
        &self,
        database: &Database,
    ) -> Result<DatabaseGuard> {
        self.runtime_with(database, false).await
    }

    async fn runtime_with(&self, database: &Database, bounded: bool) -> Result<DatabaseGuard> {
        let (slot, victim) = self.enter(database, bounded)?;
        let mut claim = Use(Some(slot.clone()));
        if let Some(victim) = victim {
            self.spawn_hibernation(victim);
        }
        let mut activation = slot.activation.subscribe();
        let wait = Duration::from_millis(self.config.databases.activation_wait_ms);
        let settled = tokio::time::timeout(
            wait,
            activation.wait_for(|a| !matches!(a, Activation::Pending)),
        )
        .await;
        let state = match settled {
            Ok(Ok(state)) => state.clone(),
            Ok(Err(_)) => Activation::Failed("the activation stopped".to_owned()),
            Err(_) => {
                return Err(Error::Unavailable(format!(
                    "database {:?} is activating; retry after the Retry-After interval",
                    database.name
                )));
            }
        };
        match state {
            Activation::Ready(runtime) => {
                claim.0 = None;
                Ok(DatabaseGuard { runtime, slot })
            }
            Activation::Failed(cause) => Err(Error::Internal(format!(
                "database {} could not be activated: {cause}",
                database.name
            ))),
            Activation::Pending => Err(Error::Unavailable(format!(
                "database {:?} is activating; retry after the Retry-After interval",
                database.name
            ))),
        }
    }

    /// Takes a use of the database's slot, creating it (and starting its activation) if it has
    /// none; returns a database to hibernate when making room.
    fn enter(&self, database: &Database, bounded: bool) -> Result<(Arc<Slot>, Option<Closing>)> {
        let mut slots = self.registry.slots.lock();
        if let Some(slot) = slots.get(&database.id) {
            slot.in_flight.fetch_add(1, Ordering::AcqRel);
            return Ok((slot.clone(), None));
        }
        let mut victim = None;
        if bounded && slots.len() >= self.config.databases.max_active.max(1) {
            let oldest = slots
                .iter()
                .filter(|(_, slot)| slot.idle() && slot.ready().is_some())
                .min_by_key(|(_, slot)| *slot.last_used.lock())
                .map(|(id, _)| id.clone());
            let Some(id) = oldest else {
                return Err(Error::Unavailable(format!(
                    "this node runs its maximum of {} active databases and none is idle; retry after the Retry-After interval",
                    self.config.databases.max_active
                )));
            };
            victim = self.registry.take_for_hibernation(&mut slots, &id);
        }
        let slot = Arc::new(Slot {
            activation: watch::channel(Activation::Pending).0,
            in_flight: AtomicUsize::new(1),
            last_used: Mutex::new(Instant::now()),
        });
        slots.insert(database.id.clone(), slot.clone());
        drop(slots);
        self.spawn_activation(database.clone(), slot.clone());
        Ok((slot, victim))
    }

    fn spawn_activation(&self, database: Database, slot: Arc<Slot>) {
        let Some(engine) = self.me.upgrade() else {
            return;
        };
        tokio::spawn(async move {
            engine.registry.wait_closed(&database.id).await;
            let delay = engine.config.debug.activation_delay_ms;
            if delay > 0 {
                tokio::time::sleep(Duration::from_millis(delay)).await;
            }
            match engine.activate(&database).await {
                Ok(runtime) => {
                    slot.activation.send_replace(Activation::Ready(runtime));
                }
                Err(error) => {
                    tracing::error!(database = %database.name, %error, "activation failed");
                    // The next request starts over.
                    let mut slots = engine.registry.slots.lock();
                    if slots
                        .get(&database.id)
                        .is_some_and(|s| Arc::ptr_eq(s, &slot))
                    {
                        slots.remove(&database.id);
                    }
                    drop(slots);
                    slot.activation
                        .send_replace(Activation::Failed(error.to_string()));
                }
            }
        });
    }

    /// The runtime of a database if it is active, without activating it.
    pub(super) fn active_runtime(&self, database_id: &str) -> Option<Arc<DatabaseRuntime>> {
        self.registry
            .slots
            .lock()
            .get(database_id)
            .and_then(|slot| slot.ready())
    }

    /// Every active runtime.
    pub(super) fn active_runtimes(&self) -> Vec<Arc<DatabaseRuntime>> {
        self.registry
            .slots
            .lock()
            .values()
            .filter_map(|slot| slot.ready())
            .collect()
    }

    /// "active", "activating" or "hibernated", as list_databases shows it.
    pub(super) fn runtime_state(&self, database_id: &str) -> &'static str {
        match self.registry.slots.lock().get(database_id) {
            Some(slot) if slot.ready().is_some() => "active",
            Some(_) => "activating",
            None => "hibernated",
        }
    }

    /// Takes a database out of the registry (it is being purged) once no request uses it.
    pub(super) async fn retire_runtime(&self, database_id: &str) -> Option<Arc<DatabaseRuntime>> {
        let slot = self.registry.slots.lock().remove(database_id)?;
        while !slot.idle() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        slot.ready()
    }

    fn spawn_hibernation(&self, closing: Closing) {
        let Some(engine) = self.me.upgrade() else {
            return;
        };
        tokio::spawn(async move {
            hibernate(&closing.runtime).await;
            engine.registry.finished(&closing);
        });
    }

    /// Hibernates databases idle for longer than `databases.idle_ms`, and idle databases another
    /// node of the cluster owns now, every second.
    pub(super) fn spawn_hibernator(&self) {
        let me = self.me.clone();
        tokio::spawn(async move {
            let mut every = tokio::time::interval(Duration::from_secs(1));
            loop {
                every.tick().await;
                let Some(engine) = me.upgrade() else {
                    return;
                };
                let idle_for = Duration::from_millis(engine.config.databases.idle_ms);
                let idle: Vec<Closing> = {
                    let mut slots = engine.registry.slots.lock();
                    let ids: Vec<String> = slots
                        .iter()
                        .filter(|(_, slot)| {
                            slot.idle()
                                && slot.ready().is_some_and(|runtime| {
                                    slot.last_used.lock().elapsed() >= idle_for
                                        || engine
                                            .owner_elsewhere(&super::database_key(
                                                &runtime.account,
                                                &runtime.name,
                                            ))
                                            .is_some()
                                })
                        })
                        .map(|(id, _)| id.clone())
                        .collect();
                    ids.iter()
                        .filter_map(|id| engine.registry.take_for_hibernation(&mut slots, id))
                        .collect()
                };
                for closing in idle {
                    hibernate(&closing.runtime).await;
                    engine.registry.finished(&closing);
                }
            }
        });
    }
}

/// Flushes a database's tables and stops them; what remains is dropped with the last reference.
async fn hibernate(runtime: &DatabaseRuntime) {
    for table in runtime.take_tables() {
        if let Err(error) = table.handle().flush().await {
            tracing::warn!(table = %table.def.name, %error, "flush before hibernation failed");
        }
        table.handle().close().await;
    }
    tracing::info!(account = %runtime.account, database = %runtime.name, "database hibernated");
}
