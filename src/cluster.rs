//! Cluster membership: which nodes are alive, and which of them owns what.
//!
//! Every node appends a `NodeHeartbeat` to the `_cluster` partition every `heartbeat_every`, and
//! follows that partition. A node counts another as a member for `lease` after it read that
//! node's latest heartbeat (by its own clock, so clocks need not agree), or until the node says it
//! is leaving. Ownership of a key (a database, the control partition) is decided by rendezvous
//! hashing over the members: every node with the same view computes the same owner, and when a
//! member goes only its keys move. Views differ for a moment while heartbeats travel; two nodes
//! that both take a partition over are kept safe by leader-epoch fencing (`strata_log::fence`):
//! the deposed one's writes are never acknowledged.
//!
//! A node that starts follows the partition from its end: it knows the other members after one
//! heartbeat period, and old heartbeats can be removed by the log's retention.

use std::{
    collections::HashMap,
    sync::Arc,
    time::{Duration, Instant},
};

use futures::StreamExt;
use parking_lot::Mutex;
use strata_log::{CommitLog, Envelope, PartitionId, envelope::Body, event::NodeHeartbeat};

use crate::error::Result;

/// A node of the cluster and where it serves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    pub node: String,
    pub data_addr: String,
    pub platform_addr: String,
}

#[derive(Clone, Copy, Debug)]
pub struct MembershipOptions {
    pub heartbeat_every: Duration,
    /// How long a member counts after its latest heartbeat; a few heartbeat periods.
    pub lease: Duration,
}

/// What this node last read of another.
struct Seen {
    member: Member,
    incarnation: u64,
    at: Instant,
    lease: Duration,
}

/// This node's membership: its heartbeats, and its view of the others.
pub struct Membership {
    me: Member,
    incarnation: u64,
    log: Arc<dyn CommitLog>,
    seen: Arc<Mutex<HashMap<String, Seen>>>,
    options: MembershipOptions,
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

impl Drop for Membership {
    fn drop(&mut self) {
        for task in self.tasks.get_mut().drain(..) {
            task.abort();
        }
    }
}

impl Membership {
    /// Joins: starts heartbeating and following the `_cluster` partition of `log`.
    pub async fn join(
        log: Arc<dyn CommitLog>,
        me: Member,
        options: MembershipOptions,
    ) -> Result<Membership> {
        let partition = PartitionId::cluster();
        let from = log.high_water_mark(&partition).await?;
        let incarnation = u64::try_from(chrono::Utc::now().timestamp_micros()).unwrap_or(0);
        let seen = Arc::new(Mutex::new(HashMap::new()));
        let follow = {
            let seen = seen.clone();
            let me = Me {
                node: me.node.clone(),
                incarnation,
            };
            let mut tail = strata_log::tail(log.clone(), partition.clone(), from);
            tokio::spawn(async move {
                while let Some(event) = tail.next().await {
                    match event {
                        Ok(event) => observe(&seen, &me, &event),
                        Err(error) => {
                            tracing::error!(%error, "cannot follow the cluster's heartbeats");
                            return;
                        }
                    }
                }
            })
        };
        let membership = Membership {
            me,
            incarnation,
            log,
            seen,
            options,
            tasks: Mutex::new(vec![follow]),
        };
        membership.beat(false).await?;
        let heartbeat = {
            let (log, body, every) = (
                membership.log.clone(),
                membership.heartbeat(false),
                options.heartbeat_every,
            );
            tokio::spawn(async move {
                let mut ticks = tokio::time::interval(every);
                ticks.tick().await;
                loop {
                    ticks.tick().await;
                    if let Err(error) = log
                        .append(&PartitionId::cluster(), vec![envelope(body.clone())])
                        .await
                    {
                        tracing::warn!(%error, "heartbeat failed");
                    }
                }
            })
        };
        membership.tasks.lock().push(heartbeat);
        Ok(membership)
    }

