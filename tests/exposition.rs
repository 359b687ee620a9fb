//! The Prometheus text format inputs of ../shared/conformance/expfmt/prometheus-textparse (the
//! `.prom.txt` files, Prometheus text 0.0.4; the `.om.txt` files are OpenMetrics, which this
//! parser does not read) parse whole, and the families their metadata declares are the ones
//! their samples use. The tricky inputs of INPUTS.md are unit tests in src/exposition/tests.rs.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use strata::exposition::{self, MetricType};

const DIR: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../shared/conformance/expfmt/prometheus-textparse"
);

#[test]
fn prometheus_text_inputs_parse_whole() {
    let with_metadata = std::fs::read_to_string(format!("{DIR}/alltypes.237mfs.prom.txt")).unwrap();
    let parsed = exposition::parse(&with_metadata).unwrap();
    let typed = parsed
        .families
        .values()
        .filter(|f| f.kind.is_some())
        .count();
    assert_eq!(typed, 237);
    let samples = with_metadata
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .count();
    assert_eq!(parsed.samples.len(), samples);
    // Every sample belongs to a family the metadata declares.
    for sample in &parsed.samples {
        let family = exposition::family_of(&sample.name, &parsed.families);
        assert!(
            parsed
                .families
                .get(family)
                .is_some_and(|f| f.kind.is_some()),
            "{} has no family",
            sample.name
        );
    }
    assert!(
        parsed
            .families
            .values()
            .any(|f| f.kind == Some(MetricType::Histogram))
    );

    let without =
        std::fs::read_to_string(format!("{DIR}/alltypes.237mfs.nometa.prom.txt")).unwrap();
    let bare = exposition::parse(&without).unwrap();
    assert!(bare.families.is_empty());
    assert_eq!(bare.samples.len(), samples);
}
