//! The aggregations that keep input series: `topk`, `bottomk`, `limitk` and `limit_ratio`.
//! Selection follows Prometheus' binary heaps step for step, so that ties resolve the same
//! way; `limit_ratio` samples series by the xxHash of their labels.

use std::collections::HashMap;
use std::sync::Arc;

use super::aggregate::{Params, group_labels, next_value};
use super::annotations;
use super::eval::Evaluator;
use super::series::{EvSeries, Sample};
use super::{QueryError, Result};
use crate::ast::{AggregateExpr, AggregateOp, format_go_float};
use crate::value::Labels;

/// The largest float that converts to an `i64` without overflow, and the smallest.
const MAX_INT64: f64 = 9_223_372_036_854_774_784.0;
const MIN_INT64: f64 = -9_223_372_036_854_775_808.0;

/// Go's `container/heap` over samples with a `less` order.
struct Heap<F: Fn(&Sample, &Sample) -> bool> {
    items: Vec<Sample>,
    less: F,
}

impl<F: Fn(&Sample, &Sample) -> bool> Heap<F> {
    fn lt(&self, i: usize, j: usize) -> bool {
        match (self.items.get(i), self.items.get(j)) {
            (Some(a), Some(b)) => (self.less)(a, b),
            _ => false,
        }
    }

    fn push(&mut self, s: Sample) {
        self.items.push(s);
        self.up(self.items.len() - 1);
    }

    fn up(&mut self, mut j: usize) {
        while j > 0 {
            let i = (j - 1) / 2;
            if !self.lt(j, i) {
                break;
            }
            self.items.swap(i, j);
            j = i;
        }
    }

    fn down(&mut self, i0: usize) -> bool {
        let n = self.items.len();
        let mut i = i0;
        loop {
            let j1 = 2 * i + 1;
            if j1 >= n {
                break;
            }
            let mut j = j1;
            if j1 + 1 < n && self.lt(j1 + 1, j1) {
                j = j1 + 1;
            }
            if !self.lt(j, i) {
                break;
            }
            self.items.swap(i, j);
            i = j;
        }
        i > i0
    }

    /// Replaces the top and restores the heap.
    fn replace_top(&mut self, s: Sample) {
        if let Some(top) = self.items.first_mut() {
            *top = s;
        }
        if !self.down(0) {
            self.up(0);
        }
    }

    /// The items sorted so that `a` precedes `b` when `less(b, a)` (Go's
    /// `sort.Sort(sort.Reverse(heap))`; insertion sort as Go uses for short slices).
    fn into_reverse_sorted(self) -> Vec<Sample> {
        let mut v = self.items;
        for i in 1..v.len() {
            let mut j = i;
            while j > 0 && (self.less)(&v[j - 1], &v[j]) {
                v.swap(j, j - 1);
                j -= 1;
            }
        }
        v
    }
}

fn less_value(a: &Sample, b: &Sample) -> bool {
    a.f.is_nan() || a.f < b.f
}

fn less_reverse_value(a: &Sample, b: &Sample) -> bool {
    a.f.is_nan() || a.f > b.f
}

/// Prometheus' `labels.Hash()`: xxHash64 of `name 0xff value 0xff ...`.
pub(crate) fn labels_hash(labels: &Labels) -> u64 {
    let mut buf = Vec::with_capacity(256);
    for (n, v) in labels.iter() {
        buf.extend_from_slice(n.as_bytes());
        buf.push(0xff);
        buf.extend_from_slice(v.as_bytes());
        buf.push(0xff);
    }
    xxh64(&buf)
}

/// Whether `limit_ratio(ratio, ...)` keeps the series with `labels`.
fn ratio_keeps(ratio: f64, labels: &Labels) -> bool {
    let offset = labels_hash(labels) as f64 / u64::MAX as f64;
    (ratio >= 0.0 && offset < ratio) || (ratio < 0.0 && offset >= 1.0 + ratio)
}

/// A group's selection at one step.
enum Sel {
    Top(Heap<fn(&Sample, &Sample) -> bool>),
}

