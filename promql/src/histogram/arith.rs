//! Addition and subtraction of histograms, plain and Kahan-compensated.
//!
//! Both histograms must use exponential schemas, or both custom buckets. Exponential operands
//! meet at the lower of the two schemas and at the wider of the two zero buckets (widened
//! further if a threshold would cut a populated bucket). Custom-bucket operands with different
//! bounds are both mapped onto the bounds they share, buckets rolled up into the next shared
//! bound (or `+Inf`).

use super::bounds::exponential_bound;
use super::layout::{entries, from_entries};
use super::{
    AddOutcome, CounterResetHint, FloatHistogram, HistogramError, is_exponential_schema,
    kahan_sum_dec, kahan_sum_inc,
};

/// A bucket being accumulated: index, value, compensation.
type Cell = (i32, f64, f64);

/// How values are accumulated: plain sums, or Kahan–Babuška with a compensation term.
#[derive(Clone, Copy)]
struct Acc {
    kahan: bool,
}

impl Acc {
    /// Adds `inc` (and its own compensation `inc_c`) to `(sum, c)`.
    fn add(self, sum: &mut f64, c: &mut f64, inc: f64, inc_c: f64) {
        if self.kahan {
            (*sum, *c) = kahan_sum_inc(inc, *sum, *c);
            if inc_c != 0.0 {
                (*sum, *c) = kahan_sum_inc(inc_c, *sum, *c);
            }
        } else {
            *sum += inc;
        }
    }

    /// Subtracts `dec` from `(sum, c)`.
    fn sub(self, sum: &mut f64, c: &mut f64, dec: f64) {
        if self.kahan {
            (*sum, *c) = kahan_sum_dec(dec, *sum, *c);
        } else {
            *sum -= dec;
        }
    }
}

impl FloatHistogram {
    /// Adds `other` to `self`. The result may hold empty buckets; see [`FloatHistogram::compact`].
    pub fn add(&mut self, other: &FloatHistogram) -> Result<AddOutcome, HistogramError> {
        self.combine(other, false, None)
    }

    /// Subtracts `other` from `self`. The counter reset hint is adjusted as for addition; the
    /// PromQL `-` operator sets the result to a gauge afterwards.
    pub fn sub(&mut self, other: &FloatHistogram) -> Result<AddOutcome, HistogramError> {
        self.combine(other, true, None)
    }

    /// Adds `other` to `self` with Kahan–Babuška summation. `compensation` holds the running
    /// compensation (start with `None`); the sum is `self` plus the compensation, which the
    /// caller adds with [`FloatHistogram::add`] once all terms are in. On error nothing changes.
    pub fn kahan_add(
        &mut self,
        other: &FloatHistogram,
        compensation: &mut Option<FloatHistogram>,
    ) -> Result<AddOutcome, HistogramError> {
        if self.uses_custom_buckets() != other.uses_custom_buckets() {
            return Err(HistogramError::IncompatibleSchema);
        }
        let mut c = match compensation.take() {
            Some(c) => c,
            None => self.new_compensation(),
        };
        let outcome = self.combine(other, false, Some(&mut c));
        *compensation = Some(c);
        outcome
    }

    /// A compensation histogram for [`FloatHistogram::kahan_add`]: the layout of `self`, all
    /// values zero.
    fn new_compensation(&self) -> FloatHistogram {
        FloatHistogram {
            counter_reset_hint: self.counter_reset_hint,
            schema: self.schema,
            zero_threshold: self.zero_threshold,
            positive_spans: self.positive_spans.clone(),
            positive_buckets: vec![0.0; self.positive_buckets.len()],
            negative_spans: self.negative_spans.clone(),
            negative_buckets: vec![0.0; self.negative_buckets.len()],
            custom_values: self.custom_values.clone(),
            ..FloatHistogram::default()
        }
    }

    /// Sets the counter reset hint of a sum or difference; true if `reset` met `not_reset`.
    fn adjust_counter_reset(&mut self, other: CounterResetHint) -> bool {
        use CounterResetHint::*;
        match (self.counter_reset_hint, other) {
            (mine, theirs) if mine == theirs => false,
            (Gauge, _) => false,
            (_, Gauge) => {
                self.counter_reset_hint = Gauge;
                false
            }
            (Unknown, _) => false,
            (_, Unknown) => {
                self.counter_reset_hint = Unknown;
                false
            }
            _ => {
                self.counter_reset_hint = Unknown;
                true
            }
        }
    }

