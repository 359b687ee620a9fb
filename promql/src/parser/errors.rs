//! Parse errors, positioned and printed as Prometheus prints them.

use crate::ast::PosRange;

/// When Prometheus reports an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// A parse error: printed `line:col: parse error: <message>`.
    Parse,
    /// A check Prometheus makes only when it executes the query (the functions that accept
    /// `anchored`/`smoothed` range selectors); printed as the bare message, as Prometheus'
    /// engine returns it.
    Execution,
}

/// One error with the byte range it concerns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    pub pos: PosRange,
    pub message: String,
    pub kind: ErrorKind,
    /// `line:col` of `pos.start` in the query.
    position: String,
}

impl ParseError {
    pub(crate) fn new(query: &str, start: usize, end: usize, message: String) -> Self {
        let pos = PosRange::new(start, end);
        Self {
            position: pos.start_pos_input(query),
            pos,
            message,
            kind: ErrorKind::Parse,
        }
    }

    pub(crate) fn execution(query: &str, pos: PosRange, message: String) -> Self {
        Self {
            kind: ErrorKind::Execution,
            ..Self::new(query, pos.start, pos.end, message)
        }
    }

    /// `line:col` of the start of the error.
    pub fn position(&self) -> &str {
        &self.position
    }
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.kind {
            ErrorKind::Parse => write!(f, "{}: parse error: {}", self.position, self.message),
            ErrorKind::Execution => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for ParseError {}

/// All errors of one parse, in the order Prometheus would report them; it prints as the
/// first one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseErrors(pub Vec<ParseError>);

impl ParseErrors {
    /// The first error.
    pub fn first(&self) -> Option<&ParseError> {
        self.0.first()
    }
}

impl std::fmt::Display for ParseErrors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0.first() {
            Some(e) => e.fmt(f),
            None => f.write_str("error contains no error message"),
        }
    }
}

impl std::error::Error for ParseErrors {}

/// A string that is not a Prometheus duration; the message is Prometheus' text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidDuration(pub String);

impl std::fmt::Display for InvalidDuration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for InvalidDuration {}
