//! Vector indexing of a table: one immutable index per segment, keyed by row id: an hnsw_rs
//! graph, or for a small segment its vectors as they are (searched exactly). The memtable's
//! vectors are searched exactly too.
//!
//! Distances (smaller is nearer): cosine is 1 − cos(a, b); l2 is the Euclidean distance; dot
//! ranks by the largest inner product, through a positive, strictly decreasing map of it (the
//! graph needs non-negative distances): 1 / (1 + a·b) for a·b ≥ 0, else 1 − a·b.
//!
//! A loaded graph borrows its loader for its whole life (hnsw_rs' API); the loader, a few
//! hundred bytes with no data in it, is therefore leaked once per segment load.

use std::{
    io::{Read, Write},
    path::Path,
};

use arrow::array::{Array, AsArray, RecordBatch};
use hnsw_rs::prelude::{AnnT, Distance, Hnsw, HnswIo};

use super::rows::row_ids;
use crate::{
    catalog::VectorMetric,
    error::{Error, Result},
};

fn vector_error(error: impl std::fmt::Display) -> Error {
    Error::Index(format!("vector index: {error}"))
}

#[derive(Clone, Copy, Debug, Default)]
pub struct CosineDistance;
#[derive(Clone, Copy, Debug, Default)]
pub struct L2Distance;
#[derive(Clone, Copy, Debug, Default)]
pub struct DotDistance;

/// Lanes of the sums below: independent accumulators the compiler can keep in one SIMD
/// register, so that 384-dimension distances cost tens of nanoseconds, not hundreds.
const LANES: usize = 8;

/// Sums `f(x, y)` over the pairs of `a` and `b`, in `LANES` interleaved partial sums.
#[inline(always)]
fn lane_sum(a: &[f32], b: &[f32], f: impl Fn(f32, f32) -> f32) -> f32 {
    let mut acc = [0f32; LANES];
    let (a_chunks, b_chunks) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let tail: f32 = a_chunks
        .remainder()
        .iter()
        .zip(b_chunks.remainder())
        .map(|(x, y)| f(*x, *y))
        .sum();
    for (x, y) in a_chunks.zip(b_chunks) {
        for lane in 0..LANES {
            acc[lane] += f(x[lane], y[lane]);
        }
    }
    acc.iter().sum::<f32>() + tail
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    lane_sum(a, b, |x, y| x * y)
}

impl Distance<f32> for CosineDistance {
    fn eval(&self, a: &[f32], b: &[f32]) -> f32 {
        let (ab, aa, bb) = (dot(a, b), dot(a, a), dot(b, b));
        if aa == 0.0 || bb == 0.0 {
            return 1.0;
        }
        (1.0 - ab / (aa * bb).sqrt()).max(0.0)
    }
}

impl Distance<f32> for L2Distance {
    fn eval(&self, a: &[f32], b: &[f32]) -> f32 {
        lane_sum(a, b, |x, y| (x - y) * (x - y)).sqrt()
    }
}

impl Distance<f32> for DotDistance {
    fn eval(&self, a: &[f32], b: &[f32]) -> f32 {
        let d = dot(a, b);
        if d >= 0.0 { 1.0 / (1.0 + d) } else { 1.0 - d }
    }
}

/// The distance of `metric` between two vectors.
pub fn distance(metric: VectorMetric, a: &[f32], b: &[f32]) -> f32 {
    match metric {
        VectorMetric::Cosine => CosineDistance.eval(a, b),
        VectorMetric::L2 => L2Distance.eval(a, b),
        VectorMetric::Dot => DotDistance.eval(a, b),
    }
}

/// How vector indexes are built and searched.
#[derive(Clone, Copy, Debug)]
pub struct VectorOptions {
    /// Segments with fewer vectors than this keep them as they are and are searched exactly.
    pub graph_min_rows: usize,
    /// Neighbours per node of the graph (HNSW's M).
    pub max_connections: usize,
    pub ef_construction: usize,
    /// Candidates examined per search (at least the number of results asked for).
    pub ef_search: usize,
}

impl Default for VectorOptions {
    fn default() -> Self {
        VectorOptions {
            graph_min_rows: 2048,
            max_connections: 32,
            ef_construction: 256,
            ef_search: 256,
        }
    }
}

