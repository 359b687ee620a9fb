//! Series descriptions, the `load` lines of Prometheus' test files:
//! `metric{l="v"} 1 2 _ stale 1+2x3 _x4 -1-1x3 {{schema:1 sum:3 count:22 buckets:[5 10 7]}}x2`.
//!
//! Expanding notation: `axN` is N+1 copies of `a`; `a+bxN` / `a-bxN` is `a, a±b, ..., a±N*b`;
//! `_` is a missing sample and `_xN` N of them; `stale` is a staleness marker. Histograms
//! accept `{{...}}xN` and `{{...}}+{{...}}xN` / `{{...}}-{{...}}xN`.

use super::errors::{ParseError, ParseErrors};
use super::histogram::{CounterResetHint, HistogramItem};
use super::number::{parse_number, unquote};
use crate::ast::METRIC_NAME;
use crate::lexer::{TokenKind, lex};

/// The bit pattern of Prometheus' staleness marker (a NaN).
pub const STALE_NAN_BITS: u64 = 0x7ff0_0000_0000_0002;

/// One value slot of a series description.
#[derive(Debug, Clone, PartialEq)]
pub enum SeriesItem {
    /// `_`: no sample at this step.
    Omitted,
    /// A float sample.
    Float(f64),
    /// `stale`: a staleness marker (value `f64::from_bits(STALE_NAN_BITS)`).
    Stale,
    /// A native histogram sample.
    Histogram(Box<HistogramItem>),
}

/// A parsed `load` line: the series' labels (sorted by name, `__name__` included) and its
/// values, one per step.
#[derive(Debug, Clone, PartialEq)]
pub struct SeriesDescription {
    pub labels: Vec<(String, String)>,
    pub values: Vec<SeriesItem>,
}

/// Parses one series description.
pub fn parse_series_description(input: &str) -> Result<SeriesDescription, ParseErrors> {
    let mut s = Scanner {
        input,
        pos: 0,
        errors: Vec::new(),
    };
    let result = s.description();
    match result {
        Ok(d) if s.errors.is_empty() => Ok(d),
        _ => Err(ParseErrors(s.errors)),
    }
}

struct Scanner<'a> {
    input: &'a str,
    pos: usize,
    errors: Vec<ParseError>,
}

type SResult<T> = Result<T, ()>;

fn is_ident_char(c: char) -> bool {
    c == '_' || c == ':' || c.is_ascii_alphanumeric()
}

