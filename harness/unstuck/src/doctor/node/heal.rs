//! Healing one stuck pod: the ladder applied one rung at a time, each
//! followed by a wait for the kubelet and a fresh look; the actions of
//! each rung are in [`super::act`].

use std::time::{Duration, Instant};

use k8s_openapi::{api::core::v1::Pod, jiff::Timestamp};
use kube::{Api, Client};
use unstuck_core::doctor::node::{
    Covered, DiagnoseNodeOptions, NodeFinding, NodeRemedy, NodeStep, covered, diagnose_pod,
    plan_node,
};

use unstuck_core::doctor::snapshot::status_container_ids;

use crate::node::Node;

use super::act::apply_step;
use super::gather::gather;
use super::prove::prove;
use super::{
    AppliedNodeStep, HealOptions, HealOutcome, HealTimings, NodeDoctorError, NodeDoctorReport, api,
};

/// Diagnoses the pod on its node and, with [`HealOptions::apply`], heals
/// it: one rung of the ladder at a time, each followed by a wait for the
/// kubelet and a fresh diagnosis, until the pod is gone or the ladder is
/// exhausted; then proves recovery.
pub async fn heal_pod(
    client: &Client,
    node: &dyn Node,
    namespace: &str,
    name: &str,
    opts: &HealOptions,
) -> Result<NodeDoctorReport, NodeDoctorError> {
    let start = Instant::now();
    let diag = DiagnoseNodeOptions {
        stuck_after: opts.stuck_after,
    };
    let mut report = new_report(node, namespace, name);
    // A shown pod is that pod: one made since with its name was not shown.
    report.uid = opts.shown.as_ref().map(|s| s.uid.clone());
    // Runtime and container IDs seen over the whole heal, for the proof.
    let mut ids: Vec<String> = Vec::new();
    let mut tried: Vec<&'static str> = Vec::new();
    let mut gone = false;
    let at = Round {
        client,
        namespace,
        name,
        opts,
        start,
    };

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
        let (step, left_out) = match opts.shown.as_ref().map(|s| covered(&s.steps, &step)) {
            None | Some(Covered::Whole) => (step, Vec::new()),
            Some(Covered::Part { step, left }) => (step, left),
            Some(Covered::Not) => {
                report.steps.push(not_shown(step, &finding, start));
                report.outcome = HealOutcome::StepNotShown;
                report.timings.total_ms = start.elapsed().as_millis();
                return Ok(report);
            }
        };
        tried.push(step.remedy.name());
        let Some(now_gone) = take_step(&at, node, step, &finding, &mut report).await? else {
            break;
        };
        if let Some(taken) = report.steps.last_mut() {
            taken.actions.extend(
                left_out
                    .iter()
                    .map(|l| format!("left: {l}, not in the plan you confirmed")),
            );
        }
        gone = now_gone;
        if gone {
            break;
        }
    }

    if gone {
        prove_gone(&at, node, &ids, &mut report).await?;
    }
    report.timings.total_ms = start.elapsed().as_millis();
    Ok(report)
}

/// A rung the plan shown did not cover, recorded as not taken.
fn not_shown(step: NodeStep, finding: &NodeFinding, start: Instant) -> AppliedNodeStep {
    AppliedNodeStep {
        finding_summary: finding.summary.clone(),
        ok: false,
        actions: vec![format!(
            "not taken: {} ({}) was not in the plan you confirmed; the pod is left as it is (run the doctor again to review it)",
            step.remedy.name(),
            step.why
        )],
        step,
        started_at_ms: start.elapsed().as_millis(),
        took_ms: 0,
        pod_gone: false,
    }
}

/// The pod left: when, the proof that the node let go of it, and the
/// outcome that follows.
async fn prove_gone(
    at: &Round<'_>,
    node: &dyn Node,
    ids: &[String],
    report: &mut NodeDoctorReport,
) -> Result<(), NodeDoctorError> {
    if report.timings.pod_gone_ms.is_none() {
        report.timings.pod_gone_ms = Some(at.start.elapsed().as_millis());
    }
    prove(node, at.namespace, at.name, ids, at.opts, report).await?;
    report.outcome = if report.leftovers.is_empty() {
        HealOutcome::Recovered
    } else {
        HealOutcome::GoneWithLeftovers
    };
    Ok(())
}

/// The report of a heal not yet begun: given up unless a round says
/// otherwise.
fn new_report(node: &dyn Node, namespace: &str, name: &str) -> NodeDoctorReport {
    NodeDoctorReport {
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
    }
}

/// What a step of the heal needs besides the node.
struct Round<'a> {
    client: &'a Client,
    namespace: &'a str,
    name: &'a str,
    opts: &'a HealOptions,
    /// When the heal began: step times are measured from it.
    start: Instant,
}

/// Takes one rung and waits for the kubelet, recording the step. A force
/// rung without permission is recorded as not taken, and ends the heal
/// (`None`); otherwise whether the pod is gone after the wait.
async fn take_step(
    at: &Round<'_>,
    node: &dyn Node,
    step: NodeStep,
    finding: &NodeFinding,
    report: &mut NodeDoctorReport,
) -> Result<Option<bool>, NodeDoctorError> {
    let Round {
        client,
        namespace,
        name,
        opts,
        start,
    } = *at;
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
        return Ok(None);
    }
    let t0 = Instant::now();
    let (ok, actions) = apply_step(client, node, &step.remedy, &mut report.force_used).await;
    let wait = wait_budget(&step.remedy, finding, opts);
    let gone = wait_gone(client, namespace, name, report.uid.as_deref(), wait).await?;
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
    Ok(Some(gone))
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
