//! `strata-replay audit`: who changed what and when.
//!
//! Every change in the log carries the principal that caused it (`admin`, `system`,
//! `key:<id>`). The audit reads every partition (or one database's), drops what the leader-epoch
//! fence voids and the markers themselves (they change nothing), and prints one line per change in
//! time order: a table on a terminal, JSON lines with `--json`.

use std::io::Write;

use chrono::{DateTime, SecondsFormat, Utc};
use clap::Args;
use serde::Serialize;
use strata_log::{
    Envelope, PartitionId,
    envelope::Body,
    fence::{EpochFence, Verdict},
};

use crate::{Location, progress, read_log};

#[derive(Args)]
pub struct Audit {
    #[command(flatten)]
    location: Location,
    /// Only this database: "<account>/<database>", or "<database>" in any account
    #[arg(long)]
    database: Option<String>,
    /// Only changes at or after this time (RFC 3339)
    #[arg(long)]
    from: Option<DateTime<Utc>>,
    /// Only changes before this time (RFC 3339)
    #[arg(long)]
    to: Option<DateTime<Utc>>,
    /// JSON lines instead of a table
    #[arg(long)]
    json: bool,
}

/// One change, as the audit shows it.
#[derive(Debug, Serialize)]
struct Change {
    time: String,
    principal: String,
    action: &'static str,
    account: Option<String>,
    database: Option<String>,
    table: Option<String>,
    detail: String,
    partition: String,
    offset: u64,
    request_id: String,
    #[serde(skip)]
    micros: i64,
}

/// Which database an audit is about.
struct Scope {
    account: Option<String>,
    database: String,
}

impl Scope {
    fn parse(text: &str) -> Scope {
        match text.split_once('/') {
            Some((account, database)) => Scope {
                account: Some(account.to_owned()),
                database: database.to_owned(),
            },
            None => Scope {
                account: None,
                database: text.to_owned(),
            },
        }
    }

    fn covers(&self, account: Option<&str>, database: Option<&str>) -> bool {
        database == Some(self.database.as_str())
            && self.account.as_deref().is_none_or(|a| Some(a) == account)
    }
}

pub async fn run(audit: Audit) -> anyhow::Result<()> {
    let log = read_log(&audit.location).await?;
    let scope = audit.database.as_deref().map(Scope::parse);
    let partitions: Vec<PartitionId> = log
        .partitions()
        .await?
        .into_iter()
        .filter(|p| {
            let (account, database, _) = split(p.as_str());
            scope.as_ref().is_none_or(|s| {
                p.as_str() == "_control" || s.covers(account.as_deref(), database.as_deref())
            })
        })
        .collect();
    let from = audit.from.map(|t| t.timestamp_micros());
    let to = audit.to.map(|t| t.timestamp_micros());
    let progress = progress::events(log.as_ref(), &partitions).await?;
    let mut changes = Vec::new();
    for partition in &partitions {
        let mut fence = EpochFence::default();
        let mut next = 0;
        loop {
            let events = log.read(partition, next, 1024).await?;
            let Some(last) = events.last() else {
                break;
            };
            next = last.offset + 1;
            progress.inc(events.len() as u64);
            for event in events {
                // Heartbeats of cluster nodes change nothing either.
                if fence.judge(&event) != Verdict::Admit
                    || matches!(event.body, Some(Body::NodeHeartbeat(_)))
                    || from.is_some_and(|t| event.timestamp_micros < t)
                    || to.is_some_and(|t| event.timestamp_micros >= t)
                {
                    continue;
                }
                let change = describe(&event);
                if scope
                    .as_ref()
                    .is_none_or(|s| s.covers(change.account.as_deref(), change.database.as_deref()))
                {
                    changes.push(change);
                }
            }
        }
    }
    progress.finish_and_clear();
    changes.sort_by(|a, b| {
        (a.micros, &a.partition, a.offset).cmp(&(b.micros, &b.partition, b.offset))
    });
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    if audit.json {
        for change in &changes {
            writeln!(out, "{}", serde_json::to_string(change)?)?;
        }
    } else {
        print_table(&mut out, &changes)?;
    }
    out.flush()?;
    Ok(())
}

