//! PromQL text to [`Expr`], with Prometheus' grammar, checks and error messages.
//!
//! - [`parse`]: a query (all of Prometheus' optional syntax enabled: experimental functions,
//!   duration expressions, `anchored`/`smoothed` range selectors, `fill` modifiers);
//! - [`parse_metric_selector`]: a series selector (the HTTP API's `match[]`);
//! - [`parse_duration`]: a Prometheus duration (`1h30m`, `5m`, `1y`);
//! - [`parse_series_description`]: a `load` line of Prometheus' test files.
//!
//! The parser is hand-written (precedence climbing over the lexer's tokens) but mirrors the
//! yacc grammar of `promql/parser/generated_parser.y`: `^` is right-associative, unary minus
//! binds tighter than every binary operator but `^` (`-2^2` is `-(2^2)`), and `offset`, `@`,
//! `[...]`, `anchored` and `smoothed` bind tightest. After a successful parse the tree is type
//! checked as Prometheus' `checkAST` does. The first error decides the message, which prints as
//! Prometheus prints it: `1:5: parse error: unexpected end of input`.

#[path = "parser/check.rs"]
mod check;
#[path = "parser/durations.rs"]
mod durations;
#[path = "parser/errors.rs"]
mod errors;
#[path = "parser/expr.rs"]
mod expr;
#[path = "parser/histogram.rs"]
mod histogram;
#[path = "parser/modifiers.rs"]
mod modifiers;
#[path = "parser/number.rs"]
mod number;
#[path = "parser/selectors.rs"]
mod selectors;
#[path = "parser/series.rs"]
mod series;
#[cfg(test)]
#[path = "parser/tests.rs"]
mod tests;

pub use errors::{ErrorKind, InvalidDuration, ParseError, ParseErrors};
pub use histogram::{CounterResetHint, HistogramItem};
pub use number::parse_duration;
pub use series::{STALE_NAN_BITS, SeriesDescription, SeriesItem, parse_series_description};

use crate::ast::{Expr, Matcher};
use crate::lexer::{Token, TokenKind, lex};
use strata_limits::{GATE_FACTOR, MAX_PROMQL_DEPTH, Shape, depth_bound, too_deep};

/// Parses a PromQL query.
///
/// An expression nesting deeper than [`MAX_PROMQL_DEPTH`] is refused (see [`strata_limits`]):
/// first by a bound over its tokens, before it is parsed, then by the parser's own nesting,
/// then by the depth of the tree it parsed, before anything else walks that tree.
pub fn parse(query: &str) -> Result<Expr, ParseErrors> {
    let mut p = Parser::new(query);
    let bound = depth_bound(p.tokens.iter().filter_map(|t| shape(t.kind)));
    if bound > GATE_FACTOR * MAX_PROMQL_DEPTH {
        return Err(ParseErrors(vec![p.too_deep()]));
    }
    let parsed = p.parse_query();
    let mut expr = match parsed {
        Ok(e) if p.errors.is_empty() => e,
        _ => return Err(ParseErrors(p.errors)),
    };
    if deeper_than(&expr, MAX_PROMQL_DEPTH) {
        return Err(ParseErrors(vec![p.too_deep()]));
    }
    let mut checker = check::Checker::new(query);
    checker.check(&mut expr);
    if checker.errors.is_empty() {
        checker.check_extended_ranges(&expr);
    }
    if checker.errors.is_empty() {
        Ok(expr)
    } else {
        Err(ParseErrors(checker.errors))
    }
}

/// What a token does to nesting, for the bound checked before parsing.
fn shape(kind: TokenKind) -> Option<Shape> {
    use TokenKind as T;
    Some(match kind {
        T::Eof | T::Error | T::Comment => return None,
        T::LeftParen | T::LeftBrace | T::LeftBracket => Shape::Open,
        T::RightParen | T::RightBrace | T::RightBracket => Shape::Close,
        T::Comma => Shape::Separator,
        T::Identifier | T::MetricIdentifier | T::String | T::Number | T::Duration => Shape::Operand,
        _ => Shape::Operator,
    })
}

/// Whether `expr` is more than `levels` deep; it stops there, so it recurses no deeper.
fn deeper_than(expr: &Expr, levels: usize) -> bool {
    match levels.checked_sub(1) {
        None => true,
        Some(below) => expr.children().into_iter().any(|c| deeper_than(c, below)),
    }
}

/// Parses a series selector (`foo{a="b"}`, `{__name__=~"x.*"}`) into its matchers, the name
/// matcher last when the name precedes the braces. Like Prometheus, it does not require a
/// non-empty matcher.
pub fn parse_metric_selector(input: &str) -> Result<Vec<Matcher>, ParseErrors> {
    let mut p = Parser::new(input);
    let parsed = p.parse_selector_only();
    match parsed {
        Ok(vs) if p.errors.is_empty() => Ok(vs.matchers),
        _ => Err(ParseErrors(p.errors)),
    }
}