    fn combine(
        &mut self,
        other: &FloatHistogram,
        negate: bool,
        comp: Option<&mut FloatHistogram>,
    ) -> Result<AddOutcome, HistogramError> {
        if self.uses_custom_buckets() != other.uses_custom_buckets() {
            return Err(HistogramError::IncompatibleSchema);
        }
        let acc = Acc {
            kahan: comp.is_some(),
        };
        let mut outcome = AddOutcome {
            counter_reset_collision: self.adjust_counter_reset(other.counter_reset_hint),
            nhcb_bounds_reconciled: false,
        };

        let mut pos = cells(
            &self.positive_spans,
            &self.positive_buckets,
            comp.as_deref(),
            true,
        );
        let mut neg = cells(
            &self.negative_spans,
            &self.negative_buckets,
            comp.as_deref(),
            false,
        );
        let (mut zero_c, mut count_c, mut sum_c) = comp
            .as_deref()
            .map_or((0.0, 0.0, 0.0), |c| (c.zero_count, c.count, c.sum));

        if !self.uses_custom_buckets() {
            let (other_zero, other_zero_c) =
                self.reconcile_zero_buckets(other, &mut pos, &mut neg, &mut zero_c, acc);
            if negate {
                acc.sub(&mut self.zero_count, &mut zero_c, other_zero);
            } else {
                acc.add(&mut self.zero_count, &mut zero_c, other_zero, other_zero_c);
            }
        }
        if negate {
            acc.sub(&mut self.count, &mut count_c, other.count);
            acc.sub(&mut self.sum, &mut sum_c, other.sum);
        } else {
            acc.add(&mut self.count, &mut count_c, other.count, 0.0);
            acc.add(&mut self.sum, &mut sum_c, other.sum, 0.0);
        }

        if self.uses_custom_buckets() {
            let other_pos = entries(&other.positive_spans, &other.positive_buckets);
            if self.custom_values[..] == other.custom_values[..] {
                merge(
                    &mut pos,
                    other_pos.iter().map(|&(i, v)| (i, v, 0.0)),
                    negate,
                    acc,
                );
            } else {
                outcome.nhcb_bounds_reconciled = true;
                let shared = intersect_bounds(&self.custom_values, &other.custom_values);
                pos = map_to_bounds(
                    &pos,
                    &self.custom_values,
                    &other_pos,
                    &other.custom_values,
                    &shared,
                    negate,
                    acc,
                );
                self.custom_values = shared.into();
            }
        } else {
            let schema = self.schema.min(other.schema);
            if schema < self.schema {
                pos = reduce_cells(&pos, self.schema, schema, acc);
                neg = reduce_cells(&neg, self.schema, schema, acc);
                self.schema = schema;
            }
            let threshold = self.zero_threshold;
            let above = |&(i, _, _): &Cell| {
                !is_exponential_schema(schema) || exponential_bound(i, schema) > threshold
            };
            let other_pos = other_cells(other, true, schema, acc);
            let other_neg = other_cells(other, false, schema, acc);
            merge(&mut pos, other_pos.into_iter().filter(above), negate, acc);
            merge(&mut neg, other_neg.into_iter().filter(above), negate, acc);
        }

        let values = |cs: &[Cell]| cs.iter().map(|&(i, v, _)| (i, v)).collect::<Vec<_>>();
        (self.positive_spans, self.positive_buckets) = from_entries(&values(&pos));
        (self.negative_spans, self.negative_buckets) = from_entries(&values(&neg));
        if let Some(c) = comp {
            let comps = |cs: &[Cell]| cs.iter().map(|&(i, _, c)| (i, c)).collect::<Vec<_>>();
            (c.positive_spans, c.positive_buckets) = from_entries(&comps(&pos));
            (c.negative_spans, c.negative_buckets) = from_entries(&comps(&neg));
            c.schema = self.schema;
            c.zero_threshold = self.zero_threshold;
            c.custom_values = self.custom_values.clone();
            c.zero_count = zero_c;
            c.count = count_c;
            c.sum = sum_c;
        }
        Ok(outcome)
    }

