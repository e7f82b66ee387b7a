//! The node doctor's I/O half: for a pod stuck terminating, gather what
//! its node shows ([`gather`]), hand it to the pure diagnosis and ladder
//! in [`unstuck_core::doctor::node`], apply the ladder one step at a time
//! with a fresh look between steps ([`heal_pod`]), and prove recovery:
//! the pod left the API through the kubelet's own final delete (not a
//! force delete), nothing is mounted under its directory any more, and
//! the runtime lists nothing for it.
//!
//! Dry-run unless [`HealOptions::apply`]; a force delete only with
//! [`HealOptions::allow_force`], and then reported as such.

mod freezer;

use std::time::{Duration, Instant};

use k8s_openapi::{
    api::{
        coordination::v1::Lease,
        core::v1::{Event, Node as K8sNode, NodeCondition, Pod},
    },
    jiff::{SignedDuration, Timestamp},
};
use kube::{
    Api, Client,
    api::{DeleteParams, ListParams, Preconditions},
};
use serde::Serialize;
use unstuck_core::doctor::node::{
    CniFacts, DiagnoseNodeOptions, KubeletEvent, NodeFacts, NodeFinding, NodeRemedy, NodeStep,
    ProcessTarget, SyncLoopOp, diagnose_pod, klog_records, parse_kubelet_log, plan_node, pod_dir,
};

use unstuck_core::doctor::snapshot::status_container_ids;

use crate::node::{Node, NodeError, runtime_facts};

/// Why the node doctor could not do its job (as opposed to a remedy that
/// did not help, which is in the report).
#[derive(Debug, thiserror::Error)]
pub enum NodeDoctorError {
    #[error("kubernetes API call failed while {what}: {source}")]
    Api {
        what: String,
        #[source]
        source: kube::Error,
    },
    #[error(transparent)]
    Node(#[from] NodeError),
}

fn api(what: impl Into<String>) -> impl FnOnce(kube::Error) -> NodeDoctorError {
    let what = what.into();
    move |source| NodeDoctorError::Api { what, source }
}

/// How [`heal_pod`] works.
#[derive(Clone, Debug)]
pub struct HealOptions {
    /// Take remedies; otherwise diagnose and plan only (the default).
    pub apply: bool,
    /// Allow the last rung, a force delete of the pod object.
    pub allow_force: bool,
    /// A pod is stuck this long past its deletionTimestamp.
    pub stuck_after: Duration,
    /// How long to give the kubelet after a step before looking again.
    pub settle: Duration,
    /// The longest wait for the kubelet's volume retry: its backoff caps
    /// at 2m2s, plus a margin. A wait after a volume remedy lasts until the
    /// retry the kubelet announced, at least [`HealOptions::settle`], at
    /// most this.
    pub kubelet_retry_cap: Duration,
    /// After the pod is gone, how long to wait for its mounts, tasks,
    /// shims and runtime containers to go before calling them leftovers
    /// (the kubelet removes dead containers of deleted pods in its next
    /// garbage collection, which runs every minute).
    pub proof_timeout: Duration,
    /// How much of the end of the kubelet's log to read.
    pub log_tail_bytes: u64,
    /// At most this many remedies.
    pub max_steps: usize,
    /// Remedies never to take, by name (`RestartKubelet`, `KillShim`,
    /// `RestartRuntime`, `ReleaseHolder`, `LazyUnmount`, ...): for a node where, say, killing
    /// processes is not acceptable. The ladder goes on with the next rung.
    pub skip: Vec<String>,
}

impl Default for HealOptions {
    fn default() -> Self {
        Self {
            apply: false,
            allow_force: false,
            stuck_after: Duration::from_secs(10),
            settle: Duration::from_secs(60),
            kubelet_retry_cap: Duration::from_secs(122 + 15),
            proof_timeout: Duration::from_secs(90),
            log_tail_bytes: 16 << 20,
            max_steps: 8,
            skip: Vec::new(),
        }
    }
}

/// How a heal ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum HealOutcome {
    /// The pod does not exist.
    PodNotFound,
    /// The pod is not stuck; nothing was done.
    NotStuck,
    /// Dry run: diagnosed and planned only.
    DryRun,
    /// The pod is gone and nothing of it is left on the node.
    Recovered,
    /// The pod is gone, but something of it is left on the node.
    GoneWithLeftovers,
    /// The ladder ran out (or needed force that was not allowed).
    GaveUp,
}

/// What one remedy did.
#[derive(Clone, Debug, Serialize)]
pub struct AppliedNodeStep {
    pub step: NodeStep,
    /// The diagnosis it acted on.
    pub finding_summary: String,
    /// Whether every action of the step succeeded.
    pub ok: bool,
    /// What was done (or why not), one line each.
    pub actions: Vec<String>,
    /// Milliseconds since the heal started, when the step began.
    pub started_at_ms: u128,
    /// How long the step and its wait for the kubelet took, in ms.
    pub took_ms: u128,
    /// Whether the pod was gone at the end of its wait.
    pub pod_gone: bool,
}

