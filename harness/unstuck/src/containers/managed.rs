//! One container unstuck runs beside a cluster, whatever it plays: a
//! testcontainers request (its image, labels of its run and owner
//! ([`super::labels`]), its network, its environment, a wait for its ready
//! line), started on a network of its own or a kind cluster's, and removed
//! (with its own network) when its handle is dropped.

use std::time::{Duration, Instant};

use testcontainers::{
    ContainerAsync, GenericImage, ImageExt, TestcontainersError, core::WaitFor,
    runners::AsyncRunner,
};

use super::{ContainerError, engine::Engine, labels};
use crate::text::quoted;

/// How long a container has to log its ready line.
const READY_WITHIN: Duration = Duration::from_secs(30);

/// What to start.
pub struct Launch<'a> {
    /// The run that owns it (labels, container name).
    pub run: &'a str,
    /// A name of the scenario's own, unique in the run.
    pub name: &'a str,
    /// What it plays, for the `dev.unstuck.container` label.
    pub role: &'a str,
    pub image: &'a str,
    /// The script that builds `image`, for the error when it is missing.
    pub build: &'static str,
    /// The Docker network to join (a kind cluster's). `None`: a network of
    /// its own, made here and removed with it.
    pub network: Option<String>,
    pub env: Vec<(&'static str, String)>,
    /// What it logs once it serves.
    pub ready_line: &'a str,
}

/// A running container; it (and its network, if its own) are removed when
/// the handle is dropped.
pub struct Managed {
    engine: Engine,
    /// testcontainers' handle: removes the container when dropped.
    handle: Option<ContainerAsync<GenericImage>>,
    pub container: String,
    pub network: String,
    own_network: bool,
    /// Removed by [`Managed::remove`]; its drop has nothing left to do.
    removed: bool,
}

impl Managed {
    /// What the container logged, on stdout and stderr (the registry
    /// logs to stderr).
    pub async fn logs(&self) -> String {
        self.engine
            .logs(&self.container)
            .await
            .unwrap_or_else(|e| format!("(no log: {e})"))
    }

    /// Its address on its network (a stopped container has none).
    pub async fn ip(&self) -> Result<std::net::IpAddr, ContainerError> {
        let said = self.engine.ip_on(&self.container, &self.network).await?;
        super::engine::parse_ip(&said).ok_or_else(|| ContainerError::Address {
            name: self.container.clone(),
            network: self.network.clone(),
            said,
        })
    }

    /// The pid of its first process on this host (0 when it is stopped).
    pub async fn pid(&self) -> Result<i32, ContainerError> {
        self.engine.pid(&self.container).await
    }

    /// Removes it now, saying what failed (a drop can only try).
    pub async fn remove(mut self) -> Vec<String> {
        let mut errors = Vec::new();
        if let Some(handle) = self.handle.take()
            && let Err(e) = handle.rm().await
        {
            errors.push(e.to_string());
        }
        // testcontainers' rm forgets a container that is gone already;
        // ours by name makes sure, and is a no-op then.
        if let Err(e) = self.engine.remove_container(&self.container).await {
            errors.push(e.to_string());
        }
        if self.own_network
            && let Err(e) = self.engine.remove_network(&self.network).await
        {
            errors.push(e.to_string());
        }
        self.removed = true;
        errors
    }
}

impl Drop for Managed {
    fn drop(&mut self) {
        if self.removed {
            return;
        }
        let handle = self.handle.take();
        let started = handle.is_some();
        let in_runtime = tokio::runtime::Handle::try_current().is_ok();
        if in_runtime {
            // testcontainers removes it, blocking until it is gone.
            drop(handle);
        } else {
            // Its drop needs a runtime to run in; without one it would
            // panic, so the container goes by name below instead.
            std::mem::forget(handle);
        }
        // By name too where testcontainers holds nothing to remove: no
        // runtime for its drop, or a start that failed before it took
        // the container it had the engine create.
        let by_name = !in_runtime || !started;
        if by_name || self.own_network {
            let container = by_name.then(|| self.container.clone());
            let network = self.own_network.then(|| self.network.clone());
            // Blocking on purpose: a drop that spawned would race the
            // process's exit and leave the container behind.
            super::engine::blocking(move |engine| async move {
                if let Some(container) = container {
                    let _ = engine.remove_container(&container).await;
                }
                if let Some(network) = network {
                    let _ = engine.remove_network(&network).await;
                }
            });
        }
    }
}

/// Starts a container and waits until it logs its ready line.
pub async fn launch(l: Launch<'_>) -> Result<Managed, ContainerError> {
    let engine = Engine::connect().await?;
    if !engine.image_exists(l.image).await {
        return Err(ContainerError::ImageMissing {
            image: l.image.into(),
            build: l.build,
        });
    }
    let container = format!("unstuck-{}-{}", l.run, l.name);
    let labels = labels::for_run(l.run, l.role);
    let (network, own_network) = match l.network {
        Some(n) => (n, false),
        None => (container.clone(), true),
    };
    // From here on the handle owns what exists, so every way out removes it.
    let mut managed = Managed {
        engine: engine.clone(),
        handle: None,
        container: container.clone(),
        network: network.clone(),
        own_network,
        removed: false,
    };
    if own_network {
        // Made here, not by testcontainers: its networks carry no labels,
        // and the sweep finds a dead owner's network by its labels.
        engine.create_network(&network, &labels).await?;
    }
    let (name, tag) = l.image.rsplit_once(':').unwrap_or((l.image, "latest"));
    let mut request = GenericImage::new(name, tag)
        .with_wait_for(WaitFor::message_on_either_std(l.ready_line))
        .with_container_name(&container)
        .with_network(&network)
        .with_labels(labels)
        .with_startup_timeout(READY_WITHIN)
        // testcontainers publishes every port an image exposes on all of
        // the host's addresses; the cluster reaches a container by its
        // network address, and nothing of unstuck's listens beyond this
        // machine's own networks.
        .with_host_config_modifier(|host| {
            host.publish_all_ports = Some(false);
            host.port_bindings = None;
        });
    for (k, v) in l.env {
        request = request.with_env_var(k, v);
    }
    let started = Instant::now();
    match request.start().await {
        Ok(handle) => {
            managed.handle = Some(handle);
            Ok(managed)
        }
        Err(e) => Err(ContainerError::NotReady {
            name: container,
            waited: started.elapsed(),
            why: not_ready_why(&e, l.ready_line),
            log: managed.logs().await,
        }),
    }
}

/// Why testcontainers gave up on it, in the words of a person reading its
/// log: its log ended (it exited) or the time ran out.
fn not_ready_why(e: &TestcontainersError, ready_line: &str) -> String {
    match e {
        TestcontainersError::WaitContainer(
            testcontainers::core::error::WaitContainerError::StartupTimeout,
        ) => {
            format!("no {ready_line} line", ready_line = quoted(ready_line))
        }
        TestcontainersError::WaitContainer(_) => {
            format!(
                "it is not running (its log ended with no {ready_line} line)",
                ready_line = quoted(ready_line)
            )
        }
        other => other.to_string(),
    }
}
