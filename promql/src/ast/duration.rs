//! Duration expressions: ranges, subquery steps and offsets, which may be arithmetic over
//! literals, `step()`, `range()`, `min_of(a, b)` and `max_of(a, b)` (Prometheus' experimental
//! duration expressions). Values are seconds as `f64`, folded to milliseconds the way
//! Prometheus' `promql/durations.go` does.

use super::{NumberLiteral, PosRange};

/// The arithmetic operators allowed between durations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DurationOp {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    Pow,
}

impl DurationOp {
    /// The operator as written.
    pub fn name(self) -> &'static str {
        match self {
            DurationOp::Add => "+",
            DurationOp::Sub => "-",
            DurationOp::Mul => "*",
            DurationOp::Div => "/",
            DurationOp::Mod => "%",
            DurationOp::Pow => "^",
        }
    }
}

/// A duration, in seconds, possibly computed from the query's step and range.
#[derive(Debug, Clone, PartialEq)]
pub enum DurationExpr {
    /// A number (`90`, `1.5`) or duration literal (`5m`); a leading sign is folded in.
    Number(NumberLiteral),
    /// `step()`: the query step (0 for instant queries).
    Step(PosRange),
    /// `range()`: the query range, end minus start (0 for instant queries).
    Range(PosRange),
    /// `min_of(a, b)`.
    MinOf {
        lhs: Box<DurationExpr>,
        rhs: Box<DurationExpr>,
        pos: PosRange,
    },
    /// `max_of(a, b)`.
    MaxOf {
        lhs: Box<DurationExpr>,
        rhs: Box<DurationExpr>,
        pos: PosRange,
    },
    /// `-d` on anything but a bare literal; `start` is the position of the sign.
    Neg {
        expr: Box<DurationExpr>,
        start: usize,
    },
    /// `a op b`.
    Binary {
        op: DurationOp,
        lhs: Box<DurationExpr>,
        rhs: Box<DurationExpr>,
    },
    /// `(d)`.
    Paren {
        expr: Box<DurationExpr>,
        pos: PosRange,
    },
}

/// The query parameters a duration expression may depend on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DurationContext {
    /// The query step in milliseconds (0 for instant queries).
    pub step_ms: i64,
    /// The query range (end - start) in milliseconds (0 for instant queries).
    pub range_ms: i64,
}

/// Why a duration expression could not be folded; the message is Prometheus' text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DurationError {
    pub message: String,
    pub pos: PosRange,
}

impl std::fmt::Display for DurationError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for DurationError {}

impl DurationExpr {
    /// The byte range of the expression.
    pub fn pos(&self) -> PosRange {
        match self {
            DurationExpr::Number(n) => n.pos,
            DurationExpr::Step(p) | DurationExpr::Range(p) => *p,
            DurationExpr::MinOf { pos, .. } | DurationExpr::MaxOf { pos, .. } => *pos,
            DurationExpr::Neg { expr, start } => PosRange::new(*start, expr.pos().end),
            DurationExpr::Binary { lhs, rhs, .. } => lhs.pos().merge(rhs.pos()),
            DurationExpr::Paren { pos, .. } => *pos,
        }
    }

    /// Whether the value depends on `step()` or `range()`.
    pub fn needs_context(&self) -> bool {
        match self {
            DurationExpr::Number(_) => false,
            DurationExpr::Step(_) | DurationExpr::Range(_) => true,
            DurationExpr::MinOf { lhs, rhs, .. }
            | DurationExpr::MaxOf { lhs, rhs, .. }
            | DurationExpr::Binary { lhs, rhs, .. } => lhs.needs_context() || rhs.needs_context(),
            DurationExpr::Neg { expr, .. } | DurationExpr::Paren { expr, .. } => {
                expr.needs_context()
            }
        }
    }

    /// The bare literal, when the expression is nothing else.
    pub fn as_literal(&self) -> Option<&NumberLiteral> {
        match self {
            DurationExpr::Number(n) => Some(n),
            _ => None,
        }
    }

    /// The value in seconds.
    pub fn eval_seconds(&self, ctx: &DurationContext) -> Result<f64, DurationError> {
        Ok(match self {
            DurationExpr::Number(n) => n.val,
            DurationExpr::Step(_) => ctx.step_ms as f64 / 1000.0,
            DurationExpr::Range(_) => ctx.range_ms as f64 / 1000.0,
            DurationExpr::MinOf { lhs, rhs, .. } => {
                go_min(lhs.eval_seconds(ctx)?, rhs.eval_seconds(ctx)?)
            }
            DurationExpr::MaxOf { lhs, rhs, .. } => {
                go_max(lhs.eval_seconds(ctx)?, rhs.eval_seconds(ctx)?)
            }
            DurationExpr::Neg { expr, .. } => -expr.eval_seconds(ctx)?,
            DurationExpr::Paren { expr, .. } => expr.eval_seconds(ctx)?,
            DurationExpr::Binary { op, lhs, rhs } => {
                let (l, r) = (lhs.eval_seconds(ctx)?, rhs.eval_seconds(ctx)?);
                match op {
                    DurationOp::Add => l + r,
                    DurationOp::Sub => l - r,
                    DurationOp::Mul => l * r,
                    DurationOp::Div if r == 0.0 => return Err(self.error("division by zero")),
                    DurationOp::Div => l / r,
                    DurationOp::Mod if r == 0.0 => return Err(self.error("modulo by zero")),
                    DurationOp::Mod => l % r,
                    DurationOp::Pow => l.powf(r),
                }
            }
        })
    }

    /// The value in milliseconds. Ranges and steps pass `allow_negative = false` and fail on a
    /// value that is not positive; offsets pass `true`.
    ///
    /// A bare literal is rounded to the nanosecond and truncated to the millisecond (the path
    /// of Prometheus' parser for literals); anything else is truncated from seconds * 1000
    /// (the path of its duration visitor).
    pub fn to_ms(&self, ctx: &DurationContext, allow_negative: bool) -> Result<i64, DurationError> {
        if let DurationExpr::Number(n) = self {
            return Ok(literal_secs_to_ms(n.val));
        }
        let secs = self.eval_seconds(ctx)?;
        if secs <= 0.0 && !allow_negative {
            return Err(self.error("duration must be greater than 0"));
        }
        let ms = secs * 1000.0;
        if ms.is_nan() || ms >= i64::MAX as f64 || ms < i64::MIN as f64 {
            return Err(self.error("duration is out of range"));
        }
        Ok(ms as i64)
    }

    /// The value in milliseconds when it does not depend on the query.
    pub fn literal_ms(&self) -> Option<i64> {
        if self.needs_context() {
            return None;
        }
        self.to_ms(&DurationContext::default(), true).ok()
    }

    fn error(&self, message: &str) -> DurationError {
        DurationError {
            message: message.to_string(),
            pos: self.pos(),
        }
    }
}

/// Seconds of a literal to milliseconds: rounded to whole nanoseconds, then truncated.
pub(crate) fn literal_secs_to_ms(secs: f64) -> i64 {
    let nanos = (secs * 1e9).round();
    (nanos / 1e6).trunc() as i64
}

/// `math.Min`: NaN wins, then the smaller value.
fn go_min(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.min(b)
    }
}

/// `math.Max`: NaN wins, then the larger value.
fn go_max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.max(b)
    }
}
