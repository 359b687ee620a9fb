//! Index settings (Elasticsearch's `settings` of an index): the few a dataset keeps when its
//! creation gives them, and the limits they set on its searches. A dataset has one shard and
//! no replicas whatever the settings say; other settings are accepted at creation and not kept.

use std::collections::BTreeMap;

use serde_json::Value;
use strata_projections::catalog::TableDef;

use crate::error::Error;

/// A setting a dataset keeps: its name (without `index.`), its default, and its least and
/// greatest values.
struct Kept {
    name: &'static str,
    default: u64,
    least: u64,
    most: u64,
}

/// The settings a dataset keeps.
const KEPT: &[Kept] = &[
    Kept {
        name: MAX_RESULT_WINDOW,
        default: 10_000,
        least: 1,
        // A search holds its window of hits in memory: a million at most here (Elasticsearch
        // takes up to 2^31 - 1).
        most: 1_000_000,
    },
    Kept {
        name: MAX_DOCVALUE_FIELDS,
        default: 100,
        least: 0,
        most: i32::MAX as u64,
    },
];

/// The largest `from + size` of a search.
const MAX_RESULT_WINDOW: &str = "max_result_window";
/// The most `docvalue_fields` a search may ask for.
const MAX_DOCVALUE_FIELDS: &str = "max_docvalue_fields_search";

/// `settings` flattened to dotted names without their `index.` prefix, with their values
/// (`{"index": {"refresh_interval": "1s"}}` is `refresh_interval` = `"1s"`).
pub fn flat(settings: &Value) -> Vec<(String, &Value)> {
    fn walk<'a>(prefix: &str, value: &'a Value, out: &mut Vec<(String, &'a Value)>) {
        match value {
            Value::Object(object) => {
                for (key, value) in object {
                    let name = match prefix.is_empty() {
                        true => key.clone(),
                        false => format!("{prefix}.{key}"),
                    };
                    walk(&name, value, out);
                }
            }
            _ => out.push((
                prefix.strip_prefix("index.").unwrap_or(prefix).to_owned(),
                value,
            )),
        }
    }
    let mut out = Vec::new();
    walk("", settings, &mut out);
    out
}

/// The settings of an index creation's `settings` that a dataset keeps, checked: name →
/// value as a decimal integer. A kept setting that is not an integer of its range is a 400.
pub fn kept(settings: Option<&Value>) -> Result<BTreeMap<String, String>, Error> {
    let Some(settings) = settings else {
        return Ok(BTreeMap::new());
    };
    let mut out = BTreeMap::new();
    for (name, value) in flat(settings) {
        let Some(kept) = KEPT.iter().find(|kept| kept.name == name) else {
            continue;
        };
        let number = match value {
            Value::Number(n) => n.as_u64(),
            Value::String(text) => text.parse::<u64>().ok(),
            _ => None,
        };
        match number {
            Some(n) if (kept.least..=kept.most).contains(&n) => {
                out.insert(name, n.to_string());
            }
            _ => {
                return Err(Error::BadRequest(format!(
                    "[illegal_argument_exception] Failed to parse value [{}] for setting [index.{name}]: an integer from {} to {} is needed",
                    match value {
                        Value::String(text) => text.clone(),
                        other => other.to_string(),
                    },
                    kept.least,
                    kept.most
                )));
            }
        }
    }
    Ok(out)
}

/// What a dataset's settings limit in its searches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The largest `from + size` (`index.max_result_window`).
    pub max_result_window: u64,
    /// The most `docvalue_fields` one search may ask for (`index.max_docvalue_fields_search`).
    pub max_docvalue_fields: u64,
}

