//! Channels, templates and monitors as the control partition keeps them: create, read, change,
//! delete and bulk import, each one `AlertingChanged` event, checked against the state every
//! earlier control write produced, and authorized by the caller's Notifications grants
//! (`Monitor`, `Channel`, `Config` entries, by id pattern).

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use serde_json::{Map, Value, json};
use strata_log::{
    envelope::Body,
    event::{AlertingChanged, MessageTemplate, Monitor as MonitorEvent, NotificationChannel},
};
use strata_projections::control::{Channel, ControlState, Monitor};

use super::document::{self, ChannelContext, MonitorContext, check_id, id_or_new, invalid};
use crate::{
    engine::{Engine, Origin, PlatformPrincipal},
    error::{Error, Result},
};

/// A channel as the API answers it: `{channel_id, config}`, with how its deliveries go.
#[derive(Clone, Debug, Serialize)]
pub struct ChannelInfo {
    pub channel_id: String,
    pub config: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delivery: Option<Value>,
}

/// A monitor as the API answers it: `{_id, _version, monitor: {...}}`.
#[derive(Clone, Debug, Serialize)]
pub struct MonitorInfo {
    #[serde(rename = "_id")]
    pub id: String,
    #[serde(rename = "_version")]
    pub version: u64,
    pub monitor: Value,
}

/// What POST /alerts/config did.
#[derive(Clone, Debug, Serialize)]
pub struct ImportSummary {
    pub created: usize,
    pub updated: usize,
    pub channels: Vec<String>,
    pub templates: Vec<String>,
    pub monitors: Vec<String>,
}

/// The kinds of Notifications entries.
const MONITOR: &str = "Monitor";
const CHANNEL: &str = "Channel";
const CONFIG: &str = "Config";

/// 403 unless `principal` may do `action` on the `kind` `id`.
fn permit(principal: &PlatformPrincipal, kind: &str, action: &str, id: &str) -> Result<()> {
    match principal.grant.allows_notification(kind, action, id) {
        true => Ok(()),
        false => Err(Error::Forbidden(format!(
            "user {} may not {action} {} {id:?}: no role's Notifications grant it",
            principal.user,
            kind.to_ascii_lowercase()
        ))),
    }
}

fn channel_info(channel: &Channel) -> Result<ChannelInfo> {
    Ok(ChannelInfo {
        channel_id: channel.id.clone(),
        config: parse_stored(&channel.config_json, "channel", &channel.id)?,
        delivery: None,
    })
}

/// A monitor's stored document with its ids and times, as answers show it.
pub(in crate::engine) fn monitor_info(monitor: &Monitor) -> Result<MonitorInfo> {
    let mut doc = parse_stored(&monitor.monitor_json, "monitor", &monitor.id)?;
    doc["_id"] = json!(monitor.id);
    doc["monitor_id"] = json!(monitor.id);
    doc["last_update_time"] = json!(monitor.updated_at_micros / 1000);
    Ok(MonitorInfo {
        id: monitor.id.clone(),
        version: monitor.version,
        monitor: doc,
    })
}

fn parse_stored(text: &str, kind: &str, id: &str) -> Result<Value> {
    serde_json::from_str(text)
        .map_err(|e| Error::Internal(format!("the stored {kind} {id:?} does not parse: {e}")))
}

/// The document of a request: an object.
fn fields(doc: &Value) -> Result<&Map<String, Value>> {
    doc.as_object()
        .ok_or_else(|| Error::BadRequest("the document must be an object".to_owned()))
}

/// The channel ids and templates (by name) of an account, for checking monitors.
fn references(state: &ControlState, account: &str) -> (BTreeSet<String>, BTreeMap<String, String>) {
    let channels = state.channels_of(account).map(|c| c.id.clone()).collect();
    let partials = state
        .templates_of(account)
        .map(|t| (t.name.clone(), t.source.clone()))
        .collect();
    (channels, partials)
}

impl Engine {
    fn smtp_accounts(&self) -> BTreeSet<String> {
        self.config.smtp_accounts.keys().cloned().collect()
    }

    /// The control state, caught up with writes made through other nodes of a cluster.
    pub(in crate::engine) async fn current_control(&self) -> Result<std::sync::Arc<ControlState>> {
        if self.clustered() {
            self.control_current().await?;
        }
        Ok(self.control_state())
    }

