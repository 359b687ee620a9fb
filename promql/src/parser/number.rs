//! Literal conversions with Go's semantics: numbers (`strconv.ParseInt(s, 0, 64)` then
//! `strconv.ParseFloat`), quoted strings (`strutil.Unquote`) and durations
//! (`model.ParseDuration`).

use super::errors::InvalidDuration;
use crate::ast::go_quote;

/// Parses a number token: integers with Go's base prefixes (`0x1f`, `0o17`, `0b11`, and a
/// leading `0` for octal: `0755` is 493), then floats (`1e3`, `.5`, `Inf`, `NaN`). The error
/// text is Go's (`strconv.ParseFloat: parsing "...": value out of range`).
pub(crate) fn parse_number(s: &str) -> Result<f64, String> {
    if let Some(i) = parse_int_base0(s) {
        return Ok(i as f64);
    }
    parse_float(s)
}

fn underscores_ok(digits: &str) -> bool {
    // Underscores only between digits (a base prefix counts as a digit).
    let b = digits.as_bytes();
    if b.first() == Some(&b'_') || b.last() == Some(&b'_') {
        return false;
    }
    !digits.contains("__")
}

fn parse_int_base0(s: &str) -> Option<i64> {
    let lower = s.to_ascii_lowercase();
    let (radix, body, prefixed) = if let Some(r) = lower.strip_prefix("0x") {
        (16, r, true)
    } else if let Some(r) = lower.strip_prefix("0o") {
        (8, r, true)
    } else if let Some(r) = lower.strip_prefix("0b") {
        (2, r, true)
    } else if lower.len() > 1 && lower.starts_with('0') {
        (8, &lower[1..], false)
    } else {
        (10, lower.as_str(), false)
    };
    let body_check = body.strip_prefix('_').filter(|_| prefixed).unwrap_or(body);
    if body_check.is_empty() || !underscores_ok(body_check) {
        return None;
    }
    let digits: String = body_check.chars().filter(|&c| c != '_').collect();
    i64::from_str_radix(&digits, radix).ok()
}

fn parse_float(s: &str) -> Result<f64, String> {
    let invalid = || {
        format!(
            "strconv.ParseFloat: parsing {}: invalid syntax",
            go_quote(s)
        )
    };
    let lower = s.to_ascii_lowercase();
    let unsigned = lower.trim_start_matches(['+', '-']);
    let negative = lower.starts_with('-');
    match unsigned {
        "inf" | "infinity" => {
            return Ok(if negative {
                f64::NEG_INFINITY
            } else {
                f64::INFINITY
            });
        }
        "nan" => return Ok(f64::NAN),
        _ => {}
    }
    if !unsigned
        .chars()
        .all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | '+' | '-' | '_'))
        || !unsigned.starts_with(|c: char| c.is_ascii_digit() || c == '.')
    {
        return Err(invalid());
    }
    if unsigned.contains('_') && !underscores_ok_float(unsigned) {
        return Err(invalid());
    }
    let cleaned: String = lower.chars().filter(|&c| c != '_').collect();
    match cleaned.parse::<f64>() {
        Ok(v) if v.is_infinite() => Err(format!(
            "strconv.ParseFloat: parsing {}: value out of range",
            go_quote(s)
        )),
        Ok(v) => Ok(v),
        Err(_) => Err(invalid()),
    }
}

fn underscores_ok_float(s: &str) -> bool {
    let b = s.as_bytes();
    b.iter().enumerate().all(|(i, &c)| {
        c != b'_'
            || (i > 0 && i + 1 < b.len() && b[i - 1].is_ascii_digit() && b[i + 1].is_ascii_digit())
    })
}

