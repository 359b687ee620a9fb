//! Connections to external sources (spec sections 2 and 4.4): the catalogue of source types
//! ([`catalogue`]), connections kept in the control partition with their secrets sealed
//! (`ConnectionSet`, `ConnectionDeleted`, `ConnectionStatus`), and their sources opened on
//! first use ([`source`]: the SQL wires in [`wire`], object stores in [`files`]) and read in
//! place through the access door ([`Engine::read_source`]).
//!
//! Rights (docs/api.md): creating, changing and deleting a connection needs the root user or
//! `dataset: create` on `<connection name>/*`; reading its dataset `t` needs `record: read`
//! on `<connection name>/t`, and Deny on a field removes it before the query reaches the
//! source. A user sees the connections one of its permissions reaches.

pub mod amqp;
pub mod catalogue;
pub mod config;
pub mod dsl;
pub mod files;
pub mod http_json;
pub mod kafka;
pub mod messages;
pub mod mqtt;
pub mod nats;
pub mod prometheus;
pub mod redis_keys;
mod search;
pub mod search_engine;
pub mod source;
pub mod sql;
pub mod wire;

use std::{collections::HashMap, sync::Arc};

use chrono::Utc;
use serde_json::{Map, Value, json};
use strata_log::{
    envelope::Body,
    event::{ConnectionDeleted, ConnectionSet, ConnectionStatus},
};
use strata_projections::control::Connection;

use self::{
    catalogue::{CONNECTORS, Connector},
    config::Checked,
    source::Source,
};
use crate::{
    engine::{Action, Engine, Origin, PlatformPrincipal, platform::iso_time},
    error::{Error, Result},
};

/// How often a connection in use records that it was used (its `last_used_at`), at most.
const USE_RECORDED_EVERY_MICROS: i64 = 60_000_000;

/// The sources this node has opened, by (account, connection id), with the version
/// (`updated_at_micros`) of the connection they were opened for.
#[derive(Default)]
pub struct Sources {
    open: parking_lot::Mutex<HashMap<(String, String), Opened>>,
}

/// A source, and the version of its connection it was opened for.
type Opened = (i64, Arc<dyn Source>);

/// 403 for a user whose roles grant nothing (no role, no access).
fn granted(principal: &PlatformPrincipal) -> Result<()> {
    match principal.grant.is_nothing() {
        true => Err(crate::engine::access::no_grants(principal)),
        false => Ok(()),
    }
}

/// The catalogue entry of a source type, as GET /sources answers it.
pub fn connector_record(connector: &Connector) -> Value {
    json!({
        "id": connector.id,
        "name": connector.name,
        "category": connector.category,
        "description": connector.description,
        "family": connector.family,
        "protocol": connector.family.protocol(),
        "capabilities": connector.family.capabilities(),
        "config_keys": config::key_names(connector.family),
        "secret_keys": config::secret_names(connector.family),
    })
}

/// The whole catalogue.
pub fn connector_records() -> Vec<Value> {
    CONNECTORS.iter().map(connector_record).collect()
}

/// A connection as the API shows it: its config without secrets.
fn info(connection: &Connection, with_config: bool) -> Value {
    let mut answer = json!({
        "connection_id": connection.id,
        "connector_id": connection.connector_id,
        "name": connection.name,
        "status": connection.status,
        "created_at": iso_time(Some(connection.created_at_micros)),
        "updated_at": iso_time(Some(connection.updated_at_micros)),
        "last_used_at": iso_time(connection.last_used_micros),
    });
    if !connection.status_message.is_empty() {
        answer["message"] = json!(connection.status_message);
    }
    if with_config {
        answer["config"] = serde_json::from_str(&connection.config_json).unwrap_or(json!({}));
    }
    answer
}

/// 400 unless `name` can name a connection: 1 to 64 letters, digits, `_`, `-` and `.`, as it
/// appears in SQL (`"<name>"."<table>"`) and in role patterns (`<name>/<table>`).
fn check_connection_name(name: &str) -> Result<()> {
    let valid = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    match valid {
        true => Ok(()),
        false => Err(Error::BadRequest(format!(
            "name {name:?} must be 1 to 64 letters, digits, '_', '-' or '.'"
        ))),
    }
}

