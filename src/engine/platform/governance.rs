//! Governance: the users and roles of an account (spec 001, sections 2, 4.6 and 5; the
//! decisions of API.md, "Governance").
//!
//! Users and roles are control events like accounts and keys ([`Body::UserCreated`],
//! `UserChanged`, `UserKeysRotated`, `UserDeleted`, `RoleSet`, `RoleDeleted`), so they replay,
//! audit and fail over with the rest. Only the root user of an account governs them; any user
//! may read itself and rotate its own keys. A document is checked whole before anything is
//! written: a refused one appends nothing.
//!
//! What a user may do is the union of its roles' entries, turned into a [`Grant`] for each
//! request by [`grant_of`]; the access layer ([`crate::engine::access`]) applies it.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use strata_log::{
    envelope::Body,
    event::{RoleDeleted, UserChanged, UserCreated, UserDeleted, UserKeysRotated},
};
use strata_projections::{
    control::{ControlState, FieldSecurity, NotificationPermission, Role, RolePermission, User},
    table::docs::DocsSchema,
};

use crate::engine::{
    Action, Engine, Origin, PlatformPrincipal,
    access::{FieldRule, Grant, Mask, NotificationGrant, Permission},
    query_dsl::compile as dsl,
    users::new_key_pair,
};
use crate::error::{Error, Result};

/// The schema version of user and role documents.
pub const DOCUMENT_VERSION: &str = "2025-01-01";

/// The fewest characters of a password.
pub const MIN_PASSWORD_CHARS: usize = 12;

/// The most characters of a user or role name.
const MAX_NAME_CHARS: usize = 64;

/// A user document, as PUT (whole) or PATCH (the fields to change) gives it.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserDoc {
    #[serde(rename = "Version")]
    pub version: Option<String>,
    #[serde(rename = "Password")]
    pub password: Option<String>,
    #[serde(rename = "Roles")]
    pub roles: Option<Vec<String>>,
}

/// A user as GET shows it (never its password or secret key).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct UserInfo {
    pub username: String,
    #[serde(rename = "Version")]
    pub version: &'static str,
    #[serde(rename = "Roles")]
    pub roles: Vec<String>,
    pub account_id: String,
}

/// A key pair, shown once: when a user is created and when it rotates its keys.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct IssuedKeys {
    pub access_key: String,
    pub secret_key: String,
}

/// A role document, as PUT (whole) or PATCH (the blocks to replace) gives it, and as GET shows
/// it.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RoleDoc {
    #[serde(rename = "Version", skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(rename = "Permissions", skip_serializing_if = "Option::is_none")]
    pub permissions: Option<Vec<PermissionDoc>>,
    #[serde(rename = "Notifications", skip_serializing_if = "Option::is_none")]
    pub notifications: Option<NotificationsDoc>,
}

/// One entry of a role's Permissions.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PermissionDoc {
    #[serde(rename = "ResourceType")]
    pub resource_type: String,
    #[serde(rename = "Actions", default)]
    pub actions: Vec<String>,
    #[serde(rename = "Resources")]
    pub resources: Vec<String>,
    #[serde(rename = "Fields", skip_serializing_if = "Option::is_none")]
    pub fields: Option<FieldsDoc>,
    /// A Query DSL query: the records this entry shows (an extension of the spec).
    #[serde(rename = "Filter", skip_serializing_if = "Option::is_none")]
    pub filter: Option<Value>,
}

/// The Fields block of a record entry: field-level security.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FieldsDoc {
    #[serde(rename = "Allow", skip_serializing_if = "Option::is_none")]
    pub allow: Option<Vec<String>>,
    #[serde(rename = "Deny", skip_serializing_if = "Option::is_none")]
    pub deny: Option<Vec<String>>,
    #[serde(rename = "Mask", skip_serializing_if = "Option::is_none")]
    pub mask: Option<BTreeMap<String, String>>,
}

/// A role's Notifications: entries for monitors, channels and the bulk configuration.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct NotificationsDoc {
    #[serde(rename = "Monitor", skip_serializing_if = "Option::is_none")]
    pub monitor: Option<Vec<NotificationDoc>>,
    #[serde(rename = "Channel", skip_serializing_if = "Option::is_none")]
    pub channel: Option<Vec<NotificationDoc>>,
    #[serde(rename = "Config", skip_serializing_if = "Option::is_none")]
    pub config: Option<Vec<NotificationDoc>>,
}

