//! `strata-projections`: state derived from the commit log.
//!
//! - [`Projection`]: apply a batch of events, checkpoint atomically with the projection's own
//!   state, give a read snapshot.
//! - [`Projector`]: the runtime that catches a projection up from its checkpoint and follows its
//!   partition, with leader-epoch fencing.
//! - [`control`] and [`catalog`]: accounts, keys and databases; the tables of each database; both
//!   kept in the node's [`StateStore`] (sled).
//! - [`schema`]: the column type grammar and its Arrow types.
//! - [`changes`]: log events as JSON, for change streams and dumps.
//! - [`restore`] and [`verify`]: a database as of a point in its log; projections rebuilt from
//!   the log and compared with live ones (for `strata-replay`, offline or through a server).
//!
//! Projections can always be thrown away and rebuilt by replaying the log. Nothing here knows
//! about HTTP.

pub mod assistant;
pub mod catalog;
pub mod changes;
pub mod control;
mod error;
pub mod monitor_runs;
mod projection;
pub mod restore;
mod runtime;
pub mod schema;
mod store;
pub mod table;
pub mod verify;

pub use error::{Error, Result};
pub use projection::{Checkpoint, Projection};
pub use runtime::{Projector, Refresher};
pub use store::StateStore;

#[cfg(test)]
mod runtime_tests;
