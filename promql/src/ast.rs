//! The PromQL syntax tree, as [`crate::parser::parse`] builds it.
//!
//! The node set mirrors Prometheus' `promql/parser/ast.go`: literals, vector and matrix
//! selectors, subqueries, parentheses, unary and binary operators (with their vector matching,
//! `bool`, `group_left`/`group_right` and fill modifiers), aggregations and function calls.
//! Every node carries the byte range it was parsed from, so that errors and annotations can
//! point at the query text the way Prometheus does (`line:col`, see [`PosRange::start_pos_input`]).
//!
//! Durations (ranges, subquery steps, offsets) stay [`DurationExpr`] trees because they may
//! depend on the query's step and range (`[step()*2]`, `offset min_of(range(), 5m)`); a plain
//! literal folds without context, the others with a [`DurationContext`].
//!
//! `Display` prints an expression the way Prometheus' printer does (`printer.go`), which error
//! messages and the `@`-modifier test rewrites rely on.

#[path = "ast/duration.rs"]
mod duration;
#[path = "ast/functions.rs"]
mod functions;
#[path = "ast/matcher.rs"]
mod matcher;
#[path = "ast/ops.rs"]
mod ops;
#[path = "ast/printer.rs"]
mod printer;
#[path = "ast/quote.rs"]
mod quote;

pub use duration::{DurationContext, DurationError, DurationExpr, DurationOp};
pub use functions::{ANCHORED_SAFE, FUNCTIONS, Function, SMOOTHED_SAFE, lookup_function};
pub use matcher::{MatchOp, Matcher, RegexError};
pub use ops::{AggregateOp, BinaryOp, FillValues, UnaryOp, VectorMatchCardinality, VectorMatching};
pub use printer::{format_duration_ms, format_go_float};
pub use quote::{go_quote, go_quote_bytes, is_legacy_label_name};

/// The name of the label that holds the metric name.
pub const METRIC_NAME: &str = "__name__";

/// A byte range `[start, end)` into the query text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PosRange {
    /// First byte of the node.
    pub start: usize,
    /// One past the last byte of the node.
    pub end: usize,
}

impl PosRange {
    /// A range from `start` to `end`.
    pub fn new(start: usize, end: usize) -> Self {
        Self { start, end }
    }

    /// The smallest range that covers both `self` and `other`.
    pub fn merge(self, other: PosRange) -> PosRange {
        PosRange::new(self.start, other.end)
    }

    /// The start of the range as Prometheus prints it: `line:col`, both 1-based, the column
    /// counted in bytes from the last line break. An empty query gives `unknown position`, a
    /// start past its end `invalid position`.
    pub fn start_pos_input(&self, query: &str) -> String {
        if query.is_empty() {
            return "unknown position".to_string();
        }
        if self.start > query.len() {
            return "invalid position".to_string();
        }
        let before = &query.as_bytes()[..self.start];
        let line = 1 + before.iter().filter(|&&b| b == b'\n').count();
        let last_break = before.iter().rposition(|&b| b == b'\n');
        let col = match last_break {
            Some(i) => self.start - i,
            None => self.start + 1,
        };
        format!("{line}:{col}")
    }
}

/// The position suffix Prometheus appends to annotations: `(line:col)`.
pub fn annotation_position(query: &str, pos: PosRange) -> String {
    format!("({})", pos.start_pos_input(query))
}

/// The type an expression evaluates to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueType {
    /// No value (only used internally by type checks).
    None,
    /// A single float.
    Scalar,
    /// An instant vector.
    Vector,
    /// A range vector ("matrix").
    Matrix,
    /// A string.
    String,
}

impl ValueType {
    /// The name Prometheus uses in its code (`vector`, `matrix`, ...).
    pub fn name(self) -> &'static str {
        match self {
            ValueType::None => "none",
            ValueType::Scalar => "scalar",
            ValueType::Vector => "vector",
            ValueType::Matrix => "matrix",
            ValueType::String => "string",
        }
    }

    /// The name used in documentation and error messages (`instant vector`, `range vector`).
    pub fn documented(self) -> &'static str {
        match self {
            ValueType::Vector => "instant vector",
            ValueType::Matrix => "range vector",
            other => other.name(),
        }
    }
}

