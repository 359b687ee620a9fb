//! Samples written to metrics datasets (ADR 7): by the text exposition format and by Prometheus
//! remote write.
//!
//! A metrics dataset is made by its first write. Its rows are samples: `@timestamp`, `_series`
//! (the series' id, a stable hash of its label set), `value`, and a string column per label,
//! added as samples bring new labels (a catalog change, as a record's new field is). A request's
//! samples are one `RowsAppended` event: all of them are written, or none (a refused request
//! appends nothing to the log). A sample never replaces another in the log; of two samples of a
//! series at the same time, queries read the one written last.

use std::{collections::BTreeSet, sync::Arc, time::Duration};

use arrow::array::{
    ArrayRef, Float64Array, RecordBatch, StringBuilder, TimestampMillisecondArray, UInt64Array,
};
use strata_log::{envelope::Body, event::RowsAppended};
use strata_projections::{
    catalog::{ColumnDef, TableDef},
    schema::ColumnType,
    table::{rows as table_rows, series},
};

use crate::engine::{
    Engine, Origin, PlatformPrincipal,
    datasets::{Kind, NewDataset, TIMESTAMP_FIELD, check_name},
    ingest::dataset_permit,
    quota::Counts,
};
use crate::error::{Error, Result};

/// How long a write of samples waits for a busy dataset (or its catalog) before a 429.
const SAMPLES_WAIT: Duration = Duration::from_secs(30);

/// A series' labels, shared by its samples.
pub type Labels = Arc<[(String, String)]>;

/// One sample to write: its series' labels (the metric name as `__name__`) and id, its time in
/// Unix milliseconds, its value. The samples of one series share its labels.
#[derive(Clone, Debug, PartialEq)]
pub struct SampleRow {
    /// Sorted by name, each name once, no empty value.
    pub labels: Labels,
    /// The series' id: [`series::series_id`] of `labels`.
    pub series: u64,
    pub t: i64,
    pub v: f64,
}

impl SampleRow {
    /// A sample of the series `labels` (in any order; empty values are left out, as Prometheus
    /// leaves them out).
    pub fn new(labels: Vec<(String, String)>, t: i64, v: f64) -> SampleRow {
        let (labels, series) = series_of(labels);
        SampleRow {
            labels,
            series,
            t,
            v,
        }
    }

    /// The samples `(t, v)` of the series `labels` (as in [`SampleRow::new`]): its labels are
    /// put in order and hashed once, and shared.
    pub fn of_series(
        labels: Vec<(String, String)>,
        samples: impl IntoIterator<Item = (i64, f64)>,
    ) -> impl Iterator<Item = SampleRow> {
        let (labels, series) = series_of(labels);
        samples.into_iter().map(move |(t, v)| SampleRow {
            labels: labels.clone(),
            series,
            t,
            v,
        })
    }
}

/// A series' labels in order, and its id.
fn series_of(mut labels: Vec<(String, String)>) -> (Labels, u64) {
    labels.retain(|(_, value)| !value.is_empty());
    labels.sort_by(|a, b| a.0.cmp(&b.0));
    labels.dedup_by(|b, a| a.0 == b.0);
    let id = series::series_id(labels.iter().map(|(n, v)| (n.as_str(), v.as_str())));
    (labels.into(), id)
}

/// The refusal of a write of samples to a dataset of records.
fn not_metrics(name: &str) -> Error {
    Error::BadRequest(format!(
        "dataset {name:?} holds records, not metrics: write samples to a metrics dataset"
    ))
}

