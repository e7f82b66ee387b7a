//! One container unstuck runs beside a cluster, whatever it plays: started
//! with the labels of its run and owner ([`super::labels`]), on a network
//! of its own or a kind cluster's, waited for until it logs its ready line,
//! and removed (with its own network) when its handle is dropped.

use std::{
    net::IpAddr,
    time::{Duration, Instant},
};

use super::{ContainerError, labels};
use crate::docker::Docker;

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
    docker: Docker,
    pub container: String,
    pub network: String,
    own_network: bool,
    removed: bool,
}

impl Managed {
    /// What the container logged, on stdout and stderr (the registry
    /// logs to stderr).
    pub async fn logs(&self) -> String {
        match self
            .docker
            .cmd()
            .args(["logs", &self.container])
            .run_raw()
            .await
        {
            Ok(out) => {
                let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
                text.push_str(&String::from_utf8_lossy(&out.stderr));
                text
            }
            Err(e) => format!("(no log: {e})"),
        }
    }

    /// Its address on its network (a stopped container has none).
    pub async fn ip(&self) -> Result<IpAddr, ContainerError> {
        let said = self
            .docker
            .cmd()
            .args(["container", "inspect", "--format"])
            .arg(format!(
                "{{{{(index .NetworkSettings.Networks \"{}\").IPAddress}}}}",
                self.network
            ))
            .arg(&self.container)
            .output()
            .await?;
        said.trim().parse().map_err(|_| ContainerError::Address {
            name: self.container.clone(),
            network: self.network.clone(),
            said: said.trim().to_string(),
        })
    }

    /// The pid of its first process on this host (0 when it is stopped).
    pub async fn pid(&self) -> Result<i32, ContainerError> {
        let said = self
            .docker
            .cmd()
            .args(["container", "inspect", "--format", "{{.State.Pid}}"])
            .arg(&self.container)
            .output()
            .await?;
        Ok(said.trim().parse().unwrap_or(0))
    }

    /// Waits until it has logged `ready_line`, or says why not.
    async fn wait_ready(&self, ready_line: &str) -> Result<(), ContainerError> {
        let started = Instant::now();
        loop {
            let log = self.logs().await;
            if log.contains(ready_line) {
                return Ok(());
            }
            let running = self
                .docker
                .cmd()
                .args([
                    "container",
                    "inspect",
                    "--format",
                    "{{.State.Running}}",
                    &self.container,
                ])
                .output()
                .await
                .map(|s| s.trim() == "true")
                .unwrap_or(false);
            let why = if !running {
                Some("it is not running".to_string())
            } else if started.elapsed() > READY_WITHIN {
                Some(format!("no {ready_line:?} line"))
            } else {
                None
            };
            if let Some(why) = why {
                return Err(ContainerError::NotReady {
                    name: self.container.clone(),
                    waited: started.elapsed(),
                    why,
                    log,
                });
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Removes it now, saying what failed (a drop can only try).
    pub async fn remove(mut self) -> Vec<String> {
        self.removed = true;
        let mut errors = Vec::new();
        if let Err(e) = self
            .docker
            .cmd()
            .args(["rm", "--force", "--volumes", &self.container])
            .output()
            .await
            && !e.to_string().contains("No such container")
        {
            errors.push(e.to_string());
        }
        if self.own_network
            && let Err(e) = self.docker.remove_network(&self.network).await
        {
            errors.push(e.to_string());
        }
        errors
    }
}

impl Drop for Managed {
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

/// Starts a container and waits until it logs its ready line.
pub async fn launch(l: Launch<'_>) -> Result<Managed, ContainerError> {
    let docker = Docker::default();
    docker
        .engine_answers()
        .await
        .map_err(ContainerError::NoEngine)?;
    if !docker.image_exists(l.image).await {
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
    let managed = Managed {
        docker: docker.clone(),
        container: container.clone(),
        network: network.clone(),
        own_network,
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
    for (k, v) in l.env {
        run = run.arg("--env").arg(format!("{k}={v}"));
    }
    run.arg(l.image).output().await?;
    managed.wait_ready(l.ready_line).await?;
    Ok(managed)
}
