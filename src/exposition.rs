//! The Prometheus text exposition format (0.0.4), read: what POST /{dataset}/metrics takes.
//!
//! A body is lines: `# HELP <name> <text>` and `# TYPE <name> <type>` comments (other comments
//! are ignored), blank lines, and samples `<name>{<label>="<value>",...} <value> [<timestamp>]`.
//! Rules follow the Prometheus server's parser (`model/textparse/promparse.go`), with these
//! choices made on purpose (../shared/conformance/expfmt/INPUTS.md lists the cases):
//! - a last line without its newline, and CRLF line ends, are accepted (many clients send them);
//! - a timestamp is a signed integer of milliseconds (the server's lexer takes digits only);
//! - duplicate label names in one sample are refused, as the server's scrape loop refuses them;
//! - `le` of a histogram's `_bucket` and `quantile` of a summary are rewritten to canonical
//!   float text (`1` is `1.0`, `+inf` is `+Inf`), as Prometheus 3 does, so that one series
//!   keeps one identity;
//! - a name may be quoted inside the braces (`{"my.metric", job="x"}`), as Prometheus 3 reads
//!   UTF-8 names.
//!
//! A malformed line refuses the whole body, naming the line (1-based), so that nothing of a
//! refused request is applied.

use std::collections::BTreeMap;

/// A metric family's type, as `# TYPE` declares it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetricType {
    Counter,
    Gauge,
    Histogram,
    Summary,
    Untyped,
}

impl MetricType {
    fn parse(text: &str) -> Option<MetricType> {
        Some(match text {
            "counter" => MetricType::Counter,
            "gauge" => MetricType::Gauge,
            "histogram" => MetricType::Histogram,
            "summary" => MetricType::Summary,
            "untyped" => MetricType::Untyped,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            MetricType::Counter => "counter",
            MetricType::Gauge => "gauge",
            MetricType::Histogram => "histogram",
            MetricType::Summary => "summary",
            MetricType::Untyped => "untyped",
        }
    }
}

/// One sample.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    /// The metric name (`http_requests_total`, `latency_bucket`, ...).
    pub name: String,
    /// Its labels, in the order written.
    pub labels: Vec<(String, String)>,
    pub value: f64,
    /// Unix milliseconds, when the line gives one.
    pub timestamp: Option<i64>,
}

/// What a family's `# HELP` and `# TYPE` say.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Family {
    pub kind: Option<MetricType>,
    pub help: Option<String>,
}

/// A parsed body: its samples in order, and its families' metadata by name.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Exposition {
    pub samples: Vec<Sample>,
    pub families: BTreeMap<String, Family>,
}

/// Why a body is refused: the line (1-based) and what is wrong with it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {reason}")]
pub struct ParseError {
    pub line: usize,
    pub reason: String,
}

fn is_name_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_' || c == ':'
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == ':'
}

fn is_label_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}

fn is_label_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// A value as Go's `ParseFloat` reads it, without hex forms or underscores (the server's
/// parser refuses any value holding `p`, `P` or `_`): `NaN` and `Inf` in any case, with a sign.
pub fn parse_value(text: &str) -> Option<f64> {
    let unsigned = text.trim_start_matches(['+', '-']);
    if text.len() - unsigned.len() > 1 {
        return None;
    }
    let negative = text.starts_with('-');
    match unsigned.to_ascii_lowercase().as_str() {
        "nan" => return Some(f64::NAN),
        "inf" | "infinity" => {
            return Some(if negative {
                f64::NEG_INFINITY
            } else {
                f64::INFINITY
            });
        }
        _ => {}
    }
    if unsigned.is_empty()
        || !unsigned
            .chars()
            .all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-'))
        || !unsigned.chars().any(|c| c.is_ascii_digit())
    {
        return None;
    }
    text.parse::<f64>().ok()
}

/// A float as Prometheus prints a canonical `le` or `quantile`: `+Inf`, `-Inf`, `NaN`, and a
/// whole number with `.0`.
fn canonical_float(value: f64) -> String {
    if value.is_nan() {
        return "NaN".to_owned();
    }
    if value.is_infinite() {
        return if value > 0.0 { "+Inf" } else { "-Inf" }.to_owned();
    }
    let text = format!("{value}");
    match text.contains(['.', 'e', 'E']) {
        true => text,
        false => format!("{text}.0"),
    }
}

/// Reads one line's cursor.
struct Cursor<'a> {
    chars: std::iter::Peekable<std::str::CharIndices<'a>>,
    text: &'a str,
}

