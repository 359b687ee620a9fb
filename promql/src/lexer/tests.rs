//! Lexer tests; inputs come from the tables of Prometheus' `promql/parser/lex_test.go`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use TokenKind as T;

/// The tokens of `input` without the final `Eof`.
fn tokens(input: &str) -> Vec<(TokenKind, usize, String)> {
    let mut toks = lex(input);
    assert_eq!(
        toks.last().map(|t| t.kind),
        Some(T::Eof),
        "{input:?}: {toks:?}"
    );
    toks.pop();
    toks.into_iter().map(|t| (t.kind, t.pos, t.val)).collect()
}

fn check(input: &str, want: &[(TokenKind, usize, &str)]) {
    let want: Vec<(TokenKind, usize, String)> = want
        .iter()
        .map(|(k, p, v)| (*k, *p, v.to_string()))
        .collect();
    assert_eq!(tokens(input), want, "{input:?}");
}

fn fails(input: &str) -> String {
    let toks = lex(input);
    match toks.last() {
        Some(t) if t.kind == T::Error => t.val.clone(),
        _ => panic!("{input:?} lexed without error: {toks:?}"),
    }
}

#[test]
fn common() {
    check(",", &[(T::Comma, 0, ",")]);
    check("()", &[(T::LeftParen, 0, "("), (T::RightParen, 1, ")")]);
    check("{}", &[(T::LeftBrace, 0, "{"), (T::RightBrace, 1, "}")]);
    check(
        "[5m]",
        &[
            (T::LeftBracket, 0, "["),
            (T::Duration, 1, "5m"),
            (T::RightBracket, 3, "]"),
        ],
    );
    check(
        "[ 5m]",
        &[
            (T::LeftBracket, 0, "["),
            (T::Duration, 2, "5m"),
            (T::RightBracket, 4, "]"),
        ],
    );
    check(
        "[  5m ]",
        &[
            (T::LeftBracket, 0, "["),
            (T::Duration, 3, "5m"),
            (T::RightBracket, 6, "]"),
        ],
    );
    check("\r\n\r", &[]);
}

#[test]
fn numbers() {
    for n in [
        "1", "4.23", ".3", "5.", "NaN", "nAN", "iNf", "Inf", "0x123", "1e-6", "1_000",
    ] {
        check(n, &[(T::Number, 0, n)]);
    }
    check("NaN 123", &[(T::Number, 0, "NaN"), (T::Number, 4, "123")]);
    check("NaN123", &[(T::Identifier, 0, "NaN123")]);
    check("+Inf", &[(T::Add, 0, "+"), (T::Number, 1, "Inf")]);
    check("-Infoo", &[(T::Sub, 0, "-"), (T::Identifier, 1, "Infoo")]);
    assert_eq!(fails("1a"), "bad number or duration syntax: \"1\"");
    assert_eq!(fails("0a:bc"), "bad number or duration syntax: \"0\"");
    assert_eq!(fails(".٩"), "unexpected character: '.'");
}

#[test]
fn durations() {
    for d in ["5s", "123m", "1h", "3w", "1y", "1h30m", "1m30ms"] {
        check(d, &[(T::Duration, 0, d)]);
    }
}

#[test]
fn strings() {
    check(
        "\"test\\tsequence\"",
        &[(T::String, 0, "\"test\\tsequence\"")],
    );
    check(
        "\"test\\\\.expression\"",
        &[(T::String, 0, "\"test\\\\.expression\"")],
    );
    check(
        "`test\\.expression`",
        &[(T::String, 0, "`test\\.expression`")],
    );
    assert_eq!(
        fails("\"test\\.expression\""),
        "unknown escape sequence U+002E '.'"
    );
    assert_eq!(
        fails("\"\\xZZ\""),
        "illegal character U+005A 'Z' in escape sequence"
    );
    assert_eq!(
        fails("\"\\uD800\""),
        "escape sequence is an invalid Unicode code point"
    );
    assert_eq!(fails("'abc"), "unterminated quoted string");
    assert_eq!(fails("`abc"), "unterminated raw string");
    assert_eq!(fails("\"\u{FFFD}\""), "invalid UTF-8 rune");
}

#[test]
fn identifiers_and_keywords() {
    check("abc", &[(T::Identifier, 0, "abc")]);
    check("a:bc", &[(T::MetricIdentifier, 0, "a:bc")]);
    check(":bc", &[(T::MetricIdentifier, 0, ":bc")]);
    check(
        "abc d",
        &[(T::Identifier, 0, "abc"), (T::Identifier, 4, "d")],
    );
    let words = [
        ("AND", T::Land),
        ("or", T::Lor),
        ("unless", T::Lunless),
        ("atan2", T::Atan2),
        ("sum", T::Sum),
        ("AVG", T::Avg),
        ("GROUP", T::Group),
        ("MAX", T::Max),
        ("stddev", T::Stddev),
        ("limitk", T::Limitk),
        ("offset", T::Offset),
        ("by", T::By),
        ("without", T::Without),
        ("on", T::On),
        ("ignoring", T::Ignoring),
        ("group_left", T::GroupLeft),
        ("group_right", T::GroupRight),
        ("bool", T::Bool),
        ("anchored", T::Anchored),
        ("smoothed", T::Smoothed),
        ("start", T::Start),
        ("end", T::End),
        ("step", T::Step),
        ("range", T::Range),
        ("min_of", T::MinOf),
    ];
    for (w, k) in words {
        check(w, &[(k, 0, w)]);
    }
    check("fill", &[(T::Identifier, 0, "fill")]);
    check(
        "fill ()",
        &[
            (T::Fill, 0, "fill"),
            (T::LeftParen, 5, "("),
            (T::RightParen, 6, ")"),
        ],
    );
    assert!(fails("台北").starts_with("unexpected character: '台'"));
}

