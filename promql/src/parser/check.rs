//! The checks Prometheus runs on a syntactically valid tree (`checkAST`): operand types,
//! argument counts and types, vector matching rules, selectors that would select everything.
//! Also the functions that accept `anchored`/`smoothed` range selectors, which Prometheus
//! checks when it executes the query.

use super::errors::ParseError;
use crate::ast::{
    ANCHORED_SAFE, AggregateOp, BinaryExpr, Call, Expr, METRIC_NAME, PosRange, SMOOTHED_SAFE,
    ValueType, VectorMatchCardinality, VectorSelector, go_quote,
};

pub(crate) struct Checker<'a> {
    query: &'a str,
    pub(crate) errors: Vec<ParseError>,
}

impl<'a> Checker<'a> {
    pub(crate) fn new(query: &'a str) -> Self {
        Self {
            query,
            errors: Vec::new(),
        }
    }

    fn error(&mut self, pos: PosRange, message: impl Into<String>) {
        self.errors.push(ParseError::new(
            self.query,
            pos.start,
            pos.end,
            message.into(),
        ));
    }

    fn expect_type(&mut self, e: &mut Expr, want: ValueType, context: &str) {
        let got = self.check(e);
        if got != want {
            let msg = format!(
                "expected type {} in {context}, got {}",
                want.documented(),
                got.documented()
            );
            self.error(e.pos(), msg);
        }
    }

    /// Checks `e` and its children; returns its type.
    pub(crate) fn check(&mut self, e: &mut Expr) -> ValueType {
        let typ = e.value_type();
        let pos = e.pos();
        match e {
            Expr::Aggregate(a) => {
                self.expect_type(&mut a.expr, ValueType::Vector, "aggregation expression");
                if let Some(p) = a.param.as_mut() {
                    match a.op {
                        AggregateOp::CountValues => {
                            self.expect_type(p, ValueType::String, "aggregation parameter")
                        }
                        _ => self.expect_type(p, ValueType::Scalar, "aggregation parameter"),
                    }
                }
            }
            Expr::Binary(b) => self.check_binary(b, pos),
            Expr::Call(c) => self.check_call(c, pos),
            Expr::Paren(p) => {
                self.check(&mut p.expr);
            }
            Expr::Unary(u) => {
                let t = self.check(&mut u.expr);
                if t != ValueType::Scalar && t != ValueType::Vector {
                    let msg = format!(
                        "unary expression only allowed on expressions of type scalar or instant vector, got {}",
                        go_quote(t.documented())
                    );
                    self.error(pos, msg);
                }
            }
            Expr::Subquery(s) => {
                let t = self.check(&mut s.expr);
                if t != ValueType::Vector {
                    let msg =
                        format!("subquery is only allowed on instant vector, got {t} instead");
                    self.error(pos, msg);
                }
            }
            Expr::MatrixSelector(m) => self.check_selector(&m.vector),
            Expr::VectorSelector(vs) => self.check_selector(vs),
            Expr::Number(_) | Expr::String(_) => {}
        }
        typ
    }

    /// The operator's byte range (between the operands, trimmed), as Prometheus reports it.
    fn op_range(&self, b: &BinaryExpr) -> PosRange {
        let bytes = self.query.as_bytes();
        let is_space = |i: usize| bytes.get(i).is_some_and(|c| c.is_ascii_whitespace());
        let mut start = b.lhs.pos().end;
        while is_space(start) {
            start += 1;
        }
        let mut end = b.rhs.pos().start.saturating_sub(1);
        while end > 0 && is_space(end) {
            end -= 1;
        }
        PosRange::new(start, end)
    }

    fn check_binary(&mut self, b: &mut BinaryExpr, pos: PosRange) {
        let lt = self.check(&mut b.lhs);
        let rt = self.check(&mut b.rhs);
        if b.return_bool && !b.op.is_comparison() {
            let r = self.op_range(b);
            self.error(r, "bool modifier can only be used on comparison operators");
        }
        if b.op.is_comparison()
            && !b.return_bool
            && b.rhs.value_type() == ValueType::Scalar
            && b.lhs.value_type() == ValueType::Scalar
        {
            let r = self.op_range(b);
            self.error(r, "comparisons between scalars must use BOOL modifier");
        }
        let mut matching = b.matching.take().unwrap_or_default();
        if b.op.is_set_operator() && matching.card == VectorMatchCardinality::OneToOne {
            matching.card = VectorMatchCardinality::ManyToMany;
        }
        if matching.on {
            for l1 in &matching.matching_labels {
                if matching.include.contains(l1) {
                    let r = self.op_range(b);
                    let msg = format!(
                        "label {} must not occur in ON and GROUP clause at once",
                        go_quote(l1)
                    );
                    self.error(r, msg);
                }
            }
        }
        if lt != ValueType::Scalar && lt != ValueType::Vector {
            self.error(
                b.lhs.pos(),
                "binary expression must contain only scalar and instant vector types",
            );
        }
        if rt != ValueType::Scalar && rt != ValueType::Vector {
            self.error(
                b.rhs.pos(),
                "binary expression must contain only scalar and instant vector types",
            );
        }
        if lt != ValueType::Vector || rt != ValueType::Vector {
            if !matching.matching_labels.is_empty() {
                self.error(pos, "vector matching only allowed between instant vectors");
            }
            if matching.fill.is_set() {
                self.error(
                    pos,
                    "filling in missing series only allowed between instant vectors",
                );
            }
            b.matching = None;
        } else {
            if b.op.is_set_operator() {
                if matches!(
                    matching.card,
                    VectorMatchCardinality::OneToMany | VectorMatchCardinality::ManyToOne
                ) {
                    let msg = format!(
                        "no grouping allowed for {} operation",
                        go_quote(b.op.name())
                    );
                    self.error(pos, msg);
                }
                if matching.card != VectorMatchCardinality::ManyToMany {
                    self.error(pos, "set operations must always be many-to-many");
                }
                if matching.fill.is_set() {
                    self.error(
                        pos,
                        "filling in missing series not allowed for set operators",
                    );
                }
            }
            b.matching = Some(matching);
        }
        if (lt == ValueType::Scalar || rt == ValueType::Scalar) && b.op.is_set_operator() {
            let msg = format!(
                "set operator {} not allowed in binary scalar expression",
                go_quote(b.op.name())
            );
            self.error(pos, msg);
        }
    }