/// The account, database and table a partition name holds.
fn split(partition: &str) -> (Option<String>, Option<String>, Option<String>) {
    let mut parts = partition.splitn(3, '/');
    let account = parts.next().filter(|a| *a != "_control").map(str::to_owned);
    // `<account>/_monitors` and `<account>/_assistant` name no database: database names never
    // start with `_`.
    let database = parts
        .next()
        .filter(|d| !d.starts_with('_'))
        .map(str::to_owned);
    let table = parts
        .next()
        .filter(|t| !t.starts_with('_'))
        .map(str::to_owned);
    (account, database, table)
}

fn plural(n: u64, one: &str) -> String {
    match n {
        1 => format!("1 {one}"),
        n => format!("{n} {one}s"),
    }
}

fn ids(row_ids: &[u64]) -> String {
    const SHOWN: usize = 8;
    let mut text = row_ids
        .iter()
        .take(SHOWN)
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    if row_ids.len() > SHOWN {
        text.push_str(&format!(", ... ({} in all)", row_ids.len()));
    }
    text
}

/// A role's grants in one line: `record:read on logs-* (fields: deny secret_*; filter ...)`.
fn grants_text(role: &strata_log::event::RoleSet) -> String {
    let mut entries: Vec<String> = role
        .permissions
        .iter()
        .map(|p| {
            let mut text = format!(
                "{}:{} on {}",
                p.resource_type,
                p.actions.join("|"),
                p.resources.join(",")
            );
            let mut limits = Vec::new();
            if let Some(fields) = &p.fields {
                if fields.has_allow {
                    limits.push(format!("allow {}", fields.allow.join(",")));
                }
                if !fields.deny.is_empty() {
                    limits.push(format!("deny {}", fields.deny.join(",")));
                }
                for mask in &fields.mask {
                    limits.push(format!("{} {}", mask.mask, mask.field));
                }
            }
            if !p.filter_json.is_empty() {
                limits.push(format!("filter {}", p.filter_json));
            }
            if !limits.is_empty() {
                text.push_str(&format!(" ({})", limits.join("; ")));
            }
            text
        })
        .collect();
    entries.extend(role.notifications.iter().map(|n| {
        format!(
            "{}:{} on {}",
            n.kind,
            n.actions.join("|"),
            n.resources.join(",")
        )
    }));
    match entries.is_empty() {
        true => "no grants".to_owned(),
        false => entries.join("; "),
    }
}

