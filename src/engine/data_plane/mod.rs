//! The data plane's operations (spec 000, /v1): tables of a database ([`catalog`]), their rows
//! and read-only SQL ([`table`]), BM25, token, exact and hybrid search ([`search`]), and change
//! streams ([`changes`]). Each is a method of the engine, over the node core's tables.

pub(super) mod catalog;
pub(super) mod changes;
pub mod search;
pub(super) mod table;
