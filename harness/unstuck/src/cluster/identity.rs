//! Which cluster a run is about to change, and whether unstuck made it.
//!
//! A cluster unstuck brings up carries a marker: the ConfigMap
//! `kube-system/unstuck-cluster` holding that cluster's kube-system
//! namespace UID. The UID makes the marker hard to fake by accident: a
//! marker copied to another cluster (a restored backup, a `kubectl apply`
//! of a dump) names a UID that cluster does not have, and does not count.
//! On any cluster without a valid marker, `unstuck run` needs
//! `--allow-existing-cluster=<context>` naming the kubeconfig's current
//! context exactly.

use std::path::Path;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::{Api, Client, api::PostParams};

pub const MARKER_NAMESPACE: &str = "kube-system";
pub const MARKER_NAME: &str = "unstuck-cluster";
/// The marker's key for the kube-system namespace UID.
pub const UID_KEY: &str = "kubeSystemUid";

#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    #[error("reading kubeconfig {path}: {message}")]
    Kubeconfig { path: String, message: String },
    #[error("reading the kube-system namespace (its UID identifies the cluster): {0}")]
    KubeSystem(#[source] kube::Error),
    #[error("writing the marker {MARKER_NAMESPACE}/{MARKER_NAME}: {0}")]
    Mark(#[source] kube::Error),
    #[error(
        "{MARKER_NAMESPACE}/{MARKER_NAME} exists but names kube-system UID {found}, not this cluster's {uid}; left alone"
    )]
    ForeignMarker { found: String, uid: String },
}

/// Why `run` refuses a cluster.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum GuardError {
    #[error(
        "context '{context}' ({server}) is a cluster unstuck did not create (no valid {MARKER_NAMESPACE}/{MARKER_NAME} marker); scenarios create, break and repair objects there.\n  If that is what you want, add --allow-existing-cluster={context}"
    )]
    NotAllowed { context: String, server: String },
    #[error(
        "--allow-existing-cluster needs the name of the context it allows; the current context is '{context}' ({server}): --allow-existing-cluster={context}"
    )]
    NoContextGiven { context: String, server: String },
    #[error(
        "--allow-existing-cluster={given} does not name the current context '{context}' ({server}); refusing to change that cluster"
    )]
    WrongContext {
        given: String,
        context: String,
        server: String,
    },
}

/// The cluster a client talks to, as a person would recognise it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ClusterIdentity {
    pub context: String,
    pub server: String,
    pub kube_system_uid: String,
}

impl std::fmt::Display for ClusterIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "server {}, context '{}', kube-system UID {}",
            self.server, self.context, self.kube_system_uid
        )
    }
}

/// The current context of a kubeconfig and its cluster's server.
pub fn kubeconfig_context(path: &Path) -> Result<(String, String), IdentityError> {
    kubeconfig_context_named(path, None)
}

/// Context `name` of a kubeconfig (its current one when `None`, as
/// `kubectl --context`) and its cluster's server.
pub fn kubeconfig_context_named(
    path: &Path,
    name: Option<&str>,
) -> Result<(String, String), IdentityError> {
    let err = |message: String| IdentityError::Kubeconfig {
        path: path.display().to_string(),
        message,
    };
    let kc = kube::config::Kubeconfig::read_from(path).map_err(|e| err(e.to_string()))?;
    let context = match name {
        Some(n) if kc.contexts.iter().any(|c| c.name == n) => n.to_owned(),
        Some(n) => {
            let have: Vec<&str> = kc.contexts.iter().map(|c| c.name.as_str()).collect();
            return Err(err(format!(
                "it has no context '{n}' (it has: {})",
                have.join(", ")
            )));
        }
        None => kc
            .current_context
            .clone()
            .filter(|c| !c.is_empty())
            .ok_or_else(|| err("it has no current-context".into()))?,
    };
    let cluster = kc
        .contexts
        .iter()
        .find(|c| c.name == context)
        .and_then(|c| c.context.as_ref())
        .map(|c| c.cluster.clone())
        .ok_or_else(|| err(format!("its current context '{context}' is not defined")))?;
    let server = kc
        .clusters
        .iter()
        .find(|c| c.name == cluster)
        .and_then(|c| c.cluster.as_ref())
        .and_then(|c| c.server.clone())
        .ok_or_else(|| err(format!("cluster '{cluster}' has no server")))?;
    Ok((context, server))
}

pub async fn kube_system_uid(client: &Client) -> Result<String, IdentityError> {
    let ns: Api<Namespace> = Api::all(client.clone());
    ns.get(MARKER_NAMESPACE)
        .await
        .map_err(IdentityError::KubeSystem)?
        .metadata
        .uid
        .ok_or_else(|| {
            IdentityError::KubeSystem(kube::Error::Service(
                "the kube-system namespace has no UID".into(),
            ))
        })
}

