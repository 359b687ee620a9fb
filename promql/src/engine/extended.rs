//! The extended range selectors: `anchored` (the window starts with the last sample before
//! it) and `smoothed` (the values at both window boundaries are interpolated), and the rate
//! computation over them.

use crate::value::FPoint;

/// The value at `t` on the line through `p1` and `p2`. For a counter that went down between
/// them, the line starts from zero (the reset).
pub(crate) fn interpolate(p1: FPoint, p2: FPoint, t: i64, is_counter: bool) -> f64 {
    let y1 = if is_counter && p2.f < p1.f { 0.0 } else { p1.f };
    let y2 = p2.f;
    y1 + (y2 - y1) * (t - p1.t) as f64 / (p2.t - p1.t) as f64
}

/// The index of the last sample at or before `mint`, or 0 if there is none.
fn first_index(floats: &[FPoint], mint: i64) -> usize {
    let last = floats.len().saturating_sub(1);
    let searched = floats.get(..last).unwrap_or(&[]);
    searched.partition_point(|p| p.t <= mint).saturating_sub(1)
}

/// For smoothed windows, the index of the first sample at or after `maxt` (or the last one).
fn last_index(floats: &[FPoint], maxt: i64, smoothed: bool) -> usize {
    let last = floats.len().saturating_sub(1);
    if !smoothed {
        return last;
    }
    let searched = floats.get(..last).unwrap_or(&[]);
    searched.partition_point(|p| p.t < maxt)
}

fn left_value(floats: &[FPoint], first: usize, mint: i64, smoothed: bool, is_counter: bool) -> f64 {
    match (floats.get(first), floats.get(first + 1)) {
        (Some(a), Some(b)) if smoothed && a.t < mint => interpolate(*a, *b, mint, is_counter),
        (Some(a), _) => a.f,
        _ => f64::NAN,
    }
}

fn right_value(floats: &[FPoint], last: usize, maxt: i64, smoothed: bool, is_counter: bool) -> f64 {
    let prev = last.checked_sub(1).and_then(|i| floats.get(i));
    match (prev, floats.get(last)) {
        (Some(a), Some(b)) if smoothed && b.t > maxt => interpolate(*a, *b, maxt, is_counter),
        (_, Some(b)) => b.f,
        _ => f64::NAN,
    }
}

/// The samples of an extended window (`floats` reaching back before `mint`, and for
/// `smoothed` past `maxt`) turned into the samples of `(mint, maxt]` plus one sample at each
/// boundary: the last one before `mint` (anchored) or the interpolated value (smoothed).
pub(crate) fn extend_floats(
    floats: &[FPoint],
    mint: i64,
    maxt: i64,
    smoothed: bool,
) -> Vec<FPoint> {
    let mut first = first_index(floats, mint);
    let mut last = last_index(floats, maxt, smoothed);
    match floats.get(last) {
        Some(p) if p.t > mint => {}
        _ => return Vec::new(),
    }
    let left = left_value(floats, first, mint, smoothed, false);
    let right = right_value(floats, last, maxt, smoothed, false);
    if floats.get(first).is_some_and(|p| p.t <= mint) {
        first += 1;
    }
    if floats.get(last).is_some_and(|p| p.t >= maxt) {
        last = last.wrapping_sub(1);
    }
    let mut out = Vec::with_capacity(floats.len() + 2);
    out.push(FPoint { t: mint, f: left });
    if last != usize::MAX && first <= last {
        out.extend_from_slice(floats.get(first..=last).unwrap_or(&[]));
    }
    out.push(FPoint { t: maxt, f: right });
    out
}

/// `rate`, `increase` and `delta` over an anchored or smoothed window (`floats` as
/// [`extend_floats`] takes them), `range_secs` the range in seconds. `None` when the window
/// holds nothing usable.
pub(crate) fn extended_rate(
    floats: &[FPoint],
    mint: i64,
    maxt: i64,
    smoothed: bool,
    is_counter: bool,
    rate_secs: Option<f64>,
) -> Option<f64> {
    let mut first = first_index(floats, mint);
    let mut last = last_index(floats, maxt, smoothed);
    if floats.get(last)?.t <= mint {
        return None;
    }
    // Smoothing interpolates between samples on both sides of the window; with every sample
    // after it there is nothing to interpolate from.
    if smoothed && floats.first()?.t > maxt {
        return None;
    }
    let left = left_value(floats, first, mint, smoothed, is_counter);
    let right = right_value(floats, last, maxt, smoothed, is_counter);
    let mut result = right - left;
    if is_counter {
        if floats.get(first).is_some_and(|p| p.t <= mint) {
            first += 1;
        }
        if floats.get(last).is_some_and(|p| p.t >= maxt) {
            last = last.wrapping_sub(1);
        }
        let inner = if last != usize::MAX && first <= last {
            floats.get(first..=last).unwrap_or(&[])
        } else {
            &[]
        };
        let mut correction = 0.0;
        let mut prev = left;
        for p in inner {
            if p.f < prev {
                correction += prev;
            }
            prev = p.f;
        }
        if right < prev {
            correction += prev;
        }
        result += correction;
    }
    if let Some(secs) = rate_secs {
        result /= secs;
    }
    Some(result)
}
