//! Alerting: monitors run on their schedules, and their alerts reach channels.
//!
//! An edge of the service like the HTTP layer: it reads through the engine's access door with
//! the rights of each monitor's author, renders the results as the HTTP API would, and records
//! every run and delivery in the account's `<account>/_monitors` partition before and after it
//! sends anything (at-least-once delivery across a crash).

pub mod delivery;
