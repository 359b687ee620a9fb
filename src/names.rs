//! Name rules for tables, databases, accounts and columns.
//!
//! The table rule is the specification's: 1 to 128 characters from `A-Z a-z 0-9 _ -`, not
//! starting with `_`. Databases and accounts follow the same rule (the specification leaves them
//! open; docs/api.md records the decision). Column names are 1 to 128 characters of any kind but
//! control characters, not starting with `_`: names starting with `_` are reserved for system
//! columns such as `_row_id` and `_score`.

use crate::error::{Error, Result};

/// Longest table, database, account or column name, in characters.
pub const MAX_NAME_LEN: usize = 128;

fn check_identifier(kind: &str, name: &str) -> Result<()> {
    let problem = if name.is_empty() {
        Some("must not be empty".to_owned())
    } else if name.chars().count() > MAX_NAME_LEN {
        Some(format!("must be at most {MAX_NAME_LEN} characters"))
    } else if name.starts_with('_') {
        Some("must not start with an underscore".to_owned())
    } else {
        name.chars()
            .find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-'))
            .map(|bad| format!("may hold only A-Z, a-z, 0-9, underscore and hyphen, not {bad:?}"))
    };
    match problem {
        Some(problem) => Err(Error::InvalidName(format!(
            "{kind} name {:?} {problem}",
            truncated(name)
        ))),
        None => Ok(()),
    }
}

pub fn check_table(name: &str) -> Result<()> {
    check_identifier("table", name)
}

pub fn check_database(name: &str) -> Result<()> {
    check_identifier("database", name)
}

pub fn check_account(name: &str) -> Result<()> {
    check_identifier("account", name)
}

pub fn check_column(name: &str) -> Result<()> {
    let problem = if name.is_empty() {
        Some("must not be empty".to_owned())
    } else if name.chars().count() > MAX_NAME_LEN {
        Some(format!("must be at most {MAX_NAME_LEN} characters"))
    } else if name.starts_with('_') {
        Some("must not start with an underscore (reserved for system columns)".to_owned())
    } else if name.chars().any(char::is_control) {
        Some("must not contain control characters".to_owned())
    } else {
        None
    };
    match problem {
        Some(problem) => Err(Error::BadRequest(format!(
            "column name {:?} {problem}",
            truncated(name)
        ))),
        None => Ok(()),
    }
}

/// A name cut short for an error message, so that a megabyte of name does not echo back.
fn truncated(name: &str) -> String {
    match name.char_indices().nth(MAX_NAME_LEN + 8) {
        Some((at, _)) => format!("{}…", &name[..at]),
        None => name.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_rule_of_the_specification() {
        for good in ["a", "A-b_9", "x".repeat(128).as_str(), "9lives", "-dash"] {
            assert!(check_table(good).is_ok(), "{good}");
        }
        for bad in ["", "_hidden", "has space", "dot.ted", "ünï", "a/b"] {
            assert!(
                matches!(check_table(bad), Err(Error::InvalidName(_))),
                "{bad}"
            );
        }
        let long = "x".repeat(129);
        let error = check_table(&long).unwrap_err().to_string();
        assert!(error.contains("at most 128"), "{error}");
    }

    #[test]
    fn long_names_are_cut_short_in_messages() {
        let error = check_database(&"y".repeat(10_000)).unwrap_err().to_string();
        assert!(error.len() < 300, "{error}");
    }

    #[test]
    fn column_names() {
        assert!(check_column("title").is_ok());
        assert!(check_column("with space and ünïcode").is_ok());
        assert!(check_column("_row_id").is_err());
        assert!(check_column("").is_err());
        assert!(check_column("a\nb").is_err());
        assert!(check_column(&"c".repeat(129)).is_err());
    }
}
