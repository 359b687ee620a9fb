//! The set operators `and`, `or` and `unless` between two instant vectors, matched by join
//! signature (many-to-many).

use super::series::Sample;
use crate::ast::BinaryOp;

/// `op` between `lhs` and `rhs`; `lords`/`rords` are the signature ordinals of their samples
/// (below `nsigs`).
pub(crate) fn set_op(
    op: BinaryOp,
    lhs: &[Sample],
    rhs: &[Sample],
    lords: &[usize],
    rords: &[usize],
    nsigs: usize,
) -> Vec<Sample> {
    let present = |ords: &[usize]| {
        let mut p = vec![false; nsigs];
        for &o in ords {
            if let Some(slot) = p.get_mut(o) {
                *slot = true;
            }
        }
        p
    };
    let has = |p: &[bool], i: usize, ords: &[usize]| {
        ords.get(i)
            .and_then(|&o| p.get(o))
            .copied()
            .unwrap_or(false)
    };
    match op {
        BinaryOp::And => {
            if lhs.is_empty() || rhs.is_empty() {
                return Vec::new();
            }
            let right = present(rords);
            lhs.iter()
                .enumerate()
                .filter(|(i, _)| has(&right, *i, lords))
                .map(|(_, s)| s.clone())
                .collect()
        }
        BinaryOp::Or => {
            if lhs.is_empty() {
                return rhs.to_vec();
            }
            if rhs.is_empty() {
                return lhs.to_vec();
            }
            let left = present(lords);
            let mut out = lhs.to_vec();
            out.extend(
                rhs.iter()
                    .enumerate()
                    .filter(|(j, _)| !has(&left, *j, rords))
                    .map(|(_, s)| s.clone()),
            );
            out
        }
        BinaryOp::Unless => {
            if lhs.is_empty() || rhs.is_empty() {
                return lhs.to_vec();
            }
            let right = present(rords);
            lhs.iter()
                .enumerate()
                .filter(|(i, _)| !has(&right, *i, lords))
                .map(|(_, s)| s.clone())
                .collect()
        }
        _ => Vec::new(),
    }
}
