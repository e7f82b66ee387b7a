//! The actions of each rung of the node ladder: signals to processes
//! (only to the very process planned, by pid and start time), unmounts, a
//! thawed cgroup, a restarted runtime or kubelet, a written-back CNI
//! configuration, a force delete when allowed.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::{
    Api, Client,
    api::{DeleteParams, Preconditions},
};
use unstuck_core::doctor::node::{NodeRemedy, ProcessTarget};

use crate::node::{Node, NodeError};

use super::freezer;

/// Whether `target` is still the same process (pid and start time).
async fn still_there(node: &dyn Node, target: &ProcessTarget) -> Result<Option<char>, NodeError> {
    Ok(node
        .processes()
        .await?
        .into_iter()
        .find(|p| p.pid == target.pid && p.start_time == target.start_time && p.state != 'Z')
        .map(|p| p.state))
}

/// Signals a process and waits up to `within` for it to go.
pub(super) async fn signal_and_wait(
    node: &dyn Node,
    target: &ProcessTarget,
    sig: i32,
    within: Duration,
) -> Result<bool, NodeError> {
    node.signal(target.pid, sig).await?;
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if still_there(node, target).await?.is_none() {
            return Ok(true);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(still_there(node, target).await?.is_none())
}

/// Marks a step failed and passes its line through.
fn fail(line: String, ok: &mut bool) -> String {
    *ok = false;
    line
}

/// Takes one remedy. Never fails as a whole: each action's result is a
/// line, and `ok` says whether all succeeded.
pub(super) async fn apply_step(
    client: &Client,
    node: &dyn Node,
    remedy: &NodeRemedy,
    force_used: &mut bool,
) -> (bool, Vec<String>) {
    let mut ok = true;
    let mut lines = Vec::new();
    match remedy {
        NodeRemedy::KillShim { shims } => {
            for s in shims {
                lines.push(kill_shim(node, s, &mut ok).await);
            }
        }
        NodeRemedy::ThawCgroup { cgroups } => {
            let (thawed, done) = freezer::thaw(node, cgroups).await;
            ok &= thawed;
            lines.extend(done);
        }
        NodeRemedy::RestartRuntime => {
            lines.push(match node.restart_runtime().await {
                Ok(r) => r.to_string(),
                Err(e) => fail(format!("restarting containerd: {e}"), &mut ok),
            });
        }
        NodeRemedy::RestartKubelet => {
            lines.push(match node.restart_kubelet().await {
                Ok(r) => format!("{r} (healthz ok)"),
                Err(e) => fail(format!("restarting the kubelet: {e}"), &mut ok),
            });
        }
        NodeRemedy::ReleaseHolder { stop, unmount } => {
            for p in stop {
                lines.push(stop_holder(node, p, &mut ok).await);
            }
            for path in unmount {
                lines.push(match node.unmount(path, false).await {
                    Ok(()) => format!("unmounted {}", path.display()),
                    Err(e) => fail(format!("{e}"), &mut ok),
                });
            }
        }
        NodeRemedy::LazyUnmount { paths } => {
            for path in paths {
                lines.push(match node.unmount(path, true).await {
                    Ok(()) => format!("lazily unmounted {}", path.display()),
                    Err(e) => fail(format!("{e}"), &mut ok),
                });
            }
        }
        NodeRemedy::RestoreCniConfig { path, content } => {
            lines.push(match node.write_file(path, content).await {
                Ok(()) => format!(
                    "wrote this cluster's CNI configuration back to {} ({} bytes); containerd reloads it",
                    path.display(),
                    content.len()
                ),
                Err(e) => fail(format!("{e}"), &mut ok),
            });
        }
        NodeRemedy::AwaitKubelet { until } => lines.push(match until {
            Some(t) => format!("waiting for the kubelet's retry at {t}"),
            None => "waiting for the kubelet".to_owned(),
        }),
        NodeRemedy::ForceDelete {
            namespace,
            name,
            uid,
        } => {
            lines.push(force_delete(client, (namespace, name, uid), force_used, &mut ok).await);
        }
    }
    (ok, lines)
}

/// SIGKILL to a stopped shim, unless it is already gone.
async fn kill_shim(node: &dyn Node, s: &ProcessTarget, ok: &mut bool) -> String {
    match still_there(node, s).await {
        Ok(None) => format!("shim {} already gone", s.pid),
        Ok(Some(_)) => {
            match signal_and_wait(node, s, libc::SIGKILL, Duration::from_secs(5)).await {
                Ok(true) => format!("SIGKILL to shim {} ({}): gone", s.pid, s.command),
                Ok(false) => fail(
                    format!("SIGKILL to shim {}: still there after 5 s", s.pid),
                    ok,
                ),
                Err(e) => fail(format!("SIGKILL to shim {}: {e}", s.pid), ok),
            }
        }
        Err(e) => fail(format!("checking shim {}: {e}", s.pid), ok),
    }
}

/// SIGTERM to a process holding the pod's directory, SIGKILL when it
/// ignores that, unless it is already gone.
async fn stop_holder(node: &dyn Node, p: &ProcessTarget, ok: &mut bool) -> String {
    match still_there(node, p).await {
        Ok(None) => format!("process {} already gone", p.pid),
        Ok(Some(_)) => {
            match signal_and_wait(node, p, libc::SIGTERM, Duration::from_secs(5)).await {
                Ok(true) => {
                    format!("stopped process {} ({}) with SIGTERM", p.pid, p.command)
                }
                Ok(false) => {
                    match signal_and_wait(node, p, libc::SIGKILL, Duration::from_secs(5)).await {
                        Ok(true) => format!(
                            "killed process {} ({}): it ignored SIGTERM",
                            p.pid, p.command
                        ),
                        Ok(false) => fail(format!("process {} survives SIGKILL", p.pid), ok),
                        Err(e) => fail(format!("SIGKILL to {}: {e}", p.pid), ok),
                    }
                }
                Err(e) => fail(format!("SIGTERM to {}: {e}", p.pid), ok),
            }
        }
        Err(e) => fail(format!("checking process {}: {e}", p.pid), ok),
    }
}

/// Deletes the pod object with grace period 0 (this UID only), without
/// the kubelet; loud.
async fn force_delete(
    client: &Client,
    (namespace, name, uid): (&str, &str, &Option<String>),
    force_used: &mut bool,
    ok: &mut bool,
) -> String {
    tracing::warn!(
        "force deleting pod {namespace}/{name}: the kubelet did not finish it; its node may keep mounts or containers"
    );
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let dp = DeleteParams {
        grace_period_seconds: Some(0),
        preconditions: Some(Preconditions {
            uid: uid.clone(),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match pods.delete(name, &dp).await {
        Ok(_) => {
            *force_used = true;
            format!("FORCE deleted pod {namespace}/{name} (grace period 0) without the kubelet")
        }
        Err(kube::Error::Api(s)) if s.code == 404 => "pod already gone".to_owned(),
        Err(e) => fail(format!("force delete of {namespace}/{name}: {e}"), ok),
    }
}