impl<'a> Cursor<'a> {
    fn new(text: &'a str) -> Cursor<'a> {
        Cursor {
            chars: text.char_indices().peekable(),
            text,
        }
    }

    fn peek(&mut self) -> Option<char> {
        self.chars.peek().map(|(_, c)| *c)
    }

    fn skip_blanks(&mut self) {
        while matches!(self.peek(), Some(' ' | '\t')) {
            self.chars.next();
        }
    }

    fn position(&mut self) -> usize {
        self.chars.peek().map_or(self.text.len(), |(i, _)| *i)
    }

    /// A run of characters that `first` starts and `rest` continues.
    fn word(&mut self, first: fn(char) -> bool, rest: fn(char) -> bool) -> Option<&'a str> {
        let start = self.position();
        match self.peek() {
            Some(c) if first(c) => {
                self.chars.next();
            }
            _ => return None,
        }
        while self.peek().is_some_and(rest) {
            self.chars.next();
        }
        Some(&self.text[start..self.position()])
    }

    /// A double-quoted string, its `\\`, `\"` and `\n` escapes decoded (another escape keeps
    /// its two characters, as the server's parser keeps them).
    fn quoted(&mut self) -> Result<String, String> {
        if self.peek() != Some('"') {
            return Err("expected a double-quoted string".to_owned());
        }
        self.chars.next();
        let mut out = String::new();
        loop {
            match self.chars.next() {
                None => return Err("a quoted string is not closed".to_owned()),
                Some((_, '"')) => return Ok(out),
                Some((_, '\\')) => match self.chars.next() {
                    Some((_, '\\')) => out.push('\\'),
                    Some((_, '"')) => out.push('"'),
                    Some((_, 'n')) => out.push('\n'),
                    Some((_, other)) => {
                        out.push('\\');
                        out.push(other);
                    }
                    None => return Err("a quoted string is not closed".to_owned()),
                },
                Some((_, '\n')) => return Err("a quoted string holds a line break".to_owned()),
                Some((_, c)) => out.push(c),
            }
        }
    }

    /// The rest of the line, up to the next blank or its end.
    fn token(&mut self) -> &'a str {
        let start = self.position();
        while self.peek().is_some_and(|c| c != ' ' && c != '\t') {
            self.chars.next();
        }
        &self.text[start..self.position()]
    }

    fn at_end(&mut self) -> bool {
        self.peek().is_none()
    }
}

/// HELP text: `\\` and `\n` are escapes; anything else is as written.
fn help_text(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match (c, chars.clone().next()) {
            ('\\', Some('\\')) => {
                out.push('\\');
                chars.next();
            }
            ('\\', Some('n')) => {
                out.push('\n');
                chars.next();
            }
            (c, _) => out.push(c),
        }
    }
    out
}

/// Reads a `# ...` line into `families`; a comment that is neither HELP nor TYPE is ignored.
fn comment(line: &str, families: &mut BTreeMap<String, Family>) -> Result<(), String> {
    let Some(rest) = line.strip_prefix("# ") else {
        return Ok(());
    };
    let rest = rest.trim_start_matches([' ', '\t']);
    let (keyword, rest) = rest.split_once([' ', '\t']).unwrap_or((rest, ""));
    if keyword != "HELP" && keyword != "TYPE" {
        return Ok(());
    }
    let rest = rest.trim_start_matches([' ', '\t']);
    let (name, text) = rest.split_once([' ', '\t']).unwrap_or((rest, ""));
    if name.is_empty() {
        // `# HELP` alone is a comment.
        return Ok(());
    }
    if !name.starts_with(is_name_start) || !name.chars().all(is_name_char) {
        return Err(format!("invalid metric name [{name}] in # {keyword}"));
    }
    let family = families.entry(name.to_owned()).or_default();
    match keyword {
        "HELP" => family.help = Some(help_text(text.trim_start_matches([' ', '\t']))),
        _ => {
            let kind = text.trim();
            family.kind = Some(MetricType::parse(kind).ok_or_else(|| {
                format!(
                    "invalid metric type [{kind}] of [{name}]: counter, gauge, histogram, summary or untyped"
                )
            })?);
        }
    }
    Ok(())
}

