//! PromQL: the parser, the value model and the evaluator that answers Prometheus queries over
//! the series of metrics datasets (ADR 7).
//!
//! The crate depends on the standard library, `regex`, `chrono`, `thiserror`, `ryu` and
//! `strata-limits` only, so that it is built and tested on its own; storage reaches it through the
//! [`storage`] seam.
//!
//! - [`ast`]: the syntax tree, with byte positions for error messages and annotations;
//! - [`lexer`] and [`parser`]: PromQL text to [`ast::Expr`], with Prometheus' error messages;
//!   also the series descriptions (`metric{l="v"} 1+2x3`) of Prometheus' test files;
//! - [`histogram`]: native float histograms (exponential and custom buckets) and their arithmetic;
//! - [`value`]: label sets, samples and series; [`storage`]: the [`storage::Queryable`] seam;
//! - [`format`]: numbers as Prometheus (Go) writes them.

pub mod ast;
pub mod engine;
pub mod format;
pub mod histogram;
pub mod lexer;
pub mod parser;
pub mod quantile;
pub mod storage;
pub mod value;
