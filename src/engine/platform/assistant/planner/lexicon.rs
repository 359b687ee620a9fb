//! Words: the question split into tokens, field names matched fuzzily (synonyms, plurals,
//! case, parts of compound names, one edit), and values matched against a field's known values.

/// A word of the question, lowercased, with its place.
#[derive(Clone, Debug, PartialEq)]
pub struct Token {
    pub text: String,
    /// Quoted in the question ("..." or '...'): a value, never a keyword.
    pub quoted: bool,
}

/// Splits a question into tokens: words (letters, digits and `_ . - @ :` inside them), numbers,
/// comparison signs, and quoted strings kept whole.
pub fn tokens(question: &str) -> Vec<Token> {
    let mut out = Vec::new();
    let mut chars = question.chars().peekable();
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut Vec<Token>| {
        let trimmed = word.trim_end_matches(['.', '-', ':']);
        if !trimmed.is_empty() {
            out.push(Token {
                text: trimmed.to_lowercase(),
                quoted: false,
            });
        }
        word.clear();
    };
    while let Some(c) = chars.next() {
        match c {
            '"' | '\'' | '“' | '”' | '‘' | '’' if word.is_empty() || c != '\'' => {
                flush(&mut word, &mut out);
                let close = match c {
                    '“' => '”',
                    '‘' => '’',
                    other => other,
                };
                let mut quoted = String::new();
                let mut closed = false;
                for d in chars.by_ref() {
                    if d == close || (close == '”' && d == '"') {
                        closed = true;
                        break;
                    }
                    quoted.push(d);
                }
                if closed && !quoted.trim().is_empty() {
                    out.push(Token {
                        text: quoted.trim().to_owned(),
                        quoted: true,
                    });
                } else if !closed {
                    // An apostrophe-like quote that never closed: its text is words.
                    out.extend(tokens(&quoted));
                }
            }
            '>' | '<' | '=' | '!' => {
                flush(&mut word, &mut out);
                let mut sign = c.to_string();
                if chars.peek() == Some(&'=') {
                    sign.push('=');
                    chars.next();
                }
                out.push(Token {
                    text: sign,
                    quoted: false,
                });
            }
            c if c.is_alphanumeric() || matches!(c, '_' | '@' | '.' | '-' | ':' | '/' | '\'') => {
                // `.` `-` `:` `/` and apostrophes join only inside a word.
                if !word.is_empty() || c.is_alphanumeric() || c == '_' || c == '@' {
                    word.push(c);
                }
            }
            _ => flush(&mut word, &mut out),
        }
    }
    flush(&mut word, &mut out);
    // "host's" reads as "host".
    for token in &mut out {
        if !token.quoted
            && let Some(stem) = token.text.strip_suffix("'s")
        {
            token.text = stem.to_owned();
        }
    }
    out
}

/// Words that carry no field or value: never matched against known values unless a field
/// names them right before.
pub const STOP_WORDS: &[&str] = &[
    "a",
    "an",
    "the",
    "of",
    "in",
    "on",
    "at",
    "to",
    "for",
    "by",
    "per",
    "with",
    "and",
    "or",
    "is",
    "are",
    "was",
    "were",
    "be",
    "been",
    "do",
    "does",
    "did",
    "what",
    "which",
    "who",
    "how",
    "many",
    "much",
    "me",
    "show",
    "give",
    "list",
    "tell",
    "there",
    "that",
    "this",
    "these",
    "those",
    "it",
    "its",
    "from",
    "where",
    "when",
    "whose",
    "have",
    "has",
    "had",
    "all",
    "any",
    "each",
    "every",
    "than",
    "then",
    "as",
    "not",
    "no",
    "only",
    "just",
    "about",
    "over",
    "under",
    "above",
    "below",
    "between",
    "since",
    "until",
    "before",
    "after",
    "last",
    "past",
    "previous",
    "today",
    "yesterday",
    "now",
    "count",
    "number",
    "records",
    "record",
    "rows",
    "row",
    "documents",
    "document",
    "entries",
    "entry",
    "events",
    "event",
    "i",
    "we",
    "you",
    "my",
    "our",
    "please",
    "can",
    "could",
    "would",
    "should",
    "get",
    "find",
    "see",
    "top",
    "most",
    "least",
    "average",
    "avg",
    "mean",
    "sum",
    "total",
    "min",
    "max",
    "minimum",
    "maximum",
    "highest",
    "lowest",
    "median",
    "distinct",
    "unique",
    "different",
    "time",
    "trend",
    "hour",
    "hours",
    "day",
    "days",
    "minute",
    "minutes",
    "week",
    "weeks",
    "month",
    "months",
    "but",
    "also",
    "now",
    "again",
    "same",
    "else",
    "other",
    "more",
    "less",
    "fewer",
    "greater",
    "larger",
    "smaller",
    "higher",
    "lower",
    "equal",
    "equals",
    "containing",
    "contain",
    "contains",
    "mention",
    "mentioning",
    "including",
    "include",
    "includes",
];

