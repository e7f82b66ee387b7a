//! `unstuck-backend`: an HTTPS server that plays the backend of an
//! admission webhook (AdmissionReview v1) or of an aggregated API
//! (discovery of `/apis/GROUP/VERSION`), and can be told to misbehave the
//! ways real backends do in incidents: hang past the caller's timeout,
//! answer 500, answer a malformed AdmissionReview. TLS faults need no code
//! here: the harness hands it a certificate its registration's caBundle
//! does not trust, or one that has expired.
//!
//! Configured by environment only (a `FROM scratch` image has no shell to
//! template arguments):
//! - `UNSTUCK_BACKEND_ROLE`: `webhook` | `apiService`
//! - `UNSTUCK_BACKEND_FAULT`: `none` | `hang` | `error500` | `malformedReview`
//! - `UNSTUCK_BACKEND_CERT`, `UNSTUCK_BACKEND_KEY`: PEM of the serving
//!   certificate (chain) and its key
//! - `UNSTUCK_BACKEND_GROUP`, `UNSTUCK_BACKEND_VERSION`: what an
//!   `apiService` serves
//! - `UNSTUCK_BACKEND_PORT`: default 8443

mod answer;
mod http;

use std::{net::SocketAddr, sync::Arc};

use tokio::net::TcpListener;
use tokio_rustls::{
    TlsAcceptor,
    rustls::{
        ServerConfig,
        crypto::ring,
        pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject as _},
    },
};

use answer::{Behaviour, Fault, Role};

/// Why the backend cannot start: a setting the harness got wrong.
#[derive(Debug, thiserror::Error)]
enum ConfigError {
    #[error("{0} is not set")]
    Unset(&'static str),
    #[error("{name} {}: one of {allowed}", quoted(.value))]
    Unknown {
        name: &'static str,
        value: String,
        allowed: &'static str,
    },
    #[error("{name}: {why}")]
    Invalid { name: &'static str, why: String },
    #[error("the TLS configuration: {0}")]
    Tls(#[source] tokio_rustls::rustls::Error),
    #[error("the certificate and key do not go together: {0}")]
    KeyMismatch(#[source] tokio_rustls::rustls::Error),
}

/// `"text"`, escaped byte for byte as `unstuck_core::text::quoted` writes
/// it (its log is read into the harness's messages). A copy rather than
/// the core's: the static image is built from this crate alone, without
/// the core's Kubernetes dependencies.
fn quoted(text: &str) -> String {
    let mut out = String::from('"');
    for c in text.chars() {
        if c == '\'' {
            out.push(c);
        } else {
            out.extend(c.escape_debug());
        }
    }
    out.push('"');
    out
}

fn env(name: &'static str) -> Result<String, ConfigError> {
    std::env::var(name).map_err(|_| ConfigError::Unset(name))
}

fn config() -> Result<(Behaviour, ServerConfig, u16), ConfigError> {
    let role = match env("UNSTUCK_BACKEND_ROLE")?.as_str() {
        "webhook" => Role::Webhook,
        "apiService" => Role::ApiService {
            group: env("UNSTUCK_BACKEND_GROUP")?,
            version: env("UNSTUCK_BACKEND_VERSION")?,
        },
        other => {
            return Err(ConfigError::Unknown {
                name: "UNSTUCK_BACKEND_ROLE",
                value: other.into(),
                allowed: "webhook | apiService",
            });
        }
    };
    let fault = match std::env::var("UNSTUCK_BACKEND_FAULT").as_deref() {
        Err(_) | Ok("none") => Fault::None,
        Ok("hang") => Fault::Hang,
        Ok("error500") => Fault::Error500,
        Ok("malformedReview") => Fault::MalformedReview,
        Ok(other) => {
            return Err(ConfigError::Unknown {
                name: "UNSTUCK_BACKEND_FAULT",
                value: other.into(),
                allowed: "none | hang | error500 | malformedReview",
            });
        }
    };
    let cert_pem = env("UNSTUCK_BACKEND_CERT")?;
    let key_pem = env("UNSTUCK_BACKEND_KEY")?;
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
        .collect::<Result<_, _>>()
        .map_err(|e| ConfigError::Invalid {
            name: "UNSTUCK_BACKEND_CERT",
            why: e.to_string(),
        })?;
    let key =
        PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).map_err(|e| ConfigError::Invalid {
            name: "UNSTUCK_BACKEND_KEY",
            why: e.to_string(),
        })?;
    let tls = ServerConfig::builder_with_provider(Arc::new(ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(ConfigError::Tls)?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(ConfigError::KeyMismatch)?;
    let port = match std::env::var("UNSTUCK_BACKEND_PORT") {
        Ok(p) => p.parse().map_err(|e| ConfigError::Invalid {
            name: "UNSTUCK_BACKEND_PORT",
            why: format!("{}: {e}", quoted(&p)),
        })?,
        Err(_) => 8443,
    };
    Ok((Behaviour { role, fault }, tls, port))
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let (behaviour, tls, port) = match config() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("unstuck-backend: {e}");
            std::process::exit(2);
        }
    };
    let acceptor = TlsAcceptor::from(Arc::new(tls));
    let addr = SocketAddr::from(([0, 0, 0, 0], port));
    let listener = match TcpListener::bind(addr).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("unstuck-backend: binding {addr}: {e}");
            std::process::exit(1);
        }
    };
    let behaviour = Arc::new(behaviour);
    // The harness waits for this line before it registers the backend.
    println!("unstuck-backend listening on {addr} as {behaviour}");
    loop {
        let Ok((tcp, peer)) = listener.accept().await else {
            continue;
        };
        let acceptor = acceptor.clone();
        let behaviour = behaviour.clone();
        tokio::spawn(async move {
            match acceptor.accept(tcp).await {
                // The caller's side of a TLS fault shows in its own error;
                // ours is logged for the scenario's evidence.
                Err(e) => eprintln!("{peer}: TLS handshake failed: {e}"),
                Ok(stream) => {
                    if let Err(e) = http::serve(stream, |r| behaviour.answer(r)).await {
                        eprintln!("{peer}: {e}");
                    }
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::quoted;

    #[test]
    fn quoted_text_is_what_debug_of_a_str_printed() {
        for s in ["", "8443x", "it's", "a \"b\"", "nl\n\t", "\u{301}x\u{301}"] {
            assert_eq!(quoted(s), format!("{s:?}"));
        }
    }
}
