//! The required modules of the mustache specification, run against
//! `strata::engine::monitors::template::render`: every test of every file must pass.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;
use strata::engine::monitors::template::render;

/// The required modules; the optional ones (`~*.json`) are not supported.
const FILES: [&str; 6] = [
    "comments.json",
    "delimiters.json",
    "interpolation.json",
    "inverted.json",
    "partials.json",
    "sections.json",
];

/// How many tests the required modules hold at the copied commit (see the folder's README.md).
const TOTAL: usize = 136;

fn spec_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/conformance/mustache")
}

fn text(test: &Value, key: &str) -> String {
    test[key]
        .as_str()
        .unwrap_or_else(|| panic!("{key} is not a string in {test}"))
        .to_owned()
}

fn partials(test: &Value) -> BTreeMap<String, String> {
    let Some(map) = test.get("partials") else {
        return BTreeMap::new();
    };
    let map = map
        .as_object()
        .unwrap_or_else(|| panic!("partials is not an object in {test}"));
    let source = |value: &Value| {
        value
            .as_str()
            .unwrap_or_else(|| panic!("a partial is not a string in {test}"))
            .to_owned()
    };
    map.iter()
        .map(|(name, value)| (name.clone(), source(value)))
        .collect()
}

/// Runs one test; the failure, described, if it fails.
fn run(file: &str, test: &Value) -> Option<String> {
    let name = text(test, "name");
    let template = text(test, "template");
    let expected = text(test, "expected");
    match render(&template, &partials(test), &test["data"]) {
        Ok(got) if got == expected => None,
        Ok(got) => Some(format!(
            "{file} / {name}: template {template:?}\n  expected {expected:?}\n  got      {got:?}"
        )),
        Err(error) => Some(format!(
            "{file} / {name}: template {template:?}\n  error {error}"
        )),
    }
}

#[test]
fn mustache_spec_required_modules() {
    let dir = spec_dir();
    assert!(
        dir.is_dir(),
        "the mustache spec folder {} is missing",
        dir.display()
    );
    let mut failures = Vec::new();
    let mut total = 0;
    for file in FILES {
        let path = dir.join(file);
        let json = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let spec: Value = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{file}: {e}"));
        let tests = spec["tests"]
            .as_array()
            .unwrap_or_else(|| panic!("{file} has no tests"));
        assert!(!tests.is_empty(), "{file} has no tests");
        let failed: Vec<String> = tests.iter().filter_map(|test| run(file, test)).collect();
        println!(
            "{file}: {}/{} passed",
            tests.len() - failed.len(),
            tests.len()
        );
        total += tests.len();
        failures.extend(failed);
    }
    assert!(
        failures.is_empty(),
        "{} spec tests failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert_eq!(
        total, TOTAL,
        "the required modules should hold {TOTAL} tests"
    );
}