pub fn is_stop_word(word: &str) -> bool {
    STOP_WORDS.contains(&word)
}

/// Synonym groups of common field names: a word of a group names a field whose name (or a
/// part of it) is in the same group.
const SYNONYMS: &[&[&str]] = &[
    &["host", "hostname", "server", "machine", "node", "instance"],
    &[
        "status",
        "status_code",
        "code",
        "http_status",
        "response_code",
        "statuscode",
    ],
    &["level", "severity", "log_level", "loglevel", "priority"],
    &[
        "message",
        "msg",
        "text",
        "log",
        "body",
        "content",
        "description",
    ],
    &["user", "username", "user_name", "user_id", "login"],
    &["customer", "client", "buyer", "customer_name"],
    &["service", "app", "application", "svc", "component"],
    &[
        "price", "amount", "cost", "revenue", "value", "sales", "sale",
    ],
    &["country", "nation"],
    &["region", "area", "zone"],
    &["city", "town"],
    &[
        "latency",
        "duration",
        "response_time",
        "elapsed",
        "took",
        "latency_ms",
        "duration_ms",
    ],
    &["bytes", "size", "length", "bytes_sent"],
    &[
        "timestamp",
        "@timestamp",
        "time",
        "date",
        "created_at",
        "ts",
    ],
    &["product", "item", "sku", "article"],
    &["category", "type", "kind", "class", "group"],
    &["quantity", "qty", "units", "count"],
    &["method", "verb", "http_method"],
    &["path", "url", "uri", "endpoint", "route"],
    &["job"],
    &["env", "environment", "stage"],
    &["ip", "address", "client_ip", "source_ip"],
    &["error", "errors", "failure", "failures"],
    &["order", "orders", "order_id", "purchase", "purchases"],
    &["store", "shop", "branch"],
    &["channel", "medium", "source"],
];

/// The singular of an English plural, as far as field names go.
pub fn singular(word: &str) -> String {
    if word.len() > 4 && word.ends_with("ies") {
        return format!("{}y", &word[..word.len() - 3]);
    }
    if word.len() > 4
        && (word.ends_with("ses")
            || word.ends_with("xes")
            || word.ends_with("ches")
            || word.ends_with("shes"))
    {
        return word[..word.len() - 2].to_owned();
    }
    if word.len() > 3 && word.ends_with('s') && !word.ends_with("ss") && !word.ends_with("us") {
        return word[..word.len() - 1].to_owned();
    }
    word.to_owned()
}

/// The parts of a field name: `http_status.code` → http, status, code; `userName` → user, name.
pub fn name_parts(name: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut previous_lower = false;
    for c in name.chars() {
        if matches!(c, '_' | '.' | '-' | '@' | ' ' | '/') {
            if !current.is_empty() {
                parts.push(std::mem::take(&mut current));
            }
            previous_lower = false;
            continue;
        }
        if c.is_uppercase() && previous_lower && !current.is_empty() {
            parts.push(std::mem::take(&mut current));
        }
        previous_lower = c.is_lowercase() || c.is_ascii_digit();
        current.extend(c.to_lowercase());
    }
    if !current.is_empty() {
        parts.push(current);
    }
    parts
}

