//! `strata`: an event-sourced, log-structured data service.
//!
//! Every write and catalog change is appended to the commit log (`strata-log`) and applied to
//! projections (`strata-projections`) that queries read. This crate holds the service around
//! them: configuration, the [`engine`] (leaders and operations), the two [`http`] listeners,
//! admin commands, and `strata serve`. docs/architecture.md is the map.

pub mod admin;
pub mod alerting;
pub mod assistant;
pub mod cluster;
pub mod config;
pub mod documents;
pub use strata_datadir as datadir;
pub mod engine;
pub mod error;
pub mod exposition;
pub mod http;
pub mod import_cli;
pub mod keys;
pub use strata_limits as limits;
pub mod metrics;
pub mod names;
pub mod panics;
pub use strata_promql as promql;
pub mod queries;
pub mod query;
pub mod remote_write;
pub mod rows;
pub mod seal;
pub mod server;
pub mod sigv4;
pub mod storage;
pub mod tls;
