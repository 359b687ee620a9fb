//! A seeded generator of web-server access-log records shaped like those of the http_logs
//! benchmark corpus (timestamp, client address, request line, status, size, referrer, user
//! agent), as NDJSON lines of about 300 bytes: the same seed gives the same records anywhere.
//!
//! Records are spread evenly over [`SPAN_MS`] from [`START_MS`] in write order; statuses, paths
//! and agents follow skewed distributions as real logs do (most requests succeed; a few pages
//! and images take most of the hits).

use rand::{Rng, SeedableRng, rngs::StdRng};
use serde_json::json;

/// 1998-06-01T00:00:00Z, in the month the original corpus was logged.
pub const START_MS: i64 = 896_659_200_000;
/// The records span one day.
pub const SPAN_MS: i64 = 24 * 3600 * 1000;

const SECTIONS: &[&str] = &[
    "english", "french", "german", "spanish", "images", "news", "tickets", "teams", "venues",
    "history", "playing", "member",
];
const PAGES: &[&str] = &[
    "index",
    "nav_home_off",
    "nav_tickets_off",
    "hm_brdl",
    "hm_anime",
    "nav_bg_top",
    "space",
    "logo_cfo",
    "splash_inf",
    "schedule",
    "results",
    "standings",
    "photos",
    "players",
    "groups",
    "tickets_info",
    "hm_day",
    "news_archive",
    "venue_map",
    "team_stats",
];
const EXTENSIONS: &[&str] = &["html", "gif", "jpg", "htm", "class", "txt"];
const AGENTS: &[&str] = &[
    "Mozilla/4.0 (compatible; MSIE 4.01; Windows 95)",
    "Mozilla/4.05 [en] (Win95; I)",
    "Mozilla/4.0 (compatible; MSIE 5.0; Windows 98; DigExt)",
    "Mozilla/3.01 (Macintosh; I; PPC)",
    "Mozilla/4.5 [en] (X11; I; Linux 2.0.36 i686)",
    "Mozilla/4.0 (compatible; MSIE 4.01; Windows NT)",
];
/// Statuses and their weights (per 1000).
const STATUSES: &[(u16, u32)] = &[
    (200, 880),
    (304, 70),
    (404, 30),
    (206, 12),
    (500, 5),
    (403, 3),
];

const COUNTRIES: &[&str] = &["fr", "us", "de", "gb", "br", "it", "es", "nl", "jp", "ar"];

/// Words a `match` query looks for in `request`: the sections, and the words of the pages
/// (`nav_home_off` is three words to the analyzer).
pub fn query_words() -> Vec<&'static str> {
    let mut words: Vec<&str> = SECTIONS
        .iter()
        .chain(PAGES)
        .flat_map(|w| w.split('_'))
        .collect();
    words.sort_unstable();
    words.dedup();
    words
}

/// Statuses a `term` query looks for.
pub fn statuses() -> Vec<u16> {
    STATUSES.iter().map(|(s, _)| *s).collect()
}

/// A skewed pick from `n` choices: low indexes far more often (about Zipf-like).
fn skewed(rng: &mut StdRng, n: usize) -> usize {
    let u: f64 = rng.random();
    ((u * u * u) * n as f64) as usize % n
}

/// The `count` records, as NDJSON lines (no newline), of generator `seed`.
pub fn records(seed: u64, count: usize) -> Vec<String> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..count)
        .map(|i| {
            let at = START_MS + (i as i64 * SPAN_MS) / count.max(1) as i64;
            let timestamp = chrono::DateTime::from_timestamp_millis(at)
                .unwrap()
                .format("%Y-%m-%dT%H:%M:%S%.3fZ")
                .to_string();
            let section = SECTIONS[skewed(&mut rng, SECTIONS.len())];
            let page = PAGES[skewed(&mut rng, PAGES.len())];
            let extension = EXTENSIONS[skewed(&mut rng, EXTENSIONS.len())];
            let mut pick: u32 = rng.random_range(0..1000);
            let status = STATUSES
                .iter()
                .find(|(_, weight)| {
                    let hit = pick < *weight;
                    pick = pick.saturating_sub(*weight);
                    hit
                })
                .map_or(200, |(s, _)| *s);
            let size: u32 = if status == 304 {
                0
            } else {
                rng.random_range(100..60_000)
            };
            let referrer = SECTIONS[skewed(&mut rng, SECTIONS.len())];
            json!({
                "@timestamp": timestamp,
                "clientip": format!(
                    "{}.{}.{}.{}",
                    rng.random_range(1..224),
                    rng.random_range(0..256),
                    rng.random_range(0..256),
                    rng.random_range(1..255)
                ),
                "request": format!("GET /{section}/{page}.{extension} HTTP/1.0"),
                "status": status,
                "size": size,
                "referrer": format!("http://www.france98.example/{referrer}/index.html"),
                "agent": AGENTS[skewed(&mut rng, AGENTS.len())],
                "host": format!("www{}.france98.example", rng.random_range(1..5)),
                "country": COUNTRIES[skewed(&mut rng, COUNTRIES.len())],
            })
            .to_string()
        })
        .collect()
}
