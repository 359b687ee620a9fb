//! A seeded generator of English-like documents with embedding-like vectors, for the search
//! benchmarks: the same seed gives the same rows on every machine.
//!
//! Words follow Zipf's law (exponent 1.07) over a vocabulary of common English words followed
//! by pronounceable made-up ones, as word frequencies in English text do. Each document belongs
//! to one of `TOPICS` topics: a fifth of its words come from its topic's own band of the
//! vocabulary, and its vector (384 dimensions, unit length, like sentence embeddings) is its
//! topic's centroid plus one of the topic's sub-topic directions plus Gaussian noise (about as
//! large as the centroid), so that neighbours cluster as embeddings of related texts do.
//! Queries are drawn the same way, so a query's words and its vector point at the same topic,
//! as in hybrid search.

use std::sync::Arc;

use arrow::{
    array::{ArrayRef, FixedSizeListArray, Float32Array, Int64Array, RecordBatch, StringArray},
    datatypes::{DataType, Field, Schema, SchemaRef},
};
use rand::{Rng, SeedableRng, rngs::StdRng};
use serde_json::{Value, json};

pub const DIM: usize = 384;
const TOPICS: usize = 64;
const SUBTOPICS: usize = 32;
const VOCABULARY: usize = 30_000;
/// Words per topic band: a topic's words are ranks [offset, offset + TOPIC_WORDS) of the
/// vocabulary's long tail.
const TOPIC_WORDS: usize = 300;
const COMMON: &[&str] = &[
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
    "was",
    "that",
    "for",
    "on",
    "with",
    "as",
    "by",
    "at",
    "from",
    "his",
    "her",
    "an",
    "were",
    "are",
    "which",
    "this",
    "be",
    "or",
    "has",
    "had",
    "not",
    "but",
    "first",
    "one",
    "their",
    "its",
    "new",
    "after",
    "who",
    "they",
    "have",
    "two",
    "been",
    "also",
    "other",
    "time",
    "city",
    "year",
    "school",
    "during",
    "world",
    "state",
    "people",
    "team",
    "season",
    "film",
    "water",
    "music",
    "river",
    "house",
    "market",
    "system",
    "game",
    "history",
    "church",
    "party",
    "government",
    "company",
    "book",
    "war",
    "league",
    "family",
    "album",
    "station",
    "road",
    "power",
    "light",
    "north",
    "south",
    "west",
    "east",
    "island",
    "energy",
    "science",
    "theory",
    "language",
    "computer",
    "engine",
    "garden",
    "bridge",
    "health",
];
const ONSETS: &[&str] = &[
    "b", "c", "d", "f", "g", "h", "l", "m", "n", "p", "r", "s", "t", "v", "br", "ch", "cl", "st",
    "tr", "gr", "pl", "sh",
];
const NUCLEI: &[&str] = &["a", "e", "i", "o", "u", "ai", "ea", "ou", "io"];
const CODAS: &[&str] = &["", "n", "r", "s", "t", "l", "nd", "st", "rk", "ng"];

pub struct Corpus {
    seed: u64,
    words: Vec<String>,
    /// Cumulative Zipf weights over `words`.
    cumulative: Vec<f64>,
    centroids: Vec<Vec<f32>>,
    /// `SUBTOPICS` unit directions per topic.
    subtopics: Vec<Vec<f32>>,
}

impl Corpus {
    pub fn new(seed: u64) -> Corpus {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut words: Vec<String> = COMMON.iter().map(|w| (*w).to_owned()).collect();
        let mut seen: std::collections::HashSet<String> = words.iter().cloned().collect();
        while words.len() < VOCABULARY {
            let syllables = rng.random_range(2..4);
            let word: String = (0..syllables)
                .map(|_| {
                    format!(
                        "{}{}{}",
                        ONSETS[rng.random_range(0..ONSETS.len())],
                        NUCLEI[rng.random_range(0..NUCLEI.len())],
                        CODAS[rng.random_range(0..CODAS.len())]
                    )
                })
                .collect();
            if seen.insert(word.clone()) {
                words.push(word);
            }
        }
        let mut total = 0.0;
        let cumulative = (1..=words.len())
            .map(|rank| {
                total += 1.0 / (rank as f64).powf(1.07);
                total
            })
            .collect();
        let centroids = (0..TOPICS).map(|_| unit(gaussian(&mut rng, DIM))).collect();
        let subtopics = (0..TOPICS * SUBTOPICS)
            .map(|_| unit(gaussian(&mut rng, DIM)))
            .collect();
        Corpus {
            seed,
            words,
            cumulative,
            centroids,
            subtopics,
        }
    }

