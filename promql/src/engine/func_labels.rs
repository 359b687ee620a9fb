//! Functions over labels: `label_replace` and `label_join` (on whole series, values
//! untouched) and `sort_by_label` / `sort_by_label_desc` (natural order of label values).

use std::cmp::Ordering;
use std::sync::Arc;

use regex::Regex;

use super::eval::{Evaluator, merge_same_labels};
use super::series::{EvSeries, Sample};
use super::{QueryError, Result};
use crate::ast::Expr;
use crate::value::METRIC_NAME;

fn string_arg(args: &[&Expr], i: usize) -> String {
    match args.get(i) {
        Some(Expr::String(s)) => s.val.clone(),
        _ => String::new(),
    }
}

/// Argument `i` as a label name: `Err` with its text when it is not one (empty, or bytes that
/// are not UTF-8, as `model.LabelName.IsValid` refuses).
fn label_name_arg(args: &[&Expr], i: usize) -> std::result::Result<String, String> {
    match args.get(i) {
        Some(Expr::String(s)) if s.invalid_utf8.is_none() && !s.val.is_empty() => Ok(s.val.clone()),
        Some(Expr::String(s)) => Err(s.val.clone()),
        _ => Err(String::new()),
    }
}

impl Evaluator<'_> {
    pub fn eval_label_replace(&mut self, args: &[&Expr]) -> Result<Vec<EvSeries>> {
        let dst = label_name_arg(args, 1);
        let repl = string_arg(args, 2);
        let src = string_arg(args, 3);
        let regex = string_arg(args, 4);
        let re = Regex::new(&format!("^(?s:{regex})$")).map_err(|_| {
            QueryError::Execution(format!(
                "invalid regular expression in label_replace(): {regex}"
            ))
        })?;
        let dst = dst.map_err(|dst| {
            QueryError::Execution(format!(
                "invalid destination label name in label_replace(): {dst}"
            ))
        })?;
        let Some(arg) = args.first() else {
            return Ok(Vec::new());
        };
        let mut mat = self.eval_matrix(arg)?;
        for s in &mut mat {
            let value = s.labels.get(&src).unwrap_or("").to_string();
            if let Some(caps) = re.captures(&value) {
                let mut res = String::new();
                caps.expand(&repl, &mut res);
                let mut labels = (*s.labels).clone();
                labels.set(dst.clone(), res);
                s.labels = Arc::new(labels);
                if dst == METRIC_NAME {
                    s.drop_name = false;
                }
            }
        }
        merge_same_labels(mat)
    }

    pub fn eval_label_join(&mut self, args: &[&Expr]) -> Result<Vec<EvSeries>> {
        let dst = label_name_arg(args, 1);
        let sep = string_arg(args, 2);
        let mut sources = Vec::new();
        for i in 3..args.len() {
            sources.push(label_name_arg(args, i).map_err(|src| {
                QueryError::Execution(format!("invalid source label name in label_join(): {src}"))
            })?);
        }
        let dst = dst.map_err(|dst| {
            QueryError::Execution(format!(
                "invalid destination label name in label_join(): {dst}"
            ))
        })?;
        let Some(arg) = args.first() else {
            return Ok(Vec::new());
        };
        let mut mat = self.eval_matrix(arg)?;
        for s in &mut mat {
            let joined = sources
                .iter()
                .map(|n| s.labels.get(n).unwrap_or(""))
                .collect::<Vec<_>>()
                .join(&sep);
            let mut labels = (*s.labels).clone();
            labels.set(dst.clone(), joined);
            s.labels = Arc::new(labels);
            if dst == METRIC_NAME {
                s.drop_name = false;
            }
        }
        merge_same_labels(mat)
    }
}

/// `sort_by_label(v, labels...)`: natural order of the listed labels' values, then the whole
/// label set.
pub(crate) fn sort_by_label(vec: &[Sample], args: &[&Expr], desc: bool) -> Vec<Sample> {
    let names: Vec<String> = (1..args.len()).map(|i| string_arg(args, i)).collect();
    let mut out = vec.to_vec();
    out.sort_by(|a, b| {
        let mut ord = Ordering::Equal;
        for n in &names {
            let (va, vb) = (a.labels.get(n).unwrap_or(""), b.labels.get(n).unwrap_or(""));
            if va == vb {
                continue;
            }
            ord = if natural_less(va, vb) {
                Ordering::Less
            } else {
                Ordering::Greater
            };
            break;
        }
        if ord == Ordering::Equal {
            ord = a.labels.cmp(&b.labels);
        }
        if desc { ord.reverse() } else { ord }
    });
    out
}

/// Splits into runs of digits and runs of non-digits.
fn chunks(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut digit: Option<bool> = None;
    for (i, c) in s.char_indices() {
        let d = c.is_ascii_digit();
        if digit.is_some_and(|prev| prev != d) {
            out.push(&s[start..i]);
            start = i;
        }
        digit = Some(d);
    }
    if start < s.len() {
        out.push(&s[start..]);
    }
    out
}

/// Natural order: digit runs compare as numbers, the rest as strings.
fn natural_less(a: &str, b: &str) -> bool {
    let (ca, cb) = (chunks(a), chunks(b));
    for (i, x) in ca.iter().enumerate() {
        let Some(y) = cb.get(i) else {
            return false;
        };
        let last_a = i + 1 == ca.len();
        let last_b = i + 1 == cb.len();
        match (x.parse::<i64>(), y.parse::<i64>()) {
            (Ok(nx), Ok(ny)) => {
                if nx != ny {
                    return nx < ny;
                }
            }
            _ => {
                if x != y {
                    return x < y;
                }
            }
        }
        if last_a {
            return true;
        }
        if last_b {
            return false;
        }
    }
    false
}