    /// Widens the zero bucket of `self` (whose buckets are `pos`/`neg`) and, virtually, of
    /// `other` until both have the same threshold, one that cuts no populated bucket of either.
    /// Buckets of `self` that end up inside the zero bucket are folded into its count. Returns
    /// the zero count `other` has at that threshold, with its compensation.
    fn reconcile_zero_buckets(
        &mut self,
        other: &FloatHistogram,
        pos: &mut Vec<Cell>,
        neg: &mut Vec<Cell>,
        zero_c: &mut f64,
        acc: Acc,
    ) -> (f64, f64) {
        let other_pos: Vec<Cell> = other_cells(other, true, other.schema, Acc { kahan: false });
        let other_neg: Vec<Cell> = other_cells(other, false, other.schema, Acc { kahan: false });
        let mut other_zero = (other.zero_count, 0.0);
        let mut other_threshold = other.zero_threshold;
        // Each round only widens; the bound on rounds guards against NaN thresholds.
        for _ in 0..64 {
            if other_threshold == self.zero_threshold || other_threshold.is_nan() {
                break;
            }
            if self.zero_threshold.is_nan() {
                break;
            }
            if self.zero_threshold > other_threshold {
                let (count, threshold, c) = widened_zero_count(
                    (other.zero_count, 0.0),
                    other.zero_threshold,
                    other.schema,
                    &other_pos,
                    &other_neg,
                    self.zero_threshold,
                    acc,
                );
                other_zero = (count, c);
                other_threshold = threshold;
            }
            if other_threshold > self.zero_threshold {
                let (count, threshold, c) = widened_zero_count(
                    (self.zero_count, *zero_c),
                    self.zero_threshold,
                    self.schema,
                    pos,
                    neg,
                    other_threshold,
                    acc,
                );
                self.zero_count = count;
                *zero_c = c;
                self.zero_threshold = threshold;
                let schema = self.schema;
                pos.retain(|&(i, _, _)| exponential_bound(i.wrapping_sub(1), schema) >= threshold);
                neg.retain(|&(i, _, _)| exponential_bound(i.wrapping_sub(1), schema) >= threshold);
            }
        }
        other_zero
    }
}

/// The zero count (with compensation) a histogram would have with the zero threshold raised
/// to `larger`, and the threshold actually needed: raised to the end of any populated bucket
/// the requested threshold would cut.
fn widened_zero_count(
    zero: (f64, f64),
    threshold: f64,
    schema: i32,
    pos: &[Cell],
    neg: &[Cell],
    larger: f64,
    acc: Acc,
) -> (f64, f64, f64) {
    let mut larger = larger;
    if larger <= threshold {
        return (zero.0, threshold.max(larger), zero.1);
    }
    'outer: loop {
        let (mut count, mut c) = zero;
        for &(i, v, vc) in pos {
            let (lower, upper) = (
                exponential_bound(i.wrapping_sub(1), schema),
                exponential_bound(i, schema),
            );
            if lower >= larger {
                break;
            }
            acc.add(&mut count, &mut c, v, vc);
            if upper > larger {
                if v != 0.0 {
                    larger = upper;
                }
                break;
            }
        }
        for &(i, v, vc) in neg {
            let (lower, upper) = (
                exponential_bound(i.wrapping_sub(1), schema),
                exponential_bound(i, schema),
            );
            if lower >= larger {
                break;
            }
            acc.add(&mut count, &mut c, v, vc);
            if upper > larger {
                if v != 0.0 {
                    // The negative side moved the threshold: the positive side must be redone.
                    larger = upper;
                    continue 'outer;
                }
                break;
            }
        }
        return (count, larger, c);
    }
}

/// The buckets of one side of `h` with the compensations of `comp` alongside.
fn cells(
    spans: &[super::Span],
    buckets: &[f64],
    comp: Option<&FloatHistogram>,
    positive: bool,
) -> Vec<Cell> {
    let values = entries(spans, buckets);
    let Some(c) = comp else {
        return values.into_iter().map(|(i, v)| (i, v, 0.0)).collect();
    };
    let comps = if positive {
        entries(&c.positive_spans, &c.positive_buckets)
    } else {
        entries(&c.negative_spans, &c.negative_buckets)
    };
    let mut k = 0;
    values
        .into_iter()
        .map(|(i, v)| {
            while k < comps.len() && comps[k].0 < i {
                k += 1;
            }
            let cv = match comps.get(k) {
                Some(&(ci, cv)) if ci == i => cv,
                _ => 0.0,
            };
            (i, v, cv)
        })
        .collect()
}

