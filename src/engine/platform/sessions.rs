//! Console sessions (API.md "Console"): a user signs in with its name and password
//! (POST /console/session) and gets a session, a random token its browser keeps in an HttpOnly
//! cookie, and a CSRF token its console sends with every request that changes something. The
//! CSRF token is a hash of the session's secret token, so the console reads it again
//! after a reload (GET /console/session), while a page of another site, which can neither read
//! the cookie nor the answer, cannot know it.
//!
//! Sessions are control events (`console_session_started`, `console_session_ended`), so every
//! node of a cluster knows them, a restart keeps them and `strata-replay audit` shows who signed
//! in when. The log holds only the SHA-256 of the tokens. A session ends when it expires
//! (`console.session_ttl_secs` after its sign-in), when its user signs out, and when its user
//! changes (keys, password, roles, root) or is deleted: it carries a fingerprint of the user
//! as it was at sign-in. A session acts with the user's grant as its roles give it at each
//! request, as the user's keys do.

use sha2::{Digest, Sha256};
use strata_log::{
    envelope::Body,
    event::{ConsoleSessionEnded, ConsoleSessionStarted},
};
use strata_projections::control::{ConsoleSession, User};

use crate::{
    engine::{
        Engine, Origin, PlatformPrincipal,
        governance::{hash_password, verify_password},
    },
    error::{Error, Result},
};

/// A session just started: the two tokens are shown this once.
#[derive(Clone, Debug)]
pub struct SignedIn {
    pub account: String,
    pub user: String,
    pub root: bool,
    pub session_id: String,
    /// The cookie's value.
    pub token: String,
    pub csrf_token: String,
    pub expires_micros: i64,
}

/// A request's session, as it was checked.
#[derive(Clone, Debug)]
pub struct Session {
    pub principal: PlatformPrincipal,
    pub session_id: String,
    pub csrf_token: String,
    pub expires_micros: i64,
}

impl Session {
    /// Whether `given` is the session's CSRF token (compared in constant time).
    pub fn csrf_matches(&self, given: &str) -> bool {
        let (a, b) = (
            Sha256::digest(given.as_bytes()),
            Sha256::digest(self.csrf_token.as_bytes()),
        );
        a.iter()
            .zip(b.iter())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
    }
}

/// The CSRF token of the session whose token is `token`.
pub fn csrf_token(token: &str) -> String {
    use base64::Engine as _;
    let mut hash = Sha256::new();
    hash.update(b"strata console csrf\0");
    hash.update(token.as_bytes());
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(hash.finalize())
}

/// What a user was at sign-in: its sessions end when any of it changes.
pub fn fingerprint(user: &User) -> Vec<u8> {
    let mut hash = Sha256::new();
    for part in [
        user.access_key.as_str(),
        user.password_hash.as_deref().unwrap_or_default(),
        if user.root { "root" } else { "" },
    ] {
        hash.update(part.as_bytes());
        hash.update([0]);
    }
    for role in &user.roles {
        hash.update(role.as_bytes());
        hash.update([0]);
    }
    hash.finalize().to_vec()
}

/// 32 random bytes, URL-safe base64.
fn random_token() -> String {
    use base64::Engine as _;
    let bytes: [u8; 32] = rand::random();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// A hash nobody's password matches, checked when the user does not exist so that a wrong
/// name takes as long as a wrong password.
static NOBODY: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| hash_password(&random_token()).unwrap_or_default());

fn wrong() -> Error {
    Error::NotAuthenticated("the user name or the password is wrong".to_owned())
}

impl Engine {
    /// POST /console/session: checks `password` against user `name`'s and starts a session.
    /// `account` may be left out when the server holds one account. A 401 that does not say
    /// which of the two was wrong.
    pub async fn sign_in(
        &self,
        account: Option<&str>,
        name: &str,
        password: &str,
    ) -> Result<SignedIn> {
        if self.clustered() {
            self.control_current().await?;
        }
        let state = self.control_state();
        let account = match account {
            Some(account) => account.to_owned(),
            None => match state.accounts.keys().collect::<Vec<_>>().as_slice() {
                [only] => (*only).clone(),
                _ => {
                    return Err(Error::BadRequest(
                        "account is required: this server holds several accounts".to_owned(),
                    ));
                }
            },
        };
        let user = state.user(&account, name).cloned();
        let hash = user
            .as_ref()
            .and_then(|u| u.password_hash.clone())
            .unwrap_or_else(|| NOBODY.clone());
        let given = password.to_owned();
        // argon2 is slow on purpose: off the runtime's threads.
        let matches = crate::engine::blocking(move || verify_password(&hash, &given)).await?;
        let user = match (user, matches) {
            (Some(user), true) if user.password_hash.is_some() => user,
            _ => return Err(wrong()),
        };
        let token = random_token();
        let csrf_token = csrf_token(&token);
        let session_id = uuid::Uuid::now_v7().to_string();
        let ttl = i64::try_from(self.config.console.session_ttl_secs).unwrap_or(i64::MAX);
        let expires_micros = chrono::Utc::now()
            .timestamp_micros()
            .saturating_add(ttl.saturating_mul(1_000_000));
        let body = Body::ConsoleSessionStarted(ConsoleSessionStarted {
            account: account.clone(),
            user: user.name.clone(),
            session_id: session_id.clone(),
            token_sha256: Sha256::digest(token.as_bytes()).to_vec().into(),
            user_fingerprint: fingerprint(&user).into(),
            expires_micros,
        });
        let origin = Origin {
            principal: format!("user:{account}/{}", user.name),
            request_id: session_id.clone(),
        };
        let mut permit = self.control.permit().await?;
        permit.write(body, &origin).await?;
        Ok(SignedIn {
            account,
            user: user.name,
            root: user.root,
            session_id,
            token,
            csrf_token,
            expires_micros,
        })
    }

    /// The session whose cookie holds `token`, if it is live: not expired, not signed out,
    /// its user there and unchanged since the sign-in. A 401 otherwise.
    pub async fn authenticate_session(&self, token: &str) -> Result<Session> {
        if self.clustered() {
            self.control_current().await?;
        }
        let state = self.control_state();
        let ended = || Error::NotAuthenticated("the console session has ended: sign in".to_owned());
        let session: &ConsoleSession = state
            .session(&Sha256::digest(token.as_bytes()))
            .ok_or_else(ended)?;
        if session.expires_micros <= chrono::Utc::now().timestamp_micros() {
            return Err(ended());
        }
        match state.user(&session.account, &session.user) {
            Some(user) if fingerprint(user) == session.user_fingerprint => {}
            _ => return Err(ended()),
        }
        let principal = self
            .acting_user(&session.account, &session.user)
            .ok_or_else(ended)?;
        Ok(Session {
            principal,
            session_id: session.session_id.clone(),
            csrf_token: csrf_token(token),
            expires_micros: session.expires_micros,
        })
    }

    /// DELETE /console/session: ends the caller's session.
    pub async fn sign_out(&self, session: &Session, origin: &Origin) -> Result<()> {
        let body = Body::ConsoleSessionEnded(ConsoleSessionEnded {
            account: session.principal.account.clone(),
            session_id: session.session_id.clone(),
        });
        let mut permit = self.control.permit().await?;
        permit.write(body, origin).await?;
        Ok(())
    }
}
