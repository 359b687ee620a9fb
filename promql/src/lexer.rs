//! The PromQL lexer: query text to [`Token`]s with byte positions.
//!
//! It follows the states of Prometheus' lexer (`promql/parser/lex.go`): top-level statements,
//! the inside of `{...}` (where keywords are plain identifiers and strings are label names or
//! values), and the inside of `[...]` (durations, duration arithmetic, `step()`, `range()`,
//! `min_of`, `max_of`). Its error texts are Prometheus' (`unexpected character: '}'`,
//! `unclosed left parenthesis`, `bad number or duration syntax: "0de"`, ...).
//!
//! Lexing stops at the first error: the last token is always [`TokenKind::Eof`] or
//! [`TokenKind::Error`] (whose `val` is the message).

#[path = "lexer/scan.rs"]
mod scan;
#[cfg(test)]
#[path = "lexer/tests.rs"]
mod tests;

use crate::ast::go_quote;

/// The kind of a token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TokenKind {
    Eof,
    Error,
    Comment,
    Identifier,
    MetricIdentifier,
    String,
    Number,
    Duration,
    LeftParen,
    RightParen,
    LeftBrace,
    RightBrace,
    LeftBracket,
    RightBracket,
    Comma,
    /// `=` (label matching).
    Eql,
    Colon,
    // Operators.
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    Pow,
    /// `==`.
    Eqlc,
    Neq,
    Lss,
    Lte,
    Gtr,
    Gte,
    /// `</`.
    TrimUpper,
    /// `>/`.
    TrimLower,
    EqlRegex,
    NeqRegex,
    At,
    Land,
    Lor,
    Lunless,
    Atan2,
    // Aggregators.
    Avg,
    Bottomk,
    Count,
    CountValues,
    Group,
    Limitk,
    LimitRatio,
    Max,
    Min,
    Quantile,
    Stddev,
    Stdvar,
    Sum,
    Topk,
    // Keywords.
    Bool,
    By,
    GroupLeft,
    GroupRight,
    Ignoring,
    Offset,
    Smoothed,
    Anchored,
    On,
    Without,
    Fill,
    FillLeft,
    FillRight,
    // Preprocessors and duration functions.
    Start,
    End,
    Step,
    Range,
    MinOf,
    MaxOf,
}

/// Words with a meaning of their own (compared lower-cased); `inf` and `nan` are numbers.
pub(crate) fn keyword(lower: &str) -> Option<TokenKind> {
    use TokenKind as T;
    Some(match lower {
        "and" => T::Land,
        "or" => T::Lor,
        "unless" => T::Lunless,
        "atan2" => T::Atan2,
        "sum" => T::Sum,
        "avg" => T::Avg,
        "count" => T::Count,
        "min" => T::Min,
        "max" => T::Max,
        "group" => T::Group,
        "stddev" => T::Stddev,
        "stdvar" => T::Stdvar,
        "topk" => T::Topk,
        "bottomk" => T::Bottomk,
        "count_values" => T::CountValues,
        "quantile" => T::Quantile,
        "limitk" => T::Limitk,
        "limit_ratio" => T::LimitRatio,
        "offset" => T::Offset,
        "smoothed" => T::Smoothed,
        "anchored" => T::Anchored,
        "by" => T::By,
        "without" => T::Without,
        "on" => T::On,
        "ignoring" => T::Ignoring,
        "group_left" => T::GroupLeft,
        "group_right" => T::GroupRight,
        "fill" => T::Fill,
        "fill_left" => T::FillLeft,
        "fill_right" => T::FillRight,
        "bool" => T::Bool,
        "start" => T::Start,
        "end" => T::End,
        "step" => T::Step,
        "range" => T::Range,
        "min_of" => T::MinOf,
        "max_of" => T::MaxOf,
        "inf" | "nan" => T::Number,
        _ => return None,
    })
}

