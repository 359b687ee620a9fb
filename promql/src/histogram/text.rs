//! Text forms: the `{{...}}` notation of Prometheus' test scripts (which Prometheus prints in
//! test failures), the bucket listing of its `String()` method, and Go's `%g` for floats.

use std::fmt;

use super::{CounterResetHint, FloatHistogram};

/// `value` as Go's `%g` prints it: the shortest digits that read back to the same float, in
/// exponent form when the decimal exponent is below -4 or at least 6: `1e+06`, `123456`,
/// `1.5e-05`, `0.0001`, `+Inf`, `NaN`.
pub fn format_go_float(value: f64) -> String {
    if value.is_nan() {
        return "NaN".to_string();
    }
    if value.is_infinite() {
        return if value > 0.0 { "+Inf" } else { "-Inf" }.to_string();
    }
    if value == 0.0 {
        return if value.is_sign_negative() { "-0" } else { "0" }.to_string();
    }
    // Rust's `{:e}` gives the shortest round-tripping digits: "-1.2345e-7".
    let sci = format!("{value:e}");
    let (mantissa, exponent) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let negative = mantissa.starts_with('-');
    let digits: String = mantissa.chars().filter(|c| c.is_ascii_digit()).collect();
    let mut out = String::new();
    if negative {
        out.push('-');
    }
    if !(-4..6).contains(&exponent) {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push('e');
        out.push(if exponent < 0 { '-' } else { '+' });
        out.push_str(&format!("{:02}", exponent.unsigned_abs()));
    } else if exponent < 0 {
        out.push_str("0.");
        for _ in 0..(-exponent - 1) {
            out.push('0');
        }
        out.push_str(&digits);
    } else {
        let point = exponent as usize + 1;
        if digits.len() <= point {
            out.push_str(&digits);
            for _ in digits.len()..point {
                out.push('0');
            }
        } else {
            out.push_str(&digits[..point]);
            out.push('.');
            out.push_str(&digits[point..]);
        }
    }
    out
}

/// The test-script notation, as Prometheus prints histograms in test output: fields that are
/// zero (or unknown) are left out, the buckets are shown compacted into one span per side.
/// `{{schema:1 count:22 sum:3 z_bucket:1 z_bucket_w:0.001 offset:1 buckets:[5 10 7]}}`.
impl fmt::Display for FloatHistogram {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut h = self.clone();
        h.compact(usize::MAX);
        let mut parts: Vec<String> = Vec::new();
        if h.schema != 0 {
            parts.push(format!("schema:{}", h.schema));
        }
        if h.count != 0.0 {
            parts.push(format!("count:{}", format_go_float(h.count)));
        }
        if h.sum != 0.0 {
            parts.push(format!("sum:{}", format_go_float(h.sum)));
        }
        if h.zero_count != 0.0 {
            parts.push(format!("z_bucket:{}", format_go_float(h.zero_count)));
        }
        if h.zero_threshold != 0.0 {
            parts.push(format!("z_bucket_w:{}", format_go_float(h.zero_threshold)));
        }
        if h.uses_custom_buckets() {
            parts.push(format!("custom_values:{}", float_list(&h.custom_values)));
        }
        if h.counter_reset_hint != CounterResetHint::Unknown {
            parts.push(format!(
                "counter_reset_hint:{}",
                h.counter_reset_hint.as_str()
            ));
        }
        for (spans, buckets, offset_key, buckets_key) in [
            (&h.positive_spans, &h.positive_buckets, "offset", "buckets"),
            (
                &h.negative_spans,
                &h.negative_buckets,
                "n_offset",
                "n_buckets",
            ),
        ] {
            if let Some(span) = spans.first().filter(|s| s.offset != 0) {
                parts.push(format!("{offset_key}:{}", span.offset));
            }
            if !buckets.is_empty() {
                parts.push(format!("{buckets_key}:{}", float_list(buckets)));
            }
        }
        write!(f, "{{{{{}}}}}", parts.join(" "))
    }
}

impl FloatHistogram {
    /// The listing Prometheus' `String()` gives: count, sum and the populated buckets from the
    /// lowest to the highest, `{count:6, sum:3.5, [-2,-1):1, [-0.001,0.001]:2, (1,2]:3}`.
    pub fn describe(&self) -> String {
        let mut out = format!(
            "{{count:{}, sum:{}",
            format_go_float(self.count),
            format_go_float(self.sum)
        );
        let negative: Vec<_> = self.negative_buckets().filter(|b| b.count != 0.0).collect();
        for b in negative.iter().rev() {
            out.push_str(&format!(", {b}"));
        }
        if self.zero_count != 0.0 && !self.uses_custom_buckets() {
            out.push_str(&format!(", {}", self.zero_bucket()));
        }
        for b in self.positive_buckets().filter(|b| b.count != 0.0) {
            out.push_str(&format!(", {b}"));
        }
        out.push('}');
        out
    }
}

fn float_list(values: &[f64]) -> String {
    let items: Vec<String> = values.iter().map(|v| format_go_float(*v)).collect();
    format!("[{}]", items.join(" "))
}
