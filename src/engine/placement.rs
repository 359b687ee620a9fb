//! Where a request is served when several nodes share one Kafka log.
//!
//! With `log.backend = "kafka"` every node joins the cluster of its log ([`Membership`]: heartbeats
//! on the `_cluster` partition). Each database, with its catalog and table partitions, is owned by
//! one member, chosen by rendezvous hashing of `"<account>/<database>"`; the control partition is
//! owned by the member chosen for `"_control"`. The owner of a partition is its leader and runs its
//! projections; the HTTP layer forwards a request for a partition this node does not own to its
//! owner (`crate::http::forward`). Every node follows the control partition, so any node
//! authenticates and lists databases; when it does not know a key or a database yet, it catches up
//! with the control partition's end first, so a key created through one node works at once through
//! the other.
//!
//! When a member's lease lapses its keys move to the others. The first request for one of its
//! databases activates it on the new owner (its own checkpoint, then the tail of the log), and the
//! first write takes each partition over with a newer leader epoch, which voids anything the old
//! owner might still write. When a member comes back, the databases it owns again are hibernated
//! on the node that had them, once idle.

use std::net::SocketAddr;

use crate::{
    cluster::{Member, Membership, MembershipOptions},
    config::LogBackend,
    error::{Error, Result},
};

use super::{Engine, Principal};

/// The ownership key of the control partition.
pub const CONTROL: &str = "_control";

/// The ownership key of a database.
pub fn database_key(account: &str, database: &str) -> String {
    format!("{account}/{database}")
}

impl Engine {
    /// Joins the cluster of this node's log, when it is a Kafka log; `bound` are the addresses
    /// the listeners are bound to, advertised unless the configuration names others.
    pub async fn join_cluster(&self, bound: (SocketAddr, SocketAddr)) -> Result<()> {
        if self.config.log.backend != LogBackend::Kafka {
            return Ok(());
        }
        let cluster = &self.config.cluster;
        let member = Member {
            node: cluster.node_id.clone(),
            data_addr: advertised(&cluster.advertise_data_addr, bound.0, "data")?,
            platform_addr: advertised(&cluster.advertise_platform_addr, bound.1, "platform")?,
        };
        let options = MembershipOptions {
            heartbeat_every: std::time::Duration::from_millis(cluster.heartbeat_ms),
            lease: std::time::Duration::from_millis(cluster.lease_ms),
        };
        let membership = Membership::join(self.log.clone(), member, options).await?;
        tracing::info!(node = %cluster.node_id, "joined the cluster");
        if self.cluster.set(membership).is_err() {
            return Err(Error::Internal(
                "the node joined its cluster twice".to_owned(),
            ));
        }
        Ok(())
    }

    /// Leaves the cluster at shutdown: the others take this node's databases at once.
    pub async fn leave_cluster(&self) {
        if let Some(cluster) = self.cluster.get()
            && let Err(error) = cluster.leave().await
        {
            tracing::warn!(%error, "could not tell the cluster this node leaves");
        }
    }

    /// Whether this node is a member of a cluster (its log is Kafka).
    pub fn clustered(&self) -> bool {
        self.cluster.get().is_some()
    }

    /// This node's name.
    pub fn node(&self) -> &str {
        &self.config.cluster.node_id
    }

    /// The member that owns `key` when it is another node; `None` when this node owns it or
    /// runs alone.
    pub fn owner_elsewhere(&self, key: &str) -> Option<Member> {
        let cluster = self.cluster.get()?;
        let owner = cluster.owner(key);
        (owner.node != cluster.me().node).then_some(owner)
    }

    /// The members of the cluster this node sees, itself included; empty when it runs alone.
    pub fn members(&self) -> Vec<Member> {
        self.cluster
            .get()
            .map(Membership::members)
            .unwrap_or_default()
    }

    /// Authenticates like [`Engine::authenticate`]; in a cluster, an unknown key is looked up
    /// again once the control partition is caught up (it may have been created through another
    /// node a moment ago).
    pub async fn authenticate_current(&self, key_text: Option<&str>) -> Result<Principal> {
        match self.authenticate(key_text) {
            Err(Error::Unauthorized) if self.cluster.get().is_some() && key_text.is_some() => {
                self.catch_up_control().await?;
                self.authenticate(key_text)
            }
            other => other,
        }
    }

    /// In a cluster, catches up with the control partition when it does not know `database`
    /// of the principal's account yet.
    pub async fn know_database(&self, principal: &Principal, database: &str) -> Result<()> {
        if self.cluster.get().is_some()
            && self
                .control_state()
                .database(&principal.account, database)
                .is_none()
        {
            self.catch_up_control().await?;
        }
        Ok(())
    }

    /// Waits until this node's control projection has applied everything the control partition
    /// held when the call began: a key rotated, a user deleted or a role changed through
    /// another node before then applies here. Concurrent callers share one catch-up: a
    /// catch-up that began after a caller arrived serves it.
    pub(super) async fn control_current(&self) -> Result<()> {
        let arrived = std::time::Instant::now();
        let mut checked = self.control_checked.lock().await;
        if checked.is_some_and(|began| began >= arrived) {
            return Ok(());
        }
        let began = std::time::Instant::now();
        self.catch_up_control().await?;
        *checked = Some(began);
        Ok(())
    }

    /// Waits until this node's control projection has applied everything in the control
    /// partition now.
    pub(super) async fn catch_up_control(&self) -> Result<()> {
        let partition = self.control.partition().clone();
        let end = self.log.high_water_mark(&partition).await?;
        if end == 0 {
            return Ok(());
        }
        let wait = std::time::Duration::from_millis(self.config.databases.activation_wait_ms);
        match tokio::time::timeout(wait, self.control.projector().wait_for(end - 1)).await {
            Ok(applied) => {
                applied?;
                Ok(())
            }
            Err(_) => Err(Error::Unavailable(
                "this node is catching up with the cluster's accounts and databases; retry"
                    .to_owned(),
            )),
        }
    }
}

/// The address the other nodes reach a listener at.
fn advertised(configured: &str, bound: SocketAddr, listener: &str) -> Result<String> {
    if !configured.is_empty() {
        return Ok(configured.to_owned());
    }
    if bound.ip().is_unspecified() {
        return Err(Error::BadRequest(format!(
            "the {listener} listener is bound to {bound}, which other nodes cannot reach: set cluster.advertise_{listener}_addr"
        )));
    }
    Ok(bound.to_string())
}
