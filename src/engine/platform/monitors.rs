//! Monitors: queries run on a schedule, whose triggers alert through channels (issue 24): when a
//! monitor runs ([`schedule`]), whether a trigger fires ([`condition`]), what its alerts say
//! ([`template`]), the documents clients write ([`document`]), how the control partition keeps
//! them (`saved`), and the runs partition of each account (`runs`). Running them is the
//! alerting edge's work (`crate::alerting`).

pub mod condition;
pub mod document;
mod runs;
mod saved;
pub mod schedule;
pub mod template;

pub(in crate::engine) use runs::RunsLeaders;
pub use saved::{ChannelInfo, ImportSummary, MonitorInfo};
