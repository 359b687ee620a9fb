//! The lexer's state machine: top-level statements, the inside of braces, the inside of
//! brackets (duration expressions), strings with Go escapes, numbers and durations.

use super::{Token, TokenKind, keyword};
use crate::ast::go_quote;

pub(crate) struct Lexer<'a> {
    input: &'a str,
    pos: usize,
    start: usize,
    paren_depth: i64,
    brace_open: bool,
    bracket_open: bool,
    got_colon: bool,
    got_duration: bool,
    tokens: Vec<Token>,
}

fn is_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r')
}

fn is_alpha(c: char) -> bool {
    c == '_' || c.is_ascii_alphabetic()
}

fn is_alnum(c: char) -> bool {
    is_alpha(c) || c.is_ascii_digit()
}

/// Quotes a single character as Go's `%q` does for runes (`'}'`).
fn quote_rune(c: char) -> String {
    let q = go_quote(&c.to_string());
    let inner = &q[1..q.len() - 1];
    match c {
        '\'' => "'\\''".to_string(),
        '"' => "'\"'".to_string(),
        _ => format!("'{inner}'"),
    }
}

impl<'a> Lexer<'a> {
    pub(crate) fn new(input: &'a str) -> Self {
        Self {
            input,
            pos: 0,
            start: 0,
            paren_depth: 0,
            brace_open: false,
            bracket_open: false,
            got_colon: false,
            got_duration: false,
            tokens: Vec::new(),
        }
    }

    fn peek(&self) -> Option<char> {
        self.input[self.pos..].chars().next()
    }

    fn next(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += c.len_utf8();
        Some(c)
    }

    fn accept(&mut self, valid: &str) -> bool {
        match self.peek() {
            Some(c) if valid.contains(c) => {
                self.pos += c.len_utf8();
                true
            }
            _ => false,
        }
    }

    fn emit(&mut self, kind: TokenKind) {
        self.tokens.push(Token {
            kind,
            pos: self.start,
            val: self.input[self.start..self.pos].to_string(),
        });
        self.start = self.pos;
    }

    /// Records an error; lexing stops.
    fn error(&mut self, message: String) -> bool {
        self.tokens.push(Token {
            kind: TokenKind::Error,
            pos: self.start,
            val: message,
        });
        false
    }

    fn skip_spaces(&mut self) {
        while self.peek().is_some_and(is_space) {
            self.next();
        }
        self.start = self.pos;
    }

    /// Runs to the end of the input or the first error.
    pub(crate) fn run(mut self) -> Vec<Token> {
        loop {
            let ok = if self.brace_open {
                self.lex_inside_braces()
            } else if self.bracket_open {
                self.lex_duration_expr()
            } else {
                self.lex_statement()
            };
            if !ok || self.tokens.last().is_some_and(|t| t.kind == TokenKind::Eof) {
                return self.tokens;
            }
        }
    }

    fn lex_comment(&mut self) -> bool {
        while let Some(c) = self.peek() {
            if c == '\n' || c == '\r' {
                break;
            }
            self.next();
        }
        self.emit(TokenKind::Comment);
        true
    }