fn describe(event: &Envelope) -> Change {
    let (mut account, mut database, mut table) = split(&event.partition);
    let detail = match &event.body {
        None | Some(Body::LeaderEpoch(_)) | Some(Body::NodeHeartbeat(_)) => String::new(),
        Some(Body::AccountCreated(b)) => {
            account = Some(b.name.clone());
            match b.enterprise {
                true => "enterprise account".to_owned(),
                false => "account".to_owned(),
            }
        }
        Some(Body::PaymentMethodSet(b)) => {
            account = Some(b.account.clone());
            "payment method on file".to_owned()
        }
        Some(Body::ApiKeyCreated(b)) => {
            account = Some(b.account.clone());
            format!("key {} for databases {:?}", b.key_id, b.databases_pattern)
        }
        Some(Body::UserCreated(b)) => {
            account = Some(b.account.clone());
            match b.root {
                true => format!("root user, access key {}", b.access_key),
                false => format!(
                    "user {}, access key {}, roles {:?}",
                    b.name, b.access_key, b.roles
                ),
            }
        }
        Some(Body::UserChanged(b)) => {
            account = Some(b.account.clone());
            format!("user {} now has roles {:?}", b.name, b.roles)
        }
        Some(Body::UserKeysRotated(b)) => {
            account = Some(b.account.clone());
            format!(
                "user {} rotated its keys: access key {} replaces {}",
                b.name, b.access_key, b.old_access_key
            )
        }
        Some(Body::UserDeleted(b)) => {
            account = Some(b.account.clone());
            format!("user {} deleted", b.name)
        }
        Some(Body::ConsoleSessionStarted(b)) => {
            account = Some(b.account.clone());
            let until = chrono::DateTime::from_timestamp_micros(b.expires_micros)
                .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
                .unwrap_or_default();
            format!(
                "user {} signed in to the console: session {} until {until}",
                b.user, b.session_id
            )
        }
        Some(Body::ConsoleSessionEnded(b)) => {
            account = Some(b.account.clone());
            format!("console session {} signed out", b.session_id)
        }
        Some(Body::RoleSet(b)) => {
            account = Some(b.account.clone());
            format!("role {} set: {}", b.name, grants_text(b))
        }
        Some(Body::RoleDeleted(b)) => {
            account = Some(b.account.clone());
            format!("role {} deleted", b.name)
        }
        Some(Body::AlertingChanged(b)) => {
            account = Some(b.account.clone());
            alerting_text(b)
        }
        Some(Body::MonitorRan(b)) => {
            account = event.partition.split_once('/').map(|(a, _)| a.to_owned());
            run_text(b)
        }
        Some(Body::AlertDelivered(b)) => {
            account = event.partition.split_once('/').map(|(a, _)| a.to_owned());
            match b.delivered {
                true => format!(
                    "monitor {} run {}: action {} of trigger {} delivered to channel {} ({})",
                    b.monitor_id,
                    b.run_id,
                    b.action_id,
                    b.trigger,
                    b.channel_id,
                    plural(u64::from(b.attempts), "attempt")
                ),
                false => format!(
                    "monitor {} run {}: action {} of trigger {} failed to reach channel {} ({}): {}",
                    b.monitor_id,
                    b.run_id,
                    b.action_id,
                    b.trigger,
                    b.channel_id,
                    plural(u64::from(b.attempts), "attempt"),
                    b.error
                ),
            }
        }
        Some(Body::ConnectionSet(b)) => {
            account = Some(b.account.clone());
            format!(
                "connection {} ({}, {}) set by {}",
                b.connection_id, b.name, b.connector_id, b.author
            )
        }
        Some(Body::ConnectionDeleted(b)) => {
            account = Some(b.account.clone());
            format!("connection {} deleted", b.connection_id)
        }
        Some(Body::ConnectionStatus(b)) => {
            account = Some(b.account.clone());
            match b.message.is_empty() {
                true => format!("connection {} {}", b.connection_id, b.status),
                false => format!("connection {} {}: {}", b.connection_id, b.status, b.message),
            }
        }
        Some(Body::ImportJobSet(b)) => {
            account = Some(b.account.clone());
            format!(
                "import {} from connection {} into {} ({}) started by {}",
                b.job_id, b.connection_id, b.dataset, b.mode, b.author
            )
        }
        Some(Body::ImportJobProgress(b)) => {
            account = Some(b.account.clone());
            let mut text = format!(
                "import {} {}: {} written",
                b.job_id,
                b.state,
                plural(b.records_written, "record")
            );
            if !b.error.is_empty() {
                text.push_str(&format!(" ({})", b.error));
            }
            text
        }
        Some(Body::ImportJobDeleted(b)) => {
            account = Some(b.account.clone());
            format!("import {} removed", b.job_id)
        }
        Some(Body::ThreadSet(b)) => {
            account = event.partition.split_once('/').map(|(a, _)| a.to_owned());
            format!(
                "thread {} ({:?} on {}) {} by {}",
                b.thread_id, b.name, b.index_name, b.status, b.owner
            )
        }
        Some(Body::ThreadDeleted(b)) => {
            account = event.partition.split_once('/').map(|(a, _)| a.to_owned());
            format!("thread {} deleted with its messages", b.thread_id)
        }
        Some(Body::MessageAdded(b)) => {
            account = event.partition.split_once('/').map(|(a, _)| a.to_owned());
            match b.reply_to.is_empty() {
                true => format!(
                    "thread {}: {} message {} by {}",
                    b.thread_id, b.role, b.message_id, b.author
                ),
                false => format!(
                    "thread {}: {} message {} answering {}",
                    b.thread_id, b.role, b.message_id, b.reply_to
                ),
            }
        }
        Some(Body::MessagesCleared(b)) => {
            account = event.partition.split_once('/').map(|(a, _)| a.to_owned());
            format!("thread {}: messages cleared", b.thread_id)
        }
        Some(Body::DatabaseCreated(b)) => {
            (account, database) = (Some(b.account.clone()), Some(b.name.clone()));
            match &b.storage {
                Some(storage) => format!("id {}, storage {}", b.database_id, storage.url),
                None => format!("id {}", b.database_id),
            }
        }
        Some(
            Body::DatabaseDeleted(strata_log::event::DatabaseDeleted {
                account: a,
                name,
                database_id,
            })
            | Body::DatabasePurged(strata_log::event::DatabasePurged {
                account: a,
                name,
                database_id,
            })
            | Body::StorageVerified(strata_log::event::StorageVerified {
                account: a,
                name,
                database_id,
            }),
        ) => {
            (account, database) = (Some(a.clone()), Some(name.clone()));
            format!("id {database_id}")
        }
        Some(Body::TableCreated(b)) => {
            table = Some(b.name.clone());
            format!("id {}, columns {}", b.table_id, columns_text(&b.columns))
        }
        Some(Body::TableDropped(b)) => {
            table = Some(b.name.clone());
            format!("id {}", b.table_id)
        }
        Some(Body::AliasesChanged(b)) => {
            let pairs = |list: &[strata_log::event::DatasetAlias]| {
                list.iter()
                    .map(|a| format!("{} -> {}", a.alias, a.dataset))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            match (b.added.is_empty(), b.removed.is_empty()) {
                (false, true) => format!("added {}", pairs(&b.added)),
                (true, false) => format!("removed {}", pairs(&b.removed)),
                _ => format!("removed {}; added {}", pairs(&b.removed), pairs(&b.added)),
            }
        }
        Some(Body::TableColumnsChanged(b)) => {
            table = Some(b.name.clone());
            format!(
                "id {}, columns now {}",
                b.table_id,
                columns_text(&b.columns)
            )
        }
        Some(Body::RowsAppended(b)) => {
            let mut text = plural(b.row_count, "row");
            if b.row_count > 0 {
                text.push_str(&format!(
                    ", ids {}..={}",
                    b.first_row_id,
                    b.first_row_id + b.row_count - 1
                ));
            }
            if !b.tombstoned_row_ids.is_empty() {
                text.push_str(&format!(
                    ", replacing or deleting {}",
                    plural(b.tombstoned_row_ids.len() as u64, "row")
                ));
            }
            text
        }
        Some(Body::RowsDeleted(b)) => format!(
            "{}: {}",
            plural(b.row_ids.len() as u64, "row"),
            ids(&b.row_ids)
        ),
        Some(Body::RowsUpdated(b)) => format!(
            "{}: {}",
            plural(b.row_ids.len() as u64, "row"),
            ids(&b.row_ids)
        ),
    };
    let time = DateTime::from_timestamp_micros(event.timestamp_micros)
        .map(|t| t.to_rfc3339_opts(SecondsFormat::Millis, true))
        .unwrap_or_default();
    Change {
        time,
        principal: event.principal.clone(),
        action: event.kind(),
        account,
        database,
        table,
        detail,
        partition: event.partition.clone(),
        offset: event.offset,
        request_id: event.request_id.clone(),
        micros: event.timestamp_micros,
    }
}

fn print_table(out: &mut impl Write, changes: &[Change]) -> std::io::Result<()> {
    let target = |c: &Change| {
        [&c.account, &c.database, &c.table]
            .into_iter()
            .flatten()
            .cloned()
            .collect::<Vec<_>>()
            .join("/")
    };
    let header = ["TIME", "PRINCIPAL", "ACTION", "TARGET", "DETAIL"];
    let rows: Vec<[String; 5]> = changes
        .iter()
        .map(|c| {
            [
                c.time.clone(),
                c.principal.clone(),
                c.action.to_owned(),
                target(c),
                c.detail.clone(),
            ]
        })
        .collect();
    let mut widths = header.map(str::len);
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |out: &mut dyn Write, cells: [&str; 5]| {
        let mut text = String::new();
        for (i, (cell, width)) in cells.iter().zip(widths).enumerate() {
            if i == 4 {
                text.push_str(cell);
            } else {
                text.push_str(&format!("{cell:<width$}  "));
            }
        }
        writeln!(out, "{}", text.trim_end())
    };
    line(out, header)?;
    for row in &rows {
        line(out, row.each_ref().map(String::as_str))?;
    }
    Ok(())
}

/// "name type, name type, ..." of a table's columns.
fn columns_text(columns: &[strata_log::event::Column]) -> String {
    columns
        .iter()
        .map(|c| format!("{} {}", c.name, c.r#type))
        .collect::<Vec<_>>()
        .join(", ")
}

/// What an AlertingChanged set and removed.
fn alerting_text(b: &strata_log::event::AlertingChanged) -> String {
    let mut parts = Vec::new();
    let ids = |list: Vec<&str>| list.join(", ");
    if !b.channels.is_empty() {
        let list = b.channels.iter().map(|c| c.channel_id.as_str()).collect();
        parts.push(format!("channels set: {}", ids(list)));
    }
    if !b.templates.is_empty() {
        let list = b.templates.iter().map(|t| t.template_id.as_str()).collect();
        parts.push(format!("templates set: {}", ids(list)));
    }
    if !b.monitors.is_empty() {
        let list: Vec<String> = b
            .monitors
            .iter()
            .map(|m| format!("{} v{} by {}", m.monitor_id, m.version, m.author))
            .collect();
        parts.push(format!("monitors set: {}", list.join(", ")));
    }
    if !b.deleted_channels.is_empty() {
        let list = b.deleted_channels.iter().map(String::as_str).collect();
        parts.push(format!("channels deleted: {}", ids(list)));
    }
    if !b.deleted_monitors.is_empty() {
        let list = b.deleted_monitors.iter().map(String::as_str).collect();
        parts.push(format!("monitors deleted: {}", ids(list)));
    }
    parts.join("; ")
}

/// A monitor run: which triggers fired, its error, and how many alerts it owes.
fn run_text(b: &strata_log::event::MonitorRan) -> String {
    let result: serde_json::Value = serde_json::from_str(&b.result_json).unwrap_or_default();
    let fired: Vec<&str> = result["trigger_results"]
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(_, t)| t["triggered"] == serde_json::Value::Bool(true))
        .map(|(name, _)| name.as_str())
        .collect();
    let mut text = format!(
        "monitor {} v{} run {}: {}",
        b.monitor_id,
        b.monitor_version,
        b.run_id,
        match b.planned_micros {
            0 => "executed on request".to_owned(),
            _ => "scheduled".to_owned(),
        }
    );
    match fired.is_empty() {
        true => text.push_str(", no trigger fired"),
        false => text.push_str(&format!(", fired {}", fired.join(", "))),
    }
    if let Some(error) = result["error"].as_str() {
        text.push_str(&format!(", error: {error}"));
    }
    if !b.alerts.is_empty() {
        text.push_str(&format!(", {}", plural(b.alerts.len() as u64, "alert")));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_name_their_account_database_and_table() {
        assert_eq!(split("_control"), (None, None, None));
        assert_eq!(split("acme/_monitors"), (Some("acme".into()), None, None));
        assert_eq!(
            split("acme/shop/_catalog"),
            (Some("acme".into()), Some("shop".into()), None)
        );
        assert_eq!(
            split("acme/shop/orders"),
            (
                Some("acme".into()),
                Some("shop".into()),
                Some("orders".into())
            )
        );
    }

    #[test]
    fn a_scope_without_an_account_matches_the_database_in_any_account() {
        let any = Scope::parse("shop");
        assert!(any.covers(Some("acme"), Some("shop")));
        assert!(!any.covers(Some("acme"), Some("logs")));
        let one = Scope::parse("acme/shop");
        assert!(one.covers(Some("acme"), Some("shop")));
        assert!(!one.covers(Some("other"), Some("shop")));
        assert!(!one.covers(Some("acme"), None));
    }

    #[test]
    fn long_id_lists_are_cut_short() {
        assert_eq!(ids(&[1, 2]), "1, 2");
        let many: Vec<u64> = (0..20).collect();
        assert!(ids(&many).ends_with("... (20 in all)"));
    }
}
