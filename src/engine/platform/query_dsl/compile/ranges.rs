//! Queries on range fields (`date_range`, `long_range`, `double_range`, ...). A record's range
//! is kept as up to four bound columns, `<field>.gte` or `.gt`, and `.lte` or `.lt`; a missing
//! side is unbounded. A `range` query compares the record's range with its own by `relation`
//! (`intersects`, the default; `within`; `contains`), and a `term` query finds the ranges that
//! hold a value, as Elasticsearch's range fields answer them.

use std::ops::Bound;

use tantivy::{
    DateTime, Term,
    query::{AllQuery, BooleanQuery, ExistsQuery, Occur, Query, RangeQuery},
};

use strata_projections::table::{
    dates,
    docs::{DocsSchema, KEYWORD_FIELD},
};

use super::{DslError, any_of, parsing};

/// A bound's value, in the type of the field's bounds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Point {
    /// Unix milliseconds.
    Date(i64),
    Long(i64),
    Double(f64),
}

impl Point {
    /// The next value up (`up`) or down: what an exclusive bound includes first.
    fn step(self, up: bool) -> Point {
        match (self, up) {
            (Point::Date(v), true) => Point::Date(v.saturating_add(1)),
            (Point::Date(v), false) => Point::Date(v.saturating_sub(1)),
            (Point::Long(v), true) => Point::Long(v.saturating_add(1)),
            (Point::Long(v), false) => Point::Long(v.saturating_sub(1)),
            (Point::Double(v), true) => Point::Double(v.next_up()),
            (Point::Double(v), false) => Point::Double(v.next_down()),
        }
    }
}

/// How a query's range relates to a record's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Relation {
    Intersects,
    Within,
    Contains,
}

impl Relation {
    pub(super) fn parse(text: Option<&str>) -> Result<Relation, DslError> {
        match text.map(str::to_ascii_lowercase).as_deref() {
            None | Some("intersects") => Ok(Relation::Intersects),
            Some("within") => Ok(Relation::Within),
            Some("contains") => Ok(Relation::Contains),
            Some(other) => Err(parsing(format!(
                "[range] query: relation [{other}] is none of intersects, within and contains"
            ))),
        }
    }
}

/// The range field at `path` of a document index.
pub(super) struct RangeField<'a> {
    pub schema: &'a DocsSchema,
    pub path: &'a str,
}

impl RangeField<'_> {
    fn term(&self, end: &str, point: Point) -> Term {
        let path = format!("{}.{end}", self.path);
        let mut term = Term::from_field_json_path(self.schema.keyword, &path, true);
        match point {
            Point::Date(ms) => term.append_type_and_fast_value(DateTime::from_timestamp_millis(
                ms.clamp(dates::MIN_MILLIS, dates::MAX_MILLIS),
            )),
            Point::Long(n) => term.append_type_and_fast_value(n),
            Point::Double(f) => term.append_type_and_fast_value(f),
        }
        term
    }

    /// Records whose bound `end` is in `lower..upper`.
    fn between(&self, end: &str, lower: Bound<Point>, upper: Bound<Point>) -> Box<dyn Query> {
        Box::new(RangeQuery::new(
            lower.map(|p| self.term(end, p)),
            upper.map(|p| self.term(end, p)),
        ))
    }

    fn has(&self, end: &str) -> Box<dyn Query> {
        Box::new(ExistsQuery::new(
            format!("{KEYWORD_FIELD}.{}.{end}", self.path),
            false,
        ))
    }

    /// Records with neither bound `a` nor `b`: that side of their range is unbounded.
    fn open(&self, a: &str, b: &str) -> Box<dyn Query> {
        Box::new(BooleanQuery::new(vec![
            (Occur::Must, Box::new(AllQuery) as Box<dyn Query>),
            (Occur::MustNot, self.has(a)),
            (Occur::MustNot, self.has(b)),
        ]))
    }

    /// The record's range begins at or before `at`.
    fn starts_by(&self, at: Point) -> Box<dyn Query> {
        any_of(vec![
            self.between("gte", Bound::Unbounded, Bound::Included(at)),
            self.between("gt", Bound::Unbounded, Bound::Excluded(at)),
            self.open("gte", "gt"),
        ])
    }

    /// The record's range ends at or after `at`.
    fn ends_from(&self, at: Point) -> Box<dyn Query> {
        any_of(vec![
            self.between("lte", Bound::Included(at), Bound::Unbounded),
            self.between("lt", Bound::Excluded(at), Bound::Unbounded),
            self.open("lte", "lt"),
        ])
    }

    /// The record's range begins at or after `at` (an unbounded start never does).
    fn starts_from(&self, at: Point) -> Box<dyn Query> {
        any_of(vec![
            self.between("gte", Bound::Included(at), Bound::Unbounded),
            self.between("gt", Bound::Included(at.step(false)), Bound::Unbounded),
        ])
    }

    /// The record's range ends at or before `at` (an unbounded end never does).
    fn ends_by(&self, at: Point) -> Box<dyn Query> {
        any_of(vec![
            self.between("lte", Bound::Unbounded, Bound::Included(at)),
            self.between("lt", Bound::Unbounded, Bound::Included(at.step(true))),
        ])
    }

    /// Records that have a range in this field.
    fn any(&self) -> Box<dyn Query> {
        any_of(vec![
            self.has("gte"),
            self.has("gt"),
            self.has("lte"),
            self.has("lt"),
        ])
    }

    /// The records whose range relates to `lower..upper` as `relation` says.
    pub(super) fn query(
        &self,
        lower: Bound<Point>,
        upper: Bound<Point>,
        relation: Relation,
    ) -> Box<dyn Query> {
        // Inclusive bounds: an exclusive one includes the next value first.
        let low = match lower {
            Bound::Included(p) => Some(p),
            Bound::Excluded(p) => Some(p.step(true)),
            Bound::Unbounded => None,
        };
        let high = match upper {
            Bound::Included(p) => Some(p),
            Bound::Excluded(p) => Some(p.step(false)),
            Bound::Unbounded => None,
        };
        let mut clauses: Vec<Box<dyn Query>> = vec![self.any()];
        match relation {
            Relation::Intersects => {
                clauses.extend(high.map(|h| self.starts_by(h)));
                clauses.extend(low.map(|l| self.ends_from(l)));
            }
            Relation::Within => {
                clauses.extend(low.map(|l| self.starts_from(l)));
                clauses.extend(high.map(|h| self.ends_by(h)));
            }
            Relation::Contains => {
                clauses.extend(low.map(|l| self.starts_by(l)));
                clauses.extend(high.map(|h| self.ends_from(h)));
                // An unbounded side of the query is contained only by an unbounded record.
                if low.is_none() {
                    clauses.push(self.open("gte", "gt"));
                }
                if high.is_none() {
                    clauses.push(self.open("lte", "lt"));
                }
            }
        }
        Box::new(BooleanQuery::intersection(clauses))
    }
}
