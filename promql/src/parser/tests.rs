//! Parser tests; inputs and expected errors largely come from the tables of Prometheus'
//! `promql/parser/parse_test.go`, re-expressed here.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use crate::ast::{
    AtModifier, DurationContext, DurationExpr, Expr, MatchOp, PosRange, ValueType,
    VectorMatchCardinality,
};

fn ok(q: &str) -> Expr {
    match parse(q) {
        Ok(e) => e,
        Err(e) => panic!("{q:?} failed: {e}"),
    }
}

fn err(q: &str) -> String {
    match parse(q) {
        Ok(e) => panic!("{q:?} parsed as {e}"),
        Err(e) => e.to_string(),
    }
}

/// Parses and prints.
fn round(q: &str) -> String {
    ok(q).to_string()
}

#[test]
fn number_literals() {
    let cases: &[(&str, f64)] = &[
        ("1", 1.0),
        ("+Inf", f64::INFINITY),
        ("-Inf", f64::NEG_INFINITY),
        (".5", 0.5),
        ("5.", 5.0),
        ("123.4567", 123.4567),
        ("5e-3", 0.005),
        ("5e3", 5000.0),
        ("0xc", 12.0),
        ("0755", 493.0),
        ("+5.5e-3", 0.0055),
        ("-0755", -493.0),
        ("1_000", 1000.0),
        ("5m", 300.0),
        ("1h30m", 5400.0),
    ];
    for (q, want) in cases {
        match ok(q) {
            Expr::Number(n) => {
                assert_eq!(n.val, *want, "{q}");
                assert_eq!(n.pos, PosRange::new(0, q.len()), "{q}");
            }
            other => panic!("{q}: {other:?}"),
        }
    }
    assert!(matches!(ok("NaN"), Expr::Number(n) if n.val.is_nan()));
}

#[test]
fn precedence_and_associativity() {
    let cases = [
        ("-1^2", "-1 ^ 2"),
        ("-1*2", "-1 * 2"),
        ("1 + 2/(3*1)", "1 + 2 / (3 * 1)"),
        ("2 ^ 3 ^ 2", "2 ^ 3 ^ 2"),
        ("foo + bar or bla and blub", "foo + bar or bla and blub"),
        ("a - -b", "a - -b"),
    ];
    for (q, printed) in cases {
        assert_eq!(round(q), printed, "{q}");
    }
    // -1^2 is -(1^2).
    let Expr::Unary(u) = ok("-1^2") else { panic!() };
    assert!(matches!(*u.expr, Expr::Binary(_)));
    // ^ is right-associative.
    let Expr::Binary(b) = ok("2 ^ 3 ^ 2") else {
        panic!()
    };
    assert!(matches!(*b.rhs, Expr::Binary(_)));
    // `or` binds loosest, `and` tighter.
    let Expr::Binary(b) = ok("foo and bar unless baz or qux") else {
        panic!()
    };
    assert_eq!(b.op, crate::ast::BinaryOp::Or);
    // Unary minus takes operands only up to `^`: (-b) * c.
    let Expr::Binary(b) = ok("-b * c") else {
        panic!()
    };
    assert_eq!(b.op, crate::ast::BinaryOp::Mul);
    assert!(matches!(*b.lhs, Expr::Unary(_)));
}

#[test]
fn unary_positions() {
    let Expr::Unary(u) = ok(" +some_metric") else {
        panic!()
    };
    assert_eq!(u.start, 1);
    assert_eq!(u.expr.pos(), PosRange::new(2, 13));
    let Expr::Unary(u) = ok(r#" +{"some_metric"}"#) else {
        panic!()
    };
    assert_eq!(u.expr.pos(), PosRange::new(2, 17));
}

#[test]
fn scalar_and_lexer_errors() {
    let cases = [
        (
            "",
            "unknown position: parse error: no expression found in input",
        ),
        (
            "# just a comment\n\n",
            "1:1: parse error: no expression found in input",
        ),
        ("1+", "1:3: parse error: unexpected end of input"),
        (".", "1:1: parse error: unexpected character: '.'"),
        (
            "2.5.",
            "1:1: parse error: bad number or duration syntax: \"2.5.\"",
        ),
        (
            "100..4",
            "1:1: parse error: bad number or duration syntax: \"100..\"",
        ),
        (
            "0deadbeef",
            "1:1: parse error: bad number or duration syntax: \"0de\"",
        ),
        ("1 /", "1:4: parse error: unexpected end of input"),
        ("*1", "1:1: parse error: unexpected <op:*>"),
        ("(1))", "1:5: parse error: unexpected right parenthesis ')'"),
        ("((1)", "1:5: parse error: unclosed left parenthesis"),
        ("(", "1:2: parse error: unclosed left parenthesis"),
        (
            "1 and 1",
            "1:1: parse error: set operator \"and\" not allowed in binary scalar expression",
        ),
        (
            "1 == 1",
            "1:3: parse error: comparisons between scalars must use BOOL modifier",
        ),
        (
            "1 !~ 1",
            "1:3: parse error: unexpected character after '!': '~'",
        ),
        (
            "1 =~ 1",
            "1:3: parse error: unexpected character after '=': '~'",
        ),
        (
            r#"-"string""#,
            "1:1: parse error: unary expression only allowed on expressions of type scalar or instant vector, got \"string\"",
        ),
        (
            "-test[5m]",
            "1:1: parse error: unary expression only allowed on expressions of type scalar or instant vector, got \"range vector\"",
        ),
        ("@@", "1:1: parse error: unexpected <op:@>"),
        (
            "1 offset 1d",
            "1:1: parse error: offset modifier must be preceded by an instant vector selector or range vector selector or a subquery",
        ),
        (
            "foo offset 1s offset 2s",
            "1:1: parse error: offset may not be set multiple times",
        ),
        (
            "a - on(b) ignoring(c) d",
            "1:11: parse error: unexpected <ignoring>",
        ),
        (
            "foo + group_left(baz) bar",
            "1:7: parse error: unexpected <group_left>",
        ),
    ];
    for (q, want) in cases {
        assert_eq!(err(q), want, "{q:?}");
    }
    let long = "9".repeat(309);
    assert_eq!(
        err(&long),
        format!(
            "1:1: parse error: error parsing number: strconv.ParseFloat: parsing \"{long}\": value out of range"
        )
    );
}

