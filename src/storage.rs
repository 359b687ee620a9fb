//! Bring-your-own-bucket storage bindings: the object store a binding names, and the probe that
//! verifies it end to end.
//!
//! URLs: `s3://bucket/prefix` (with `region`, an optional S3-compatible `endpoint`, and keys, or
//! the environment's AWS credentials), `gs://bucket/prefix` (credentials from the environment),
//! `az://container/prefix` (`access_key_id` is the storage account, `secret_access_key` its
//! key), and `file:///absolute/path`. The database's files live under the prefix.

use std::sync::Arc;

use std::time::Duration;

use object_store::{
    BackoffConfig, ClientOptions, ObjectStore, ObjectStoreExt, PutPayload, RetryConfig,
    aws::AmazonS3Builder, azure::MicrosoftAzureBuilder, gcp::GoogleCloudStorageBuilder,
    local::LocalFileSystem, path::Path,
};
use strata_projections::control::StorageBinding;

use crate::error::{Error, Result};

/// A binding's store and the prefix of the database's files in it.
#[derive(Clone, Debug)]
pub struct BoundStore {
    pub store: Arc<dyn ObjectStore>,
    pub prefix: Path,
    /// `store` itself when the binding is a `file://` directory of this machine.
    pub local: Option<Arc<LocalFileSystem>>,
}

/// Retries and timeouts of bucket clients: a failing bucket answers within seconds, not the
/// minutes of the defaults.
fn retry() -> RetryConfig {
    RetryConfig {
        backoff: BackoffConfig::default(),
        max_retries: 3,
        retry_timeout: Duration::from_secs(20),
    }
}

fn client_options() -> ClientOptions {
    ClientOptions::new()
        .with_connect_timeout(Duration::from_secs(5))
        .with_timeout(Duration::from_secs(60))
}

/// Checks a binding without touching anything (not even a `file://` directory).
pub fn check(binding: &StorageBinding) -> Result<()> {
    if let Some(rest) = binding.url.strip_prefix("file://") {
        if !rest.starts_with('/') || rest.trim_matches('/').is_empty() {
            return Err(Error::BadRequest(format!(
                "storage url {:?}: a file URL is file:///absolute/path",
                binding.url
            )));
        }
        return Ok(());
    }
    open(binding).map(|_| ())
}

/// Opens the store a binding names (no network: building a client does not connect; a
/// `file://` directory is created).
pub fn open(binding: &StorageBinding) -> Result<BoundStore> {
    let bad =
        |message: String| Error::BadRequest(format!("storage url {:?}: {message}", binding.url));
    let (scheme, rest) = binding
        .url
        .split_once("://")
        .ok_or_else(|| bad("expected scheme://bucket/prefix".to_owned()))?;
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    let prefix = Path::from(prefix.trim_matches('/'));
    let store: Arc<dyn ObjectStore> = match scheme {
        "s3" | "gs" | "az" if bucket.is_empty() => {
            return Err(bad("a bucket name is required".to_owned()));
        }
        "s3" => {
            let mut builder = AmazonS3Builder::from_env()
                .with_bucket_name(bucket)
                .with_region(binding.region.as_deref().unwrap_or("us-east-1"))
                .with_retry(retry())
                .with_client_options(client_options());
            if let Some(endpoint) = &binding.endpoint {
                builder = builder
                    .with_endpoint(endpoint)
                    .with_allow_http(endpoint.starts_with("http://"))
                    .with_virtual_hosted_style_request(false);
            }
            match (&binding.access_key_id, &binding.secret_access_key) {
                (Some(key), Some(secret)) => {
                    builder = builder
                        .with_access_key_id(key)
                        .with_secret_access_key(secret);
                }
                (None, None) => {}
                _ => {
                    return Err(bad(
                        "give both access_key_id and secret_access_key, or neither \
                         (to use the credentials of the environment)"
                            .to_owned(),
                    ));
                }
            }
            Arc::new(builder.build().map_err(|e| bad(e.to_string()))?)
        }
        "gs" => Arc::new(
            GoogleCloudStorageBuilder::from_env()
                .with_bucket_name(bucket)
                .with_retry(retry())
                .with_client_options(client_options())
                .build()
                .map_err(|e| bad(e.to_string()))?,
        ),
        "az" => {
            let mut builder = MicrosoftAzureBuilder::from_env()
                .with_container_name(bucket)
                .with_retry(retry())
                .with_client_options(client_options());
            if let Some(account) = &binding.access_key_id {
                builder = builder.with_account(account);
            }
            if let Some(key) = &binding.secret_access_key {
                builder = builder.with_access_key(key);
            }
            Arc::new(builder.build().map_err(|e| bad(e.to_string()))?)
        }
        "file" => {
            if !bucket.is_empty() {
                return Err(bad("a file URL is file:///absolute/path".to_owned()));
            }
            let root = format!("/{}", prefix.as_ref());
            std::fs::create_dir_all(&root)
                .map_err(|e| bad(format!("cannot create {root}: {e}")))?;
            let store =
                Arc::new(LocalFileSystem::new_with_prefix(&root).map_err(|e| bad(e.to_string()))?);
            return Ok(BoundStore {
                store: store.clone(),
                prefix: Path::default(),
                local: Some(store),
            });
        }
        other => {
            return Err(bad(format!(
                "unsupported scheme {other:?}; use s3, gs, az or file"
            )));
        }
    };
    Ok(BoundStore {
        store,
        prefix,
        local: None,
    })
}