/// One notification entry: actions on monitors, channels or the configuration whose ids
/// match `resources`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct NotificationDoc {
    #[serde(rename = "Actions")]
    pub actions: Vec<String>,
    #[serde(rename = "Resources")]
    pub resources: Vec<String>,
}

/// The kinds of notification entries and the actions each takes.
const NOTIFICATION_KINDS: [(&str, &[&str]); 3] = [
    ("Monitor", &["read", "write", "delete", "execute"]),
    ("Channel", &["read", "write", "delete"]),
    ("Config", &["write"]),
];

/// The resource types of permission entries and the actions each takes (`field` none: it is
/// governed by the Fields block of record entries).
const RESOURCE_TYPES: [(&str, &[&str]); 4] = [
    ("metadata", &["read"]),
    ("dataset", &["create", "delete"]),
    ("record", &["read", "write"]),
    ("field", &[]),
];

/// The engine's action of a role entry's resource type and action.
fn action_of(resource_type: &str, action: &str) -> Option<Action> {
    Some(match (resource_type, action) {
        ("metadata", "read") => Action::MetadataRead,
        ("dataset", "create") => Action::DatasetCreate,
        ("dataset", "delete") => Action::DatasetDelete,
        ("record", "read") => Action::RecordRead,
        ("record", "write") => Action::RecordWrite,
        _ => return None,
    })
}

fn mask_of(name: &str) -> Option<Mask> {
    match name {
        "redact" => Some(Mask::Redact),
        "nullify" => Some(Mask::Nullify),
        "remove" => Some(Mask::Remove),
        _ => None,
    }
}

fn invalid(field: &str, reason: impl std::fmt::Display) -> Error {
    Error::BadRequest(format!("{field}: {reason}"))
}

/// A user or role name: 1 to 64 letters, digits, `-`, `_`, `.` and `@`.
pub fn check_principal_name(kind: &str, name: &str) -> Result<()> {
    let fine = !name.is_empty()
        && name.chars().count() <= MAX_NAME_CHARS
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '@'));
    match fine {
        true => Ok(()),
        false => Err(Error::BadRequest(format!(
            "invalid {kind} name {name:?}: 1 to {MAX_NAME_CHARS} letters, digits, '-', '_', '.' and '@'"
        ))),
    }
}

/// Checks the `Version` of a document: required when `required`, and the one there is.
fn check_version(version: Option<&str>, required: bool) -> Result<()> {
    match version {
        None if required => Err(invalid(
            "Version",
            format!("required (the schema version, {DOCUMENT_VERSION})"),
        )),
        Some(v) if v != DOCUMENT_VERSION => Err(invalid(
            "Version",
            format!("unsupported schema version {v:?}; this server reads {DOCUMENT_VERSION}"),
        )),
        _ => Ok(()),
    }
}

/// A name pattern of datasets (or `<connection>/<table>`): a name's characters, `/` and `*`.
fn check_resource_pattern(field: &str, pattern: &str) -> Result<()> {
    let fine = !pattern.is_empty()
        && pattern
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/' | '*'));
    match fine {
        true => Ok(()),
        false => Err(invalid(
            field,
            format!(
                "malformed pattern {pattern:?}: letters, digits, '-', '_', '.', '/' and the wildcard '*'"
            ),
        )),
    }
}

/// A field (or id) pattern: not empty, no spaces or control characters.
fn check_free_pattern(field: &str, pattern: &str) -> Result<()> {
    match !pattern.is_empty() && !pattern.chars().any(|c| c.is_whitespace() || c.is_control()) {
        true => Ok(()),
        false => Err(invalid(
            field,
            format!("malformed pattern {pattern:?}: not empty, without spaces"),
        )),
    }
}

