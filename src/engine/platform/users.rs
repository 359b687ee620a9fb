//! Platform users and their requests: the root user of an account, the SigV4 check of every
//! platform request, and the one authorization function every platform handler asks before it
//! acts, so that roles plug in without touching the handlers.
//!
//! A user's credentials are an access key (public, `AKST` and 16 characters) and a secret key
//! (40 characters, shown once), which signs requests. The secret is written to the control
//! partition sealed ([`crate::seal`]); a request is checked against it unsealed.

use rand::Rng;
use strata_log::{envelope::Body, event::UserCreated};

use std::sync::Arc;

use crate::engine::{
    Engine, Origin,
    access::Grant,
    governance::{IssuedKeys, grant_of},
};
use crate::{
    error::{Error, Result},
    sigv4,
};

/// The SigV4 service name Prometheus' and Grafana's Prometheus clients sign with.
pub const PROMETHEUS_SERVICE: &str = "aps";

/// What `strata users create-root` prints, once.
#[derive(Clone, Debug, serde::Serialize)]
pub struct RootCredentials {
    pub account: String,
    pub access_key: String,
    pub secret_key: String,
}

/// Who signed a platform request, and what it may do.
#[derive(Clone, Debug, PartialEq)]
pub struct PlatformPrincipal {
    pub account: String,
    pub user: String,
    pub access_key: String,
    pub root: bool,
    /// What its roles grant (everything for the root user), as of the request's start.
    pub grant: Arc<Grant>,
}

impl PlatformPrincipal {
    /// The origin stamped on the events of a request this user made.
    pub fn origin(&self, request_id: &str) -> Origin {
        Origin {
            principal: format!("user:{}/{}", self.account, self.user),
            request_id: request_id.to_owned(),
        }
    }
}

/// What a platform request does, in the terms of roles (ResourceType and action).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// View schemas and mappings, list datasets.
    MetadataRead,
    DatasetCreate,
    DatasetDelete,
    /// Query records.
    RecordRead,
    /// Insert, update, delete records.
    RecordWrite,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::MetadataRead => "metadata:read",
            Action::DatasetCreate => "dataset:create",
            Action::DatasetDelete => "dataset:delete",
            Action::RecordRead => "record:read",
            Action::RecordWrite => "record:write",
        }
    }
}

const KEY_ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
const SECRET_ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

fn random_text(alphabet: &[u8], len: usize) -> String {
    let mut rng = rand::rng();
    (0..len)
        .map(|_| alphabet[rng.random_range(0..alphabet.len())] as char)
        .collect()
}

/// A new key pair, and its secret sealed for the log.
pub(in crate::engine) fn new_key_pair(engine: &Engine) -> Result<(IssuedKeys, Vec<u8>)> {
    let keys = IssuedKeys {
        access_key: format!("AKST{}", random_text(KEY_ALPHABET, 16)),
        secret_key: random_text(SECRET_ALPHABET, 40),
    };
    let sealed = engine.seal.seal(keys.secret_key.as_bytes())?;
    Ok((keys, sealed))
}

impl Engine {
    /// Creates the root user of `account`: unrestricted, one per account.
    pub async fn create_root_user(
        &self,
        account: &str,
        origin: &Origin,
    ) -> Result<RootCredentials> {
        let mut permit = self.control.permit().await?;
        let state = permit.snapshot();
        if !state.accounts.contains_key(account) {
            return Err(Error::AccountNotFound(account.to_owned()));
        }
        if let Some(root) = state.root_user(account) {
            return Err(Error::UserExists(format!(
                "account {account:?} has a root user already (access key {})",
                root.access_key
            )));
        }
        let (keys, sealed) = new_key_pair(self)?;
        let body = Body::UserCreated(UserCreated {
            account: account.to_owned(),
            name: "root".to_owned(),
            access_key: keys.access_key.clone(),
            sealed_secret: sealed.into(),
            root: true,
            roles: Vec::new(),
            password_hash: String::new(),
        });
        permit.write(body, origin).await?;
        Ok(RootCredentials {
            account: account.to_owned(),
            access_key: keys.access_key,
            secret_key: keys.secret_key,
        })
    }

