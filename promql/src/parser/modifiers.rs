//! Modifiers: those of binary operators (`bool`, `on`/`ignoring`, `group_left`/`group_right`,
//! `fill`/`fill_left`/`fill_right`) and the postfix ones of selectors and subqueries (`[...]`,
//! `offset`, `@`, `anchored`, `smoothed`), with Prometheus' placement checks.

use super::durations::DurationCtx;
use super::number::parse_number;
use super::{PResult, Parser, Stop};
use crate::ast::{
    AtModifier, DurationExpr, Expr, FillValues, MatrixSelector, SubqueryExpr,
    VectorMatchCardinality, VectorMatching, VectorSelector,
};
use crate::lexer::TokenKind;

/// The modifiers between a binary operator and its right operand.
pub(crate) struct BinModifiers {
    pub(crate) return_bool: bool,
    pub(crate) matching: VectorMatching,
}

const OFFSET_CTX: DurationCtx = DurationCtx {
    context: "offset",
    expected: "number, duration, step(), or range()",
};
const RANGE_CTX: DurationCtx = DurationCtx {
    context: "subquery or range selector",
    expected: "number, duration, step(), or range()",
};
const STEP_CTX: DurationCtx = DurationCtx {
    context: "subquery selector",
    expected: "number, duration, step(), range(), or \"]\"",
};