#[test]
fn comments() {
    check("# some comment", &[(T::Comment, 0, "# some comment")]);
    check(
        "5 # 1+1\n5",
        &[
            (T::Number, 0, "5"),
            (T::Comment, 2, "# 1+1"),
            (T::Number, 8, "5"),
        ],
    );
}

#[test]
fn operators() {
    let ops = [
        ("=", T::Eql),
        ("==", T::Eqlc),
        ("!=", T::Neq),
        ("<", T::Lss),
        (">", T::Gtr),
        (">=", T::Gte),
        ("<=", T::Lte),
        ("+", T::Add),
        ("-", T::Sub),
        ("*", T::Mul),
        ("/", T::Div),
        ("^", T::Pow),
        ("%", T::Mod),
        ("@", T::At),
        ("</", T::TrimUpper),
        (">/", T::TrimLower),
    ];
    for (o, k) in ops {
        check(o, &[(k, 0, o)]);
    }
    check(
        "{=}",
        &[
            (T::LeftBrace, 0, "{"),
            (T::Eql, 1, "="),
            (T::RightBrace, 2, "}"),
        ],
    );
}

#[test]
fn selectors() {
    check(
        r#"{foo="bar\"bar"}"#,
        &[
            (T::LeftBrace, 0, "{"),
            (T::Identifier, 1, "foo"),
            (T::Eql, 4, "="),
            (T::String, 5, r#""bar\"bar""#),
            (T::RightBrace, 15, "}"),
        ],
    );
    check(
        "{NaN\t!= \"bar\" }",
        &[
            (T::LeftBrace, 0, "{"),
            (T::Identifier, 1, "NaN"),
            (T::Neq, 5, "!="),
            (T::String, 8, "\"bar\""),
            (T::RightBrace, 14, "}"),
        ],
    );
    check(
        r#"{on!~"bar"}"#,
        &[
            (T::LeftBrace, 0, "{"),
            (T::Identifier, 1, "on"),
            (T::NeqRegex, 3, "!~"),
            (T::String, 5, "\"bar\""),
            (T::RightBrace, 10, "}"),
        ],
    );
    for bad in [
        "{台北='a'}",
        "{0a='a'}",
        r#"{alert!#"bar"}"#,
        r#"{foo:a="bar"}"#,
    ] {
        fails(bad);
    }
}

#[test]
fn mismatched_and_common_errors() {
    for bad in [
        "=~", "!~", "!(", "(", "())", "(()", "{", "}", "{{", "{{}}", "[", "[[", "[]]", "[[]]", "]",
    ] {
        fails(bad);
    }
    assert_eq!(fails("())"), "unexpected right parenthesis ')'");
    assert_eq!(fails("]"), "unexpected right bracket ']'");
}

#[test]
fn subqueries() {
    check(
        r#"test:name{on!~"b:ar"}[4m:4s] offset 10m"#,
        &[
            (T::MetricIdentifier, 0, "test:name"),
            (T::LeftBrace, 9, "{"),
            (T::Identifier, 10, "on"),
            (T::NeqRegex, 12, "!~"),
            (T::String, 14, "\"b:ar\""),
            (T::RightBrace, 20, "}"),
            (T::LeftBracket, 21, "["),
            (T::Duration, 22, "4m"),
            (T::Colon, 24, ":"),
            (T::Duration, 25, "4s"),
            (T::RightBracket, 27, "]"),
            (T::Offset, 29, "offset"),
            (T::Duration, 36, "10m"),
        ],
    );
    check(
        "[step()+1]",
        &[
            (T::LeftBracket, 0, "["),
            (T::Step, 1, "step"),
            (T::LeftParen, 5, "("),
            (T::RightParen, 6, ")"),
            (T::Add, 7, "+"),
            (T::Number, 8, "1"),
            (T::RightBracket, 9, "]"),
        ],
    );
}

#[test]
fn descriptions() {
    let t = |kind, val: &str| Token {
        kind,
        pos: 0,
        val: val.to_string(),
    };
    assert_eq!(t(T::Mul, "*").desc(), "<op:*>");
    assert_eq!(t(T::Sum, "sum").desc(), "<aggr:sum>");
    assert_eq!(t(T::GroupLeft, "group_left").desc(), "<group_left>");
    assert_eq!(t(T::Identifier, "foo").desc(), "identifier \"foo\"");
    assert_eq!(t(T::RightBrace, "}").desc(), "\"}\"");
    assert_eq!(t(T::Eof, "").desc(), "end of input");
    assert_eq!(
        t(T::String, "\"abcdefghijkl\"").desc(),
        "string \"\\\"abcdefghi\"..."
    );
    assert_eq!(t(T::Step, "step").desc(), "\"step\"");
}