    /// Checks a platform request's signature: who sent it, or 401 with the reason. In a
    /// cluster, the control partition is caught up first, so that a key rotated or deleted,
    /// or a role changed, on another node is refused or applied here from that moment on.
    pub async fn authenticate_signed(
        &self,
        request: &sigv4::Request<'_>,
    ) -> Result<PlatformPrincipal> {
        if self.clustered() {
            self.control_current().await?;
        }
        self.check_signature(request)
    }

    fn check_signature(&self, request: &sigv4::Request<'_>) -> Result<PlatformPrincipal> {
        let platform = &self.config.platform;
        // Prometheus' remote write and Grafana's Prometheus data source sign as the service
        // "aps" (Amazon Managed Service for Prometheus), which they cannot be told to change:
        // that name is accepted beside the configured one.
        let scoped = sigv4::parse(request)
            .ok()
            .and_then(|s| s.scope.split('/').nth(2).map(str::to_owned));
        let name = match scoped.as_deref() {
            Some(PROMETHEUS_SERVICE) => PROMETHEUS_SERVICE,
            _ => platform.service.as_str(),
        };
        let service = sigv4::Service {
            region: &platform.region,
            service: name,
            max_skew_secs: i64::try_from(platform.max_skew_secs).unwrap_or(i64::MAX),
            normalize: true,
        };
        let state = self.control_state();
        let mut unsealing = Ok(());
        let verified = sigv4::verify(request, &service, chrono::Utc::now(), |access_key| {
            let user = state.users.get(access_key)?;
            match self.seal.unseal(&user.sealed_secret) {
                Ok(secret) => String::from_utf8(secret).ok(),
                Err(error) => {
                    unsealing = Err(error);
                    None
                }
            }
        });
        unsealing?;
        let access_key = verified.map_err(|e| Error::NotAuthenticated(e.to_string()))?;
        let user = state
            .users
            .get(&access_key)
            .ok_or_else(|| Error::NotAuthenticated(format!("unknown access key {access_key:?}")))?;
        if !state.accounts.contains_key(&user.account) {
            return Err(Error::NotAuthenticated(format!(
                "the account of access key {access_key:?} does not exist"
            )));
        }
        let grant = grant_of(&state, user);
        Ok(PlatformPrincipal {
            account: user.account.clone(),
            user: user.name.clone(),
            access_key,
            root: user.root,
            grant: Arc::new(grant),
        })
    }

    /// May `principal` use the endpoints that read no dataset (`GET /`, cluster health,
    /// Prometheus' build info)? Any grant will do: no role, no access.
    pub fn authorize_any(&self, principal: &PlatformPrincipal) -> Result<()> {
        match principal.grant.is_nothing() {
            true => Err(crate::engine::access::no_grants(principal)),
            false => Ok(()),
        }
    }

    /// May `principal` do `action` on `resource` (a dataset name, or "*")? Deny by default: the
    /// root user may do everything; other users only what their grant allows. Reads of
    /// datasets ask [`Engine::read`] instead, which also says how the reader sees them.
    pub fn authorize(
        &self,
        principal: &PlatformPrincipal,
        action: Action,
        resource: &str,
    ) -> Result<()> {
        if principal.root || principal.grant.allows(action, resource) {
            return Ok(());
        }
        Err(Error::Forbidden(format!(
            "user {} may not {} on {resource:?}: no role grants it",
            principal.user,
            action.as_str()
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_have_the_shape_of_aws_ones() {
        let key = format!("AKST{}", random_text(KEY_ALPHABET, 16));
        assert_eq!(key.len(), 20);
        assert!(
            key.bytes()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit())
        );
        let secret = random_text(SECRET_ALPHABET, 40);
        assert_eq!(secret.len(), 40);
        assert_ne!(secret, random_text(SECRET_ALPHABET, 40));
    }
}
