//! Numbers as Prometheus writes them: Go's `strconv.FormatFloat(v, 'f', -1, 64)`, with
//! `NaN`, `+Inf` and `-Inf`. The API's sample values, `count_values`' labels and printed
//! expressions all use it.

/// `v` as Go's `strconv.FormatFloat(v, 'f', -1, 64)` writes it, `NaN`, `+Inf` or `-Inf` when it
/// is not finite, appended to `out`.
pub fn write_float(out: &mut Vec<u8>, v: f64) {
    if v.is_nan() {
        out.extend_from_slice(b"NaN");
    } else if v == f64::INFINITY {
        out.extend_from_slice(b"+Inf");
    } else if v == f64::NEG_INFINITY {
        out.extend_from_slice(b"-Inf");
    } else {
        write_finite(out, v);
    }
}

/// [`write_float`], as a string.
pub fn float(v: f64) -> String {
    let mut out = Vec::new();
    write_float(&mut out, v);
    String::from_utf8(out).unwrap_or_default()
}

/// A finite `v` as Go's `strconv.FormatFloat(v, 'f', -1, 64)` writes it: the shortest digits
/// that read back, never in exponent form. Ryū finds the digits as Go's own Ryū does, an exact
/// tie between two shortest candidates rounded to even (Rust's `{}` rounds it up, and is
/// several times slower, which matters for answers of many points); they are laid out here.
fn write_finite(out: &mut Vec<u8>, v: f64) {
    let mut buffer = ryu::Buffer::new();
    let text = buffer.format_finite(v);
    let text = match text.strip_prefix('-') {
        Some(rest) => {
            out.push(b'-');
            rest
        }
        None => text,
    };
    let Some((mantissa, exponent)) = text.split_once('e') else {
        out.extend_from_slice(text.strip_suffix(".0").unwrap_or(text).as_bytes());
        return;
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits: Vec<u8> = whole.bytes().chain(fraction.bytes()).collect();
    // Where the decimal point falls among the digits.
    let point = whole.len() as i64 + exponent.parse::<i64>().unwrap_or(0);
    if point <= 0 {
        out.extend_from_slice(b"0.");
        out.resize(out.len() + point.unsigned_abs() as usize, b'0');
        out.extend_from_slice(&digits);
    } else if point as usize >= digits.len() {
        out.extend_from_slice(&digits);
        out.resize(out.len() + point as usize - digits.len(), b'0');
    } else {
        let (before, after) = digits.split_at(point as usize);
        out.extend_from_slice(before);
        out.push(b'.');
        out.extend_from_slice(after);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The significant digits of a number in fixed notation.
    fn significant(text: &str) -> String {
        let digits: String = text.chars().filter(char::is_ascii_digit).collect();
        digits
            .trim_start_matches('0')
            .trim_end_matches('0')
            .to_owned()
    }

    proptest::proptest! {
        /// For every finite float: the text reads back to it, in fixed notation, with no more
        /// digits than `{}` (also shortest) writes; where the two differ, it is at an exact tie,
        /// which `{}` rounds up and Go and Ryū round to even.
        #[test]
        fn fixed_reads_back_and_is_shortest(bits in proptest::prelude::any::<u64>()) {
            let v = f64::from_bits(bits);
            if v.is_finite() {
                let mut out = Vec::new();
                write_float(&mut out, v);
                let ours = String::from_utf8(out).unwrap();
                proptest::prop_assert!(!ours.contains('e'), "{}", ours);
                proptest::prop_assert_eq!(ours.parse::<f64>().unwrap().to_bits(), bits);
                let display = format!("{v}");
                proptest::prop_assert!(
                    significant(&ours).len() <= significant(&display).len(),
                    "{} against {}", ours, display
                );
            }
        }
    }

    #[test]
    fn an_exact_tie_rounds_to_even_as_go_does() {
        // 235005019659324.625 is a double; .62 and .63 both read back to it, equally near.
        // Go's strconv writes .62 (round half to even); Rust's `{}` writes .63.
        let v = f64::from_bits(4_821_868_162_288_158_612);
        assert_eq!(float(v), "235005019659324.62");
        assert_eq!(format!("{v}"), "235005019659324.63");
    }

    #[test]
    fn fixed_lays_out_digits_either_side_of_the_point() {
        for v in [
            0.0,
            -0.0,
            1.0,
            0.1,
            1e21,
            1e22,
            1.5e-7,
            123.456,
            1e15,
            1e16,
            1e17,
            5e-324,
            f64::MAX,
            f64::MIN_POSITIVE,
            -2.5e-5,
            9007199254740993.0,
        ] {
            let mut out = Vec::new();
            write_float(&mut out, v);
            assert_eq!(String::from_utf8(out).unwrap(), format!("{v}"), "{v:e}");
        }
    }
}
