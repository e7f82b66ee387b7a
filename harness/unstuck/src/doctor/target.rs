//! Which cluster the doctor talks to, said before anything else: the
//! kubeconfig, its context, the server, the cluster's identity (the
//! kube-system namespace's UID, which a cluster keeps for life) and the
//! server's version. A report read later, or a plan about to be applied,
//! names the exact cluster it is about.
//!
//! Every client made here has a connect timeout of 5 s and a read timeout
//! of 30 s: an API server that stops answering makes a blind spot, not a
//! hang.

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use k8s_openapi::api::core::v1::Namespace;
use kube::{
    Api, Client,
    config::{KubeConfigOptions, Kubeconfig},
};
use serde::Serialize;

use crate::text::quoted;

pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
pub const READ_TIMEOUT: Duration = Duration::from_secs(30);

/// The cluster a report is about.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Target {
    /// The kubeconfig file read (none in a pod's in-cluster config).
    pub kubeconfig: Option<PathBuf>,
    /// Its current context.
    pub context: Option<String>,
    /// The API server's URL.
    pub server: String,
    /// `kube-system`'s UID, or `unknown (why)`.
    pub cluster_uid: String,
    /// The server's gitVersion, or `unknown (why)`.
    pub server_version: String,
}

impl Target {
    /// One line: `context X, server Y, cluster UID Z, Kubernetes V, kubeconfig K`.
    pub fn line(&self) -> String {
        format!(
            "context {}, server {}, cluster UID (kube-system) {}, Kubernetes {}, kubeconfig {}",
            self.context.as_deref().unwrap_or("<none>"),
            self.server,
            self.cluster_uid,
            self.server_version,
            self.kubeconfig
                .as_ref()
                .map_or("<in-cluster>".to_string(), |p| p.display().to_string()),
        )
    }
}

#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    #[error("reading kubeconfig {path}: {message}")]
    Kubeconfig { path: PathBuf, message: String },
    #[error(
        "no cluster to examine: pass --kubeconfig PATH or set KUBECONFIG (no ~/.kube/config found)"
    )]
    NoConfig,
    #[error(
        "no context {} in kubeconfig {path}; its contexts: {known} (`kubectl config get-contexts` lists them)",
        quoted(.context)
    )]
    NoSuchContext {
        context: String,
        path: PathBuf,
        known: String,
    },
    #[error(
        "--context {} needs a kubeconfig: pass --kubeconfig PATH or set KUBECONFIG",
        quoted(.0)
    )]
    ContextWithoutKubeconfig(String),
    #[error("building a client: {0}")]
    Client(String),
}

/// A client for `kubeconfig` (default: `$KUBECONFIG`, `~/.kube/config`,
/// then the in-cluster config), and the target it names. The cluster is
/// asked for its identity and version here; failures to read them are
/// kept in the target, not returned.
///
/// `context` picks a context of that kubeconfig instead of its current
/// one, as `kubectl --context` does.
pub async fn connect(
    kubeconfig: Option<&Path>,
    context: Option<&str>,
) -> Result<(Client, Target), TargetError> {
    let (mut config, path, context) = match kubeconfig {
        Some(p) => from_file(p, context).await?,
        None => match default_kubeconfig() {
            Some(p) => from_file(&p, context).await?,
            None if context.is_some() => {
                return Err(TargetError::ContextWithoutKubeconfig(
                    context.unwrap_or_default().to_owned(),
                ));
            }
            None => (
                kube::Config::incluster().map_err(|_| TargetError::NoConfig)?,
                None,
                None,
            ),
        },
    };
    config.connect_timeout = Some(CONNECT_TIMEOUT);
    config.read_timeout = Some(READ_TIMEOUT);
    let server = config.cluster_url.to_string();
    let client = crate::cluster::client::client_from_config(config)
        .map_err(|e| TargetError::Client(e.to_string()))?;
    let namespaces = Api::<Namespace>::all(client.clone());
    let (uid, version) = tokio::join!(namespaces.get("kube-system"), client.apiserver_version());
    let target = Target {
        kubeconfig: path,
        context,
        server,
        cluster_uid: match uid {
            Ok(ns) => ns.metadata.uid.unwrap_or_else(|| "unknown (no uid)".into()),
            Err(e) => format!("unknown ({e})"),
        },
        server_version: version.map_or_else(|e| format!("unknown ({e})"), |v| v.git_version),
    };
    Ok((client, target))
}

/// `$KUBECONFIG`'s first file, else `~/.kube/config`, if it exists.
fn default_kubeconfig() -> Option<PathBuf> {
    if let Some(v) = std::env::var_os("KUBECONFIG").filter(|v| !v.is_empty()) {
        return std::env::split_paths(&v).next();
    }
    let p = PathBuf::from(std::env::var_os("HOME")?).join(".kube/config");
    p.exists().then_some(p)
}

async fn from_file(
    path: &Path,
    context: Option<&str>,
) -> Result<(kube::Config, Option<PathBuf>, Option<String>), TargetError> {
    let err = |message: String| TargetError::Kubeconfig {
        path: path.to_path_buf(),
        message,
    };
    let kc = Kubeconfig::read_from(path).map_err(|e| err(e.to_string()))?;
    if let Some(wanted) = context
        && !kc.contexts.iter().any(|c| c.name == wanted)
    {
        let known: Vec<&str> = kc.contexts.iter().map(|c| c.name.as_str()).collect();
        return Err(TargetError::NoSuchContext {
            context: wanted.to_owned(),
            path: path.to_path_buf(),
            known: if known.is_empty() {
                "none".into()
            } else {
                known.join(", ")
            },
        });
    }
    let context = context.map(str::to_owned).or(kc.current_context.clone());
    let options = KubeConfigOptions {
        context: context.clone(),
        ..KubeConfigOptions::default()
    };
    let config = kube::Config::from_custom_kubeconfig(kc, &options)
        .await
        .map_err(|e| err(e.to_string()))?;
    Ok((config, Some(path.to_path_buf()), context))
}