/// The buckets of one side of `other` at `schema` (coarser or equal), merged with `acc`.
fn other_cells(other: &FloatHistogram, positive: bool, schema: i32, acc: Acc) -> Vec<Cell> {
    let raw = if positive {
        entries(&other.positive_spans, &other.positive_buckets)
    } else {
        entries(&other.negative_spans, &other.negative_buckets)
    };
    let cells: Vec<Cell> = raw.into_iter().map(|(i, v)| (i, v, 0.0)).collect();
    if schema < other.schema {
        reduce_cells(&cells, other.schema, schema, acc)
    } else {
        cells
    }
}

/// `cells` merged into the buckets of the coarser `target` schema.
fn reduce_cells(cells: &[Cell], origin: i32, target: i32, acc: Acc) -> Vec<Cell> {
    let mut out: Vec<Cell> = Vec::with_capacity(cells.len());
    for &(i, v, c) in cells {
        let t = super::bounds::target_index(i, origin, target);
        match out.last_mut() {
            Some(last) if last.0 == t => acc.add(&mut last.1, &mut last.2, v, c),
            _ => out.push((t, v, c)),
        }
    }
    out
}

/// Adds (or subtracts) `other` into `mine`, both sorted by index; missing buckets are inserted.
fn merge(mine: &mut Vec<Cell>, other: impl Iterator<Item = Cell>, negate: bool, acc: Acc) {
    let mut out: Vec<Cell> = Vec::with_capacity(mine.len());
    let mut it = std::mem::take(mine).into_iter().peekable();
    for (i, v, c) in other {
        let (v, c) = if negate { (-v, -c) } else { (v, c) };
        while let Some(&(j, _, _)) = it.peek() {
            if j >= i {
                break;
            }
            out.extend(it.next());
        }
        match it.peek_mut() {
            Some(cell) if cell.0 == i => {
                acc.add(&mut cell.1, &mut cell.2, v, c);
                out.extend(it.next());
            }
            _ => out.push((i, v, c)),
        }
    }
    out.extend(it);
    *mine = out;
}

/// The bounds present in both lists (both sorted).
fn intersect_bounds(a: &[f64], b: &[f64]) -> Vec<f64> {
    let (mut i, mut j) = (0, 0);
    let mut out = Vec::new();
    while i < a.len() && j < b.len() {
        if a[i] == b[j] {
            out.push(a[i]);
            i += 1;
            j += 1;
        } else if a[i] < b[j] {
            i += 1;
        } else {
            j += 1;
        }
    }
    out
}

/// Both operands' custom buckets rolled up into the buckets of `shared` bounds (plus `+Inf`),
/// and combined. Buckets whose value and compensation are both zero are left out.
fn map_to_bounds(
    mine: &[Cell],
    my_bounds: &[f64],
    other: &[(i32, f64)],
    other_bounds: &[f64],
    shared: &[f64],
    negate: bool,
    acc: Acc,
) -> Vec<Cell> {
    let mut target = vec![(0.0, 0.0); shared.len() + 1];
    let slot = |index: i32, bounds: &[f64]| -> usize {
        match usize::try_from(index).ok().and_then(|i| bounds.get(i)) {
            Some(bound) => shared.partition_point(|s| s < bound),
            None => shared.len(),
        }
    };
    for &(i, v, c) in mine {
        let t = &mut target[slot(i, my_bounds).min(shared.len())];
        acc.add(&mut t.0, &mut t.1, v, c);
    }
    for &(i, v) in other {
        let t = &mut target[slot(i, other_bounds).min(shared.len())];
        if negate {
            acc.sub(&mut t.0, &mut t.1, v);
        } else {
            acc.add(&mut t.0, &mut t.1, v, 0.0);
        }
    }
    target
        .into_iter()
        .enumerate()
        .filter(|(_, (v, c))| *v != 0.0 || *c != 0.0)
        .map(|(i, (v, c))| (i as i32, v, c))
        .collect()
}
