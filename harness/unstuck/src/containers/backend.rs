//! The backend container: the project's own `unstuck-backend` image
//! (built offline by `ci/images/backend.sh`) playing a webhook or an
//! aggregated API, with a fault.

use std::net::IpAddr;

use super::{
    ContainerError,
    managed::{Launch, Managed, launch},
    tls::{BackendTls, TlsFault, backend_tls},
};

/// The image `ci/images/backend.sh` builds.
pub const IMAGE: &str = "unstuck.local/backend:dev";
const BUILD: &str = "ci/images/backend.sh";
/// The port it listens on inside its container.
pub const PORT: u16 = 8443;
/// What it prints once it listens.
const READY_LINE: &str = "unstuck-backend listening";

/// What the backend plays.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BackendRole {
    Webhook,
    ApiService { group: String, version: String },
}

/// How it misbehaves: the scenario's own type, as the `container:` step
/// wrote it.
pub use unstuck_core::scenario::BackendFault;

/// The fault as the server is told it (TLS faults are in the certificate,
/// not the server).
fn server_fault(fault: BackendFault) -> &'static str {
    match fault {
        BackendFault::Hang => "hang",
        BackendFault::Error500 => "error500",
        BackendFault::MalformedReview => "malformedReview",
        BackendFault::None | BackendFault::UnknownAuthority | BackendFault::ExpiredCertificate => {
            "none"
        }
    }
}

fn tls_fault(fault: BackendFault) -> TlsFault {
    match fault {
        BackendFault::UnknownAuthority => TlsFault::UnknownAuthority,
        BackendFault::ExpiredCertificate => TlsFault::Expired,
        _ => TlsFault::None,
    }
}

/// What to start.
#[derive(Clone, Debug)]
pub struct BackendSpec {
    /// The run that owns it (labels, container name).
    pub run: String,
    /// A name of the scenario's own, unique in the run.
    pub name: String,
    pub role: BackendRole,
    pub fault: BackendFault,
    /// The names the apiserver will reach it by (`SVC.NS.svc`).
    pub dns_names: Vec<String>,
    /// The Docker network to join (a kind cluster's). `None`: a network
    /// of its own, made here and removed with it.
    pub network: Option<String>,
}

/// A running backend; its container (and network, if its own) are
/// removed when it is dropped.
pub struct Backend {
    pub managed: Managed,
    pub ip: IpAddr,
    pub tls: BackendTls,
}

impl Backend {
    /// What the backend logged (requests, TLS handshakes it saw fail).
    pub async fn logs(&self) -> String {
        self.managed.logs().await
    }

    /// Removes it now, saying what failed (a drop can only try).
    pub async fn remove(self) -> Vec<String> {
        self.managed.remove().await
    }
}

/// Starts a backend and waits until it listens.
pub async fn start_backend(spec: &BackendSpec) -> Result<Backend, ContainerError> {
    let tls = backend_tls(&spec.dns_names, tls_fault(spec.fault))?;
    let mut env = vec![
        (
            "UNSTUCK_BACKEND_FAULT",
            server_fault(spec.fault).to_string(),
        ),
        ("UNSTUCK_BACKEND_PORT", PORT.to_string()),
        ("UNSTUCK_BACKEND_CERT", tls.cert.clone()),
        ("UNSTUCK_BACKEND_KEY", tls.key.clone()),
    ];
    match &spec.role {
        BackendRole::Webhook => env.push(("UNSTUCK_BACKEND_ROLE", "webhook".into())),
        BackendRole::ApiService { group, version } => {
            env.push(("UNSTUCK_BACKEND_ROLE", "apiService".into()));
            env.push(("UNSTUCK_BACKEND_GROUP", group.clone()));
            env.push(("UNSTUCK_BACKEND_VERSION", version.clone()));
        }
    }
    let managed = launch(Launch {
        run: &spec.run,
        name: &spec.name,
        role: "backend",
        image: IMAGE,
        build: BUILD,
        network: spec.network.clone(),
        env,
        ready_line: READY_LINE,
    })
    .await?;
    let ip = managed.ip().await?;
    Ok(Backend { managed, ip, tls })
}
