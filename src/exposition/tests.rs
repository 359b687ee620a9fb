//! The cases of ../shared/conformance/expfmt/INPUTS.md, by their numbers.

use super::*;

fn ok(body: &str) -> Exposition {
    parse(body).unwrap_or_else(|e| panic!("{body:?}: {e}"))
}

fn one(body: &str) -> Sample {
    let parsed = ok(body);
    assert_eq!(parsed.samples.len(), 1, "{body:?}");
    parsed.samples[0].clone()
}

fn err(body: &str) -> ParseError {
    match parse(body) {
        Ok(parsed) => panic!("{body:?} parsed: {parsed:?}"),
        Err(error) => error,
    }
}

fn labels(sample: &Sample) -> Vec<(&str, &str)> {
    sample
        .labels
        .iter()
        .map(|(l, v)| (l.as_str(), v.as_str()))
        .collect()
}

#[test]
fn line_structure() {
    assert!(ok("").samples.is_empty()); // 1
    assert!(ok("\n\n").samples.is_empty()); // 2
    assert_eq!(one("up 1").value, 1.0); // 3: accepted without the last newline
    assert_eq!(one("  up 1\n").value, 1.0); // 4
    assert_eq!(one("up\t1\n").value, 1.0); // 5
    assert_eq!(one("up    1\n").value, 1.0);
    assert_eq!(one("up 1\r\n").value, 1.0); // 6: CRLF accepted
    assert!(ok("# some free comment\n").samples.is_empty()); // 7
    let plain = ok("#HELP up x\n"); // 8
    assert!(plain.families.is_empty());
    assert!(ok("# HELP\n").families.is_empty()); // 9
    assert_eq!(ok("# HELP up\n").families["up"].help.as_deref(), Some("")); // 9b
    assert!(err("# TYPE up\n").reason.contains("invalid metric type")); // 9c
}

#[test]
fn help_and_type() {
    let parsed = ok("# HELP up The \"up\" metric\n"); // 10
    assert_eq!(
        parsed.families["up"].help.as_deref(),
        Some("The \"up\" metric")
    );
    let parsed = ok("# HELP m a\\\\b\\nc \\\"q\\\"\n"); // 11
    assert_eq!(
        parsed.families["m"].help.as_deref(),
        Some("a\\b\nc \\\"q\\\"")
    );
    let parsed = ok("# TYPE m counter\n# TYPE m gauge\n"); // 12: the server's choice, the last
    assert_eq!(parsed.families["m"].kind, Some(MetricType::Gauge));
    for bad in ["Counter", "gaugehistogram", "info"] {
        // 13
        assert!(
            err(&format!("# TYPE m {bad}\n"))
                .reason
                .contains("invalid metric type")
        );
    }
    assert_eq!(one("# TYPE m_total counter\nm_total 1\n").name, "m_total"); // 14
    assert_eq!(ok("m 1\n# TYPE m gauge\n").samples.len(), 1); // 15
    assert!(ok("# UNIT m seconds\n").families.is_empty()); // 16
}

#[test]
fn names_and_labels() {
    assert_eq!(one("a:b_c:d 1\n").name, "a:b_c:d"); // 17
    assert!(one("m{} 1\n").labels.is_empty()); // 18
    assert_eq!(labels(&one("m{a=\"1\",} 1\n")), [("a", "1")]); // 19
    assert_eq!(
        labels(&one("m{a=\"1\" , b = \"2\"} 1\n")),
        [("a", "1"), ("b", "2")]
    ); // 20
    assert!(err("m{a=\"1\",a=\"2\"} 1\n").reason.contains("twice")); // 21
    assert!(
        err("{__name__=\"x\"} 1\n")
            .reason
            .contains("metric name not set")
    ); // 22
    assert_eq!(labels(&one("m{a=\"x\\\"y\"} 1\n")), [("a", "x\"y")]); // 23
    assert_eq!(labels(&one("m{a=\"x\\\\y\"} 1\n")), [("a", "x\\y")]); // 24
    assert_eq!(labels(&one("m{a=\"x\\ny\"} 1\n")), [("a", "x\ny")]); // 25
    assert_eq!(labels(&one("m{a=\"x\\ty\"} 1\n")), [("a", "x\\ty")]); // 26
    err("m{a=\"x\"y\"} 1\n"); // 27
    err("m{a='x'} 1\n"); // 28
    assert!(err("m{1a=\"x\"} 1\n").reason.contains("invalid label name")); // 29
    err("m{a-b=\"x\"} 1\n");
    err("m{a=\"x} 1\n"); // 30
    assert_eq!(labels(&one("m{a=\"€ ünïcödé\"} 1\n")), [("a", "€ ünïcödé")]); // 31
    let quoted = one("{\"my.metric\", job=\"x\"} 1\n"); // 32
    assert_eq!(
        (quoted.name.as_str(), labels(&quoted)),
        ("my.metric", vec![("job", "x")])
    );
    assert_eq!(labels(&one("m{a=\"}\"} 1\n")), [("a", "}")]); // 33
    assert_eq!(labels(&one("m{a=\",\"} 1\n")), [("a", ",")]);
}

