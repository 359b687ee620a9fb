//! Expressions: precedence climbing over binary operators, unary signs, the postfix
//! modifiers, and the primary forms (literals, selectors, calls, aggregations, parentheses).

use super::number::{parse_duration, parse_number, unquote};
use super::{PResult, Parser, Stop};
use crate::ast::{
    AggregateExpr, AggregateOp, BinaryExpr, BinaryOp, Call, Expr, NumberLiteral, ParenExpr,
    PosRange, StringLiteral, UnaryExpr, UnaryOp, lookup_function,
};
use crate::lexer::{Token, TokenKind};

/// Binding strength of `^`, which a unary operand may contain.
const POW_PRECEDENCE: u8 = 6;

pub(crate) fn binary_op(kind: TokenKind) -> Option<BinaryOp> {
    use TokenKind as T;
    Some(match kind {
        T::Add => BinaryOp::Add,
        T::Sub => BinaryOp::Sub,
        T::Mul => BinaryOp::Mul,
        T::Div => BinaryOp::Div,
        T::Mod => BinaryOp::Mod,
        T::Pow => BinaryOp::Pow,
        T::Atan2 => BinaryOp::Atan2,
        T::Eqlc => BinaryOp::Eql,
        T::Neq => BinaryOp::Neq,
        T::Lss => BinaryOp::Lss,
        T::Lte => BinaryOp::Lte,
        T::Gtr => BinaryOp::Gtr,
        T::Gte => BinaryOp::Gte,
        T::TrimUpper => BinaryOp::TrimUpper,
        T::TrimLower => BinaryOp::TrimLower,
        T::Land => BinaryOp::And,
        T::Lor => BinaryOp::Or,
        T::Lunless => BinaryOp::Unless,
        _ => return None,
    })
}

fn aggregate_op(kind: TokenKind) -> Option<AggregateOp> {
    use TokenKind as T;
    Some(match kind {
        T::Avg => AggregateOp::Avg,
        T::Bottomk => AggregateOp::Bottomk,
        T::Count => AggregateOp::Count,
        T::CountValues => AggregateOp::CountValues,
        T::Group => AggregateOp::Group,
        T::Limitk => AggregateOp::Limitk,
        T::LimitRatio => AggregateOp::LimitRatio,
        T::Max => AggregateOp::Max,
        T::Min => AggregateOp::Min,
        T::Quantile => AggregateOp::Quantile,
        T::Stddev => AggregateOp::Stddev,
        T::Stdvar => AggregateOp::Stdvar,
        T::Sum => AggregateOp::Sum,
        T::Topk => AggregateOp::Topk,
        _ => return None,
    })
}

/// Keywords that name a function when followed by `(`.
fn keyword_function(t: &Token) -> Option<String> {
    use TokenKind as T;
    match t.kind {
        // Prometheus looks these up by their text: `START()` is an unknown function.
        T::Start | T::End => Some(t.val.clone()),
        T::Step | T::Range | T::MinOf | T::MaxOf => Some(t.val.to_ascii_lowercase()),
        _ => None,
    }
}

