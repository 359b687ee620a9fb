//! Every parser that reads client bytes, one of them per run, chosen by `STRATA_FUZZ_TARGET`
//! (scripts/fuzz sets it; `scripts/fuzz list` lists them). A finding is a panic, a hang, or
//! (where the parser answers with strata's error) an error a client would get as a 5xx.
#![no_main]

use std::sync::LazyLock;

use libfuzzer_sys::fuzz_target;
use strata::engine::fuzz;

/// The parsers, by name: what each reads.
const TARGETS: &[&str] = &[
    "bulk",         // a bulk body (POST /_bulk): operations, records, the rows they plan
    "search",       // a search body (POST /{dataset}/_search): query compiled, aggregations
    "sql",          // platform SQL (POST /sql): gates, parse, upsert, a query planned
    "documents",    // role, user, monitor, channel documents (YAML or JSON); first byte chooses
    "exposition",   // the Prometheus text format (POST /{dataset}/metrics)
    "remote_write", // Prometheus remote write: snappy, protobuf WriteRequest
    "rows",         // data-plane rows: Arrow IPC or JSON; first byte chooses
    "promql",       // PromQL and series selectors
    "sigv4",        // a signed request: method, path, query, headers, one a line
    "schedule",     // a monitor schedule: cron expression and time zone, or a period
    "template",     // a mustache template, a partial and a JSON context, NUL-separated
    "log_frames",   // a FileLog segment, and a frame body whose checksum holds
];

static TARGET: LazyLock<&'static str> = LazyLock::new(|| {
    // As the server does: a panic inside strata::panics::catch (arrow's readers assert on
    // malformed bytes) is the client's bad input, answered with a 400; any other still aborts.
    strata::panics::install_hook();
    let chosen = std::env::var("STRATA_FUZZ_TARGET").unwrap_or_default();
    TARGETS
        .iter()
        .find(|t| **t == chosen)
        .copied()
        .unwrap_or_else(|| panic!("STRATA_FUZZ_TARGET must be one of {TARGETS:?}, not {chosen:?}"))
});

/// An error a client would get as a 5xx is a finding.
fn client_error(outcome: Result<impl Sized, strata::error::Error>) {
    if let Err(error) = outcome {
        assert!(!fuzz::is_server_error(&error), "a 5xx: {error:?}");
    }
}

fuzz_target!(|data: &[u8]| {
    let text = std::str::from_utf8(data);
    match *TARGET {
        "bulk" => client_error(fuzz::bulk(data)),
        "search" => client_error(fuzz::search(data)),
        "sql" => {
            if let Ok(text) = text {
                client_error(fuzz::sql(text));
            }
        }
        "documents" => {
            if let Some((kind, body)) = data.split_first() {
                match kind % 4 {
                    0 => client_error(fuzz::role(body)),
                    1 => client_error(fuzz::user(body)),
                    2 => client_error(fuzz::monitor(body)),
                    _ => client_error(fuzz::channel(body)),
                }
            }
        }
        "exposition" => {
            if let Ok(text) = text {
                let _ = strata::exposition::parse(text);
            }
        }
        "remote_write" => client_error(strata::remote_write::decode(data, 1 << 20)),
        "rows" => {
            if let Some((kind, body)) = data.split_first() {
                client_error(fuzz::rows(body, kind % 2 == 0));
            }
        }
        "promql" => {
            if let Ok(text) = text {
                let _ = strata_promql::parser::parse(text);
                let _ = strata_promql::parser::parse_metric_selector(text);
            }
        }
        "sigv4" => {
            if let Ok(text) = text {
                fuzz::sigv4(text);
            }
        }
        "schedule" => {
            if let Ok(text) = text {
                fuzz::schedule(text);
            }
        }
        "template" => {
            if let Ok(text) = text {
                fuzz::template(text);
            }
        }
        "log_frames" => {
            strata_log::fuzz::segment(data);
            strata_log::fuzz::frame(data);
        }
        other => unreachable!("{other}"),
    }
});
