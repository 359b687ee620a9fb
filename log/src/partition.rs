//! Partition names: the unit of ordering and of writing.
//!
//! The naming scheme is part of the public contract for consumers of the log:
//! `_control`, `<account>/<database>/_catalog`, `<account>/<database>/<table>`,
//! `<account>/_monitors` and `<account>/_assistant`. Account, database and table names never
//! contain `/` and never start with `_`, so the shapes cannot collide.

use std::fmt;

use crate::error::{Error, Result};

/// Longest partition name, in bytes.
pub const MAX_PARTITION_NAME: usize = 1024;

/// The name of a partition of the commit log.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PartitionId(String);

impl PartitionId {
    /// The partition of accounts, keys, databases and other control-plane state.
    pub fn control() -> Self {
        PartitionId("_control".to_owned())
    }

    /// The partition of cluster membership: every node's heartbeats.
    pub fn cluster() -> Self {
        PartitionId("_cluster".to_owned())
    }

    /// The catalog partition of one database: table creation and drop.
    pub fn catalog(account: &str, database: &str) -> Self {
        PartitionId(format!("{account}/{database}/_catalog"))
    }

    /// The partition of one table's row writes.
    pub fn table(account: &str, database: &str, table: &str) -> Self {
        PartitionId(format!("{account}/{database}/{table}"))
    }

    /// The partition of the runs of one account's monitors and of their deliveries.
    pub fn monitor_runs(account: &str) -> Self {
        PartitionId(format!("{account}/_monitors"))
    }

    /// The partition of one account's conversation threads and their messages.
    pub fn assistant(account: &str) -> Self {
        PartitionId(format!("{account}/_assistant"))
    }

    /// The prefix shared by every partition of one database (its catalog and its tables).
    pub fn database_prefix(account: &str, database: &str) -> String {
        format!("{account}/{database}/")
    }

    /// Checks an arbitrary name: non-empty, at most [`MAX_PARTITION_NAME`] bytes, no control
    /// characters.
    pub fn new(name: impl Into<String>) -> Result<Self> {
        let name = name.into();
        let reason = if name.is_empty() {
            Some("empty")
        } else if name.len() > MAX_PARTITION_NAME {
            Some("longer than 1024 bytes")
        } else if name.chars().any(char::is_control) {
            Some("contains a control character")
        } else {
            None
        };
        match reason {
            Some(reason) => Err(Error::InvalidPartition { name, reason }),
            None => Ok(PartitionId(name)),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A stable 64-bit hash of a name (FNV-1a), for shortened file and topic names.
pub(crate) fn name_hash(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

impl fmt::Display for PartitionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for PartitionId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_documented_scheme() {
        assert_eq!(PartitionId::control().as_str(), "_control");
        assert_eq!(
            PartitionId::catalog("acme", "db").as_str(),
            "acme/db/_catalog"
        );
        assert_eq!(PartitionId::table("acme", "db", "t").as_str(), "acme/db/t");
        assert_eq!(PartitionId::monitor_runs("acme").as_str(), "acme/_monitors");
        assert_eq!(PartitionId::assistant("acme").as_str(), "acme/_assistant");
        assert!(
            PartitionId::table("acme", "db", "t")
                .as_str()
                .starts_with(&PartitionId::database_prefix("acme", "db"))
        );
    }

    #[test]
    fn rejects_bad_names() {
        assert!(PartitionId::new("").is_err());
        assert!(PartitionId::new("a\nb").is_err());
        assert!(PartitionId::new("x".repeat(1025)).is_err());
        assert!(PartitionId::new("x".repeat(1024)).is_ok());
    }
}
