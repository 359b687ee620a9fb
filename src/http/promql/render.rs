//! Query results as Prometheus' API writes them: times as Unix seconds (numbers), sample values
//! as strings (`"NaN"`, `"+Inf"`), histograms as `{count, sum, buckets}` with each bucket's
//! boundary rule (0: open left, 1: open right, 2: open both, 3: closed both).

use serde_json::{Map, Value, json};

use crate::promql::{
    engine::{QueryValue, VectorSample},
    histogram::FloatHistogram,
    value::{Labels, SampleValue, Series},
};

/// `{"resultType": ..., "result": ...}`.
pub(super) fn result(value: &QueryValue) -> Value {
    match value {
        QueryValue::Scalar { t, v } => {
            json!({"resultType": "scalar", "result": [time(*t), float(*v)]})
        }
        QueryValue::String { t, s } => json!({"resultType": "string", "result": [time(*t), s]}),
        QueryValue::Vector(samples) => json!({
            "resultType": "vector",
            "result": samples.iter().map(vector_sample).collect::<Vec<_>>(),
        }),
        QueryValue::Matrix(series) => json!({
            "resultType": "matrix",
            "result": series.iter().map(matrix_series).collect::<Vec<_>>(),
        }),
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

fn vector_sample(sample: &VectorSample) -> Value {
    match &sample.value {
        SampleValue::Float(v) => {
            json!({"metric": labels(&sample.labels), "value": [time(sample.t), float(*v)]})
        }
        SampleValue::Histogram(h) => {
            json!({"metric": labels(&sample.labels), "histogram": [time(sample.t), histogram(h)]})
        }
    }
}

fn matrix_series(series: &Series) -> Value {
    let mut object = Map::new();
    object.insert("metric".to_owned(), labels(&series.labels));
    if !series.floats.is_empty() {
        object.insert(
            "values".to_owned(),
            Value::Array(
                series
                    .floats
                    .iter()
                    .map(|p| json!([time(p.t), float(p.f)]))
                    .collect(),
            ),
        );
    }
    if !series.histograms.is_empty() {
        object.insert(
            "histograms".to_owned(),
            Value::Array(
                series
                    .histograms
                    .iter()
                    .map(|p| json!([time(p.t), histogram(&p.h)]))
                    .collect(),
            ),
        );
    }
    Value::Object(object)
}

/// Unix seconds: an integer when whole, else with the milliseconds.
fn time(ms: i64) -> Value {
    if ms % 1000 == 0 {
        json!(ms / 1000)
    } else {
        json!(ms as f64 / 1000.0)
    }
}

/// A value as Go's `strconv.FormatFloat(v, 'f', -1, 64)` writes it, with Prometheus' names
/// for the special values.
pub(super) fn float(v: f64) -> Value {
    Value::String(float_text(v))
}

fn float_text(v: f64) -> String {
    if v.is_nan() {
        "NaN".to_owned()
    } else if v == f64::INFINITY {
        "+Inf".to_owned()
    } else if v == f64::NEG_INFINITY {
        "-Inf".to_owned()
    } else {
        // Rust prints the shortest digits that read back, never in exponent form: as Go's 'f'.
        format!("{v}")
    }
}

fn histogram(h: &FloatHistogram) -> Value {
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
                float_text(b.lower),
                float_text(b.upper),
                float_text(b.count)
            ])
        })
        .collect();
    let mut object = json!({"count": float_text(h.count), "sum": float_text(h.sum)});
    if !buckets.is_empty() {
        object["buckets"] = Value::Array(buckets);
    }
    object
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_print_as_prometheus_prints_them() {
        assert_eq!(float_text(1.0), "1");
        assert_eq!(float_text(0.1), "0.1");
        assert_eq!(float_text(-0.0), "-0");
        assert_eq!(float_text(1e21), "1000000000000000000000");
        assert_eq!(float_text(1.5e-7), "0.00000015");
        assert_eq!(float_text(f64::NAN), "NaN");
        assert_eq!(float_text(f64::NEG_INFINITY), "-Inf");
        assert_eq!(time(1_435_781_451_781), json!(1435781451.781));
        assert_eq!(time(1_000), json!(1));
    }
}
