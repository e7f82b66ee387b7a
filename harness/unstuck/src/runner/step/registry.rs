//! The `registry:` step: an image registry beside the cluster that the
//! node's containerd pulls from, by the host name the scenario's pods use.
//! The first step naming a registry starts it (on the node's Docker
//! network for kind, a network of its own for the local provider), pushes
//! the test image under the names it lists, and writes the node's
//! `hosts.toml` for its host; every step then puts it in the fault it
//! names. The finally takes the node's `hosts.toml` and the images the
//! node pulled from it away, then the container.

use crate::runner::scenario_state::ScenarioRegistry;
use std::path::PathBuf;

use unstuck_core::scenario::{RegistryAuth, RegistryFault, RegistrySpec};

use super::{Evidence, ScenarioRun, StepError};
use crate::{
    containers::registry::{self, RegistryError},
    node::AnyNode,
};

pub(super) async fn run(
    run: &mut ScenarioRun<'_>,
    r: &RegistrySpec,
) -> Result<Evidence, StepError> {
    let node = run.ctx.node.clone().ok_or_else(|| StepError::NoNode {
        fault: format!("registry {}", *r.name),
    })?;
    let failed = |source: RegistryError| StepError::Registry {
        name: r.name.to_string(),
        source: Box::new(source),
    };
    let mut evidence = Vec::new();
    if !run.registries.iter().any(|s| s.name == *r.name) {
        let registry = registry::start_registry(&registry::RegistryRequest {
            run: run.names.run().to_string(),
            name: r.name.to_string(),
            basic_auth: r.auth == RegistryAuth::Basic,
            network: super::container::cluster_network(run).await?,
        })
        .await
        .map_err(failed)?;
        let host = run.names.text(&r.host());
        evidence.push(format!(
            "registry {host}: container {} ({}) serving on {} in Docker network {}{}",
            registry.managed.container,
            registry::IMAGE,
            registry.address(),
            registry.managed.network,
            match r.auth {
                RegistryAuth::Basic => ", basic auth (htpasswd user unstuck)",
                RegistryAuth::None => "",
            }
        ));
        // Held before anything is pushed: the finally removes it on every
        // way out.
        run.registries.push(ScenarioRegistry {
            name: r.name.to_string(),
            host,
            registry,
        });
        let archive = crate::components::test_image_archive();
        let entry = run.registries.last_mut().expect("just pushed");
        tracing::debug!(target: crate::STEP_LOG, "registry push begins ({})", entry.registry.managed.container);
        for name in &r.push {
            let (repo, tag) = name.rsplit_once(':').expect("checked at load");
            let digest = entry
                .registry
                .push(&archive, repo, tag)
                .await
                .map_err(failed)?;
            evidence.push(format!("pushed {}/{repo}:{tag} ({digest})", entry.host));
        }
    }
    let entry = run
        .registries
        .iter_mut()
        .find(|s| s.name == *r.name)
        .expect("started above");
    let done = entry.registry.set_fault(r.fault).await.map_err(failed)?;
    evidence.extend(
        done.into_iter()
            .map(|d| format!("registry {}: {d}", entry.host)),
    );
    // Its address can change when it is started again.
    let hosts = write_hosts_toml(node.as_ref(), entry).await?;
    evidence.push(format!(
        "the node's containerd reaches {} at http://{} ({})",
        entry.host,
        entry.registry.address(),
        hosts.display()
    ));
    if r.fault != RegistryFault::None {
        run.last_injection = Some(std::time::Instant::now());
    }
    Ok(evidence)
}

/// `<config_path>/<host>/hosts.toml`: the host is served over plain HTTP
/// at the registry's address. containerd reads it at each pull.
/// containerd 1.6 refuses a file without a `[host]` table ("failed to
/// decode hosts.toml: invalid `host` tree") and then pulls from the name
/// itself, so the address is both the one `host` and the `server`.
async fn write_hosts_toml(node: &AnyNode, r: &ScenarioRegistry) -> Result<PathBuf, StepError> {
    let dir = node.registry_hosts_dir().join(&r.host);
    let path = dir.join("hosts.toml");
    let content = format!(
        "# unstuck: registry {name} of this scenario run (removed when it ends)\n\
         server = \"http://{addr}\"\n\n\
         [host.\"http://{addr}\"]\n  capabilities = [\"pull\", \"resolve\"]\n",
        name = r.name,
        addr = r.registry.address()
    );
    let write = async {
        node.make_dir(&dir).await?;
        node.write_file(&path, &content).await
    };
    write.await.map_err(|e| StepError::Write {
        path: path.clone(),
        source: std::io::Error::other(e.to_string()),
    })?;
    Ok(path)
}

/// Takes a registry away: the node's `hosts.toml` for it, the images the
/// node holds from it (a pull leaves them in containerd's store), then the
/// container. What was done, and what could not be.
pub(crate) async fn remove(
    node: Option<&AnyNode>,
    r: ScenarioRegistry,
) -> (Vec<String>, Vec<String>) {
    let mut done = Vec::new();
    let mut failed = Vec::new();
    if let Some(node) = node {
        let dir = node.registry_hosts_dir().join(&r.host);
        let removed = async {
            node.remove_file(&dir.join("hosts.toml")).await?;
            node.remove_dir(&dir).await
        };
        match removed.await {
            Ok(()) => done.push(format!("removed {}", dir.display())),
            Err(e) => failed.push(format!("{}: {e}", dir.display())),
        }
        match pulled_images(node, &r.host).await {
            Ok(refs) if refs.is_empty() => {}
            Ok(refs) => {
                let rm = node.ctr().args(["images", "rm", "--sync"]).args(&refs);
                match node.run(rm).await {
                    Ok(_) => done.push(format!(
                        "removed {} from the node's containerd",
                        refs.join(", ")
                    )),
                    Err(e) => failed.push(format!("images {} on the node: {e}", refs.join(", "))),
                }
            }
            Err(e) => failed.push(format!("listing the node's images from {}: {e}", r.host)),
        }
    }
    let name = r.registry.managed.container.clone();
    let errors = r.registry.remove().await;
    match errors.is_empty() {
        true => done.push(format!("removed container {name}")),
        false => failed.push(format!("container {name}: {}", errors.join("; "))),
    }
    (done, failed)
}

/// The node's image references under `host/` (tags and digests alike).
async fn pulled_images(node: &AnyNode, host: &str) -> Result<Vec<String>, crate::exec::RunError> {
    let out = node
        .run(node.ctr().args(["images", "ls", "--quiet"]))
        .await?;
    let prefix = format!("{host}/");
    Ok(out
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with(&prefix))
        .map(str::to_string)
        .collect())
}
