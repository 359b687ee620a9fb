//! The control projection: accounts, API keys, databases, users, roles, notification channels,
//! message templates, monitors and connections, from the `_control` partition.
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
    /// The PHC string of the console password's hash; `None` for a user without a password.
    #[serde(default)]
    pub password_hash: Option<String>,
    pub created_at_micros: i64,
}

/// A console session (see `ConsoleSessionStarted`), by the SHA-256 of its token.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsoleSession {
    pub account: String,
    pub user: String,
    pub session_id: String,
    pub token_sha256: Vec<u8>,
    pub user_fingerprint: Vec<u8>,
    pub started_at_micros: i64,
    pub expires_micros: i64,
}

/// A role of an account: what the users that hold it may do (see `RoleSet`). Its entries are
/// kept as the document gave them; the engine validated them before it wrote the event.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Role {
    pub account: String,
    pub name: String,
    pub version: String,
    pub permissions: Vec<RolePermission>,
    pub notifications: Vec<NotificationPermission>,
    pub updated_at_micros: i64,
}

/// One entry of a role's Permissions.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RolePermission {
    pub resource_type: String,
    pub actions: Vec<String>,
    pub resources: Vec<String>,
    pub fields: Option<FieldSecurity>,
    /// A Query DSL query as JSON text.
    pub filter_json: Option<String>,
}

/// The Fields block of a record entry.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldSecurity {
    pub allow: Option<Vec<String>>,
    pub deny: Vec<String>,
    /// Field pattern and mask ("redact", "nullify", "remove"), in the document's order.
    pub mask: Vec<(String, String)>,
}

/// One entry of a role's Notifications: `kind` is Monitor, Channel or Config.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NotificationPermission {
    pub kind: String,
    pub actions: Vec<String>,
    pub resources: Vec<String>,
}

impl Role {
    fn from_event(set: &strata_log::event::RoleSet, at: i64) -> Role {
        let some = |s: &str| (!s.is_empty()).then(|| s.to_owned());
        Role {
            account: set.account.clone(),
            name: set.name.clone(),
            version: set.version.clone(),
            permissions: set
                .permissions
                .iter()
                .map(|p| RolePermission {
                    resource_type: p.resource_type.clone(),
                    actions: p.actions.clone(),
                    resources: p.resources.clone(),
                    fields: p.fields.as_ref().map(|f| FieldSecurity {
                        allow: f.has_allow.then(|| f.allow.clone()),
                        deny: f.deny.clone(),
                        mask: f
                            .mask
                            .iter()
                            .map(|m| (m.field.clone(), m.mask.clone()))
                            .collect(),
                    }),
                    filter_json: some(&p.filter_json),
                })
                .collect(),
            notifications: set
                .notifications
                .iter()
                .map(|n| NotificationPermission {
                    kind: n.kind.clone(),
                    actions: n.actions.clone(),
                    resources: n.resources.clone(),
                })
                .collect(),
            updated_at_micros: at,
        }
    }

    /// The event that sets this role (the inverse of reading one).
    pub fn to_event(&self) -> strata_log::event::RoleSet {
        use strata_log::event as e;
        e::RoleSet {
            account: self.account.clone(),
            name: self.name.clone(),
            version: self.version.clone(),
            permissions: self
                .permissions
                .iter()
                .map(|p| e::RolePermission {
                    resource_type: p.resource_type.clone(),
                    actions: p.actions.clone(),
                    resources: p.resources.clone(),
                    fields: p.fields.as_ref().map(|f| e::FieldSecurity {
                        has_allow: f.allow.is_some(),
                        allow: f.allow.clone().unwrap_or_default(),
                        deny: f.deny.clone(),
                        mask: f
                            .mask
                            .iter()
                            .map(|(field, mask)| e::FieldMask {
                                field: field.clone(),
                                mask: mask.clone(),
                            })
                            .collect(),
                    }),
                    filter_json: p.filter_json.clone().unwrap_or_default(),
                })
                .collect(),
            notifications: self
                .notifications
                .iter()
                .map(|n| e::NotificationPermission {
                    kind: n.kind.clone(),
                    actions: n.actions.clone(),
                    resources: n.resources.clone(),
                })
                .collect(),
        }
    }
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

/// A notification channel: its `config` document as the engine validated it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Channel {
    pub account: String,
    pub id: String,
    pub config_json: String,
    pub updated_at_micros: i64,
}

