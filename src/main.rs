//! The `strata` command: `serve`, and the admin commands of docs/api.md.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use serde_json::Value;
use strata::{
    admin::{self, AdminRequest},
    config::{Config, ConfigLoader},
    import_cli::{self, ImportOptions},
};

/// jemalloc returns what a load freed, where glibc's malloc kept most of it (docs/benchmarks.md,
/// "Search under ingest": 120 MiB resident when idle after the load, against 763 MiB). Built
/// with `--features system-allocator`, the server uses the system's malloc, or one given by
/// LD_PRELOAD.
///
/// jemalloc's options are compiled in (.cargo/config.toml, `JEMALLOC_SYS_WITH_MALLOC_CONF`;
/// `_RJEM_MALLOC_CONF` in the environment overrides them). `oversize_threshold:0`: a large
/// allocation (8 MiB and up by default) comes from the arenas every other one does, whose freed
/// pages are returned after the usual decay (10 s), not from a dedicated arena that returns them
/// at once. A remote-write request of 400,000 samples allocates several such buffers (the
/// decoded samples, the log record's Arrow IPC, the record read back): returned at once, each
/// request faulted its pages in again, a quarter of the request threads' time
/// (docs/benchmarks.md, "Large allocations kept").
#[cfg(not(feature = "system-allocator"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[derive(Parser)]
#[command(
    name = "strata",
    version,
    about = "An event-sourced, log-structured data service"
)]
struct Cli {
    #[command(flatten)]
    common: Common,
    #[command(subcommand)]
    command: Command,
}

/// Flags every command takes; each is also a configuration key and a STRATA_* variable.
#[derive(Args, Clone)]
struct Common {
    /// The TOML configuration file [env: STRATA_CONFIG]
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Where data lives (key data_dir) [env: STRATA_DATA_DIR]
    #[arg(long, global = true, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// Set any configuration key, e.g. --set plans.free.max_databases=20 (repeatable)
    #[arg(long = "set", global = true, value_name = "KEY=VALUE")]
    set: Vec<String>,
}

#[derive(Subcommand)]
enum Command {
    /// Run the service: the data plane and the platform API
    Serve {
        /// The data-plane listener (key server.data_addr) [env: STRATA_SERVER_DATA_ADDR]
        #[arg(long, value_name = "HOST:PORT")]
        data_addr: Option<String>,
        /// The platform API listener (key server.platform_addr) [env: STRATA_SERVER_PLATFORM_ADDR]
        #[arg(long, value_name = "HOST:PORT")]
        platform_addr: Option<String>,
    },
    /// Manage accounts
    #[command(subcommand)]
    Accounts(AccountsCommand),
    /// Manage API keys
    #[command(subcommand)]
    Keys(KeysCommand),
    /// Manage platform users
    #[command(subcommand)]
    Users(UsersCommand),
    /// Import from a connection into a dataset through the platform API (a client: it reads no
    /// configuration); follows the job to its end unless --detach
    Import(Box<ImportOptions>),
}