#[test]
fn values() {
    for (text, value) in [
        ("1e3", 1000.0),
        ("-1.5E-3", -0.0015),
        (".5", 0.5),
        ("5.", 5.0),
    ] {
        assert_eq!(one(&format!("m {text}\n")).value, value, "{text}"); // 34
    }
    assert!(one("m NaN\n").value.is_nan()); // 35
    assert!(one("m nan\n").value.is_nan());
    for (text, positive) in [
        ("+Inf", true),
        ("-Inf", false),
        ("Inf", true),
        ("inf", true),
        ("+inf", true),
    ] {
        let value = one(&format!("m {text}\n")).value; // 36
        assert!(value.is_infinite() && (value > 0.0) == positive, "{text}");
    }
    for bad in ["0x1A", "0x1p4", "1_000", "abc", "--1", "e5"] {
        err(&format!("m {bad}\n")); // 37, 38, 41
    }
    err("m\n"); // 39
    err("m \n");
    assert!(err("m 1 2 3\n").reason.contains("more than")); // 40
    assert_eq!(one("m 9223372036854775808\n").value, 9.223372036854776e18); // 42
    let zero = one("m -0\n").value; // 43
    assert!(zero == 0.0 && zero.is_sign_negative());
}

#[test]
fn timestamps() {
    assert_eq!(
        one("m 1 1700000000000\n").timestamp,
        Some(1_700_000_000_000)
    ); // 44
    assert_eq!(one("m 1 -1\n").timestamp, Some(-1)); // 45: a signed integer, on purpose
    assert!(err("m 1 1.5\n").reason.contains("not a timestamp")); // 46
    assert!(
        err("m 1 99999999999999999999\n")
            .reason
            .contains("out of range")
    ); // 47
    err("m 1 1700000000000 extra\n"); // 48
}

#[test]
fn histograms_and_summaries_keep_one_identity_per_series() {
    let parsed = ok(concat!(
        "# TYPE h histogram\n",
        "h_bucket{le=\"0.1\"} 1\n",
        "h_bucket{le=\"1\"} 2\n",
        "h_bucket{le=\"+inf\"} 3\n",
        "h_sum 2.5\n",
        "h_count 3\n",
        "# TYPE s summary\n",
        "s{quantile=\"0.5\"} 1\n",
        "s{quantile=\"0.99\"} NaN\n",
        "s_sum 10\n",
        "s_count 5\n",
    )); // 49, 50, 52
    let les: Vec<&str> = parsed.samples[..3]
        .iter()
        .map(|s| s.labels[0].1.as_str())
        .collect();
    assert_eq!(les, ["0.1", "1.0", "+Inf"]);
    assert_eq!(family_of("h_bucket", &parsed.families), "h");
    assert_eq!(family_of("s_count", &parsed.families), "s");
    assert!(parsed.samples[6].value.is_nan());
    assert_eq!(parsed.samples.len(), 9);
    // 51, 53, 54: accepted as the server's parser accepts them.
    ok("# TYPE h histogram\nh_bucket{le=\"0.1\"} 1\nother 1\nh_bucket{} 2\n");
    let bad = err("# TYPE h histogram\nh_bucket{le=\"big\"} 1\n");
    assert_eq!(bad.line, 2);
}

#[test]
fn grouping_and_duplicates_are_left_to_ingestion() {
    assert_eq!(ok("a 1\nb 1\na 2\n").samples.len(), 3); // 55
    assert_eq!(ok("a 1\na 2\n").samples.len(), 2); // 56
}

#[test]
fn a_refusal_names_its_line() {
    let error = err("up 1\n# HELP x y\nbad{ 1\n");
    assert_eq!(error.line, 3);
    assert!(error.to_string().starts_with("line 3: "), "{error}");
}