/// Reads one sample line.
fn sample(line: &str) -> Result<Sample, String> {
    let mut cursor = Cursor::new(line);
    cursor.skip_blanks();
    let mut name = cursor.word(is_name_start, is_name_char).map(str::to_owned);
    let mut labels: Vec<(String, String)> = Vec::new();
    if cursor.peek() == Some('{') {
        cursor.chars.next();
        loop {
            cursor.skip_blanks();
            match cursor.peek() {
                Some('}') => {
                    cursor.chars.next();
                    break;
                }
                // A quoted name inside the braces (Prometheus 3's UTF-8 names).
                Some('"') if name.is_none() && labels.is_empty() => {
                    name = Some(cursor.quoted()?);
                }
                Some(_) => {
                    let label = cursor
                        .word(is_label_start, is_label_char)
                        .ok_or_else(|| {
                            format!("invalid label name at column {}", cursor.position() + 1)
                        })?
                        .to_owned();
                    cursor.skip_blanks();
                    if cursor.peek() != Some('=') {
                        return Err(format!("expected = after the label [{label}]"));
                    }
                    cursor.chars.next();
                    cursor.skip_blanks();
                    let value = cursor
                        .quoted()
                        .map_err(|reason| format!("label [{label}]: {reason}"))?;
                    if labels.iter().any(|(l, _)| *l == label) {
                        return Err(format!("the label [{label}] is given twice"));
                    }
                    labels.push((label, value));
                }
                None => return Err("the labels are not closed with }".to_owned()),
            }
            cursor.skip_blanks();
            match cursor.peek() {
                Some(',') => {
                    cursor.chars.next();
                }
                Some('}') => {}
                _ => return Err("expected , or } between labels".to_owned()),
            }
        }
    }
    let name = name.ok_or_else(|| "metric name not set".to_owned())?;
    if !matches!(cursor.peek(), Some(' ' | '\t')) {
        return Err(match cursor.peek() {
            None => format!("the sample of [{name}] has no value"),
            Some(c) => format!("unexpected {c:?} after the metric name [{name}]"),
        });
    }
    cursor.skip_blanks();
    let text = cursor.token();
    let value = parse_value(text).ok_or_else(|| format!("[{text}] is not a value"))?;
    cursor.skip_blanks();
    let timestamp = match cursor.at_end() {
        true => None,
        false => {
            let text = cursor.token();
            let digits = text.strip_prefix('-').unwrap_or(text);
            if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit()) {
                return Err(format!(
                    "[{text}] is not a timestamp (an integer of milliseconds)"
                ));
            }
            Some(
                text.parse::<i64>()
                    .map_err(|_| format!("the timestamp [{text}] is out of range"))?,
            )
        }
    };
    cursor.skip_blanks();
    if !cursor.at_end() {
        return Err("more than a value and a timestamp".to_owned());
    }
    Ok(Sample {
        name,
        labels,
        value,
        timestamp,
    })
}

/// The family a sample belongs to: its name, or for a histogram's or summary's `_bucket`,
/// `_sum` and `_count` (and a counter's `_total`), the declared family it names.
pub fn family_of<'a>(name: &'a str, families: &BTreeMap<String, Family>) -> &'a str {
    for suffix in ["_bucket", "_sum", "_count", "_total"] {
        if let Some(base) = name.strip_suffix(suffix)
            && families.get(base).is_some_and(|f| f.kind.is_some())
            && families.get(name).is_none_or(|f| f.kind.is_none())
        {
            return base;
        }
    }
    name
}

/// Parses a body in the text format (see the module documentation).
pub fn parse(body: &str) -> Result<Exposition, ParseError> {
    let mut out = Exposition::default();
    for (i, line) in body.split('\n').enumerate() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        let fail = |reason: String| ParseError {
            line: i + 1,
            reason,
        };
        let trimmed = line.trim_start_matches([' ', '\t']);
        if trimmed.is_empty() {
            continue;
        }
        if trimmed.starts_with('#') {
            comment(trimmed, &mut out.families).map_err(fail)?;
            continue;
        }
        let mut sample = sample(line).map_err(fail)?;
        // Classic histograms' and summaries' bounds in canonical form.
        let family = family_of(&sample.name, &out.families);
        let kind = out.families.get(family).and_then(|f| f.kind);
        let bound = match kind {
            Some(MetricType::Histogram) if sample.name.ends_with("_bucket") => Some("le"),
            Some(MetricType::Summary) if sample.name == family => Some("quantile"),
            _ => None,
        };
        if let Some(bound) = bound
            && let Some((_, value)) = sample.labels.iter_mut().find(|(l, _)| l == bound)
        {
            let number = parse_value(value).ok_or_else(|| {
                fail(format!(
                    "[{bound}] of [{}] is not a number: {value:?}",
                    sample.name
                ))
            })?;
            *value = canonical_float(number);
        }
        out.samples.push(sample);
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