impl Parser<'_> {
    /// Parses operators binding at least as tightly as `min_prec` (0: everything).
    pub(crate) fn parse_expr(&mut self, min_prec: u8) -> PResult<Expr> {
        self.enter()?;
        let parsed = self.parse_expr_within(min_prec);
        self.leave();
        parsed
    }

    fn parse_expr_within(&mut self, min_prec: u8) -> PResult<Expr> {
        let mut lhs = self.parse_unary()?;
        while let Some(op) = binary_op(self.peek_kind()) {
            let prec = op.precedence();
            if prec < min_prec {
                break;
            }
            self.advance();
            let modifiers = self.parse_bin_modifiers()?;
            let next_min = if op.is_right_associative() {
                prec
            } else {
                prec + 1
            };
            let rhs = self.parse_expr(next_min)?;
            lhs = Expr::Binary(BinaryExpr {
                op,
                lhs: Box::new(lhs),
                rhs: Box::new(rhs),
                return_bool: modifiers.return_bool,
                matching: Some(modifiers.matching),
            });
        }
        Ok(lhs)
    }

    fn parse_unary(&mut self) -> PResult<Expr> {
        let op = match self.peek_kind() {
            TokenKind::Add => UnaryOp::Add,
            TokenKind::Sub => UnaryOp::Sub,
            _ => {
                let primary = self.parse_primary()?;
                return self.parse_postfix(primary);
            }
        };
        let op_tok = self.advance();
        let operand = self.parse_expr(POW_PRECEDENCE)?;
        Ok(match operand {
            Expr::Number(mut n) => {
                if op == UnaryOp::Sub {
                    n.val = -n.val;
                }
                n.pos.start = op_tok.pos;
                Expr::Number(n)
            }
            other => Expr::Unary(UnaryExpr {
                op,
                expr: Box::new(other),
                start: op_tok.pos,
            }),
        })
    }

    fn parse_primary(&mut self) -> PResult<Expr> {
        use TokenKind as T;
        let t = self.peek().clone();
        match t.kind {
            T::Number => {
                self.advance();
                let val = match parse_number(&t.val) {
                    Ok(v) => v,
                    Err(e) => {
                        self.error_at(t.pos, t.end(), format!("error parsing number: {e}"));
                        return Err(Stop);
                    }
                };
                Ok(Expr::Number(NumberLiteral {
                    val,
                    duration: false,
                    pos: PosRange::new(t.pos, t.end()),
                }))
            }
            T::Duration => {
                self.advance();
                Ok(Expr::Number(self.duration_literal(&t)?))
            }
            T::String => {
                self.advance();
                let (val, invalid_utf8) = self.unquote_token(&t)?;
                Ok(Expr::String(StringLiteral {
                    val,
                    invalid_utf8,
                    pos: PosRange::new(t.pos, t.end()),
                }))
            }
            T::LeftParen => {
                self.advance();
                let inner = self.parse_expr(0)?;
                let close = self.expect(T::RightParen, None, None)?;
                Ok(Expr::Paren(ParenExpr {
                    expr: Box::new(inner),
                    pos: PosRange::new(t.pos, close.end()),
                }))
            }
            T::LeftBrace => Ok(Expr::VectorSelector(self.parse_vector_selector(None)?)),
            T::Identifier if self.peek_kind_at(1) == T::LeftParen => {
                self.advance();
                self.parse_call(&t, t.val.clone())
            }
            _ if self.peek_kind_at(1) == T::LeftParen && keyword_function(&t).is_some() => {
                self.advance();
                let name = keyword_function(&t).unwrap_or_default();
                self.parse_call(&t, name)
            }
            k if aggregate_op(k).is_some()
                && matches!(self.peek_kind_at(1), T::LeftParen | T::By | T::Without) =>
            {
                self.parse_aggregate()
            }
            k if is_metric_identifier(k) => {
                let name = self.advance();
                Ok(Expr::VectorSelector(
                    self.parse_vector_selector(Some(name))?,
                ))
            }
            _ => Err(self.unexpected(None, None)),
        }
    }

    /// A duration token as a number literal in seconds.
    pub(crate) fn duration_literal(&mut self, t: &Token) -> PResult<NumberLiteral> {
        match parse_duration(&t.val) {
            Ok(ms) => Ok(NumberLiteral {
                val: ms as f64 / 1000.0,
                duration: true,
                pos: PosRange::new(t.pos, t.end()),
            }),
            Err(e) => {
                self.error_at(t.pos, t.end(), e.0);
                Err(Stop)
            }
        }
    }

    pub(crate) fn unquote_token(&mut self, t: &Token) -> PResult<(String, Option<Vec<u8>>)> {
        match unquote(&t.val) {
            Ok(v) => Ok(v),
            Err(e) => {
                let msg = format!(
                    "error unquoting string {}: {e}",
                    crate::ast::go_quote(&t.val)
                );
                self.error_at(t.pos, t.end(), msg);
                Err(Stop)
            }
        }
    }

    /// `( [expr {, expr}] )`, the body of calls and aggregations; returns the arguments.
    fn parse_call_args(&mut self) -> PResult<Vec<Expr>> {
        self.expect(TokenKind::LeftParen, None, None)?;
        let mut args = Vec::new();
        if self.accept(TokenKind::RightParen).is_some() {
            return Ok(args);
        }
        loop {
            args.push(self.parse_expr(0)?);
            if self.accept(TokenKind::RightParen).is_some() {
                return Ok(args);
            }
            let comma = self.expect(TokenKind::Comma, None, None)?;
            if self.accept(TokenKind::RightParen).is_some() {
                self.error_at(
                    comma.pos,
                    comma.end(),
                    "trailing commas not allowed in function call args",
                );
                return Ok(args);
            }
        }
    }

    fn parse_call(&mut self, name_tok: &Token, name: String) -> PResult<Expr> {
        let args = self.parse_call_args()?;
        let pos = PosRange::new(name_tok.pos, self.last_end);
        let Some(func) = lookup_function(&name) else {
            let msg = format!(
                "unknown function with name {}",
                crate::ast::go_quote(&name_tok.val)
            );
            self.error_at(name_tok.pos, name_tok.end(), msg);
            return Err(Stop);
        };
        Ok(Expr::Call(Call { func, args, pos }))
    }

    fn parse_aggregate(&mut self) -> PResult<Expr> {
        let op_tok = self.advance();
        let Some(op) = aggregate_op(op_tok.kind) else {
            return Err(self.unexpected(None, None));
        };
        self.agg_depth += 1;
        let result = self.parse_aggregate_body(op, &op_tok);
        self.agg_depth -= 1;
        result
    }

    fn parse_aggregate_body(&mut self, op: AggregateOp, op_tok: &Token) -> PResult<Expr> {
        let mut grouping = None;
        if matches!(self.peek_kind(), TokenKind::By | TokenKind::Without) {
            grouping = Some(self.parse_aggregate_modifier()?);
        }
        if self.peek_kind() != TokenKind::LeftParen {
            return Err(self.unexpected(None, None));
        }
        let mut args = self.parse_call_args()?;
        if grouping.is_none() && matches!(self.peek_kind(), TokenKind::By | TokenKind::Without) {
            grouping = Some(self.parse_aggregate_modifier()?);
        }
        let pos = PosRange::new(op_tok.pos, self.last_end);
        let (without, grouping) = grouping.unwrap_or((false, Vec::new()));
        if args.is_empty() {
            self.error_at(
                pos.start,
                pos.end,
                "no arguments for aggregate expression provided",
            );
            return Err(Stop);
        }
        let desired = if op.takes_param() { 2 } else { 1 };
        if args.len() != desired {
            let msg = format!(
                "wrong number of arguments for aggregate expression provided, expected {desired}, got {}",
                args.len()
            );
            self.error_at(pos.start, pos.end, msg);
            return Err(Stop);
        }
        let expr = args.pop().map(Box::new).ok_or(Stop)?;
        let param = args.pop().map(Box::new);
        Ok(Expr::Aggregate(AggregateExpr {
            op,
            expr,
            param,
            grouping,
            without,
            pos,
        }))
    }

    /// `by (labels)` or `without (labels)`.
    fn parse_aggregate_modifier(&mut self) -> PResult<(bool, Vec<String>)> {
        let without = self.advance().kind == TokenKind::Without;
        let labels = self.parse_grouping_labels()?;
        Ok((without, labels))
    }
}

/// Tokens that may name a metric (Prometheus' `metric_identifier`).
pub(crate) fn is_metric_identifier(kind: TokenKind) -> bool {
    use TokenKind as T;
    kind.is_aggregator()
        || matches!(
            kind,
            T::Identifier
                | T::MetricIdentifier
                | T::By
                | T::Land
                | T::Lor
                | T::Lunless
                | T::Offset
                | T::Without
                | T::Start
                | T::End
                | T::Step
                | T::Range
                | T::Anchored
                | T::Smoothed
                | T::MinOf
                | T::MaxOf
        )
}