    fn heartbeat(&self, leaving: bool) -> NodeHeartbeat {
        NodeHeartbeat {
            node: self.me.node.clone(),
            data_addr: self.me.data_addr.clone(),
            platform_addr: self.me.platform_addr.clone(),
            incarnation: self.incarnation,
            lease_ms: u32::try_from(self.options.lease.as_millis()).unwrap_or(u32::MAX),
            leaving,
        }
    }

    async fn beat(&self, leaving: bool) -> Result<()> {
        self.log
            .append(
                &PartitionId::cluster(),
                vec![envelope(self.heartbeat(leaving))],
            )
            .await?;
        Ok(())
    }

    /// Leaves the cluster: stops heartbeating and tells the others, who stop counting this
    /// node at once instead of after its lease.
    pub async fn leave(&self) -> Result<()> {
        let tasks: Vec<_> = self.tasks.lock().drain(..).collect();
        for task in tasks {
            task.abort();
        }
        self.beat(true).await
    }

    pub fn me(&self) -> &Member {
        &self.me
    }

    /// The members now, this node included, by node name.
    pub fn members(&self) -> Vec<Member> {
        let now = Instant::now();
        let mut members: Vec<Member> = self
            .seen
            .lock()
            .values()
            .filter(|s| now.duration_since(s.at) < s.lease)
            .map(|s| s.member.clone())
            .chain([self.me.clone()])
            .collect();
        members.sort_by(|a, b| a.node.cmp(&b.node));
        members.dedup_by(|a, b| a.node == b.node);
        members
    }

    /// The member that owns `key` (a database's "<account>/<database>", or "_control").
    pub fn owner(&self, key: &str) -> Member {
        owner(&self.members(), key).unwrap_or_else(|| self.me.clone())
    }
}

/// This node's run, as its heartbeats name it.
struct Me {
    node: String,
    incarnation: u64,
}

/// Applies one event of the `_cluster` partition to a view.
fn observe(seen: &Mutex<HashMap<String, Seen>>, me: &Me, event: &Envelope) {
    let Some(Body::NodeHeartbeat(beat)) = &event.body else {
        return;
    };
    if beat.node == me.node {
        if beat.incarnation != me.incarnation && !beat.leaving {
            tracing::error!(node = %beat.node, addr = %beat.data_addr, "another node heartbeats with this node's name: give every node its own cluster.node_id");
        }
        return;
    }
    let mut seen = seen.lock();
    if beat.leaving {
        if seen
            .get(&beat.node)
            .is_some_and(|s| s.incarnation == beat.incarnation)
        {
            seen.remove(&beat.node);
        }
        return;
    }
    // A heartbeat of an older run of the node, read late, does not bring it back.
    if seen
        .get(&beat.node)
        .is_some_and(|s| s.incarnation > beat.incarnation)
    {
        return;
    }
    seen.insert(
        beat.node.clone(),
        Seen {
            member: Member {
                node: beat.node.clone(),
                data_addr: beat.data_addr.clone(),
                platform_addr: beat.platform_addr.clone(),
            },
            incarnation: beat.incarnation,
            at: Instant::now(),
            lease: Duration::from_millis(u64::from(beat.lease_ms)),
        },
    );
}

fn envelope(beat: NodeHeartbeat) -> Envelope {
    Envelope {
        event_id: uuid::Uuid::now_v7().to_string(),
        timestamp_micros: chrono::Utc::now().timestamp_micros(),
        principal: "system".to_owned(),
        request_id: String::new(),
        body: Some(Body::NodeHeartbeat(beat)),
        ..Default::default()
    }
}

/// Rendezvous hashing: the member whose hash with `key` is highest.
pub fn owner(members: &[Member], key: &str) -> Option<Member> {
    members
        .iter()
        .max_by_key(|m| (score(&m.node, key), m.node.clone()))
        .cloned()
}

fn score(node: &str, key: &str) -> u64 {
    let fnv = node
        .bytes()
        .chain([0])
        .chain(key.bytes())
        .fold(0xcbf2_9ce4_8422_2325u64, |hash, byte| {
            (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
        });
    // splitmix64's finalizer: FNV's low bits mix poorly on their own.
    let mut z = fnv.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests;
