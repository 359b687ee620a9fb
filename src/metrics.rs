//! Prometheus metrics, served in the text exposition format at GET /metrics.

use std::{ops::Range, time::Instant};

use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounterVec, IntGaugeVec, Opts, Registry, TextEncoder,
};
use prost::Message;
use strata_log::{CommitLog, Envelope, PartitionId};

use crate::error::Result;

pub struct Metrics {
    registry: Registry,
    pub http_requests: IntCounterVec,
    pub http_duration: HistogramVec,
    log_events: IntCounterVec,
    log_bytes: IntCounterVec,
    log_append_duration: HistogramVec,
    pub projection_lag: IntGaugeVec,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

/// The kind of a partition, a label of bounded cardinality.
pub fn partition_kind(partition: &PartitionId) -> &'static str {
    let name = partition.as_str();
    if name == PartitionId::control().as_str() {
        "control"
    } else if name.ends_with("/_catalog") {
        "catalog"
    } else {
        "table"
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let registry = Registry::new();
        let latency_buckets = vec![
            0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
            2.5, 5.0, 10.0,
        ];
        let http_requests = IntCounterVec::new(
            Opts::new("strata_http_requests_total", "HTTP requests answered"),
            &["listener", "route", "status"],
        );
        let http_duration = HistogramVec::new(
            HistogramOpts::new(
                "strata_http_request_duration_seconds",
                "Time to answer an HTTP request",
            )
            .buckets(latency_buckets.clone()),
            &["listener", "route"],
        );
        let log_events = IntCounterVec::new(
            Opts::new(
                "strata_log_appended_events_total",
                "Events appended to the commit log",
            ),
            &["partition_kind"],
        );
        let log_bytes = IntCounterVec::new(
            Opts::new(
                "strata_log_appended_bytes_total",
                "Encoded bytes of events appended to the commit log",
            ),
            &["partition_kind"],
        );
        let log_append_duration = HistogramVec::new(
            HistogramOpts::new(
                "strata_log_append_duration_seconds",
                "Time for an append to become durable",
            )
            .buckets(latency_buckets),
            &["partition_kind"],
        );
        let projection_lag = IntGaugeVec::new(
            Opts::new(
                "strata_projection_lag_events",
                "Events in the log that active projections have not applied yet, by partition kind",
            ),
            &["partition_kind"],
        );
        // The metric definitions above are static and valid; registering them cannot fail
        // except on a duplicate name, which the distinct names above rule out.
        let metrics = Metrics {
            registry,
            http_requests: http_requests.unwrap_or_else(|_| unreachable_metric()),
            http_duration: http_duration.unwrap_or_else(|_| unreachable_metric()),
            log_events: log_events.unwrap_or_else(|_| unreachable_metric()),
            log_bytes: log_bytes.unwrap_or_else(|_| unreachable_metric()),
            log_append_duration: log_append_duration.unwrap_or_else(|_| unreachable_metric()),
            projection_lag: projection_lag.unwrap_or_else(|_| unreachable_metric()),
        };
        for collector in [
            Box::new(metrics.http_requests.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(metrics.http_duration.clone()),
            Box::new(metrics.log_events.clone()),
            Box::new(metrics.log_bytes.clone()),
            Box::new(metrics.log_append_duration.clone()),
            Box::new(metrics.projection_lag.clone()),
        ] {
            if let Err(error) = metrics.registry.register(collector) {
                tracing::error!(%error, "metric registration failed");
            }
        }
        metrics
    }

    /// Appends one event to `log`, counting it.
    pub async fn timed_append(
        &self,
        log: &dyn CommitLog,
        partition: &PartitionId,
        event: Envelope,
    ) -> Result<Range<u64>> {
        let kind = partition_kind(partition);
        let bytes = event.encoded_len() as u64;
        let started = Instant::now();
        let range = log.append(partition, vec![event]).await?;
        self.log_append_duration
            .with_label_values(&[kind])
            .observe(started.elapsed().as_secs_f64());
        self.log_events.with_label_values(&[kind]).inc();
        self.log_bytes.with_label_values(&[kind]).inc_by(bytes);
        Ok(range)
    }

    /// The text exposition of every metric.
    pub fn render(&self) -> String {
        let mut out = Vec::new();
        if let Err(error) = TextEncoder::new().encode(&self.registry.gather(), &mut out) {
            tracing::error!(%error, "metrics encoding failed");
        }
        String::from_utf8_lossy(&out).into_owned()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

#[allow(clippy::panic)]
fn unreachable_metric<T>() -> T {
    // Only reachable with an invalid static metric definition: a programming error caught by
    // every test that starts a server.
    panic!("invalid static metric definition")
}