/// A message template, usable by actions as the partial `{{> name}}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Template {
    pub account: String,
    pub id: String,
    pub name: String,
    pub source: String,
}

/// A monitor: its document as the engine validated it, and who last saved it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Monitor {
    pub account: String,
    pub id: String,
    pub version: u64,
    pub monitor_json: String,
    /// The user whose rights its runs read with.
    pub author: String,
    pub updated_at_micros: i64,
}

/// A connection to an external source (see `ConnectionSet`), with what its last test or use
/// found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Connection {
    pub account: String,
    pub id: String,
    pub connector_id: String,
    pub name: String,
    /// The config without its secrets, as JSON text.
    pub config_json: String,
    /// The secrets' JSON object, sealed; empty when there are none.
    pub sealed_secrets: Vec<u8>,
    pub author: String,
    pub created_at_micros: i64,
    pub updated_at_micros: i64,
    /// "inactive" until first tested or used, then "active" or "error".
    pub status: String,
    pub status_message: String,
    /// When a test or a use last recorded its status; `None` before the first.
    pub last_used_micros: Option<i64>,
}

/// An import job (see `ImportJobSet`, `ImportJobProgress`): what it copies and how far it got.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImportJob {
    pub account: String,
    pub id: String,
    pub source_type: String,
    pub connection_id: String,
    /// What it copies, as JSON text ({"table": ...}, {"query": ...}, {"topic": ...}, ...).
    pub source_json: String,
    pub dataset: String,
    /// "append" or "replace".
    pub mode: String,
    pub follow: bool,
    pub author: String,
    pub created_at_micros: i64,
    /// "queued", "running", "succeeded", "failed" or "cancelled".
    pub state: String,
    pub records_read: u64,
    pub records_written: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// Where its next batch starts, as JSON text; empty before the first.
    pub cursor_json: String,
    pub error: String,
    /// When it first ran; `None` while queued.
    pub started_at_micros: Option<i64>,
    /// When it reached a final state.
    pub finished_at_micros: Option<i64>,
}

impl ImportJob {
    /// Whether it is over: succeeded, failed or cancelled.
    pub fn finished(&self) -> bool {
        matches!(self.state.as_str(), "succeeded" | "failed" | "cancelled")
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
    /// Roles, by (account, role name).
    pub roles: BTreeMap<(String, String), Role>,
    /// Notification channels, by (account, channel id).
    pub channels: BTreeMap<(String, String), Channel>,
    /// Message templates, by (account, template id).
    pub templates: BTreeMap<(String, String), Template>,
    /// Monitors, by (account, monitor id).
    pub monitors: BTreeMap<(String, String), Monitor>,
    /// Connections, by (account, connection id).
    pub connections: BTreeMap<(String, String), Connection>,
    /// Import jobs, by (account, job id).
    pub imports: BTreeMap<(String, String), ImportJob>,
    /// Console sessions, by the hex SHA-256 of their token. A session's sign-in drops the
    /// ones expired by then, so the map holds the live ones and those expired lately.
    pub sessions: BTreeMap<String, ConsoleSession>,
}

/// Bytes as lowercase hex.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The entries of one account in a map keyed by (account, id), in id order.
fn of_account<'a, T>(
    map: &'a BTreeMap<(String, String), T>,
    account: &'a str,
) -> impl Iterator<Item = &'a T> {
    map.range((account.to_owned(), String::new())..)
        .take_while(move |((owner, _), _)| owner == account)
        .map(|(_, value)| value)
}

impl ControlState {
    /// The root user of `account`, if it has one.
    pub fn root_user(&self, account: &str) -> Option<&User> {
        self.users.values().find(|u| u.account == account && u.root)
    }

    /// The user `name` of `account`.
    pub fn user(&self, account: &str, name: &str) -> Option<&User> {
        self.users
            .values()
            .find(|u| u.account == account && u.name == name)
    }

    /// The users of `account`, in name order.
    pub fn users_of(&self, account: &str) -> Vec<&User> {
        let mut users: Vec<&User> = self
            .users
            .values()
            .filter(|u| u.account == account)
            .collect();
        users.sort_by(|a, b| a.name.cmp(&b.name));
        users
    }

    pub fn role(&self, account: &str, name: &str) -> Option<&Role> {
        self.roles.get(&(account.to_owned(), name.to_owned()))
    }

