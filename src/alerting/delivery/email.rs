//! Email: one SMTP session per try (lettre, rustls with ring).

use std::error::Error as _;
use std::net::IpAddr;
use std::time::Duration;

use lettre::message::Mailbox;
use lettre::message::header::ContentType;
use lettre::transport::smtp::authentication::{Credentials, Mechanism};
use lettre::transport::smtp::client::{Certificate, Tls, TlsParameters};
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};

use super::{Alert, DeliveryError, SmtpAccount, SmtpSecurity, config, connect_error, root_cause};

pub(super) struct Email {
    transport: AsyncSmtpTransport<Tokio1Executor>,
    message: Message,
    authority: String,
    timeout: Duration,
    /// Kept only to scrub it from server replies quoted in errors.
    password: Option<String>,
}

impl Email {
    pub(super) fn new(
        account: &SmtpAccount,
        recipients: &[String],
        alert: &Alert,
        env: &(dyn Fn(&str) -> Option<String> + Sync),
    ) -> Result<Self, DeliveryError> {
        let authority = format!("{}:{}", account.host, account.port);
        if account.timeout_ms == 0 {
            return Err(DeliveryError::Config(
                "smtp timeout_ms must be positive".into(),
            ));
        }
        let timeout = Duration::from_millis(account.timeout_ms);
        let mut builder = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(&account.host)
            .port(account.port)
            .timeout(Some(timeout));
        builder = match account.security {
            SmtpSecurity::None => builder.tls(Tls::None),
            SmtpSecurity::Starttls => builder.tls(Tls::Required(tls_parameters(account)?)),
            SmtpSecurity::Tls => builder.tls(Tls::Wrapper(tls_parameters(account)?)),
        };
        let mut password = None;
        if let Some(username) = &account.username {
            if account.security == SmtpSecurity::None && !is_loopback(&account.host) {
                return Err(DeliveryError::Config(format!(
                    "smtp security \"none\" would send the password in plain text to \
                     {authority}: use \"starttls\" or \"tls\""
                )));
            }
            let Some(variable) = &account.password_env else {
                return Err(DeliveryError::Config(
                    "smtp username is set but password_env is not".into(),
                ));
            };
            let secret = env(variable).filter(|p| !p.is_empty()).ok_or_else(|| {
                DeliveryError::Config(format!("smtp password variable {variable} is not set"))
            })?;
            builder = builder
                .credentials(Credentials::new(username.clone(), secret.clone()))
                .authentication(vec![Mechanism::Plain, Mechanism::Login]);
            password = Some(secret);
        }
        let message = email_message(account, recipients, alert)?;
        Ok(Self {
            transport: builder.build(),
            message,
            authority,
            timeout,
            password,
        })
    }

    pub(super) async fn send(&self) -> Result<(), DeliveryError> {
        let sending = self.transport.send(self.message.clone());
        let error = match tokio::time::timeout(self.timeout, sending).await {
            Ok(Ok(_response)) => return Ok(()),
            Ok(Err(e)) => smtp_error(&e, &self.authority),
            Err(_elapsed) => {
                DeliveryError::Transient(format!("smtp to {} timed out", self.authority))
            }
        };
        Err(match (&self.password, error) {
            (Some(p), DeliveryError::Transient(m)) => DeliveryError::Transient(m.replace(p, "***")),
            (Some(p), DeliveryError::Rejected(m)) => DeliveryError::Rejected(m.replace(p, "***")),
            (_, error) => error,
        })
    }
}

fn email_message(
    account: &SmtpAccount,
    recipients: &[String],
    alert: &Alert,
) -> Result<Message, DeliveryError> {
    let address = |a: &str, what: &str| {
        a.parse::<Mailbox>().map_err(|e| {
            DeliveryError::Config(format!("smtp {what} address {a:?} is invalid: {e}"))
        })
    };
    if recipients.is_empty() {
        return Err(DeliveryError::Config("email has no recipients".into()));
    }
    let mut builder = Message::builder()
        .from(address(&account.from, "from")?)
        .subject(alert.subject.clone())
        .header(ContentType::TEXT_PLAIN);
    for recipient in recipients {
        builder = builder.to(address(recipient, "recipient")?);
    }
    builder
        .body(alert.message.clone())
        .map_err(|e| config("email message", &e))
}

fn tls_parameters(account: &SmtpAccount) -> Result<TlsParameters, DeliveryError> {
    let mut builder = TlsParameters::builder(account.host.clone());
    if let Some(path) = &account.ca_file {
        let shown = path.display();
        let pem = std::fs::read(path)
            .map_err(|e| DeliveryError::Config(format!("smtp ca_file {shown}: {e}")))?;
        if !pem.windows(27).any(|w| w == b"-----BEGIN CERTIFICATE-----") {
            return Err(DeliveryError::Config(format!(
                "smtp ca_file {shown} holds no PEM certificate"
            )));
        }
        let roots = Certificate::from_pem(&pem)
            .map_err(|e| config(&format!("smtp ca_file {shown}"), &e))?;
        builder = builder.add_root_certificate(roots);
    }
    builder.build_rustls().map_err(|e| config("smtp tls", &e))
}

fn smtp_error(e: &lettre::transport::smtp::Error, authority: &str) -> DeliveryError {
    if let Some(code) = e.status() {
        let reply = e.source().map(ToString::to_string).unwrap_or_default();
        let message = format!("smtp {code} {reply}").trim_end().to_string();
        return if e.is_transient() {
            DeliveryError::Transient(message)
        } else {
            DeliveryError::Rejected(message)
        };
    }
    if e.is_timeout() {
        DeliveryError::Transient(format!("smtp to {authority} timed out"))
    } else if e.is_client() {
        // e.g. no authentication mechanism in common with the server
        DeliveryError::Rejected(format!("smtp with {authority}: {}", root_cause(e)))
    } else if e.is_tls() {
        DeliveryError::Transient(format!(
            "smtp tls with {authority} failed: {}",
            root_cause(e)
        ))
    } else {
        DeliveryError::Transient(connect_error(e, "smtp", authority))
    }
}

fn is_loopback(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost")
        || host
            .trim_matches(['[', ']'])
            .parse::<IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}
