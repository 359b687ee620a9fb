//! Accounts, API keys, authentication and databases: the `_control` partition's writes.
//!
//! Control writes are rare and queue behind each other on the control leader (never refused as
//! busy); each validates against the state every earlier write produced.

use std::sync::Arc;

use serde::Serialize;
use strata_log::{
    envelope::Body,
    event::{
        AccountCreated, ApiKeyCreated, DatabaseCreated, DatabaseDeleted, PaymentMethodSet,
        StorageBinding as BindingEvent, StorageVerified,
    },
};
use strata_projections::{
    catalog::CatalogProjection,
    control::{Account, DatabaseStatus, StorageBinding},
};

use super::{Engine, Origin, blocking};
use crate::{
    config::Plan,
    error::{Error, LimitDetails, Result},
    keys, names,
};

/// Who a data-plane request acts as: the account and key it authenticated with.
#[derive(Clone, Debug)]
pub struct Principal {
    pub account: String,
    pub key_id: String,
    pub databases_pattern: String,
}

impl Principal {
    /// Whether the key may address `database`.
    pub fn covers(&self, database: &str) -> bool {
        keys::pattern_matches(&self.databases_pattern, database)
    }

    /// 403 unless the key may address `database`.
    pub fn authorize(&self, database: &str) -> Result<()> {
        match self.covers(database) {
            true => Ok(()),
            false => Err(Error::Forbidden(format!(
                "this api key may not address database {database:?} (it covers {:?})",
                self.databases_pattern
            ))),
        }
    }

    /// The origin stamped on the events of a request made with this key.
    pub fn origin(&self, request_id: &str) -> Origin {
        Origin {
            principal: format!("key:{}", self.key_id),
            request_id: request_id.to_owned(),
        }
    }
}

/// An issued key: the text is shown once and never stored.
#[derive(Clone, Debug, Serialize)]
pub struct KeyInfo {
    pub key: String,
    pub id: String,
    pub account: String,
    pub databases: String,
}

/// A storage binding as create_database takes it.
#[derive(Clone, Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StorageRequest {
    pub url: String,
    #[serde(default)]
    pub region: Option<String>,
    #[serde(default)]
    pub endpoint: Option<String>,
    #[serde(default)]
    pub access_key_id: Option<String>,
    #[serde(default)]
    pub secret_access_key: Option<String>,
}

impl StorageRequest {
    fn binding(&self) -> StorageBinding {
        StorageBinding {
            url: self.url.clone(),
            region: self.region.clone(),
            endpoint: self.endpoint.clone(),
            access_key_id: self.access_key_id.clone(),
            secret_access_key: self.secret_access_key.clone(),
            sealed_secret: None,
            verified: false,
        }
    }
}

/// A database as list_databases shows it.
#[derive(Clone, Debug, Serialize)]
pub struct DatabaseInfo {
    pub name: String,
    pub state: &'static str,
    pub created_at: String,
    pub tables: usize,
    pub storage: Option<serde_json::Value>,
}

impl Engine {
    pub async fn create_account(
        &self,
        name: &str,
        enterprise: bool,
        origin: &Origin,
    ) -> Result<Account> {
        names::check_account(name)?;
        let mut permit = self.control.permit().await?;
        if permit.snapshot().accounts.contains_key(name) {
            return Err(Error::AccountExists(name.to_owned()));
        }
        let body = Body::AccountCreated(AccountCreated {
            name: name.to_owned(),
            enterprise,
        });
        let state = permit.write(body, origin).await?;
        state
            .accounts
            .get(name)
            .cloned()
            .ok_or_else(|| Error::Internal(format!("account {name} missing after its creation")))
    }

    pub async fn set_payment_method(&self, name: &str, origin: &Origin) -> Result<Account> {
        let mut permit = self.control.permit().await?;
        if !permit.snapshot().accounts.contains_key(name) {
            return Err(Error::AccountNotFound(name.to_owned()));
        }
        let body = Body::PaymentMethodSet(PaymentMethodSet {
            account: name.to_owned(),
        });
        let state = permit.write(body, origin).await?;
        state
            .accounts
            .get(name)
            .cloned()
            .ok_or_else(|| Error::AccountNotFound(name.to_owned()))
    }

    pub async fn create_key(
        &self,
        account: &str,
        databases_pattern: Option<&str>,
        origin: &Origin,
    ) -> Result<KeyInfo> {
        let pattern = databases_pattern.unwrap_or("*");
        keys::check_pattern(pattern).map_err(Error::BadRequest)?;
        let mut permit = self.control.permit().await?;
        if !permit.snapshot().accounts.contains_key(account) {
            return Err(Error::AccountNotFound(account.to_owned()));
        }
        let issued = keys::issue();
        let body = Body::ApiKeyCreated(ApiKeyCreated {
            key_id: issued.id.clone(),
            account: account.to_owned(),
            key_sha256: issued.sha256.to_vec().into(),
            databases_pattern: pattern.to_owned(),
        });
        permit.write(body, origin).await?;
        Ok(KeyInfo {
            key: issued.text,
            id: issued.id,
            account: account.to_owned(),
            databases: pattern.to_owned(),
        })
    }