fn check_actions(field: &str, actions: &[String], allowed: &[&str], of: &str) -> Result<()> {
    for (i, action) in actions.iter().enumerate() {
        if !allowed.contains(&action.as_str()) {
            let expected = match allowed.is_empty() {
                true => "none: it is governed by the Fields block of record entries".to_owned(),
                false => allowed.join(", "),
            };
            return Err(invalid(
                &format!("{field}[{i}]"),
                format!("unknown action {action:?} for {of} (expected {expected})"),
            ));
        }
    }
    if actions.is_empty() && !allowed.is_empty() {
        return Err(invalid(
            field,
            format!("{of} needs at least one action ({})", allowed.join(", ")),
        ));
    }
    Ok(())
}

/// The role `doc` describes, checked whole: 400 naming the first field that is wrong.
fn role_from_doc(account: &str, name: &str, doc: &RoleDoc) -> Result<Role> {
    let mut permissions = Vec::new();
    for (i, entry) in doc.permissions.iter().flatten().enumerate() {
        let at_field = |f: &str| format!("Permissions[{i}].{f}");
        let Some((_, allowed)) = RESOURCE_TYPES
            .iter()
            .find(|(t, _)| *t == entry.resource_type)
        else {
            return Err(invalid(
                &at_field("ResourceType"),
                format!(
                    "unknown resource type {:?} (expected metadata, dataset, record or field)",
                    entry.resource_type
                ),
            ));
        };
        let of = format!("ResourceType {}", entry.resource_type);
        check_actions(&at_field("Actions"), &entry.actions, allowed, &of)?;
        if entry.resources.is_empty() {
            return Err(invalid(
                &at_field("Resources"),
                "at least one name pattern (such as logs-* or *)",
            ));
        }
        for (j, pattern) in entry.resources.iter().enumerate() {
            check_resource_pattern(&at_field(&format!("Resources[{j}]")), pattern)?;
        }
        let record = entry.resource_type == "record";
        let fields = match &entry.fields {
            None => None,
            Some(_) if !record => {
                return Err(invalid(
                    &at_field("Fields"),
                    "only record entries carry a Fields block",
                ));
            }
            Some(fields) => Some(fields_from_doc(&at_field("Fields"), fields)?),
        };
        let filter_json = match &entry.filter {
            None => None,
            Some(_) if !record => {
                return Err(invalid(
                    &at_field("Filter"),
                    "only record entries carry a Filter",
                ));
            }
            Some(filter) => {
                if !filter.is_object() {
                    return Err(invalid(
                        &at_field("Filter"),
                        "a Query DSL query, such as {term: {team: a}}",
                    ));
                }
                // Compiled against no fields: what does not parse is refused now, not at the
                // first read.
                dsl::compile(&DocsSchema::new(), filter, 0).map_err(|e| {
                    invalid(&at_field("Filter"), format!("[{}] {}", e.kind, e.reason))
                })?;
                Some(filter.to_string())
            }
        };
        permissions.push(RolePermission {
            resource_type: entry.resource_type.clone(),
            actions: entry.actions.clone(),
            resources: entry.resources.clone(),
            fields,
            filter_json,
        });
    }
    let mut notifications = Vec::new();
    if let Some(doc) = &doc.notifications {
        for (kind, entries) in [
            ("Monitor", &doc.monitor),
            ("Channel", &doc.channel),
            ("Config", &doc.config),
        ] {
            let allowed = NOTIFICATION_KINDS
                .iter()
                .find(|(k, _)| *k == kind)
                .map(|(_, a)| *a)
                .unwrap_or_default();
            for (i, entry) in entries.iter().flatten().enumerate() {
                let at_field = |f: &str| format!("Notifications.{kind}[{i}].{f}");
                check_actions(&at_field("Actions"), &entry.actions, allowed, kind)?;
                if entry.resources.is_empty() {
                    return Err(invalid(
                        &at_field("Resources"),
                        "at least one id or id pattern (such as team-* or *)",
                    ));
                }
                for (j, pattern) in entry.resources.iter().enumerate() {
                    check_free_pattern(&at_field(&format!("Resources[{j}]")), pattern)?;
                }
                notifications.push(NotificationPermission {
                    kind: kind.to_owned(),
                    actions: entry.actions.clone(),
                    resources: entry.resources.clone(),
                });
            }
        }
    }
    Ok(Role {
        account: account.to_owned(),
        name: name.to_owned(),
        version: DOCUMENT_VERSION.to_owned(),
        permissions,
        notifications,
        // The event's time, once written.
        updated_at_micros: 0,
    })
}

