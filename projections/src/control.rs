//! The control projection: accounts, API keys and databases, from the `_control` partition.
//!
//! Readers get an immutable [`ControlState`] snapshot; the state is small (it is loaded whole into
//! memory at start) and persisted in the `control` tree of the [`StateStore`], one record per
//! account, key and database, with the checkpoint in the same atomic batch.

use std::{collections::BTreeMap, sync::Arc};

use serde::{Deserialize, Serialize};
use strata_log::{Envelope, PartitionId, envelope::Body};

use crate::{
    error::Result,
    projection::{Checkpoint, Projection},
    store::{self, StateStore, Writes},
};

const TREE: &str = "control";

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Account {
    pub name: String,
    pub enterprise: bool,
    /// Set once the account has a payment method: it is on the paid plan from then on.
    pub payment_method: bool,
    pub created_at_micros: i64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiKey {
    pub id: String,
    pub account: String,
    /// SHA-256 of the whole key text.
    pub sha256: Vec<u8>,
    /// Glob over the database names the key may address.
    pub databases_pattern: String,
    pub created_at_micros: i64,
}

/// A platform user: SigV4 credentials with the secret sealed (see `UserCreated`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct User {
    pub account: String,
    pub name: String,
    pub access_key: String,
    pub sealed_secret: Vec<u8>,
    pub root: bool,
    pub roles: Vec<String>,
    pub created_at_micros: i64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DatabaseStatus {
    /// Bound to a bucket that has not passed verification yet: no workers start.
    PendingVerification,
    /// Created and usable.
    Ready,
    /// Deletion began; refused everywhere and purged in the background.
    Deleting,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Database {
    pub account: String,
    pub name: String,
    /// Unique per incarnation of the name.
    pub id: String,
    pub status: DatabaseStatus,
    pub created_at_micros: i64,
    /// The bucket the database's segments live in, if the account brought its own.
    #[serde(default)]
    pub storage: Option<StorageBinding>,
}

/// A database's own bucket (see the StorageBinding event).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StorageBinding {
    pub url: String,
    pub region: Option<String>,
    pub endpoint: Option<String>,
    pub access_key_id: Option<String>,
    /// In clear: only from logs written before secrets were sealed; see `sealed_secret`.
    pub secret_access_key: Option<String>,
    /// The secret sealed with the nodes' seal key; the engine unseals it to open the bucket.
    #[serde(default)]
    pub sealed_secret: Option<Vec<u8>>,
    pub verified: bool,
}

impl StorageBinding {
    fn from_event(binding: &strata_log::event::StorageBinding) -> StorageBinding {
        let some = |s: &str| (!s.is_empty()).then(|| s.to_owned());
        StorageBinding {
            url: binding.url.clone(),
            region: some(&binding.region),
            endpoint: some(&binding.endpoint),
            access_key_id: some(&binding.access_key_id),
            secret_access_key: some(&binding.secret_access_key),
            sealed_secret: (!binding.sealed_secret_access_key.is_empty())
                .then(|| binding.sealed_secret_access_key.to_vec()),
            verified: false,
        }
    }
}

/// Everything the control partition says, as of some offset.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ControlState {
    pub accounts: BTreeMap<String, Account>,
    /// By key id.
    pub keys: BTreeMap<String, ApiKey>,
    /// By (account, database name).
    pub databases: BTreeMap<(String, String), Database>,
    /// Platform users, by access key.
    pub users: BTreeMap<String, User>,
}

impl ControlState {
    /// The root user of `account`, if it has one.
    pub fn root_user(&self, account: &str) -> Option<&User> {
        self.users.values().find(|u| u.account == account && u.root)
    }

    pub fn database(&self, account: &str, name: &str) -> Option<&Database> {
        self.databases.get(&(account.to_owned(), name.to_owned()))
    }

