//! A network plugin that is configured but not installed: the node's CNI
//! configuration chains a plugin whose binary is not in the runtime's
//! plugin path, as kubernetes/kubernetes#56902's flannel configuration
//! chained `portmap` on nodes without it.
//!
//! containerd reloads its CNI configuration when the file changes; the
//! configuration is valid, so the node stays Ready, but every plugin call
//! of the chain now fails. A pod deleted meanwhile stays Terminating: the
//! kubelet's KillPodSandbox fails with `failed to destroy network for
//! sandbox "<id>": plugin type="<plugin>" failed (delete): failed to find
//! plugin "<plugin>" in path [<dir>]` at each retry, and a new pod never
//! starts (`FailedCreatePodSandBox ... failed to setup network for
//! sandbox`).
//!
//! The plugin is appended to the first configuration file (the one
//! containerd uses); revert writes the file back as it was, unless someone
//! changed it since.

use std::path::{Path, PathBuf};

use kube::Client;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{FaultError, FaultKind, Placed, PodTarget, Reverted, target_pod};
use crate::node::Node;

/// `missingCniPlugin`.
pub struct MissingCniPluginFault;

/// Its parameters.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MissingCniPluginParams {
    /// The plugin type to chain: one whose binary the node does not have.
    pub plugin: String,
}

/// The configuration with the plugin chained, in place.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChainedMissingPlugin {
    pub pod: PodTarget,
    pub plugin: String,
    /// The configuration file changed.
    pub path: PathBuf,
    pub original: String,
    pub written: String,
}

impl FaultKind for MissingCniPluginFault {
    const NAME: &'static str = "missingCniPlugin";
    type Params = MissingCniPluginParams;
    type Placed = ChainedMissingPlugin;

    async fn inject(
        client: &Client,
        node: &dyn Node,
        namespace: &str,
        name: &str,
        params: MissingCniPluginParams,
    ) -> Result<ChainedMissingPlugin, FaultError> {
        let (pod, _) = target_pod(client, node, namespace, name).await?;
        let conf_dir = node
            .cni_config()
            .ok_or_else(|| {
                FaultError::NotInjected(format!(
                    "node {} does not say where its CNI configuration is",
                    node.name()
                ))
            })?
            .conf_dir;
        let path = first_config(node, &conf_dir).await?;
        let original = node.read_file(&path).await?;
        let written = chained(&original, &params.plugin).map_err(|why| {
            FaultError::NotInjected(format!("{}: {}", path.display(), why.0))
        })?;
        replace(node, &path, &written).await?;
        Ok(ChainedMissingPlugin {
            pod,
            plugin: params.plugin,
            path,
            original,
            written,
        })
    }
}

impl Placed for ChainedMissingPlugin {
    fn pod(&self) -> &PodTarget {
        &self.pod
    }

    fn describe(&self) -> String {
        format!(
            "missing CNI plugin: chained plugin '{}' in {} (pod {} runs on that node)",
            self.plugin,
            self.path.display(),
            self.pod
        )
    }

    /// Writes the original back while the file is still what the fault
    /// wrote; a file someone repaired or replaced since is left alone.
    async fn revert(&self, node: &dyn Node) -> Result<Reverted, FaultError> {
        match node.read_file(&self.path).await {
            Ok(now) if now == self.written => {
                replace(node, &self.path, &self.original).await?;
                Ok(vec![format!(
                    "wrote {} back without plugin '{}'",
                    self.path.display(),
                    self.plugin
                )])
            }
            _ => Ok(Vec::new()),
        }
    }
}

/// The configuration file containerd loads: the first by name of the
/// extensions libcni reads.
async fn first_config(node: &dyn Node, conf_dir: &Path) -> Result<PathBuf, FaultError> {
    let mut files = node.list_dir(conf_dir).await?;
    files.sort();
    files
        .into_iter()
        .find(|f| [".conflist", ".conf", ".json"].iter().any(|e| f.ends_with(e)))
        .map(|f| conf_dir.join(f))
        .ok_or_else(|| {
            FaultError::NotInjected(format!(
                "{} holds no CNI configuration to add a plugin to",
                conf_dir.display()
            ))
        })
}

/// Writes beside the file and renames over it, so containerd, which
/// watches the directory, never loads half a file (it reads only
/// `.conflist`, `.conf` and `.json`).
async fn replace(node: &dyn Node, path: &Path, content: &str) -> Result<(), FaultError> {
    let tmp = path.with_extension("unstuck-tmp");
    node.write_file(&tmp, content).await?;
    node.rename(&tmp, path).await?;
    Ok(())
}

/// Why a configuration cannot take the plugin.
#[derive(Debug)]
struct Unchainable(String);

/// `conf` (a conflist, or a single plugin's `.conf`, which becomes a
/// conflist) with `plugin` appended to its chain.
fn chained(conf: &str, plugin: &str) -> Result<String, Unchainable> {
    let why = |s: String| Unchainable(s);
    if plugin.is_empty() || plugin.contains('/') {
        return Err(why(format!("'{plugin}' is not a plugin type")));
    }
    let mut v: Value = serde_json::from_str(conf)
        .map_err(|e| why(format!("not a CNI configuration: {e}")))?;
    let obj = v
        .as_object_mut()
        .ok_or_else(|| why("not a CNI configuration: not a JSON object".into()))?;
    let plugins = match obj.remove("plugins") {
        Some(Value::Array(list)) => list,
        Some(_) => return Err(why("`plugins` is not a list".into())),
        None => {
            // A single plugin's configuration: its keys but the list's own.
            let single: serde_json::Map<String, Value> = obj
                .iter()
                .filter(|(k, _)| !matches!(k.as_str(), "cniVersion" | "name"))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            obj.retain(|k, _| matches!(k.as_str(), "cniVersion" | "name"));
            vec![Value::Object(single)]
        }
    };
    if plugins.iter().any(|p| p["type"] == plugin) {
        return Err(why(format!("plugin '{plugin}' is already in the chain")));
    }
    let mut plugins = plugins;
    plugins.push(serde_json::json!({ "type": plugin }));
    obj.insert("plugins".into(), Value::Array(plugins));
    Ok(v.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plugin_is_appended_to_the_chain_once() {
        let conf = r#"{"cniVersion":"1.0.0","name":"n","plugins":[{"type":"bridge","bridge":"b0"}]}"#;
        let out: Value = serde_json::from_str(&chained(conf, "flannel").unwrap()).unwrap();
        assert_eq!(out["name"], "n");
        assert_eq!(out["plugins"][0]["bridge"], "b0");
        assert_eq!(out["plugins"][1], serde_json::json!({"type": "flannel"}));
        assert!(chained(&out.to_string(), "flannel").is_err());
        assert!(chained(conf, "../bin/sh").is_err());
        assert!(chained("[]", "flannel").is_err());
    }

    #[test]
    fn a_single_plugin_conf_becomes_a_chain() {
        let conf = r#"{"cniVersion":"0.4.0","name":"n","type":"bridge","bridge":"b0"}"#;
        let out: Value = serde_json::from_str(&chained(conf, "flannel").unwrap()).unwrap();
        assert_eq!(out["cniVersion"], "0.4.0");
        assert_eq!(
            out["plugins"],
            serde_json::json!([{"type": "bridge", "bridge": "b0"}, {"type": "flannel"}])
        );
    }
}
