//! Kube clients for the clusters unstuck meets, whichever provider made
//! them (or none did: `--kubeconfig`): one factory, so that every client
//! has the same retry policy and says who it is.

use std::path::Path;

use kube::Client;

use super::ClusterError;

/// A kube client for a kubeconfig file.
pub async fn client_for(path: &Path) -> Result<Client, ClusterError> {
    client_for_context(path, None).await
}

/// [`client_for`] with context `context` of the kubeconfig (its current
/// one when `None`).
pub async fn client_for_context(
    path: &Path,
    context: Option<&str>,
) -> Result<Client, ClusterError> {
    let kubeconfig = |source| ClusterError::Kubeconfig {
        path: path.to_path_buf(),
        source,
    };
    let kc = kube::config::Kubeconfig::read_from(path).map_err(kubeconfig)?;
    let options = kube::config::KubeConfigOptions {
        context: context.map(str::to_owned),
        ..Default::default()
    };
    let cfg = kube::Config::from_custom_kubeconfig(kc, &options)
        .await
        .map_err(kubeconfig)?;
    client_from_config(cfg).map_err(|source| ClusterError::Client {
        path: path.to_path_buf(),
        source,
    })
}

/// A client that does not retry 503s: kube's default policy backs off for
/// many minutes on them, and a dead aggregated API answers 503 forever.
/// To the doctor that answer is data, to be recorded at once.
///
/// It says who it is (`User-Agent: unstuck/<version>`): the API server
/// names a write's field manager after the client's agent, and the
/// doctor's owner verdict counts a write as a controller at work unless
/// its manager is a person's tool. Without it kube's writes show as
/// `unknown`.
pub fn client_from_config(mut cfg: kube::Config) -> Result<Client, kube::Error> {
    cfg.default_retry = false;
    cfg.headers.push((
        http::header::USER_AGENT,
        http::HeaderValue::from_static(concat!("unstuck/", env!("CARGO_PKG_VERSION"))),
    ));
    Client::try_from(cfg)
}