/// How long the phases of a heal took, in milliseconds from its start.
#[derive(Clone, Debug, Default, Serialize)]
pub struct HealTimings {
    /// Until the first diagnosis.
    pub diagnosed_ms: u128,
    /// Until the pod left the API.
    pub pod_gone_ms: Option<u128>,
    /// Until the end, proof included.
    pub total_ms: u128,
}

/// Everything a heal did and saw.
#[derive(Clone, Debug, Serialize)]
pub struct NodeDoctorReport {
    /// `namespace/name`.
    pub pod: String,
    pub uid: Option<String>,
    pub node: String,
    pub outcome: HealOutcome,
    /// The first diagnosis, with its evidence.
    pub initial: Option<NodeFinding>,
    /// The ladder planned from it.
    pub plan: Vec<NodeStep>,
    /// The remedies taken, in order.
    pub steps: Vec<AppliedNodeStep>,
    /// Whether the pod object was force deleted (leaves the node dirty).
    pub force_used: bool,
    /// The facts that prove recovery.
    pub proof: Vec<String>,
    /// What of the pod is still on the node.
    pub leftovers: Vec<String>,
    pub timings: HealTimings,
}

impl NodeDoctorReport {
    /// Recovered: gone through the kubelet, nothing left, no force.
    pub fn recovered_without_force(&self) -> bool {
        self.outcome == HealOutcome::Recovered && !self.force_used
    }
}

/// A pod past its deletionTimestamp on a node.
#[derive(Clone, Debug, Serialize)]
pub struct StuckPod {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub overdue_seconds: i64,
}

/// The pods on `node_name` that are more than `stuck_after` past their
/// deletionTimestamp (which already includes the grace period) and not yet
/// finally deleted by the kubelet (`deletionGracePeriodSeconds` 0 means
/// only finalizers hold them: not a node matter). Keyed on
/// deletionTimestamp, never on the phase.
pub async fn stuck_pods(
    client: &Client,
    node_name: &str,
    stuck_after: Duration,
) -> Result<Vec<StuckPod>, NodeDoctorError> {
    let pods: Api<Pod> = Api::all(client.clone());
    let list = pods
        .list(&ListParams::default().fields(&format!("spec.nodeName={node_name}")))
        .await
        .map_err(api(format!("listing pods on node {node_name}")))?;
    let now = Timestamp::now();
    let threshold = SignedDuration::try_from(stuck_after).unwrap_or(SignedDuration::MAX);
    let mut out: Vec<StuckPod> = list
        .items
        .into_iter()
        .filter_map(|p| {
            let m = p.metadata;
            let overdue = now.duration_since(m.deletion_timestamp?.0);
            (overdue > threshold && m.deletion_grace_period_seconds != Some(0)).then(|| StuckPod {
                namespace: m.namespace.unwrap_or_default(),
                name: m.name.unwrap_or_default(),
                uid: m.uid.unwrap_or_default(),
                overdue_seconds: overdue.as_secs(),
            })
        })
        .collect();
    out.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    Ok(out)
}

/// Heals every pod stuck on the node, one after the other.
pub async fn heal_node(
    client: &Client,
    node: &impl Node,
    opts: &HealOptions,
) -> Result<Vec<NodeDoctorReport>, NodeDoctorError> {
    let mut reports = Vec::new();
    for p in stuck_pods(client, node.name(), opts.stuck_after).await? {
        reports.push(heal_pod(client, node, &p.namespace, &p.name, opts).await?);
    }
    Ok(reports)
}