/// Proves a binding end to end: puts, gets, lists and deletes a probe object. The error names
/// the stage that failed; the probe is removed even then.
pub async fn verify(binding: &StorageBinding) -> Result<()> {
    let bound = open(binding)?;
    let path = bound
        .prefix
        .clone()
        .join(format!(".strata-probe-{}", uuid::Uuid::now_v7()));
    let content = format!("strata storage probe {}", chrono::Utc::now().to_rfc3339());
    bound
        .store
        .put(&path, PutPayload::from(content.clone().into_bytes()))
        .await
        .map_err(|e| failed("put", e))?;
    if let Err(error) = read_back(&bound, &path, &content).await {
        let _ = bound.store.delete(&path).await;
        return Err(error);
    }
    bound
        .store
        .delete(&path)
        .await
        .map_err(|e| failed("delete", e))?;
    Ok(())
}

fn failed(stage: &str, error: impl std::fmt::Display) -> Error {
    Error::BadRequest(format!("storage verification failed at {stage}: {error}"))
}

/// Gets the probe back and finds it listed.
async fn read_back(bound: &BoundStore, path: &Path, content: &str) -> Result<()> {
    let read = bound
        .store
        .get(path)
        .await
        .map_err(|e| failed("get", e))?
        .bytes()
        .await
        .map_err(|e| failed("get", e))?;
    if read.as_ref() != content.as_bytes() {
        return Err(failed("get", "the probe came back different"));
    }
    use futures::TryStreamExt;
    let listed: Vec<_> = bound
        .store
        .list(Some(&bound.prefix))
        .try_collect()
        .await
        .map_err(|e| failed("list", e))?;
    if !listed.iter().any(|o| &o.location == path) {
        return Err(failed("list", "the probe is not listed"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binding(url: &str) -> StorageBinding {
        StorageBinding {
            url: url.to_owned(),
            region: None,
            endpoint: None,
            access_key_id: None,
            secret_access_key: None,
            sealed_secret: None,
            verified: false,
        }
    }

    #[test]
    fn urls_are_checked() {
        for (url, needle) in [
            ("bucket/prefix", "scheme"),
            ("ftp://host/x", "unsupported scheme"),
            ("s3:///prefix", "bucket"),
            ("file://host/path", "file:///"),
        ] {
            let error = open(&binding(url)).unwrap_err().to_string();
            assert!(error.contains(needle), "{url}: {error}");
        }
        let s3 = open(&binding("s3://bucket/some/prefix/")).unwrap();
        assert_eq!(s3.prefix.as_ref(), "some/prefix");
    }

    #[tokio::test]
    async fn a_file_binding_verifies_and_a_bad_one_names_its_stage() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("file://{}/bucket", dir.path().display());
        verify(&binding(&url)).await.unwrap();
        // Nothing is left behind.
        let left: Vec<_> = std::fs::read_dir(dir.path().join("bucket"))
            .unwrap()
            .collect();
        assert!(left.is_empty());
        // An S3 endpoint nobody listens on fails at the first stage.
        let mut unreachable = binding("s3://bucket/x");
        unreachable.endpoint = Some("http://127.0.0.1:9".to_owned());
        unreachable.access_key_id = Some("k".to_owned());
        unreachable.secret_access_key = Some("s".to_owned());
        let error = verify(&unreachable).await.unwrap_err().to_string();
        assert!(error.contains("failed at put"), "{error}");
    }
}