impl Engine {
    /// Writes `samples` to metrics dataset `name`, made if it does not exist: the number of
    /// samples written, all of them or none.
    pub async fn write_samples(
        &self,
        principal: &PlatformPrincipal,
        name: &str,
        samples: &[SampleRow],
        origin: &Origin,
    ) -> Result<u64> {
        check_name(name)?;
        self.authorize_write(principal, name)?;
        if let Some(sample) = samples.iter().find(|s| s.labels.is_empty()) {
            return Err(Error::BadRequest(format!(
                "a sample at {} has no labels and no metric name",
                sample.t
            )));
        }
        if samples.is_empty() {
            return Ok(0);
        }
        let account = &principal.account;
        let (runtime, mut def) = match self.dataset(account, name).await {
            Ok(found) => found,
            Err(Error::DatasetNotFound(_)) => {
                match self
                    .make_dataset(
                        principal,
                        name,
                        NewDataset {
                            kind: Kind::Metrics,
                            ..Default::default()
                        },
                        origin,
                        SAMPLES_WAIT,
                    )
                    .await
                {
                    Ok(()) | Err(Error::DatasetExists(_)) => {}
                    Err(error) => return Err(error),
                }
                self.dataset(account, name).await?
            }
            Err(error) => return Err(error),
        };
        let _reservation = self
            .reserve(
                account,
                Counts {
                    rows: samples.len() as u64,
                    vectors: 0,
                },
            )
            .await?;
        let deadline = tokio::time::Instant::now() + SAMPLES_WAIT;
        while tokio::time::Instant::now() < deadline {
            if !def.metrics {
                // A dataset never written yet (made by PUT /{name}, say) takes samples.
                let retyped = self
                    .retype_empty(&runtime, &def, Kind::Metrics, origin, SAMPLES_WAIT)
                    .await?;
                if !retyped {
                    return Err(not_metrics(name));
                }
                def = self.dataset(account, name).await?.1;
                continue;
            }
            // New labels are new columns, added before the samples are written.
            let columns = label_columns(&def, samples)?;
            if columns != def.columns {
                self.grow_dataset(&runtime, &def, &columns, origin, SAMPLES_WAIT)
                    .await?;
                def = self.dataset(account, name).await?.1;
                continue;
            }
            let batch = sample_batch(&def, samples)?;
            let table = self.table_runtime(&runtime, &def).await?;
            let Some(mut permit) = dataset_permit(&table, name).await? else {
                continue;
            };
            if let Some(current) = self.columns_changed(&runtime, &table, &def)? {
                def = current;
                continue;
            }
            let body = Body::RowsAppended(RowsAppended {
                table_id: def.id.clone(),
                first_row_id: permit.snapshot().next_row_id,
                row_count: batch.num_rows() as u64,
                arrow_ipc: table_rows::encode_ipc(&batch)?.into(),
                ..Default::default()
            });
            match permit.write(body, origin).await {
                Ok(after) => {
                    self.record_usage(account, &runtime.id, &def.id, Counts::of(&after));
                    return Ok(samples.len() as u64);
                }
                // Another leader took the partition meanwhile: nothing was written. Again.
                Err(Error::Unavailable(_)) => continue,
                Err(error) => return Err(error),
            }
        }
        Err(Error::Busy(format!(
            "the labels of dataset {name:?} kept changing under this request for {}s; retry it",
            SAMPLES_WAIT.as_secs()
        )))
    }
}

/// The samples of each series in turn: its labels and how many of its samples come together
/// (samples of one series run together and share its labels).
fn series_runs(samples: &[SampleRow]) -> Vec<(&Labels, usize)> {
    let mut runs: Vec<(&Labels, usize)> = Vec::new();
    for sample in samples {
        match runs.last_mut() {
            Some((labels, n)) if Arc::ptr_eq(labels, &sample.labels) => *n += 1,
            _ => runs.push((&sample.labels, 1)),
        }
    }
    runs
}

/// The columns of metrics dataset `def` with those the labels of `samples` need added after
/// them (text, nullable).
fn label_columns(def: &TableDef, samples: &[SampleRow]) -> Result<Vec<ColumnDef>> {
    let mut columns = def.columns.clone();
    let mut have: BTreeSet<String> = columns.iter().map(|c| c.name.clone()).collect();
    for (labels, _) in series_runs(samples) {
        for (label, _) in labels.iter() {
            let column = series::column_of_label(label);
            if have.contains(column.as_ref()) {
                continue;
            }
            have.insert(column.to_string());
            columns.push(ColumnDef {
                name: column.into_owned(),
                data_type: ColumnType::Utf8,
                nullable: true,
            });
        }
    }
    for column in &columns {
        if series::label_of_column(&column.name).is_some() && column.data_type != ColumnType::Utf8 {
            return Err(Error::Internal(format!(
                "label column {:?} of a metrics dataset is of type {}",
                column.name, column.data_type
            )));
        }
    }
    Ok(columns)
}