#[derive(Subcommand)]
enum UsersCommand {
    /// Create the root user of an account (unrestricted); prints its SigV4 access key and secret
    /// key, shown only this once
    CreateRoot {
        #[arg(long)]
        account: String,
        /// Print {"access_key": ..., "secret_key": ...} as JSON
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
enum AccountsCommand {
    /// Create an account
    Create {
        name: String,
        /// The account may bind databases to its own buckets
        #[arg(long)]
        enterprise: bool,
        /// Print the result as JSON
        #[arg(long)]
        json: bool,
    },
    /// Record that an account has a payment method: it moves to the paid plan
    SetPaymentMethod {
        name: String,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
enum KeysCommand {
    /// Issue an API key; it is shown once and stored hashed
    Create {
        #[arg(long)]
        account: String,
        /// Glob over the database names the key may address (default "*")
        #[arg(long, value_name = "PATTERN")]
        databases: Option<String>,
        /// Print {"key": ...} as JSON
        #[arg(long)]
        json: bool,
    },
}

fn load_config(common: &Common, more: &[(&str, Option<String>)]) -> anyhow::Result<Config> {
    let mut overrides = Vec::new();
    for item in &common.set {
        let (key, value) = item
            .split_once('=')
            .with_context(|| format!("--set expects KEY=VALUE, got {item:?}"))?;
        overrides.push((key.trim().to_owned(), value.to_owned()));
    }
    if let Some(dir) = &common.data_dir {
        overrides.push(("data_dir".to_owned(), dir.display().to_string()));
    }
    for (key, value) in more {
        if let Some(value) = value {
            overrides.push(((*key).to_owned(), value.clone()));
        }
    }
    let file = common
        .config
        .clone()
        .or_else(|| std::env::var_os("STRATA_CONFIG").map(PathBuf::from));
    Ok(ConfigLoader { file, overrides }.load()?)
}

fn init_tracing(config: &Config, default_level: &str) {
    use tracing_subscriber::{EnvFilter, fmt};
    // hnsw_rs reports every graph dump and load at info; lapin every channel the broker closes
    // at error, which is how a passive declare finds an AMQP queue missing (strata reports the
    // failures that matter itself). That is noise in a server's log.
    let quiet = |filter: EnvFilter| {
        ["hnsw_rs=warn", "lapin::channel=off"]
            .iter()
            .filter_map(|directive| directive.parse().ok())
            .fold(filter, EnvFilter::add_directive)
    };
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(default_level).map(quiet))
        .unwrap_or_else(|_| EnvFilter::new("info"));
    use std::io::IsTerminal;
    let builder = fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    let _ = match config.logging.format.as_str() {
        "json" => builder.json().try_init(),
        _ => builder.try_init(),
    };
}

fn main() -> anyhow::Result<ExitCode> {
    let cli = Cli::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        // Queries run on these threads; strata::limits says what this stack is known to hold.
        .thread_stack_size(strata::limits::THREAD_STACK_BYTES)
        .enable_all()
        .build()?;
    match cli.command {
        // The one command with an exit status of its own: a failed import job is not an error
        // of the command, but the caller's script must still see it.
        Command::Import(options) => return runtime.block_on(import_cli::run(*options)),
        Command::Serve {
            data_addr,
            platform_addr,
        } => {
            let config = load_config(
                &cli.common,
                &[
                    ("server.data_addr", data_addr),
                    ("server.platform_addr", platform_addr),
                ],
            )?;
            init_tracing(&config, &config.logging.level);
            runtime.block_on(strata::server::serve(config))
        }
        Command::Accounts(AccountsCommand::Create {
            name,
            enterprise,
            json,
        }) => admin_command(
            &cli.common,
            &runtime,
            AdminRequest::CreateAccount { name, enterprise },
            json,
            |result| format!("created account {}", text(result, "name")),
        ),
        Command::Accounts(AccountsCommand::SetPaymentMethod { name, json }) => admin_command(
            &cli.common,
            &runtime,
            AdminRequest::SetPaymentMethod { name },
            json,
            |result| {
                format!(
                    "account {} has a payment method: the paid plan applies",
                    text(result, "name")
                )
            },
        ),
        Command::Keys(KeysCommand::Create {
            account,
            databases,
            json,
        }) => admin_command(
            &cli.common,
            &runtime,
            AdminRequest::CreateKey { account, databases },
            json,
            |result| {
                eprintln!(
                    "api key {} for account {} (databases {:?}); it is shown only this once",
                    text(result, "id"),
                    text(result, "account"),
                    text(result, "databases")
                );
                text(result, "key")
            },
        ),
        Command::Users(UsersCommand::CreateRoot { account, json }) => admin_command(
            &cli.common,
            &runtime,
            AdminRequest::CreateRootUser { account },
            json,
            |result| {
                eprintln!("root user created; the secret key is shown only this once");
                format!(
                    "access_key {}\nsecret_key {}",
                    text(result, "access_key"),
                    text(result, "secret_key")
                )
            },
        ),
    }?;
    Ok(ExitCode::SUCCESS)
}

fn text(value: &Value, field: &str) -> String {
    value
        .get(field)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

fn admin_command(
    common: &Common,
    runtime: &tokio::runtime::Runtime,
    request: AdminRequest,
    json: bool,
    human: impl FnOnce(&Value) -> String,
) -> anyhow::Result<()> {
    let config = load_config(common, &[])?;
    init_tracing(&config, "warn");
    let result = runtime.block_on(admin::run(config, request))?;
    if json {
        println!("{result}");
    } else {
        println!("{}", human(&result));
    }
    Ok(())
}
