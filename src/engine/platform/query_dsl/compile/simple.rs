//! `simple_query_string`: Elasticsearch's forgiving query syntax. Words, `"quoted phrases"`,
//! `prefix*`, `+` (must), `-` (must not) and `|` (or), over `fields` (with `^boost`) or every
//! text. Nothing in the text is an error: a stray operator is read as text, as Elasticsearch
//! reads it.

use serde_json::{Map, Value, json};
use tantivy::{
    Term,
    query::{
        BooleanQuery, BoostQuery, DisjunctionMaxQuery, EmptyQuery, FuzzyTermQuery, Occur,
        PhraseQuery, Query, TermQuery,
    },
    schema::IndexRecordOption,
};

use super::{Compiled, Compiler, analyze, is_and, minimum_should_match, parsing};

/// One clause of the text: what it asks for, and how it must occur.
#[derive(Debug, PartialEq)]
enum Part {
    Words(String),
    Phrase(String),
    Prefix(String),
}

/// The clauses of `text`, each with `+` (true: must), `-` (false: must not) or neither.
fn parse(text: &str) -> Vec<(Option<bool>, Part)> {
    let mut parts = Vec::new();
    let mut rest = text.trim_start();
    while !rest.is_empty() {
        let mut sign = None;
        if let Some(after) = rest.strip_prefix('+') {
            sign = Some(true);
            rest = after;
        } else if let Some(after) = rest.strip_prefix('-') {
            sign = Some(false);
            rest = after;
        } else if let Some(after) = rest.strip_prefix('|') {
            rest = after.trim_start();
            continue;
        }
        let (part, after) = match rest.strip_prefix('"') {
            Some(quoted) => {
                let end = quoted.find('"').unwrap_or(quoted.len());
                let after = quoted.get(end + 1..).unwrap_or("");
                // A `~N` slop after a phrase is read and ignored.
                let after = after.trim_start_matches(|c: char| c == '~' || c.is_ascii_digit());
                (Part::Phrase(quoted[..end].to_owned()), after)
            }
            None => {
                let end = rest
                    .find(|c: char| c.is_whitespace() || c == '|')
                    .unwrap_or(rest.len());
                let word = &rest[..end];
                let word = word.split('~').next().unwrap_or(word);
                let part = match word.strip_suffix('*') {
                    Some(stem) if !stem.is_empty() => Part::Prefix(stem.to_owned()),
                    _ => Part::Words(word.to_owned()),
                };
                (part, &rest[end..])
            }
        };
        parts.push((sign, part));
        rest = after.trim_start();
    }
    parts
}

