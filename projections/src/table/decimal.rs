//! Java's DecimalFormat patterns, as Elasticsearch takes them in a numeric aggregation's or a
//! docvalue field's `format` (`0.00`, `#,##0.0`, `Value is ##0.0`): a prefix, the number with
//! its minimum integer digits, fraction digits (`0` always shown, `#` when not zero) and
//! grouping, then a suffix; `'quoted'` text is literal. A negative subpattern (after `;`) is
//! not read: negative numbers take a `-` before the prefix's number.

/// A decimal pattern, read.
#[derive(Clone, Debug, PartialEq)]
pub struct DecimalFormat {
    prefix: String,
    suffix: String,
    min_integer: usize,
    min_fraction: usize,
    max_fraction: usize,
    /// Digits between grouping separators (`,`), if any.
    grouping: Option<usize>,
}

impl DecimalFormat {
    /// Reads `pattern`; `None` when it has no digit (`#` or `0`).
    pub fn parse(pattern: &str) -> Option<DecimalFormat> {
        let pattern = pattern.split(';').next().unwrap_or(pattern);
        let (mut prefix, mut number, mut suffix) = (String::new(), String::new(), String::new());
        let mut quoted = false;
        for c in pattern.chars() {
            if c == '\'' {
                quoted = !quoted;
                continue;
            }
            let numeric = !quoted && matches!(c, '#' | '0' | ',' | '.');
            if numeric && suffix.is_empty() {
                number.push(c);
            } else if number.is_empty() {
                prefix.push(c);
            } else {
                suffix.push(c);
            }
        }
        if !number.contains(['#', '0']) {
            return None;
        }
        let (integer, fraction) = number.split_once('.').unwrap_or((&number, ""));
        Some(DecimalFormat {
            prefix,
            suffix,
            min_integer: integer.chars().filter(|c| *c == '0').count(),
            min_fraction: fraction.chars().filter(|c| *c == '0').count(),
            max_fraction: fraction.chars().filter(|c| matches!(c, '0' | '#')).count(),
            grouping: integer
                .rfind(',')
                .map(|at| integer.len() - at - 1)
                .filter(|n| *n > 0),
        })
    }

    /// `value` printed by the pattern.
    pub fn format(&self, value: f64) -> String {
        if !value.is_finite() {
            return format!("{}{value}{}", self.prefix, self.suffix);
        }
        let text = format!("{:.*}", self.max_fraction, value.abs());
        let (integer, fraction) = text.split_once('.').unwrap_or((&text, ""));
        let mut fraction = fraction.to_owned();
        while fraction.len() > self.min_fraction && fraction.ends_with('0') {
            fraction.pop();
        }
        let integer = integer.trim_start_matches('0');
        let integer = format!("{integer:0>width$}", width = self.min_integer);
        let integer = match self.grouping {
            Some(size) => {
                let digits: Vec<char> = integer.chars().collect();
                let mut grouped = String::new();
                for (i, digit) in digits.iter().enumerate() {
                    if i > 0 && (digits.len() - i).is_multiple_of(size) {
                        grouped.push(',');
                    }
                    grouped.push(*digit);
                }
                grouped
            }
            None => integer,
        };
        let sign = if value < 0.0
            && (integer.trim_matches(['0', ',']).len() + fraction.trim_matches('0').len()) > 0
        {
            "-"
        } else {
            ""
        };
        // Java shows a zero where neither part has a digit (`#` of 0.4 is `0`; `#.##` of 0.5
        // is `.5`).
        let number = match (integer.is_empty(), fraction.is_empty()) {
            (true, true) => "0".to_owned(),
            (_, true) => integer,
            (_, false) => format!("{integer}.{fraction}"),
        };
        format!("{sign}{}{number}{}", self.prefix, self.suffix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn formatted(pattern: &str, value: f64) -> String {
        DecimalFormat::parse(pattern).unwrap().format(value)
    }

    #[test]
    fn patterns_print_as_java_prints_them() {
        assert_eq!(formatted("Value is ##0.0", 0.0), "Value is 0.0");
        assert_eq!(formatted("Value is ##0.0", 150.0), "Value is 150.0");
        assert_eq!(formatted("#.0", 1.0), "1.0");
        assert_eq!(formatted("0.00", 1.23456), "1.23");
        assert_eq!(formatted("#.##", 2.5), "2.5");
        assert_eq!(formatted("#", 0.4), "0");
        assert_eq!(formatted("#.##", 0.5), ".5");
        assert_eq!(formatted("0", 0.4), "0");
        assert_eq!(formatted("#,##0", 1_234_567.0), "1,234,567");
        assert_eq!(formatted("000", 7.0), "007");
        assert_eq!(formatted("0.0", -1.25), "-1.2");
        assert_eq!(formatted("'#'0", 5.0), "#5");
        assert_eq!(DecimalFormat::parse("yyyy"), None);
    }
}
