//! Query DSL in place: a search of one dataset of a connection (GET|POST
//! /source/{id}/{dataset}/dsl, /{dataset}/_search with `connection_id`), translated for SQL
//! sources by [`super::dsl`], over the dataset as its reader sees it.

use std::collections::BTreeSet;

use serde_json::Value;

use super::dsl;
use crate::{
    engine::{Action, Engine, PlatformPrincipal},
    error::Result,
    query,
};

impl Engine {
    /// Runs the search `body` over dataset `dataset` of connection `id`; the search engine's
    /// answer.
    pub async fn connection_search(
        &self,
        principal: &PlatformPrincipal,
        id: &str,
        dataset: &str,
        body: &Value,
    ) -> Result<Value> {
        dsl::check(body)?;
        let connection = self.connection(principal, id).await?;
        let ctx = query::session(&self.queries);
        let answer = async {
            let source = self.source_of(&connection).await?;
            let table = self
                .source_table(
                    &ctx,
                    principal,
                    &connection,
                    source.as_ref(),
                    dataset,
                    Action::RecordRead,
                )
                .await?;
            // The fields denied to the reader are no columns of `table` already.
            dsl::search(&ctx, table, dataset, body, &BTreeSet::new()).await
        }
        .await;
        self.record_use(&connection, answer.as_ref().err()).await;
        answer
    }
}