    fn lex_statement(&mut self) -> bool {
        use TokenKind as T;
        if self.input[self.pos..].starts_with('#') {
            return self.lex_comment();
        }
        let Some(c) = self.next() else {
            if self.paren_depth != 0 {
                return self.error("unclosed left parenthesis".into());
            }
            self.emit(T::Eof);
            return true;
        };
        match c {
            ',' => self.emit(T::Comma),
            c if is_space(c) => self.skip_spaces(),
            '*' => self.emit(T::Mul),
            '/' => self.emit(T::Div),
            '%' => self.emit(T::Mod),
            '+' => self.emit(T::Add),
            '-' => self.emit(T::Sub),
            '^' => self.emit(T::Pow),
            '=' => match self.peek() {
                Some('=') => {
                    self.next();
                    self.emit(T::Eqlc);
                }
                Some('~') => {
                    self.next();
                    return self.error("unexpected character after '=': '~'".into());
                }
                _ => self.emit(T::Eql),
            },
            '!' => match self.next() {
                Some('=') => self.emit(T::Neq),
                other => {
                    let r = other.map_or("U+FFFFFFFFFFFFFFFF".to_string(), quote_rune);
                    return self.error(format!("unexpected character after '!': {r}"));
                }
            },
            '<' => {
                if self.accept("=") {
                    self.emit(T::Lte)
                } else if self.accept("/") {
                    self.emit(T::TrimUpper)
                } else {
                    self.emit(T::Lss)
                }
            }
            '>' => {
                if self.accept("=") {
                    self.emit(T::Gte)
                } else if self.accept("/") {
                    self.emit(T::TrimLower)
                } else {
                    self.emit(T::Gtr)
                }
            }
            c if c.is_ascii_digit()
                || (c == '.' && self.peek().is_some_and(|d| d.is_ascii_digit())) =>
            {
                self.pos = self.start;
                return self.lex_number_or_duration();
            }
            '"' | '\'' => return self.lex_string(c),
            '`' => return self.lex_raw_string(),
            c if is_alpha(c) || c == ':' => {
                self.pos = self.start;
                self.lex_keyword_or_identifier();
            }
            '(' => {
                self.emit(T::LeftParen);
                self.paren_depth += 1;
            }
            ')' => {
                self.emit(T::RightParen);
                self.paren_depth -= 1;
                if self.paren_depth < 0 {
                    // Prometheus reports the error in place of the parenthesis.
                    self.tokens.pop();
                    return self.error("unexpected right parenthesis ')'".into());
                }
            }
            '{' => {
                self.emit(T::LeftBrace);
                self.brace_open = true;
            }
            '[' => {
                self.got_colon = false;
                self.got_duration = false;
                self.emit(T::LeftBracket);
                self.skip_spaces();
                self.bracket_open = true;
            }
            ']' => return self.error("unexpected right bracket ']'".into()),
            '@' => self.emit(T::At),
            c => return self.error(format!("unexpected character: {}", quote_rune(c))),
        }
        true
    }

    fn lex_inside_braces(&mut self) -> bool {
        use TokenKind as T;
        if self.input[self.pos..].starts_with('#') {
            return self.lex_comment();
        }
        let Some(c) = self.next() else {
            return self.error("unexpected end of input inside braces".into());
        };
        match c {
            c if is_space(c) => self.skip_spaces(),
            c if is_alpha(c) => {
                while self.peek().is_some_and(is_alnum) {
                    self.next();
                }
                self.emit(T::Identifier);
            }
            ',' => self.emit(T::Comma),
            '"' | '\'' => return self.lex_string(c),
            '`' => return self.lex_raw_string(),
            '=' => {
                if self.accept("~") {
                    self.emit(T::EqlRegex)
                } else {
                    self.emit(T::Eql)
                }
            }
            '!' => match self.next() {
                Some('~') => self.emit(T::NeqRegex),
                Some('=') => self.emit(T::Neq),
                other => {
                    let r = other.map_or("U+FFFFFFFFFFFFFFFF".to_string(), quote_rune);
                    return self
                        .error(format!("unexpected character after '!' inside braces: {r}"));
                }
            },
            '{' => return self.error("unexpected left brace '{'".into()),
            '}' => {
                self.emit(T::RightBrace);
                self.brace_open = false;
            }
            c => {
                return self.error(format!(
                    "unexpected character inside braces: {}",
                    quote_rune(c)
                ));
            }
        }
        true
    }

