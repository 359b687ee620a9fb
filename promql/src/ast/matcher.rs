//! Label matchers (`name="v"`, `!=`, `=~`, `!~`). Regex matchers are anchored the way
//! Prometheus anchors them (`^(?s:<re>)$`), so `.` also matches a newline and the regex must
//! match the whole value.

use regex::Regex;

use super::quote::{go_quote, is_legacy_label_name};

/// The matching operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatchOp {
    Equal,
    NotEqual,
    Regex,
    NotRegex,
}

impl MatchOp {
    /// The operator as written.
    pub fn name(self) -> &'static str {
        match self {
            MatchOp::Equal => "=",
            MatchOp::NotEqual => "!=",
            MatchOp::Regex => "=~",
            MatchOp::NotRegex => "!~",
        }
    }
}

/// A regex that does not compile; the message follows Go's `error parsing regexp: ...`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegexError(pub String);

impl std::fmt::Display for RegexError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for RegexError {}

/// One label matcher.
#[derive(Debug, Clone)]
pub struct Matcher {
    pub name: String,
    pub op: MatchOp,
    pub value: String,
    /// The compiled, anchored regex of `=~` and `!~` matchers.
    re: Option<Regex>,
}

impl PartialEq for Matcher {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name && self.op == other.op && self.value == other.value
    }
}

impl Matcher {
    /// A matcher; compiles the regex of `=~` and `!~`.
    pub fn new(op: MatchOp, name: &str, value: &str) -> Result<Self, RegexError> {
        let re = match op {
            MatchOp::Regex | MatchOp::NotRegex => Some(compile_anchored(value)?),
            MatchOp::Equal | MatchOp::NotEqual => None,
        };
        Ok(Self {
            name: name.to_string(),
            op,
            value: value.to_string(),
            re,
        })
    }

    /// An equality matcher (never fails).
    pub fn equal(name: &str, value: &str) -> Self {
        Self {
            name: name.to_string(),
            op: MatchOp::Equal,
            value: value.to_string(),
            re: None,
        }
    }

    /// Whether a label value satisfies the matcher (an absent label has the value "").
    pub fn matches(&self, s: &str) -> bool {
        match (self.op, &self.re) {
            (MatchOp::Equal, _) => s == self.value,
            (MatchOp::NotEqual, _) => s != self.value,
            (MatchOp::Regex, Some(re)) => re.is_match(s),
            (MatchOp::NotRegex, Some(re)) => !re.is_match(s),
            // Regex matchers are only built by `new`, which always compiles them.
            (MatchOp::Regex | MatchOp::NotRegex, None) => false,
        }
    }

    /// The compiled regex of a regex matcher.
    pub fn regex(&self) -> Option<&Regex> {
        self.re.as_ref()
    }
}

impl std::fmt::Display for Matcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if is_legacy_label_name(&self.name) {
            f.write_str(&self.name)?;
        } else {
            f.write_str(&go_quote(&self.name))?;
        }
        f.write_str(self.op.name())?;
        f.write_str(&go_quote(&self.value))
    }
}

/// Compiles `^(?s:<value>)$`.
fn compile_anchored(value: &str) -> Result<Regex, RegexError> {
    let anchored = format!("^(?s:{value})$");
    Regex::new(&anchored).map_err(|e| {
        let detail = match &e {
            regex::Error::Syntax(s) => s
                .lines()
                .rev()
                .find(|l| l.starts_with("error: "))
                .map(|l| l.trim_start_matches("error: ").to_string())
                .unwrap_or_else(|| s.clone()),
            other => other.to_string(),
        };
        RegexError(format!("error parsing regexp: {detail}: `{anchored}`"))
    })
}
