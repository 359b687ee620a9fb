//! Reading Prometheus' test scripts (`promqltest`): `load`, `load_with_nhcb`, `clear` and
//! `eval` commands with their expectations.

use std::sync::Arc;

use regex::Regex;
use strata_promql::histogram::{CounterResetHint, FloatHistogram, HistogramFields};
use strata_promql::parser::{self, CounterResetHint as ParsedHint, HistogramItem, SeriesItem};
use strata_promql::value::Labels;

/// One command of a script.
pub enum Command {
    Clear,
    Load(Load),
    Eval(Box<Eval>),
}

/// A `load` block.
pub struct Load {
    pub step_ms: i64,
    pub with_nhcb: bool,
    pub series: Vec<(Labels, Vec<SeriesItem>)>,
}

/// An `expect warn|info|fail` line: an exact message or a pattern.
pub enum Matcher {
    Message(String),
    Pattern(Regex),
    /// No message given: any will do.
    Any,
}

impl Matcher {
    pub fn matches(&self, s: &str) -> bool {
        match self {
            Matcher::Message(m) => m == s,
            Matcher::Pattern(re) => re.is_match(s),
            Matcher::Any => true,
        }
    }
}

/// An `eval` command.
pub struct Eval {
    pub line: usize,
    pub expr: String,
    pub range: Option<(i64, i64, i64)>,
    /// Instant queries: the evaluation time.
    pub at: i64,
    /// `expect range vector from .. to .. step ..`.
    pub range_vector: Option<(i64, i64, i64)>,
    pub fail: bool,
    pub fail_matcher: Option<Matcher>,
    pub warn: bool,
    pub info: bool,
    pub ordered: bool,
    pub warns: Vec<Matcher>,
    pub infos: Vec<Matcher>,
    pub no_warn: bool,
    pub no_info: bool,
    pub expect_string: Option<String>,
    pub scalar: Option<f64>,
    /// Expected series: labels, values, and 1-based position among the result lines.
    pub expected: Vec<(Labels, Vec<SeriesItem>, usize)>,
}

/// Parses a whole script; the error names the line.
pub fn parse_script(text: &str) -> Result<Vec<Command>, String> {
    let lines: Vec<String> = text
        .lines()
        .map(|l| {
            let t = l.trim();
            if t.starts_with('#') {
                String::new()
            } else {
                t.to_string()
            }
        })
        .collect();
    let mut cmds = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let l = &lines[i];
        if l.is_empty() {
            i += 1;
            continue;
        }
        let first = l.split_whitespace().next().unwrap_or("").to_lowercase();
        if first == "clear" {
            cmds.push(Command::Clear);
            i += 1;
        } else if first.starts_with("load") {
            let (next, load) = parse_load(&lines, i)?;
            cmds.push(Command::Load(load));
            i = next;
        } else if first.starts_with("eval") {
            let (next, eval) = parse_eval(&lines, i)?;
            cmds.push(Command::Eval(Box::new(eval)));
            i = next;
        } else {
            return Err(format!("line {}: invalid command {l:?}", i + 1));
        }
    }
    Ok(cmds)
}

fn duration(s: &str) -> Result<i64, String> {
    parser::parse_duration(s.trim()).map_err(|e| e.to_string())
}

fn parse_load(lines: &[String], start: usize) -> Result<(usize, Load), String> {
    let re = Regex::new(r"^load(?:_(with_nhcb))?\s+(.+?)$").map_err(|e| e.to_string())?;
    let head = &lines[start];
    let caps = re
        .captures(head)
        .ok_or_else(|| format!("line {}: invalid load command", start + 1))?;
    let step_ms = duration(caps.get(2).map_or("", |m| m.as_str()))?;
    let mut load = Load {
        step_ms,
        with_nhcb: caps.get(1).is_some(),
        series: Vec::new(),
    };
    let mut i = start + 1;
    while i < lines.len() && !lines[i].is_empty() {
        let l = &lines[i];
        i += 1;
        let first = l.split([' ', '\t']).next().unwrap_or("");
        if first.ends_with("@st") {
            continue; // start timestamps are not supported
        }
        let d = parser::parse_series_description(l).map_err(|e| format!("line {}: {e}", i))?;
        load.series.push((Labels::from_pairs(d.labels), d.values));
    }
    Ok((i, load))
}

