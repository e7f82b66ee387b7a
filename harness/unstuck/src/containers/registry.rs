//! The registry container: the CNCF distribution registry (built offline
//! by `ci/images/registry.sh`), which the node's containerd pulls a
//! scenario's images from, with the faults real users meet: it is down, a
//! tag was deleted, it wants credentials, it is slow.

mod http;
pub mod layout;

use std::{
    net::{IpAddr, SocketAddr},
    path::Path,
};

use unstuck_core::scenario::RegistryFault;

use super::{
    ContainerError,
    managed::{Launch, Managed, launch},
};
use crate::exec::Cmd;
pub use http::HttpError;
use layout::LayoutImage;

/// The image `ci/images/registry.sh` builds.
pub const IMAGE: &str = "unstuck.local/registry:dev";
const BUILD: &str = "ci/images/registry.sh";
/// The port it serves plain HTTP on inside its container.
pub const PORT: u16 = 5000;
/// What it logs once it serves.
const READY_LINE: &str = "listening on [::]:5000";
/// The one user of `ci/images/registry/htpasswd`.
pub const USER: &str = "unstuck";
pub const PASSWORD: &str = "unstuck-registry-secret";
/// The registry's egress under the `slow` fault: the pushed image's own
/// layer ([`PAD_LAYER_BYTES`]) takes over two minutes.
const SLOW_RATE: &str = "64kbit";
/// The `down` fault: the registry's port answers every connection with a
/// reset (`{op}`: `-I` to add it, `-D` to take it away). Not `docker
/// stop`: a stopped container gives its address back, and on a network
/// registries share (kind's) the next one started takes it, so pulls meant
/// for the stopped registry reach another (found on kind).
const REFUSE_RULE: &str = "{op} INPUT -p tcp --dport 5000 -j REJECT --reject-with tcp-reset";
/// The size of the layer each push adds.
const PAD_LAYER_BYTES: usize = 1 << 20;

/// What to start.
#[derive(Clone, Debug)]
pub struct RegistryRequest {
    /// The run that owns it (labels, container name).
    pub run: String,
    /// A name of the scenario's own, unique in the run.
    pub name: String,
    /// Whether a pull needs [`USER`]'s credentials.
    pub basic_auth: bool,
    /// The Docker network to join (a kind cluster's). `None`: a network of
    /// its own, made here and removed with it.
    pub network: Option<String>,
}

/// A registry a scenario pushed to.
pub struct Registry {
    pub managed: Managed,
    pub ip: IpAddr,
    basic_auth: bool,
    /// What was pushed: `(repo, tag, image)`, for a deleted tag's restore.
    pushed: Vec<(String, String, LayoutImage)>,
    fault: RegistryFault,
}