/// 403 unless `principal` may create, change or delete connection `name`.
pub(in crate::engine) fn permit_manage(principal: &PlatformPrincipal, name: &str) -> Result<()> {
    match principal
        .grant
        .allows(Action::DatasetCreate, &format!("{name}/*"))
    {
        true => Ok(()),
        false => Err(Error::Forbidden(format!(
            "user {} may not manage connection {name:?}: that takes the root user or \
             dataset:create on \"{name}/*\"",
            principal.user
        ))),
    }
}

/// The source type `id`, or a 404.
fn connector_of(id: &str) -> Result<&'static Connector> {
    catalogue::connector(id).ok_or_else(|| {
        Error::NotFound(format!(
            "unknown source type {id:?} (GET /sources lists the {} there are)",
            CONNECTORS.len()
        ))
    })
}

/// The fields of a connection document, or a 400.
fn fields<'a>(doc: &'a Value, allowed: &[&str]) -> Result<&'a Map<String, Value>> {
    let Value::Object(fields) = doc else {
        return Err(Error::BadRequest(
            "the body must be a JSON object {connector_id, name, config}".to_owned(),
        ));
    };
    if let Some(key) = fields.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(Error::BadRequest(format!(
            "{key} is not a field of a connection ({})",
            allowed.join(", ")
        )));
    }
    Ok(fields)
}

impl Engine {
    /// GET /sources: the catalogue.
    pub fn connectors(&self, principal: &PlatformPrincipal) -> Result<Vec<Value>> {
        granted(principal)?;
        Ok(connector_records())
    }

    /// The connection `id` of `principal`'s account as it may see it: 404 when there is none,
    /// 403 when none of its permissions reaches it.
    pub(in crate::engine) async fn connection(
        &self,
        principal: &PlatformPrincipal,
        id: &str,
    ) -> Result<Connection> {
        let state = self.current_control().await?;
        let connection = state
            .connection(&principal.account, id)
            .or_else(|| state.connection_named(&principal.account, id))
            .cloned()
            .ok_or_else(|| Error::NotFound(format!("connection {id:?} not found")))?;
        match principal.grant.reaches_connection(&connection.name) {
            true => Ok(connection),
            false => Err(Error::Forbidden(format!(
                "user {} may not use connection {:?}: no role reaches its datasets",
                principal.user, connection.name
            ))),
        }
    }

    /// The config of `connection` with its secrets unsealed.
    fn checked_config(&self, connection: &Connection) -> Result<Checked> {
        let shown: Map<String, Value> = serde_json::from_str(&connection.config_json)
            .map_err(|e| Error::Internal(format!("connection {}: {e}", connection.id)))?;
        let secrets: Map<String, Value> = match connection.sealed_secrets.is_empty() {
            true => Map::new(),
            false => serde_json::from_slice(&self.seal.unseal(&connection.sealed_secrets)?)
                .map_err(|e| Error::Internal(format!("connection {}: {e}", connection.id)))?,
        };
        Ok(Checked { shown, secrets })
    }

    /// The event that sets a connection, its secrets sealed; `previous`, the connection it
    /// changes (whose creation time it keeps).
    fn connection_event(
        &self,
        principal: &PlatformPrincipal,
        id: &str,
        connector: &Connector,
        name: &str,
        checked: &Checked,
        previous: Option<&Connection>,
    ) -> Result<ConnectionSet> {
        let created_at_micros = previous
            .map(|p| p.created_at_micros)
            .unwrap_or_else(|| Utc::now().timestamp_micros());
        // Unchanged secrets keep their sealed bytes, so that a change of name only is seen
        // as such (the connection keeps its status).
        let unchanged = previous.filter(|previous| {
            self.checked_config(previous)
                .is_ok_and(|old| old.secrets == checked.secrets)
        });
        let sealed_secrets = match (checked.secrets.is_empty(), unchanged) {
            (true, _) => Vec::new(),
            (false, Some(previous)) => previous.sealed_secrets.clone(),
            (false, None) => self.seal.seal(
                serde_json::to_string(&checked.secrets)
                    .map_err(|e| Error::Internal(e.to_string()))?
                    .as_bytes(),
            )?,
        };
        Ok(ConnectionSet {
            account: principal.account.clone(),
            connection_id: id.to_owned(),
            connector_id: connector.id.to_owned(),
            name: name.to_owned(),
            config_json: Value::Object(checked.shown.clone()).to_string(),
            sealed_secrets: sealed_secrets.into(),
            author: principal.user.clone(),
            created_at_micros,
        })
    }