impl Parser<'_> {
    pub(crate) fn parse_bin_modifiers(&mut self) -> PResult<BinModifiers> {
        let return_bool = self.accept(TokenKind::Bool).is_some();
        let mut matching = VectorMatching::default();
        if matches!(self.peek_kind(), TokenKind::On | TokenKind::Ignoring) {
            matching.on = self.advance().kind == TokenKind::On;
            matching.matching_labels = self.parse_grouping_labels()?;
            if matches!(
                self.peek_kind(),
                TokenKind::GroupLeft | TokenKind::GroupRight
            ) {
                matching.card = if self.advance().kind == TokenKind::GroupLeft {
                    VectorMatchCardinality::ManyToOne
                } else {
                    VectorMatchCardinality::OneToMany
                };
                if self.peek_kind() == TokenKind::LeftParen {
                    matching.include = self.parse_grouping_labels()?;
                }
            }
        }
        matching.fill = self.parse_fill_modifiers()?;
        Ok(BinModifiers {
            return_bool,
            matching,
        })
    }

    /// `fill(v)`, `fill_left(v)`, `fill_right(v)`, or both sides in either order.
    fn parse_fill_modifiers(&mut self) -> PResult<FillValues> {
        let mut fill = FillValues::default();
        match self.peek_kind() {
            TokenKind::Fill => {
                self.advance();
                let v = self.parse_fill_value()?;
                fill.lhs = Some(v);
                fill.rhs = Some(v);
            }
            TokenKind::FillLeft => {
                self.advance();
                fill.lhs = Some(self.parse_fill_value()?);
                if self.accept(TokenKind::FillRight).is_some() {
                    fill.rhs = Some(self.parse_fill_value()?);
                }
            }
            TokenKind::FillRight => {
                self.advance();
                fill.rhs = Some(self.parse_fill_value()?);
                if self.accept(TokenKind::FillLeft).is_some() {
                    fill.lhs = Some(self.parse_fill_value()?);
                }
            }
            _ => {}
        }
        Ok(fill)
    }

    /// `( [+|-] number )`.
    fn parse_fill_value(&mut self) -> PResult<f64> {
        const CTX: Option<&str> = Some("fill modifier");
        self.expect(TokenKind::LeftParen, CTX, Some("\"(\""))?;
        let negative = match self.peek_kind() {
            TokenKind::Sub => {
                self.advance();
                true
            }
            TokenKind::Add => {
                self.advance();
                false
            }
            _ => false,
        };
        let t = self.expect(TokenKind::Number, CTX, Some("number"))?;
        let v = match parse_number(&t.val) {
            Ok(v) => v,
            Err(e) => {
                self.error_at(t.pos, t.end(), format!("error parsing number: {e}"));
                return Err(Stop);
            }
        };
        self.expect(TokenKind::RightParen, CTX, Some("\")\""))?;
        Ok(if negative { -v } else { v })
    }

    /// Applies `[...]`, `offset`, `@`, `anchored`, `smoothed` while they follow.
    pub(crate) fn parse_postfix(&mut self, mut expr: Expr) -> PResult<Expr> {
        loop {
            expr = match self.peek_kind() {
                TokenKind::LeftBracket => self.parse_range_or_subquery(expr)?,
                TokenKind::Offset => {
                    self.advance();
                    let offset = self.parse_offset_duration(&OFFSET_CTX)?;
                    self.add_offset(expr, offset)
                }
                TokenKind::At => self.parse_at(expr)?,
                TokenKind::Anchored => {
                    self.advance();
                    self.set_extended(expr, "anchored")
                }
                TokenKind::Smoothed => {
                    self.advance();
                    self.set_extended(expr, "smoothed")
                }
                _ => return Ok(expr),
            };
        }
    }

    fn parse_range_or_subquery(&mut self, expr: Expr) -> PResult<Expr> {
        let open = self.advance();
        let range = self.parse_positive_duration(&RANGE_CTX)?;
        match self.peek_kind() {
            TokenKind::RightBracket => {
                let close = self.advance();
                let vs = match expr {
                    Expr::VectorSelector(vs) => vs,
                    other => {
                        self.error_at(
                            open.pos,
                            close.end(),
                            "ranges only allowed for vector selectors",
                        );
                        return Ok(other);
                    }
                };
                if vs.literal_offset_ms() != Some(0) {
                    self.error_at(
                        open.pos,
                        close.end(),
                        "no offset modifiers allowed before range",
                    );
                } else if vs.at.is_some() {
                    self.error_at(open.pos, close.end(), "no @ modifiers allowed before range");
                }
                Ok(Expr::MatrixSelector(MatrixSelector {
                    vector: vs,
                    range,
                    end: close.end(),
                }))
            }
            TokenKind::Colon => {
                self.advance();
                let step = if self.peek_kind() == TokenKind::RightBracket {
                    None
                } else {
                    Some(self.parse_positive_duration(&STEP_CTX)?)
                };
                let close = self.expect(
                    TokenKind::RightBracket,
                    Some("subquery selector"),
                    Some("\"]\""),
                )?;
                Ok(Expr::Subquery(SubqueryExpr {
                    expr: Box::new(expr),
                    range,
                    step,
                    offset: None,
                    at: None,
                    end: close.end(),
                }))
            }
            _ => Err(self.unexpected(Some("subquery or range"), Some("\":\" or \"]\""))),
        }
    }

    fn parse_positive_duration(&mut self, ctx: &DurationCtx) -> PResult<DurationExpr> {
        let d = self.parse_duration_expr(ctx, 0)?;
        if let Some(n) = d.as_literal().filter(|n| n.val <= 0.0) {
            let pos = n.pos;
            self.error_at(pos.start, pos.end, "duration must be greater than 0");
        }
        Ok(d)
    }

    /// The selector an `offset` or `@` applies to, with where its end is kept.
    fn modifier_target<'e>(
        &mut self,
        expr: &'e mut Expr,
        what: &str,
    ) -> Option<(
        &'e mut Option<DurationExpr>,
        &'e mut Option<AtModifier>,
        &'e mut usize,
    )> {
        match expr {
            Expr::VectorSelector(vs) => Some((&mut vs.offset, &mut vs.at, &mut vs.pos.end)),
            Expr::MatrixSelector(m) => Some((&mut m.vector.offset, &mut m.vector.at, &mut m.end)),
            Expr::Subquery(s) => Some((&mut s.offset, &mut s.at, &mut s.end)),
            other => {
                let pos = other.pos();
                self.error_at(
                    pos.start,
                    pos.end,
                    format!(
                        "{what} modifier must be preceded by an instant vector selector or range vector selector or a subquery"
                    ),
                );
                None
            }
        }
    }

    fn add_offset(&mut self, mut expr: Expr, offset: DurationExpr) -> Expr {
        let pos = expr.pos();
        let end = self.last_end;
        if let Some((slot, _, end_slot)) = self.modifier_target(&mut expr, "offset") {
            let already = slot
                .as_ref()
                .is_some_and(|d| d.as_literal().is_none_or(|n| n.val != 0.0));
            if already {
                self.error_at(pos.start, pos.end, "offset may not be set multiple times");
            } else {
                *slot = Some(offset);
            }
            *end_slot = end;
        }
        expr
    }

    fn parse_at(&mut self, mut expr: Expr) -> PResult<Expr> {
        self.advance();
        let at = match self.peek_kind() {
            k @ (TokenKind::Start | TokenKind::End)
                if self.peek_kind_at(1) == TokenKind::LeftParen =>
            {
                self.advance();
                self.advance();
                self.expect(TokenKind::RightParen, Some("@"), Some("timestamp"))?;
                if k == TokenKind::Start {
                    AtModifier::Start
                } else {
                    AtModifier::End
                }
            }
            _ => {
                let ts = self.parse_signed_number("@", "timestamp")?;
                if !ts.is_finite() || ts >= i64::MAX as f64 || ts <= i64::MIN as f64 {
                    let pos = expr.pos();
                    let shown = if ts.is_nan() {
                        "NaN".to_string()
                    } else if ts.is_infinite() {
                        if ts > 0.0 { "+Inf" } else { "-Inf" }.to_string()
                    } else {
                        format!("{ts:.6}")
                    };
                    self.error_at(
                        pos.start,
                        pos.end,
                        format!("timestamp out of bounds for @ modifier: {shown}"),
                    );
                }
                AtModifier::Timestamp((ts * 1000.0).round() as i64)
            }
        };
        let pos = expr.pos();
        let end = self.last_end;
        if let Some((_, slot, end_slot)) = self.modifier_target(&mut expr, "@") {
            if slot.is_some() {
                self.error_at(
                    pos.start,
                    pos.end,
                    "@ <timestamp> may not be set multiple times",
                );
            } else {
                *slot = Some(at);
                *end_slot = end;
            }
        }
        Ok(expr)
    }

    /// `[+|-] (number | duration)`, in seconds.
    fn parse_signed_number(&mut self, context: &str, expected: &str) -> PResult<f64> {
        let sign = match self.peek_kind() {
            TokenKind::Add => {
                self.advance();
                1.0
            }
            TokenKind::Sub => {
                self.advance();
                -1.0
            }
            _ => 1.0,
        };
        let t = self.peek().clone();
        let v = match t.kind {
            TokenKind::Number => {
                self.advance();
                match parse_number(&t.val) {
                    Ok(v) => v,
                    Err(e) => {
                        self.error_at(t.pos, t.end(), format!("error parsing number: {e}"));
                        return Err(Stop);
                    }
                }
            }
            TokenKind::Duration => {
                self.advance();
                self.duration_literal(&t)?.val
            }
            _ => return Err(self.unexpected(Some(context), Some(expected))),
        };
        Ok(sign * v)
    }

    fn set_extended(&mut self, mut expr: Expr, which: &str) -> Expr {
        let pos = expr.pos();
        let vs: Option<&mut VectorSelector> = match &mut expr {
            Expr::VectorSelector(vs) => Some(vs),
            Expr::MatrixSelector(m) => Some(&mut m.vector),
            Expr::Subquery(_) => {
                let msg = format!("{which} modifier is not supported for subqueries");
                self.error_at(pos.start, pos.end, msg);
                None
            }
            _ => {
                self.error_at(
                    pos.start,
                    pos.end,
                    format!("{which} modifier not implemented"),
                );
                None
            }
        };
        if let Some(vs) = vs {
            if which == "anchored" {
                vs.anchored = true;
            } else {
                vs.smoothed = true;
            }
            if vs.anchored && vs.smoothed {
                self.error_at(
                    pos.start,
                    pos.end,
                    "anchored and smoothed modifiers cannot be used together",
                );
            }
        }
        expr
    }
}