fn fields_from_doc(field: &str, doc: &FieldsDoc) -> Result<FieldSecurity> {
    let patterns = |key: &str, list: &Option<Vec<String>>| -> Result<()> {
        for (i, pattern) in list.iter().flatten().enumerate() {
            check_free_pattern(&format!("{field}.{key}[{i}]"), pattern)?;
        }
        Ok(())
    };
    patterns("Allow", &doc.allow)?;
    patterns("Deny", &doc.deny)?;
    let mut mask = Vec::new();
    for (pattern, how) in doc.mask.iter().flatten() {
        check_free_pattern(&format!("{field}.Mask"), pattern)?;
        if mask_of(how).is_none() {
            return Err(invalid(
                &format!("{field}.Mask.{pattern}"),
                format!("unknown mask {how:?} (expected redact, remove or nullify)"),
            ));
        }
        mask.push((pattern.clone(), how.clone()));
    }
    Ok(FieldSecurity {
        allow: doc.allow.clone(),
        deny: doc.deny.clone().unwrap_or_default(),
        mask,
    })
}

/// A stored role as its document.
fn doc_of(role: &Role) -> RoleDoc {
    let permissions = role
        .permissions
        .iter()
        .map(|p| PermissionDoc {
            resource_type: p.resource_type.clone(),
            actions: p.actions.clone(),
            resources: p.resources.clone(),
            fields: p.fields.as_ref().map(|f| FieldsDoc {
                allow: f.allow.clone(),
                deny: (!f.deny.is_empty()).then(|| f.deny.clone()),
                mask: (!f.mask.is_empty()).then(|| f.mask.iter().cloned().collect()),
            }),
            filter: p
                .filter_json
                .as_deref()
                .and_then(|text| serde_json::from_str(text).ok()),
        })
        .collect();
    let entries = |kind: &str| {
        let list: Vec<NotificationDoc> = role
            .notifications
            .iter()
            .filter(|n| n.kind == kind)
            .map(|n| NotificationDoc {
                actions: n.actions.clone(),
                resources: n.resources.clone(),
            })
            .collect();
        (!list.is_empty()).then_some(list)
    };
    let notifications = NotificationsDoc {
        monitor: entries("Monitor"),
        channel: entries("Channel"),
        config: entries("Config"),
    };
    RoleDoc {
        version: Some(role.version.clone()),
        permissions: Some(permissions),
        notifications: (notifications != NotificationsDoc::default()).then_some(notifications),
    }
}

impl Engine {
    /// User `name` of `account` as the principal that work done on its behalf acts as
    /// (monitor runs, import jobs), with the grant its roles give now; `None` once it is gone.
    pub(in crate::engine) fn acting_user(
        &self,
        account: &str,
        name: &str,
    ) -> Option<crate::engine::PlatformPrincipal> {
        let state = self.control_state();
        let user = state.user(account, name)?;
        Some(crate::engine::PlatformPrincipal {
            account: user.account.clone(),
            user: user.name.clone(),
            access_key: user.access_key.clone(),
            root: user.root,
            grant: std::sync::Arc::new(grant_of(&state, user)),
        })
    }
}

/// What `user` may do: everything for the root user, else the union of the entries of the
/// roles it holds that exist.
pub fn grant_of(state: &ControlState, user: &User) -> Grant {
    if user.root {
        return Grant::everything();
    }
    let mut permissions = Vec::new();
    for role in user
        .roles
        .iter()
        .filter_map(|name| state.role(&user.account, name))
    {
        for entry in &role.permissions {
            let actions: Vec<Action> = entry
                .actions
                .iter()
                .filter_map(|a| action_of(&entry.resource_type, a))
                .collect();
            if actions.is_empty() {
                continue;
            }
            let fields = entry
                .fields
                .as_ref()
                .map(|f| FieldRule {
                    allow: f.allow.clone(),
                    deny: f.deny.clone(),
                    mask: f
                        .mask
                        .iter()
                        .filter_map(|(field, how)| Some((field.clone(), mask_of(how)?)))
                        .collect(),
                })
                .unwrap_or_default();
            permissions.push(Permission {
                actions,
                resources: entry.resources.clone(),
                filter: entry
                    .filter_json
                    .as_deref()
                    .and_then(|text| serde_json::from_str(text).ok()),
                fields,
            });
        }
    }
    let notifications = user
        .roles
        .iter()
        .filter_map(|name| state.role(&user.account, name))
        .flat_map(|role| &role.notifications)
        .map(|n| NotificationGrant {
            kind: n.kind.clone(),
            actions: n.actions.clone(),
            resources: n.resources.clone(),
        })
        .collect();
    Grant {
        all: false,
        permissions,
        notifications,
    }
}

