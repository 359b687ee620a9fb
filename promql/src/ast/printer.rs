//! `Display` for expressions, following Prometheus' `printer.go`: the output parses back to
//! the same tree (up to redundant parentheses), and it is what error messages quote.

use std::fmt::{self, Display, Formatter, Write};

use super::duration::literal_secs_to_ms;
use super::quote::{go_quote, go_quote_bytes, is_legacy_label_name};
use super::{
    AggregateExpr, AtModifier, BinaryExpr, DurationExpr, Expr, METRIC_NAME, MatchOp,
    MatrixSelector, NumberLiteral, SubqueryExpr, UnaryOp, VectorMatchCardinality, VectorSelector,
};

/// Formats milliseconds as Prometheus' `model.Duration` does (`1h30m`, `90d`, `0s`); years and
/// weeks only when they divide the value exactly.
pub fn format_duration_ms(ms: i64) -> String {
    if ms == 0 {
        return "0s".to_string();
    }
    let mut rest = ms;
    let mut out = String::new();
    let units: [(&str, i64, bool); 7] = [
        ("y", 1000 * 60 * 60 * 24 * 365, true),
        ("w", 1000 * 60 * 60 * 24 * 7, true),
        ("d", 1000 * 60 * 60 * 24, false),
        ("h", 1000 * 60 * 60, false),
        ("m", 1000 * 60, false),
        ("s", 1000, false),
        ("ms", 1, false),
    ];
    for (unit, mult, exact) in units {
        if exact && rest % mult != 0 {
            continue;
        }
        let v = rest / mult;
        if v > 0 {
            let _ = write!(out, "{v}{unit}");
            rest -= v * mult;
        }
    }
    out
}

/// Formats a float as Go's `%v` (shortest `%g`: `0`, `1.5`, `1e+06`, `+Inf`, `NaN`).
pub fn format_go_float(v: f64) -> String {
    if v.is_nan() {
        return "NaN".to_string();
    }
    if v.is_infinite() {
        return if v > 0.0 { "+Inf" } else { "-Inf" }.to_string();
    }
    if v == 0.0 {
        return if v.is_sign_negative() { "-0" } else { "0" }.to_string();
    }
    // Rust's `{:e}` gives the shortest round-trip digits: "-1.2345e-7".
    let sci = format!("{v:e}");
    let (mantissa, exp) = match sci.split_once('e') {
        Some((m, e)) => (m.to_string(), e.parse::<i32>().unwrap_or(0)),
        None => (sci.clone(), 0),
    };
    if !(-4..6).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        return format!("{mantissa}e{sign}{:02}", exp.abs());
    }
    format_float_plain(v)
}

/// Formats a float as Go's `strconv.FormatFloat(v, 'f', -1, 64)`.
pub(crate) fn format_float_plain(v: f64) -> String {
    crate::format::float(v)
}

fn write_labels(f: &mut Formatter<'_>, labels: &[String]) -> fmt::Result {
    for (i, l) in labels.iter().enumerate() {
        if i > 0 {
            f.write_str(", ")?;
        }
        if is_legacy_label_name(l) {
            f.write_str(l)?;
        } else {
            f.write_str(&go_quote(l))?;
        }
    }
    Ok(())
}

impl Display for NumberLiteral {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        if self.duration {
            if self.val < 0.0 {
                return write!(f, "-{}", format_duration_ms(literal_secs_to_ms(-self.val)));
            }
            return f.write_str(&format_duration_ms(literal_secs_to_ms(self.val)));
        }
        f.write_str(&format_float_plain(self.val))
    }
}

impl Display for DurationExpr {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            DurationExpr::Number(n) => n.fmt(f),
            DurationExpr::Step(_) => f.write_str("step()"),
            DurationExpr::Range(_) => f.write_str("range()"),
            DurationExpr::MinOf { lhs, rhs, .. } => write!(f, "min_of({lhs}, {rhs})"),
            DurationExpr::MaxOf { lhs, rhs, .. } => write!(f, "max_of({lhs}, {rhs})"),
            DurationExpr::Neg { expr, .. } => write!(f, "-{expr}"),
            DurationExpr::Binary { op, lhs, rhs } => write!(f, "{lhs} {} {rhs}", op.name()),
            DurationExpr::Paren { expr, .. } => write!(f, "({expr})"),
        }
    }
}

/// A range or step: a bare literal prints as a model duration, anything else as written.
fn write_range(f: &mut Formatter<'_>, d: &DurationExpr) -> fmt::Result {
    match d {
        DurationExpr::Number(n) => f.write_str(&format_duration_ms(literal_secs_to_ms(n.val))),
        other => other.fmt(f),
    }
}

fn write_offset(f: &mut Formatter<'_>, offset: &Option<DurationExpr>) -> fmt::Result {
    match offset {
        None => Ok(()),
        Some(DurationExpr::Number(n)) => {
            let ms = literal_secs_to_ms(n.val);
            match ms.cmp(&0) {
                std::cmp::Ordering::Greater => write!(f, " offset {}", format_duration_ms(ms)),
                std::cmp::Ordering::Less => write!(f, " offset -{}", format_duration_ms(-ms)),
                std::cmp::Ordering::Equal => Ok(()),
            }
        }
        Some(other) => write!(f, " offset {other}"),
    }
}

