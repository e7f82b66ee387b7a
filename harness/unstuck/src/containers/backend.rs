//! The backend container: the project's own `unstuck-backend` image
//! (built offline by `ci/images/backend.sh`) playing a webhook or an
//! aggregated API, with a fault.

use std::{
    net::IpAddr,
    time::{Duration, Instant},
};

use super::{
    ContainerError, labels,
    tls::{BackendTls, TlsFault, backend_tls},
};
use crate::cluster::kind::docker::Docker;

/// The image `ci/images/backend.sh` builds.
pub const IMAGE: &str = "unstuck.local/backend:dev";
const BUILD: &str = "ci/images/backend.sh";
/// The port it listens on inside its container.
pub const PORT: u16 = 8443;
/// What it prints once it listens.
const READY_LINE: &str = "unstuck-backend listening";
const READY_WITHIN: Duration = Duration::from_secs(30);

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
    docker: Docker,
    pub container: String,
    pub network: String,
    own_network: bool,
    pub ip: IpAddr,
    pub tls: BackendTls,
    removed: bool,
}

impl Backend {
    /// What the backend logged (requests, TLS handshakes it saw fail).
    pub async fn logs(&self) -> String {
        self.docker
            .cmd()
            .args(["logs", &self.container])
            .output()
            .await
            .unwrap_or_else(|e| format!("(no log: {e})"))
    }

    /// Removes it now, saying what failed (a drop can only try).
    pub async fn remove(mut self) -> Vec<String> {
        self.removed = true;
        remove(
            &self.docker,
            &self.container,
            self.own_network.then_some(&*self.network),
        )
        .await
    }
}

async fn remove(docker: &Docker, container: &str, network: Option<&str>) -> Vec<String> {
    let mut errors = Vec::new();
    if let Err(e) = docker
        .cmd()
        .args(["rm", "--force", "--volumes", container])
        .output()
        .await
        && !e.to_string().contains("No such container")
    {
        errors.push(e.to_string());
    }
    if let Some(net) = network
        && let Err(e) = docker.remove_network(net).await
    {
        errors.push(e.to_string());
    }
    errors
}

impl Drop for Backend {
    fn drop(&mut self) {
        if self.removed {
            return;
        }
        // Blocking on purpose: a drop that spawned would race the
        // process's exit and leave the container behind.
        let program = std::env::var_os("UNSTUCK_DOCKER").unwrap_or_else(|| "docker".into());
        let _ = std::process::Command::new(&program)
            .args(["rm", "--force", "--volumes", &self.container])
            .output();
        if self.own_network {
            let _ = std::process::Command::new(&program)
                .args(["network", "rm", &self.network])
                .output();
        }
    }
}

/// Starts a backend and waits until it listens.
pub async fn start_backend(spec: &BackendSpec) -> Result<Backend, ContainerError> {
    let docker = Docker::default();
    docker
        .engine_answers()
        .await
        .map_err(ContainerError::NoEngine)?;
    if !docker.image_exists(IMAGE).await {
        return Err(ContainerError::ImageMissing {
            image: IMAGE.into(),
            build: BUILD,
        });
    }
    let tls = backend_tls(&spec.dns_names, tls_fault(spec.fault))?;
    let container = format!("unstuck-{}-{}", spec.run, spec.name);
    let labels = labels::for_run(&spec.run, "backend");
    let (network, own_network) = match &spec.network {
        Some(n) => (n.clone(), false),
        None => (container.clone(), true),
    };
    // From here on the handle owns what exists, so every way out removes it.
    let mut backend = Backend {
        docker: docker.clone(),
        container: container.clone(),
        network: network.clone(),
        own_network,
        ip: IpAddr::from([0, 0, 0, 0]),
        tls,
        removed: false,
    };
    if own_network {
        let mut create = docker.cmd().args(["network", "create"]);
        for (k, v) in &labels {
            create = create.arg("--label").arg(format!("{k}={v}"));
        }
        create.arg(&network).output().await?;
    }
    let mut run = docker.cmd().args([
        "run",
        "--detach",
        "--name",
        &container,
        "--network",
        &network,
    ]);
    for (k, v) in &labels {
        run = run.arg("--label").arg(format!("{k}={v}"));
    }
    let mut env = vec![
        (
            "UNSTUCK_BACKEND_FAULT",
            server_fault(spec.fault).to_string(),
        ),
        ("UNSTUCK_BACKEND_PORT", PORT.to_string()),
        ("UNSTUCK_BACKEND_CERT", backend.tls.cert.clone()),
        ("UNSTUCK_BACKEND_KEY", backend.tls.key.clone()),
    ];
    match &spec.role {
        BackendRole::Webhook => env.push(("UNSTUCK_BACKEND_ROLE", "webhook".into())),
        BackendRole::ApiService { group, version } => {
            env.push(("UNSTUCK_BACKEND_ROLE", "apiService".into()));
            env.push(("UNSTUCK_BACKEND_GROUP", group.clone()));
            env.push(("UNSTUCK_BACKEND_VERSION", version.clone()));
        }
    }
    for (k, v) in env {
        run = run.arg("--env").arg(format!("{k}={v}"));
    }
    run.arg(IMAGE).output().await?;
    wait_ready(&docker, &container).await?;
    let said = docker
        .cmd()
        .args(["container", "inspect", "--format"])
        .arg(format!(
            "{{{{(index .NetworkSettings.Networks \"{network}\").IPAddress}}}}"
        ))
        .arg(&container)
        .output()
        .await?;
    backend.ip = said.trim().parse().map_err(|_| ContainerError::Address {
        name: container.clone(),
        network: network.clone(),
        said: said.trim().to_string(),
    })?;
    Ok(backend)
}

async fn wait_ready(docker: &Docker, container: &str) -> Result<(), ContainerError> {
    let started = Instant::now();
    loop {
        let log = docker
            .cmd()
            .args(["logs", container])
            .output()
            .await
            .unwrap_or_default();
        if log.contains(READY_LINE) {
            return Ok(());
        }
        let running = docker
            .cmd()
            .args([
                "container",
                "inspect",
                "--format",
                "{{.State.Running}}",
                container,
            ])
            .output()
            .await
            .map(|s| s.trim() == "true")
            .unwrap_or(false);
        let why = if !running {
            Some("it is not running".to_string())
        } else if started.elapsed() > READY_WITHIN {
            Some(format!("no {READY_LINE:?} line"))
        } else {
            None
        };
        if let Some(why) = why {
            return Err(ContainerError::NotReady {
                name: container.to_string(),
                waited: started.elapsed(),
                why,
                log,
            });
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
