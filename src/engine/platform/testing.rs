//! For the platform's in-process tests: an engine on a temporary data directory with one
//! account, principals with chosen grants, and SQL answers as JSON rows.

#![allow(clippy::unwrap_used, clippy::panic)]

use std::sync::Arc;

use serde_json::Value;

use crate::{
    config::Config,
    engine::{Engine, Grant, Origin, PlatformPrincipal, SqlOutcome, TimeBounds},
    error::Result,
    metrics::Metrics,
};

/// The account the tests' engine has.
pub const ACCOUNT: &str = "acme";

/// An engine on a temporary data directory (gone with it), with account [`ACCOUNT`].
pub struct TestEngine {
    pub engine: Arc<Engine>,
    /// The account's root user.
    pub root: PlatformPrincipal,
    _dir: tempfile::TempDir,
}

impl TestEngine {
    pub async fn open() -> TestEngine {
        let dir = tempfile::tempdir().unwrap();
        let config = Config {
            data_dir: dir.path().to_owned(),
            ..Config::default()
        };
        let engine = Engine::open(Arc::new(config), Arc::new(Metrics::new()))
            .await
            .unwrap();
        engine
            .create_account(ACCOUNT, false, &Origin::system())
            .await
            .unwrap();
        TestEngine {
            engine,
            root: principal("root", Grant::everything()),
            _dir: dir,
        }
    }

    /// The rows `statement` answers `who`, as JSON objects.
    pub async fn sql(&self, who: &PlatformPrincipal, statement: &str) -> Result<Vec<Value>> {
        let outcome = self
            .engine
            .platform_sql(
                who,
                statement,
                TimeBounds::default(),
                None,
                &Origin::system(),
            )
            .await?;
        let SqlOutcome::Rows(result) = outcome else {
            panic!("{statement} wrote")
        };
        let mut rows = Vec::new();
        for batch in &result.batches {
            let mut writer = arrow::json::ArrayWriter::new(Vec::new());
            writer.write(batch).unwrap();
            writer.finish().unwrap();
            let text = writer.into_inner();
            if !text.is_empty() {
                let Value::Array(items) = serde_json::from_slice(&text).unwrap() else {
                    panic!("not rows: {}", String::from_utf8_lossy(&text))
                };
                rows.extend(items);
            }
        }
        Ok(rows)
    }
}

/// A user of [`ACCOUNT`] with `grant` (root when it grants everything).
pub fn principal(user: &str, grant: Grant) -> PlatformPrincipal {
    PlatformPrincipal {
        account: ACCOUNT.to_owned(),
        user: user.to_owned(),
        access_key: format!("AKST{user}"),
        root: grant.all,
        grant: Arc::new(grant),
    }
}