/// Collects what the node shows about one pod; `None` when the pod is not
/// in the API.
pub async fn gather(
    client: &Client,
    node: &impl Node,
    namespace: &str,
    name: &str,
    log_tail_bytes: u64,
) -> Result<Option<NodeFacts>, NodeDoctorError> {
    let taken_at = Timestamp::now();
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let Some(pod) = pods
        .get_opt(name)
        .await
        .map_err(api(format!("reading pod {namespace}/{name}")))?
    else {
        return Ok(None);
    };
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let events: Api<Event> = Api::namespaced(client.clone(), namespace);
    let pod_events = events
        .list(&ListParams::default().fields(&format!("involvedObject.uid={uid}")))
        .await
        .map_err(api(format!("listing events of pod {namespace}/{name}")))?
        .items;
    let from_status = status_container_ids(&pod);
    let runtime = runtime_facts(node, &uid, &from_status).await;
    let mut ids = runtime.ids();
    ids.extend(from_status);
    let key = format!("{namespace}/{name}");
    let log = node.kubelet_log_tail(log_tail_bytes).await?;
    let kubelet_log_available = log.is_some();
    let quoted_key = format!("\"{key}\"");
    let kubelet_log: Vec<String> = klog_records(&log.unwrap_or_default())
        .into_iter()
        .filter(|l| {
            (!uid.is_empty() && l.contains(&uid))
                || l.contains(&quoted_key)
                || ids.iter().any(|id| l.contains(id.as_str()))
        })
        .collect();
    let dir = pod_dir(node.kubelet_dir(), &uid);
    let mounts = node
        .mounts()
        .await?
        .into_iter()
        .filter(|m| m.mount_point.starts_with(&dir))
        .collect();
    let holders = node.holders_of(&dir).await?;
    let processes = node.pod_processes(&uid).await?;
    let kubelet_running = match node.kubelet_running().await {
        Ok(r) => Some(r),
        Err(e) => {
            tracing::warn!("cannot tell whether the kubelet runs: {e}");
            None
        }
    };
    let (node_ready, node_lease_renewed) = node_standing(client, node.name()).await;
    let cni = cni_facts(node).await;
    let cgroups = freezer::cgroup_facts(node, &uid).await;
    Ok(Some(NodeFacts {
        taken_at,
        node: node.name().to_owned(),
        kubelet_dir: node.kubelet_dir().to_path_buf(),
        pod,
        pod_events,
        kubelet_log,
        kubelet_log_available,
        mounts,
        holders,
        runtime,
        kubelet_running,
        node_ready,
        node_lease_renewed,
        processes,
        cni,
        cgroups,
    }))
}

/// The node's CNI configuration directory and what is in it (best effort:
/// a node that cannot say gives `None`).
async fn cni_facts(node: &impl Node) -> Option<CniFacts> {
    let place = node.cni_config()?;
    let configs = match node.list_dir(&place.conf_dir).await {
        Ok(names) => names
            .into_iter()
            .filter(|n| n.ends_with(".conf") || n.ends_with(".conflist") || n.ends_with(".json"))
            .collect(),
        Err(e) => {
            tracing::warn!("cannot list {}: {e}", place.conf_dir.display());
            return None;
        }
    };
    Some(CniFacts {
        conf_dir: place.conf_dir,
        configs,
        own: place.own,
    })
}