    /// Appends the change `build` makes of the state every earlier control write produced
    /// (one writer at a time: what exists, and versions, are decided against it); the state
    /// right after it, and what `build` answered.
    async fn write_alerting<T>(
        &self,
        origin: &Origin,
        build: impl FnOnce(&ControlState) -> Result<(AlertingChanged, T)>,
    ) -> Result<(std::sync::Arc<ControlState>, T)> {
        let mut permit = self.control.permit().await?;
        let (change, answer) = build(&permit.snapshot())?;
        let state = permit.write(Body::AlertingChanged(change), origin).await?;
        Ok((state, answer))
    }

    /// POST /alert: creates a channel, with the `channel_id` given or a new UUID.
    pub async fn create_channel(
        &self,
        principal: &PlatformPrincipal,
        doc: &Value,
        origin: &Origin,
    ) -> Result<ChannelInfo> {
        let fields = fields(doc)?;
        if let Some(key) = fields
            .keys()
            .find(|k| !matches!(k.as_str(), "channel_id" | "config"))
        {
            return Err(invalid(
                key,
                "is not a field of a channel (channel_id, config)",
            ));
        }
        let id = id_or_new(fields.get("channel_id"), "channel_id")?;
        permit(principal, CHANNEL, "write", &id)?;
        let config = fields
            .get("config")
            .ok_or_else(|| invalid("config", "is required"))?;
        let smtp = self.smtp_accounts();
        let config = document::channel_config(
            config,
            &ChannelContext {
                smtp_accounts: &smtp,
            },
        )?;
        let account = &principal.account;
        self.write_alerting(origin, |state| {
            if state.channel(account, &id).is_some() {
                return Err(Error::Exists(format!("channel {id:?} already exists")));
            }
            Ok((channel_change(account, &id, &config), ()))
        })
        .await?;
        Ok(ChannelInfo {
            channel_id: id,
            config,
            delivery: None,
        })
    }

    /// GET /alert/{id}: the channel, with how its deliveries go.
    pub async fn get_channel(
        &self,
        principal: &PlatformPrincipal,
        id: &str,
    ) -> Result<ChannelInfo> {
        permit(principal, CHANNEL, "read", id)?;
        let state = self.current_control().await?;
        let channel = state
            .channel(&principal.account, id)
            .ok_or_else(|| Error::NotFound(format!("no channel {id:?}")))?;
        let mut info = channel_info(channel)?;
        info.delivery = Some(self.channel_health(&principal.account, id).await?);
        Ok(info)
    }

    /// GET /alerts: the channels the caller may read.
    pub async fn list_channels(&self, principal: &PlatformPrincipal) -> Result<Vec<ChannelInfo>> {
        let state = self.current_control().await?;
        state
            .channels_of(&principal.account)
            .filter(|c| principal.grant.allows_notification(CHANNEL, "read", &c.id))
            .map(channel_info)
            .collect()
    }

    /// PATCH /alert/{id}: the config fields given replace those there.
    pub async fn patch_channel(
        &self,
        principal: &PlatformPrincipal,
        id: &str,
        doc: &Value,
        origin: &Origin,
    ) -> Result<ChannelInfo> {
        permit(principal, CHANNEL, "write", id)?;
        let fields = fields(doc)?;
        // `{config: {...}}` as POST takes it, or the config's fields themselves.
        let patch = match fields.get("config") {
            Some(Value::Object(config)) if fields.len() == 1 => config,
            Some(_) if fields.len() == 1 => return Err(invalid("config", "must be an object")),
            _ => fields,
        };
        let smtp = self.smtp_accounts();
        let account = &principal.account;
        let (_, config) = self
            .write_alerting(origin, |state| {
                let channel = state
                    .channel(account, id)
                    .ok_or_else(|| Error::NotFound(format!("no channel {id:?}")))?;
                let current = parse_stored(&channel.config_json, "channel", id)?;
                let config = document::channel_config(
                    &document::merged(&current, patch),
                    &ChannelContext {
                        smtp_accounts: &smtp,
                    },
                )?;
                Ok((channel_change(account, id, &config), config))
            })
            .await?;
        Ok(ChannelInfo {
            channel_id: id.to_owned(),
            config,
            delivery: None,
        })
    }