impl Compiler<'_> {
    pub(super) fn simple_query_string(&self, body: &Value) -> Compiled {
        let text = body
            .get("query")
            .and_then(Value::as_str)
            .ok_or_else(|| parsing("[simple_query_string] needs a [query] string"))?;
        let fields: Vec<(String, f32)> = match body.get("fields") {
            None => Vec::new(),
            Some(Value::Array(items)) => items
                .iter()
                .map(|item| {
                    let name = item
                        .as_str()
                        .ok_or_else(|| parsing("[simple_query_string] fields must be names"))?;
                    Ok(match name.split_once('^') {
                        Some((name, boost)) => (
                            name.to_owned(),
                            boost
                                .parse::<f32>()
                                .map_err(|_| parsing(format!("invalid boost in [{item}]")))?,
                        ),
                        None => (name.to_owned(), 1.0),
                    })
                })
                .collect::<Result<_, _>>()?,
            Some(other) => {
                return Err(parsing(format!(
                    "[simple_query_string] fields must be a list of names, not {other}"
                )));
            }
        };
        let mut fields: Vec<(String, f32)> = fields.into_iter().filter(|(f, _)| f != "*").collect();
        // A reader who may not search some fields searches the others, not `all`.
        if fields.is_empty()
            && let Some(strings) = self.schema.catch_all()
        {
            fields = strings.iter().map(|f| (f.clone(), 1.0)).collect();
            if fields.is_empty() {
                return Ok(Box::new(EmptyQuery));
            }
        }
        let and = is_and(body.get("default_operator"));
        let mut clauses: Vec<(Occur, Box<dyn Query>)> = Vec::new();
        for (sign, part) in parse(text) {
            let Some(query) = self.part(&part, &fields)? else {
                continue;
            };
            let occur = match sign {
                Some(true) => Occur::Must,
                Some(false) => Occur::MustNot,
                None if and => Occur::Must,
                None => Occur::Should,
            };
            clauses.push((occur, query));
        }
        if clauses.is_empty() {
            return Ok(Box::new(EmptyQuery));
        }
        let should = clauses.iter().filter(|(o, _)| *o == Occur::Should).count();
        let mut query = BooleanQuery::new(clauses);
        if let Some(minimum) = body.get("minimum_should_match") {
            query.set_minimum_number_should_match(minimum_should_match(minimum, should)?);
        }
        Ok(Box::new(query))
    }

    /// One part over every field (the best field's score); `None` when it holds no word.
    fn part(
        &self,
        part: &Part,
        fields: &[(String, f32)],
    ) -> Result<Option<Box<dyn Query>>, super::DslError> {
        let empty = Map::new();
        let mut per_field: Vec<Box<dyn Query>> = Vec::new();
        let targets: Vec<(Option<&str>, f32)> = match fields.is_empty() {
            true => vec![(None, 1.0)],
            false => fields.iter().map(|(f, b)| (Some(f.as_str()), *b)).collect(),
        };
        for (field, boost) in targets {
            let query: Box<dyn Query> = match (part, field) {
                (Part::Words(text), Some(field)) => {
                    if analyze(text).is_empty() {
                        return Ok(None);
                    }
                    self.matching(field, &json!(text), &empty)?
                }
                (Part::Phrase(text), Some(field)) => self.phrase(field, &json!(text), &empty)?,
                (Part::Prefix(stem), Some(field))
                    if self.schema.is_keyword_only(self.schema.path(field)) =>
                {
                    self.pattern(field, &json!(stem), false)?
                }
                (Part::Prefix(stem), Some(field)) => {
                    let Some(word) = analyze(stem).pop() else {
                        return Ok(None);
                    };
                    let mut term = self.text_term(self.schema.path(field));
                    term.append_type_and_str(&word);
                    Box::new(FuzzyTermQuery::new_prefix(term, 0, true))
                }
                // No fields: the text of every field.
                (part, None) => {
                    let text = match part {
                        Part::Words(t) | Part::Phrase(t) | Part::Prefix(t) => t,
                    };
                    let words = analyze(text);
                    if words.is_empty() {
                        return Ok(None);
                    }
                    let terms: Vec<Term> = words
                        .iter()
                        .map(|w| Term::from_field_text(self.schema.all, w))
                        .collect();
                    match part {
                        Part::Phrase(_) if terms.len() > 1 => Box::new(PhraseQuery::new(terms)),
                        Part::Prefix(_) => Box::new(FuzzyTermQuery::new_prefix(
                            terms[terms.len() - 1].clone(),
                            0,
                            true,
                        )),
                        _ => Box::new(BooleanQuery::new(
                            terms
                                .into_iter()
                                .map(|t| {
                                    (
                                        Occur::Should,
                                        Box::new(TermQuery::new(t, IndexRecordOption::WithFreqs))
                                            as Box<dyn Query>,
                                    )
                                })
                                .collect(),
                        )),
                    }
                }
            };
            per_field.push(match boost == 1.0 {
                true => query,
                false => Box::new(BoostQuery::new(query, boost)),
            });
        }
        Ok(Some(match per_field.len() {
            1 => per_field.remove(0),
            _ => Box::new(DisjunctionMaxQuery::new(per_field)),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_syntax_reads_as_elasticsearch_reads_it() {
        assert_eq!(
            parse(r#"+fox -"lazy dog" quick* | brown~2 "#),
            vec![
                (Some(true), Part::Words("fox".into())),
                (Some(false), Part::Phrase("lazy dog".into())),
                (None, Part::Prefix("quick".into())),
                (None, Part::Words("brown".into())),
            ]
        );
        assert_eq!(parse("  "), vec![]);
        assert_eq!(parse(r#""open"#), vec![(None, Part::Phrase("open".into()))]);
    }
}
