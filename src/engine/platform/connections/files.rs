//! Sources of files in object stores (S3 and S3-compatible services, Google Cloud Storage, Azure
//! Blob Storage, local directories): Parquet, CSV (with a header line) and NDJSON files read
//! in place through DataFusion listing tables, which read only the columns a query names and,
//! for Parquet, skip row groups its filters rule out.
//!
//! A dataset is a path relative to the connection's URL: a file (`sales/2026-01.parquet`), a
//! glob (`sales/*.parquet`) or a directory (`sales/`), all of whose files are one table. The
//! format is the config's `format`, else the name's extension, else that of the directory's
//! first file.

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::{
    catalog::TableProvider,
    common::TableReference,
    datasource::{
        file_format::{FileFormat, csv::CsvFormat, json::JsonFormat, parquet::ParquetFormat},
        listing::{ListingOptions, ListingTable, ListingTableConfig, ListingTableUrl},
    },
    execution::{SessionState, object_store::ObjectStoreUrl, runtime_env::RuntimeEnv},
};
use futures::{StreamExt, TryStreamExt};
use object_store::{ObjectStore, path::Path, prefix::PrefixStore};
use serde_json::{Map, Value};
use strata_projections::control::StorageBinding;

use super::config::text;
use super::source::{Source, failure, failure_text};
use crate::error::{Error, Result};

/// The formats a connection's `format` may name.
pub const FORMATS: &[&str] = &["parquet", "csv", "json", "ndjson"];

/// Files a listing of datasets shows at most.
const LISTED: usize = 10_000;

/// An opened object store.
pub struct Files {
    store: Arc<dyn ObjectStore>,
    /// `strata-source://<connection key>/`: where the store is registered with DataFusion.
    base: String,
    format: Option<String>,
}

/// The format a file's name says (`None` for another extension).
fn format_of(name: &str) -> Option<&'static str> {
    let extension = name.rsplit_once('.')?.1.to_ascii_lowercase();
    match extension.as_str() {
        "parquet" => Some("parquet"),
        "csv" => Some("csv"),
        "json" => Some("json"),
        "ndjson" | "jsonl" => Some("ndjson"),
        _ => None,
    }
}

/// How DataFusion reads files of `format`.
fn file_format(format: &str) -> Arc<dyn FileFormat> {
    match format {
        "parquet" => Arc::new(ParquetFormat::default()),
        "csv" => Arc::new(CsvFormat::default().with_has_header(true)),
        _ => Arc::new(JsonFormat::default()),
    }
}

impl Files {
    /// Opens the store of `config` and lists it once (which proves the credentials).
    pub async fn open(
        config: &Map<String, Value>,
        key: &str,
        runtime: &RuntimeEnv,
    ) -> Result<Files> {
        let url = text(config, "url").unwrap_or_default();
        if let Some(path) = url.strip_prefix("file://")
            && !std::path::Path::new(path).is_dir()
        {
            return Err(Error::SourceFailed(format!(
                "open {url}: no such directory"
            )));
        }
        let binding = StorageBinding {
            url: url.to_owned(),
            region: text(config, "region").map(str::to_owned),
            endpoint: text(config, "endpoint").map(str::to_owned),
            access_key_id: text(config, "access_key_id").map(str::to_owned),
            secret_access_key: text(config, "secret_access_key").map(str::to_owned),
            sealed_secret: None,
            verified: false,
        };
        let bound = crate::storage::open(&binding)?;
        let store: Arc<dyn ObjectStore> = match bound.prefix.as_ref().is_empty() {
            true => bound.store,
            false => Arc::new(PrefixStore::new(bound.store, bound.prefix)),
        };
        let host: String = key
            .chars()
            .map(|c| match c.is_ascii_alphanumeric() {
                true => c.to_ascii_lowercase(),
                false => '-',
            })
            .collect();
        let base = format!("strata-source://{host}/");
        let registered =
            ObjectStoreUrl::parse(&base).map_err(|e| Error::Internal(e.to_string()))?;
        runtime.register_object_store(registered.as_ref(), store.clone());
        let files = Files {
            store,
            base,
            format: text(config, "format").map(str::to_owned),
        };
        files
            .store
            .list(None)
            .try_next()
            .await
            .map_err(|e| failure(&format!("list {url}"), &e))?;
        Ok(files)
    }

