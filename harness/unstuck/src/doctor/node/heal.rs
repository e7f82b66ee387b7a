//! Healing one stuck pod: the ladder applied one rung at a time, each
//! followed by a wait for the kubelet and a fresh look, and the actions
//! of each rung (signals to processes, lazy unmounts, a thawed cgroup, a
//! restarted runtime or kubelet, a force delete when allowed).

use std::time::{Duration, Instant};

use k8s_openapi::{api::core::v1::Pod, jiff::Timestamp};
use kube::{
    Api, Client,
    api::{DeleteParams, Preconditions},
};
use unstuck_core::doctor::node::{
    DiagnoseNodeOptions, NodeFinding, NodeRemedy, ProcessTarget, diagnose_pod, plan_node,
};

use unstuck_core::doctor::snapshot::status_container_ids;

use crate::node::{Node, NodeError};

use super::gather::gather;
use super::prove::prove;
use super::{
    AppliedNodeStep, HealOptions, HealOutcome, HealTimings, NodeDoctorError, NodeDoctorReport, api,
    freezer,
};

/// Diagnoses the pod on its node and, with [`HealOptions::apply`], heals
/// it: one rung of the ladder at a time, each followed by a wait for the
/// kubelet and a fresh diagnosis, until the pod is gone or the ladder is
/// exhausted; then proves recovery.
pub async fn heal_pod(
    client: &Client,
    node: &impl Node,
    namespace: &str,
    name: &str,
    opts: &HealOptions,
) -> Result<NodeDoctorReport, NodeDoctorError> {
    let start = Instant::now();
    let diag = DiagnoseNodeOptions {
        stuck_after: opts.stuck_after,
    };
    let mut report = NodeDoctorReport {
        pod: format!("{namespace}/{name}"),
        uid: None,
        node: node.name().to_owned(),
        outcome: HealOutcome::GaveUp,
        initial: None,
        plan: Vec::new(),
        steps: Vec::new(),
        force_used: false,
        proof: Vec::new(),
        leftovers: Vec::new(),
        timings: HealTimings::default(),
    };
    // Runtime and container IDs seen over the whole heal, for the proof.
    let mut ids: Vec<String> = Vec::new();
    let mut tried: Vec<&'static str> = Vec::new();
    let mut gone = false;

    for round in 0..=opts.max_steps {
        let facts = gather(client, node, namespace, name, opts.log_tail_bytes).await?;
        let facts = match facts {
            Some(f) if report.uid.is_none() || f.pod.metadata.uid == report.uid => f,
            // Gone, or replaced by a new pod with the same name.
            _ => {
                gone = report.uid.is_some();
                if !gone {
                    report.outcome = HealOutcome::PodNotFound;
                    report.timings.total_ms = start.elapsed().as_millis();
                    return Ok(report);
                }
                break;
            }
        };
        report.uid.clone_from(&facts.pod.metadata.uid);
        ids.extend(facts.runtime.ids());
        ids.extend(status_container_ids(&facts.pod));
        ids.sort();
        ids.dedup();
        let finding = diagnose_pod(&facts, &diag);
        let steps = plan_node(&finding);
        if report.initial.is_none() {
            report.timings.diagnosed_ms = start.elapsed().as_millis();
            report.initial = Some(finding.clone());
            report.plan.clone_from(&steps);
        }
        if !finding.stuck {
            if round == 0 {
                report.outcome = HealOutcome::NotStuck;
                report.timings.total_ms = start.elapsed().as_millis();
                return Ok(report);
            }
            report
                .proof
                .push(format!("pod no longer stuck: {}", finding.summary));
            break;
        }
        if !opts.apply {
            report.outcome = HealOutcome::DryRun;
            report.timings.total_ms = start.elapsed().as_millis();
            return Ok(report);
        }
        if round == opts.max_steps {
            break;
        }
        let Some(step) = steps.into_iter().find(|s| {
            let name = s.remedy.name();
            !tried.contains(&name) && !opts.skip.iter().any(|k| k == name)
        }) else {
            break;
        };
        tried.push(step.remedy.name());
        let step_start = start.elapsed().as_millis();
        if step.force && !opts.allow_force {
            report.steps.push(AppliedNodeStep {
                finding_summary: finding.summary.clone(),
                ok: false,
                actions: vec![format!(
                    "not taken: {} bypasses the kubelet and force was not allowed; the pod stays stuck",
                    step.remedy.name()
                )],
                step,
                started_at_ms: step_start,
                took_ms: 0,
                pod_gone: false,
            });
            break;
        }
        let t0 = Instant::now();
        let (ok, actions) = apply_step(client, node, &step.remedy, &mut report.force_used).await;
        let wait = wait_budget(&step.remedy, &finding, opts);
        gone = wait_gone(client, namespace, name, report.uid.as_deref(), wait).await?;
        if gone {
            report.timings.pod_gone_ms = Some(start.elapsed().as_millis());
        }
        report.steps.push(AppliedNodeStep {
            step,
            finding_summary: finding.summary.clone(),
            ok,
            actions,
            started_at_ms: step_start,
            took_ms: t0.elapsed().as_millis(),
            pod_gone: gone,
        });
        if gone {
            break;
        }
    }

    if gone {
        if report.timings.pod_gone_ms.is_none() {
            report.timings.pod_gone_ms = Some(start.elapsed().as_millis());
        }
        prove(node, namespace, name, &ids, opts, &mut report).await?;
        report.outcome = if report.leftovers.is_empty() {
            HealOutcome::Recovered
        } else {
            HealOutcome::GoneWithLeftovers
        };
    }
    report.timings.total_ms = start.elapsed().as_millis();
    Ok(report)
}