/// The node's `Ready` condition and its Lease's last renewal, as the API
/// shows them. Best effort: a doctor that may not read Nodes or Leases
/// still diagnoses from the rest.
async fn node_standing(
    client: &Client,
    node_name: &str,
) -> (Option<NodeCondition>, Option<Timestamp>) {
    let nodes: Api<K8sNode> = Api::all(client.clone());
    let ready = match nodes.get_opt(node_name).await {
        Ok(n) => n
            .and_then(|n| n.status)
            .and_then(|s| s.conditions)
            .and_then(|cs| cs.into_iter().find(|c| c.type_ == "Ready")),
        Err(e) => {
            tracing::warn!("reading node {node_name}: {e}");
            None
        }
    };
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    let renewed = match leases.get_opt(node_name).await {
        Ok(l) => l
            .and_then(|l| l.spec)
            .and_then(|s| s.renew_time)
            .map(|t| t.0),
        Err(e) => {
            tracing::warn!("reading lease kube-node-lease/{node_name}: {e}");
            None
        }
    };
    (ready, renewed)
}

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
async fn signal_and_wait(
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

/// After the pod left the API: waits for the node to let go of it, then
/// records the proof (or the leftovers).
async fn prove(
    node: &impl Node,
    namespace: &str,
    name: &str,
    ids: &[String],
    opts: &HealOptions,
    report: &mut NodeDoctorReport,
) -> Result<(), NodeDoctorError> {
    let uid = report.uid.clone().unwrap_or_default();
    report.proof.push(if report.force_used {
        format!("pod {namespace}/{name} (uid {uid}) is gone from the API, but by a FORCE delete")
    } else {
        format!(
            "pod {namespace}/{name} (uid {uid}) is gone from the API, and unstuck never force deleted it: only the kubelet's final delete (grace 0) removes a pod"
        )
    });
    let dir = pod_dir(node.kubelet_dir(), &uid);
    let deadline = Instant::now() + opts.proof_timeout;
    let mut reaped_orphans = false;
    loop {
        let mut left = Vec::new();
        for m in node.mounts().await? {
            if m.mount_point.starts_with(&dir) {
                left.push(format!(
                    "mount {} ({} {})",
                    m.mount_point.display(),
                    m.fs_type,
                    m.source
                ));
            }
        }
        for h in node.holders_of(&dir).await? {
            left.push(format!(
                "process {} ({}) holds {}",
                h.pid,
                h.command,
                dir.display()
            ));
        }
        let rt = runtime_facts(node, &uid, ids).await;
        for t in &rt.tasks {
            left.push(format!(
                "runtime task {} (pid {}, {})",
                t.id, t.pid, t.status
            ));
        }
        // Exited containers' records are not running and hold nothing;
        // the kubelet's container garbage collection removes those of a
        // deleted pod, but only once a minute (ContainerGCPeriod, a constant
        // in pkg/kubelet/kubelet.go): waiting for it would double a node
        // case's time. They are named in the proof, not counted as left.
        let records: Vec<String> = rt
            .containers
            .iter()
            .map(|c| format!("{} ({:?})", c.id, c.kind))
            .collect();
        for e in &rt.errors {
            left.push(format!("runtime query failed: {e}"));
        }
        // A restart of containerd can orphan a stopped shim: its tasks are
        // cleaned up, but the process stays stopped. Reap it, once, loudly.
        let stale: Vec<_> = rt.shims.iter().filter(|s| s.is_stopped()).collect();
        if !stale.is_empty() && !reaped_orphans {
            reaped_orphans = true;
            for s in stale {
                let target = ProcessTarget {
                    pid: s.pid,
                    start_time: s.start_time,
                    command: s.command.clone(),
                };
                let gone =
                    signal_and_wait(node, &target, libc::SIGKILL, Duration::from_secs(5)).await?;
                report.proof.push(format!(
                    "cleanup: SIGKILL to stopped shim {} left behind by the runtime ({})",
                    s.pid,
                    if gone { "gone" } else { "still there" }
                ));
            }
            continue;
        }
        for s in &rt.shims {
            left.push(format!("shim {} (-id {}) state {}", s.pid, s.id, s.state));
        }
        if left.is_empty() {
            report.proof.push(format!(
                "nothing is mounted under {} any more",
                dir.display()
            ));
            report
                .proof
                .push("no process holds the pod's directory".to_owned());
            report.proof.push(format!(
                "the runtime runs no task or shim for the pod (IDs {})",
                if ids.is_empty() {
                    "<none known>".to_owned()
                } else {
                    ids.join(", ")
                }
            ));
            report.proof.push(if records.is_empty() {
                "the runtime lists no container of the pod".to_owned()
            } else {
                format!(
                    "the runtime still lists {} exited container record(s) of the pod, which the kubelet's container garbage collection removes within a minute: {}",
                    records.len(),
                    records.join(", ")
                )
            });
            break;
        }
        if Instant::now() >= deadline {
            report.leftovers = left;
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    if report
        .steps
        .iter()
        .any(|s| matches!(s.step.remedy, NodeRemedy::ThawCgroup { .. }))
    {
        match freezer::proof(node, &uid).await {
            Ok(line) => report.proof.push(line),
            Err(left) => report.leftovers.extend(left),
        }
    }
    // The kubelet's own words that it finished the pod.
    if let Some(log) = node.kubelet_log_tail(opts.log_tail_bytes).await? {
        let key = format!("{namespace}/{name}");
        let lines: Vec<&str> = log
            .lines()
            .filter(|l| l.contains(&key) || (!uid.is_empty() && l.contains(&uid)))
            .collect();
        let remove = parse_kubelet_log(lines.iter().copied()).into_iter().rev().find(|e| {
            matches!(&e.event, KubeletEvent::SyncLoop { op: SyncLoopOp::Remove, pods } if pods.contains(&key))
        });
        if let Some(e) = remove {
            report.proof.push(format!("kubelet log: {}", e.raw));
        }
        let cleaned = parse_kubelet_log(lines.iter().copied()).into_iter().rev().find(|e| {
            matches!(&e.event, KubeletEvent::OrphanVolumesCleaned { pod_uid, .. } if *pod_uid == uid)
        });
        if let Some(e) = cleaned {
            report.proof.push(format!("kubelet log: {}", e.raw));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{faults, node::LocalNode};

    fn assert_send<T: Send>(_: &T) {}

    /// The runner may `tokio::spawn` these: their futures must be Send.
    #[allow(dead_code, clippy::let_underscore_future)]
    fn futures_are_send(client: &Client, node: &LocalNode) {
        let opts = HealOptions::default();
        assert_send(&heal_pod(client, node, "ns", "p", &opts));
        assert_send(&heal_node(client, node, &opts));
        assert_send(&faults::wedge_shim::inject(client, node, "ns", "p"));
        assert_send(&faults::stop_kubelet::inject(client, node, "ns", "p"));
        assert_send(&faults::freeze_cgroup::inject(client, node, "ns", "p"));
        let busy = faults::busy_mount::BusyMountOptions::default();
        assert_send(&faults::busy_mount::inject(client, node, "ns", "p", &busy));
    }

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
