//! Vector selectors (`name{matchers}`) and label lists (`by (a, b)`, `on(...)`).

use super::expr::is_metric_identifier;
use super::{PResult, Parser, Stop};
use crate::ast::{METRIC_NAME, MatchOp, Matcher, PosRange, VectorSelector, go_quote};
use crate::lexer::{Token, TokenKind};

fn match_op(kind: TokenKind) -> Option<MatchOp> {
    Some(match kind {
        TokenKind::Eql => MatchOp::Equal,
        TokenKind::Neq => MatchOp::NotEqual,
        TokenKind::EqlRegex => MatchOp::Regex,
        TokenKind::NeqRegex => MatchOp::NotRegex,
        _ => return None,
    })
}

/// Tokens accepted as a label name in grouping lists (Prometheus' `maybe_label`).
fn is_maybe_label(kind: TokenKind) -> bool {
    use TokenKind as T;
    kind.is_aggregator()
        || matches!(
            kind,
            T::Bool
                | T::By
                | T::GroupLeft
                | T::GroupRight
                | T::Identifier
                | T::Ignoring
                | T::Land
                | T::Lor
                | T::Lunless
                | T::MetricIdentifier
                | T::Offset
                | T::On
                | T::Start
                | T::End
                | T::Atan2
                | T::Step
                | T::Range
                | T::Anchored
                | T::Smoothed
                | T::MinOf
                | T::MaxOf
        )
}

impl Parser<'_> {
    /// The whole input as one selector (for `match[]`).
    pub(crate) fn parse_selector_only(&mut self) -> PResult<VectorSelector> {
        let name = if is_metric_identifier(self.peek_kind()) {
            Some(self.advance())
        } else if self.peek_kind() == TokenKind::LeftBrace {
            None
        } else {
            return Err(self.unexpected(None, None));
        };
        let vs = self.parse_vector_selector(name)?;
        if self.peek_kind() != TokenKind::Eof {
            return Err(self.unexpected(None, None));
        }
        Ok(vs)
    }

    /// A selector after its optional (already consumed) metric name token.
    pub(crate) fn parse_vector_selector(&mut self, name: Option<Token>) -> PResult<VectorSelector> {
        let mut matchers = Vec::new();
        let mut pos = name
            .as_ref()
            .map(|t| PosRange::new(t.pos, t.end()))
            .unwrap_or_default();
        if self.peek_kind() == TokenKind::LeftBrace {
            let open = self.advance();
            matchers = self.parse_label_matchers()?;
            if name.is_none() {
                pos.start = open.pos;
            }
            pos.end = self.last_end;
        }
        let name = name.map(|t| t.val).unwrap_or_default();
        if !name.is_empty() {
            matchers.push(Matcher::equal(METRIC_NAME, &name));
        }
        Ok(VectorSelector {
            name,
            matchers,
            offset: None,
            at: None,
            anchored: false,
            smoothed: false,
            bypass_empty_matcher_check: false,
            pos,
        })
    }

    /// The matchers after `{`, through `}`.
    fn parse_label_matchers(&mut self) -> PResult<Vec<Matcher>> {
        const CTX: Option<&str> = Some("label matching");
        let mut matchers = Vec::new();
        if self.accept(TokenKind::RightBrace).is_some() {
            return Ok(matchers);
        }
        loop {
            let label = self.peek().clone();
            let name = match label.kind {
                TokenKind::Identifier => {
                    self.advance();
                    label.val.clone()
                }
                TokenKind::String => {
                    self.advance();
                    self.unquote_token(&label)?.0
                }
                _ => return Err(self.unexpected(CTX, Some("identifier or \"}\""))),
            };
            match match_op(self.peek_kind()) {
                Some(op) => {
                    self.advance();
                    let value_tok = match self.peek_kind() {
                        TokenKind::String => self.advance(),
                        _ => return Err(self.unexpected(CTX, Some("string"))),
                    };
                    let value = self.unquote_token(&value_tok)?.0;
                    match Matcher::new(op, &name, &value) {
                        Ok(m) => matchers.push(m),
                        Err(e) => {
                            self.error_at(label.pos, value_tok.end(), e.0);
                            return Err(Stop);
                        }
                    }
                }
                None if label.kind == TokenKind::String => {
                    matchers.push(Matcher::equal(METRIC_NAME, &name));
                }
                None => return Err(self.unexpected(CTX, Some("label matching operator"))),
            }
            match self.peek_kind() {
                TokenKind::RightBrace => {
                    self.advance();
                    return Ok(matchers);
                }
                TokenKind::Comma => {
                    self.advance();
                    if self.accept(TokenKind::RightBrace).is_some() {
                        return Ok(matchers);
                    }
                }
                _ => return Err(self.unexpected(CTX, Some("\",\" or \"}\""))),
            }
        }
    }

    /// `( label {, label} [,] )` or `()`.
    pub(crate) fn parse_grouping_labels(&mut self) -> PResult<Vec<String>> {
        const CTX: Option<&str> = Some("grouping opts");
        self.expect(TokenKind::LeftParen, CTX, Some("\"(\""))?;
        let mut labels = Vec::new();
        if self.accept(TokenKind::RightParen).is_some() {
            return Ok(labels);
        }
        loop {
            let t = self.peek().clone();
            if t.kind == TokenKind::String {
                self.advance();
                let name = self.unquote_token(&t)?.0;
                if name.is_empty() {
                    let msg = format!("invalid label name for grouping: {}", go_quote(&name));
                    self.error_at(t.pos, t.end(), msg);
                }
                labels.push(name);
            } else if is_maybe_label(t.kind) {
                self.advance();
                labels.push(t.val);
            } else {
                return Err(self.unexpected(CTX, Some("label")));
            }
            match self.peek_kind() {
                TokenKind::RightParen => {
                    self.advance();
                    return Ok(labels);
                }
                TokenKind::Comma => {
                    self.advance();
                    if self.accept(TokenKind::RightParen).is_some() {
                        return Ok(labels);
                    }
                }
                _ => return Err(self.unexpected(CTX, Some("\",\" or \")\""))),
            }
        }
    }
}
