//! Broken network plugin: the node's CNI configuration is moved away
//! (projectcalico/calico#7958's failing CNI DEL, in the wording of
//! containerd/containerd#8774).
//!
//! containerd watches its CNI configuration directory; with no network
//! configuration left it reports the plugin "not initialized", the node
//! turns `Ready=False` (`container runtime network not ready`) and every
//! StopPodSandbox fails before the sandbox is stopped. A pod deleted
//! meanwhile stays Terminating, with events
//! `FailedKillPod: error killing pod: failed to "KillPodSandbox" for
//! "<uid>" with KillPodSandboxError: "rpc error: code = Unknown desc =
//! failed to destroy network for sandbox \"<id>\": cni plugin not
//! initialized"` at each retry (recorded on v1.34.4).
//!
//! The files are moved into a directory beside the configuration
//! directory, not deleted; revert moves back whatever is not in place
//! again (the doctor may already have written the configuration back).

use std::path::PathBuf;

use kube::Client;
use serde::{Deserialize, Serialize};

use super::{FaultError, undone, FaultKind, NoParams, Placed, PodTarget, Reverted, target_pod};
use crate::node::Node;

/// The directory beside the configuration directory that holds the moved
/// files.
const MOVED_SUFFIX: &str = "unstuck-moved";

/// Moved-away CNI configuration in place.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemovedCniConfig {
    pub pod: PodTarget,
    pub conf_dir: PathBuf,
    pub moved_to: PathBuf,
    /// The file names moved.
    pub files: Vec<String>,
}

/// `removeCniConfig`.
pub struct RemoveCniConfigFault;

impl FaultKind for RemoveCniConfigFault {
    const NAME: &'static str = "removeCniConfig";
    type Params = NoParams;
    type Placed = RemovedCniConfig;

    async fn inject(
        client: &Client,
        node: &dyn Node,
        namespace: &str,
        name: &str,
        _: NoParams,
    ) -> Result<RemovedCniConfig, FaultError> {
        inject(client, node, namespace, name).await
    }
}

/// Moves every file out of the CNI configuration directory of `node`,
/// where the pod must run.
pub async fn inject(
    client: &Client,
    node: &dyn Node,
    namespace: &str,
    name: &str,
) -> Result<RemovedCniConfig, FaultError> {
    let (pod, _) = target_pod(client, node, namespace, name).await?;
    let place = node.cni_config().ok_or_else(|| {
        FaultError::NotInjected(format!(
            "node {} does not say where its CNI configuration is",
            node.name()
        ))
    })?;
    let conf_dir = place.conf_dir;
    let moved_to = conf_dir.with_extension(MOVED_SUFFIX);
    let files = node.list_dir(&conf_dir).await?;
    if files.is_empty() {
        return Err(FaultError::NotInjected(format!(
            "{} holds no CNI configuration to move away",
            conf_dir.display()
        )));
    }
    node.make_dir(&moved_to).await?;
    let mut fault = RemovedCniConfig {
        pod,
        conf_dir,
        moved_to,
        files: Vec::new(),
    };
    for f in files {
        if let Err(e) = node
            .rename(&fault.conf_dir.join(&f), &fault.moved_to.join(&f))
            .await
        {
            return Err(undone(e, &fault, node).await);
        }
        fault.files.push(f);
    }
    Ok(fault)
}

impl Placed for RemovedCniConfig {
    fn pod(&self) -> &PodTarget {
        &self.pod
    }

    fn describe(&self) -> String {
        format!(
            "removed CNI configuration: moved {} from {} to {} (pod {} runs on that node)",
            self.files.join(", "),
            self.conf_dir.display(),
            self.moved_to.display(),
            self.pod
        )
    }

    /// Moves each file back unless one of that name is in place again,
    /// then removes the holding directory (with what is left in it).
    async fn revert(&self, node: &dyn Node) -> Result<Reverted, FaultError> {
        let mut done = Vec::new();
        let present = node.list_dir(&self.conf_dir).await?;
        let held = node.list_dir(&self.moved_to).await.unwrap_or_default();
        for f in held {
            let from = self.moved_to.join(&f);
            if present.contains(&f) {
                node.remove_file(&from).await?;
                done.push(format!(
                    "{} was in place again; dropped the moved copy",
                    self.conf_dir.join(&f).display()
                ));
            } else {
                node.rename(&from, &self.conf_dir.join(&f)).await?;
                done.push(format!("moved {f} back to {}", self.conf_dir.display()));
            }
        }
        node.remove_dir(&self.moved_to).await?;
        Ok(done)
    }
}