    /// The inside of `[...]`: numbers, durations, arithmetic, `step()`, `range()`,
    /// `min_of(...)`, `max_of(...)`, `:` and `]`.
    fn lex_duration_expr(&mut self) -> bool {
        use TokenKind as T;
        let Some(c) = self.next() else {
            let after_number = self
                .tokens
                .last()
                .is_some_and(|t| matches!(t.kind, T::Number | T::Duration));
            if !after_number {
                return self.error("unexpected end of input in duration expression".into());
            }
            if self.paren_depth != 0 {
                return self.error("unclosed left parenthesis".into());
            }
            return self.error("unclosed left bracket".into());
        };
        match c {
            ']' => {
                self.emit(T::RightBracket);
                self.bracket_open = false;
                self.got_colon = false;
            }
            ':' => {
                if self.got_colon {
                    return self.error("unexpected colon ':'".into());
                }
                if !self.got_duration {
                    return self
                        .error("unexpected colon before duration in duration expression".into());
                }
                self.emit(T::Colon);
                self.got_colon = true;
            }
            '(' => {
                self.emit(T::LeftParen);
                self.paren_depth += 1;
            }
            ')' => {
                self.emit(T::RightParen);
                self.paren_depth -= 1;
                if self.paren_depth < 0 {
                    // Prometheus reports the error in place of the parenthesis.
                    self.tokens.pop();
                    return self.error("unexpected right parenthesis ')'".into());
                }
            }
            c if is_space(c) => self.skip_spaces(),
            '+' => self.emit(T::Add),
            '-' => self.emit(T::Sub),
            '*' => self.emit(T::Mul),
            '/' => self.emit(T::Div),
            '%' => self.emit(T::Mod),
            '^' => self.emit(T::Pow),
            ',' => self.emit(T::Comma),
            '[' => return self.error("unexpected left bracket '['".into()),
            c if is_alpha(c) => {
                while self.peek().is_some_and(is_alpha) {
                    self.next();
                }
                let word = self.input[self.start..self.pos].to_ascii_lowercase();
                let kind = match word.as_str() {
                    "step" => T::Step,
                    "range" => T::Range,
                    "min_of" => T::MinOf,
                    "max_of" => T::MaxOf,
                    _ => {
                        return self.error(format!(
                            "unexpected character in duration expression: {}",
                            quote_rune(c)
                        ));
                    }
                };
                self.got_duration = true;
                self.emit(kind);
            }
            c if c.is_ascii_digit()
                || (c == '.' && self.peek().is_some_and(|d| d.is_ascii_digit())) =>
            {
                self.pos = self.start;
                self.got_duration = true;
                return self.lex_number_or_duration();
            }
            c => {
                return self.error(format!(
                    "unexpected character in duration expression: {}",
                    quote_rune(c)
                ));
            }
        }
        true
    }

    fn lex_keyword_or_identifier(&mut self) {
        while self.peek().is_some_and(|c| is_alnum(c) || c == ':') {
            self.next();
        }
        let word = &self.input[self.start..self.pos];
        match keyword(&word.to_ascii_lowercase()) {
            Some(k @ (TokenKind::Fill | TokenKind::FillLeft | TokenKind::FillRight)) => {
                if self.followed_by_left_paren() {
                    self.emit(k)
                } else {
                    self.emit(TokenKind::Identifier)
                }
            }
            Some(k) => self.emit(k),
            None if word.contains(':') => self.emit(TokenKind::MetricIdentifier),
            None => self.emit(TokenKind::Identifier),
        }
    }

    fn followed_by_left_paren(&self) -> bool {
        self.input[self.pos..]
            .chars()
            .find(|c| !is_space(*c))
            .is_some_and(|c| c == '(')
    }

    fn lex_number_or_duration(&mut self) -> bool {
        if self.scan_number() {
            self.emit(TokenKind::Number);
            return true;
        }
        if self.accept_remaining_duration() {
            self.emit(TokenKind::Duration);
            return true;
        }
        let text = self.input[self.start..self.pos].to_string();
        self.error(format!(
            "bad number or duration syntax: {}",
            go_quote(&text)
        ))
    }

    /// Continues a number with a duration unit (`5m`, `1h30m`, `1y2w`).
    fn accept_remaining_duration(&mut self) -> bool {
        if !self.accept("smhdwy") {
            return false;
        }
        self.accept("s");
        while self.accept("0123456789") {
            while self.accept("0123456789") {}
            if !self.accept("smhdw") {
                return false;
            }
            self.accept("s");
        }
        match self.peek() {
            Some(c) if is_alnum(c) => {
                self.next();
                false
            }
            _ => true,
        }
    }