    pub fn schema() -> SchemaRef {
        let item = Arc::new(Field::new("item", DataType::Float32, true));
        Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("title", DataType::Utf8, true),
            Field::new("body", DataType::Utf8, true),
            Field::new("emb", DataType::FixedSizeList(item, DIM as i32), true),
        ]))
    }

    /// The create_table request of a table of these rows (BM25 over title and body).
    pub fn table_request(name: &str) -> Value {
        json!({"name": name, "schema": [
            {"name": "id", "type": "int64", "nullable": false},
            {"name": "title", "type": "utf8"},
            {"name": "body", "type": "utf8"},
            {"name": "emb", "type": format!("vector<float32,{DIM}>")}
        ], "fts_columns": ["title", "body"], "vector_column": "emb", "vector_metric": "cosine"})
    }

    fn zipf_word(&self, rng: &mut StdRng) -> &str {
        let total = self.cumulative[self.cumulative.len() - 1];
        let x = rng.random::<f64>() * total;
        let i = self.cumulative.partition_point(|c| *c < x);
        &self.words[i.min(self.words.len() - 1)]
    }

    fn topic_word(&self, rng: &mut StdRng, topic: usize) -> &str {
        let band = COMMON.len() + 1000 + topic * TOPIC_WORDS;
        // Within the band, earlier words are more frequent.
        let i = (rng.random::<f64>().powi(2) * TOPIC_WORDS as f64) as usize;
        &self.words[band + i]
    }

    fn text(&self, rng: &mut StdRng, topic: usize, words: usize) -> String {
        (0..words)
            .map(|_| {
                if rng.random_bool(0.2) {
                    self.topic_word(rng, topic)
                } else {
                    self.zipf_word(rng)
                }
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// A unit vector near `topic`: its centroid, one of its sub-topic directions, and noise.
    fn vector(&self, rng: &mut StdRng, topic: usize) -> Vec<f32> {
        let centroid = &self.centroids[topic];
        let sub = &self.subtopics[topic * SUBTOPICS + rng.random_range(0..SUBTOPICS)];
        let noise = gaussian(rng, DIM);
        unit(
            centroid
                .iter()
                .zip(sub)
                .zip(noise)
                .map(|((c, s), n)| c + 0.6 * s + 0.04 * n)
                .collect(),
        )
    }

    /// The `index`-th batch of `rows` rows; `id` counts rows from 0 across batches.
    pub fn batch(&self, index: usize, rows: usize) -> RecordBatch {
        let mut rng = StdRng::seed_from_u64(self.seed ^ (index as u64).wrapping_mul(0x9E37_79B9));
        let first = (index * rows) as i64;
        let mut titles = Vec::with_capacity(rows);
        let mut bodies = Vec::with_capacity(rows);
        let mut vectors: Vec<f32> = Vec::with_capacity(rows * DIM);
        for _ in 0..rows {
            let topic = rng.random_range(0..TOPICS);
            let title_words = rng.random_range(3..9);
            titles.push(self.text(&mut rng, topic, title_words));
            let body_words = rng.random_range(20..80);
            bodies.push(self.text(&mut rng, topic, body_words));
            vectors.extend(self.vector(&mut rng, topic));
        }
        let item = Arc::new(Field::new("item", DataType::Float32, true));
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from_iter_values(first..first + rows as i64)),
            Arc::new(StringArray::from(titles)),
            Arc::new(StringArray::from(bodies)),
            Arc::new(
                FixedSizeListArray::try_new(
                    item,
                    DIM as i32,
                    Arc::new(Float32Array::from(vectors)),
                    None,
                )
                .expect("a vector column"),
            ),
        ];
        RecordBatch::try_new(Self::schema(), columns).expect("a valid batch")
    }

    /// The `index`-th query: 1 to 3 words and a vector, both of one topic.
    pub fn query(&self, index: usize) -> (String, Vec<f32>) {
        let mut rng = StdRng::seed_from_u64(!self.seed ^ (index as u64).wrapping_mul(0x85EB_CA6B));
        let topic = rng.random_range(0..TOPICS);
        let words = rng.random_range(1..4);
        let text = (0..words)
            .map(|i| {
                if i == 0 {
                    self.topic_word(&mut rng, topic)
                } else {
                    self.zipf_word(&mut rng)
                }
            })
            .collect::<Vec<_>>()
            .join(" ");
        (text, self.vector(&mut rng, topic))
    }
}

/// `n` independent standard normal values (Box-Muller).
fn gaussian(rng: &mut StdRng, n: usize) -> Vec<f32> {
    (0..n)
        .map(|_| {
            let (u, v): (f64, f64) = (rng.random::<f64>().max(f64::MIN_POSITIVE), rng.random());
            ((-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()) as f32
        })
        .collect()
}

fn unit(v: Vec<f32>) -> Vec<f32> {
    let norm = v
        .iter()
        .map(|x| x * x)
        .sum::<f32>()
        .sqrt()
        .max(f32::MIN_POSITIVE);
    v.into_iter().map(|x| x / norm).collect()
}