impl TokenKind {
    /// `+ - * / % ^ == != < <= > >= =~ !~ @ and or unless atan2`.
    pub fn is_operator(self) -> bool {
        use TokenKind as T;
        matches!(
            self,
            T::Add
                | T::Sub
                | T::Mul
                | T::Div
                | T::Mod
                | T::Pow
                | T::Eqlc
                | T::Neq
                | T::Lss
                | T::Lte
                | T::Gtr
                | T::Gte
                | T::TrimUpper
                | T::TrimLower
                | T::EqlRegex
                | T::NeqRegex
                | T::At
                | T::Land
                | T::Lor
                | T::Lunless
                | T::Atan2
        )
    }

    /// The aggregation operators.
    pub fn is_aggregator(self) -> bool {
        use TokenKind as T;
        matches!(
            self,
            T::Avg
                | T::Bottomk
                | T::Count
                | T::CountValues
                | T::Group
                | T::Limitk
                | T::LimitRatio
                | T::Max
                | T::Min
                | T::Quantile
                | T::Stddev
                | T::Stdvar
                | T::Sum
                | T::Topk
        )
    }

    /// Keywords printed as `<word>` in error messages.
    pub fn is_keyword(self) -> bool {
        use TokenKind as T;
        matches!(
            self,
            T::Bool
                | T::By
                | T::GroupLeft
                | T::GroupRight
                | T::Ignoring
                | T::Offset
                | T::Smoothed
                | T::Anchored
                | T::On
                | T::Without
                | T::Fill
                | T::FillLeft
                | T::FillRight
        )
    }

    /// Whether the kind has a fixed spelling (delimiters, operators, keywords), which changes
    /// how error messages describe it.
    fn has_fixed_text(self) -> bool {
        use TokenKind as T;
        !matches!(
            self,
            T::Eof
                | T::Error
                | T::Comment
                | T::Identifier
                | T::MetricIdentifier
                | T::String
                | T::Number
                | T::Duration
        )
    }

    fn type_desc(self) -> &'static str {
        match self {
            TokenKind::Error => "error",
            TokenKind::Eof => "end of input",
            TokenKind::Comment => "comment",
            TokenKind::Identifier => "identifier",
            TokenKind::MetricIdentifier => "metric identifier",
            TokenKind::String => "string",
            TokenKind::Number => "number",
            TokenKind::Duration => "duration",
            _ => "",
        }
    }
}

/// One token: its kind, the byte offset of its first byte and its text (the message for
/// [`TokenKind::Error`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Token {
    pub kind: TokenKind,
    pub pos: usize,
    pub val: String,
}

impl Token {
    /// The byte range `[pos, pos + len(val))`, as Prometheus computes it.
    pub fn end(&self) -> usize {
        self.pos + self.val.len()
    }

    /// The token as Prometheus' `Item.String()` prints it.
    pub fn item_string(&self) -> String {
        match self.kind {
            TokenKind::Eof => "EOF".to_string(),
            TokenKind::Error => self.val.clone(),
            TokenKind::Identifier | TokenKind::MetricIdentifier => go_quote(&self.val),
            k if k.is_keyword() => format!("<{}>", self.val),
            k if k.is_operator() => format!("<op:{}>", self.val),
            k if k.is_aggregator() => format!("<aggr:{}>", self.val),
            _ if self.val.chars().count() > 10 => {
                let head: String = self.val.chars().take(10).collect();
                format!("{}...", go_quote(&head))
            }
            _ => go_quote(&self.val),
        }
    }

    /// The description used in `unexpected <desc>` errors (`<op:*>`, `identifier "foo"`,
    /// `end of input`, `"}"`).
    pub fn desc(&self) -> String {
        if self.kind.has_fixed_text() {
            return self.item_string();
        }
        if self.kind == TokenKind::Eof {
            return "end of input".to_string();
        }
        format!("{} {}", self.kind.type_desc(), self.item_string())
    }
}

/// Lexes a whole query.
pub fn lex(input: &str) -> Vec<Token> {
    scan::Lexer::new(input).run()
}
