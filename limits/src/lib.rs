//! How deep a client's expression may nest, and the stack that is known to be enough for it.
//!
//! Parsers, planners, optimizers, evaluators and even the drop of a syntax tree recurse over
//! the tree a query builds, one call or more per level. A tree deep enough overflows a thread's
//! stack, and a stack overflow aborts the whole process, so depth is checked before any of that
//! work, in two steps:
//!
//! 1. [`depth_bound`], over the query's tokens, before it is parsed: an upper bound of the depth
//!    of any tree the tokens can make. Past [`GATE_FACTOR`] times the language's limit, the
//!    query is refused unparsed: a parser builds a chain like `1 + 1 + ...` in a loop, so no
//!    parser's own recursion limit stops it, and such a tree could not even be dropped safely.
//! 2. The exact depth of the parsed tree, against the limit, before anything else walks it.
//!
//! Every thread of the server's runtime has [`THREAD_STACK_BYTES`] of stack, and the tests run
//! queries at each limit (and at the gate) on the debug build, whose frames are the largest.

/// The stack of every thread of the server's runtime (workers and the blocking pool); only
/// what a thread touches is ever resident. A PromQL query at [`MAX_PROMQL_DEPTH`] needs 12 to
/// 16 MiB on the debug build (measured: it overflows 12 MiB), about a fifth of that on the
/// release build; 32 MiB leaves twice the debug build's need.
pub const THREAD_STACK_BYTES: usize = 32 << 20;

/// The deepest a SQL expression may nest, counting each operator, function call, parenthesis
/// and subquery as a level: `a OR b OR c` is 3 deep; an `IN` list of any length is 2.
pub const MAX_SQL_DEPTH: usize = 1000;

/// The deepest a PromQL expression may nest, counted as for SQL.
pub const MAX_PROMQL_DEPTH: usize = 1000;

/// How far past the limit the token bound of step 1 may go before a query is refused unparsed
/// (the bound overestimates: `a = 1 AND b = 2` counts 4 where the tree is 3 deep).
pub const GATE_FACTOR: usize = 4;

/// What a token does to the nesting of the tree a parser builds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// `(`, `[`, `{`: a group begins.
    Open,
    /// `)`, `]`, `}`: the innermost group ends.
    Close,
    /// `,`, `;`: the expression at this level ends, another may begin.
    Separator,
    /// An operator or keyword: it may put a node above what came before it.
    Operator,
    /// A name or a literal.
    Operand,
}

/// An upper bound of the depth of any tree a parser can build from tokens of these shapes:
/// within a group, one level per operator plus one for the operands, and a closed group (a
/// parenthesis, a call's arguments) counts as its own bound plus one where it stands. Linear in the tokens, with no recursion.
pub fn depth_bound(shapes: impl IntoIterator<Item = Shape>) -> usize {
    // Per open group: the bound of the expression being read, and the deepest one it held.
    let mut levels: Vec<(usize, usize)> = vec![(0, 0)];
    let close = |levels: &mut Vec<(usize, usize)>| {
        if levels.len() > 1
            && let Some((chain, deepest)) = levels.pop()
            && let Some(parent) = levels.last_mut()
        {
            // The group stands where an operand (one level) would: it adds its depth less one.
            parent.0 = parent.0.saturating_add(deepest.max(chain + 1));
        }
    };
    for shape in shapes {
        match shape {
            Shape::Open => levels.push((0, 0)),
            Shape::Close => close(&mut levels),
            Shape::Separator => {
                if let Some(level) = levels.last_mut() {
                    level.1 = level.1.max(level.0 + 1);
                    level.0 = 0;
                }
            }
            Shape::Operator => {
                if let Some(level) = levels.last_mut() {
                    level.0 = level.0.saturating_add(1);
                }
            }
            Shape::Operand => {}
        }
    }
    while levels.len() > 1 {
        close(&mut levels);
    }
    levels
        .first()
        .map_or(0, |&(chain, deepest)| deepest.max(chain + 1))
}

/// The message of a refusal: what nests too deep, and the limit.
pub fn too_deep(what: &str, limit: usize) -> String {
    format!("the {what} nests deeper than {limit} levels, the limit")
}

#[cfg(test)]
mod tests {
    use super::{Shape::*, *};

    #[test]
    fn a_chain_counts_its_operators() {
        // a + b + c
        assert_eq!(
            depth_bound([Operand, Operator, Operand, Operator, Operand]),
            3
        );
    }

    #[test]
    fn separators_start_a_new_expression() {
        // a + b, c, d + e + f
        let shapes = [
            Operand, Operator, Operand, Separator, Operand, Separator, Operand, Operator, Operand,
            Operator, Operand,
        ];
        assert_eq!(depth_bound(shapes), 3);
    }

    #[test]
    fn groups_add_their_depth_where_they_stand() {
        // ((a + b)) + c: the inner group 2 deep, the outer 3, the sum 5
        let shapes = [
            Open, Open, Operand, Operator, Operand, Close, Close, Operator, Operand,
        ];
        assert_eq!(depth_bound(shapes), 5);
    }

    #[test]
    fn nesting_without_operators_counts_each_group() {
        let mut shapes = vec![Open; 1000];
        shapes.push(Operand);
        shapes.extend(vec![Close; 1000]);
        assert_eq!(depth_bound(shapes), 1001);
        // Unclosed groups count as closed.
        assert_eq!(depth_bound(vec![Open; 10]), 11);
    }

    #[test]
    fn a_long_list_is_shallow() {
        // x IN (1, 2, ..., 10000)
        let mut shapes = vec![Operand, Operator, Open];
        for _ in 0..10_000 {
            shapes.extend([Operand, Separator]);
        }
        shapes.push(Close);
        assert_eq!(depth_bound(shapes), 3);
    }

    proptest::proptest! {
        /// The bound is never below the depth of the tree that a parenthesized sum makes.
        #[test]
        fn never_below_a_real_trees_depth(spec in proptest::collection::vec((0usize..4, 0usize..3), 1..40)) {
            // Each (terms, parens) wraps the expression so far in `parens` groups and adds
            // `terms` more operands to it: depth grows by parens + terms.
            let mut shapes = vec![Operand];
            let mut depth = 1;
            for (terms, parens) in spec {
                let mut wrapped = vec![Open; parens];
                wrapped.append(&mut shapes);
                wrapped.extend(vec![Close; parens]);
                shapes = wrapped;
                depth += parens;
                for _ in 0..terms {
                    shapes.extend([Operator, Operand]);
                    depth += 1;
                }
            }
            proptest::prop_assert!(depth_bound(shapes) >= depth);
        }
    }
}
