//! A tantivy query that keeps the matches of another query that a per-document test accepts,
//! each scored by the test. The Query DSL builds two queries on it: `geo_distance` (a bounding
//! box found by range queries, then the exact distance of each point in it) and `knn` (every
//! record, then only the nearest ones the vector index found, scored by their distance).

use std::{fmt, sync::Arc};

use tantivy::{
    DocId, DocSet, Score, SegmentReader, TERMINATED, TantivyError,
    query::{EnableScoring, Explanation, Query, Scorer, Weight},
};

/// The test of one tantivy segment: a document's score, or `None` to leave it out.
pub type SegmentTest = Box<dyn FnMut(DocId) -> Option<Score> + Send>;

/// A per-document test.
pub trait DocTest: Send + Sync + fmt::Debug + 'static {
    /// The test for the documents of `reader`'s segment.
    fn segment(&self, reader: &SegmentReader) -> tantivy::Result<SegmentTest>;
}

/// The matches of `inner` that `test` accepts, scored by `test`.
#[derive(Clone, Debug)]
pub struct Filtered {
    inner: Arc<dyn Query>,
    test: Arc<dyn DocTest>,
}

impl Filtered {
    pub fn new(inner: Box<dyn Query>, test: Arc<dyn DocTest>) -> Filtered {
        Filtered {
            inner: Arc::from(inner),
            test,
        }
    }
}

impl Query for Filtered {
    fn weight(&self, scoring: EnableScoring<'_>) -> tantivy::Result<Box<dyn Weight>> {
        Ok(Box::new(FilteredWeight {
            inner: self.inner.weight(scoring)?,
            test: self.test.clone(),
        }))
    }
}

struct FilteredWeight {
    inner: Box<dyn Weight>,
    test: Arc<dyn DocTest>,
}

impl Weight for FilteredWeight {
    fn scorer(&self, reader: &SegmentReader, boost: Score) -> tantivy::Result<Box<dyn Scorer>> {
        let mut scorer = FilteredScorer {
            inner: self.inner.scorer(reader, boost)?,
            test: self.test.segment(reader)?,
            boost,
            score: 0.0,
        };
        scorer.settle();
        Ok(Box::new(scorer))
    }

    fn explain(&self, reader: &SegmentReader, doc: DocId) -> tantivy::Result<Explanation> {
        let mut scorer = self.scorer(reader, 1.0)?;
        if scorer.seek(doc) != doc {
            return Err(TantivyError::InvalidArgument(format!(
                "document {doc} does not match"
            )));
        }
        Ok(Explanation::new("filtered", scorer.score()))
    }
}

struct FilteredScorer {
    inner: Box<dyn Scorer>,
    test: SegmentTest,
    boost: Score,
    score: Score,
}

impl FilteredScorer {
    /// Moves on from the inner scorer's document to the first the test accepts.
    fn settle(&mut self) -> DocId {
        let mut doc = self.inner.doc();
        while doc != TERMINATED {
            if let Some(score) = (self.test)(doc) {
                self.score = score * self.boost;
                return doc;
            }
            doc = self.inner.advance();
        }
        TERMINATED
    }
}

impl DocSet for FilteredScorer {
    fn advance(&mut self) -> DocId {
        self.inner.advance();
        self.settle()
    }

    fn seek(&mut self, target: DocId) -> DocId {
        self.inner.seek(target);
        self.settle()
    }

    fn doc(&self) -> DocId {
        self.inner.doc()
    }

    fn size_hint(&self) -> u32 {
        self.inner.size_hint()
    }
}

impl Scorer for FilteredScorer {
    fn score(&mut self) -> Score {
        self.score
    }
}