    /// Where dataset `name` is: a directory, or a directory and a glob (a file's name is the
    /// glob of itself). DataFusion reads globs only from local paths, so the URL's is split
    /// here.
    fn url(&self, name: &str) -> Result<ListingTableUrl> {
        let bad = |e: &dyn std::fmt::Display| Error::BadRequest(format!("dataset [{name}]: {e}"));
        let name = name.trim_start_matches('/');
        if name.is_empty() || name.ends_with('/') {
            return ListingTableUrl::parse(format!("{}{name}", self.base)).map_err(|e| bad(&e));
        }
        // A file is the glob of its own name (escaped), in its directory.
        let (split, pattern) = match name.find(['*', '?', '[']) {
            Some(first) => {
                let split = name[..first].rfind('/').map_or(0, |at| at + 1);
                (split, glob::Pattern::new(&name[split..]))
            }
            None => {
                let split = name.rfind('/').map_or(0, |at| at + 1);
                (
                    split,
                    glob::Pattern::new(&glob::Pattern::escape(&name[split..])),
                )
            }
        };
        let directory = &name[..split];
        let pattern = pattern.map_err(|e| bad(&e))?;
        let directory =
            ListingTableUrl::parse(format!("{}{directory}", self.base)).map_err(|e| bad(&e))?;
        ListingTableUrl::try_new(directory.get_url().clone(), Some(pattern)).map_err(|e| bad(&e))
    }

    /// [`Files::url`], named for DataFusion's cache of listings (which is keyed by the table and
    /// the path in the store: without the table, two connections' paths would be one).
    fn scoped_url(&self, name: &str) -> Result<ListingTableUrl> {
        Ok(self
            .url(name)?
            .with_table_ref(TableReference::partial(self.base.clone(), name.to_owned())))
    }

    /// The format of dataset `name`.
    async fn format_for(&self, name: &str) -> Result<String> {
        if let Some(format) = &self.format {
            return Ok(format.clone());
        }
        if let Some(format) = format_of(name.trim_end_matches(['*', '/'])) {
            return Ok(format.to_owned());
        }
        let prefix = Path::from(name.trim_end_matches('/'));
        let first = self
            .store
            .list(Some(&prefix))
            .try_filter(|meta| futures::future::ready(format_of(meta.location.as_ref()).is_some()))
            .try_next()
            .await
            .map_err(|e| failure(&format!("list {name}"), &e))?;
        match first {
            Some(meta) => Ok(format_of(meta.location.as_ref())
                .unwrap_or("parquet")
                .to_owned()),
            None => Err(Error::DatasetNotFound(name.to_owned())),
        }
    }
}

#[async_trait]
impl Source for Files {
    async fn datasets(&self) -> Result<Vec<String>> {
        let mut names: Vec<String> = self
            .store
            .list(None)
            .try_filter(|meta| futures::future::ready(format_of(meta.location.as_ref()).is_some()))
            .map_ok(|meta| meta.location.to_string())
            .into_stream()
            .take(LISTED)
            .try_collect()
            .await
            .map_err(|e| failure("list files", &e))?;
        names.sort();
        Ok(names)
    }

    async fn table(&self, state: &SessionState, name: &str) -> Result<Arc<dyn TableProvider>> {
        let format = self.format_for(name).await?;
        let url = self.scoped_url(name)?;
        let extension = match format_of(name.trim_end_matches(['*', '/'])) {
            Some(_) => format!(
                ".{}",
                name.trim_end_matches(['*', '/'])
                    .rsplit_once('.')
                    .map(|(_, e)| e)
                    .unwrap_or(&format)
            ),
            None => match format.as_str() {
                "ndjson" => String::new(),
                other => format!(".{other}"),
            },
        };
        let stage = format!("read {name}");
        let first = url
            .list_all_files(state, self.store.as_ref(), &extension)
            .await
            .map_err(|e| failure(&stage, &e))?
            .try_next()
            .await
            .map_err(|e| failure(&stage, &e))?;
        if first.is_none() {
            return Err(Error::DatasetNotFound(name.to_owned()));
        }
        let options = ListingOptions::new(file_format(&format)).with_file_extension(extension);
        let schema = options
            .infer_schema(state, &url)
            .await
            .map_err(|e| failure(&stage, &e))?;
        if schema.fields().is_empty() {
            return Err(Error::DatasetNotFound(name.to_owned()));
        }
        let config = ListingTableConfig::new(url)
            .with_listing_options(options)
            .with_schema(schema);
        let table =
            ListingTable::try_new(config).map_err(|e| failure_text(&stage, &e.to_string()))?;
        Ok(Arc::new(table))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_come_from_extensions() {
        assert_eq!(format_of("a/b.parquet"), Some("parquet"));
        assert_eq!(format_of("x.JSONL"), Some("ndjson"));
        assert_eq!(format_of("x.csv"), Some("csv"));
        assert_eq!(format_of("x.txt"), None);
        assert_eq!(format_of("dir"), None);
    }
}