#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error(transparent)]
    Container(#[from] ContainerError),
    #[error(transparent)]
    Layout(#[from] layout::LayoutError),
    #[error(transparent)]
    Http(#[from] HttpError),
    #[error("in the registry's network namespace: {0}")]
    Netns(#[source] crate::exec::RunError),
    #[error("the registry answered {call} with HTTP {status}: {body}")]
    Refused {
        call: String,
        status: u16,
        body: String,
    },
}

/// Starts a registry and waits until it serves.
pub async fn start_registry(spec: &RegistryRequest) -> Result<Registry, RegistryError> {
    let mut env = Vec::new();
    if spec.basic_auth {
        env.push(("REGISTRY_AUTH", "htpasswd".to_string()));
        env.push(("REGISTRY_AUTH_HTPASSWD_REALM", "unstuck".to_string()));
        env.push(("REGISTRY_AUTH_HTPASSWD_PATH", "/auth/htpasswd".to_string()));
    }
    let managed = launch(Launch {
        run: &spec.run,
        name: &spec.name,
        role: "registry",
        image: IMAGE,
        build: BUILD,
        network: spec.network.clone(),
        env,
        ready_line: READY_LINE,
    })
    .await?;
    let ip = managed.ip().await?;
    Ok(Registry {
        managed,
        ip,
        basic_auth: spec.basic_auth,
        pushed: Vec::new(),
        fault: RegistryFault::None,
    })
}

impl Registry {
    /// `ip:port`, what containerd's `hosts.toml` names as the server.
    pub fn address(&self) -> SocketAddr {
        SocketAddr::new(self.ip, PORT)
    }

    pub fn fault(&self) -> RegistryFault {
        self.fault
    }

    fn auth_header(&self) -> Vec<(&'static str, String)> {
        match self.basic_auth {
            true => vec![("Authorization", http::basic_auth(USER, PASSWORD))],
            false => Vec::new(),
        }
    }

    /// Pushes the image of the OCI layout tar at `archive` as `repo:tag`,
    /// with a layer of `PAD_LAYER_BYTES` that is this registry's own (the
    /// node holds the test image's layers already); its manifest's digest.
    pub async fn push(
        &mut self,
        archive: &Path,
        repo: &str,
        tag: &str,
    ) -> Result<String, RegistryError> {
        let pad = format!("unstuck-{}", self.managed.container);
        let image = layout::read(archive)?.with_layer(&pad, PAD_LAYER_BYTES);
        for (digest, bytes) in &image.blobs {
            self.push_blob(repo, digest, bytes).await?;
        }
        self.put_manifest(repo, tag, &image).await?;
        let digest = image.manifest_digest.clone();
        self.pushed.push((repo.into(), tag.into(), image));
        Ok(digest)
    }

    async fn push_blob(&self, repo: &str, digest: &str, bytes: &[u8]) -> Result<(), RegistryError> {
        let auth = self.auth_header();
        let start = format!("/v2/{repo}/blobs/uploads/");
        let r = http::call(self.address(), "POST", &start, &auth, &[]).await?;
        expect(&r, 202, &format!("POST {start}"))?;
        let location = r.header("Location").unwrap_or_default();
        // The Location is absolute or a path; only its path and query count.
        let path = match location.find("/v2/") {
            Some(i) => &location[i..],
            None => location,
        };
        let sep = if path.contains('?') { '&' } else { '?' };
        let put = format!("{path}{sep}digest={digest}");
        let mut headers = auth;
        headers.push(("Content-Type", "application/octet-stream".into()));
        let r = http::call(self.address(), "PUT", &put, &headers, bytes).await?;
        expect(&r, 201, &format!("PUT blob {digest} of {repo}"))
    }

    async fn put_manifest(
        &self,
        repo: &str,
        tag: &str,
        image: &LayoutImage,
    ) -> Result<(), RegistryError> {
        let mut headers = self.auth_header();
        headers.push(("Content-Type", image.manifest_media_type.clone()));
        let path = format!("/v2/{repo}/manifests/{tag}");
        let r = http::call(self.address(), "PUT", &path, &headers, &image.manifest).await?;
        expect(&r, 201, &format!("PUT {path}"))
    }

    /// Moves the registry from its fault to `to`; what was done, for the
    /// step's evidence.
    pub async fn set_fault(&mut self, to: RegistryFault) -> Result<Vec<String>, RegistryError> {
        let mut done = Vec::new();
        if self.fault == to {
            return Ok(done);
        }
        match self.fault {
            RegistryFault::None => {}
            RegistryFault::Down => {
                self.in_netns("iptables", &REFUSE_RULE.replace("{op}", "-D"))
                    .await?;
                done.push(format!("{} answers again", self.address()));
            }
            RegistryFault::TagDeleted => {
                for (repo, tag, image) in &self.pushed {
                    self.put_manifest(repo, tag, image).await?;
                    done.push(format!("pushed the manifest of {repo}:{tag} again"));
                }
            }
            RegistryFault::Slow => {
                self.in_netns("tc", "qdisc del dev eth0 root").await?;
                done.push("removed the throttle on its eth0".into());
            }
        }
        self.fault = RegistryFault::None;
        match to {
            RegistryFault::None => {}
            RegistryFault::Down => {
                self.in_netns("iptables", &REFUSE_RULE.replace("{op}", "-I"))
                    .await?;
                done.push(format!(
                    "{} refuses every connection now (iptables REJECT with tcp-reset in its network namespace), as a registry host whose service stopped does",
                    self.address()
                ));
            }
            RegistryFault::TagDeleted => {
                for (repo, tag, image) in &self.pushed {
                    let path = format!("/v2/{repo}/manifests/{}", image.manifest_digest);
                    let r = http::call(self.address(), "DELETE", &path, &self.auth_header(), &[])
                        .await?;
                    expect(&r, 202, &format!("DELETE {path}"))?;
                    done.push(format!(
                        "deleted the manifest {} of {repo}:{tag} (its blobs stay)",
                        image.manifest_digest
                    ));
                }
            }
            RegistryFault::Slow => {
                self.in_netns(
                    "tc",
                    &format!(
                        "qdisc replace dev eth0 root tbf rate {SLOW_RATE} burst 16kb latency 2s"
                    ),
                )
                .await?;
                done.push(format!(
                    "throttled its eth0 to {SLOW_RATE} (tc tbf in its network namespace)"
                ));
            }
        }
        self.fault = to;
        Ok(done)
    }

    /// `program args` (space-separated) in the container's network
    /// namespace: the image has neither `tc` nor `iptables` (FROM scratch),
    /// so they are this host's, entered by the container's pid.
    async fn in_netns(&self, program: &str, args: &str) -> Result<(), RegistryError> {
        let pid = self.managed.pid().await?;
        Cmd::new("nsenter")
            .arg("--target")
            .arg(pid.to_string())
            .arg("--net")
            .arg(program)
            .args(args.split_whitespace())
            .output()
            .await
            .map_err(RegistryError::Netns)?;
        Ok(())
    }

    /// Removes it now, saying what failed.
    pub async fn remove(self) -> Vec<String> {
        self.managed.remove().await
    }
}

fn expect(r: &http::Response, status: u16, call: &str) -> Result<(), RegistryError> {
    if r.status == status {
        return Ok(());
    }
    Err(RegistryError::Refused {
        call: call.to_string(),
        status: r.status,
        body: String::from_utf8_lossy(&r.body[..r.body.len().min(300)]).into_owned(),
    })
}