/// The UID a valid marker must hold, or `None` when the cluster has no
/// marker.
async fn marker_uid(client: &Client) -> Result<Option<String>, IdentityError> {
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), MARKER_NAMESPACE);
    let cm = cms
        .get_opt(MARKER_NAME)
        .await
        .map_err(IdentityError::KubeSystem)?;
    Ok(cm.map(|cm| {
        cm.data
            .and_then(|d| d.get(UID_KEY).cloned())
            .unwrap_or_default()
    }))
}

/// Marks a cluster unstuck has just brought up. Created, never
/// overwritten: a marker with another UID is an error.
pub async fn mark(client: &Client) -> Result<(), IdentityError> {
    let uid = kube_system_uid(client).await?;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), MARKER_NAMESPACE);
    let cm: ConfigMap = serde_json::from_value(serde_json::json!({
        "metadata": {"name": MARKER_NAME, "namespace": MARKER_NAMESPACE,
                     "labels": {"app.kubernetes.io/managed-by": "unstuck"}},
        "data": {UID_KEY: uid, "note": "This cluster was brought up by unstuck; `unstuck run` may change anything on it."}
    }))
    .expect("static marker");
    match cms.create(&PostParams::default(), &cm).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(ae)) if ae.code == 409 => match marker_uid(client).await? {
            Some(found) if found == uid => Ok(()),
            found => Err(IdentityError::ForeignMarker {
                found: found.unwrap_or_default(),
                uid,
            }),
        },
        Err(e) => Err(IdentityError::Mark(e)),
    }
}

/// Who the client talks to, and whether unstuck made that cluster.
pub async fn identify(
    client: &Client,
    context: String,
    server: String,
) -> Result<(ClusterIdentity, bool), IdentityError> {
    let uid = kube_system_uid(client).await?;
    let marked = marker_uid(client).await?.is_some_and(|m| m == uid);
    Ok((
        ClusterIdentity {
            context,
            server,
            kube_system_uid: uid,
        },
        marked,
    ))
}

/// Whether `run` may change the cluster: one unstuck made (`marked`), or
/// one the user allowed by naming its context exactly (`allowed`; an
/// empty value is the flag given without one).
pub fn guard(
    target: &ClusterIdentity,
    marked: bool,
    allowed: Option<&str>,
) -> Result<(), GuardError> {
    let (context, server) = (target.context.clone(), target.server.clone());
    match allowed {
        _ if marked => Ok(()),
        None => Err(GuardError::NotAllowed { context, server }),
        Some("") => Err(GuardError::NoContextGiven { context, server }),
        Some(given) if given == target.context => Ok(()),
        Some(given) => Err(GuardError::WrongContext {
            given: given.to_string(),
            context,
            server,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target() -> ClusterIdentity {
        ClusterIdentity {
            context: "prod-eu".into(),
            server: "https://10.0.0.1:6443".into(),
            kube_system_uid: "4f1c".into(),
        }
    }

    #[test]
    fn a_marked_cluster_needs_no_opt_in() {
        assert_eq!(guard(&target(), true, None), Ok(()));
    }

    #[test]
    fn any_other_cluster_needs_its_exact_context_named() {
        let t = target();
        assert_eq!(guard(&t, false, Some("prod-eu")), Ok(()));
        let none = guard(&t, false, None).unwrap_err().to_string();
        assert!(
            none.contains("--allow-existing-cluster=prod-eu") && none.contains("10.0.0.1"),
            "{none}"
        );
        let empty = guard(&t, false, Some("")).unwrap_err().to_string();
        assert!(empty.contains("'prod-eu'"), "{empty}");
        let wrong = guard(&t, false, Some("staging")).unwrap_err();
        assert!(matches!(wrong, GuardError::WrongContext { .. }));
        assert!(
            wrong.to_string().contains("staging") && wrong.to_string().contains("'prod-eu'"),
            "{wrong}"
        );
        // A prefix or a different case is another context.
        assert!(guard(&t, false, Some("prod")).is_err());
        assert!(guard(&t, false, Some("PROD-EU")).is_err());
    }

    #[test]
    fn the_context_and_server_come_from_the_kubeconfig() {
        let dir = std::env::temp_dir().join(format!("unstuck-identity-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("kubeconfig");
        std::fs::write(
            &path,
            "apiVersion: v1\nkind: Config\ncurrent-context: b\nclusters:\n\
             - name: ca\n  cluster: {server: 'https://a:6443'}\n\
             - name: cb\n  cluster: {server: 'https://b:6443'}\n\
             contexts:\n- name: a\n  context: {cluster: ca, user: u}\n\
             - name: b\n  context: {cluster: cb, user: u}\nusers:\n- name: u\n  user: {}\n",
        )
        .unwrap();
        let got = kubeconfig_context(&path);
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(got.unwrap(), ("b".into(), "https://b:6443".into()));
    }
}