/// A number as the runner reads a scalar expectation (`strconv.ParseInt(s, 0, 64)`, then
/// `ParseFloat`).
pub fn parse_number(s: &str) -> Option<f64> {
    let (neg, body) = match s.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let int = if let Some(h) = body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
        i64::from_str_radix(h, 16).ok()
    } else if body.len() > 1 && body.starts_with('0') && body.bytes().all(|b| b.is_ascii_digit()) {
        i64::from_str_radix(&body[1..], 8).ok()
    } else {
        body.parse::<i64>().ok()
    };
    if let Some(v) = int {
        let v = v as f64;
        return Some(if neg { -v } else { v });
    }
    match body.to_ascii_lowercase().as_str() {
        "inf" | "infinity" => {
            return Some(if neg {
                f64::NEG_INFINITY
            } else {
                f64::INFINITY
            });
        }
        "nan" => return Some(f64::NAN),
        _ => {}
    }
    if body.contains('_')
        || body.is_empty()
        || !body.starts_with(|c: char| c.is_ascii_digit() || c == '.')
    {
        return None;
    }
    body.parse::<f64>().ok().map(|v| if neg { -v } else { v })
}

fn parse_eval(lines: &[String], start: usize) -> Result<(usize, Eval), String> {
    let inst =
        Regex::new(r"^eval(?:_(fail|warn|ordered|info))?\s+instant\s+(?:at\s+(.+?))?\s+(.+)$")
            .map_err(|e| e.to_string())?;
    let range = Regex::new(
        r"^eval(?:_(fail|warn|info))?\s+range\s+from\s+(.+)\s+to\s+(.+)\s+step\s+(.+?)\s+(.+)$",
    )
    .map_err(|e| e.to_string())?;
    let head = &lines[start];
    let err = |m: &str| format!("line {}: {m}", start + 1);
    let mut ev = Eval {
        line: start + 1,
        expr: String::new(),
        range: None,
        at: 0,
        range_vector: None,
        fail: false,
        fail_matcher: None,
        warn: false,
        info: false,
        ordered: false,
        warns: Vec::new(),
        infos: Vec::new(),
        no_warn: false,
        no_info: false,
        expect_string: None,
        scalar: None,
        expected: Vec::new(),
    };
    let modifier;
    if let Some(c) = inst.captures(head) {
        modifier = c.get(1).map(|m| m.as_str().to_string());
        ev.at = duration(c.get(2).map_or("0", |m| m.as_str()))?;
        ev.expr = c.get(3).map_or("", |m| m.as_str()).to_string();
    } else if let Some(c) = range.captures(head) {
        modifier = c.get(1).map(|m| m.as_str().to_string());
        let get = |i: usize| c.get(i).map_or("", |m| m.as_str());
        ev.range = Some((duration(get(2))?, duration(get(3))?, duration(get(4))?));
        ev.expr = get(5).to_string();
    } else {
        return Err(err("invalid evaluation command"));
    }
    match modifier.as_deref() {
        Some("fail") => ev.fail = true,
        Some("warn") => ev.warn = true,
        Some("info") => ev.info = true,
        Some("ordered") => ev.ordered = true,
        _ => {}
    }
    let expect =
        Regex::new(r"^expect\s+(ordered|fail|warn|no_warn|info|no_info)(?:\s+(regex|msg):(.+))?$")
            .map_err(|e| e.to_string())?;
    let range_re = Regex::new(r"^expect range vector\s+from\s+(.+)\s+to\s+(.+)\s+step\s+(.+)$")
        .map_err(|e| e.to_string())?;
    let mut i = start + 1;
    let mut pos = 1;
    while i < lines.len() && !lines[i].is_empty() {
        let l = lines[i].as_str();
        i += 1;
        if ev.fail
            && let Some(m) = l.strip_prefix("expected_fail_message")
        {
            ev.fail_matcher = Some(Matcher::Message(m.trim().to_string()));
            break;
        }
        if ev.fail
            && let Some(p) = l.strip_prefix("expected_fail_regexp")
        {
            ev.fail_matcher = Some(Matcher::Pattern(
                Regex::new(p.trim()).map_err(|e| e.to_string())?,
            ));
            break;
        }
        if l.starts_with("expect range vector") {
            let c = range_re
                .captures(l)
                .ok_or_else(|| err("invalid range vector definition"))?;
            let get = |i: usize| c.get(i).map_or("", |m| m.as_str());
            ev.range_vector = Some((duration(get(1))?, duration(get(2))?, duration(get(3))?));
            pos += 1;
            continue;
        }
        if let Some(s) = l.strip_prefix("expect string ") {
            ev.expect_string = Some(unquote(s.trim()).ok_or_else(|| err("bad expected string"))?);
            pos += 1;
            continue;
        }
        if l.split(' ').next() == Some("expect") {
            let c = expect
                .captures(l)
                .ok_or_else(|| err("invalid expect statement"))?;
            let kind = c.get(1).map_or("", |m| m.as_str());
            let matcher = match (c.get(2).map(|m| m.as_str()), c.get(3)) {
                (Some("msg"), Some(m)) => Matcher::Message(m.as_str().trim().to_string()),
                (Some(_), Some(m)) => {
                    Matcher::Pattern(Regex::new(m.as_str().trim()).map_err(|e| e.to_string())?)
                }
                _ => Matcher::Any,
            };
            match kind {
                "ordered" => ev.ordered = true,
                "fail" => {
                    ev.fail = true;
                    ev.fail_matcher = Some(matcher);
                }
                "warn" => ev.warns.push(matcher),
                "info" => ev.infos.push(matcher),
                "no_warn" => ev.no_warn = true,
                _ => ev.no_info = true,
            }
            continue;
        }
        if let Some(v) = parse_number(l) {
            ev.scalar = Some(v);
            break;
        }
        let d = parser::parse_series_description(l).map_err(|e| format!("line {i}: {e}"))?;
        if d.values.len() > 1 && ev.range.is_none() && ev.range_vector.is_none() {
            return Err(err(
                "expecting multiple values in instant evaluation not allowed",
            ));
        }
        ev.expected
            .push((Labels::from_pairs(d.labels), d.values, pos));
        pos += 1;
    }
    while i < lines.len() && !lines[i].is_empty() {
        i += 1;
    }
    Ok((i, ev))
}