    /// Scans decimal, hexadecimal and exponent numbers with `_` separators; leaves the
    /// position after what it consumed and says whether that forms a number.
    fn scan_number(&mut self) -> bool {
        let initial = self.pos;
        let mut digits = "0123456789";
        if self.accept("0") && self.accept("xX") {
            self.accept("_");
            digits = "0123456789abcdefABCDEF";
        }
        self.accept(".");
        self.accept(digits);
        let mut dot = false;
        let mut exponent = false;
        while let Some(c) = self.peek() {
            let is_digit = digits.contains(c);
            if !(is_digit || c == '.' || c == '_' || c == 'e' || c == 'E') {
                break;
            }
            if c == '.' {
                self.next();
                if dot || self.accept("_.") || digits.len() > 10 {
                    return false;
                }
                dot = true;
                continue;
            }
            if (c == 'e' || c == 'E') && !is_digit {
                self.next();
                if exponent {
                    return false;
                }
                exponent = true;
                self.accept("+-");
                if self.accept("._eE") || self.peek().is_none() {
                    return false;
                }
                continue;
            }
            if c == '_' {
                self.next();
                if self.accept("._eE") || self.peek().is_none() {
                    return false;
                }
                continue;
            }
            while self.peek().is_some_and(|d| digits.contains(d)) {
                self.next();
            }
        }
        if self.pos == initial {
            return false;
        }
        !self.peek().is_some_and(is_alnum)
    }

    fn lex_string(&mut self, quote: char) -> bool {
        loop {
            match self.next() {
                Some('\\') => {
                    if let Err(msg) = self.lex_escape(quote) {
                        return self.error(msg);
                    }
                }
                Some('\u{FFFD}') => return self.error("invalid UTF-8 rune".into()),
                None | Some('\n') => return self.error("unterminated quoted string".into()),
                Some(c) if c == quote => break,
                Some(_) => {}
            }
        }
        self.emit(TokenKind::String);
        true
    }

    fn lex_raw_string(&mut self) -> bool {
        loop {
            match self.next() {
                Some('\u{FFFD}') => return self.error("invalid UTF-8 rune".into()),
                None => return self.error("unterminated raw string".into()),
                Some('`') => break,
                Some(_) => {}
            }
        }
        self.emit(TokenKind::String);
        true
    }

    /// Validates one escape sequence after a backslash.
    fn lex_escape(&mut self, quote: char) -> Result<(), String> {
        let Some(c) = self.next() else {
            return Err("escape sequence not terminated".into());
        };
        let (mut n, base, max): (u32, u32, u32) = match c {
            'a' | 'b' | 'f' | 'n' | 'r' | 't' | 'v' | '\\' => return Ok(()),
            c if c == quote => return Ok(()),
            '0'..='7' => {
                self.pos -= 1;
                (3, 8, 255)
            }
            'x' => (2, 16, 255),
            'u' => (4, 16, 0x10FFFF),
            'U' => (8, 16, 0x10FFFF),
            c => return Err(format!("unknown escape sequence {}", unicode_desc(c))),
        };
        let mut x: u32 = 0;
        while n > 0 {
            let Some(c) = self.next() else {
                return Err("escape sequence not terminated".into());
            };
            let d = c.to_digit(16).unwrap_or(16);
            if d >= base {
                return Err(format!(
                    "illegal character {} in escape sequence",
                    unicode_desc(c)
                ));
            }
            x = x.saturating_mul(base).saturating_add(d);
            n -= 1;
        }
        if x > max || (0xD800..0xE000).contains(&x) {
            return Err("escape sequence is an invalid Unicode code point".into());
        }
        Ok(())
    }
}

/// Go's `%#U`: `U+002E '.'`.
fn unicode_desc(c: char) -> String {
    format!("U+{:04X} '{}'", c as u32, c)
}