/// How well the words `words` (one to three consecutive tokens) name the field `name`: 0 for
/// not at all, higher for better (exact 10, the parts in order 9, a synonym 7, a plural 6, the
/// last part 5, one edit 4).
pub fn name_score(words: &[&str], name: &str) -> u32 {
    let joined = words.join("_");
    let lower = name.to_lowercase();
    let bare = lower.trim_start_matches('@');
    if joined == lower || joined == bare {
        return 10;
    }
    let parts = name_parts(name);
    let singular_words: Vec<String> = words.iter().map(|w| singular(w)).collect();
    if parts.len() > 1 && (words == parts.as_slice() || singular_words == parts) {
        return 9;
    }
    if words.len() == 1 {
        let word = words[0];
        let one = singular(word);
        if one == bare || singular(bare) == one {
            return 6;
        }
        let synonym = |a: &str, b: &str| {
            SYNONYMS
                .iter()
                .any(|group| group.contains(&a) && group.contains(&b))
        };
        if synonym(word, bare) || synonym(&one, bare) {
            return 7;
        }
        // The last part names the field (`latency` names `latency_ms`), and a synonym of it.
        if parts.len() > 1 {
            let first = &parts[0];
            if (&one == first || word == first) && !is_unit(first) {
                return 5;
            }
            if parts.iter().any(|p| synonym(&one, p) || synonym(word, p)) && !is_stop_word(word) {
                return 4;
            }
        }
        if one.chars().count() >= 5
            && bare.chars().count() >= 5
            && strsim::damerau_levenshtein(&one, bare) == 1
        {
            return 4;
        }
    }
    0
}

/// Unit suffixes and prefixes of field names that name no field by themselves.
fn is_unit(part: &str) -> bool {
    matches!(
        part,
        "ms" | "s" | "sec" | "us" | "ns" | "bytes" | "kb" | "mb" | "pct" | "total" | "count" | "id"
    )
}

/// Whether `word` names the known value `value` of a field: equal ignoring case, or its
/// plural ("errors" names "error").
pub fn names_value(word: &str, value: &str) -> bool {
    let value = value.to_lowercase();
    let one = singular(word);
    word == value
        || one == value
        || (word.len() > 3 && word == singular(&value))
        // "warnings" names "warn", "failed" names "fail".
        || (value.len() >= 4
            && one.len() <= value.len() + 3
            && one.starts_with(&value)
            && matches!(&one[value.len()..], "ing" | "ed" | "s" | "es"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(question: &str) -> Vec<String> {
        tokens(question).into_iter().map(|t| t.text).collect()
    }

    #[test]
    fn questions_split_into_words_numbers_signs_and_quotes() {
        assert_eq!(
            texts("How many errors on host-1 with latency_ms >= 250.5?"),
            [
                "how",
                "many",
                "errors",
                "on",
                "host-1",
                "with",
                "latency_ms",
                ">=",
                "250.5"
            ]
        );
        let quoted = tokens(r#"logs containing "Disk Full" since 2026-11-01"#);
        assert_eq!(quoted[2].text, "Disk Full");
        assert!(quoted[2].quoted);
        assert_eq!(quoted[4].text, "2026-11-01");
        assert_eq!(texts("the host's status?"), ["the", "host", "status"]);
        assert_eq!(texts("@timestamp, user.name"), ["@timestamp", "user.name"]);
    }

    #[test]
    fn names_match_by_parts_synonyms_plurals_and_one_edit() {
        assert_eq!(name_score(&["host"], "host"), 10);
        assert_eq!(name_score(&["status", "code"], "status_code"), 10);
        assert_eq!(name_score(&["http", "statuses"], "http_status"), 9);
        assert_eq!(name_score(&["user", "name"], "userName"), 9);
        assert_eq!(name_score(&["hosts"], "host"), 6);
        assert_eq!(name_score(&["categories"], "category"), 6);
        assert_eq!(name_score(&["server"], "host"), 7);
        assert_eq!(name_score(&["severity"], "level"), 7);
        assert_eq!(name_score(&["latency"], "latency_ms"), 7);
        assert_eq!(name_score(&["duration"], "latency_ms"), 7);
        assert_eq!(name_score(&["response"], "response_bytes"), 5);
        assert_eq!(name_score(&["size"], "response_bytes"), 4);
        assert_eq!(name_score(&["contry"], "country"), 4);
        assert_eq!(name_score(&["timestamp"], "@timestamp"), 10);
        assert_eq!(name_score(&["ms"], "latency_ms"), 0);
        assert_eq!(name_score(&["cat"], "category"), 0);
    }

    #[test]
    fn values_match_ignoring_case_and_plurals() {
        assert!(names_value("errors", "error"));
        assert!(names_value("error", "ERROR"));
        assert!(names_value("warnings", "warning"));
        assert!(names_value("warnings", "warn"));
        assert!(!names_value("err", "error"));
        assert!(!names_value("information", "info"));
    }
}