    fn check_call(&mut self, c: &mut Call, pos: PosRange) {
        let func = c.func;
        let nargs = func.arg_types.len();
        let name = go_quote(func.name);
        if func.variadic == 0 {
            if nargs != c.args.len() {
                let msg = format!(
                    "expected {nargs} argument(s) in call to {name}, got {}",
                    c.args.len()
                );
                self.error(pos, msg);
            }
        } else {
            let na = nargs.saturating_sub(1);
            if na > c.args.len() {
                let msg = format!(
                    "expected at least {na} argument(s) in call to {name}, got {}",
                    c.args.len()
                );
                self.error(pos, msg);
            } else if func.variadic > 0 {
                let max = na + func.variadic as usize;
                if max < c.args.len() {
                    let msg = format!(
                        "expected at most {max} argument(s) in call to {name}, got {}",
                        c.args.len()
                    );
                    self.error(pos, msg);
                }
            }
        }
        if func.name == "info" && c.args.len() > 1 {
            let second_type = c.args[1].value_type();
            if second_type != ValueType::Vector {
                let msg = format!(
                    "expected type {} in call to function {name}, got {}",
                    ValueType::Vector.documented(),
                    second_type.documented()
                );
                self.error(pos, msg);
            }
            let arg_pos = c.args[1].pos();
            match &mut c.args[1] {
                Expr::VectorSelector(vs) if !vs.name.is_empty() => self.error(
                    arg_pos,
                    "expected label selectors only, got vector selector instead",
                ),
                Expr::VectorSelector(vs) => vs.bypass_empty_matcher_check = true,
                _ => self.error(arg_pos, "expected label selectors only"),
            }
        }
        for (i, arg) in c.args.iter_mut().enumerate() {
            let idx = if i >= nargs {
                if func.variadic == 0 {
                    break;
                }
                nargs.saturating_sub(1)
            } else {
                i
            };
            let Some(&want) = func.arg_types.get(idx) else {
                break;
            };
            let got = self.check(arg);
            if got != want {
                let msg = format!(
                    "expected type {} in call to function {name}, got {}",
                    want.documented(),
                    got.documented()
                );
                self.error(arg.pos(), msg);
            }
        }
    }

    fn check_selector(&mut self, vs: &VectorSelector) {
        if !vs.name.is_empty() {
            let before_name = &vs.matchers[..vs.matchers.len().saturating_sub(1)];
            for m in before_name {
                if m.name == METRIC_NAME {
                    let msg = format!(
                        "metric name must not be set twice: {} or {}",
                        go_quote(&vs.name),
                        go_quote(&m.value)
                    );
                    self.error(vs.pos, msg);
                }
            }
            return;
        }
        if !vs.bypass_empty_matcher_check && vs.matchers.iter().all(|m| m.matches("")) {
            self.error(
                vs.pos,
                "vector selector must contain at least one non-empty matcher",
            );
        }
    }

    /// Rejects `anchored`/`smoothed` range selectors passed to functions that do not support
    /// them (reported as Prometheus' engine reports it).
    pub(crate) fn check_extended_ranges(&mut self, e: &Expr) {
        if let Expr::Call(c) = e {
            for arg in &c.args {
                let Expr::MatrixSelector(m) = arg.unparen() else {
                    continue;
                };
                let (which, allowed) = if m.vector.anchored {
                    ("anchored", ANCHORED_SAFE)
                } else if m.vector.smoothed {
                    ("smoothed", SMOOTHED_SAFE)
                } else {
                    continue;
                };
                if !allowed.contains(&c.func.name) {
                    let msg = format!(
                        "{which} modifier can only be used with: {} - not with {}",
                        allowed.join(", "),
                        c.func.name
                    );
                    self.errors
                        .push(ParseError::execution(self.query, c.pos, msg));
                    return;
                }
            }
        }
        for child in e.children() {
            self.check_extended_ranges(child);
            if !self.errors.is_empty() {
                return;
            }
        }
    }
}