fn write_at(f: &mut Formatter<'_>, at: &Option<AtModifier>) -> fmt::Result {
    match at {
        None => Ok(()),
        Some(AtModifier::Timestamp(ms)) => write!(f, " @ {:.3}", *ms as f64 / 1000.0),
        Some(AtModifier::Start) => f.write_str(" @ start()"),
        Some(AtModifier::End) => f.write_str(" @ end()"),
    }
}

/// The selector without its modifiers: `name{matchers}`.
fn write_selector_core(f: &mut Formatter<'_>, vs: &VectorSelector) -> fmt::Result {
    let mut labels: Vec<String> = vs
        .matchers
        .iter()
        .filter(|m| {
            !(m.name == METRIC_NAME
                && m.op == MatchOp::Equal
                && m.value == vs.name
                && !m.value.is_empty())
        })
        .map(|m| m.to_string())
        .collect();
    f.write_str(&vs.name)?;
    if !labels.is_empty() {
        labels.sort();
        write!(f, "{{{}}}", labels.join(","))?;
    }
    Ok(())
}

impl Display for VectorSelector {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write_selector_core(f, self)?;
        write_at(f, &self.at)?;
        if self.anchored {
            f.write_str(" anchored")?;
        } else if self.smoothed {
            f.write_str(" smoothed")?;
        }
        write_offset(f, &self.offset)
    }
}

impl Display for MatrixSelector {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write_selector_core(f, &self.vector)?;
        f.write_str("[")?;
        write_range(f, &self.range)?;
        f.write_str("]")?;
        if self.vector.anchored {
            f.write_str(" anchored")?;
        } else if self.vector.smoothed {
            f.write_str(" smoothed")?;
        }
        write_at(f, &self.vector.at)?;
        write_offset(f, &self.vector.offset)
    }
}

impl Display for SubqueryExpr {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(f, "{}[", self.expr)?;
        write_range(f, &self.range)?;
        f.write_str(":")?;
        match &self.step {
            Some(DurationExpr::Number(n)) if literal_secs_to_ms(n.val) == 0 => {}
            Some(step) => write_range(f, step)?,
            None => {}
        }
        f.write_str("]")?;
        write_at(f, &self.at)?;
        write_offset(f, &self.offset)
    }
}

impl Display for AggregateExpr {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        f.write_str(self.op.name())?;
        if self.without {
            f.write_str(" without (")?;
            write_labels(f, &self.grouping)?;
            f.write_str(") ")?;
        } else if !self.grouping.is_empty() {
            f.write_str(" by (")?;
            write_labels(f, &self.grouping)?;
            f.write_str(") ")?;
        }
        f.write_str("(")?;
        if let Some(p) = &self.param {
            write!(f, "{p}, ")?;
        }
        write!(f, "{})", self.expr)
    }
}

impl Display for BinaryExpr {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.lhs, self.op.name())?;
        if self.return_bool {
            f.write_str(" bool")?;
        }
        if let Some(vm) = &self.matching {
            let grouped = matches!(
                vm.card,
                VectorMatchCardinality::ManyToOne | VectorMatchCardinality::OneToMany
            );
            if !vm.matching_labels.is_empty() || vm.on || grouped {
                f.write_str(if vm.on { " on (" } else { " ignoring (" })?;
                write_labels(f, &vm.matching_labels)?;
                f.write_str(")")?;
            }
            if grouped {
                let side = if vm.card == VectorMatchCardinality::ManyToOne {
                    "left"
                } else {
                    "right"
                };
                write!(f, " group_{side} (")?;
                write_labels(f, &vm.include)?;
                f.write_str(")")?;
            }
            match (vm.fill.lhs, vm.fill.rhs) {
                (Some(l), Some(r)) if l.to_bits() == r.to_bits() => {
                    write!(f, " fill ({})", format_go_float(l))?
                }
                (l, r) => {
                    if let Some(l) = l {
                        write!(f, " fill_left ({})", format_go_float(l))?;
                    }
                    if let Some(r) = r {
                        write!(f, " fill_right ({})", format_go_float(r))?;
                    }
                }
            }
        }
        write!(f, " {}", self.rhs)
    }
}

impl Display for Expr {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            Expr::Aggregate(a) => a.fmt(f),
            Expr::Binary(b) => b.fmt(f),
            Expr::Call(c) => {
                write!(f, "{}(", c.func.name)?;
                for (i, a) in c.args.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    a.fmt(f)?;
                }
                f.write_str(")")
            }
            Expr::MatrixSelector(m) => m.fmt(f),
            Expr::Number(n) => n.fmt(f),
            Expr::Paren(p) => write!(f, "({})", p.expr),
            Expr::String(s) => match &s.invalid_utf8 {
                Some(bytes) => f.write_str(&go_quote_bytes(bytes)),
                None => f.write_str(&go_quote(&s.val)),
            },
            Expr::Subquery(s) => s.fmt(f),
            Expr::Unary(u) => {
                let op = if u.op == UnaryOp::Sub { "-" } else { "+" };
                write!(f, "{op}{}", u.expr)
            }
            Expr::VectorSelector(v) => v.fmt(f),
        }
    }
}
