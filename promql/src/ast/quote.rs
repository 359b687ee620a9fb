//! Go-compatible string quoting (`strconv.Quote`), used by the printer and by error messages
//! that Prometheus formats with `%q`.

/// Whether `name` matches `[a-zA-Z_][a-zA-Z0-9_]*` (printed without quotes).
pub fn is_legacy_label_name(name: &str) -> bool {
    let mut chars = name.chars();
    match chars.next() {
        Some(c) if c == '_' || c.is_ascii_alphabetic() => {}
        _ => return false,
    }
    chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

/// Quotes a string as Go's `strconv.Quote` does.
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        push_escaped(&mut out, c);
    }
    out.push('"');
    out
}

/// Quotes bytes that may not be valid UTF-8 as Go's `%q` does (`"a\xc5z"`).
pub fn go_quote_bytes(bytes: &[u8]) -> String {
    let mut out = String::from("\"");
    let mut rest = bytes;
    while !rest.is_empty() {
        match std::str::from_utf8(rest) {
            Ok(s) => {
                for c in s.chars() {
                    push_escaped(&mut out, c);
                }
                break;
            }
            Err(e) => {
                let (valid, after) = rest.split_at(e.valid_up_to());
                for c in String::from_utf8_lossy(valid).chars() {
                    push_escaped(&mut out, c);
                }
                let bad = e.error_len().unwrap_or(after.len()).max(1);
                for b in &after[..bad.min(after.len())] {
                    out.push_str(&format!("\\x{b:02x}"));
                }
                rest = &after[bad.min(after.len())..];
            }
        }
    }
    out.push('"');
    out
}

fn push_escaped(out: &mut String, c: char) {
    match c {
        '"' => out.push_str("\\\""),
        '\\' => out.push_str("\\\\"),
        '\u{7}' => out.push_str("\\a"),
        '\u{8}' => out.push_str("\\b"),
        '\u{c}' => out.push_str("\\f"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        '\u{b}' => out.push_str("\\v"),
        c if is_printable(c) => out.push(c),
        c if (c as u32) < 0x80 => out.push_str(&format!("\\x{:02x}", c as u32)),
        c if (c as u32) < 0x10000 => out.push_str(&format!("\\u{:04x}", c as u32)),
        c => out.push_str(&format!("\\U{:08x}", c as u32)),
    }
}

/// An approximation of Go's `unicode.IsPrint` without Unicode tables: controls, the
/// non-character and private-use blocks, surrogates and separators other than ' ' are not
/// printable.
fn is_printable(c: char) -> bool {
    let u = c as u32;
    if u < 0x20 || u == 0x7f || (0x80..0xa0).contains(&u) || u == 0xad {
        return false;
    }
    let special = matches!(u,
        0x2028 | 0x2029 | 0xfeff | 0xfff9..=0xfffb | 0xfffe | 0xffff
        | 0x200b..=0x200f | 0x202a..=0x202e | 0x2060..=0x206f
        | 0xe000..=0xf8ff | 0xf0000..=0x10ffff);
    let odd_space = c.is_whitespace() && c != ' ';
    !special && !odd_space
}