    /// The ready database `spec` names: "<account>/<database>", or "<database>" when only one
    /// account has a ready database of that name (how the admin tools name databases).
    pub fn find_ready(&self, spec: &str) -> crate::Result<&Database> {
        let (account, name) = match spec.split_once('/') {
            Some((account, name)) => (Some(account), name),
            None => (None, spec),
        };
        let matching: Vec<&Database> = self
            .databases
            .values()
            .filter(|d| d.status == DatabaseStatus::Ready && d.name == name)
            .filter(|d| account.is_none_or(|a| a == d.account))
            .collect();
        match matching.as_slice() {
            [one] => Ok(one),
            [] => Err(crate::Error::Refused(format!("no such database: {spec}"))),
            _ => Err(crate::Error::Refused(format!(
                "several accounts have a database {name:?}; name it as <account>/{name}"
            ))),
        }
    }

    /// The databases of one account, in name order.
    pub fn databases_of<'a>(&'a self, account: &'a str) -> impl Iterator<Item = &'a Database> {
        self.databases
            .range((account.to_owned(), String::new())..)
            .take_while(move |((owner, _), _)| owner == account)
            .map(|(_, database)| database)
    }

    /// Applies one event, returning the record keys it changed.
    fn apply(&mut self, event: &Envelope) -> Vec<RecordKey> {
        let Some(body) = &event.body else {
            return Vec::new();
        };
        let at = event.timestamp_micros;
        match body {
            Body::AccountCreated(created) => {
                self.accounts
                    .entry(created.name.clone())
                    .or_insert_with(|| Account {
                        name: created.name.clone(),
                        enterprise: created.enterprise,
                        payment_method: false,
                        created_at_micros: at,
                    });
                vec![RecordKey::Account(created.name.clone())]
            }
            Body::PaymentMethodSet(set) => match self.accounts.get_mut(&set.account) {
                Some(account) => {
                    account.payment_method = true;
                    vec![RecordKey::Account(set.account.clone())]
                }
                None => Vec::new(),
            },
            Body::ApiKeyCreated(created) => {
                self.keys.insert(
                    created.key_id.clone(),
                    ApiKey {
                        id: created.key_id.clone(),
                        account: created.account.clone(),
                        sha256: created.key_sha256.to_vec(),
                        databases_pattern: created.databases_pattern.clone(),
                        created_at_micros: at,
                    },
                );
                vec![RecordKey::Key(created.key_id.clone())]
            }
            Body::UserCreated(created) => {
                self.users.insert(
                    created.access_key.clone(),
                    User {
                        account: created.account.clone(),
                        name: created.name.clone(),
                        access_key: created.access_key.clone(),
                        sealed_secret: created.sealed_secret.to_vec(),
                        root: created.root,
                        roles: created.roles.clone(),
                        created_at_micros: at,
                    },
                );
                vec![RecordKey::User(created.access_key.clone())]
            }
            Body::DatabaseCreated(created) => {
                let key = (created.account.clone(), created.name.clone());
                let storage = created.storage.as_ref().map(StorageBinding::from_event);
                self.databases.insert(
                    key.clone(),
                    Database {
                        account: created.account.clone(),
                        name: created.name.clone(),
                        id: created.database_id.clone(),
                        status: match storage {
                            Some(_) => DatabaseStatus::PendingVerification,
                            None => DatabaseStatus::Ready,
                        },
                        created_at_micros: at,
                        storage,
                    },
                );
                vec![RecordKey::Database(key)]
            }
            Body::DatabaseDeleted(deleted) => {
                let key = (deleted.account.clone(), deleted.name.clone());
                match self.databases.get_mut(&key) {
                    Some(database) if database.id == deleted.database_id => {
                        database.status = DatabaseStatus::Deleting;
                        vec![RecordKey::Database(key)]
                    }
                    _ => Vec::new(),
                }
            }
            Body::StorageVerified(verified) => {
                let key = (verified.account.clone(), verified.name.clone());
                match self.databases.get_mut(&key) {
                    Some(database) if database.id == verified.database_id => {
                        if let Some(storage) = &mut database.storage {
                            storage.verified = true;
                        }
                        if database.status == DatabaseStatus::PendingVerification {
                            database.status = DatabaseStatus::Ready;
                        }
                        vec![RecordKey::Database(key)]
                    }
                    _ => Vec::new(),
                }
            }
            Body::DatabasePurged(purged) => {
                let key = (purged.account.clone(), purged.name.clone());
                match self.databases.get(&key) {
                    Some(database) if database.id == purged.database_id => {
                        self.databases.remove(&key);
                        vec![RecordKey::Database(key)]
                    }
                    _ => Vec::new(),
                }
            }
            // Not control-partition events.
            Body::LeaderEpoch(_)
            | Body::NodeHeartbeat(_)
            | Body::TableCreated(_)
            | Body::TableDropped(_)
            | Body::TableColumnsChanged(_)
            | Body::AliasesChanged(_)
            | Body::RowsAppended(_)
            | Body::RowsDeleted(_)
            | Body::RowsUpdated(_) => Vec::new(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum RecordKey {
    Account(String),
    Key(String),
    Database((String, String)),
    User(String),
}

impl RecordKey {
    fn text(&self) -> String {
        match self {
            RecordKey::Account(name) => format!("a/{name}"),
            RecordKey::Key(id) => format!("k/{id}"),
            RecordKey::Database((account, name)) => format!("d/{account}/{name}"),
            RecordKey::User(access_key) => format!("u/{access_key}"),
        }
    }
}

/// The projection of the `_control` partition.
pub struct ControlProjection {
    partition: PartitionId,
    tree: sled::Tree,
    state: Arc<ControlState>,
    checkpoint: Checkpoint,
}

impl ControlProjection {
    /// Loads the control state from `store`. Blocking.
    pub fn open(store: &StateStore) -> Result<ControlProjection> {
        let tree = store.tree(TREE)?;
        let mut state = ControlState::default();
        for account in store::scan::<Account>(&tree, "a/")? {
            state.accounts.insert(account.name.clone(), account);
        }
        for key in store::scan::<ApiKey>(&tree, "k/")? {
            state.keys.insert(key.id.clone(), key);
        }
        for database in store::scan::<Database>(&tree, "d/")? {
            state
                .databases
                .insert((database.account.clone(), database.name.clone()), database);
        }
        for user in store::scan::<User>(&tree, "u/")? {
            state.users.insert(user.access_key.clone(), user);
        }
        let checkpoint = store::load_checkpoint(&tree)?;
        Ok(ControlProjection {
            partition: PartitionId::control(),
            tree,
            state: Arc::new(state),
            checkpoint,
        })
    }
}

impl Projection for ControlProjection {
    type Snapshot = Arc<ControlState>;

    fn partition(&self) -> &PartitionId {
        &self.partition
    }

    fn checkpoint(&self) -> Checkpoint {
        self.checkpoint
    }

    fn apply(&mut self, events: &[Envelope], checkpoint: Checkpoint) -> Result<()> {
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
                RecordKey::Account(name) => match next.accounts.get(name) {
                    Some(account) => writes.put(&text, account)?,
                    None => writes.delete(&text),
                },
                RecordKey::Key(id) => match next.keys.get(id) {
                    Some(key) => writes.put(&text, key)?,
                    None => writes.delete(&text),
                },
                RecordKey::Database(pair) => match next.databases.get(pair) {
                    Some(database) => writes.put(&text, database)?,
                    None => writes.delete(&text),
                },
                RecordKey::User(access_key) => match next.users.get(access_key) {
                    Some(user) => writes.put(&text, user)?,
                    None => writes.delete(&text),
                },
            }
        }
        writes.commit(&self.tree, checkpoint)?;
        self.state = Arc::new(next);
        self.checkpoint = checkpoint;
        Ok(())
    }

    fn snapshot(&self) -> Arc<ControlState> {
        self.state.clone()
    }
}

#[cfg(test)]
mod tests {
    use strata_log::event::{
        AccountCreated, DatabaseCreated, DatabaseDeleted, DatabasePurged, PaymentMethodSet,
    };

    use super::*;

    fn at(body: Body) -> Envelope {
        Envelope {
            timestamp_micros: 7,
            body: Some(body),
            ..Default::default()
        }
    }

    fn history() -> Vec<Envelope> {
        vec![
            at(Body::AccountCreated(AccountCreated {
                name: "acme".into(),
                enterprise: true,
            })),
            at(Body::PaymentMethodSet(PaymentMethodSet {
                account: "acme".into(),
            })),
            at(Body::DatabaseCreated(DatabaseCreated {
                account: "acme".into(),
                name: "one".into(),
                database_id: "id1".into(),
                storage: None,
            })),
            at(Body::DatabaseCreated(DatabaseCreated {
                account: "acme".into(),
                name: "two".into(),
                database_id: "id2".into(),
                storage: None,
            })),
            at(Body::DatabaseDeleted(DatabaseDeleted {
                account: "acme".into(),
                name: "two".into(),
                database_id: "id2".into(),
            })),
            at(Body::DatabaseDeleted(DatabaseDeleted {
                account: "acme".into(),
                name: "one".into(),
                database_id: "id1".into(),
            })),
            at(Body::DatabasePurged(DatabasePurged {
                account: "acme".into(),
                name: "one".into(),
                database_id: "id1".into(),
            })),
        ]
    }

    #[test]
    fn state_survives_reopening_and_matches_a_replay() {
        let dir = tempfile::tempdir().unwrap();
        let events = history();
        let replayed = {
            let mut state = ControlState::default();
            for event in &events {
                state.apply(event);
            }
            state
        };
        {
            let store = StateStore::open(dir.path()).unwrap();
            let mut projection = ControlProjection::open(&store).unwrap();
            // In two batches, with a checkpoint after each.
            projection
                .apply(
                    &events[..3],
                    Checkpoint {
                        next_offset: 3,
                        epoch: 1,
                    },
                )
                .unwrap();
            projection
                .apply(
                    &events[3..],
                    Checkpoint {
                        next_offset: 9,
                        epoch: 1,
                    },
                )
                .unwrap();
            assert_eq!(*projection.snapshot(), replayed);
            store.flush().unwrap();
        }
        let store = StateStore::open(dir.path()).unwrap();
        let projection = ControlProjection::open(&store).unwrap();
        assert_eq!(
            projection.checkpoint(),
            Checkpoint {
                next_offset: 9,
                epoch: 1
            }
        );
        let state = projection.snapshot();
        assert_eq!(*state, replayed);
        let account = &state.accounts["acme"];
        assert!(account.enterprise && account.payment_method);
        assert!(state.database("acme", "one").is_none());
        assert_eq!(
            state.database("acme", "two").unwrap().status,
            DatabaseStatus::Deleting
        );
        assert_eq!(state.databases_of("acme").count(), 1);
        assert_eq!(state.databases_of("other").count(), 0);
    }

    #[test]
    fn applying_twice_is_harmless() {
        let mut once = ControlState::default();
        let mut twice = ControlState::default();
        for event in history() {
            once.apply(&event);
            twice.apply(&event);
            twice.apply(&event);
        }
        assert_eq!(once, twice);
    }

    #[test]
    fn a_stale_delete_does_not_touch_a_new_incarnation() {
        let mut state = ControlState::default();
        let mut events = history();
        events.push(at(Body::DatabaseCreated(DatabaseCreated {
            account: "acme".into(),
            name: "one".into(),
            database_id: "id3".into(),
            storage: None,
        })));
        // A replayed purge of the old incarnation.
        events.push(events[6].clone());
        for event in &events {
            state.apply(event);
        }
        let one = state.database("acme", "one").unwrap();
        assert_eq!(
            (one.id.as_str(), one.status),
            ("id3", DatabaseStatus::Ready)
        );
    }
}
