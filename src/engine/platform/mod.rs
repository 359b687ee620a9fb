//! The platform API's operations: signed users and their grants ([`users`]), users and roles
//! ([`governance`]), the one door of
//! reads and writes of datasets ([`access`]), datasets ([`datasets`]) and their aliases
//! ([`aliases`]) and mappings ([`mappings`]), records written in bulk ([`ingest`]) and samples
//! ([`samples`]), and the three query languages: the Query DSL ([`query_dsl`]), SQL ([`sql`])
//! and PromQL ([`promql`]); conversation threads and their messages ([`assistant`]). Each is a
//! method of the engine, over the node core's tables.

pub(super) mod access;
pub(super) mod aliases;
pub mod assistant;
pub(super) mod batches;
pub mod connections;
pub(super) mod datasets;
pub(super) mod governance;
pub mod imports;
pub(super) mod ingest;
pub(super) mod mappings;
pub mod monitors;
pub mod promql;
pub(super) mod query_dsl;
pub(super) mod samples;
pub mod sessions;
pub(super) mod sql;
pub(super) mod users;

#[cfg(test)]
pub(super) mod testing;

/// A time of the platform's answers: ISO 8601 in UTC with milliseconds, of Unix microseconds;
/// null for none.
pub(crate) fn iso_time(micros: Option<i64>) -> serde_json::Value {
    match micros.and_then(chrono::DateTime::from_timestamp_micros) {
        Some(at) => serde_json::json!(at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)),
        None => serde_json::Value::Null,
    }
}
