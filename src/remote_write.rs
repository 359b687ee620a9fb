//! Prometheus remote write 1.0, read: the `prometheus.WriteRequest` protobuf message,
//! snappy-compressed (block format), that POST /api/v1/write takes. Only the fields strata
//! reads are declared; prost skips the others (exemplars, metadata).

use crate::{engine::SampleRow, error::Error};

#[derive(Clone, PartialEq, prost::Message)]
struct WriteRequest {
    #[prost(message, repeated, tag = "1")]
    timeseries: Vec<TimeSeries>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct TimeSeries {
    #[prost(message, repeated, tag = "1")]
    labels: Vec<Label>,
    #[prost(message, repeated, tag = "2")]
    samples: Vec<Sample>,
    /// Native histograms: counted, to refuse them (they are not stored yet).
    #[prost(message, repeated, tag = "4")]
    histograms: Vec<Skipped>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Label {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(string, tag = "2")]
    value: String,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Sample {
    #[prost(double, tag = "1")]
    value: f64,
    #[prost(int64, tag = "2")]
    timestamp: i64,
}

/// A message whose fields are not read.
#[derive(Clone, PartialEq, prost::Message)]
struct Skipped {}

/// The samples of a remote-write body, or why it is refused (nothing of it is written then).
pub fn decode(body: &[u8], max_bytes: usize) -> Result<Vec<SampleRow>, Error> {
    let bad = |reason: String| Error::BadRequest(reason);
    let size = snap::raw::decompress_len(body).map_err(|e| {
        bad(format!(
            "the body is not snappy-compressed (block format): {e}"
        ))
    })?;
    if size > max_bytes {
        return Err(bad(format!(
            "the body decompresses to {size} bytes, more than the {max_bytes} taken"
        )));
    }
    let raw = snap::raw::Decoder::new()
        .decompress_vec(body)
        .map_err(|e| {
            bad(format!(
                "the body is not snappy-compressed (block format): {e}"
            ))
        })?;
    let request: WriteRequest = prost::Message::decode(raw.as_slice())
        .map_err(|e| bad(format!("the body is not a prometheus.WriteRequest: {e}")))?;
    let mut samples = Vec::with_capacity(request.timeseries.iter().map(|s| s.samples.len()).sum());
    for (i, series) in request.timeseries.into_iter().enumerate() {
        let mut names: Vec<&str> = series.labels.iter().map(|l| l.name.as_str()).collect();
        names.sort_unstable();
        if let Some(pair) = names.windows(2).find(|pair| pair[0] == pair[1]) {
            return Err(bad(format!("series {i} has label {:?} twice", pair[0])));
        }
        if let Some(label) = series.labels.iter().find(|l| l.name.is_empty()) {
            return Err(bad(format!(
                "series {i} has a label with an empty name (value {:?})",
                label.value
            )));
        }
        if series.labels.iter().all(|l| l.value.is_empty()) {
            return Err(bad(format!("series {i} has no labels")));
        }
        if !series.histograms.is_empty() {
            return Err(bad(format!(
                "series {i} carries native histograms, which are not stored yet; only float samples are"
            )));
        }
        let labels: Vec<(String, String)> = series
            .labels
            .into_iter()
            .map(|l| (l.name, l.value))
            .collect();
        samples.extend(SampleRow::of_series(
            labels,
            series.samples.iter().map(|s| (s.timestamp, s.value)),
        ));
    }
    Ok(samples)
}

/// A series to send: its labels, and its samples as (Unix milliseconds, value).
pub type SeriesSamples = (Vec<(String, String)>, Vec<(i64, f64)>);

/// A remote-write body of `series`: what Prometheus sends. For tests and benchmarks.
pub fn encode(series: &[SeriesSamples]) -> Vec<u8> {
    let request = WriteRequest {
        timeseries: series
            .iter()
            .map(|(labels, samples)| TimeSeries {
                labels: labels
                    .iter()
                    .map(|(name, value)| Label {
                        name: name.clone(),
                        value: value.clone(),
                    })
                    .collect(),
                samples: samples
                    .iter()
                    .map(|(timestamp, value)| Sample {
                        value: *value,
                        timestamp: *timestamp,
                    })
                    .collect(),
                histograms: Vec::new(),
            })
            .collect(),
    };
    let raw = prost::Message::encode_to_vec(&request);
    snap::raw::Encoder::new()
        .compress_vec(&raw)
        .unwrap_or_default()
}