    /// The roles of `account`, in name order.
    pub fn roles_of<'a>(&'a self, account: &'a str) -> impl Iterator<Item = &'a Role> {
        self.roles
            .range((account.to_owned(), String::new())..)
            .take_while(move |((owner, _), _)| owner == account)
            .map(|(_, role)| role)
    }

    pub fn channels_of<'a>(&'a self, account: &'a str) -> impl Iterator<Item = &'a Channel> {
        of_account(&self.channels, account)
    }

    pub fn templates_of<'a>(&'a self, account: &'a str) -> impl Iterator<Item = &'a Template> {
        of_account(&self.templates, account)
    }

    pub fn monitors_of<'a>(&'a self, account: &'a str) -> impl Iterator<Item = &'a Monitor> {
        of_account(&self.monitors, account)
    }

    pub fn connections_of<'a>(&'a self, account: &'a str) -> impl Iterator<Item = &'a Connection> {
        of_account(&self.connections, account)
    }

    pub fn connection(&self, account: &str, id: &str) -> Option<&Connection> {
        self.connections.get(&(account.to_owned(), id.to_owned()))
    }

    pub fn imports_of<'a>(&'a self, account: &'a str) -> impl Iterator<Item = &'a ImportJob> {
        of_account(&self.imports, account)
    }

    pub fn import(&self, account: &str, id: &str) -> Option<&ImportJob> {
        self.imports.get(&(account.to_owned(), id.to_owned()))
    }

    /// The connection of `account` named `name`.
    pub fn connection_named(&self, account: &str, name: &str) -> Option<&Connection> {
        self.connections
            .values()
            .find(|c| c.account == account && c.name == name)
    }

    pub fn channel(&self, account: &str, id: &str) -> Option<&Channel> {
        self.channels.get(&(account.to_owned(), id.to_owned()))
    }

