//! High-water marks that readers can wait on, shared by the log backends.

use std::collections::HashMap;

use parking_lot::Mutex;
use tokio::sync::watch;

use crate::{
    PartitionId,
    error::{Error, Result},
};

#[derive(Debug)]
pub(crate) struct Watermarks {
    marks: Mutex<HashMap<PartitionId, watch::Sender<u64>>>,
    closed: watch::Sender<bool>,
}

impl Default for Watermarks {
    fn default() -> Self {
        Watermarks {
            marks: Mutex::new(HashMap::new()),
            closed: watch::channel(false).0,
        }
    }
}

impl Watermarks {
    /// Publishes a new high-water mark of `partition` and wakes its waiters.
    pub(crate) fn publish(&self, partition: &PartitionId, high_water_mark: u64) {
        let mut marks = self.marks.lock();
        match marks.get(partition) {
            Some(sender) => {
                sender.send_replace(high_water_mark);
            }
            None => {
                marks.insert(partition.clone(), watch::channel(high_water_mark).0);
            }
        }
    }

    /// Publishes `high_water_mark` unless a higher one is already known.
    pub(crate) fn raise(&self, partition: &PartitionId, high_water_mark: u64) {
        let mut marks = self.marks.lock();
        match marks.get(partition) {
            Some(sender) => {
                sender.send_if_modified(|mark| {
                    let higher = high_water_mark > *mark;
                    if higher {
                        *mark = high_water_mark;
                    }
                    higher
                });
            }
            None => {
                marks.insert(partition.clone(), watch::channel(high_water_mark).0);
            }
        }
    }

    /// Resolves once the high-water mark of `partition` is above `offset`.
    pub(crate) async fn wait_for(&self, partition: &PartitionId, offset: u64) -> Result<()> {
        let mut mark = {
            let mut marks = self.marks.lock();
            marks
                .entry(partition.clone())
                .or_insert_with(|| watch::channel(0).0)
                .subscribe()
        };
        let mut closed = self.closed.subscribe();
        loop {
            if *closed.borrow_and_update() {
                return Err(Error::Closed);
            }
            if *mark.borrow_and_update() > offset {
                return Ok(());
            }
            tokio::select! {
                changed = mark.changed() => changed.map_err(|_| Error::Closed)?,
                changed = closed.changed() => changed.map_err(|_| Error::Closed)?,
            }
        }
    }

    /// Wakes every waiter with [`Error::Closed`].
    pub(crate) fn close(&self) {
        self.closed.send_replace(true);
    }
}