impl Limits {
    /// The limits of dataset `def`: its settings, or their defaults.
    pub fn of(def: &TableDef) -> Limits {
        let value = |name: &str| {
            def.settings
                .get(name)
                .and_then(|text| text.parse().ok())
                .or_else(|| KEPT.iter().find(|k| k.name == name).map(|k| k.default))
                .unwrap_or(u64::MAX)
        };
        Limits {
            max_result_window: value(MAX_RESULT_WINDOW),
            max_docvalue_fields: value(MAX_DOCVALUE_FIELDS),
        }
    }

    /// Why a search of `window` hits (`from + size`) asking for `docvalue_fields` fields is
    /// refused, in Elasticsearch's words; `None` when it is within the limits.
    pub fn refusal(&self, window: u64, docvalue_fields: u64) -> Option<String> {
        if window > self.max_result_window {
            return Some(format!(
                "Result window is too large, from + size must be less than or equal to: [{}] but was [{window}]. See the scroll api for a more efficient way to request large data sets. This limit can be set by changing the [index.{MAX_RESULT_WINDOW}] index level setting.",
                self.max_result_window
            ));
        }
        if docvalue_fields > self.max_docvalue_fields {
            return Some(format!(
                "Trying to retrieve too many docvalue_fields. Must be less than or equal to: [{}] but was [{docvalue_fields}]. This limit can be set by changing the [index.{MAX_DOCVALUE_FIELDS}] index level setting.",
                self.max_docvalue_fields
            ));
        }
        None
    }

    /// The settings `def` keeps, as the get index API shows them (values as strings).
    pub fn shown(def: &TableDef) -> serde_json::Map<String, Value> {
        def.settings
            .iter()
            .filter(|(name, _)| KEPT.iter().any(|k| k.name == name.as_str()))
            .map(|(name, value)| (name.clone(), Value::String(value.clone())))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn kept_settings_are_read_in_every_spelling_and_others_are_left() {
        for settings in [
            json!({"index.max_docvalue_fields_search": 2, "number_of_shards": 3}),
            json!({"index": {"max_docvalue_fields_search": "2"}}),
            json!({"max_docvalue_fields_search": 2}),
        ] {
            let kept = kept(Some(&settings)).unwrap();
            assert_eq!(kept.len(), 1, "{settings}");
            assert_eq!(kept["max_docvalue_fields_search"], "2");
        }
        assert!(kept(None).unwrap().is_empty());
    }

    #[test]
    fn a_kept_setting_out_of_range_is_refused() {
        for bad in [
            json!({"index.max_result_window": 0}),
            json!({"index.max_result_window": -5}),
            json!({"index.max_result_window": 1_000_001}),
            json!({"index.max_result_window": "ten"}),
            json!({"index.max_docvalue_fields_search": 1.5}),
            json!({"index": {"max_docvalue_fields_search": true}}),
        ] {
            let error = kept(Some(&bad)).unwrap_err().to_string();
            assert!(error.contains("Failed to parse value"), "{bad}: {error}");
        }
    }

    #[test]
    fn limits_default_and_follow_the_settings() {
        let mut def = TableDef::default();
        let limits = Limits::of(&def);
        assert_eq!(limits.max_result_window, 10_000);
        assert_eq!(limits.max_docvalue_fields, 100);
        assert_eq!(limits.refusal(10_000, 100), None);
        assert!(
            limits
                .refusal(10_001, 0)
                .unwrap()
                .contains("[10000] but was [10001]")
        );
        def.settings = kept(Some(
            &json!({"index.max_result_window": 50_000, "index.max_docvalue_fields_search": 2}),
        ))
        .unwrap();
        let limits = Limits::of(&def);
        assert_eq!(limits.refusal(20_000, 2), None);
        let refusal = limits.refusal(10, 3).unwrap();
        assert!(
            refusal.starts_with("Trying to retrieve too many docvalue_fields. Must be less than or equal to: [2] but was [3]."),
            "{refusal}"
        );
        assert_eq!(
            Value::Object(Limits::shown(&def)),
            json!({"max_docvalue_fields_search": "2", "max_result_window": "50000"})
        );
    }
}
