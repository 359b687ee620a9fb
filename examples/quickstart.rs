//! The README's walk-through as a program: create a database and a table on a running server,
//! and read the table's schema back.
//!
//! ```sh
//! cargo run --release --bin strata -- accounts create acme
//! KEY=$(cargo run --release -q --bin strata -- keys create --account acme)
//! cargo run --release --bin strata -- serve &
//! STRATA_KEY=$KEY cargo run --example quickstart
//! ```

use serde_json::{Value, json};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let base = std::env::var("STRATA_URL").unwrap_or_else(|_| "http://127.0.0.1:7070".into());
    let key = std::env::var("STRATA_KEY")
        .map_err(|_| anyhow::anyhow!("set STRATA_KEY to a key from `strata keys create`"))?;
    let http = reqwest::Client::new();
    let post = |path: &str, body: Value| {
        http.post(format!("{base}{path}"))
            .bearer_auth(&key)
            .json(&body)
            .send()
    };

    // 201 the first time; 409 database_exists when run again.
    let created = post("/v1/databases", json!({"name": "quickstart"})).await?;
    println!("create_database: {}", created.status());

    let table = json!({
        "name": "products",
        "schema": [
            {"name": "title", "type": "utf8", "nullable": false},
            {"name": "price", "type": "float64"},
            {"name": "embedding", "type": "vector<float32,8>"}
        ],
        "fts_columns": ["title"],
        "vector_column": "embedding",
        "vector_metric": "cosine"
    });
    let created = post("/v1/create_table/quickstart", table).await?;
    println!("create_table: {}", created.status());

    let schema: Value = post("/v1/schema/quickstart", json!({"name": "products"}))
        .await?
        .json()
        .await?;
    println!("{}", serde_json::to_string_pretty(&schema)?);
    Ok(())
}