/// The rows of `samples` in the columns of `def` (which has a column for each of their labels).
fn sample_batch(def: &TableDef, samples: &[SampleRow]) -> Result<RecordBatch> {
    let schema = table_rows::data_schema(def);
    let runs = series_runs(samples);
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(def.columns.len());
    for column in &def.columns {
        let array: ArrayRef = match column.name.as_str() {
            TIMESTAMP_FIELD => Arc::new(
                TimestampMillisecondArray::from_iter_values(samples.iter().map(|s| s.t))
                    .with_timezone("UTC"),
            ),
            series::SERIES_COLUMN => Arc::new(UInt64Array::from_iter_values(
                samples.iter().map(|s| s.series),
            )),
            series::VALUE_COLUMN => {
                Arc::new(Float64Array::from_iter_values(samples.iter().map(|s| s.v)))
            }
            name => {
                let label = series::label_of_column(name).unwrap_or(name);
                // The label's value in each series, looked up once a series.
                let values: Vec<(Option<&str>, usize)> = runs
                    .iter()
                    .map(|(labels, n)| {
                        let value = labels
                            .binary_search_by(|(n, _)| n.as_str().cmp(label))
                            .ok()
                            .map(|i| labels[i].1.as_str());
                        (value, *n)
                    })
                    .collect();
                let bytes = values.iter().map(|(v, n)| v.map_or(0, str::len) * n).sum();
                let mut builder = StringBuilder::with_capacity(samples.len(), bytes);
                for (value, n) in values {
                    for _ in 0..n {
                        builder.append_option(value);
                    }
                }
                Arc::new(builder.finish())
            }
        };
        columns.push(array);
    }
    RecordBatch::try_new(schema, columns).map_err(|e| Error::Internal(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_of_a_series_are_the_samples_made_one_by_one() {
        let labels = || {
            vec![
                ("job".to_owned(), "api".to_owned()),
                ("__name__".to_owned(), "up".to_owned()),
                ("empty".to_owned(), String::new()),
            ]
        };
        let shared: Vec<SampleRow> = SampleRow::of_series(labels(), [(1, 1.0), (2, 0.5)]).collect();
        let one_by_one = vec![
            SampleRow::new(labels(), 1, 1.0),
            SampleRow::new(labels(), 2, 0.5),
        ];
        assert_eq!(shared, one_by_one);
        assert!(Arc::ptr_eq(&shared[0].labels, &shared[1].labels));
        assert_eq!(
            shared[0]
                .labels
                .iter()
                .map(|(n, _)| n.as_str())
                .collect::<Vec<_>>(),
            ["__name__", "job"]
        );
        assert_eq!(
            shared[0].series,
            series::series_id([("__name__", "up"), ("job", "api")])
        );
    }

    #[test]
    fn label_columns_and_rows_follow_each_series() {
        let def = TableDef {
            name: "m".into(),
            ..Default::default()
        };
        let mut samples: Vec<SampleRow> = SampleRow::of_series(
            vec![("__name__".into(), "up".into()), ("job".into(), "a".into())],
            [(1, 1.0), (2, 2.0)],
        )
        .collect();
        samples.extend(SampleRow::of_series(
            vec![
                ("__name__".into(), "up".into()),
                ("zone".into(), "z".into()),
            ],
            [(3, 3.0)],
        ));
        let columns = label_columns(&def, &samples).unwrap();
        let names: Vec<&str> = columns.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names.len(), 3, "{names:?}");
        let def = TableDef { columns, ..def };
        let batch = sample_batch(&def, &samples).unwrap();
        let column = |label: &str| {
            let name = series::column_of_label(label);
            let array = batch.column_by_name(&name).unwrap();
            let strings = array
                .as_any()
                .downcast_ref::<arrow::array::StringArray>()
                .unwrap();
            (0..3)
                .map(|i| {
                    arrow::array::Array::is_valid(strings, i).then(|| strings.value(i).to_owned())
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(column("job"), [Some("a".into()), Some("a".into()), None]);
        assert_eq!(column("zone"), [None, None, Some("z".into())]);
    }
}
