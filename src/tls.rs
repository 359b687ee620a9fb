//! TLS on both listeners: rustls with the ring provider (the process's one crypto provider),
//! the certificate and key read from PEM files (`[server.tls] cert_file, key_file`) and read
//! again on SIGHUP, so that a renewed certificate is served without a restart.
//!
//! A [`TlsListener`] accepts TCP connections and runs each handshake in a task of its own,
//! within [`HANDSHAKE_TIMEOUT`]: a client that opens a connection and sends nothing holds up no
//! one else. axum serves the finished TLS streams as it serves TCP ones.

use std::{
    io,
    net::SocketAddr,
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use anyhow::Context;
use parking_lot::RwLock;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject};
use tokio::{
    net::{TcpListener, TcpStream},
    sync::mpsc,
};
use tokio_rustls::{TlsAcceptor, rustls, server::TlsStream};

/// The longest a client may take to finish its TLS handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Finished handshakes waiting for axum to take them.
const READY: usize = 64;

/// The certificate the listeners serve, and where it is read from.
pub struct Certificates {
    cert_file: PathBuf,
    key_file: PathBuf,
    acceptor: RwLock<TlsAcceptor>,
}

impl Certificates {
    /// Reads the certificate chain and its key; an error names the file and what is wrong.
    pub fn load(cert_file: &Path, key_file: &Path) -> anyhow::Result<Arc<Certificates>> {
        let acceptor = acceptor(cert_file, key_file)?;
        Ok(Arc::new(Certificates {
            cert_file: cert_file.to_owned(),
            key_file: key_file.to_owned(),
            acceptor: RwLock::new(acceptor),
        }))
    }

    /// Reads the files again: new connections get the new certificate, open ones keep theirs.
    /// On an error the certificate served stays as it was.
    pub fn reload(&self) -> anyhow::Result<()> {
        let acceptor = acceptor(&self.cert_file, &self.key_file)?;
        *self.acceptor.write() = acceptor;
        Ok(())
    }

    /// The certificate chain served, for clients that must trust it (a cluster's forwarding).
    pub fn chain(&self) -> anyhow::Result<Vec<CertificateDer<'static>>> {
        read_chain(&self.cert_file)
    }

    fn acceptor(&self) -> TlsAcceptor {
        self.acceptor.read().clone()
    }
}

fn read_chain(cert_file: &Path) -> anyhow::Result<Vec<CertificateDer<'static>>> {
    let chain = CertificateDer::pem_file_iter(cert_file)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .with_context(|| format!("cannot read certificates from {}", cert_file.display()))?;
    anyhow::ensure!(
        !chain.is_empty(),
        "{} holds no PEM certificate",
        cert_file.display()
    );
    Ok(chain)
}

fn acceptor(cert_file: &Path, key_file: &Path) -> anyhow::Result<TlsAcceptor> {
    let chain = read_chain(cert_file)?;
    let key = PrivateKeyDer::from_pem_file(key_file)
        .with_context(|| format!("cannot read a PEM private key from {}", key_file.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("TLS protocol versions")?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .with_context(|| {
            format!(
                "the key in {} does not fit the certificate in {}",
                key_file.display(),
                cert_file.display()
            )
        })?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// Connections on `tcp`, each after its TLS handshake with the certificate `certificates`
/// serves at the time.
pub struct TlsListener {
    ready: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
    accepting: tokio::task::JoinHandle<()>,
}

impl Drop for TlsListener {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

impl TlsListener {
    pub fn new(tcp: TcpListener, certificates: Arc<Certificates>) -> io::Result<TlsListener> {
        let local = tcp.local_addr()?;
        let (sender, ready) = mpsc::channel(READY);
        let accepting = tokio::spawn(async move {
            loop {
                let (stream, peer) = match tcp.accept().await {
                    Ok(accepted) => accepted,
                    Err(error) => {
                        // Out of file descriptors, say: wait a moment, as axum does for TCP.
                        tracing::warn!(%error, "accepting a connection failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let _ = stream.set_nodelay(true);
                let acceptor = certificates.acceptor();
                let sender = sender.clone();
                tokio::spawn(async move {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                        Ok(Ok(tls)) => {
                            let _ = sender.send((tls, peer)).await;
                        }
                        Ok(Err(error)) => {
                            tracing::debug!(%peer, %error, "TLS handshake failed");
                        }
                        Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                    }
                });
            }
        });
        Ok(TlsListener {
            ready,
            local,
            accepting,
        })
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(accepted) => accepted,
            // The accepting task only ends when the listener is dropped.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.local)
    }
}
