//! Monitors: queries run on a schedule, whose triggers alert through channels (issue 24). So
//! far: when a monitor runs ([`schedule`]).

pub mod schedule;