#[test]
fn vector_matching() {
    let Expr::Binary(b) = ok("bar + on(foo) bla / on(baz, buz) group_right(test) blub") else {
        panic!()
    };
    let vm = b.matching.clone().unwrap_or_default();
    assert!(vm.on);
    assert_eq!(vm.matching_labels, ["foo"]);
    let Expr::Binary(inner) = *b.rhs else {
        panic!()
    };
    let vm = inner.matching.unwrap_or_default();
    assert_eq!(vm.card, VectorMatchCardinality::OneToMany);
    assert_eq!(vm.include, ["test"]);
    assert_eq!(vm.matching_labels, ["baz", "buz"]);

    let Expr::Binary(b) = ok("foo and on() bar") else {
        panic!()
    };
    let vm = b.matching.unwrap_or_default();
    assert_eq!(vm.card, VectorMatchCardinality::ManyToMany);
    assert!(vm.on && vm.matching_labels.is_empty());

    // Scalar operands drop the matching.
    let Expr::Binary(b) = ok("foo == 1") else {
        panic!()
    };
    assert!(b.matching.is_none());
    let Expr::Binary(b) = ok("foo == bool 1") else {
        panic!()
    };
    assert!(b.return_bool);
}

#[test]
fn vector_matching_errors() {
    let cases = [
        (
            "foo and 1",
            "1:1: parse error: set operator \"and\" not allowed in binary scalar expression",
        ),
        (
            "1 or on(bar) foo",
            "1:1: parse error: vector matching only allowed between instant vectors",
        ),
        (
            "foo == on(bar) 10",
            "1:1: parse error: vector matching only allowed between instant vectors",
        ),
        (
            "foo and on(bar) group_left(baz) bar",
            "1:1: parse error: no grouping allowed for \"and\" operation",
        ),
        (
            "foo unless on(bar) group_right(baz) bar",
            "1:1: parse error: no grouping allowed for \"unless\" operation",
        ),
        (
            r#"http_requests{group="production"} + on(instance) group_left(job,instance) cpu_count{type="smp"}"#,
            "1:35: parse error: label \"instance\" must not occur in ON and GROUP clause at once",
        ),
        (
            "foo + bool bar",
            "1:5: parse error: bool modifier can only be used on comparison operators",
        ),
        (
            "foo and bool 10",
            "1:5: parse error: bool modifier can only be used on comparison operators",
        ),
        (
            "foo + fill(0) 1",
            "1:1: parse error: filling in missing series only allowed between instant vectors",
        ),
        (
            "foo or fill(0) bar",
            "1:1: parse error: filling in missing series not allowed for set operators",
        ),
    ];
    for (q, want) in cases {
        assert_eq!(err(q), want, "{q:?}");
    }
}

#[test]
fn fill_modifiers() {
    let cases = [
        ("a + fill(0) b", "a + fill (0) b"),
        (
            "a + fill_left(5) fill_right(7) b",
            "a + fill_left (5) fill_right (7) b",
        ),
        (
            "a + fill_right(-Inf) fill_left(NaN) b",
            "a + fill_left (NaN) fill_right (-Inf) b",
        ),
        (
            "a + on(x) group_left fill(1e6) b",
            "a + on (x) group_left () fill (1e+06) b",
        ),
        ("a == bool fill(30) b", "a == bool fill (30) b"),
        // Without a following parenthesis the words are metric names.
        ("fill + fill(0) other", "fill + fill (0) other"),
        ("other + fill_left", "other + fill_left"),
    ];
    for (q, printed) in cases {
        assert_eq!(round(q), printed, "{q}");
    }
    let Expr::Binary(b) = ok("a + fill_left(5) b") else {
        panic!()
    };
    let fill = b.matching.unwrap_or_default().fill;
    assert_eq!((fill.lhs, fill.rhs), (Some(5.0), None));
}

