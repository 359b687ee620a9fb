//! The function table: every function Prometheus' parser knows (`promql/parser/functions.go`),
//! with argument types, how many optional trailing arguments it takes and its return type.

use super::ValueType;

/// A PromQL function signature.
#[derive(Debug, PartialEq, Eq)]
pub struct Function {
    pub name: &'static str,
    /// The types of the arguments; with `variadic != 0` the last entry repeats.
    pub arg_types: &'static [ValueType],
    /// 0: exactly `arg_types.len()` arguments; n > 0: the last argument may be omitted or
    /// repeated up to n times in total; -1: repeated without limit.
    pub variadic: i32,
    pub return_type: ValueType,
    /// Behind Prometheus' `promql-experimental-functions` feature (enabled here).
    pub experimental: bool,
}

use ValueType::{Matrix as M, Scalar as S, String as Str, Vector as V};

const fn f(
    name: &'static str,
    arg_types: &'static [ValueType],
    variadic: i32,
    return_type: ValueType,
    experimental: bool,
) -> Function {
    Function {
        name,
        arg_types,
        variadic,
        return_type,
        experimental,
    }
}

/// All functions, sorted by name.
pub static FUNCTIONS: &[Function] = &[
    f("abs", &[V], 0, V, false),
    f("absent", &[V], 0, V, false),
    f("absent_over_time", &[M], 0, V, false),
    f("acos", &[V], 0, V, false),
    f("acosh", &[V], 0, V, false),
    f("asin", &[V], 0, V, false),
    f("asinh", &[V], 0, V, false),
    f("atan", &[V], 0, V, false),
    f("atanh", &[V], 0, V, false),
    f("avg_over_time", &[M], 0, V, false),
    f("ceil", &[V], 0, V, false),
    f("changes", &[M], 0, V, false),
    f("clamp", &[V, S, S], 0, V, false),
    f("clamp_max", &[V, S], 0, V, false),
    f("clamp_min", &[V, S], 0, V, false),
    f("cos", &[V], 0, V, false),
    f("cosh", &[V], 0, V, false),
    f("count_over_time", &[M], 0, V, false),
    f("day_of_month", &[V], 1, V, false),
    f("day_of_week", &[V], 1, V, false),
    f("day_of_year", &[V], 1, V, false),
    f("days_in_month", &[V], 1, V, false),
    f("deg", &[V], 0, V, false),
    f("delta", &[M], 0, V, false),
    f("deriv", &[M], 0, V, false),
    f("double_exponential_smoothing", &[M, S, S], 0, V, true),
    f("end", &[], 0, S, true),
    f("exp", &[V], 0, V, false),
    f("first_over_time", &[M], 0, V, true),
    f("floor", &[V], 0, V, false),
    f("histogram_avg", &[V], 0, V, false),
    f("histogram_count", &[V], 0, V, false),
    f("histogram_fraction", &[S, S, V], 0, V, false),
    f("histogram_quantile", &[S, V], 0, V, false),
    f("histogram_quantiles", &[V, Str, S, S], 9, V, true),
    f("histogram_stddev", &[V], 0, V, false),
    f("histogram_stdvar", &[V], 0, V, false),
    f("histogram_sum", &[V], 0, V, false),
    // Prometheus 2's name of double_exponential_smoothing, kept for the dashboards and rules
    // written for it (Prometheus 3 knows only the new name, behind its experimental flag).
    f("holt_winters", &[M, S, S], 0, V, false),
    f("hour", &[V], 1, V, false),
    f("idelta", &[M], 0, V, false),
    f("increase", &[M], 0, V, false),
    f("info", &[V, V], 1, V, true),
    f("integral", &[M, S], 1, V, true),
    f("irate", &[M], 0, V, false),
    f("label_join", &[V, Str, Str, Str], -1, V, false),
    f("label_replace", &[V, Str, Str, Str, Str], 0, V, false),
    f("last_over_time", &[M], 0, V, false),
    f("ln", &[V], 0, V, false),
    f("log10", &[V], 0, V, false),
    f("log2", &[V], 0, V, false),
    f("mad_over_time", &[M], 0, V, true),
    f("max_of", &[S, S], 0, S, true),
    f("max_over_time", &[M], 0, V, false),
    f("min_of", &[S, S], 0, S, true),
    f("min_over_time", &[M], 0, V, false),
    f("minute", &[V], 1, V, false),
    f("month", &[V], 1, V, false),
    f("pi", &[], 0, S, false),
    f("predict_linear", &[M, S], 0, V, false),
    f("present_over_time", &[M], 0, V, false),
    f("quantile_over_time", &[S, M], 0, V, false),
    f("rad", &[V], 0, V, false),
    f("range", &[], 0, S, true),
    f("rate", &[M], 0, V, false),
    f("resets", &[M], 0, V, false),
    f("round", &[V, S], 1, V, false),
    f("scalar", &[V], 0, S, false),
    f("sgn", &[V], 0, V, false),
    f("sin", &[V], 0, V, false),
    f("sinh", &[V], 0, V, false),
    f("sort", &[V], 0, V, false),
    f("sort_by_label", &[V, Str], -1, V, true),
    f("sort_by_label_desc", &[V, Str], -1, V, true),
    f("sort_desc", &[V], 0, V, false),
    f("sqrt", &[V], 0, V, false),
    f("start", &[], 0, S, true),
    f("start_timestamp", &[V], 0, V, true),
    f("stddev_over_time", &[M], 0, V, false),
    f("stdvar_over_time", &[M], 0, V, false),
    f("step", &[], 0, S, true),
    f("sum_over_time", &[M], 0, V, false),
    f("tan", &[V], 0, V, false),
    f("tanh", &[V], 0, V, false),
    f("time", &[], 0, S, false),
    f("timestamp", &[V], 0, V, false),
    f("ts_of_first_over_time", &[M], 0, V, true),
    f("ts_of_last_over_time", &[M], 0, V, true),
    f("ts_of_max_over_time", &[M], 0, V, true),
    f("ts_of_min_over_time", &[M], 0, V, true),
    f("vector", &[S], 0, V, false),
    f("year", &[V], 1, V, false),
];

/// The function called `name` (case-sensitive, as in Prometheus).
pub fn lookup_function(name: &str) -> Option<&'static Function> {
    FUNCTIONS
        .binary_search_by(|func| func.name.cmp(name))
        .ok()
        .and_then(|i| FUNCTIONS.get(i))
}

/// Functions that accept a range selector with the `anchored` modifier.
pub const ANCHORED_SAFE: &[&str] = &["changes", "delta", "increase", "rate", "resets"];

/// Functions that accept a range selector with the `smoothed` modifier.
pub const SMOOTHED_SAFE: &[&str] = &["delta", "increase", "rate"];
