//! The Docker engine as the containers beside a cluster see it: the API
//! client testcontainers itself uses (bollard, re-exported by the crate),
//! for what testcontainers does not do — labelled networks, the sweep's
//! listings, an address on a given network, a pid.
//!
//! Connected the way testcontainers connects (`DOCKER_HOST`, else the
//! local socket), at the API version its bollard speaks (1.49): an engine
//! older than Docker 28.1 answers "client version 1.49 is too new", which
//! [`ContainerError::EngineTooOld`] turns into the fix.

use std::{collections::HashMap, net::IpAddr};

use futures::StreamExt;
use testcontainers::bollard::{
    Docker,
    container::LogOutput,
    errors::Error as BollardError,
    models::{ContainerInspectResponse, NetworkCreateRequest},
    query_parameters::{
        InspectContainerOptions, ListContainersOptions, ListNetworksOptions, LogsOptions,
        RemoveContainerOptions,
    },
};

use super::ContainerError;

/// One container of unstuck's as the engine lists it, with its labels.
pub struct Listed {
    pub id: String,
    pub name: String,
    pub labels: HashMap<String, String>,
}

impl Listed {
    pub fn label(&self, key: &str) -> &str {
        self.labels.get(key).map(String::as_str).unwrap_or_default()
    }
}

/// A client of the local engine.
#[derive(Clone)]
pub struct Engine {
    docker: Docker,
}

impl Engine {
    /// Connects (no request yet) and checks that the engine answers at
    /// the API version this client speaks.
    pub async fn connect() -> Result<Self, ContainerError> {
        let docker = Docker::connect_with_defaults().map_err(ContainerError::NoEngine)?;
        let engine = Self { docker };
        engine.answers().await?;
        Ok(engine)
    }

    /// Whether the engine answers; an engine too old for this client is
    /// named as such.
    pub async fn answers(&self) -> Result<(), ContainerError> {
        match self.docker.version().await {
            Ok(_) => Ok(()),
            Err(e) => Err(classify(e)),
        }
    }

    pub async fn image_exists(&self, image: &str) -> bool {
        self.docker.inspect_image(image).await.is_ok()
    }

    /// A bridge network of its own, with `labels`.
    pub async fn create_network(
        &self,
        name: &str,
        labels: &[(String, String)],
    ) -> Result<(), ContainerError> {
        self.docker
            .create_network(NetworkCreateRequest {
                name: name.to_string(),
                labels: Some(labels.iter().cloned().collect()),
                ..Default::default()
            })
            .await
            .map(drop)
            .map_err(ContainerError::Engine)
    }

    /// Removes a network; one already gone is not an error.
    pub async fn remove_network(&self, name: &str) -> Result<(), ContainerError> {
        match self.docker.remove_network(name).await {
            Err(e) if not_found(&e) => Ok(()),
            other => other.map_err(ContainerError::Engine),
        }
    }

    /// Removes a container, running or not, with its anonymous volumes;
    /// one already gone is not an error.
    pub async fn remove_container(&self, name: &str) -> Result<(), ContainerError> {
        let options = RemoveContainerOptions {
            force: true,
            v: true,
            ..Default::default()
        };
        match self.docker.remove_container(name, Some(options)).await {
            Err(e) if not_found(&e) => Ok(()),
            other => other.map_err(ContainerError::Engine),
        }
    }

    /// The containers (running or not) whose labels match `filter`
    /// (`label=key` or `label=key=value`), or that are attached to a
    /// network (`network=name`).
    pub async fn containers(&self, filter: (&str, &str)) -> Result<Vec<Listed>, ContainerError> {
        let options = ListContainersOptions {
            all: true,
            filters: Some(HashMap::from([(
                filter.0.to_string(),
                vec![filter.1.to_string()],
            )])),
            ..Default::default()
        };
        let listed = self
            .docker
            .list_containers(Some(options))
            .await
            .map_err(ContainerError::Engine)?;
        Ok(listed
            .into_iter()
            .map(|c| Listed {
                id: c.id.unwrap_or_default(),
                name: c
                    .names
                    .unwrap_or_default()
                    .first()
                    .map(|n| n.trim_start_matches('/').to_string())
                    .unwrap_or_default(),
                labels: c.labels.unwrap_or_default(),
            })
            .filter(|c| !c.id.is_empty())
            .collect())
    }

    /// The networks whose labels match `label` (`key` or `key=value`):
    /// name and labels.
    pub async fn networks(
        &self,
        label: &str,
    ) -> Result<Vec<(String, HashMap<String, String>)>, ContainerError> {
        let options = ListNetworksOptions {
            filters: Some(HashMap::from([(
                "label".to_string(),
                vec![label.to_string()],
            )])),
        };
        let listed = self
            .docker
            .list_networks(Some(options))
            .await
            .map_err(ContainerError::Engine)?;
        Ok(listed
            .into_iter()
            .filter_map(|n| Some((n.name?, n.labels.unwrap_or_default())))
            .collect())
    }

    /// The engine's view of one container.
    async fn inspect(&self, container: &str) -> Result<ContainerInspectResponse, ContainerError> {
        self.docker
            .inspect_container(container, None::<InspectContainerOptions>)
            .await
            .map_err(ContainerError::Engine)
    }