/// The vectors of a batch's column, with their row ids, skipping nulls.
pub(crate) fn vectors_of(batch: &RecordBatch, column: &str) -> Result<(Vec<u64>, Vec<f32>, usize)> {
    let ids = row_ids(batch)?;
    let list = batch
        .column_by_name(column)
        .and_then(|c| c.as_fixed_size_list_opt())
        .ok_or_else(|| vector_error(format!("column {column} is not a vector column")))?;
    let dim = list.value_length() as usize;
    let values = list
        .values()
        .as_primitive_opt::<arrow::datatypes::Float32Type>()
        .ok_or_else(|| vector_error(format!("column {column} does not hold float32")))?;
    let mut out_ids = Vec::new();
    let mut out = Vec::new();
    for row in 0..list.len() {
        if list.is_valid(row) {
            out_ids.push(ids.value(row));
            let start = list.value_offset(row) as usize;
            out.extend_from_slice(&values.values()[start..start + dim]);
        }
    }
    Ok((out_ids, out, dim))
}

enum Graph {
    Cosine(Hnsw<'static, f32, CosineDistance>),
    L2(Hnsw<'static, f32, L2Distance>),
    Dot(Hnsw<'static, f32, DotDistance>),
}

macro_rules! on_graph {
    ($graph:expr, $g:ident => $body:expr) => {
        match $graph {
            Graph::Cosine($g) => $body,
            Graph::L2($g) => $body,
            Graph::Dot($g) => $body,
        }
    };
}

enum Kind {
    Graph(Graph),
    Flat { ids: Vec<u64>, data: Vec<f32> },
}

/// The vector index of one segment.
pub struct SegmentVectors {
    metric: VectorMetric,
    dim: usize,
    kind: Kind,
}

impl std::fmt::Debug for SegmentVectors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SegmentVectors")
            .field("metric", &self.metric)
            .field("graph", &matches!(self.kind, Kind::Graph(_)))
            .finish()
    }
}

const GRAPH_BASENAME: &str = "hnsw";
const FLAT_FILE: &str = "vectors.flat";

impl SegmentVectors {
    /// Builds the index of `column` of a segment's rows and writes it into `dir`.
    pub(crate) fn build(
        dir: &Path,
        metric: VectorMetric,
        column: &str,
        batch: &RecordBatch,
        options: &VectorOptions,
    ) -> Result<SegmentVectors> {
        std::fs::create_dir_all(dir).map_err(vector_error)?;
        let (ids, data, dim) = vectors_of(batch, column)?;
        let index = if ids.len() < options.graph_min_rows.max(1) {
            write_flat(&dir.join(FLAT_FILE), &ids, &data)?;
            Kind::Flat { ids, data }
        } else {
            let graph = build_graph(metric, &ids, &data, dim, options);
            on_graph!(&graph, g => g.file_dump(dir, GRAPH_BASENAME)).map_err(vector_error)?;
            Kind::Graph(graph)
        };
        Ok(SegmentVectors {
            metric,
            dim,
            kind: index,
        })
    }

    /// Loads an index [`SegmentVectors::build`] wrote.
    pub(crate) fn open(dir: &Path, metric: VectorMetric, dim: usize) -> Result<SegmentVectors> {
        let flat = dir.join(FLAT_FILE);
        let kind = if flat.exists() {
            let (ids, data) = read_flat(&flat, dim)?;
            Kind::Flat { ids, data }
        } else {
            let loader: &'static mut HnswIo = Box::leak(Box::new(HnswIo::new(dir, GRAPH_BASENAME)));
            let graph = match metric {
                VectorMetric::Cosine => Graph::Cosine(loader.load_hnsw().map_err(vector_error)?),
                VectorMetric::L2 => Graph::L2(loader.load_hnsw().map_err(vector_error)?),
                VectorMetric::Dot => Graph::Dot(loader.load_hnsw().map_err(vector_error)?),
            };
            Kind::Graph(graph)
        };
        Ok(SegmentVectors { metric, dim, kind })
    }

