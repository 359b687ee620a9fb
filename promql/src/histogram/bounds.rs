//! Bucket boundaries: the exponential bounds of schemas -4 to 8 and the custom bounds of
//! schema -53, and the mapping of a bucket index to a coarser schema.
//!
//! The fractions `2^(k/256)` of the finest schema are computed once, in double-double
//! arithmetic, and rounded to the nearest `f64`. Prometheus ships a precomputed table whose
//! entries sit up to three units in the last place below the correctly rounded values; bounds
//! here can therefore differ from Prometheus' in the last digits (never for powers of two).

use std::sync::OnceLock;

use super::{EXPONENTIAL_SCHEMA_MAX, is_custom_buckets_schema};

/// The upper bound of bucket `index` (the lower bound is the upper bound of `index - 1`). For
/// custom buckets, index -1 is `-Inf` and index `custom_values.len()` is `+Inf`.
pub(super) fn bucket_bound(index: i32, schema: i32, custom_values: &[f64]) -> f64 {
    if is_custom_buckets_schema(schema) {
        if index < 0 {
            return f64::NEG_INFINITY;
        }
        return custom_values
            .get(index as usize)
            .copied()
            .unwrap_or(f64::INFINITY);
    }
    exponential_bound(index, schema)
}

/// The upper bound of bucket `index` in the exponential `schema`. The last bucket below the
/// one counting infinite observations ends at `f64::MAX` rather than at the (unrepresentable)
/// next power of two.
pub(super) fn exponential_bound(index: i32, schema: i32) -> f64 {
    if schema < 0 {
        let exp = i64::from(index) << (-schema).min(16);
        if exp == 1024 {
            return f64::MAX;
        }
        return ldexp(1.0, exp);
    }
    let schema = schema.min(EXPONENTIAL_SCHEMA_MAX);
    let per_octave = 1i64 << schema;
    let index = i64::from(index);
    let frac_index = index & (per_octave - 1);
    let frac = fractions()[(frac_index << (EXPONENTIAL_SCHEMA_MAX - schema)) as usize];
    let exp = (index >> schema) + 1;
    if frac == 0.5 && exp == 1025 {
        return f64::MAX;
    }
    ldexp(frac, exp)
}

/// The index in `target` schema of the bucket that contains bucket `index` of `origin` schema
/// (`target <= origin`, both exponential).
pub(super) fn target_index(index: i32, origin: i32, target: i32) -> i32 {
    let shift = origin.saturating_sub(target).clamp(0, 31);
    (index.wrapping_sub(1) >> shift).wrapping_add(1)
}

/// `x · 2^exp`, exact unless the result leaves the range of normal numbers.
pub(super) fn ldexp(mut x: f64, mut exp: i64) -> f64 {
    while exp > 1023 {
        x *= pow2(1023);
        exp -= 1023;
        if x.is_infinite() {
            return x;
        }
    }
    while exp < -1022 {
        x *= pow2(-1022);
        exp += 1022;
        if x == 0.0 {
            return x;
        }
    }
    x * pow2(exp as i32)
}

/// `2^k` for `-1022 <= k <= 1023`.
fn pow2(k: i32) -> f64 {
    f64::from_bits(((k + 1023) as u64) << 52)
}

/// `2^(k/256) / 2` for k in 0..256: the fractions in `[0.5, 1)` where buckets of schema 8 end.
fn fractions() -> &'static [f64; 256] {
    static TABLE: OnceLock<[f64; 256]> = OnceLock::new();
    TABLE.get_or_init(|| {
        // roots[j] = 2^(2^j / 256), each a double-double (high, low).
        let mut roots = [(0.0, 0.0); 8];
        let mut root = (2.0, 0.0);
        for slot in roots.iter_mut().rev() {
            root = dd_sqrt(root);
            *slot = root;
        }
        let mut table = [0.0; 256];
        for (k, entry) in table.iter_mut().enumerate() {
            let mut value = (0.5, 0.0);
            for (j, root) in roots.iter().enumerate() {
                if k & (1 << j) != 0 {
                    value = dd_mul(value, *root);
                }
            }
            *entry = value.0 + value.1;
        }
        table
    })
}

fn two_sum(a: f64, b: f64) -> (f64, f64) {
    let s = a + b;
    let bb = s - a;
    (s, (a - (s - bb)) + (b - bb))
}

fn dd_mul(a: (f64, f64), b: (f64, f64)) -> (f64, f64) {
    let p = a.0 * b.0;
    let e = a.0.mul_add(b.0, -p) + (a.0 * b.1 + a.1 * b.0);
    two_sum(p, e)
}

fn dd_sqrt(a: (f64, f64)) -> (f64, f64) {
    let s = a.0.sqrt();
    let r = -s.mul_add(s, -a.0) + a.1;
    two_sum(s, r / (2.0 * s))
}