/// Go's `strconv.Unquote` for the quoting the scripts use.
fn unquote(s: &str) -> Option<String> {
    if let Some(inner) = s.strip_prefix('`').and_then(|r| r.strip_suffix('`')) {
        return Some(inner.to_string());
    }
    let inner = s.strip_prefix('"')?.strip_suffix('"')?;
    let mut out = String::new();
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next()? {
            'n' => out.push('\n'),
            't' => out.push('\t'),
            'r' => out.push('\r'),
            '\\' => out.push('\\'),
            '"' => out.push('"'),
            '\'' => out.push('\''),
            other => {
                out.push('\\');
                out.push(other);
            }
        }
    }
    Some(out)
}

/// A histogram of a script as the histogram module builds it.
pub fn to_histogram(item: &HistogramItem) -> Arc<FloatHistogram> {
    let hint = match item.counter_reset_hint {
        ParsedHint::Unknown => CounterResetHint::Unknown,
        ParsedHint::Reset => CounterResetHint::Reset,
        ParsedHint::NotReset => CounterResetHint::NotReset,
        ParsedHint::Gauge => CounterResetHint::Gauge,
    };
    let fields = HistogramFields {
        schema: item.schema,
        sum: item.sum,
        count: item.count,
        zero_count: item.z_bucket,
        zero_threshold: item.z_bucket_w,
        buckets: item.buckets.clone(),
        offset: item.offset,
        negative_buckets: item.n_buckets.clone(),
        negative_offset: item.n_offset,
        counter_reset_hint: hint,
        custom_values: item.custom_values.clone(),
    };
    Arc::new(FloatHistogram::from(fields))
}