/// Unquotes a string token (`"..."`, `'...'` with Go escapes, or raw `` `...` ``). Returns
/// the text (invalid UTF-8 replaced) and, when `\x`/octal escapes produced invalid UTF-8, the
/// exact bytes.
pub(crate) fn unquote(token: &str) -> Result<(String, Option<Vec<u8>>), String> {
    let mut chars = token.chars();
    let quote = chars.next().ok_or("invalid syntax")?;
    if token.len() < 2 || !token.ends_with(quote) {
        return Err("invalid syntax".into());
    }
    let inner = &token[1..token.len() - 1];
    if quote == '`' {
        return Ok((inner.to_string(), None));
    }
    let mut out: Vec<u8> = Vec::with_capacity(inner.len());
    let mut it = inner.chars().peekable();
    while let Some(c) = it.next() {
        if c != '\\' {
            let mut buf = [0u8; 4];
            out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            continue;
        }
        let e = it.next().ok_or("invalid syntax")?;
        let simple = match e {
            'a' => Some(0x07u8),
            'b' => Some(0x08),
            'f' => Some(0x0c),
            'n' => Some(b'\n'),
            'r' => Some(b'\r'),
            't' => Some(b'\t'),
            'v' => Some(0x0b),
            '\\' => Some(b'\\'),
            '\'' | '"' => Some(e as u8),
            _ => None,
        };
        if let Some(b) = simple {
            out.push(b);
            continue;
        }
        let (count, radix) = match e {
            '0'..='7' => (3, 8),
            'x' => (2, 16),
            'u' => (4, 16),
            'U' => (8, 16),
            _ => return Err("invalid syntax".into()),
        };
        let mut digits = String::new();
        if radix == 8 {
            digits.push(e);
        }
        while digits.len() < count {
            digits.push(it.next().ok_or("invalid syntax")?);
        }
        let v = u32::from_str_radix(&digits, radix).map_err(|_| "invalid syntax")?;
        match e {
            '0'..='7' | 'x' => out.push(u8::try_from(v).map_err(|_| "invalid syntax")?),
            _ => {
                let c = char::from_u32(v).ok_or("invalid syntax")?;
                let mut buf = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
        }
    }
    match String::from_utf8(out) {
        Ok(s) => Ok((s, None)),
        Err(e) => {
            let bytes = e.into_bytes();
            Ok((String::from_utf8_lossy(&bytes).into_owned(), Some(bytes)))
        }
    }
}

/// Parses a Prometheus duration (`1h30m`, `5m`, `1y`, `10s53ms`, `0`) into milliseconds.
/// Units: `y` (365 days), `w`, `d`, `h`, `m`, `s`, `ms`, each at most once, largest first.
pub fn parse_duration(s: &str) -> Result<i64, InvalidDuration> {
    match s {
        "0" => return Ok(0),
        "" => return Err(InvalidDuration("empty duration string".into())),
        _ => {}
    }
    let invalid = || InvalidDuration(format!("not a valid duration string: {}", go_quote(s)));
    const UNITS: [(&str, u64, u8); 7] = [
        ("y", 365 * 24 * 3_600_000, 1),
        ("w", 7 * 24 * 3_600_000, 2),
        ("d", 24 * 3_600_000, 3),
        ("h", 3_600_000, 4),
        ("m", 60_000, 5),
        ("s", 1_000, 6),
        ("ms", 1, 7),
    ];
    let max_ms: u64 = (1u64 << 63) / 1_000_000;
    let mut rest = s;
    let mut total: u64 = 0;
    let mut last_unit = 0u8;
    while !rest.is_empty() {
        let digits_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits_len == 0 {
            return Err(invalid());
        }
        let v: u64 = rest[..digits_len].parse().map_err(|_| invalid())?;
        rest = &rest[digits_len..];
        let unit_len = rest.bytes().take_while(|b| !b.is_ascii_digit()).count();
        if unit_len == 0 {
            return Err(invalid());
        }
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let Some(&(_, mult, order)) = UNITS.iter().find(|(u, _, _)| *u == unit) else {
            return Err(InvalidDuration(format!(
                "unknown unit {} in duration {}",
                go_quote(unit),
                go_quote(s)
            )));
        };
        if order <= last_unit {
            return Err(invalid());
        }
        last_unit = order;
        if v > max_ms / mult {
            return Err(InvalidDuration("duration out of range".into()));
        }
        total += v * mult;
        if total > max_ms {
            return Err(InvalidDuration("duration out of range".into()));
        }
    }
    i64::try_from(total).map_err(|_| InvalidDuration("duration out of range".into()))
}
