//! Query results as Prometheus' API writes them: times as Unix seconds (numbers), sample values
//! as strings (`"NaN"`, `"+Inf"`), histograms as `{count, sum, buckets}` with each bucket's
//! boundary rule (0: open left, 1: open right, 2: open both, 3: closed both).
//!
//! A result can hold millions of points, so it is written straight to JSON text rather than
//! built as a tree of `serde_json::Value`s first (which cost an allocation a point).

use serde_json::{Map, Value, json};

use crate::promql::{
    engine::{QueryValue, VectorSample},
    format,
    histogram::FloatHistogram,
    value::{Labels, SampleValue, Series},
};

/// `{"resultType": ..., "result": ...}` as JSON text (UTF-8: strings are written by
/// serde_json, everything else is ASCII).
pub(crate) fn result(value: &QueryValue) -> Vec<u8> {
    let mut out = Vec::with_capacity(estimate(value));
    match value {
        QueryValue::Scalar { t, v } => {
            out.extend_from_slice(br#"{"resultType":"scalar","result":["#);
            time(&mut out, *t);
            out.push(b',');
            float(&mut out, *v);
            out.extend_from_slice(b"]}");
        }
        QueryValue::String { t, s } => {
            out.extend_from_slice(br#"{"resultType":"string","result":["#);
            time(&mut out, *t);
            out.push(b',');
            string(&mut out, s);
            out.extend_from_slice(b"]}");
        }
        QueryValue::Vector(samples) => {
            out.extend_from_slice(br#"{"resultType":"vector","result":["#);
            for (i, sample) in samples.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                vector_sample(&mut out, sample);
            }
            out.extend_from_slice(b"]}");
        }
        QueryValue::Matrix(series) => {
            out.extend_from_slice(br#"{"resultType":"matrix","result":["#);
            for (i, s) in series.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                matrix_series(&mut out, s);
            }
            out.extend_from_slice(b"]}");
        }
    }
    out
}

/// About how many bytes the result takes, to allocate once.
fn estimate(value: &QueryValue) -> usize {
    match value {
        QueryValue::Vector(samples) => samples.len() * 128 + 64,
        QueryValue::Matrix(series) => {
            series
                .iter()
                .map(|s| 128 + s.floats.len() * 32 + s.histograms.len() * 256)
                .sum::<usize>()
                + 64
        }
        _ => 128,
    }
}

/// A label set as a JSON object.
pub(super) fn labels(labels: &Labels) -> Value {
    Value::Object(
        labels
            .iter()
            .map(|(n, v)| (n.to_owned(), Value::String(v.to_owned())))
            .collect::<Map<_, _>>(),
    )
}

fn write_labels(out: &mut Vec<u8>, labels: &Labels) {
    out.push(b'{');
    for (i, (name, value)) in labels.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        string(out, name);
        out.push(b':');
        string(out, value);
    }
    out.push(b'}');
}

fn vector_sample(out: &mut Vec<u8>, sample: &VectorSample) {
    out.extend_from_slice(br#"{"metric":"#);
    write_labels(out, &sample.labels);
    match &sample.value {
        SampleValue::Float(v) => {
            out.extend_from_slice(br#","value":["#);
            time(out, sample.t);
            out.push(b',');
            float(out, *v);
        }
        SampleValue::Histogram(h) => {
            out.extend_from_slice(br#","histogram":["#);
            time(out, sample.t);
            out.push(b',');
            histogram(out, h);
        }
    }
    out.extend_from_slice(b"]}");
}

fn matrix_series(out: &mut Vec<u8>, series: &Series) {
    out.extend_from_slice(br#"{"metric":"#);
    write_labels(out, &series.labels);
    if !series.floats.is_empty() {
        out.extend_from_slice(br#","values":["#);
        for (i, p) in series.floats.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.push(b'[');
            time(out, p.t);
            out.push(b',');
            float(out, p.f);
            out.push(b']');
        }
        out.push(b']');
    }
    if !series.histograms.is_empty() {
        out.extend_from_slice(br#","histograms":["#);
        for (i, p) in series.histograms.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.push(b'[');
            time(out, p.t);
            out.push(b',');
            histogram(out, &p.h);
            out.push(b']');
        }
        out.push(b']');
    }
    out.push(b'}');
}

/// A JSON string, escaped.
fn string(out: &mut Vec<u8>, s: &str) {
    // Writing to a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, s);
}

/// Unix seconds: an integer when whole, else with the milliseconds.
fn time(out: &mut Vec<u8>, ms: i64) {
    if ms % 1000 == 0 {
        out.extend_from_slice(itoa::Buffer::new().format(ms / 1000).as_bytes());
    } else {
        format::write_float(out, ms as f64 / 1000.0);
    }
}

/// A value as a JSON string, written as Go's `strconv.FormatFloat(v, 'f', -1, 64)` writes it,
/// with Prometheus' names for the special values.
fn float(out: &mut Vec<u8>, v: f64) {
    out.push(b'"');
    format::write_float(out, v);
    out.push(b'"');
}

fn histogram(out: &mut Vec<u8>, h: &FloatHistogram) {
    let buckets: Vec<Value> = h
        .all_buckets()
        .filter(|b| b.count != 0.0)
        .map(|b| {
            let rule = match (b.lower_inclusive, b.upper_inclusive) {
                (false, true) => 0,
                (true, false) => 1,
                (false, false) => 2,
                (true, true) => 3,
            };
            json!([
                rule,
                format::float(b.lower),
                format::float(b.upper),
                format::float(b.count)
            ])
        })
        .collect();
    let mut object = json!({"count": format::float(h.count), "sum": format::float(h.sum)});
    if !buckets.is_empty() {
        object["buckets"] = Value::Array(buckets);
    }
    let _ = serde_json::to_writer(out, &object);
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::promql::value::FPoint;

    fn text(write: impl FnOnce(&mut Vec<u8>)) -> String {
        let mut out = Vec::new();
        write(&mut out);
        String::from_utf8(out).unwrap_or_default()
    }

    #[test]
    fn floats_and_times_print_as_prometheus_prints_them() {
        assert_eq!(format::float(1.0), "1");
        assert_eq!(format::float(0.1), "0.1");
        assert_eq!(format::float(-0.0), "-0");
        assert_eq!(format::float(1e21), "1000000000000000000000");
        assert_eq!(format::float(1.5e-7), "0.00000015");
        assert_eq!(format::float(f64::NAN), "NaN");
        assert_eq!(format::float(f64::NEG_INFINITY), "-Inf");
        assert_eq!(text(|o| time(o, 1_435_781_451_781)), "1435781451.781");
        assert_eq!(text(|o| time(o, 1_435_781_451_780)), "1435781451.78");
        assert_eq!(text(|o| time(o, 1_000)), "1");
        assert_eq!(text(|o| time(o, -1_500)), "-1.5");
    }

    #[test]
    fn results_are_the_json_prometheus_writes() {
        let labels = Labels::from_pairs([
            ("__name__".to_owned(), "up".to_owned()),
            ("job".to_owned(), "a \"quoted\"\nname".to_owned()),
        ]);
        let matrix = QueryValue::Matrix(vec![Series {
            labels: labels.clone(),
            floats: vec![
                FPoint { t: 1_000, f: 1.5 },
                FPoint {
                    t: 2_500,
                    f: f64::NAN,
                },
            ],
            histograms: Vec::new(),
        }]);
        let written: Value = serde_json::from_slice(&result(&matrix)).unwrap();
        assert_eq!(
            written,
            json!({"resultType": "matrix", "result": [{
                "metric": {"__name__": "up", "job": "a \"quoted\"\nname"},
                "values": [[1, "1.5"], [2.5, "NaN"]],
            }]})
        );
        let vector = QueryValue::Vector(vec![
            VectorSample {
                labels,
                t: 3_000,
                value: SampleValue::Float(f64::INFINITY),
            },
            VectorSample {
                labels: Labels::new(),
                t: 3_000,
                value: SampleValue::Histogram(Arc::new(FloatHistogram::default())),
            },
        ]);
        let written: Value = serde_json::from_slice(&result(&vector)).unwrap();
        assert_eq!(written["resultType"], "vector");
        assert_eq!(written["result"][0]["value"], json!([3, "+Inf"]));
        assert_eq!(
            written["result"][1]["histogram"],
            json!([3, {"count": "0", "sum": "0"}])
        );
        let scalar = QueryValue::Scalar { t: 1_500, v: 2.0 };
        assert_eq!(
            String::from_utf8(result(&scalar)).unwrap(),
            r#"{"resultType":"scalar","result":[1.5,"2"]}"#
        );
        let string = QueryValue::String {
            t: 0,
            s: "a\"b".to_owned(),
        };
        assert_eq!(
            String::from_utf8(result(&string)).unwrap(),
            r#"{"resultType":"string","result":[0,"a\"b"]}"#
        );
    }
}
