//! A plan from elsewhere (a model, a monitor document) checked against the schema it is for:
//! every field it names is one the asker sees, of a kind its use needs, and its shape is one
//! the renderer renders. What passes is normalized as the planner's own plans are (the time
//! field, a metrics plan's PromQL rendered from its parts, never taken as given).

use super::{Cmp, Kind, Op, Plan, Schema, metrics};

/// The plan, checked and normalized; why not otherwise.
pub fn checked(mut plan: Plan, schema: &Schema) -> Result<Plan, String> {
    if plan.dataset != schema.dataset {
        return Err(format!(
            "it plans dataset {:?}, not {:?}",
            plan.dataset, schema.dataset
        ));
    }
    // Where it runs is the thread's, never the plan's to say.
    plan.connection = schema.connection.clone();
    if plan.limit.is_some_and(|l| l == 0 || l > 1_000) {
        return Err("its limit is not between 1 and 1000".to_owned());
    }
    if let Some(metrics_schema) = &schema.metrics {
        let metric = plan.measure.field.as_deref().unwrap_or_default();
        if !metrics_schema.names.iter().any(|n| n == metric) {
            return Err(format!("{metric:?} is no metric of {}", schema.dataset));
        }
        let labels = |name: &str| metrics_schema.labels.iter().any(|l| l.name == name);
        if let Some(f) = plan.filters.iter().find(|f| !labels(&f.field)) {
            return Err(format!("{:?} is no label of {metric}", f.field));
        }
        if plan
            .filters
            .iter()
            .any(|f| !matches!(f.op, Cmp::Eq | Cmp::Ne) || !f.value.is_string())
        {
            return Err("a label filter is an equality with a text value".to_owned());
        }
        if plan.group_by.as_deref().is_some_and(|g| !labels(g)) {
            return Err(format!("{:?} is no label of {metric}", plan.group_by));
        }
        if plan
            .function
            .as_deref()
            .is_some_and(|f| !matches!(f, "rate" | "increase"))
        {
            return Err("its function is not rate or increase".to_owned());
        }
        plan.interval = None;
        plan.time_field = None;
        plan.promql = Some(metrics::expression(&plan));
        return Ok(plan);
    }
    if plan.promql.is_some() || plan.function.is_some() {
        return Err(format!("{} is not a metrics dataset", schema.dataset));
    }
    let field = |name: &str| {
        schema
            .field(name)
            .ok_or_else(|| format!("{name:?} is no field of {}", schema.dataset))
    };
    match plan.measure.op {
        Op::Avg | Op::Sum | Op::Min | Op::Max | Op::Percentile => {
            let name = plan
                .measure
                .field
                .as_deref()
                .ok_or_else(|| format!("its {} names no field", plan.measure.op.words()))?;
            if field(name)?.kind != Kind::Number {
                return Err(format!("{name:?} is not a numeric field"));
            }
            if plan.measure.op == Op::Percentile
                && !plan
                    .measure
                    .percentile
                    .is_some_and(|p| p > 0.0 && p < 100.0)
            {
                return Err("its percentile is not between 0 and 100".to_owned());
            }
        }
        Op::CountDistinct | Op::Values => {
            let name = plan
                .measure
                .field
                .as_deref()
                .or(plan.group_by.as_deref())
                .ok_or_else(|| "it counts the values of no field".to_owned())?;
            field(name)?;
        }
        Op::Count | Op::List => {}
    }
    for filter in &plan.filters {
        let f = field(&filter.field)?;
        let fits = match filter.op {
            Cmp::Eq | Cmp::Ne => match f.kind {
                Kind::Number => filter.value.is_number(),
                Kind::Bool => filter.value.is_boolean(),
                _ => filter.value.is_string(),
            },
            Cmp::Gt | Cmp::Gte | Cmp::Lt | Cmp::Lte => {
                f.kind == Kind::Number && filter.value.is_number()
            }
            Cmp::Contains => f.kind == Kind::Text && filter.value.is_string(),
        };
        if !fits {
            return Err(format!(
                "its filter on {:?} does not fit a {:?} field",
                filter.field, f.kind
            ));
        }
    }
    if let Some(group) = &plan.group_by {
        field(group)?;
    }
    if let Some(interval) = &plan.interval
        && !matches!(interval.as_str(), "1m" | "1h" | "1d" | "1w" | "1M")
    {
        return Err(format!(
            "its interval {interval:?} is not 1m, 1h, 1d, 1w or 1M"
        ));
    }
    if let Some(window) = &plan.window {
        for math in [&window.from, &window.to].into_iter().flatten() {
            if super::render::instant(math, false, chrono::Utc::now()).is_none() {
                return Err(format!("its time {math:?} is not a date"));
            }
        }
    }
    if plan.window.is_some() || plan.interval.is_some() || plan.measure.op == Op::List {
        plan.time_field = schema.time_field.clone();
        if plan.time_field.is_none() && plan.measure.op != Op::List {
            return Err(format!("{} has no time field", schema.dataset));
        }
    } else {
        plan.time_field = None;
    }
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::engine::assistant::planner::Field;

    fn schema() -> Schema {
        Schema {
            dataset: "logs".to_owned(),
            connection: None,
            fields: vec![
                Field {
                    name: "@timestamp".into(),
                    kind: Kind::Date,
                    values: vec![],
                },
                Field {
                    name: "host".into(),
                    kind: Kind::Text,
                    values: vec!["a".into()],
                },
                Field {
                    name: "latency_ms".into(),
                    kind: Kind::Number,
                    values: vec![],
                },
            ],
            time_field: Some("@timestamp".into()),
            metrics: None,
        }
    }

    fn plan(value: serde_json::Value) -> Plan {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn a_plan_names_only_fields_of_fitting_kinds() {
        let ok = checked(
            plan(json!({"dataset": "logs", "measure": {"op": "avg", "field": "latency_ms"},
                "filters": [{"field": "host", "op": "eq", "value": "b"}], "window": {"from": "now-1h", "said": "in the last hour"}})),
            &schema(),
        )
        .unwrap();
        assert_eq!(ok.time_field.as_deref(), Some("@timestamp"));
        for (bad, why) in [
            (
                json!({"dataset": "other", "measure": {"op": "count"}}),
                "dataset",
            ),
            (
                json!({"dataset": "logs", "measure": {"op": "avg", "field": "host"}}),
                "numeric",
            ),
            (
                json!({"dataset": "logs", "measure": {"op": "avg", "field": "secret"}}),
                "no field",
            ),
            (
                json!({"dataset": "logs", "measure": {"op": "count"}, "filters": [{"field": "host", "op": "gt", "value": 3}]}),
                "does not fit",
            ),
            (
                json!({"dataset": "logs", "measure": {"op": "count"}, "group_by": "nope"}),
                "no field",
            ),
            (
                json!({"dataset": "logs", "measure": {"op": "count"}, "interval": "7s"}),
                "interval",
            ),
            (
                json!({"dataset": "logs", "measure": {"op": "count"}, "limit": 0}),
                "limit",
            ),
            (
                json!({"dataset": "logs", "measure": {"op": "count"}, "promql": "up"}),
                "metrics",
            ),
            (
                json!({"dataset": "logs", "measure": {"op": "count"}, "window": {"from": "yesterday-ish", "said": ""}}),
                "not a date",
            ),
        ] {
            let error = checked(plan(bad.clone()), &schema()).unwrap_err();
            assert!(error.contains(why), "{bad}: {error}");
        }
    }
}