/// The PHC string of a salted argon2id hash of `password` (slow on purpose: run it off the
/// async threads).
pub(in crate::engine) fn hash_password(password: &str) -> Result<String> {
    use argon2::password_hash::{PasswordHasher, SaltString};
    let salt: [u8; 16] = rand::random();
    let salt = SaltString::encode_b64(&salt)
        .map_err(|e| Error::Internal(format!("password salt: {e}")))?;
    argon2::Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|hash| hash.to_string())
        .map_err(|e| Error::Internal(format!("password hash: {e}")))
}

/// Whether `password` is the one `phc` is the hash of.
pub fn verify_password(phc: &str, password: &str) -> bool {
    use argon2::password_hash::{PasswordHash, PasswordVerifier};
    PasswordHash::new(phc).is_ok_and(|hash| {
        argon2::Argon2::default()
            .verify_password(password.as_bytes(), &hash)
            .is_ok()
    })
}

fn check_password(password: &str) -> Result<()> {
    match password.chars().count() >= MIN_PASSWORD_CHARS {
        true => Ok(()),
        false => Err(invalid(
            "Password",
            format!("at least {MIN_PASSWORD_CHARS} characters"),
        )),
    }
}

/// A role document checked whole, as PUT /role checks it (the fuzz targets' entry).
pub(in crate::engine) fn check_role_doc(doc: &RoleDoc) -> Result<()> {
    check_version(doc.version.as_deref(), true)?;
    role_from_doc("account", "role", doc).map(|_| ())
}

/// A user document's fields checked, as PUT /user checks them before it hashes the password
/// (the fuzz targets' entry).
pub(in crate::engine) fn check_user_doc(doc: &UserDoc) -> Result<()> {
    check_version(doc.version.as_deref(), false)?;
    check_roles(doc.roles.as_deref().unwrap_or_default())?;
    doc.password.as_deref().map_or(Ok(()), check_password)
}

fn check_roles(roles: &[String]) -> Result<()> {
    for (i, role) in roles.iter().enumerate() {
        check_principal_name("role", role).map_err(|e| invalid(&format!("Roles[{i}]"), e))?;
    }
    Ok(())
}

impl Engine {
    /// 403 unless `principal` is its account's root user, who alone governs users and roles.
    fn govern(&self, principal: &PlatformPrincipal, what: &str) -> Result<()> {
        match principal.root {
            true => Ok(()),
            false => Err(Error::Forbidden(format!(
                "user {} may not {what}: only the root user governs users and roles",
                principal.user
            ))),
        }
    }

    /// PUT /user/{name}: creates the user (with its first key pair, returned once) or replaces
    /// its password and roles (its keys stay).
    pub async fn put_user(
        &self,
        principal: &PlatformPrincipal,
        name: &str,
        doc: UserDoc,
        origin: &Origin,
    ) -> Result<Option<IssuedKeys>> {
        self.govern(principal, "create or replace users")?;
        check_principal_name("user", name)?;
        check_version(doc.version.as_deref(), true)?;
        let roles = doc.roles.unwrap_or_default();
        self.write_user(principal, name, Some(roles), doc.password, true, origin)
            .await
    }

    /// PATCH /user/{name}: changes only the fields given.
    pub async fn patch_user(
        &self,
        principal: &PlatformPrincipal,
        name: &str,
        doc: UserDoc,
        origin: &Origin,
    ) -> Result<()> {
        self.govern(principal, "change users")?;
        check_version(doc.version.as_deref(), false)?;
        self.write_user(principal, name, doc.roles, doc.password, false, origin)
            .await?;
        Ok(())
    }