impl Evaluator<'_> {
    pub fn eval_k_aggregation(
        &mut self,
        a: &AggregateExpr,
        grouping: &[String],
        input: Vec<EvSeries>,
        params: Option<Params>,
    ) -> Result<Vec<EvSeries>> {
        let params = params.unwrap_or(Params {
            values: Vec::new(),
            min: 0.0,
            max: 0.0,
            any_nan: false,
        });
        let param_pos = a
            .param
            .as_deref()
            .map(|p| p.unparen().pos())
            .unwrap_or_default();
        match a.op {
            AggregateOp::LimitRatio => {
                if params.max == 0.0 && params.min == 0.0 {
                    return Ok(Vec::new());
                }
                if params.any_nan {
                    return Err(QueryError::Execution("Ratio value is NaN".to_string()));
                }
                if params.max > 1.0 {
                    self.note(annotations::invalid_ratio(params.max, 1.0, param_pos));
                }
                if params.min < -1.0 {
                    self.note(annotations::invalid_ratio(params.min, -1.0, param_pos));
                }
            }
            _ => {
                if params.max < 1.0 {
                    return Ok(Vec::new());
                }
                if params.any_nan {
                    return Err(QueryError::Execution("Parameter value is NaN".to_string()));
                }
                if params.min <= MIN_INT64 {
                    return Err(QueryError::Execution(format!(
                        "Scalar value {} underflows int64",
                        format_go_float(params.min)
                    )));
                }
                if params.max >= MAX_INT64 {
                    return Err(QueryError::Execution(format!(
                        "Scalar value {} overflows int64",
                        format_go_float(params.max)
                    )));
                }
            }
        }
        let mut index: HashMap<Labels, usize> = HashMap::new();
        let to_group: Vec<usize> = input
            .iter()
            .map(|s| {
                let next = index.len();
                *index
                    .entry(group_labels(&s.labels, grouping, a.without))
                    .or_insert(next)
            })
            .collect();
        let ngroups = index.len();
        let single = self.start == self.end;
        let mut out: Vec<EvSeries> = Vec::new();
        let mut out_index: HashMap<Arc<Labels>, usize> = HashMap::new();
        let mut cursors = vec![(0usize, 0usize); input.len()];
        for (step, ts) in self.steps().enumerate() {
            self.check_deadline()?;
            let param = params.at(step);
            let mut groups: Vec<Option<Sel>> = (0..ngroups).map(|_| None).collect();
            let mut skip_step = false;
            for (si, s) in input.iter().enumerate() {
                let Some((f, h)) = next_value(s, &mut cursors[si], ts) else {
                    continue;
                };
                if skip_step {
                    continue;
                }
                let sample = Sample {
                    labels: s.labels.clone(),
                    t: ts,
                    f,
                    h,
                    drop_name: s.drop_name,
                };
                let (k, ratio) = match a.op {
                    AggregateOp::LimitRatio => {
                        if param == 0.0 {
                            skip_step = true;
                            continue;
                        }
                        (0, param.clamp(-1.0, 1.0))
                    }
                    _ => {
                        let k = (param as i64).min(input.len() as i64);
                        if k < 1 {
                            skip_step = true;
                            continue;
                        }
                        (usize::try_from(k).unwrap_or(usize::MAX), 0.0)
                    }
                };
                let Some(slot) = to_group.get(si).and_then(|&g| groups.get_mut(g)) else {
                    continue;
                };
                self.select_k(a, slot, sample, k, ratio);
            }
            if skip_step {
                continue;
            }
            for sel in groups.into_iter().flatten() {
                let samples = match sel {
                    Sel::Top(heap) if matches!(a.op, AggregateOp::Topk | AggregateOp::Bottomk) => {
                        heap.into_reverse_sorted()
                    }
                    Sel::Top(heap) => heap.items,
                };
                for s in samples {
                    if single {
                        let mut series = EvSeries::new(s.labels, s.drop_name);
                        series.push(ts, s.f, s.h);
                        out.push(series);
                        continue;
                    }
                    let i = *out_index.entry(s.labels.clone()).or_insert_with(|| {
                        out.push(EvSeries::new(s.labels.clone(), s.drop_name));
                        out.len() - 1
                    });
                    if let Some(series) = out.get_mut(i) {
                        series.push(ts, s.f, s.h);
                    }
                }
            }
            self.add_samples(0)?;
        }
        Ok(out)
    }

    /// Offers `s` to the selection of its group.
    fn select_k(
        &mut self,
        a: &AggregateExpr,
        slot: &mut Option<Sel>,
        s: Sample,
        k: usize,
        ratio: f64,
    ) {
        let op = a.op;
        let is_hist = s.h.is_some();
        match slot {
            None => {
                *slot = Some(match op {
                    AggregateOp::LimitRatio => {
                        let mut heap = Heap::<fn(&Sample, &Sample) -> bool> {
                            items: Vec::new(),
                            less: less_value,
                        };
                        if ratio_keeps(ratio, &s.labels) {
                            heap.push(s);
                        }
                        Sel::Top(heap)
                    }
                    AggregateOp::Limitk => Sel::Top(Heap {
                        items: vec![s],
                        less: less_value,
                    }),
                    _ => {
                        let less: fn(&Sample, &Sample) -> bool = if op == AggregateOp::Topk {
                            less_value
                        } else {
                            less_reverse_value
                        };
                        let mut heap = Heap {
                            items: Vec::new(),
                            less,
                        };
                        if is_hist {
                            self.note(annotations::histogram_ignored_in_aggregation(
                                op.name(),
                                a.pos,
                            ));
                            return;
                        }
                        heap.push(s);
                        Sel::Top(heap)
                    }
                });
            }
            Some(Sel::Top(heap)) => match op {
                AggregateOp::Topk | AggregateOp::Bottomk => {
                    if is_hist {
                        self.note(annotations::histogram_ignored_in_aggregation(
                            op.name(),
                            a.pos,
                        ));
                    } else if heap.items.len() < k {
                        heap.push(s);
                    } else if let Some(top) = heap.items.first() {
                        let better = if op == AggregateOp::Topk {
                            top.f < s.f
                        } else {
                            top.f > s.f
                        };
                        if better || (top.f.is_nan() && !s.f.is_nan()) {
                            heap.replace_top(s);
                        }
                    }
                }
                AggregateOp::Limitk => {
                    if heap.items.len() < k {
                        heap.push(s);
                    }
                }
                _ => {
                    if ratio_keeps(ratio, &s.labels) {
                        heap.push(s);
                    }
                }
            },
        }
    }
}

