//! `info(v [, {data label selector}])`: adds the data labels of info metrics (`target_info`
//! by default) that share the identifying labels (`instance`, `job`) of each series.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use super::eval::{Evaluator, duplicate_labelset};
use super::selectors::{Latest, LatestCursor};
use super::series::EvSeries;
use super::{QueryError, Result};
use crate::ast::{Expr, MatchOp, Matcher};
use crate::value::{FPoint, Labels, METRIC_NAME};

const IDENTIFYING: [&str; 2] = ["instance", "job"];

/// The `@` time and offset of the first selector in `e`, which place the info series.
fn first_selector(
    e: &Expr,
) -> Option<(
    &Option<crate::ast::DurationExpr>,
    Option<crate::ast::AtModifier>,
)> {
    match e {
        Expr::VectorSelector(vs) => Some((&vs.offset, vs.at)),
        Expr::MatrixSelector(ms) => Some((&ms.vector.offset, ms.vector.at)),
        other => other.children().into_iter().find_map(first_selector),
    }
}

/// The signature joining a series with info metric `name`.
fn signature(name: &str, labels: &Labels) -> Labels {
    let mut sig = labels.filter(|n| IDENTIFYING.contains(&n));
    sig.set(METRIC_NAME, name);
    sig
}

impl Evaluator<'_> {
    pub fn eval_info(&mut self, args: &[&Expr]) -> Result<Vec<EvSeries>> {
        let Some(base_expr) = args.first() else {
            return Ok(Vec::new());
        };
        let mat = self.eval_matrix(base_expr)?;
        let mut data_matchers: BTreeMap<String, Vec<Matcher>> = BTreeMap::new();
        let name_matchers: Vec<Matcher> = match args.get(1) {
            Some(Expr::VectorSelector(sel)) => {
                for m in &sel.matchers {
                    data_matchers
                        .entry(m.name.clone())
                        .or_default()
                        .push(m.clone());
                }
                sel.matchers
                    .iter()
                    .filter(|m| m.name == METRIC_NAME)
                    .cloned()
                    .collect()
            }
            _ => vec![Matcher::equal(METRIC_NAME, "target_info")],
        };
        let ignored: HashSet<usize> = mat
            .iter()
            .enumerate()
            .filter(|(_, s)| {
                let name = s.labels.name().unwrap_or("");
                !name_matchers.is_empty() && name_matchers.iter().all(|m| m.matches(name))
            })
            .map(|(i, _)| i)
            .collect();
        let infos = self.fetch_info_series(base_expr, &mat, &ignored, &mut data_matchers)?;
        self.combine_info(mat, infos, &ignored, &data_matchers)
    }

    fn fetch_info_series(
        &mut self,
        base_expr: &Expr,
        mat: &[EvSeries],
        ignored: &HashSet<usize>,
        data_matchers: &mut BTreeMap<String, Vec<Matcher>>,
    ) -> Result<Vec<EvSeries>> {
        let mut id_values: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        for (i, s) in mat.iter().enumerate() {
            if ignored.contains(&i) {
                continue;
            }
            for l in IDENTIFYING {
                if let Some(v) = s.labels.get(l).filter(|v| !v.is_empty()) {
                    let vals = id_values.entry(l).or_default();
                    if !vals.iter().any(|x| x == v) {
                        vals.push(v.to_string());
                    }
                }
            }
        }
        let mut matchers = Vec::new();
        let mut has_name = false;
        if !id_values.is_empty() {
            for (name, vals) in &id_values {
                let re = vals
                    .iter()
                    .map(|v| regex::escape(v))
                    .collect::<Vec<_>>()
                    .join("|");
                matchers.push(
                    Matcher::new(MatchOp::Regex, name, &re)
                        .map_err(|e| QueryError::Execution(e.to_string()))?,
                );
            }
            for ms in data_matchers.values() {
                for m in ms {
                    has_name |= m.name == METRIC_NAME;
                    matchers.push(m.clone());
                }
            }
        }
        for ms in data_matchers.values_mut() {
            ms.retain(|m| m.name != METRIC_NAME);
        }
        data_matchers.retain(|_, ms| !ms.is_empty());
        if id_values.is_empty() {
            return Ok(Vec::new());
        }
        if !has_name {
            matchers.insert(0, Matcher::equal(METRIC_NAME, "target_info"));
        }
        let (offset, at) = match first_selector(base_expr) {
            Some((o, at)) => (self.offset_ms(o)?, self.at_ms(at)),
            None => (0, None),
        };
        let (start, end) = match at {
            Some(t) => (t, t),
            None => (self.start, self.end),
        };
        let mint = start - self.lookback + 1 - offset;
        let series = self.select(&matchers, mint, end - offset)?;
        let mut out = Vec::with_capacity(series.len());
        for s in &series {
            let mut es = EvSeries::new(Arc::new(s.labels.clone()), false);
            let mut cur = LatestCursor::new();
            for ts in self.steps() {
                match cur.at(s, ts, self.lookback) {
                    Some(Latest::Float(t, _)) => es.floats.push(FPoint { t: ts, f: t as f64 }),
                    Some(Latest::Hist(..)) => {
                        return Err(QueryError::Execution(format!(
                            "this should be an info metric, with float samples: {}",
                            s.labels
                        )));
                    }
                    None => {}
                }
            }
            self.add_samples(es.floats.len())?;
            if !es.is_empty() {
                out.push(es);
            }
        }
        Ok(out)
    }

    fn combine_info(
        &mut self,
        mat: Vec<EvSeries>,
        infos: Vec<EvSeries>,
        ignored: &HashSet<usize>,
        data_matchers: &BTreeMap<String, Vec<Matcher>>,
    ) -> Result<Vec<EvSeries>> {
        let mut info_names: Vec<String> = infos
            .iter()
            .map(|s| s.labels.name().unwrap_or("").to_string())
            .collect();
        info_names.sort();
        info_names.dedup();
        let info_sigs: Vec<Labels> = infos
            .iter()
            .map(|s| signature(s.labels.name().unwrap_or(""), &s.labels))
            .collect();
        let mut out: Vec<EvSeries> = Vec::new();
        let mut index: HashMap<Arc<Labels>, (usize, i64)> = HashMap::new();
        let mut base_cur = vec![(0usize, 0usize); mat.len()];
        let mut info_cur = vec![0usize; infos.len()];
        for ts in self.steps() {
            self.check_deadline()?;
            let mut by_sig: HashMap<&Labels, (usize, i64)> = HashMap::new();
            for (i, s) in infos.iter().enumerate() {
                let Some(p) = s.floats.get(info_cur[i]).filter(|p| p.t == ts) else {
                    continue;
                };
                info_cur[i] += 1;
                let orig_t = p.f as i64;
                match by_sig.get(&info_sigs[i]) {
                    Some(&(j, t)) if t == orig_t => {
                        return Err(QueryError::Execution(format!(
                            "found duplicate series for info metric: existing {} @ {t}, new {} @ {orig_t}",
                            infos[j].labels, s.labels
                        )));
                    }
                    Some(&(_, t)) if t > orig_t => {}
                    _ => {
                        by_sig.insert(&info_sigs[i], (i, orig_t));
                    }
                }
            }
            for (bi, s) in mat.iter().enumerate() {
                let Some((f, h)) = super::aggregate::next_value(s, &mut base_cur[bi], ts) else {
                    continue;
                };
                let labels = if ignored.contains(&bi) {
                    s.labels.clone()
                } else {
                    let mut added = Labels::new();
                    let mut matched = false;
                    for name in &info_names {
                        let Some(&(ii, _)) = by_sig.get(&signature(name, &s.labels)) else {
                            continue;
                        };
                        matched = true;
                        for (n, v) in infos[ii].labels.iter() {
                            if n == METRIC_NAME
                                || (!data_matchers.is_empty() && !data_matchers.contains_key(n))
                            {
                                continue;
                            }
                            if added.get(n).is_some_and(|x| x != v) {
                                return Err(QueryError::Execution(format!(
                                    "conflicting label: {n}"
                                )));
                            }
                            if s.labels.get(n).is_some() {
                                continue;
                            }
                            added.set(n, v);
                        }
                    }
                    if !matched && data_matchers.values().flatten().any(|m| !m.matches("")) {
                        continue;
                    }
                    let mut l = (*s.labels).clone();
                    for (n, v) in added.iter() {
                        l.set(n, v);
                    }
                    Arc::new(l)
                };
                match index.get_mut(&labels) {
                    Some((i, last)) => {
                        if *last == ts {
                            return Err(duplicate_labelset());
                        }
                        *last = ts;
                        if let Some(series) = out.get_mut(*i) {
                            series.push(ts, f, h);
                        }
                    }
                    None => {
                        index.insert(labels.clone(), (out.len(), ts));
                        let mut series = EvSeries::new(labels, false);
                        series.push(ts, f, h);
                        out.push(series);
                    }
                }
            }
        }
        Ok(out)
    }
}
