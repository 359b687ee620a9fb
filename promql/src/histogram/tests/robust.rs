//! No operation panics, whatever the input: pseudo-random histograms with odd schemas, odd
//! spans (inconsistent with the buckets too), NaN and infinite values, run through everything.

use super::*;

/// A small linear congruential generator: deterministic, no dependencies.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[(self.next() as usize) % items.len()]
    }
}

fn value(r: &mut Lcg) -> f64 {
    r.pick(&[
        0.0,
        1.0,
        2.5,
        -3.0,
        1e300,
        f64::NAN,
        f64::INFINITY,
        0.001,
        7.0,
    ])
}

fn side(r: &mut Lcg) -> (Vec<Span>, Vec<f64>) {
    let n_spans = r.next() % 4;
    let spans: Vec<Span> = (0..n_spans)
        .map(|_| {
            Span::new(
                r.pick(&[-3, 0, 1, 2, 5, -1000, 1023]),
                r.pick(&[0, 1, 2, 3]),
            )
        })
        .collect();
    let mut len: usize = spans.iter().map(|s| s.length as usize).sum();
    if r.next().is_multiple_of(5) {
        len = (len + 1) % 4;
    }
    let buckets = (0..len).map(|_| value(r)).collect();
    (spans, buckets)
}

fn random_histogram(r: &mut Lcg) -> FloatHistogram {
    let (positive_spans, positive_buckets) = side(r);
    let (negative_spans, negative_buckets) = side(r);
    let schema = r.pick(&[-53, -4, -1, 0, 1, 3, 8, 9, -5]);
    let custom_values: Vec<f64> = match r.next() % 3 {
        0 => vec![],
        1 => vec![-1.0, 2.0, 5.0],
        _ => vec![0.5, 1.0],
    };
    FloatHistogram {
        counter_reset_hint: r.pick(&[
            CounterResetHint::Unknown,
            CounterResetHint::Reset,
            CounterResetHint::NotReset,
            CounterResetHint::Gauge,
        ]),
        schema,
        zero_threshold: r.pick(&[0.0, 0.001, 0.5, 1.0]),
        zero_count: value(r),
        count: value(r),
        sum: value(r),
        positive_spans,
        negative_spans,
        positive_buckets,
        negative_buckets,
        custom_values: custom_values.into(),
    }
}

#[test]
fn nothing_panics() {
    let mut r = Lcg(42);
    for _ in 0..3000 {
        let a = random_histogram(&mut r);
        let b = random_histogram(&mut r);
        let mut x = a.clone();
        let _ = x.add(&b);
        let mut y = a.clone();
        let _ = y.sub(&b);
        let mut comp = None;
        let mut z = a.clone();
        let _ = z.kahan_add(&b, &mut comp);
        let _ = z.kahan_add(&a, &mut comp);
        let _ = a.detect_reset(&b);
        let _ = a.copy_to_schema(a.schema - 1);
        let _ = a.equals(&b);
        let _ = a.matches_expected(&b, true);
        let cutoff = r.pick(&[f64::NEG_INFINITY, -2.0, 0.0, 0.7, 3.0, f64::NAN]);
        let _ = a.trim(TrimSide::KeepBelow, cutoff);
        let _ = a.trim(TrimSide::KeepAbove, cutoff);
        let _ = histogram_quantile(r.pick(&[0.0, 0.3, 0.5, 0.99, 1.0]), &a);
        let _ = histogram_fraction(-1.0, cutoff, &a);
        let _ = histogram_stddev(&a);
        let _ = a.to_string();
        let _ = a.describe();
        let _ = a.validate();
        let mut c = a.clone();
        c.compact(r.pick(&[0, 1, 2, usize::MAX]));
        c.mul(-2.0).div(0.0);
        let mut s = HistogramSum::new(&a);
        let _ = s.add(&b);
        let _ = s.finish();
        let mut m = HistogramMean::new(&a);
        let _ = m.add(&b);
        let _ = m.add(&a);
        let _ = m.finish();
    }
}