#[test]
fn selectors() {
    let vs = |q: &str| match ok(q) {
        Expr::VectorSelector(vs) => vs,
        other => panic!("{q}: {other:?}"),
    };
    let s = vs(r#"foo:bar{a="bc"}"#);
    assert_eq!(s.name, "foo:bar");
    assert_eq!(s.matchers.len(), 2);
    assert_eq!(s.matchers[1].name, "__name__");
    assert_eq!(s.pos, PosRange::new(0, 15));

    let s = vs(r#"{"foo"}"#);
    assert_eq!(s.name, "");
    assert_eq!(s.matchers[0].value, "foo");

    let s = vs(r#"{'foo\'bar', 'a\\dos\\path'='boo\\urns'}"#);
    assert_eq!(s.matchers[0].value, "foo'bar");
    assert_eq!(s.matchers[1].name, r"a\dos\path");
    assert_eq!(s.matchers[1].value, r"boo\urns");

    let s = vs(r#"foo{a="b", foo!="bar", test=~"test", bar!~"baz",}"#);
    let ops: Vec<MatchOp> = s.matchers.iter().map(|m| m.op).collect();
    assert_eq!(
        ops,
        [
            MatchOp::Equal,
            MatchOp::NotEqual,
            MatchOp::Regex,
            MatchOp::NotRegex,
            MatchOp::Equal
        ]
    );
    assert_eq!(s.pos, PosRange::new(0, 49));

    for q in [
        "min",
        "offset{step=\"1s\"}",
        "anchored{job=\"test\"}",
        "step",
        "sum",
    ] {
        vs(q);
    }
    let s = vs("foo offset 5m");
    assert_eq!(s.literal_offset_ms(), Some(300_000));
    assert_eq!(s.pos, PosRange::new(0, 13));
    assert_eq!(vs("foo offset -7m").literal_offset_ms(), Some(-420_000));
    assert_eq!(vs("foo OFFSET 1h30m").literal_offset_ms(), Some(5_400_000));
    assert_eq!(vs("foo OFFSET 1m30ms").literal_offset_ms(), Some(60_030));
    for (q, ms) in [
        ("foo @ 1603774568", 1_603_774_568_000),
        ("foo @ -100", -100_000),
        ("foo @ .3", 300),
        ("foo @ 3.", 3000),
        ("foo @ 3.33", 3330),
        ("foo @ 3.3333", 3333),
        ("foo @ 3.3335", 3334),
        ("foo @ 3e2", 300_000),
        ("foo @ 3e-1", 300),
        ("foo @ 0xA", 10_000),
        ("foo @ -3.3e1", -33_000),
    ] {
        assert_eq!(vs(q).at, Some(AtModifier::Timestamp(ms)), "{q}");
    }
    assert_eq!(vs("foo @ start()").at, Some(AtModifier::Start));
    assert_eq!(vs("foo @ end()").at, Some(AtModifier::End));
}

#[test]
fn selector_errors() {
    let cases = [
        (
            "foo @ +Inf",
            "1:1: parse error: timestamp out of bounds for @ modifier: +Inf",
        ),
        (
            "foo @ -Inf",
            "1:1: parse error: timestamp out of bounds for @ modifier: -Inf",
        ),
        (
            "foo @ NaN",
            "1:1: parse error: timestamp out of bounds for @ modifier: NaN",
        ),
        (
            "{",
            "1:2: parse error: unexpected end of input inside braces",
        ),
        ("}", "1:1: parse error: unexpected character: '}'"),
        (
            "some{",
            "1:6: parse error: unexpected end of input inside braces",
        ),
        ("some}", "1:5: parse error: unexpected character: '}'"),
        (
            "some_metric{a=b}",
            "1:15: parse error: unexpected identifier \"b\" in label matching, expected string",
        ),
        (
            "some_metric{a:b=\"b\"}",
            "1:14: parse error: unexpected character inside braces: ':'",
        ),
        (
            "foo{a*\"b\"}",
            "1:6: parse error: unexpected character inside braces: '*'",
        ),
        (
            "foo{a>=\"b\"}",
            "1:6: parse error: unexpected character inside braces: '>'",
        ),
        (
            "foo{gibberish}",
            "1:14: parse error: unexpected \"}\" in label matching, expected label matching operator",
        ),
        (
            "foo{1}",
            "1:5: parse error: unexpected character inside braces: '1'",
        ),
        (
            "{}",
            "1:1: parse error: vector selector must contain at least one non-empty matcher",
        ),
        (
            "{x=\"\"}",
            "1:1: parse error: vector selector must contain at least one non-empty matcher",
        ),
        (
            "{x=~\".*\"}",
            "1:1: parse error: vector selector must contain at least one non-empty matcher",
        ),
        (
            "{x!~\".+\"}",
            "1:1: parse error: vector selector must contain at least one non-empty matcher",
        ),
        (
            "{x!=\"a\"}",
            "1:1: parse error: vector selector must contain at least one non-empty matcher",
        ),
        (
            "foo{__name__=\"bar\"}",
            "1:1: parse error: metric name must not be set twice: \"foo\" or \"bar\"",
        ),
        (
            "foo{__name__= =}",
            "1:15: parse error: unexpected \"=\" in label matching, expected string",
        ),
        (
            "foo{,}",
            "1:5: parse error: unexpected \",\" in label matching, expected identifier or \"}\"",
        ),
        (
            "foo{__name__ == \"bar\"}",
            "1:15: parse error: unexpected \"=\" in label matching, expected string",
        ),
        (
            "foo{__name__=\"bar\" lol}",
            "1:20: parse error: unexpected identifier \"lol\" in label matching, expected \",\" or \"}\"",
        ),
        (
            "foo{\"a\"=}",
            "1:9: parse error: unexpected \"}\" in label matching, expected string",
        ),
        (
            "foo @ 1 @ 2",
            "1:1: parse error: @ <timestamp> may not be set multiple times",
        ),
        (
            "foo[5m] offset 1m offset 2m",
            "1:1: parse error: offset may not be set multiple times",
        ),
        (
            "foo offset 1m[5m]",
            "1:14: parse error: no offset modifiers allowed before range",
        ),
        (
            "foo @ 1[5m]",
            "1:8: parse error: no @ modifiers allowed before range",
        ),
        (
            "(foo)[5m]",
            "1:6: parse error: ranges only allowed for vector selectors",
        ),
        ("foo[5m", "1:7: parse error: unclosed left bracket"),
        (
            "foo[0m]",
            "1:5: parse error: duration must be greater than 0",
        ),
        (
            "foo[5m:0]",
            "1:8: parse error: duration must be greater than 0",
        ),
        (
            "foo[5m 3m]",
            "1:8: parse error: unexpected duration \"3m\" in subquery or range, expected \":\" or \"]\"",
        ),
        (
            "foo offset",
            "1:11: parse error: unexpected end of input in offset, expected number, duration, step(), or range()",
        ),
        (
            "foo @",
            "1:6: parse error: unexpected end of input in @, expected timestamp",
        ),
        (
            "foo[5m] anchored smoothed",
            "1:1: parse error: anchored and smoothed modifiers cannot be used together",
        ),
        (
            "foo[5m:1m] anchored",
            "1:1: parse error: anchored modifier is not supported for subqueries",
        ),
        (
            r#"foo{a=~"("}"#,
            "1:5: parse error: error parsing regexp: unclosed group: `^(?s:()$`",
        ),
    ];
    for (q, want) in cases {
        assert_eq!(err(q), want, "{q:?}");
    }
}

#[test]
fn functions_and_aggregations() {
    let cases = [
        ("sum by (foo) (some_metric)", "sum by (foo) (some_metric)"),
        (
            "sum (some_metric) by (foo,bar,)",
            "sum by (foo, bar) (some_metric)",
        ),
        (
            "avg without (foo) (some_metric)",
            "avg without (foo) (some_metric)",
        ),
        ("sum by () (some_metric)", "sum(some_metric)"),
        ("topk(5, some_metric)", "topk(5, some_metric)"),
        (
            "count_values(\"value\", some_metric)",
            "count_values(\"value\", some_metric)",
        ),
        ("sum by (\"foo.bar\") (x)", "sum by (\"foo.bar\") (x)"),
        (
            "sum by (on, offset, start) (x)",
            "sum by (on, offset, start) (x)",
        ),
        ("limitk(2, x)", "limitk(2, x)"),
        ("rate(some_metric[5m])", "rate(some_metric[5m])"),
        ("time()", "time()"),
        ("round(some_metric, 5)", "round(some_metric, 5)"),
        (
            "label_join(x, \"a\", \",\", \"b\", \"c\", \"d\")",
            "label_join(x, \"a\", \",\", \"b\", \"c\", \"d\")",
        ),
        ("info(x, {k=\"v\"})", "info(x, {k=\"v\"})"),
        ("info(x, {k=~\".*\"})", "info(x, {k=~\".*\"})"),
        (
            "step() + range() * start() - end()",
            "step() + range() * start() - end()",
        ),
        ("min_of(3, 5)", "min_of(3, 5)"),
    ];
    for (q, printed) in cases {
        assert_eq!(round(q), printed, "{q}");
    }
    assert_eq!(ok("time()").value_type(), ValueType::Scalar);
    assert_eq!(ok("rate(x[1m])").value_type(), ValueType::Vector);
}

#[test]
fn function_and_aggregation_errors() {
    let cases = [
        (
            "sum(some_metric) by (foo) (bar)",
            "1:27: parse error: unexpected \"(\"",
        ),
        (
            "sum()",
            "1:1: parse error: no arguments for aggregate expression provided",
        ),
        (
            "sum(1, 2)",
            "1:1: parse error: wrong number of arguments for aggregate expression provided, expected 1, got 2",
        ),
        (
            "topk(some_metric)",
            "1:1: parse error: wrong number of arguments for aggregate expression provided, expected 2, got 1",
        ),
        (
            "topk(some_metric, other_metric)",
            "1:6: parse error: expected type scalar in aggregation parameter, got instant vector",
        ),
        (
            "count_values(5, other_metric)",
            "1:14: parse error: expected type string in aggregation parameter, got scalar",
        ),
        (
            "sum(rate(x[5m])[5m:])",
            "1:5: parse error: expected type instant vector in aggregation expression, got range vector",
        ),
        (
            "sum by (foo bar) (x)",
            "1:13: parse error: unexpected identifier \"bar\" in grouping opts, expected \",\" or \")\"",
        ),
        (
            "sum by (1) (x)",
            "1:9: parse error: unexpected number \"1\" in grouping opts, expected label",
        ),
        (
            "sum by foo (x)",
            "1:8: parse error: unexpected identifier \"foo\" in grouping opts, expected \"(\"",
        ),
        (
            "sum(foo bar)",
            "1:9: parse error: unexpected identifier \"bar\" in aggregation",
        ),
        (
            "non_existent_function_far_bar()",
            "1:1: parse error: unknown function with name \"non_existent_function_far_bar\"",
        ),
        (
            "rate(some_metric)",
            "1:6: parse error: expected type range vector in call to function \"rate\", got instant vector",
        ),
        (
            "floor()",
            "1:1: parse error: expected 1 argument(s) in call to \"floor\", got 0",
        ),
        (
            "floor(some_metric, other_metric)",
            "1:1: parse error: expected 1 argument(s) in call to \"floor\", got 2",
        ),
        (
            "floor(some_metric, 1)",
            "1:1: parse error: expected 1 argument(s) in call to \"floor\", got 2",
        ),
        ("label_replace(a, `b`, `c\\xff`, `d`, `.*`)", "ok"),
        (
            "round(a, 1, 2)",
            "1:1: parse error: expected at most 2 argument(s) in call to \"round\", got 3",
        ),
        (
            "label_join()",
            "1:1: parse error: expected at least 3 argument(s) in call to \"label_join\", got 0",
        ),
        (
            "rate(x[5m],)",
            "1:11: parse error: trailing commas not allowed in function call args",
        ),
        (
            "info(x, y)",
            "1:9: parse error: expected label selectors only, got vector selector instead",
        ),
        (
            "info(x, 1)",
            "1:1: parse error: expected type instant vector in call to function \"info\", got scalar",
        ),
        (
            "START()",
            "1:1: parse error: unknown function with name \"START\"",
        ),
    ];
    for (q, want) in cases {
        if want == "ok" {
            ok(q);
            continue;
        }
        assert_eq!(err(q), want, "{q:?}");
    }
}

#[test]
fn subqueries_and_ranges() {
    let cases = [
        ("foo[5m:]", "foo[5m:]"),
        ("foo[5m:1m] offset 10m", "foo[5m:1m] offset 10m"),
        (
            "min_over_time(rate(foo{bar=\"baz\"}[2s])[5m:])[4m:3s]",
            "min_over_time(rate(foo{bar=\"baz\"}[2s])[5m:])[4m:3s]",
        ),
        (
            "(foo + bar)[5m:1m] @ 100 offset -1m",
            "(foo + bar)[5m:1m] @ 100.000 offset -1m",
        ),
        ("foo[1800]", "foo[30m]"),
        ("test[1000ms]", "test[1s]"),
        ("foo[5m] @ start() offset 1m", "foo[5m] @ start() offset 1m"),
        ("foo[5m] anchored", "foo[5m] anchored"),
        ("foo smoothed", "foo smoothed"),
        ("rate(foo[5m] smoothed)", "rate(foo[5m] smoothed)"),
    ];
    for (q, printed) in cases {
        assert_eq!(round(q), printed, "{q}");
    }
    let Expr::Subquery(s) = ok("foo[5m:]") else {
        panic!()
    };
    assert!(s.step.is_none());
    assert_eq!(s.end, 8);
}

#[test]
fn duration_expressions() {
    let ctx = DurationContext {
        step_ms: 10_000,
        range_ms: 60_000,
    };
    let range_ms = |q: &str| match ok(q) {
        Expr::Call(c) => match &c.args[0] {
            Expr::MatrixSelector(m) => m.range.to_ms(&ctx, false).unwrap_or(-1),
            Expr::Subquery(s) => s.range.to_ms(&ctx, false).unwrap_or(-1),
            other => panic!("{other:?}"),
        },
        Expr::MatrixSelector(m) => m.range.to_ms(&ctx, false).unwrap_or(-1),
        other => panic!("{other:?}"),
    };
    let cases = [
        ("changes(x[26m+4m])", 1_800_000),
        ("changes(x[60*30])", 1_800_000),
        ("changes(x[2m*(10+5)])", 1_800_000),
        ("changes(x[24m+((1.5*2m)+2m)])", 1_740_000),
        ("changes(x[-5m+35m])", 1_800_000),
        ("changes(x[1h/2])", 1_800_000),
        ("changes(x[1h30m % 1h])", 1_800_000),
        ("changes(x[30m1s-30m1s % 1m])", 1_800_000),
        ("count_over_time(x[step()])", 10_000),
        ("count_over_time(x[1+(STep()-5)*2])", 11_000),
        ("count_over_time(x[min_of(step()+1,1h)])", 11_000),
        (
            "count_over_time(x[((max_of(min_of((step()+1),((1h))),1ms)))])",
            11_000,
        ),
        ("count_over_time(x[range()])", 60_000),
        ("x[2^3]", 8_000),
        ("x[-2^2 + 10]", 6_000),
    ];
    for (q, ms) in cases {
        assert_eq!(range_ms(q), ms, "{q}");
    }
    let offset_ms = |q: &str| -> (String, i64) {
        let e = ok(q);
        let mut node = &e;
        while let Expr::Binary(b) = node {
            node = &b.lhs;
        }
        let Expr::VectorSelector(vs) = node else {
            panic!("{q}")
        };
        let ms = vs
            .offset
            .as_ref()
            .map_or(0, |d| d.to_ms(&ctx, true).unwrap_or(i64::MIN));
        (e.to_string(), ms)
    };
    let cases = [
        ("m offset (100 + 2)", "m offset (100 + 2)", 102_000),
        ("m offset 100 + 2", "m offset 1m40s + 2", 100_000),
        ("m offset 2 ^ 2", "m offset 2s ^ 2", 2_000),
        ("m offset -2 ^ 2", "m offset -2s ^ 2", -2_000),
        ("m offset (2 ^ 2)", "m offset (2 ^ 2)", 4_000),
        ("m offset -2 * 2", "m offset -2s * 2", -2_000),
        ("m offset (-2 * 2)", "m offset (-2 * 2)", -4_000),
        ("m offset (-2 ^ 2)", "m offset (-2 ^ 2)", -4_000),
        ("m offset STEP()", "m offset step()", 10_000),
        ("m offset step()*0", "m offset step() * 0", 10_000),
        ("m offset (-step()*2)", "m offset (-step() * 2)", -20_000),
        ("m offset -step()*2", "m offset -step() * 2", -10_000),
        (
            "m offset min_of(step(), 1s)+8000",
            "m offset min_of(step(), 1s) + 8000",
            1_000,
        ),
        (
            "m offset -min_of(step(), 1s)^0",
            "m offset -min_of(step(), 1s) ^ 0",
            -1_000,
        ),
        (
            "m offset -(min_of(step(), 1s))+8000",
            "m offset -(min_of(step(), 1s)) + 8000",
            -1_000,
        ),
        ("m offset +(5)", "m offset (5)", 5_000),
        ("m offset -(5)", "m offset -(5)", -5_000),
        ("m offset range()", "m offset range()", 60_000),
    ];
    for (q, printed, ms) in cases {
        assert_eq!(offset_ms(q), (printed.to_string(), ms), "{q}");
    }
    let Expr::MatrixSelector(m) = ok("foo[(5s)]") else {
        panic!()
    };
    assert!(matches!(m.range, DurationExpr::Paren { .. }));
    assert_eq!(m.to_string(), "foo[(5s)]");
    assert_eq!(m.range.literal_ms(), Some(5_000));
    let Expr::MatrixSelector(m) = ok("foo[step()]") else {
        panic!()
    };
    assert_eq!(m.range.literal_ms(), None);
    let instant = DurationContext::default();
    assert_eq!(
        m.range.to_ms(&instant, false).map_err(|e| e.message),
        Err("duration must be greater than 0".to_string())
    );
}

#[test]
fn duration_expression_errors() {
    let cases = [
        ("foo[5m/0]", "1:7: parse error: division by zero"),
        ("foo[5m%0]", "1:7: parse error: modulo by zero"),
        (
            "foo[5m+]",
            "1:8: parse error: unexpected \"]\" in subquery or range selector, expected number, duration, step(), or range()",
        ),
        ("foo[5m:1m:1m]", "1:10: parse error: unexpected colon ':'"),
        (
            "foo[:1m]",
            "1:5: parse error: unexpected colon before duration in duration expression",
        ),
        (
            "foo[bar]",
            "1:5: parse error: unexpected character in duration expression: 'b'",
        ),
        (
            "foo[",
            "1:5: parse error: unexpected end of input in duration expression",
        ),
        (
            "foo[1.5h]",
            "1:5: parse error: unknown unit \".\" in duration \"1.5h\"",
        ),
    ];
    for (q, want) in cases {
        assert_eq!(err(q), want, "{q:?}");
    }
}

#[test]
fn extended_range_function_checks() {
    ok("rate(foo[3m] smoothed)");
    ok("increase(foo[3m] anchored)");
    ok("resets(foo[3m] anchored)");
    let e = parse("deriv(foo[3m] smoothed)")
        .err()
        .unwrap_or(ParseErrors(vec![]));
    assert_eq!(e.first().map(|e| e.kind), Some(ErrorKind::Execution));
    assert_eq!(
        e.to_string(),
        "smoothed modifier can only be used with: delta, increase, rate - not with deriv"
    );
    assert_eq!(
        err("max_over_time(foo[3m] anchored)"),
        "anchored modifier can only be used with: changes, delta, increase, rate, resets - not with max_over_time"
    );
}

#[test]
fn strings() {
    let Expr::String(s) = ok(r#""a\xc5z""#) else {
        panic!()
    };
    assert_eq!(s.invalid_utf8.as_deref(), Some(&b"a\xc5z"[..]));
    assert_eq!(ok(r#""a\xc5z""#).to_string(), r#""a\xc5z""#);
    let Expr::String(s) = ok(r#"'it\'s \u00e9 \101'"#) else {
        panic!()
    };
    assert_eq!(s.val, "it's é A");
    let Expr::String(s) = ok(r"`raw\n`") else {
        panic!()
    };
    assert_eq!(s.val, r"raw\n");
    assert_eq!(
        err(r#""test\.expression""#),
        "1:1: parse error: unknown escape sequence U+002E '.'"
    );
    assert_eq!(
        err("\"unterminated"),
        "1:1: parse error: unterminated quoted string"
    );
}

#[test]
fn comments_and_whitespace() {
    assert_eq!(round("foo # comment\n + bar"), "foo + bar");
    assert_eq!(round("sum(\n  rate(x[5m])\n)"), "sum(rate(x[5m]))");
    assert_eq!(
        err("foo +\n\n bar baz"),
        "3:6: parse error: unexpected identifier \"baz\""
    );
}

#[test]
fn metric_selector_api() {
    let m = parse_metric_selector(r#"foo{a="b", c=~"d.*"}"#).unwrap_or_default();
    assert_eq!(m.len(), 3);
    assert!(m[1].matches("dxx") && !m[1].matches("xd"));
    assert_eq!(m[2].value, "foo");
    assert!(parse_metric_selector("{}").is_ok_and(|m| m.is_empty()));
    assert!(parse_metric_selector("foo + bar").is_err());
    assert!(parse_metric_selector("rate(foo[5m])").is_err());
}

#[test]
fn regex_matchers_are_anchored() {
    let m = parse_metric_selector(r#"{a=~"b|c", d!~"x.*"}"#).unwrap_or_default();
    assert!(m[0].matches("b") && m[0].matches("c") && !m[0].matches("bc") && !m[0].matches("ab"));
    assert!(!m[1].matches("xyz") && m[1].matches("yx"));
    let m = parse_metric_selector(r#"{a=~"x.y"}"#).unwrap_or_default();
    assert!(m[0].matches("x\ny"), "dot matches newlines");
}

#[test]
fn durations() {
    let cases = [
        ("0", Ok(0)),
        ("5m", Ok(300_000)),
        ("1h30m", Ok(5_400_000)),
        ("1y", Ok(31_536_000_000)),
        ("2w", Ok(1_209_600_000)),
        ("10s53ms", Ok(10_053)),
        ("", Err("empty duration string")),
        ("5", Err("not a valid duration string: \"5\"")),
        ("1m1h", Err("not a valid duration string: \"1m1h\"")),
        ("1x", Err("unknown unit \"x\" in duration \"1x\"")),
        ("-5m", Err("not a valid duration string: \"-5m\"")),
        ("300y", Err("duration out of range")),
    ];
    for (s, want) in cases {
        let got = parse_duration(s).map_err(|e| e.0);
        assert_eq!(got, want.map_err(str::to_string), "{s:?}");
    }
}

#[test]
fn printer() {
    let cases = [
        (
            r#"a{b="c",d!~"e"} @ 10 offset 5m"#,
            r#"a{b="c",d!~"e"} @ 10.000 offset 5m"#,
        ),
        (
            r#"{"foo.bar"="x", __name__="m"}"#,
            r#"{"foo.bar"="x",__name__="m"}"#,
        ),
        (
            "sum without (a) (rate(x[1h:5m]))",
            "sum without (a) (rate(x[1h:5m]))",
        ),
        (
            "a + ignoring (b) group_left (c) d",
            "a + ignoring (b) group_left (c) d",
        ),
        (
            "1e100",
            "10000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000",
        ),
        ("foo offset 0", "foo"),
        ("x[90d]", "x[90d]"),
        ("x[14d]", "x[2w]"),
        ("x[1y]", "x[1y]"),
        ("-5m", "-5m"),
        ("\"a\\\"b\\n\"", "\"a\\\"b\\n\""),
        ("x </ 2 >/ 1", "x </ 2 >/ 1"),
    ];
    for (q, printed) in cases {
        assert_eq!(round(q), printed, "{q}");
    }
}

#[test]
fn function_table_is_sorted_and_complete() {
    use crate::ast::{FUNCTIONS, lookup_function};
    assert!(FUNCTIONS.windows(2).all(|w| w[0].name < w[1].name));
    for name in [
        "info",
        "first_over_time",
        "ts_of_max_over_time",
        "sort_by_label",
        "double_exponential_smoothing",
        "mad_over_time",
        "histogram_quantiles",
        "histogram_fraction",
        "start",
        "end",
        "range",
        "step",
        "min_of",
        "max_of",
        "start_timestamp",
    ] {
        assert!(lookup_function(name).is_some(), "{name}");
    }
    // Prometheus 2's name, kept beside the new one.
    assert!(lookup_function("holt_winters").is_some());
}

#[test]
fn series_descriptions() {
    let d = parse_series_description(
        r#"metric{a="b"} 1 2 _ stale 1+2x3 _x2 1x2 -1-1x2 0x2 1e-6 -Inf NaN"#,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        d.labels,
        vec![
            ("__name__".to_string(), "metric".to_string()),
            ("a".to_string(), "b".to_string())
        ]
    );
    use SeriesItem::{Float as F, Omitted as O, Stale};
    let want = vec![
        F(1.0),
        F(2.0),
        O,
        Stale,
        F(1.0),
        F(3.0),
        F(5.0),
        F(7.0),
        O,
        O,
        F(1.0),
        F(1.0),
        F(1.0),
        F(-1.0),
        F(-2.0),
        F(-3.0),
        F(0.0),
        F(0.0),
        F(0.0),
        F(1e-6),
        F(f64::NEG_INFINITY),
    ];
    assert_eq!(d.values[..want.len()], want[..]);
    assert!(matches!(d.values[want.len()], F(v) if v.is_nan()));
    assert_eq!(
        f64::from_bits(STALE_NAN_BITS).to_bits(),
        0x7ff0_0000_0000_0002
    );

    let d = parse_series_description("{} 1 2").unwrap_or_else(|e| panic!("{e}"));
    assert!(d.labels.is_empty());
    let d = parse_series_description(r#"{__name__="x", "a.b"="c"} 1"#)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(d.labels[0].0, "__name__");
    assert_eq!(d.labels[1].0, "a.b");
    assert!(parse_series_description("metric 1 2x").is_err());
    assert!(parse_series_description("metric 1 abc").is_err());
}

#[test]
fn histogram_series_descriptions() {
    let hist = |s: &str| -> Vec<HistogramItem> {
        parse_series_description(s)
            .unwrap_or_else(|e| panic!("{s}: {e}"))
            .values
            .into_iter()
            .filter_map(|v| match v {
                SeriesItem::Histogram(h) => Some(*h),
                _ => None,
            })
            .collect()
    };
    let h = hist(
        "m {{schema:1 sum:3 count:22 buckets:[5 10 7] z_bucket:1 z_bucket_w:0.001 offset:-1 n_buckets:[1 2] n_offset:2 counter_reset_hint:gauge}}",
    );
    assert_eq!(h.len(), 1);
    let h0 = &h[0];
    assert_eq!(
        (h0.schema, h0.sum, h0.count, h0.offset, h0.n_offset),
        (1, 3.0, 22.0, -1, 2)
    );
    assert_eq!(h0.buckets, [5.0, 10.0, 7.0]);
    assert_eq!(h0.n_buckets, [1.0, 2.0]);
    assert_eq!(h0.counter_reset_hint, CounterResetHint::Gauge);
    assert!(h0.counter_reset_hint_set);

    assert_eq!(hist("m {{}}x3").len(), 4);
    assert_eq!(hist("m {{ }}").len(), 1);
    let h = hist(
        "m {{schema:0 sum:4 count:4 buckets:[1 2 1]}}+{{sum:2 count:1 buckets:[1] offset:1}}x2",
    );
    assert_eq!(h.len(), 3);
    assert_eq!(h[2].buckets, [1.0, 4.0, 1.0]);
    assert_eq!((h[2].sum, h[2].count), (8.0, 6.0));
    let h = hist(
        "m {{schema:-1 sum:4 count:1 buckets:[1] offset:1}}+{{schema:0 sum:4 count:4 buckets:[2 2] offset:1}}x1",
    );
    // Schema 0 buckets 1 and 2 both fall into schema -1 bucket 1.
    assert_eq!((h[1].schema, h[1].offset), (-1, 1));
    assert_eq!(h[1].buckets, [5.0]);
    let h = hist(
        "m {{schema:0 sum:4 count:4 buckets:[1 2 1]}}-{{schema:0 sum:1 count:1 buckets:[1]}}x1",
    );
    assert_eq!(h[1].buckets, [0.0, 2.0, 1.0]);
    let h = hist(
        "m {{schema:-53 sum:1 count:1 custom_values:[5 10] buckets:[1]}}+{{schema:-53 sum:1 count:1 custom_values:[5 10] buckets:[1]}}x2",
    );
    assert_eq!(h[2].buckets, [3.0]);
    assert_eq!(h[2].custom_values, [5.0, 10.0]);
    assert!(parse_series_description("m {{schema:1}}+{{schema:0}}x1").is_err());
    assert!(parse_series_description("m {{schema:1 schema:2}}").is_err());
    assert!(parse_series_description("m {{foo:1}}").is_err());
    assert!(parse_series_description("m {{schema:0}}+{{schema:1}}x2").is_ok());
    assert!(parse_series_description("m {{schema:2}}+{{schema:1}}x2").is_err());
}

/// Runs `work` on a thread with the server's stack, as a query runs in the server.
fn on_server_stack<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(strata_limits::THREAD_STACK_BYTES)
        .spawn(work)
        .unwrap()
        .join()
        .unwrap()
}

#[test]
fn nesting_is_bounded_before_it_can_exhaust_the_stack() {
    let limit = MAX_PROMQL_DEPTH;
    let message = format!("nests deeper than {limit} levels");
    on_server_stack(move || {
        let parens = |n: usize| format!("{}1{}", "(".repeat(n), ")".repeat(n));
        let chain = |n: usize| vec!["x"; n].join(" + ");
        // At the limit: parsed.
        assert!(parse(&parens(limit - 1)).is_ok());
        assert!(parse(&chain(limit)).is_ok());
        // Past it, by the parser's nesting, by the tree's depth, by the bound over tokens.
        for query in [
            parens(limit),
            chain(limit + 1),
            format!("{}1", "-".repeat(limit + 1)),
            format!("x[{}5m{}]", "(".repeat(limit), ")".repeat(limit)),
            format!("x[{}]", vec!["5m"; limit * 10].join(" + ")),
            chain(1_000_000),
            parens(1_000_000),
        ] {
            let error = err(&query);
            assert!(error.contains(&message), "{}: {error}", &query[..20]);
            assert!(error.starts_with("1:1: parse error: "), "{error}");
        }
    });
}