impl Scanner<'_> {
    fn fail<T>(&mut self, pos: usize, msg: impl Into<String>) -> SResult<T> {
        let end = self.input.len();
        self.errors
            .push(ParseError::new(self.input, pos, end, msg.into()));
        Err(())
    }

    fn peek(&self) -> Option<char> {
        self.input[self.pos..].chars().next()
    }

    fn rest(&self) -> &str {
        &self.input[self.pos..]
    }

    fn eat(&mut self, s: &str) -> bool {
        if self.rest().starts_with(s) {
            self.pos += s.len();
            true
        } else {
            false
        }
    }

    fn skip_spaces(&mut self) {
        while self
            .peek()
            .is_some_and(|c| matches!(c, ' ' | '\t' | '\n' | '\r'))
        {
            self.pos += 1;
        }
    }

    fn description(&mut self) -> SResult<SeriesDescription> {
        self.skip_spaces();
        let start = self.pos;
        while self.peek().is_some_and(is_ident_char) {
            self.pos += 1;
        }
        if self.peek() == Some('{') {
            self.skip_braces()?;
        }
        let labels = self.labels(start)?;
        let mut values = Vec::new();
        loop {
            let before = self.pos;
            self.skip_spaces();
            if self.pos >= self.input.len() {
                break;
            }
            if self.pos == before {
                let c = self.peek().unwrap_or(' ');
                return self.fail(
                    self.pos,
                    format!("unexpected character in series values: {c:?}"),
                );
            }
            self.item(&mut values)?;
        }
        Ok(SeriesDescription { labels, values })
    }

    /// Moves past a `{...}` label set, skipping quoted strings.
    fn skip_braces(&mut self) -> SResult<()> {
        let open = self.pos;
        let mut quote: Option<char> = None;
        let mut chars = self.rest().char_indices().skip(1);
        while let Some((i, c)) = chars.next() {
            match quote {
                Some(q) if c == q => quote = None,
                Some(q) if c == '\\' && q != '`' => {
                    chars.next();
                }
                Some(_) => {}
                None if matches!(c, '"' | '\'' | '`') => quote = Some(c),
                None if c == '}' => {
                    self.pos = open + i + 1;
                    return Ok(());
                }
                None => {}
            }
        }
        self.fail(open, "unexpected end of input inside braces")
    }

    /// The labels of `input[start..pos]`.
    fn labels(&mut self, start: usize) -> SResult<Vec<(String, String)>> {
        let text = &self.input[start..self.pos];
        let tokens = lex(text);
        let mut labels: Vec<(String, String)> = Vec::new();
        let mut i = 0;
        let at = |i: usize| tokens.get(i).map_or(TokenKind::Eof, |t| t.kind);
        if let Some(t) = tokens
            .first()
            .filter(|t| !matches!(t.kind, TokenKind::LeftBrace | TokenKind::Eof))
        {
            if t.kind == TokenKind::Error {
                return self.fail(start + t.pos, t.val.clone());
            }
            labels.push((METRIC_NAME.to_string(), t.val.clone()));
            i = 1;
        }
        if at(i) == TokenKind::LeftBrace {
            i += 1;
            while at(i) != TokenKind::RightBrace {
                let Some(t) = tokens.get(i) else {
                    return self.fail(start, "unexpected end of input in label set");
                };
                let name = match t.kind {
                    TokenKind::Identifier => t.val.clone(),
                    TokenKind::String => self.unquote(start + t.pos, &t.val)?,
                    TokenKind::Error => return self.fail(start + t.pos, t.val.clone()),
                    _ => {
                        let msg = format!(
                            "unexpected {} in label set, expected identifier or \"}}\"",
                            t.desc()
                        );
                        return self.fail(start + t.pos, msg);
                    }
                };
                i += 1;
                if at(i) == TokenKind::Eql {
                    let Some(v) = tokens.get(i + 1).filter(|v| v.kind == TokenKind::String) else {
                        return self.fail(start, "unexpected token in label set, expected string");
                    };
                    let value = self.unquote(start + v.pos, &v.val)?;
                    labels.push((name, value));
                    i += 2;
                } else if t.kind == TokenKind::String {
                    labels.push((METRIC_NAME.to_string(), name));
                } else {
                    return self.fail(
                        start + t.pos,
                        "unexpected token in label set, expected \"=\"",
                    );
                }
                match at(i) {
                    TokenKind::Comma => i += 1,
                    TokenKind::RightBrace => {}
                    _ => {
                        return self.fail(
                            start,
                            "unexpected token in label set, expected \",\" or \"}\"",
                        );
                    }
                }
            }
        }
        labels.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(labels)
    }

    fn unquote(&mut self, pos: usize, s: &str) -> SResult<String> {
        match unquote(s) {
            Ok((v, _)) => Ok(v),
            Err(e) => self.fail(pos, format!("error unquoting string {s:?}: {e}")),
        }
    }

    /// One space-separated item, appended (expanded) to `out`.
    fn item(&mut self, out: &mut Vec<SeriesItem>) -> SResult<()> {
        let start = self.pos;
        if self.eat("_") {
            if self.eat("x") {
                let n = self.uint()?;
                out.extend((0..n).map(|_| SeriesItem::Omitted));
            } else {
                out.push(SeriesItem::Omitted);
            }
        } else if self.rest().starts_with("{{") {
            let base = self.histogram()?;
            if self.eat("x") {
                let n = self.uint()?;
                out.extend((0..=n).map(|_| SeriesItem::Histogram(Box::new(base.clone()))));
            } else if self.rest().starts_with("+{{") || self.rest().starts_with("-{{") {
                let sub = self.eat("-");
                if !sub {
                    self.eat("+");
                }
                let inc = self.histogram()?;
                if !self.eat("x") {
                    return self.fail(self.pos, "expected \"x\" after histogram increment");
                }
                let n = self.uint()?;
                self.expand_histograms(out, base, &inc, n, sub, start)?;
            } else {
                out.push(SeriesItem::Histogram(Box::new(base)));
            }
        } else {
            let value = self.series_value()?;
            if self.eat("x") {
                let n = self.uint()?;
                out.extend((0..=n).map(|_| value.clone()));
            } else if matches!(self.peek(), Some('+' | '-')) {
                let step = self.signed_number()?;
                if !self.eat("x") {
                    return self.fail(
                        self.pos,
                        "unexpected character in series values, expected \"x\"",
                    );
                }
                let n = self.uint()?;
                let mut v = match value {
                    SeriesItem::Float(v) => v,
                    _ => f64::from_bits(STALE_NAN_BITS),
                };
                for _ in 0..=n {
                    out.push(SeriesItem::Float(v));
                    v += step;
                }
            } else {
                out.push(value);
            }
        }
        match self.peek() {
            None | Some(' ' | '\t' | '\n' | '\r') => Ok(()),
            Some(c) => self.fail(
                self.pos,
                format!("unexpected character in series values: {c:?}"),
            ),
        }
    }

    fn expand_histograms(
        &mut self,
        out: &mut Vec<SeriesItem>,
        base: HistogramItem,
        inc: &HistogramItem,
        n: u64,
        sub: bool,
        start: usize,
    ) -> SResult<()> {
        let hint_set = inc.counter_reset_hint_set;
        let mut cur = base;
        cur.counter_reset_hint_set = hint_set;
        out.push(SeriesItem::Histogram(Box::new(cur.clone())));
        for _ in 0..n {
            if cur.schema > inc.schema {
                let msg = format!(
                    "error combining histograms: cannot merge from schema {} to {}",
                    inc.schema, cur.schema
                );
                return self.fail(start, msg);
            }
            let next = if sub { cur.sub(inc) } else { cur.add(inc) };
            cur = match next {
                Ok(h) => h,
                Err(e) => return self.fail(start, e),
            };
            cur.counter_reset_hint_set = hint_set;
            out.push(SeriesItem::Histogram(Box::new(cur.clone())));
        }
        Ok(())
    }

    /// `stale` or a signed number.
    fn series_value(&mut self) -> SResult<SeriesItem> {
        if self.eat("stale") {
            return Ok(SeriesItem::Stale);
        }
        Ok(SeriesItem::Float(self.signed_number()?))
    }

    fn signed_number(&mut self) -> SResult<f64> {
        let negative = self.eat("-");
        if !negative {
            self.eat("+");
        }
        let v = self.number()?;
        Ok(if negative { -v } else { v })
    }

    /// A number as the series lexer scans it: no hexadecimal, `x` may follow.
    fn number(&mut self) -> SResult<f64> {
        let start = self.pos;
        let word: String = self
            .rest()
            .chars()
            .take_while(|c| c.is_ascii_alphabetic())
            .collect();
        let lower = word.to_ascii_lowercase();
        if lower == "inf" || lower == "nan" {
            self.pos += word.len();
            return Ok(if lower == "inf" {
                f64::INFINITY
            } else {
                f64::NAN
            });
        }
        let bytes = self.input.as_bytes();
        let mut i = self.pos;
        while i < bytes.len() {
            let c = bytes[i];
            if c.is_ascii_digit() || c == b'.' || c == b'_' {
                i += 1;
            } else if (c == b'e' || c == b'E') && i > start {
                i += 1;
                if i < bytes.len() && (bytes[i] == b'+' || bytes[i] == b'-') {
                    i += 1;
                }
            } else {
                break;
            }
        }
        let text = &self.input[start..i];
        if text.is_empty() {
            let c = self.peek().unwrap_or(' ');
            return self.fail(
                start,
                format!("unexpected character in series values: {c:?}"),
            );
        }
        self.pos = i;
        match parse_number(text) {
            Ok(v) => Ok(v),
            Err(e) => self.fail(start, format!("error parsing number: {e}")),
        }
    }

    fn uint(&mut self) -> SResult<u64> {
        let start = self.pos;
        let len = self.rest().bytes().take_while(u8::is_ascii_digit).count();
        self.pos += len;
        match self.input[start..self.pos].parse::<u64>() {
            Ok(n) => Ok(n),
            Err(e) => self.fail(start, format!("invalid repetition in series values: {e}")),
        }
    }

    fn int(&mut self) -> SResult<i32> {
        let negative = self.eat("-");
        let start = self.pos;
        let n = self.uint()?;
        match i32::try_from(n) {
            Ok(v) => Ok(if negative { -v } else { v }),
            Err(_) => self.fail(start, "histogram integer out of range"),
        }
    }

    /// `{{key:value ...}}`.
    fn histogram(&mut self) -> SResult<HistogramItem> {
        let open = self.pos;
        self.pos += 2;
        let mut h = HistogramItem::default();
        let mut seen: Vec<String> = Vec::new();
        loop {
            self.skip_spaces();
            if self.eat("}}") {
                return Ok(h);
            }
            if self.pos >= self.input.len() {
                return self.fail(open, "unexpected end of input in histogram description");
            }
            let key: String = self
                .rest()
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            let key_pos = self.pos;
            self.pos += key.len();
            if !self.eat(":") {
                let msg = if key.is_empty() {
                    format!(
                        "histogram description incomplete unexpected: {:?}",
                        self.peek().unwrap_or(' ')
                    )
                } else {
                    format!("bad histogram descriptor found: {key:?}")
                };
                return self.fail(key_pos, msg);
            }
            if seen.contains(&key) {
                return self.fail(key_pos, format!("duplicate key \"{key}\" in histogram"));
            }
            seen.push(key.clone());
            self.skip_spaces();
            match key.as_str() {
                "schema" => h.schema = self.int()?,
                "sum" => h.sum = self.signed_number()?,
                "count" => h.count = self.signed_number()?,
                "z_bucket" => h.z_bucket = self.signed_number()?,
                "z_bucket_w" => h.z_bucket_w = self.number()?,
                "buckets" => h.buckets = self.bucket_set()?,
                "offset" => h.offset = self.int()?,
                "n_buckets" => h.n_buckets = self.bucket_set()?,
                "n_offset" => h.n_offset = self.int()?,
                "custom_values" => h.custom_values = self.bucket_set()?,
                "counter_reset_hint" => {
                    let word: String = self
                        .rest()
                        .chars()
                        .take_while(|c| c.is_ascii_alphabetic() || *c == '_')
                        .collect();
                    h.counter_reset_hint = match CounterResetHint::from_name(&word) {
                        Some(hint) => hint,
                        None => {
                            return self.fail(
                                self.pos,
                                format!("bad histogram descriptor found: {word:?}"),
                            );
                        }
                    };
                    h.counter_reset_hint_set = true;
                    self.pos += word.len();
                }
                _ => return self.fail(key_pos, format!("bad histogram descriptor found: {key:?}")),
            }
        }
    }

    /// `[n n n]`.
    fn bucket_set(&mut self) -> SResult<Vec<f64>> {
        if !self.eat("[") {
            let c = self.peek().unwrap_or(' ');
            return self.fail(
                self.pos,
                format!("unexpected character in histogram description: {c:?}"),
            );
        }
        let mut values = Vec::new();
        loop {
            self.skip_spaces();
            if self.eat("]") {
                return Ok(values);
            }
            if self.pos >= self.input.len() {
                return self.fail(self.pos, "unexpected end of input in buckets description");
            }
            values.push(self.signed_number()?);
        }
    }
}
