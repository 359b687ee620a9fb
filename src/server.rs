//! `strata serve`: both listeners, the admin socket, and an orderly shutdown.

use std::{net::SocketAddr, path::Path, sync::Arc};

use anyhow::{Context, bail};
use tokio::net::TcpListener;

use crate::{
    admin,
    config::Config,
    datadir::DataDir,
    engine::Engine,
    http::{self, AppState},
    metrics::Metrics,
    tls::{Certificates, TlsListener},
};

/// What `server.json` says: tests and tools find a running server's addresses there.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct ServerInfo {
    pub pid: u32,
    pub node_id: String,
    pub data_addr: SocketAddr,
    pub platform_addr: SocketAddr,
    /// Whether both listeners serve HTTPS.
    #[serde(default)]
    pub tls: bool,
}

pub async fn serve(config: Config) -> anyhow::Result<()> {
    crate::panics::install_hook();
    let Some(data_dir) = DataDir::try_acquire(&config.data_dir)? else {
        bail!(
            "data directory {} is in use by another strata process",
            config.data_dir.display()
        );
    };
    let config = Arc::new(config);
    let tls = match &config.server.tls {
        tls if tls.cert_file.is_empty() => None,
        tls => Some(Certificates::load(
            Path::new(&tls.cert_file),
            Path::new(&tls.key_file),
        )?),
    };
    let engine = Engine::open(config.clone(), Arc::new(Metrics::new())).await?;
    let data_listener = TcpListener::bind(&config.server.data_addr)
        .await
        .with_context(|| format!("cannot listen on {}", config.server.data_addr))?;
    let platform_listener = TcpListener::bind(&config.server.platform_addr)
        .await
        .with_context(|| format!("cannot listen on {}", config.server.platform_addr))?;
    let info = ServerInfo {
        pid: std::process::id(),
        node_id: config.cluster.node_id.clone(),
        data_addr: data_listener.local_addr()?,
        platform_addr: platform_listener.local_addr()?,
        tls: tls.is_some(),
    };
    let socket = DataDir::admin_socket(data_dir.path());
    let admin = admin::listen(engine.clone(), &socket)?;

    engine
        .join_cluster((info.data_addr, info.platform_addr))
        .await?;
    let state = AppState::new(engine.clone(), tls.as_deref())?;
    let scheduler = config
        .alerting
        .scheduler
        .then(|| crate::alerting::scheduler::spawn(state.alerting.clone()));
    // Questions asked before a crash and not answered get their answers now.
    let _answering = state.assistant.answer_unanswered().await?;
    let importer = config
        .imports
        .runner
        .then(|| crate::engine::imports::run::spawn(engine.clone()));
    let (stop, _) = tokio::sync::watch::channel(false);
    let stopped = |stop: &tokio::sync::watch::Sender<bool>| {
        let mut receiver = stop.subscribe();
        async move {
            let _ = receiver.wait_for(|stopped| *stopped).await;
        }
    };
    let data = tokio::spawn(listen(
        data_listener,
        tls.clone(),
        http::data_plane(state.clone()),
        stopped(&stop),
    ));
    let platform = tokio::spawn(listen(
        platform_listener,
        tls.clone(),
        http::platform(state),
        stopped(&stop),
    ));
    let reloading = tls.map(|certificates| tokio::spawn(reload_on_hangup(certificates)));

    let server_file = DataDir::server_file(data_dir.path());
    std::fs::write(&server_file, serde_json::to_vec_pretty(&info)?)
        .with_context(|| format!("cannot write {}", server_file.display()))?;
    tracing::info!(
        data = %info.data_addr,
        platform = %info.platform_addr,
        data_dir = %data_dir.path().display(),
        "strata is serving"
    );

    shutdown_signal().await;
    tracing::info!("shutting down");
    engine.leave_cluster().await;
    engine.stop_streams();
    stop.send_replace(true);
    let _ = std::fs::remove_file(&server_file);
    data.await??;
    platform.await??;
    admin.abort();
    if let Some(scheduler) = scheduler {
        scheduler.abort();
    }
    if let Some(importer) = importer {
        importer.abort();
    }
    if let Some(reloading) = reloading {
        reloading.abort();
    }
    let _ = std::fs::remove_file(&socket);
    engine.shutdown().await?;
    drop(data_dir);
    tracing::info!("stopped");
    Ok(())
}

/// Serves `router` on `listener`, over TLS when `tls` is given, until `stopped`.
async fn listen(
    listener: TcpListener,
    tls: Option<Arc<Certificates>>,
    router: axum::Router,
    stopped: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    match tls {
        None => {
            axum::serve(listener, router)
                .with_graceful_shutdown(stopped)
                .await
        }
        Some(certificates) => {
            axum::serve(TlsListener::new(listener, certificates)?, router)
                .with_graceful_shutdown(stopped)
                .await
        }
    }
}

/// Reads the certificate again at each SIGHUP; a certificate that does not load is logged and
/// the one served stays.
async fn reload_on_hangup(certificates: Arc<Certificates>) {
    use tokio::signal::unix::{SignalKind, signal};
    let Ok(mut hangups) = signal(SignalKind::hangup()) else {
        tracing::warn!("SIGHUP cannot be caught: the certificate is not reloaded on it");
        return;
    };
    while hangups.recv().await.is_some() {
        match certificates.reload() {
            Ok(()) => tracing::info!("SIGHUP: the TLS certificate was read again"),
            Err(error) => {
                tracing::error!(
                    error = format!("{error:#}"),
                    "SIGHUP: the TLS certificate was not reloaded; the old one is served"
                )
            }
        }
    }
}

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) {
        (Ok(mut term), Ok(mut int)) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
        }
        _ => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
