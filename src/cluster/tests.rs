//! Membership over a shared log: members see each other, agree on owners, and a member that
//! stops heartbeating (or leaves) stops owning anything, while the others keep what they owned.

#![allow(clippy::unwrap_used, clippy::panic)]

use std::{sync::Arc, time::Duration};

use strata_log::{CommitLog, MemoryLog};

use super::{Member, Membership, MembershipOptions, owner};

fn member(node: &str) -> Member {
    Member {
        node: node.to_owned(),
        data_addr: format!("{node}:7070"),
        platform_addr: format!("{node}:7080"),
    }
}

const OPTIONS: MembershipOptions = MembershipOptions {
    heartbeat_every: Duration::from_millis(50),
    lease: Duration::from_millis(400),
};

async fn until(mut check: impl FnMut() -> bool) -> bool {
    for _ in 0..100 {
        if check() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

fn names(members: &[Member]) -> Vec<&str> {
    members.iter().map(|m| m.node.as_str()).collect()
}

fn keys() -> Vec<String> {
    (0..200).map(|i| format!("acct/db{i}")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_agree_on_owners_and_a_silent_member_loses_only_its_keys() {
    let log: Arc<dyn CommitLog> = Arc::new(MemoryLog::default());
    let a = Membership::join(log.clone(), member("a"), OPTIONS)
        .await
        .unwrap();
    let b = Membership::join(log.clone(), member("b"), OPTIONS)
        .await
        .unwrap();
    let c = Membership::join(log.clone(), member("c"), OPTIONS)
        .await
        .unwrap();
    assert!(until(|| [&a, &b, &c].iter().all(|m| m.members().len() == 3)).await);
    assert_eq!(names(&a.members()), ["a", "b", "c"]);
    assert_eq!(a.members()[1], member("b"));

    let before: Vec<Member> = keys().iter().map(|k| a.owner(k)).collect();
    for key in keys() {
        assert_eq!(a.owner(&key), b.owner(&key), "{key}");
        assert_eq!(b.owner(&key), c.owner(&key), "{key}");
    }
    // Rendezvous hashing spreads the keys.
    for node in ["a", "b", "c"] {
        let owned = before.iter().filter(|m| m.node == node).count();
        assert!(owned > 40, "{node} owns {owned} of 200");
    }

    // c stops heartbeating (a killed node): after its lease it owns nothing, and only its keys
    // moved.
    drop(c);
    assert!(until(|| a.members().len() == 2 && b.members().len() == 2).await);
    for (key, was) in keys().iter().zip(&before) {
        let now = a.owner(key);
        assert_eq!(now, b.owner(key), "{key}");
        assert_ne!(now.node, "c");
        if was.node != "c" {
            assert_eq!(&now, was, "{key} moved though its owner stayed");
        }
    }

    // b leaves: a knows at once, without waiting for b's lease.
    b.leave().await.unwrap();
    assert!(until(|| a.members().len() == 1).await);
    assert!(keys().iter().all(|k| a.owner(k).node == "a"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_leaving_of_an_old_run_does_not_remove_the_restarted_member() {
    let log: Arc<dyn CommitLog> = Arc::new(MemoryLog::default());
    let a = Membership::join(log.clone(), member("a"), OPTIONS)
        .await
        .unwrap();
    let first = Membership::join(log.clone(), member("b"), OPTIONS)
        .await
        .unwrap();
    assert!(until(|| a.members().len() == 2).await);
    drop(first);
    tokio::time::sleep(Duration::from_millis(5)).await;
    let second = Membership::join(log.clone(), member("b"), OPTIONS)
        .await
        .unwrap();
    // The first run's last heartbeat says "leaving" only now, read after the second run's.
    let stale = super::NodeHeartbeat {
        incarnation: 1,
        leaving: true,
        ..second.heartbeat(true)
    };
    log.append(
        &strata_log::PartitionId::cluster(),
        vec![super::envelope(stale)],
    )
    .await
    .unwrap();
    tokio::time::sleep(OPTIONS.lease + Duration::from_millis(100)).await;
    assert_eq!(names(&a.members()), ["a", "b"]);
    assert_eq!(second.members().len(), 2);
}

#[test]
fn with_no_members_there_is_no_owner_and_one_member_owns_everything() {
    assert_eq!(owner(&[], "k"), None);
    assert_eq!(owner(&[member("x")], "k"), Some(member("x")));
}
