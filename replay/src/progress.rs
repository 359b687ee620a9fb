//! Progress bars for long runs: drawn on stderr when it is a terminal, silent otherwise (a pipe,
//! a file, a test), so that stdout carries only the command's output.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use strata_log::{CommitLog, PartitionId};

/// A bar counting the events of `partitions`, sized by their high-water marks.
pub async fn events(
    log: &dyn CommitLog,
    partitions: &[PartitionId],
) -> anyhow::Result<ProgressBar> {
    let mut total = 0;
    for partition in partitions {
        total += log.high_water_mark(partition).await?;
    }
    Ok(bar(total, "events"))
}

/// A bar of `total` steps, visible only on a terminal.
pub fn bar(total: u64, unit: &str) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
    let template = format!("{{bar:40}} {{pos}}/{{len}} {unit} ({{eta}} left)");
    if let Ok(style) = ProgressStyle::with_template(&template) {
        bar.set_style(style);
    }
    bar
}
