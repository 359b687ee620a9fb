//! Consuming the log directly: every event of a server's FileLog, decoded from the
//! protobuf envelope of log/protos/strata/v1/events.proto, one line per event. A Kafka consumer
//! reads the same envelopes from the topics of a cluster (docs/change-streams.md).
//!
//! ```sh
//! cargo run --example read_log -- ./data                 # every partition
//! cargo run --example read_log -- ./data acme/shop/orders
//! ```

use strata_log::{CommitLog, FileLog, PartitionId, envelope::Body};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let data_dir = args.next().unwrap_or_else(|| "./data".into());
    // Opening takes the log's lock: this fails while a server runs on the directory.
    // A read-only view: it takes no lock, so the server may be running.
    let log = FileLog::open_read_only(format!("{data_dir}/log"))?;
    let partitions = match args.next() {
        Some(name) => vec![PartitionId::new(name)?],
        None => log.partitions().await?,
    };
    for partition in partitions {
        let mut next = 0;
        loop {
            let events = log.read(&partition, next, 1024).await?;
            let Some(last) = events.last() else {
                break;
            };
            next = last.offset + 1;
            for event in &events {
                let summary = match &event.body {
                    Some(Body::RowsAppended(b)) => format!(
                        "{} rows from id {} ({} bytes of Arrow IPC)",
                        b.row_count,
                        b.first_row_id,
                        b.arrow_ipc.len()
                    ),
                    Some(Body::RowsDeleted(b)) => format!("row ids {:?}", b.row_ids),
                    Some(Body::TableCreated(b)) => format!("table {} ({})", b.name, b.table_id),
                    _ => String::new(),
                };
                println!(
                    "{partition} @{} epoch {} by {}: {} {summary}",
                    event.offset,
                    event.epoch,
                    event.principal,
                    event.kind()
                );
            }
        }
    }
    Ok(())
}