    /// Finds the key a request carries: 401 when it is missing, malformed or unknown.
    pub fn authenticate(&self, key_text: Option<&str>) -> Result<Principal> {
        let text = key_text.ok_or(Error::Unauthorized)?;
        let id = keys::id_of(text).ok_or(Error::Unauthorized)?;
        let state = self.control_state();
        let key = state.keys.get(id).ok_or(Error::Unauthorized)?;
        if !keys::same_hash(&keys::hash(text), &key.sha256) {
            return Err(Error::Unauthorized);
        }
        if !state.accounts.contains_key(&key.account) {
            return Err(Error::Unauthorized);
        }
        Ok(Principal {
            account: key.account.clone(),
            key_id: key.id.clone(),
            databases_pattern: key.databases_pattern.clone(),
        })
    }

    pub(super) fn plan(&self, account: &Account) -> &Plan {
        match account.payment_method {
            true => &self.config.plans.paid,
            false => &self.config.plans.free,
        }
    }

    /// Creates a database. With a storage binding (`storage`, for enterprise accounts) it waits
    /// for verification before any worker starts.
    pub async fn create_database(
        &self,
        principal: &Principal,
        name: &str,
        storage: Option<&StorageRequest>,
        origin: &Origin,
    ) -> Result<DatabaseInfo> {
        names::check_database(name)?;
        principal.authorize(name)?;
        let mut permit = self.control.permit().await?;
        let state = permit.snapshot();
        let account = state
            .accounts
            .get(&principal.account)
            .ok_or(Error::Unauthorized)?;
        if storage.is_some() && !account.enterprise {
            return Err(Error::Forbidden(format!(
                "account {:?} is not entitled to storage bindings (an enterprise feature)",
                account.name
            )));
        }
        if let Some(existing) = state.database(&account.name, name) {
            return Err(Error::DatabaseExists {
                name: name.to_owned(),
                note: match existing.status {
                    DatabaseStatus::Deleting => {
                        " and is being deleted; the name is free once the purge ends"
                    }
                    DatabaseStatus::Ready | DatabaseStatus::PendingVerification => "",
                },
            });
        }
        let plan = self.plan(account);
        let owned = state
            .databases_of(&account.name)
            .filter(|d| d.status != DatabaseStatus::Deleting)
            .count() as u64;
        if owned >= plan.max_databases {
            let raises = !account.payment_method
                && self.config.plans.paid.max_databases > plan.max_databases;
            return Err(Error::LimitReached {
                message: format!(
                    "account {:?} owns {owned} databases, the most its plan allows ({}){}",
                    account.name,
                    plan.max_databases,
                    if raises {
                        "; adding a payment method raises the limit"
                    } else {
                        ""
                    }
                ),
                details: LimitDetails {
                    limit: "databases",
                    used: owned,
                    requested: 1,
                    max: plan.max_databases,
                    payment_method_raises: raises,
                },
            });
        }
        if let Some(storage) = storage {
            crate::storage::check(&storage.binding())?;
        }
        // The secret goes into the log sealed, never in clear.
        let storage = match storage {
            None => None,
            Some(s) => Some(BindingEvent {
                url: s.url.clone(),
                region: s.region.clone().unwrap_or_default(),
                endpoint: s.endpoint.clone().unwrap_or_default(),
                access_key_id: s.access_key_id.clone().unwrap_or_default(),
                secret_access_key: String::new(),
                sealed_secret_access_key: match &s.secret_access_key {
                    Some(secret) => self.seal.seal(secret.as_bytes())?.into(),
                    None => Default::default(),
                },
            }),
        };
        let body = Body::DatabaseCreated(DatabaseCreated {
            account: account.name.clone(),
            name: name.to_owned(),
            database_id: uuid::Uuid::now_v7().to_string(),
            storage,
        });
        let state = permit.write(body, origin).await?;
        drop(permit);
        let database = state
            .database(&principal.account, name)
            .ok_or_else(|| Error::Internal(format!("database {name} missing after creation")))?;
        // A new database is about to be used: start its runtime now (a bound one waits for
        // verification). If that takes longer than a request waits, or the node has no room, it
        // is reported as it stands.
        if database.status == DatabaseStatus::Ready {
            // The database exists now whatever happens here: a failed activation is retried by
            // the next request, and reported by its state, not by this answer.
            match self.runtime(database).await {
                Ok(_) | Err(Error::Unavailable(_)) => {}
                Err(error) => {
                    tracing::warn!(database = %name, %error, "activation after creation failed")
                }
            }
        }
        Ok(self.describe(database, 0))
    }