    /// DELETE /alert/{id}.
    pub async fn delete_channel(
        &self,
        principal: &PlatformPrincipal,
        id: &str,
        origin: &Origin,
    ) -> Result<()> {
        permit(principal, CHANNEL, "delete", id)?;
        let account = &principal.account;
        self.write_alerting(origin, |state| {
            if state.channel(account, id).is_none() {
                return Err(Error::NotFound(format!("no channel {id:?}")));
            }
            let change = AlertingChanged {
                account: account.clone(),
                deleted_channels: vec![id.to_owned()],
                ..Default::default()
            };
            Ok((change, ()))
        })
        .await?;
        Ok(())
    }

    /// POST /monitor: creates a monitor, with the `_id` given or a new UUID; its runs read with
    /// the rights of `principal`.
    pub async fn create_monitor(
        &self,
        principal: &PlatformPrincipal,
        doc: &Value,
        origin: &Origin,
    ) -> Result<MonitorInfo> {
        let fields = fields(doc)?;
        let id = id_or_new(fields.get("_id").or(fields.get("monitor_id")), "_id")?;
        permit(principal, MONITOR, "write", &id)?;
        self.save_monitor(principal, &id, origin, |state| {
            match state.monitor(&principal.account, &id) {
                Some(_) => Err(Error::Exists(format!("monitor {id:?} already exists"))),
                None => Ok((doc.clone(), 1)),
            }
        })
        .await
    }

    /// POST /monitor/_execute: the monitor `doc` checked as saving it would check it (its
    /// channels and templates, the caller's right to write it), not saved: what a test run of
    /// an unsaved monitor runs, as the caller.
    pub fn draft_monitor(&self, principal: &PlatformPrincipal, doc: &Value) -> Result<Monitor> {
        let fields = fields(doc)?;
        let id = id_or_new(fields.get("_id").or(fields.get("monitor_id")), "_id")?;
        permit(principal, MONITOR, "write", &id)?;
        let state = self.control_state();
        let (channels, partials) = references(&state, &principal.account);
        let normalized = document::monitor(
            doc,
            &MonitorContext {
                channels: &channels,
                partials: &partials,
            },
        )?;
        Ok(Monitor {
            account: principal.account.clone(),
            id,
            version: 0,
            monitor_json: normalized.to_string(),
            author: principal.user.clone(),
            updated_at_micros: chrono::Utc::now().timestamp_micros(),
        })
    }

    /// Saves the monitor `id` as `doc_of` gives it (the document and its version, from the
    /// current state), checked against the account's channels and templates, with `principal`
    /// as its author.
    async fn save_monitor(
        &self,
        principal: &PlatformPrincipal,
        id: &str,
        origin: &Origin,
        doc_of: impl FnOnce(&ControlState) -> Result<(Value, u64)>,
    ) -> Result<MonitorInfo> {
        let account = &principal.account;
        let (state, ()) = self
            .write_alerting(origin, |state| {
                let (doc, version) = doc_of(state)?;
                let (channels, partials) = references(state, account);
                let normalized = document::monitor(
                    &doc,
                    &MonitorContext {
                        channels: &channels,
                        partials: &partials,
                    },
                )?;
                let change = AlertingChanged {
                    account: account.clone(),
                    monitors: vec![MonitorEvent {
                        monitor_id: id.to_owned(),
                        version,
                        monitor_json: normalized.to_string(),
                        author: principal.user.clone(),
                    }],
                    ..Default::default()
                };
                Ok((change, ()))
            })
            .await?;
        let saved = state
            .monitor(account, id)
            .ok_or_else(|| Error::Internal(format!("monitor {id:?} missing after it was saved")))?;
        monitor_info(saved)
    }

    /// GET /monitor/{id}.
    pub async fn get_monitor(
        &self,
        principal: &PlatformPrincipal,
        id: &str,
    ) -> Result<MonitorInfo> {
        permit(principal, MONITOR, "read", id)?;
        let state = self.current_control().await?;
        let monitor = state
            .monitor(&principal.account, id)
            .ok_or_else(|| Error::NotFound(format!("no monitor {id:?}")))?;
        monitor_info(monitor)
    }