impl std::fmt::Display for ValueType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A PromQL expression.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// `sum by (job) (x)`, `topk(3, x)`, ...
    Aggregate(AggregateExpr),
    /// `a + on(job) b`, `x > bool 1`, ...
    Binary(BinaryExpr),
    /// `rate(x[5m])`, `time()`, ...
    Call(Call),
    /// `x[5m]`.
    MatrixSelector(MatrixSelector),
    /// `1`, `-Inf`, `5m` (a duration literal in seconds).
    Number(NumberLiteral),
    /// `(expr)`.
    Paren(ParenExpr),
    /// `"text"`.
    String(StringLiteral),
    /// `expr[range:step]`.
    Subquery(SubqueryExpr),
    /// `-x`, `+x`.
    Unary(UnaryExpr),
    /// `x{a="b"}`.
    VectorSelector(VectorSelector),
}

impl Expr {
    /// The type this expression evaluates to (Prometheus' `Expr.Type()`).
    pub fn value_type(&self) -> ValueType {
        match self {
            Expr::Aggregate(_) | Expr::VectorSelector(_) => ValueType::Vector,
            Expr::Binary(b) => {
                if b.lhs.value_type() == ValueType::Scalar
                    && b.rhs.value_type() == ValueType::Scalar
                {
                    ValueType::Scalar
                } else {
                    ValueType::Vector
                }
            }
            Expr::Call(c) => c.func.return_type,
            Expr::MatrixSelector(_) | Expr::Subquery(_) => ValueType::Matrix,
            Expr::Number(_) => ValueType::Scalar,
            Expr::Paren(p) => p.expr.value_type(),
            Expr::String(_) => ValueType::String,
            Expr::Unary(u) => u.expr.value_type(),
        }
    }

    /// The byte range of the expression in the query text.
    pub fn pos(&self) -> PosRange {
        match self {
            Expr::Aggregate(a) => a.pos,
            Expr::Binary(b) => b.lhs.pos().merge(b.rhs.pos()),
            Expr::Call(c) => c.pos,
            Expr::MatrixSelector(m) => PosRange::new(m.vector.pos.start, m.end),
            Expr::Number(n) => n.pos,
            Expr::Paren(p) => p.pos,
            Expr::String(s) => s.pos,
            Expr::Subquery(s) => PosRange::new(s.expr.pos().start, s.end),
            Expr::Unary(u) => PosRange::new(u.start, u.expr.pos().end),
            Expr::VectorSelector(v) => v.pos,
        }
    }

    /// The direct children of this node, in source order.
    pub fn children(&self) -> Vec<&Expr> {
        match self {
            Expr::Aggregate(a) => match &a.param {
                Some(p) => vec![&a.expr, p],
                None => vec![&a.expr],
            },
            Expr::Binary(b) => vec![&b.lhs, &b.rhs],
            Expr::Call(c) => c.args.iter().collect(),
            Expr::Paren(p) => vec![&p.expr],
            Expr::Subquery(s) => vec![&s.expr],
            Expr::Unary(u) => vec![&u.expr],
            Expr::MatrixSelector(_)
            | Expr::Number(_)
            | Expr::String(_)
            | Expr::VectorSelector(_) => Vec::new(),
        }
    }

    /// Strips any number of enclosing parentheses.
    pub fn unparen(&self) -> &Expr {
        match self {
            Expr::Paren(p) => p.expr.unparen(),
            other => other,
        }
    }
}

/// `op [by|without (labels)] ([param,] expr)`.
#[derive(Debug, Clone, PartialEq)]
pub struct AggregateExpr {
    pub op: AggregateOp,
    /// The aggregated vector expression.
    pub expr: Box<Expr>,
    /// The parameter of `topk`, `bottomk`, `quantile`, `count_values`, `limitk`, `limit_ratio`.
    pub param: Option<Box<Expr>>,
    /// The `by`/`without` labels (empty when absent).
    pub grouping: Vec<String>,
    /// `without` rather than `by`.
    pub without: bool,
    pub pos: PosRange,
}