    /// How many vectors the index holds.
    pub fn len(&self) -> usize {
        match &self.kind {
            Kind::Flat { ids, .. } => ids.len(),
            Kind::Graph(graph) => on_graph!(graph, g => g.get_nb_point()),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The `k` nearest vectors to `query`, among those whose row id passes `keep` if there is
    /// a filter: (row id, distance), nearest first.
    ///
    /// Without a filter the graph is searched as hnsw_rs searches it, stopping once the nearest
    /// candidate left is farther than the `ef`-th found. With one, hnsw_rs does not stop early
    /// and walks every candidate it queued: several times the work, so callers filter only
    /// where something must be left out (see [`crate::table::TableSnapshot::knn`]).
    pub fn search(
        &self,
        query: &[f32],
        k: usize,
        ef_search: usize,
        keep: Option<&dyn Fn(u64) -> bool>,
    ) -> Vec<(u64, f32)> {
        match &self.kind {
            Kind::Flat { ids, data } => {
                let mut hits: Vec<(u64, f32)> = ids
                    .iter()
                    .zip(data.chunks_exact(self.dim.max(1)))
                    .filter(|(id, _)| keep.is_none_or(|keep| keep(**id)))
                    .map(|(id, v)| (*id, distance(self.metric, query, v)))
                    .collect();
                nearest(&mut hits, k);
                hits
            }
            Kind::Graph(graph) => {
                let ef = ef_search.max(k);
                let found = match keep {
                    None => on_graph!(graph, g => g.search(query, k, ef)),
                    Some(keep) => {
                        let filter = |id: &usize| keep(*id as u64);
                        on_graph!(graph, g => g.search_filter(query, k, ef, Some(&filter)))
                    }
                };
                found
                    .into_iter()
                    .map(|n| (n.d_id as u64, n.distance))
                    .collect()
            }
        }
    }
}

/// Sorts hits nearest first (row id breaks ties) and keeps `k`.
pub fn nearest(hits: &mut Vec<(u64, f32)>, k: usize) {
    hits.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
    hits.truncate(k);
}

fn build_graph(
    metric: VectorMetric,
    ids: &[u64],
    data: &[f32],
    dim: usize,
    options: &VectorOptions,
) -> Graph {
    let points: Vec<(&[f32], usize)> = data
        .chunks_exact(dim.max(1))
        .zip(ids)
        .map(|(v, id)| (v, *id as usize))
        .collect();
    let (m, n, ef) = (
        options.max_connections,
        points.len(),
        options.ef_construction,
    );
    let layers = 16;
    match metric {
        VectorMetric::Cosine => {
            let graph = Hnsw::new(m, n, layers, ef, CosineDistance);
            graph.parallel_insert_slice(&points);
            Graph::Cosine(graph)
        }
        VectorMetric::L2 => {
            let graph = Hnsw::new(m, n, layers, ef, L2Distance);
            graph.parallel_insert_slice(&points);
            Graph::L2(graph)
        }
        VectorMetric::Dot => {
            let graph = Hnsw::new(m, n, layers, ef, DotDistance);
            graph.parallel_insert_slice(&points);
            Graph::Dot(graph)
        }
    }
}

fn write_flat(path: &Path, ids: &[u64], data: &[f32]) -> Result<()> {
    let mut out = Vec::with_capacity(8 + ids.len() * 8 + data.len() * 4);
    out.extend_from_slice(&(ids.len() as u64).to_le_bytes());
    for id in ids {
        out.extend_from_slice(&id.to_le_bytes());
    }
    for v in data {
        out.extend_from_slice(&v.to_le_bytes());
    }
    let mut file = std::fs::File::create(path).map_err(vector_error)?;
    file.write_all(&out).map_err(vector_error)?;
    file.sync_all().map_err(vector_error)
}

fn read_flat(path: &Path, dim: usize) -> Result<(Vec<u64>, Vec<f32>)> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|mut f| f.read_to_end(&mut bytes))
        .map_err(vector_error)?;
    let corrupt = || vector_error(format!("{} is truncated", path.display()));
    let n = u64::from_le_bytes(
        bytes
            .get(..8)
            .ok_or_else(corrupt)?
            .try_into()
            .map_err(|_| corrupt())?,
    ) as usize;
    let ids_end = 8 + n * 8;
    let data_end = ids_end + n * dim * 4;
    if bytes.len() != data_end {
        return Err(corrupt());
    }
    let ids = bytes[8..ids_end]
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
        .collect();
    let data = bytes[ids_end..]
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    Ok((ids, data))
}
