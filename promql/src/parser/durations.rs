//! Duration expressions: inside `[...]` the full arithmetic (`5m+1m`, `2m*(10+5)`,
//! `min_of(step()+1, 1h)`), after `offset` a single signed term (`offset -2 ^ 2` is
//! `(x offset -2) ^ 2`, as in Prometheus' `offset_duration_expr`).

use super::number::parse_number;
use super::{PResult, Parser, Stop};
use crate::ast::{DurationExpr, DurationOp, NumberLiteral, PosRange};
use crate::lexer::TokenKind;

/// Where a duration expression appears, for `unexpected ... in <context>, expected <...>`.
pub(crate) struct DurationCtx {
    pub(crate) context: &'static str,
    pub(crate) expected: &'static str,
}

/// Largest magnitude, in seconds, that fits a Go `time.Duration`.
const MAX_DURATION_SECS: f64 = (1u64 << 63) as f64 / 1e9;

fn duration_op(kind: TokenKind) -> Option<DurationOp> {
    Some(match kind {
        TokenKind::Add => DurationOp::Add,
        TokenKind::Sub => DurationOp::Sub,
        TokenKind::Mul => DurationOp::Mul,
        TokenKind::Div => DurationOp::Div,
        TokenKind::Mod => DurationOp::Mod,
        TokenKind::Pow => DurationOp::Pow,
        _ => return None,
    })
}

fn precedence(op: DurationOp) -> u8 {
    match op {
        DurationOp::Add | DurationOp::Sub => 4,
        DurationOp::Mul | DurationOp::Div | DurationOp::Mod => 5,
        DurationOp::Pow => 6,
    }
}

impl Parser<'_> {
    /// A duration expression with operators binding at least `min_prec`.
    pub(crate) fn parse_duration_expr(
        &mut self,
        ctx: &DurationCtx,
        min_prec: u8,
    ) -> PResult<DurationExpr> {
        self.enter()?;
        let parsed = self.parse_duration_expr_within(ctx, min_prec);
        self.leave();
        parsed
    }

    fn parse_duration_expr_within(
        &mut self,
        ctx: &DurationCtx,
        min_prec: u8,
    ) -> PResult<DurationExpr> {
        let mut lhs = self.parse_duration_unary(ctx)?;
        while let Some(op) = duration_op(self.peek_kind()) {
            let prec = precedence(op);
            if prec < min_prec {
                break;
            }
            let op_tok = self.advance();
            let next = if op == DurationOp::Pow {
                prec
            } else {
                prec + 1
            };
            let rhs = self.parse_duration_expr(ctx, next)?;
            let zero_rhs = rhs.as_literal().is_some_and(|n| n.val == 0.0);
            if zero_rhs && matches!(op, DurationOp::Div | DurationOp::Mod) {
                let msg = if op == DurationOp::Div {
                    "division by zero"
                } else {
                    "modulo by zero"
                };
                self.error_at(op_tok.pos, op_tok.end(), msg);
            }
            lhs = DurationExpr::Binary {
                op,
                lhs: Box::new(lhs),
                rhs: Box::new(rhs),
            };
        }
        Ok(lhs)
    }

    fn parse_duration_unary(&mut self, ctx: &DurationCtx) -> PResult<DurationExpr> {
        if !matches!(self.peek_kind(), TokenKind::Add | TokenKind::Sub) {
            return self.parse_duration_atom(ctx);
        }
        let op = self.advance();
        let operand = self.parse_duration_expr(ctx, 6)?;
        Ok(self.apply_sign(op.kind == TokenKind::Sub, op.pos, op.end(), operand))
    }

    /// Folds a sign into a literal, or wraps the operand in a negation.
    fn apply_sign(
        &mut self,
        negative: bool,
        start: usize,
        sign_end: usize,
        operand: DurationExpr,
    ) -> DurationExpr {
        match operand {
            DurationExpr::Number(mut n) => {
                if negative {
                    n.val = -n.val;
                }
                n.pos.start = start;
                if n.val.abs() > MAX_DURATION_SECS {
                    self.error_at(start, sign_end, "duration out of range");
                }
                DurationExpr::Number(n)
            }
            other if negative => DurationExpr::Neg {
                expr: Box::new(other),
                start,
            },
            other => other,
        }
    }

    /// A literal, `step()`, `range()`, `min_of(a, b)`, `max_of(a, b)` or `(expr)`.
    fn parse_duration_atom(&mut self, ctx: &DurationCtx) -> PResult<DurationExpr> {
        let t = self.peek().clone();
        match t.kind {
            TokenKind::Number => {
                self.advance();
                let val = match parse_number(&t.val) {
                    Ok(v) => v,
                    Err(e) => {
                        self.error_at(t.pos, t.end(), format!("error parsing number: {e}"));
                        return Err(Stop);
                    }
                };
                if val.abs() > MAX_DURATION_SECS {
                    self.error_at(t.pos, t.end(), "duration out of range");
                }
                Ok(DurationExpr::Number(NumberLiteral {
                    val,
                    duration: false,
                    pos: PosRange::new(t.pos, t.end()),
                }))
            }
            TokenKind::Duration => {
                self.advance();
                Ok(DurationExpr::Number(self.duration_literal(&t)?))
            }
            TokenKind::Step | TokenKind::Range if self.peek_kind_at(1) == TokenKind::LeftParen => {
                self.advance();
                self.advance();
                let close =
                    self.expect(TokenKind::RightParen, Some(ctx.context), Some(ctx.expected))?;
                let pos = PosRange::new(t.pos, close.end());
                Ok(if t.kind == TokenKind::Step {
                    DurationExpr::Step(pos)
                } else {
                    DurationExpr::Range(pos)
                })
            }
            TokenKind::MinOf | TokenKind::MaxOf => {
                self.advance();
                self.expect(TokenKind::LeftParen, Some(ctx.context), Some(ctx.expected))?;
                let lhs = self.parse_duration_expr(ctx, 0)?;
                self.expect(TokenKind::Comma, Some(ctx.context), Some(ctx.expected))?;
                let rhs = self.parse_duration_expr(ctx, 0)?;
                let close =
                    self.expect(TokenKind::RightParen, Some(ctx.context), Some(ctx.expected))?;
                let pos = PosRange::new(t.pos, close.end());
                let (lhs, rhs) = (Box::new(lhs), Box::new(rhs));
                Ok(if t.kind == TokenKind::MinOf {
                    DurationExpr::MinOf { lhs, rhs, pos }
                } else {
                    DurationExpr::MaxOf { lhs, rhs, pos }
                })
            }
            TokenKind::LeftParen => {
                self.advance();
                let inner = self.parse_duration_expr(ctx, 0)?;
                let close =
                    self.expect(TokenKind::RightParen, Some(ctx.context), Some(ctx.expected))?;
                Ok(DurationExpr::Paren {
                    expr: Box::new(inner),
                    pos: PosRange::new(t.pos, close.end()),
                })
            }
            _ => Err(self.unexpected(Some(ctx.context), Some(ctx.expected))),
        }
    }

    /// The duration after `offset`: an optional sign and one term.
    pub(crate) fn parse_offset_duration(&mut self, ctx: &DurationCtx) -> PResult<DurationExpr> {
        if matches!(self.peek_kind(), TokenKind::Add | TokenKind::Sub) {
            let op = self.advance();
            let term = self.parse_duration_atom(ctx)?;
            return Ok(self.apply_sign(op.kind == TokenKind::Sub, op.pos, op.end(), term));
        }
        self.parse_duration_atom(ctx)
    }
}