    /// GET /monitors: the monitors the caller may read.
    pub async fn list_monitors(&self, principal: &PlatformPrincipal) -> Result<Vec<MonitorInfo>> {
        let state = self.current_control().await?;
        state
            .monitors_of(&principal.account)
            .filter(|m| principal.grant.allows_notification(MONITOR, "read", &m.id))
            .map(monitor_info)
            .collect()
    }

    /// PATCH /monitor/{id}: the fields given replace those there; the version goes up by one
    /// and the caller becomes the user whose rights the runs read with.
    pub async fn patch_monitor(
        &self,
        principal: &PlatformPrincipal,
        id: &str,
        doc: &Value,
        origin: &Origin,
    ) -> Result<MonitorInfo> {
        permit(principal, MONITOR, "write", id)?;
        let patch = fields(doc)?;
        self.save_monitor(principal, id, origin, |state| {
            let monitor = state
                .monitor(&principal.account, id)
                .ok_or_else(|| Error::NotFound(format!("no monitor {id:?}")))?;
            let current = parse_stored(&monitor.monitor_json, "monitor", id)?;
            Ok((document::merged(&current, patch), monitor.version + 1))
        })
        .await
    }

    /// DELETE /monitor/{id}.
    pub async fn delete_monitor(
        &self,
        principal: &PlatformPrincipal,
        id: &str,
        origin: &Origin,
    ) -> Result<()> {
        permit(principal, MONITOR, "delete", id)?;
        let account = &principal.account;
        self.write_alerting(origin, |state| {
            if state.monitor(account, id).is_none() {
                return Err(Error::NotFound(format!("no monitor {id:?}")));
            }
            let change = AlertingChanged {
                account: account.clone(),
                deleted_monitors: vec![id.to_owned()],
                ..Default::default()
            };
            Ok((change, ()))
        })
        .await?;
        Ok(())
    }