    /// POST /source/{source_type}: creates a connection (status `inactive` until tested or
    /// used).
    pub async fn create_connection(
        &self,
        principal: &PlatformPrincipal,
        source_type: &str,
        doc: &Value,
        origin: &Origin,
    ) -> Result<Value> {
        granted(principal)?;
        let connector = connector_of(source_type)?;
        let fields = fields(doc, &["connector_id", "name", "config"])?;
        if let Some(given) = fields.get("connector_id")
            && given.as_str() != Some(connector.id)
        {
            return Err(Error::BadRequest(format!(
                "connector_id {given} is not the path's source type {:?}",
                connector.id
            )));
        }
        let name = fields
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| Error::BadRequest("name is required (a string)".to_owned()))?;
        check_connection_name(name)?;
        permit_manage(principal, name)?;
        let checked = config::check(connector, fields.get("config").unwrap_or(&json!({})))?;
        let id = uuid::Uuid::new_v4().to_string();
        let event = self.connection_event(principal, &id, connector, name, &checked, None)?;
        let mut permit = self.control.permit().await?;
        if permit
            .snapshot()
            .connection_named(&principal.account, name)
            .is_some()
        {
            return Err(Error::Exists(format!(
                "a connection named {name:?} already exists"
            )));
        }
        let state = permit.write(Body::ConnectionSet(event), origin).await?;
        let connection = state
            .connection(&principal.account, &id)
            .ok_or_else(|| Error::Internal("the connection just written is missing".to_owned()))?;
        Ok(info(connection, false))
    }

    /// GET /sources/connections: the connections `principal` may see.
    pub async fn list_connections(&self, principal: &PlatformPrincipal) -> Result<Vec<Value>> {
        granted(principal)?;
        let state = self.current_control().await?;
        Ok(state
            .connections_of(&principal.account)
            .filter(|c| principal.grant.reaches_connection(&c.name))
            .map(|c| info(c, false))
            .collect())
    }

    /// GET /source/{id}: one connection with its config (no secrets).
    pub async fn get_connection(&self, principal: &PlatformPrincipal, id: &str) -> Result<Value> {
        granted(principal)?;
        Ok(info(&self.connection(principal, id).await?, true))
    }

    /// PATCH /source/{id}: a new `name` and/or `config` keys (a null removes a key; secrets not
    /// given are kept).
    pub async fn patch_connection(
        &self,
        principal: &PlatformPrincipal,
        id: &str,
        doc: &Value,
        origin: &Origin,
    ) -> Result<Value> {
        granted(principal)?;
        let current = self.connection(principal, id).await?;
        permit_manage(principal, &current.name)?;
        let fields = fields(doc, &["name", "config"])?;
        let name = match fields.get("name") {
            Some(Value::String(name)) => name.clone(),
            None => current.name.clone(),
            Some(_) => return Err(Error::BadRequest("name must be a string".to_owned())),
        };
        check_connection_name(&name)?;
        permit_manage(principal, &name)?;
        let connector = connector_of(&current.connector_id)?;
        let checked = match fields.get("config") {
            Some(patch) => {
                let merged = config::merge(&self.checked_config(&current)?, patch)?;
                config::check(connector, &merged)?
            }
            None => self.checked_config(&current)?,
        };
        let event = self.connection_event(
            principal,
            &current.id,
            connector,
            &name,
            &checked,
            Some(&current),
        )?;
        let mut permit = self.control.permit().await?;
        let snapshot = permit.snapshot();
        if snapshot
            .connection(&principal.account, &current.id)
            .is_none()
        {
            return Err(Error::NotFound(format!("connection {id:?} not found")));
        }
        if snapshot
            .connection_named(&principal.account, &name)
            .is_some_and(|other| other.id != current.id)
        {
            return Err(Error::Exists(format!(
                "a connection named {name:?} already exists"
            )));
        }
        let state = permit.write(Body::ConnectionSet(event), origin).await?;
        self.forget_source(&principal.account, &current.id);
        let connection = state
            .connection(&principal.account, &current.id)
            .ok_or_else(|| Error::Internal("the connection just written is missing".to_owned()))?;
        Ok(info(connection, true))
    }

    /// DELETE /source/{id}.
    pub async fn delete_connection(
        &self,
        principal: &PlatformPrincipal,
        id: &str,
        origin: &Origin,
    ) -> Result<Value> {
        granted(principal)?;
        let current = self.connection(principal, id).await?;
        permit_manage(principal, &current.name)?;
        let mut permit = self.control.permit().await?;
        if permit
            .snapshot()
            .connection(&principal.account, &current.id)
            .is_none()
        {
            return Err(Error::NotFound(format!("connection {id:?} not found")));
        }
        let event = ConnectionDeleted {
            account: principal.account.clone(),
            connection_id: current.id.clone(),
        };
        permit.write(Body::ConnectionDeleted(event), origin).await?;
        self.forget_source(&principal.account, &current.id);
        Ok(json!({"acknowledged": true, "connection_id": current.id}))
    }

    /// POST /source/{id}/test: opens the source anew and lists its datasets.
    pub async fn test_connection(&self, principal: &PlatformPrincipal, id: &str) -> Result<Value> {
        granted(principal)?;
        let connection = self.connection(principal, id).await?;
        self.forget_source(&principal.account, &connection.id);
        let listed = async {
            let source = self.source_of(&connection).await?;
            source.datasets().await
        }
        .await;
        self.record_use(&connection, listed.as_ref().err()).await;
        let datasets = listed?;
        Ok(json!({
            "status": "active",
            "message": format!(
                "connected to {} ({}); {} datasets available",
                connection.name,
                connection.connector_id,
                datasets.len()
            ),
            "datasets_available": datasets.len(),
        }))
    }

    fn forget_source(&self, account: &str, id: &str) {
        self.sources
            .open
            .lock()
            .remove(&(account.to_owned(), id.to_owned()));
    }

    /// The source of `connection`, opened on first use and kept while the connection is
    /// unchanged.
    pub(in crate::engine) async fn source_of(
        &self,
        connection: &Connection,
    ) -> Result<Arc<dyn Source>> {
        let key = (connection.account.clone(), connection.id.clone());
        if let Some((version, source)) = self.sources.open.lock().get(&key)
            && *version == connection.updated_at_micros
        {
            return Ok(source.clone());
        }
        let connector = connector_of(&connection.connector_id)?;
        let config = self.checked_config(connection)?.whole();
        let opened = source::open(
            connector,
            &config,
            &format!("{}-{}", connection.id, connection.updated_at_micros),
            &self.queries,
        )
        .await?;
        self.sources
            .open
            .lock()
            .insert(key, (connection.updated_at_micros, opened.clone()));
        Ok(opened)
    }

    /// Records what a use of `connection` found, when its status changes or its last recorded
    /// use is old: `failed` is the error of a failed use. Only the source's own failures
    /// (network, host, credentials, rights) put a connection in error.
    pub(in crate::engine) async fn record_use(
        &self,
        connection: &Connection,
        failed: Option<&Error>,
    ) {
        let (status, message) = match failed {
            Some(error @ (Error::SourceFailed(_) | Error::NotAuthenticated(_))) => {
                ("error", error.to_string())
            }
            Some(Error::Forbidden(message)) if message.contains("the source refused") => {
                ("error", message.clone())
            }
            Some(_) => return,
            None => ("active", String::new()),
        };
        let now = Utc::now().timestamp_micros();
        let recent = connection
            .last_used_micros
            .is_some_and(|at| now - at < USE_RECORDED_EVERY_MICROS);
        if connection.status == status && connection.status_message == message && recent {
            return;
        }
        let event = ConnectionStatus {
            account: connection.account.clone(),
            connection_id: connection.id.clone(),
            status: status.to_owned(),
            message,
        };
        let written = async {
            let mut permit = self.control.permit().await?;
            if permit
                .snapshot()
                .connection(&connection.account, &connection.id)
                .is_none()
            {
                return Ok(());
            }
            permit
                .write(Body::ConnectionStatus(event), &Origin::system())
                .await
                .map(|_| ())
        }
        .await;
        if let Err(error) = written {
            tracing::warn!(connection = %connection.id, %error, "cannot record a connection's status");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_catalogue_lists_every_type_with_its_family() {
        let records = connector_records();
        assert_eq!(records.len(), CONNECTORS.len());
        for record in &records {
            for key in [
                "id",
                "name",
                "category",
                "description",
                "family",
                "protocol",
            ] {
                assert!(record[key].is_string(), "{key} of {record}");
            }
            assert!(
                record["capabilities"]
                    .as_array()
                    .is_some_and(|c| !c.is_empty())
            );
        }
    }

    #[test]
    fn connection_names_are_checked() {
        assert!(check_connection_name("pg-main.1").is_ok());
        for bad in ["", "a/b", "a b", "x\"y", &"n".repeat(65)] {
            assert!(check_connection_name(bad).is_err(), "{bad:?}");
        }
    }
}