    /// Writes user `name` with `roles` (`None`: as they are) and `password` (`None`: as it
    /// is), creating it when `create` allows: its first key pair then.
    async fn write_user(
        &self,
        principal: &PlatformPrincipal,
        name: &str,
        roles: Option<Vec<String>>,
        password: Option<String>,
        create: bool,
        origin: &Origin,
    ) -> Result<Option<IssuedKeys>> {
        check_roles(roles.as_deref().unwrap_or_default())?;
        if let Some(password) = &password {
            check_password(password)?;
        }
        // Refused before the slow hash when it is sure to be refused.
        match self.control_state().user(&principal.account, name) {
            None if !create => return Err(user_not_found(name)),
            None if password.is_none() => {
                return Err(invalid("Password", "required to create a user"));
            }
            _ => {}
        }
        let hash = match password {
            Some(password) => {
                Some(crate::engine::blocking(move || hash_password(&password)).await??)
            }
            None => None,
        };
        let mut permit = self.control.permit().await?;
        let state = permit.snapshot();
        let Some(user) = state.user(&principal.account, name) else {
            let (Some(hash), true) = (hash, create) else {
                return Err(user_not_found(name));
            };
            let (keys, sealed) = new_key_pair(self)?;
            let body = Body::UserCreated(UserCreated {
                account: principal.account.clone(),
                name: name.to_owned(),
                access_key: keys.access_key.clone(),
                sealed_secret: sealed.into(),
                root: false,
                roles: roles.unwrap_or_default(),
                password_hash: hash,
            });
            permit.write(body, origin).await?;
            return Ok(Some(keys));
        };
        let roles = roles.unwrap_or_else(|| user.roles.clone());
        if user.root && !roles.is_empty() {
            return Err(invalid(
                "Roles",
                "the root user is unrestricted: it holds no roles",
            ));
        }
        let body = Body::UserChanged(UserChanged {
            account: principal.account.clone(),
            name: name.to_owned(),
            roles,
            password_hash: hash
                .or_else(|| user.password_hash.clone())
                .unwrap_or_default(),
        });
        permit.write(body, origin).await?;
        Ok(None)
    }

    /// DELETE /user/{name}: its keys are refused from then on. The root user stays.
    pub async fn delete_user(
        &self,
        principal: &PlatformPrincipal,
        name: &str,
        origin: &Origin,
    ) -> Result<()> {
        self.govern(principal, "delete users")?;
        let mut permit = self.control.permit().await?;
        let state = permit.snapshot();
        let user = state
            .user(&principal.account, name)
            .ok_or_else(|| user_not_found(name))?;
        if user.root {
            return Err(Error::BadRequest(
                "the root user of an account cannot be deleted".to_owned(),
            ));
        }
        let body = Body::UserDeleted(UserDeleted {
            account: principal.account.clone(),
            name: name.to_owned(),
        });
        permit.write(body, origin).await?;
        Ok(())
    }

    /// GET /user/{name}: the root user reads any user of its account, others only themselves.
    pub fn get_user(&self, principal: &PlatformPrincipal, name: &str) -> Result<UserInfo> {
        if principal.user != name {
            self.govern(principal, "read other users")?;
        }
        let state = self.control_state();
        let user = state
            .user(&principal.account, name)
            .ok_or_else(|| user_not_found(name))?;
        Ok(info(user))
    }

    /// GET /users: the users of the account, in name order (root only).
    pub fn list_users(&self, principal: &PlatformPrincipal) -> Result<Vec<UserInfo>> {
        self.govern(principal, "list users")?;
        Ok(self
            .control_state()
            .users_of(&principal.account)
            .into_iter()
            .map(info)
            .collect())
    }

