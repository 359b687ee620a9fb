//! The node's store of projection state (sled): one tree per projection, each holding its
//! checkpoint next to its records so that one atomic batch moves both.

use std::path::Path;

use serde::{Serialize, de::DeserializeOwned};

use crate::{
    error::{Error, Result},
    projection::Checkpoint,
};

const CHECKPOINT_KEY: &[u8] = b"\0checkpoint";

/// The sled database holding the catalog and control projections.
#[derive(Clone)]
pub struct StateStore {
    db: sled::Db,
}

impl std::fmt::Debug for StateStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StateStore").finish_non_exhaustive()
    }
}

impl StateStore {
    /// Opens (creating if needed) the store in `dir`. Blocking.
    pub fn open(dir: impl AsRef<Path>) -> Result<StateStore> {
        // sled's background flusher holds the directory's lock for a moment after the last
        // handle is dropped, so reopening in the same process (a restart of a runtime, a
        // test) can find it still taken. Another process holding it keeps it: give up then.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
        loop {
            match sled::Config::new().path(dir.as_ref()).open() {
                Ok(db) => return Ok(StateStore { db }),
                Err(sled::Error::Io(error))
                    if error.to_string().contains("could not acquire lock")
                        && std::time::Instant::now() < deadline =>
                {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                Err(error) => return Err(error.into()),
            }
        }
    }

    pub(crate) fn tree(&self, name: &str) -> Result<sled::Tree> {
        Ok(self.db.open_tree(name)?)
    }

    /// The names of the trees that begin with `prefix` (the projections opened so far of one
    /// kind, `assistant/` say).
    pub fn tree_names(&self, prefix: &str) -> Vec<String> {
        self.db
            .tree_names()
            .into_iter()
            .filter_map(|name| String::from_utf8(name.to_vec()).ok())
            .filter(|name| name.starts_with(prefix))
            .collect()
    }

    /// Removes a projection's tree and everything in it.
    pub fn drop_tree(&self, name: &str) -> Result<()> {
        self.db.drop_tree(name)?;
        Ok(())
    }

    /// Makes everything written so far durable (at shutdown).
    pub fn flush(&self) -> Result<()> {
        self.db.flush()?;
        Ok(())
    }
}

pub(crate) fn load_checkpoint(tree: &sled::Tree) -> Result<Checkpoint> {
    match tree.get(CHECKPOINT_KEY)? {
        Some(bytes) => decode(CHECKPOINT_KEY, &bytes),
        None => Ok(Checkpoint::default()),
    }
}

/// A batch of record writes that commits together with a checkpoint.
#[derive(Default)]
pub(crate) struct Writes {
    batch: sled::Batch,
}

impl Writes {
    pub(crate) fn put<T: Serialize>(&mut self, key: &str, value: &T) -> Result<()> {
        let bytes = serde_json::to_vec(value).map_err(|error| Error::Corrupt {
            key: key.to_owned(),
            reason: error.to_string(),
        })?;
        self.batch.insert(key.as_bytes(), bytes);
        Ok(())
    }

    pub(crate) fn delete(&mut self, key: &str) {
        self.batch.remove(key.as_bytes());
    }

    pub(crate) fn commit(mut self, tree: &sled::Tree, checkpoint: Checkpoint) -> Result<()> {
        self.put_raw_checkpoint(checkpoint)?;
        tree.apply_batch(self.batch)?;
        Ok(())
    }

    fn put_raw_checkpoint(&mut self, checkpoint: Checkpoint) -> Result<()> {
        let bytes = serde_json::to_vec(&checkpoint).map_err(|error| Error::Corrupt {
            key: "checkpoint".to_owned(),
            reason: error.to_string(),
        })?;
        self.batch.insert(CHECKPOINT_KEY, bytes);
        Ok(())
    }
}

/// Every record of `tree` under `prefix`, decoded.
pub(crate) fn scan<T: DeserializeOwned>(tree: &sled::Tree, prefix: &str) -> Result<Vec<T>> {
    tree.scan_prefix(prefix.as_bytes())
        .map(|entry| {
            let (key, value) = entry?;
            decode(&key, &value)
        })
        .collect()
}

/// Every record of `tree` under `prefix`, decoded, with its key after the prefix.
pub(crate) fn scan_keyed<T: DeserializeOwned>(
    tree: &sled::Tree,
    prefix: &str,
) -> Result<Vec<(String, T)>> {
    tree.scan_prefix(prefix.as_bytes())
        .map(|entry| {
            let (key, value) = entry?;
            let name = String::from_utf8_lossy(&key[prefix.len()..]).into_owned();
            Ok((name, decode(&key, &value)?))
        })
        .collect()
}

fn decode<T: DeserializeOwned>(key: &[u8], bytes: &[u8]) -> Result<T> {
    serde_json::from_slice(bytes).map_err(|error| Error::Corrupt {
        key: String::from_utf8_lossy(key).into_owned(),
        reason: error.to_string(),
    })
}