    /// The account's databases that the key may address, in name order.
    pub async fn list_databases(&self, principal: &Principal) -> Result<Vec<DatabaseInfo>> {
        let state = self.control_state();
        let mut out = Vec::new();
        for database in state
            .databases_of(&principal.account)
            .filter(|d| principal.covers(&d.name))
        {
            let tables = match self.active_runtime(&database.id) {
                Some(runtime) => runtime.catalog.snapshot().tables.len(),
                None => {
                    let store = self.store.clone();
                    let id = database.id.clone();
                    blocking(move || CatalogProjection::stored_table_count(&store, &id)).await??
                }
            };
            out.push(self.describe(database, tables));
        }
        Ok(out)
    }

    fn describe(
        &self,
        database: &strata_projections::control::Database,
        tables: usize,
    ) -> DatabaseInfo {
        let state = match database.status {
            DatabaseStatus::Ready => self.runtime_state(&database.id),
            DatabaseStatus::PendingVerification => "pending_verification",
            DatabaseStatus::Deleting => "deleting",
        };
        let created_at = chrono::DateTime::from_timestamp_micros(database.created_at_micros)
            .unwrap_or_default()
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        DatabaseInfo {
            name: database.name.clone(),
            state,
            created_at,
            tables,
            storage: database
                .storage
                .as_ref()
                .map(|s| serde_json::json!({"url": s.url, "verified": s.verified})),
        }
    }

    /// Begins the deletion of a database: records it and returns; the purge runs in the
    /// background. Deleting a database that does not exist or is being deleted succeeds.
    pub async fn delete_database(
        self: &Arc<Self>,
        principal: &Principal,
        name: &str,
        origin: &Origin,
    ) -> Result<()> {
        names::check_database(name)?;
        principal.authorize(name)?;
        let mut permit = self.control.permit().await?;
        let Some(database) = permit
            .snapshot()
            .database(&principal.account, name)
            .cloned()
        else {
            return Ok(());
        };
        if database.status == DatabaseStatus::Deleting {
            return Ok(());
        }
        // A catalog change in flight would race the deletion: refuse, the client retries.
        let runtime = self.active_runtime(&database.id);
        let _catalog = match &runtime {
            Some(runtime) => Some(runtime.catalog.try_permit(self.write_wait()).await?.ok_or_else(
                || {
                    Error::ConcurrentChange(format!(
                        "database {name:?} changed concurrently (a table change is in flight); retry"
                    ))
                },
            )?),
            None => None,
        };
        let body = Body::DatabaseDeleted(DatabaseDeleted {
            account: database.account.clone(),
            name: database.name.clone(),
            database_id: database.id.clone(),
        });
        permit.write(body, origin).await?;
        drop(permit);
        // Its rows stop counting now, not when the purge ends.
        self.forget_database_usage(&database.account, &database.id);
        self.spawn_purge(database);
        Ok(())
    }
}

impl Engine {
    /// Proves a database's storage binding end to end (put, get, list, delete a probe object)
    /// and, the first time it passes, lets the database's workers start.
    pub async fn verify_storage(
        &self,
        principal: &Principal,
        name: &str,
        origin: &Origin,
    ) -> Result<()> {
        names::check_database(name)?;
        principal.authorize(name)?;
        let database = self
            .control_state()
            .database(&principal.account, name)
            .cloned()
            .ok_or_else(|| Error::DatabaseNotFound(name.to_owned()))?;
        if database.status == DatabaseStatus::Deleting {
            return Err(Error::Gone(format!("database {name:?} is being purged")));
        }
        let Some(binding) = &database.storage else {
            return Err(Error::BadRequest(format!(
                "database {name:?} has no storage binding to verify"
            )));
        };
        crate::storage::verify(&self.unsealed(binding)?).await?;
        if binding.verified {
            return Ok(());
        }
        let mut permit = self.control.permit().await?;
        let current = permit.snapshot();
        match current.database(&principal.account, name) {
            Some(d) if d.id == database.id && d.status == DatabaseStatus::PendingVerification => {
                let body = Body::StorageVerified(StorageVerified {
                    account: database.account.clone(),
                    name: database.name.clone(),
                    database_id: database.id.clone(),
                });
                permit.write(body, origin).await?;
                Ok(())
            }
            Some(d) if d.id == database.id && d.status == DatabaseStatus::Deleting => {
                Err(Error::Gone(format!("database {name:?} is being purged")))
            }
            Some(d) if d.id == database.id => Ok(()),
            _ => Err(Error::DatabaseNotFound(name.to_owned())),
        }
    }
}