    /// POST /alerts/config: channels, templates and monitors in one document, saved together
    /// or not at all. Ids that exist are replaced, missing ones created; monitors may name
    /// the channels and templates of the same document.
    pub async fn import_alerting(
        &self,
        principal: &PlatformPrincipal,
        doc: &Value,
        origin: &Origin,
    ) -> Result<ImportSummary> {
        let fields = fields(doc)?;
        if let Some(key) = fields
            .keys()
            .find(|k| !matches!(k.as_str(), "channels" | "templates" | "monitors"))
        {
            return Err(invalid(
                key,
                "is not a section (channels, templates, monitors)",
            ));
        }
        let list = |key: &str| -> Result<Vec<Value>> {
            match fields.get(key) {
                None | Some(Value::Null) => Ok(Vec::new()),
                Some(Value::Array(items)) => Ok(items.clone()),
                Some(_) => Err(invalid(key, "must be a list")),
            }
        };
        let (channel_docs, template_docs, monitor_docs) =
            (list("channels")?, list("templates")?, list("monitors")?);
        // One writer at a time: what exists is decided against the state this write follows.
        let mut serial = self.control.permit().await?;
        let state = serial.snapshot();
        let account = &principal.account;
        let (mut channel_ids, mut partials) = references(&state, account);
        let mut change = AlertingChanged {
            account: account.clone(),
            ..Default::default()
        };
        let (mut created, mut updated) = (0, 0);
        let mut count = |exists: bool| match exists {
            true => updated += 1,
            false => created += 1,
        };
        let smtp = self.smtp_accounts();
        for (i, item) in channel_docs.iter().enumerate() {
            let at = format!("channels[{i}]");
            let item_fields = item
                .as_object()
                .ok_or_else(|| invalid(&at, "must be an object"))?;
            match item_fields.get("type") {
                None | Some(Value::Null) => {}
                Some(Value::String(kind)) if kind == "notification_channel" => {}
                Some(other) => {
                    return Err(invalid(
                        &format!("{at}.type"),
                        format!("{other} is not notification_channel"),
                    ));
                }
            }
            let id = id_or_new(item_fields.get("channel_id"), &format!("{at}.channel_id"))?;
            permit(principal, CONFIG, "write", &id)?;
            let config = item_fields
                .get("config")
                .ok_or_else(|| invalid(&format!("{at}.config"), "is required"))?;
            let config = document::channel_config(
                config,
                &ChannelContext {
                    smtp_accounts: &smtp,
                },
            )
            .map_err(|e| prefixed(&at, e))?;
            count(state.channel(account, &id).is_some());
            channel_ids.insert(id.clone());
            change.channels.push(NotificationChannel {
                channel_id: id,
                config_json: config.to_string(),
            });
        }
        for (i, item) in template_docs.iter().enumerate() {
            let at = format!("templates[{i}]");
            let item_fields = item
                .as_object()
                .ok_or_else(|| invalid(&at, "must be an object"))?;
            let id = id_or_new(item_fields.get("template_id"), &format!("{at}.template_id"))?;
            permit(principal, CONFIG, "write", &id)?;
            let name = match item_fields.get("name") {
                Some(Value::String(name)) => name.clone(),
                _ => return Err(invalid(&format!("{at}.name"), "must be a string")),
            };
            check_id(&format!("{at}.name"), &name)?;
            let source = match item_fields.get("source") {
                Some(Value::String(source)) => source.clone(),
                _ => return Err(invalid(&format!("{at}.source"), "must be a string")),
            };
            let exists = state.templates.contains_key(&(account.clone(), id.clone()));
            count(exists);
            partials.insert(name.clone(), source.clone());
            change.templates.push(MessageTemplate {
                template_id: id,
                name,
                source,
            });
        }
        // Templates check once all are known: one may use another as a partial.
        for (i, template) in change.templates.iter().enumerate() {
            super::template::check(&template.source, &partials)
                .map_err(|e| invalid(&format!("templates[{i}].source"), e))?;
        }
        let context = MonitorContext {
            channels: &channel_ids,
            partials: &partials,
        };
        for (i, item) in monitor_docs.iter().enumerate() {
            let at = format!("monitors[{i}]");
            let item_fields = item
                .as_object()
                .ok_or_else(|| invalid(&at, "must be an object"))?;
            let id = id_or_new(
                item_fields.get("_id").or(item_fields.get("monitor_id")),
                &format!("{at}._id"),
            )?;
            permit(principal, CONFIG, "write", &id)?;
            let normalized = document::monitor(item, &context).map_err(|e| prefixed(&at, e))?;
            let version = match state.monitor(account, &id) {
                Some(existing) => existing.version + 1,
                None => 1,
            };
            count(version > 1);
            change.monitors.push(MonitorEvent {
                monitor_id: id,
                version,
                monitor_json: normalized.to_string(),
                author: principal.user.clone(),
            });
        }
        let summary = ImportSummary {
            created,
            updated,
            channels: change
                .channels
                .iter()
                .map(|c| c.channel_id.clone())
                .collect(),
            templates: change
                .templates
                .iter()
                .map(|t| t.template_id.clone())
                .collect(),
            monitors: change
                .monitors
                .iter()
                .map(|m| m.monitor_id.clone())
                .collect(),
        };
        let ids: [(&str, Vec<&String>); 3] = [
            (
                "channel",
                change.channels.iter().map(|c| &c.channel_id).collect(),
            ),
            (
                "template",
                change.templates.iter().map(|t| &t.template_id).collect(),
            ),
            (
                "monitor",
                change.monitors.iter().map(|m| &m.monitor_id).collect(),
            ),
        ];
        for (kind, list) in ids {
            let mut seen = BTreeSet::new();
            if let Some(twice) = list.into_iter().find(|id| !seen.insert(*id)) {
                return Err(Error::BadRequest(format!(
                    "the document holds the {kind} {twice:?} twice"
                )));
            }
        }
        serial.write(Body::AlertingChanged(change), origin).await?;
        Ok(summary)
    }
}

/// A change that creates or replaces one channel.
fn channel_change(account: &str, id: &str, config: &Value) -> AlertingChanged {
    AlertingChanged {
        account: account.to_owned(),
        channels: vec![NotificationChannel {
            channel_id: id.to_owned(),
            config_json: config.to_string(),
        }],
        ..Default::default()
    }
}

/// An error of an item of a bulk document, with the item's place in front of its field.
fn prefixed(at: &str, error: Error) -> Error {
    match error {
        Error::BadRequest(reason) => match reason.strip_prefix('[') {
            Some(rest) => Error::BadRequest(format!("[{at}.{rest}")),
            None => Error::BadRequest(format!("{at}: {reason}")),
        },
        other => other,
    }
}