/// `lhs op [bool] [on|ignoring(...)] [group_left|group_right(...)] [fill...] rhs`.
#[derive(Debug, Clone, PartialEq)]
pub struct BinaryExpr {
    pub op: BinaryOp,
    pub lhs: Box<Expr>,
    pub rhs: Box<Expr>,
    /// `bool` on a comparison: return 0/1 instead of filtering.
    pub return_bool: bool,
    /// Present only when both sides are instant vectors (as Prometheus leaves it after its
    /// type check).
    pub matching: Option<VectorMatching>,
}

/// A function call; `func` is an entry of [`FUNCTIONS`].
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    pub func: &'static Function,
    pub args: Vec<Expr>,
    pub pos: PosRange,
}

/// A number; `duration` marks a literal written as a duration (`5m`, value in seconds).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NumberLiteral {
    pub val: f64,
    pub duration: bool,
    pub pos: PosRange,
}

/// A string literal, unquoted.
#[derive(Debug, Clone, PartialEq)]
pub struct StringLiteral {
    /// The value; invalid UTF-8 (from `\x` or octal escapes) is replaced by U+FFFD here.
    pub val: String,
    /// The exact bytes when the escapes produced invalid UTF-8 (`"a\xc5z"`), so that callers
    /// can reject or print them as Prometheus does (see [`go_quote_bytes`]).
    pub invalid_utf8: Option<Vec<u8>>,
    pub pos: PosRange,
}

/// `(expr)`.
#[derive(Debug, Clone, PartialEq)]
pub struct ParenExpr {
    pub expr: Box<Expr>,
    pub pos: PosRange,
}

/// `-expr` or `+expr`; `start` is the position of the operator.
#[derive(Debug, Clone, PartialEq)]
pub struct UnaryExpr {
    pub op: UnaryOp,
    pub expr: Box<Expr>,
    pub start: usize,
}

/// The `@` modifier.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AtModifier {
    /// `@ <seconds>`, stored in milliseconds (rounded as Prometheus does).
    Timestamp(i64),
    /// `@ start()`.
    Start,
    /// `@ end()`.
    End,
}

/// An instant vector selector.
#[derive(Debug, Clone, PartialEq)]
pub struct VectorSelector {
    /// The metric name written before the braces (empty when absent; a name inside the braces,
    /// `{"foo"}`, only appears as a matcher).
    pub name: String,
    /// All matchers, including `__name__="<name>"` for a name before the braces (last).
    pub matchers: Vec<Matcher>,
    /// `offset <duration>`; negative offsets are allowed.
    pub offset: Option<DurationExpr>,
    pub at: Option<AtModifier>,
    /// The `anchored` modifier (extended range selectors).
    pub anchored: bool,
    /// The `smoothed` modifier (extended range selectors).
    pub smoothed: bool,
    /// Set on the second argument of `info()`, which may match the empty string.
    pub bypass_empty_matcher_check: bool,
    pub pos: PosRange,
}

impl VectorSelector {
    /// The offset in milliseconds when it does not depend on the query (0 when absent).
    pub fn literal_offset_ms(&self) -> Option<i64> {
        match &self.offset {
            None => Some(0),
            Some(d) => d.literal_ms(),
        }
    }
}

/// `selector[range]`; the `offset`, `@`, `anchored`, `smoothed` modifiers live on the inner
/// selector, as in Prometheus.
#[derive(Debug, Clone, PartialEq)]
pub struct MatrixSelector {
    pub vector: VectorSelector,
    pub range: DurationExpr,
    /// One past the last byte of the selector including its modifiers.
    pub end: usize,
}

/// `expr[range:step]` with optional modifiers.
#[derive(Debug, Clone, PartialEq)]
pub struct SubqueryExpr {
    pub expr: Box<Expr>,
    pub range: DurationExpr,
    /// The step; `None` means the engine's default resolution.
    pub step: Option<DurationExpr>,
    pub offset: Option<DurationExpr>,
    pub at: Option<AtModifier>,
    /// One past the last byte of the subquery including its modifiers.
    pub end: usize,
}
