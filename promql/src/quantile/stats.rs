//! Moments of native histograms, compensated summation, and quantiles of plain values.

use super::FloatHistogram;

/// Adds `inc` to the Kahan–Babuška sum `(sum, c)`: returns the new sum and compensation. The
/// compensated result is `sum + c`; an infinite sum resets the compensation to zero.
pub fn kahan_sum_inc(inc: f64, sum: f64, c: f64) -> (f64, f64) {
    let t = sum + inc;
    let c = if t.is_infinite() {
        0.0
    } else if sum.abs() >= inc.abs() {
        c + ((sum - t) + inc)
    } else {
        c + ((inc - t) + sum)
    };
    (t, c)
}

/// Subtracts `dec` from the Kahan–Babuška sum `(sum, c)`.
pub fn kahan_sum_dec(dec: f64, sum: f64, c: f64) -> (f64, f64) {
    let t = sum - dec;
    let c = if t.is_infinite() {
        0.0
    } else if sum.abs() >= dec.abs() {
        c + ((sum - t) - dec)
    } else {
        c + ((-dec - t) + sum)
    };
    (t, c)
}

/// The mean of floats as `avg` and `avg_over_time` compute it: a compensated sum divided by
/// the count while the sum stays finite, an incremental mean from the first overflow on.
#[derive(Debug, Clone, Copy)]
pub struct FloatMean {
    count: f64,
    sum: f64,
    mean: f64,
    c: f64,
    incremental: bool,
}

impl FloatMean {
    /// A mean starting with `first`.
    pub fn new(first: f64) -> FloatMean {
        FloatMean {
            count: 1.0,
            sum: first,
            mean: first,
            c: 0.0,
            incremental: false,
        }
    }

    pub fn add(&mut self, value: f64) {
        self.count += 1.0;
        let n = self.count;
        if !self.incremental {
            let (sum, c) = kahan_sum_inc(value, self.sum, self.c);
            if !sum.is_infinite() {
                (self.sum, self.c) = (sum, c);
                return;
            }
            self.incremental = true;
            self.mean = self.sum / (n - 1.0);
            self.c /= n - 1.0;
        }
        let q = (n - 1.0) / n;
        (self.mean, self.c) = kahan_sum_inc(value / n, q * self.mean, q * self.c);
    }

    pub fn count(&self) -> f64 {
        self.count
    }

    pub fn finish(&self) -> f64 {
        if self.incremental {
            self.mean + self.c
        } else {
            self.sum / self.count + self.c / self.count
        }
    }
}

/// `histogram_avg`: the mean of the observations, `sum / count`.
pub fn histogram_avg(h: &FloatHistogram) -> f64 {
    h.sum / h.count
}

/// `histogram_stdvar`: the variance of the observations estimated from the buckets, each
/// bucket's observations taken at one value: the arithmetic mean of its bounds for custom
/// buckets, zero for the zero bucket, the geometric mean of its bounds for exponential buckets.
/// The mean is `sum / count`.
pub fn histogram_stdvar(h: &FloatHistogram) -> f64 {
    let mean = h.sum / h.count;
    let (mut variance, mut c) = (0.0, 0.0);
    for b in h.all_buckets() {
        if b.count == 0.0 {
            continue;
        }
        let value = if h.uses_custom_buckets() {
            (b.upper + b.lower) / 2.0
        } else if b.lower <= 0.0 && b.upper >= 0.0 {
            0.0
        } else {
            let geometric = (b.upper * b.lower).sqrt();
            if b.upper < 0.0 { -geometric } else { geometric }
        };
        let delta = value - mean;
        (variance, c) = kahan_sum_inc(b.count * delta * delta, variance, c);
    }
    (variance + c) / h.count
}

/// `histogram_stddev`: the square root of [`histogram_stdvar`].
pub fn histogram_stddev(h: &FloatHistogram) -> f64 {
    histogram_stdvar(h).sqrt()
}

/// The φ-quantile of `values` (sorted in place), interpolating linearly between the two
/// nearest values; NaN values sort first. NaN for no values or a NaN `q`, `-Inf` for `q < 0`,
/// `+Inf` for `q > 1`.
pub fn quantile(q: f64, values: &mut [f64]) -> f64 {
    if values.is_empty() || q.is_nan() {
        return f64::NAN;
    }
    if q < 0.0 {
        return f64::NEG_INFINITY;
    }
    if q > 1.0 {
        return f64::INFINITY;
    }
    values.sort_by(|a, b| match (a.is_nan(), b.is_nan()) {
        (true, true) => std::cmp::Ordering::Equal,
        (true, false) => std::cmp::Ordering::Less,
        (false, true) => std::cmp::Ordering::Greater,
        (false, false) => a.total_cmp(b),
    });
    let n = values.len() as f64;
    let rank = q * (n - 1.0);
    let lower = rank.floor().max(0.0);
    let upper = (lower + 1.0).min(n - 1.0);
    let weight = rank - rank.floor();
    let at = |i: f64| values.get(i as usize).copied().unwrap_or(f64::NAN);
    at(lower) * (1.0 - weight) + at(upper) * weight
}