/// How long to wait for the kubelet after a step.
fn wait_budget(remedy: &NodeRemedy, finding: &NodeFinding, opts: &HealOptions) -> Duration {
    match remedy {
        NodeRemedy::ReleaseHolder { .. }
        | NodeRemedy::LazyUnmount { .. }
        | NodeRemedy::AwaitKubelet { .. } => {
            let retry_in = finding
                .next_kubelet_retry
                .map(|t| {
                    let secs = Timestamp::now().duration_since(t).as_secs_f64();
                    Duration::from_secs_f64((-secs).max(0.0)) + Duration::from_secs(15)
                })
                .unwrap_or_default();
            retry_in.max(opts.settle).min(opts.kubelet_retry_cap)
        }
        NodeRemedy::ForceDelete { .. } => Duration::from_secs(30),
        NodeRemedy::KillShim { .. }
        | NodeRemedy::RestartRuntime
        | NodeRemedy::RestartKubelet
        | NodeRemedy::RestoreCniConfig { .. }
        | NodeRemedy::ThawCgroup { .. } => opts.settle,
    }
}

/// Waits until the pod (with this UID) is gone from the API.
async fn wait_gone(
    client: &Client,
    namespace: &str,
    name: &str,
    uid: Option<&str>,
    budget: Duration,
) -> Result<bool, NodeDoctorError> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let deadline = Instant::now() + budget;
    loop {
        let p = pods
            .get_opt(name)
            .await
            .map_err(api(format!("reading pod {namespace}/{name}")))?;
        if p.is_none_or(|p| p.metadata.uid.as_deref() != uid) {
            return Ok(true);
        }
        if Instant::now() >= deadline {
            return Ok(false);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Whether `target` is still the same process (pid and start time).
async fn still_there(node: &impl Node, target: &ProcessTarget) -> Result<Option<char>, NodeError> {
    Ok(node
        .processes()
        .await?
        .into_iter()
        .find(|p| p.pid == target.pid && p.start_time == target.start_time && p.state != 'Z')
        .map(|p| p.state))
}

/// Signals a process and waits up to `within` for it to go.
pub(super) async fn signal_and_wait(
    node: &impl Node,
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
async fn apply_step(
    client: &Client,
    node: &impl Node,
    remedy: &NodeRemedy,
    force_used: &mut bool,
) -> (bool, Vec<String>) {
    let mut ok = true;
    let mut lines = Vec::new();
    match remedy {
        NodeRemedy::KillShim { shims } => {
            for s in shims {
                let line = match still_there(node, s).await {
                    Ok(None) => format!("shim {} already gone", s.pid),
                    Ok(Some(_)) => {
                        match signal_and_wait(node, s, libc::SIGKILL, Duration::from_secs(5)).await
                        {
                            Ok(true) => format!("SIGKILL to shim {} ({}): gone", s.pid, s.command),
                            Ok(false) => fail(
                                format!("SIGKILL to shim {}: still there after 5 s", s.pid),
                                &mut ok,
                            ),
                            Err(e) => fail(format!("SIGKILL to shim {}: {e}", s.pid), &mut ok),
                        }
                    }
                    Err(e) => fail(format!("checking shim {}: {e}", s.pid), &mut ok),
                };
                lines.push(line);
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
                let line = match still_there(node, p).await {
                    Ok(None) => format!("process {} already gone", p.pid),
                    Ok(Some(_)) => {
                        match signal_and_wait(node, p, libc::SIGTERM, Duration::from_secs(5)).await
                        {
                            Ok(true) => {
                                format!("stopped process {} ({}) with SIGTERM", p.pid, p.command)
                            }
                            Ok(false) => match signal_and_wait(
                                node,
                                p,
                                libc::SIGKILL,
                                Duration::from_secs(5),
                            )
                            .await
                            {
                                Ok(true) => format!(
                                    "killed process {} ({}): it ignored SIGTERM",
                                    p.pid, p.command
                                ),
                                Ok(false) => {
                                    fail(format!("process {} survives SIGKILL", p.pid), &mut ok)
                                }
                                Err(e) => fail(format!("SIGKILL to {}: {e}", p.pid), &mut ok),
                            },
                            Err(e) => fail(format!("SIGTERM to {}: {e}", p.pid), &mut ok),
                        }
                    }
                    Err(e) => fail(format!("checking process {}: {e}", p.pid), &mut ok),
                };
                lines.push(line);
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
            lines.push(match pods.delete(name, &dp).await {
                Ok(_) => {
                    *force_used = true;
                    format!(
                        "FORCE deleted pod {namespace}/{name} (grace period 0) without the kubelet"
                    )
                }
                Err(kube::Error::Api(s)) if s.code == 404 => "pod already gone".to_owned(),
                Err(e) => fail(format!("force delete of {namespace}/{name}: {e}"), &mut ok),
            });
        }
    }
    (ok, lines)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::jiff::SignedDuration;
    use unstuck_core::doctor::node::NodeFacts;

    use super::*;

    fn finding_with_retry(retry_in: Option<i64>) -> NodeFinding {
        let facts: NodeFacts = serde_json::from_value(serde_json::json!({
            "takenAt": "2026-01-01T00:00:00Z",
            "node": "n",
            "kubeletDir": "/k",
            "pod": {"metadata": {"name": "p", "namespace": "ns", "uid": "u"}},
        }))
        .unwrap();
        let mut f = diagnose_pod(&facts, &DiagnoseNodeOptions::default());
        f.next_kubelet_retry = retry_in.map(|s| {
            Timestamp::now()
                .checked_add(SignedDuration::from_secs(s))
                .unwrap()
        });
        f
    }

    #[test]
    fn the_wait_after_a_volume_remedy_covers_the_announced_retry_within_the_cap() {
        let opts = HealOptions::default();
        let release = NodeRemedy::LazyUnmount { paths: vec![] };
        assert_eq!(
            wait_budget(&release, &finding_with_retry(None), &opts),
            opts.settle
        );
        let w = wait_budget(&release, &finding_with_retry(Some(100)), &opts);
        assert!(
            w > Duration::from_secs(110) && w <= Duration::from_secs(115),
            "{w:?}"
        );
        assert_eq!(
            wait_budget(&release, &finding_with_retry(Some(600)), &opts),
            opts.kubelet_retry_cap
        );
        assert_eq!(
            wait_budget(
                &NodeRemedy::RestartRuntime,
                &finding_with_retry(Some(600)),
                &opts
            ),
            opts.settle
        );
    }
}