/// xxHash64 with seed 0.
pub(crate) fn xxh64(data: &[u8]) -> u64 {
    const P1: u64 = 0x9E37_79B1_85EB_CA87;
    const P2: u64 = 0xC2B2_AE3D_27D4_EB4F;
    const P3: u64 = 0x1656_67B1_9E37_79F9;
    const P4: u64 = 0x85EB_CA77_C2B2_AE63;
    const P5: u64 = 0x27D4_EB2F_1656_67C5;
    fn round(acc: u64, input: u64) -> u64 {
        acc.wrapping_add(input.wrapping_mul(P2))
            .rotate_left(31)
            .wrapping_mul(P1)
    }
    fn merge(acc: u64, v: u64) -> u64 {
        (acc ^ round(0, v)).wrapping_mul(P1).wrapping_add(P4)
    }
    let read64 = |b: &[u8]| -> u64 {
        let mut a = [0u8; 8];
        a.copy_from_slice(b.get(..8).unwrap_or(&[0; 8]));
        u64::from_le_bytes(a)
    };
    let len = data.len() as u64;
    let mut rest = data;
    let mut h = if data.len() >= 32 {
        let (mut v1, mut v2, mut v3, mut v4) =
            (P1.wrapping_add(P2), P2, 0u64, 0u64.wrapping_sub(P1));
        while rest.len() >= 32 {
            v1 = round(v1, read64(&rest[0..8]));
            v2 = round(v2, read64(&rest[8..16]));
            v3 = round(v3, read64(&rest[16..24]));
            v4 = round(v4, read64(&rest[24..32]));
            rest = &rest[32..];
        }
        let mut h = v1
            .rotate_left(1)
            .wrapping_add(v2.rotate_left(7))
            .wrapping_add(v3.rotate_left(12))
            .wrapping_add(v4.rotate_left(18));
        h = merge(h, v1);
        h = merge(h, v2);
        h = merge(h, v3);
        merge(h, v4)
    } else {
        P5
    };
    h = h.wrapping_add(len);
    while rest.len() >= 8 {
        h ^= round(0, read64(&rest[..8]));
        h = h.rotate_left(27).wrapping_mul(P1).wrapping_add(P4);
        rest = &rest[8..];
    }
    if rest.len() >= 4 {
        let mut a = [0u8; 4];
        a.copy_from_slice(&rest[..4]);
        h ^= u64::from(u32::from_le_bytes(a)).wrapping_mul(P1);
        h = h.rotate_left(23).wrapping_mul(P2).wrapping_add(P3);
        rest = &rest[4..];
    }
    for &b in rest {
        h ^= u64::from(b).wrapping_mul(P5);
        h = h.rotate_left(11).wrapping_mul(P1);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(P2);
    h ^= h >> 29;
    h = h.wrapping_mul(P3);
    h ^= h >> 32;
    h
}