    pub fn monitor(&self, account: &str, id: &str) -> Option<&Monitor> {
        self.monitors.get(&(account.to_owned(), id.to_owned()))
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
                        password_hash: (!created.password_hash.is_empty())
                            .then(|| created.password_hash.clone()),
                        created_at_micros: at,
                    },
                );
                vec![RecordKey::User(created.access_key.clone())]
            }
            Body::UserChanged(changed) => {
                let Some(user) = self
                    .users
                    .values_mut()
                    .find(|u| u.account == changed.account && u.name == changed.name)
                else {
                    return Vec::new();
                };
                user.roles = changed.roles.clone();
                user.password_hash =
                    (!changed.password_hash.is_empty()).then(|| changed.password_hash.clone());
                vec![RecordKey::User(user.access_key.clone())]
            }
            Body::UserKeysRotated(rotated) => {
                let old = &rotated.old_access_key;
                match self.users.get(old) {
                    Some(u) if u.account == rotated.account && u.name == rotated.name => {}
                    // Applied already, or about another user: nothing to do.
                    _ => return Vec::new(),
                }
                let Some(mut user) = self.users.remove(old) else {
                    return Vec::new();
                };
                user.access_key = rotated.access_key.clone();
                user.sealed_secret = rotated.sealed_secret.to_vec();
                self.users.insert(rotated.access_key.clone(), user);
                vec![
                    RecordKey::User(old.clone()),
                    RecordKey::User(rotated.access_key.clone()),
                ]
            }
            Body::UserDeleted(deleted) => {
                let gone: Vec<String> = self
                    .users
                    .values()
                    .filter(|u| u.account == deleted.account && u.name == deleted.name)
                    .map(|u| u.access_key.clone())
                    .collect();
                for key in &gone {
                    self.users.remove(key);
                }
                // Its console sessions go with it.
                let sessions =
                    self.drop_sessions(|s| s.account == deleted.account && s.user == deleted.name);
                gone.into_iter()
                    .map(RecordKey::User)
                    .chain(sessions)
                    .collect()
            }
            Body::ConsoleSessionStarted(started) => {
                let mut touched = self.drop_sessions(|s| s.expires_micros <= at);
                let key = hex(&started.token_sha256);
                self.sessions.insert(
                    key.clone(),
                    ConsoleSession {
                        account: started.account.clone(),
                        user: started.user.clone(),
                        session_id: started.session_id.clone(),
                        token_sha256: started.token_sha256.to_vec(),
                        user_fingerprint: started.user_fingerprint.to_vec(),
                        started_at_micros: at,
                        expires_micros: started.expires_micros,
                    },
                );
                touched.push(RecordKey::Session(key));
                touched
            }
            Body::ConsoleSessionEnded(ended) => self
                .drop_sessions(|s| s.account == ended.account && s.session_id == ended.session_id),
            Body::RoleSet(set) => {
                let key = (set.account.clone(), set.name.clone());
                self.roles.insert(key.clone(), Role::from_event(set, at));
                vec![RecordKey::Role(key)]
            }
            Body::RoleDeleted(deleted) => {
                let key = (deleted.account.clone(), deleted.name.clone());
                match self.roles.remove(&key) {
                    Some(_) => vec![RecordKey::Role(key)],
                    None => Vec::new(),
                }
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
            Body::AlertingChanged(changed) => self.apply_alerting(changed, at),
            Body::ConnectionSet(set) => {
                let key = (set.account.clone(), set.connection_id.clone());
                // Dated by its first event, as its updates are by theirs (the writer's clock,
                // which the event's `created_at_micros` read, is not the log's).
                let created_at_micros = self
                    .connections
                    .get(&key)
                    .map_or(at, |old| old.created_at_micros);
                // A changed config (or secrets) is untested: inactive until used again.
                let (status, status_message, last_used_micros) = match self.connections.get(&key) {
                    Some(old)
                        if old.config_json == set.config_json
                            && old.sealed_secrets == set.sealed_secrets =>
                    {
                        (
                            old.status.clone(),
                            old.status_message.clone(),
                            old.last_used_micros,
                        )
                    }
                    Some(old) => ("inactive".to_owned(), String::new(), old.last_used_micros),
                    None => ("inactive".to_owned(), String::new(), None),
                };
                self.connections.insert(
                    key.clone(),
                    Connection {
                        account: set.account.clone(),
                        id: set.connection_id.clone(),
                        connector_id: set.connector_id.clone(),
                        name: set.name.clone(),
                        config_json: set.config_json.clone(),
                        sealed_secrets: set.sealed_secrets.to_vec(),
                        author: set.author.clone(),
                        created_at_micros,
                        updated_at_micros: at,
                        status,
                        status_message,
                        last_used_micros,
                    },
                );
                vec![RecordKey::Connection(key)]
            }
            Body::ConnectionDeleted(deleted) => {
                let key = (deleted.account.clone(), deleted.connection_id.clone());
                match self.connections.remove(&key) {
                    Some(_) => vec![RecordKey::Connection(key)],
                    None => Vec::new(),
                }
            }
            Body::ConnectionStatus(status) => {
                let key = (status.account.clone(), status.connection_id.clone());
                match self.connections.get_mut(&key) {
                    Some(connection) => {
                        connection.status = status.status.clone();
                        connection.status_message = status.message.clone();
                        connection.last_used_micros = Some(at);
                        vec![RecordKey::Connection(key)]
                    }
                    None => Vec::new(),
                }
            }
            Body::ImportJobSet(set) => {
                let key = (set.account.clone(), set.job_id.clone());
                if self.imports.contains_key(&key) {
                    return Vec::new();
                }
                self.imports.insert(
                    key.clone(),
                    ImportJob {
                        account: set.account.clone(),
                        id: set.job_id.clone(),
                        source_type: set.source_type.clone(),
                        connection_id: set.connection_id.clone(),
                        source_json: set.source_json.clone(),
                        dataset: set.dataset.clone(),
                        mode: set.mode.clone(),
                        follow: set.follow,
                        author: set.author.clone(),
                        created_at_micros: at,
                        state: "queued".to_owned(),
                        records_read: 0,
                        records_written: 0,
                        bytes_read: 0,
                        bytes_written: 0,
                        cursor_json: String::new(),
                        error: String::new(),
                        started_at_micros: None,
                        finished_at_micros: None,
                    },
                );
                vec![RecordKey::Import(key)]
            }
            Body::ImportJobProgress(progress) => {
                let key = (progress.account.clone(), progress.job_id.clone());
                let Some(job) = self.imports.get_mut(&key) else {
                    return Vec::new();
                };
                let finishing = progress.state != "running";
                // The first final state stays; a batch acknowledged after it still counts.
                if job.finished() && finishing {
                    return Vec::new();
                }
                if progress.records_written >= job.records_written {
                    job.records_read = progress.records_read;
                    job.records_written = progress.records_written;
                    job.bytes_read = progress.bytes_read;
                    job.bytes_written = progress.bytes_written;
                    job.cursor_json = progress.cursor_json.clone();
                }
                job.started_at_micros.get_or_insert(at);
                if !job.finished() {
                    job.state = progress.state.clone();
                    job.error = progress.error.clone();
                    if finishing {
                        job.finished_at_micros = Some(at);
                    }
                }
                vec![RecordKey::Import(key)]
            }
            Body::ImportJobDeleted(deleted) => {
                let key = (deleted.account.clone(), deleted.job_id.clone());
                match self.imports.remove(&key) {
                    Some(_) => vec![RecordKey::Import(key)],
                    None => Vec::new(),
                }
            }
            // Not control-partition events.
            Body::LeaderEpoch(_)
            | Body::MonitorRan(_)
            | Body::AlertDelivered(_)
            | Body::ThreadSet(_)
            | Body::ThreadDeleted(_)
            | Body::MessageAdded(_)
            | Body::MessagesCleared(_)
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

impl ControlState {
    /// Removes the sessions `gone` picks; their record keys.
    fn drop_sessions(&mut self, gone: impl Fn(&ConsoleSession) -> bool) -> Vec<RecordKey> {
        let keys: Vec<String> = self
            .sessions
            .iter()
            .filter(|(_, session)| gone(session))
            .map(|(key, _)| key.clone())
            .collect();
        for key in &keys {
            self.sessions.remove(key);
        }
        keys.into_iter().map(RecordKey::Session).collect()
    }

    /// The live-or-lately-expired session whose token has SHA-256 `token_sha256`.
    pub fn session(&self, token_sha256: &[u8]) -> Option<&ConsoleSession> {
        self.sessions.get(&hex(token_sha256))
    }

    fn apply_alerting(
        &mut self,
        changed: &strata_log::event::AlertingChanged,
        at: i64,
    ) -> Vec<RecordKey> {
        let account = &changed.account;
        let key = |id: &str| (account.clone(), id.to_owned());
        let mut touched = Vec::new();
        for channel in &changed.channels {
            let pair = key(&channel.channel_id);
            self.channels.insert(
                pair.clone(),
                Channel {
                    account: account.clone(),
                    id: channel.channel_id.clone(),
                    config_json: channel.config_json.clone(),
                    updated_at_micros: at,
                },
            );
            touched.push(RecordKey::Channel(pair));
        }
        for template in &changed.templates {
            let pair = key(&template.template_id);
            self.templates.insert(
                pair.clone(),
                Template {
                    account: account.clone(),
                    id: template.template_id.clone(),
                    name: template.name.clone(),
                    source: template.source.clone(),
                },
            );
            touched.push(RecordKey::Template(pair));
        }
        for monitor in &changed.monitors {
            let pair = key(&monitor.monitor_id);
            self.monitors.insert(
                pair.clone(),
                Monitor {
                    account: account.clone(),
                    id: monitor.monitor_id.clone(),
                    version: monitor.version,
                    monitor_json: monitor.monitor_json.clone(),
                    author: monitor.author.clone(),
                    updated_at_micros: at,
                },
            );
            touched.push(RecordKey::Monitor(pair));
        }
        for id in &changed.deleted_channels {
            self.channels.remove(&key(id));
            touched.push(RecordKey::Channel(key(id)));
        }
        for id in &changed.deleted_monitors {
            self.monitors.remove(&key(id));
            touched.push(RecordKey::Monitor(key(id)));
        }
        touched
    }
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum RecordKey {
    Account(String),
    Key(String),
    Database((String, String)),
    User(String),
    Role((String, String)),
    Channel((String, String)),
    Template((String, String)),
    Monitor((String, String)),
    Connection((String, String)),
    Import((String, String)),
    /// A console session, by the hex SHA-256 of its token.
    Session(String),
}

impl RecordKey {
    fn text(&self) -> String {
        match self {
            RecordKey::Account(name) => format!("a/{name}"),
            RecordKey::Key(id) => format!("k/{id}"),
            RecordKey::Database((account, name)) => format!("d/{account}/{name}"),
            RecordKey::User(access_key) => format!("u/{access_key}"),
            RecordKey::Role((account, name)) => format!("r/{account}/{name}"),
            RecordKey::Channel((account, id)) => format!("ch/{account}/{id}"),
            RecordKey::Template((account, id)) => format!("t/{account}/{id}"),
            RecordKey::Monitor((account, id)) => format!("m/{account}/{id}"),
            RecordKey::Connection((account, id)) => format!("c/{account}/{id}"),
            RecordKey::Import((account, id)) => format!("i/{account}/{id}"),
            RecordKey::Session(token) => format!("s/{token}"),
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
        for role in store::scan::<Role>(&tree, "r/")? {
            state
                .roles
                .insert((role.account.clone(), role.name.clone()), role);
        }
        for channel in store::scan::<Channel>(&tree, "ch/")? {
            state
                .channels
                .insert((channel.account.clone(), channel.id.clone()), channel);
        }
        for template in store::scan::<Template>(&tree, "t/")? {
            state
                .templates
                .insert((template.account.clone(), template.id.clone()), template);
        }
        for monitor in store::scan::<Monitor>(&tree, "m/")? {
            state
                .monitors
                .insert((monitor.account.clone(), monitor.id.clone()), monitor);
        }
        for connection in store::scan::<Connection>(&tree, "c/")? {
            state.connections.insert(
                (connection.account.clone(), connection.id.clone()),
                connection,
            );
        }
        for job in store::scan::<ImportJob>(&tree, "i/")? {
            state
                .imports
                .insert((job.account.clone(), job.id.clone()), job);
        }
        for session in store::scan::<ConsoleSession>(&tree, "s/")? {
            state.sessions.insert(hex(&session.token_sha256), session);
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
                RecordKey::Role(pair) => match next.roles.get(pair) {
                    Some(role) => writes.put(&text, role)?,
                    None => writes.delete(&text),
                },
                RecordKey::Channel(pair) => match next.channels.get(pair) {
                    Some(channel) => writes.put(&text, channel)?,
                    None => writes.delete(&text),
                },
                RecordKey::Template(pair) => match next.templates.get(pair) {
                    Some(template) => writes.put(&text, template)?,
                    None => writes.delete(&text),
                },
                RecordKey::Monitor(pair) => match next.monitors.get(pair) {
                    Some(monitor) => writes.put(&text, monitor)?,
                    None => writes.delete(&text),
                },
                RecordKey::Connection(pair) => match next.connections.get(pair) {
                    Some(connection) => writes.put(&text, connection)?,
                    None => writes.delete(&text),
                },
                RecordKey::Import(pair) => match next.imports.get(pair) {
                    Some(job) => writes.put(&text, job)?,
                    None => writes.delete(&text),
                },
                RecordKey::Session(token) => match next.sessions.get(token) {
                    Some(session) => writes.put(&text, session)?,
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
        AccountCreated, ConsoleSessionEnded, ConsoleSessionStarted, DatabaseCreated,
        DatabaseDeleted, DatabasePurged, FieldMask, FieldSecurity, NotificationPermission,
        PaymentMethodSet, RoleDeleted, RolePermission, RoleSet, UserChanged, UserCreated,
        UserDeleted, UserKeysRotated,
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
            at(Body::UserCreated(UserCreated {
                account: "acme".into(),
                name: "ann".into(),
                access_key: "AK1".into(),
                sealed_secret: vec![1].into(),
                root: false,
                roles: vec!["readers".into()],
                password_hash: "$argon2id$x".into(),
            })),
            at(Body::UserCreated(UserCreated {
                account: "acme".into(),
                name: "bob".into(),
                access_key: "AK2".into(),
                sealed_secret: vec![2].into(),
                root: false,
                roles: Vec::new(),
                password_hash: String::new(),
            })),
            at(Body::UserKeysRotated(UserKeysRotated {
                account: "acme".into(),
                name: "ann".into(),
                old_access_key: "AK1".into(),
                access_key: "AK3".into(),
                sealed_secret: vec![3].into(),
            })),
            at(Body::UserChanged(UserChanged {
                account: "acme".into(),
                name: "ann".into(),
                roles: vec!["readers".into(), "writers".into()],
                password_hash: "$argon2id$y".into(),
            })),
            at(Body::UserDeleted(UserDeleted {
                account: "acme".into(),
                name: "bob".into(),
            })),
            at(Body::RoleSet(role("readers"))),
            at(Body::RoleSet(role("writers"))),
            at(Body::RoleDeleted(RoleDeleted {
                account: "acme".into(),
                name: "writers".into(),
            })),
        ]
    }

    fn role(name: &str) -> RoleSet {
        RoleSet {
            account: "acme".into(),
            name: name.into(),
            version: "2025-01-01".into(),
            permissions: vec![RolePermission {
                resource_type: "record".into(),
                actions: vec!["read".into()],
                resources: vec!["logs-*".into()],
                fields: Some(FieldSecurity {
                    has_allow: false,
                    allow: Vec::new(),
                    deny: vec!["secret_*".into()],
                    mask: vec![FieldMask {
                        field: "email".into(),
                        mask: "redact".into(),
                    }],
                }),
                filter_json: r#"{"term":{"team":"a"}}"#.into(),
            }],
            notifications: vec![NotificationPermission {
                kind: "Monitor".into(),
                actions: vec!["read".into()],
                resources: vec!["team-*".into()],
            }],
        }
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
        // Ann's keys rotated: the old access key is gone, the new one is hers; Bob is deleted.
        assert!(!state.users.contains_key("AK1") && !state.users.contains_key("AK2"));
        let ann = state.user("acme", "ann").unwrap();
        assert_eq!(ann.access_key, "AK3");
        assert_eq!(ann.sealed_secret, vec![3]);
        assert_eq!(ann.roles, ["readers", "writers"]);
        assert_eq!(ann.password_hash.as_deref(), Some("$argon2id$y"));
        assert_eq!(state.users_of("acme").len(), 1);
        let names: Vec<&str> = state.roles_of("acme").map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["readers"]);
        let readers = state.role("acme", "readers").unwrap();
        assert_eq!(readers.to_event(), role("readers"));
        assert_eq!(
            readers.permissions[0].fields.as_ref().unwrap().mask,
            [("email".to_owned(), "redact".to_owned())]
        );
    }

    #[test]
    fn sessions_start_end_expire_and_go_with_their_user() {
        let started = |user: &str, id: &str, token: u8, at_micros: i64, expires: i64| Envelope {
            timestamp_micros: at_micros,
            body: Some(Body::ConsoleSessionStarted(ConsoleSessionStarted {
                account: "acme".into(),
                user: user.into(),
                session_id: id.into(),
                token_sha256: vec![token; 32].into(),
                user_fingerprint: vec![1].into(),
                expires_micros: expires,
            })),
            ..Default::default()
        };
        let dir = tempfile::tempdir().unwrap();
        let store = StateStore::open(dir.path()).unwrap();
        let mut projection = ControlProjection::open(&store).unwrap();
        let events = vec![
            started("ann", "s1", 1, 10, 100),
            started("bob", "s2", 2, 20, 1_000),
            started("ann", "s3", 3, 30, 1_000),
            started("ann", "s4", 4, 40, 1_000),
            // Ann signs out of s3; Bob is deleted, and his session with him.
            at(Body::ConsoleSessionEnded(ConsoleSessionEnded {
                account: "acme".into(),
                session_id: "s3".into(),
            })),
            at(Body::UserDeleted(UserDeleted {
                account: "acme".into(),
                name: "bob".into(),
            })),
            // A sign-in after s1 expired drops it.
            started("cid", "s5", 5, 200, 1_000),
        ];
        projection
            .apply(
                &events,
                Checkpoint {
                    next_offset: 7,
                    epoch: 1,
                },
            )
            .unwrap();
        let ids = |state: &ControlState| -> Vec<String> {
            let mut ids: Vec<String> = state
                .sessions
                .values()
                .map(|s| s.session_id.clone())
                .collect();
            ids.sort();
            ids
        };
        assert_eq!(ids(&projection.snapshot()), ["s4", "s5"]);
        let s4 = projection.snapshot().session(&[4; 32]).cloned().unwrap();
        assert_eq!((s4.user.as_str(), s4.started_at_micros), ("ann", 40));
        assert!(projection.snapshot().session(&[3; 32]).is_none());
        store.flush().unwrap();
        drop(projection);
        let reopened = ControlProjection::open(&store).unwrap();
        assert_eq!(ids(&reopened.snapshot()), ["s4", "s5"]);
        assert_eq!(reopened.snapshot().session(&[4; 32]), Some(&s4));
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