/// Marker for a parse that stopped; the error is already recorded.
#[derive(Debug)]
pub(crate) struct Stop;

pub(crate) type PResult<T> = Result<T, Stop>;

/// The parser state: the tokens (comments dropped), the position in them, the errors so far.
pub(crate) struct Parser<'a> {
    query: &'a str,
    tokens: Vec<Token>,
    idx: usize,
    errors: Vec<ParseError>,
    /// How many aggregations enclose the current position; Prometheus reports syntax errors
    /// inside them `in aggregation`.
    agg_depth: usize,
    /// How many expressions (and duration expressions) enclose the current position; past
    /// [`MAX_PROMQL_DEPTH`] the parse stops, before its recursion can exhaust the stack.
    depth: usize,
    /// End of the last consumed token.
    last_end: usize,
}

impl<'a> Parser<'a> {
    fn new(query: &'a str) -> Self {
        let tokens = lex(query)
            .into_iter()
            .filter(|t| t.kind != TokenKind::Comment)
            .collect();
        Self {
            query,
            tokens,
            idx: 0,
            errors: Vec::new(),
            agg_depth: 0,
            depth: 0,
            last_end: 0,
        }
    }

    fn parse_query(&mut self) -> PResult<Expr> {
        if self.peek_kind() == TokenKind::Eof {
            self.error_at(0, 0, "no expression found in input");
            return Err(Stop);
        }
        let e = self.parse_expr(0)?;
        if self.peek_kind() != TokenKind::Eof {
            return Err(self.unexpected(None, None));
        }
        Ok(e)
    }

    /// The error of an expression nesting too deep; it concerns the whole query.
    fn too_deep(&self) -> ParseError {
        ParseError::new(
            self.query,
            0,
            self.query.len(),
            too_deep("expression", MAX_PROMQL_DEPTH),
        )
    }

    /// Enters one more level of nesting (an expression within an expression): past the
    /// limit, the parse stops with the error of [`Parser::too_deep`]. Every `enter` that
    /// succeeds is matched by a [`Parser::leave`].
    fn enter(&mut self) -> PResult<()> {
        if self.depth >= MAX_PROMQL_DEPTH {
            let error = self.too_deep();
            self.errors.push(error);
            return Err(Stop);
        }
        self.depth += 1;
        Ok(())
    }

    fn leave(&mut self) {
        self.depth -= 1;
    }

    /// The current token (the last one, `Eof` or `Error`, repeats).
    fn peek(&self) -> &Token {
        let i = self.idx.min(self.tokens.len().saturating_sub(1));
        &self.tokens[i]
    }

    fn peek_kind(&self) -> TokenKind {
        self.tokens
            .get(self.idx)
            .or(self.tokens.last())
            .map_or(TokenKind::Eof, |t| t.kind)
    }

    fn peek_kind_at(&self, ahead: usize) -> TokenKind {
        self.tokens
            .get(self.idx + ahead)
            .or(self.tokens.last())
            .map_or(TokenKind::Eof, |t| t.kind)
    }

    /// Consumes and returns the current token.
    fn advance(&mut self) -> Token {
        let t = self.peek().clone();
        if !matches!(t.kind, TokenKind::Eof | TokenKind::Error) {
            self.idx += 1;
            self.last_end = t.end();
        }
        t
    }

    /// Consumes the current token if it is of `kind`.
    fn accept(&mut self, kind: TokenKind) -> Option<Token> {
        (self.peek_kind() == kind).then(|| self.advance())
    }

    /// Consumes a token of `kind` or reports the current one as unexpected.
    fn expect(
        &mut self,
        kind: TokenKind,
        context: Option<&str>,
        expected: Option<&str>,
    ) -> PResult<Token> {
        match self.accept(kind) {
            Some(t) => Ok(t),
            None => Err(self.unexpected(context, expected)),
        }
    }

    fn error_at(&mut self, start: usize, end: usize, message: impl Into<String>) {
        let e = ParseError::new(self.query, start, end, message.into());
        self.errors.push(e);
    }

    /// Reports the current token as unexpected, or the lexer's error when it is one. Inside an
    /// aggregation, an error without its own context is reported `in aggregation`.
    fn unexpected(&mut self, context: Option<&str>, expected: Option<&str>) -> Stop {
        let t = self.peek().clone();
        if t.kind == TokenKind::Error {
            let end = self.query.len();
            self.error_at(t.pos, end, t.val);
            return Stop;
        }
        let context = context.or((self.agg_depth > 0).then_some("aggregation"));
        let mut msg = format!("unexpected {}", t.desc());
        if let Some(c) = context {
            msg.push_str(" in ");
            msg.push_str(c);
        }
        if let Some(e) = expected {
            msg.push_str(", expected ");
            msg.push_str(e);
        }
        self.error_at(t.pos, t.end(), msg);
        Stop
    }
}