    /// PATCH /user/{name}/keys: a new key pair for the caller itself (no one else, root
    /// included); the old pair is refused from then on.
    pub async fn rotate_keys(
        &self,
        principal: &PlatformPrincipal,
        name: &str,
        origin: &Origin,
    ) -> Result<IssuedKeys> {
        if principal.user != name {
            return Err(Error::Forbidden(format!(
                "user {} may not rotate the keys of user {name}: only a user rotates its own",
                principal.user
            )));
        }
        let mut permit = self.control.permit().await?;
        let state = permit.snapshot();
        let user = state
            .user(&principal.account, name)
            .ok_or_else(|| user_not_found(name))?;
        if user.access_key != principal.access_key {
            // The keys that signed this request were rotated since it was checked.
            return Err(Error::NotAuthenticated(
                "the access key that signed this request was rotated".to_owned(),
            ));
        }
        let (keys, sealed) = new_key_pair(self)?;
        let body = Body::UserKeysRotated(UserKeysRotated {
            account: principal.account.clone(),
            name: name.to_owned(),
            old_access_key: user.access_key.clone(),
            access_key: keys.access_key.clone(),
            sealed_secret: sealed.into(),
        });
        permit.write(body, origin).await?;
        Ok(keys)
    }

    /// PUT /role/{name}: creates or replaces a role. Whether it was created.
    pub async fn put_role(
        &self,
        principal: &PlatformPrincipal,
        name: &str,
        doc: RoleDoc,
        origin: &Origin,
    ) -> Result<bool> {
        self.govern(principal, "create or replace roles")?;
        check_principal_name("role", name)?;
        check_version(doc.version.as_deref(), true)?;
        let role = role_from_doc(&principal.account, name, &doc)?;
        let mut permit = self.control.permit().await?;
        let created = permit.snapshot().role(&principal.account, name).is_none();
        permit.write(Body::RoleSet(role.to_event()), origin).await?;
        Ok(created)
    }

    /// PATCH /role/{name}: replaces the blocks given (Permissions, Notifications).
    pub async fn patch_role(
        &self,
        principal: &PlatformPrincipal,
        name: &str,
        doc: RoleDoc,
        origin: &Origin,
    ) -> Result<()> {
        self.govern(principal, "change roles")?;
        check_version(doc.version.as_deref(), false)?;
        let mut permit = self.control.permit().await?;
        let state = permit.snapshot();
        let current = state
            .role(&principal.account, name)
            .ok_or_else(|| role_not_found(name))?;
        let mut merged = doc_of(current);
        if doc.permissions.is_some() {
            merged.permissions = doc.permissions;
        }
        if doc.notifications.is_some() {
            merged.notifications = doc.notifications;
        }
        let role = role_from_doc(&principal.account, name, &merged)?;
        permit.write(Body::RoleSet(role.to_event()), origin).await?;
        Ok(())
    }

    /// DELETE /role/{name}: the users that hold it lose its grants at once.
    pub async fn delete_role(
        &self,
        principal: &PlatformPrincipal,
        name: &str,
        origin: &Origin,
    ) -> Result<()> {
        self.govern(principal, "delete roles")?;
        let mut permit = self.control.permit().await?;
        if permit.snapshot().role(&principal.account, name).is_none() {
            return Err(role_not_found(name));
        }
        let body = Body::RoleDeleted(RoleDeleted {
            account: principal.account.clone(),
            name: name.to_owned(),
        });
        permit.write(body, origin).await?;
        Ok(())
    }

    /// GET /role/{name} (root only).
    pub fn get_role(&self, principal: &PlatformPrincipal, name: &str) -> Result<RoleDoc> {
        self.govern(principal, "read roles")?;
        let state = self.control_state();
        let role = state
            .role(&principal.account, name)
            .ok_or_else(|| role_not_found(name))?;
        Ok(doc_of(role))
    }

    /// GET /roles: the account's roles in name order (root only).
    pub fn list_roles(&self, principal: &PlatformPrincipal) -> Result<Vec<(String, RoleDoc)>> {
        self.govern(principal, "list roles")?;
        Ok(self
            .control_state()
            .roles_of(&principal.account)
            .map(|role| (role.name.clone(), doc_of(role)))
            .collect())
    }
}

fn info(user: &User) -> UserInfo {
    UserInfo {
        username: user.name.clone(),
        version: DOCUMENT_VERSION,
        roles: user.roles.clone(),
        account_id: user.account.clone(),
    }
}

fn user_not_found(name: &str) -> Error {
    Error::NotFound(format!("no such user: {name}"))
}

fn role_not_found(name: &str) -> Error {
    Error::NotFound(format!("no such role: {name}"))
}

#[cfg(test)]
mod tests;