    /// The container's address on `network`, if it has one.
    pub async fn ip_on(&self, container: &str, network: &str) -> Result<String, ContainerError> {
        Ok(self
            .inspect(container)
            .await?
            .network_settings
            .and_then(|s| s.networks)
            .and_then(|mut n| n.remove(network))
            .and_then(|n| n.ip_address)
            .unwrap_or_default())
    }

    /// The pid of its first process on this host (0 when it is stopped).
    pub async fn pid(&self, container: &str) -> Result<i32, ContainerError> {
        Ok(self
            .inspect(container)
            .await?
            .state
            .and_then(|s| s.pid)
            .map(|p| p as i32)
            .unwrap_or(0))
    }

    /// What the container logged on stdout and stderr, in order.
    pub async fn logs(&self, container: &str) -> Result<String, ContainerError> {
        let options = LogsOptions {
            stdout: true,
            stderr: true,
            ..Default::default()
        };
        let mut stream = self.docker.logs(container, Some(options));
        let mut text = String::new();
        while let Some(chunk) = stream.next().await {
            match chunk.map_err(ContainerError::Engine)? {
                LogOutput::StdOut { message }
                | LogOutput::StdErr { message }
                | LogOutput::Console { message } => {
                    text.push_str(&String::from_utf8_lossy(&message))
                }
                LogOutput::StdIn { .. } => {}
            }
        }
        Ok(text)
    }
}

/// Runs `f` on a runtime of its own in a thread of its own, and waits:
/// what a `Drop` uses, which may run inside a runtime (where blocking on
/// it would panic) or outside any.
pub fn blocking<F, Fut>(f: F)
where
    F: FnOnce(Engine) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()>,
{
    let worker = std::thread::spawn(move || {
        let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        else {
            return;
        };
        runtime.block_on(async move {
            if let Ok(docker) = Docker::connect_with_defaults() {
                f(Engine { docker }).await;
            }
        });
    });
    let _ = worker.join();
}

fn not_found(e: &BollardError) -> bool {
    matches!(
        e,
        BollardError::DockerResponseServerError {
            status_code: 404,
            ..
        }
    )
}

/// An engine's refusal of the client's API version is its own error.
fn classify(e: BollardError) -> ContainerError {
    match &e {
        BollardError::DockerResponseServerError {
            status_code: 400,
            message,
        } if message.contains("too new") => ContainerError::EngineTooOld {
            said: message.clone(),
        },
        _ => ContainerError::NoEngine(e),
    }
}

/// Whether the engine's refusal is that there is none to ask: no socket,
/// or nothing listening on it (an I/O error of either kind somewhere in
/// the error's chain of causes).
pub fn is_no_engine(e: &ContainerError) -> bool {
    let ContainerError::NoEngine(e) = e else {
        return false;
    };
    let gone = |kind: std::io::ErrorKind| {
        matches!(
            kind,
            std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused
        )
    };
    match e {
        BollardError::SocketNotFoundError(_) => return true,
        // Transparent: its source() skips the I/O error itself.
        BollardError::IOError { err } => return gone(err.kind()),
        _ => {}
    }
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(c) = cause {
        if let Some(io) = c.downcast_ref::<std::io::Error>()
            && gone(io.kind())
        {
            return true;
        }
        cause = c.source();
    }
    false
}

/// Parses an address the engine gave.
pub fn parse_ip(said: &str) -> Option<IpAddr> {
    said.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use testcontainers::bollard::API_DEFAULT_VERSION;

    /// What the engine answers at a socket path, as the sweep sees it.
    async fn answer_at(socket: &std::path::Path) -> ContainerError {
        let docker = Docker::connect_with_unix(&socket.to_string_lossy(), 5, API_DEFAULT_VERSION)
            .map_err(ContainerError::NoEngine);
        match docker {
            Err(e) => e,
            Ok(docker) => Engine { docker }
                .answers()
                .await
                .expect_err("nothing answers there"),
        }
    }

    #[tokio::test]
    async fn no_socket_and_a_socket_nobody_listens_on_are_no_engine() {
        let dir = std::env::temp_dir().join(format!("unstuck-engine-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let missing = answer_at(&dir.join("missing.sock")).await;
        assert!(is_no_engine(&missing), "{missing:?}");
        // A socket file left by an engine that died: connection refused.
        let dead = dir.join("dead.sock");
        drop(std::os::unix::net::UnixListener::bind(&dead).unwrap());
        let refused = answer_at(&dead).await;
        assert!(is_no_engine(&refused), "{refused:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_engine_refusing_the_api_version_is_too_old_and_not_missing() {
        // What Debian's dockerd 20.10 answers testcontainers' bollard.
        let e = classify(BollardError::DockerResponseServerError {
            status_code: 400,
            message: "client version 1.49 is too new. Maximum supported API version is 1.41".into(),
        });
        assert!(matches!(e, ContainerError::EngineTooOld { .. }), "{e:?}");
        assert!(!is_no_engine(&e));
        assert!(e.to_string().contains("ci/kind/setup.sh"), "{e}");
    }
}
