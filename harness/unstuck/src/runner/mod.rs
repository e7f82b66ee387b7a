//! The runner: one scenario from setup to cleanup. Steps run in order;
//! every wait has a deadline that names what it waited for; cleanup runs
//! on every way out (success, failure, timeout) and reports anything that
//! needed force.

mod cleanup;
pub mod conditions;
mod container;
mod controller;
pub mod create;
mod doctor_step;
pub mod names;
pub mod objects;
pub mod progress;
pub mod suite;

use std::{
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use std::sync::Arc;

use kube::{Client, api::DeleteParams};
use serde::{Deserialize, Serialize};
use unstuck_core::scenario::{
    Condition, ControllerCleanup, Expect, Fault, Located, Phase, PropagationPolicy, Scenario, Step,
};

use self::{
    conditions::{CheckContext, check, get},
    names::Names,
    objects::{NamespaceMap, api_for, read_manifests, resolve},
};
use crate::{
    cluster::exits::{ComponentExit, ExitLog},
    doctor::DoctorReport,
    faults::{Injected, busy_mount, freeze_cgroup, remove_cni_config, stop_kubelet, wedge_shim},
    node::AnyNode,
    wait::{self, Poll},
};

/// How long a deletion must hang before the doctor in a scenario calls it
/// stuck. Short, because the symptom gate has already shown it hangs.
pub const STUCK_AFTER: Duration = Duration::from_secs(3);

/// The longest the doctor step waits for late deletions (a grace period in
/// the future) to age, beyond [`STUCK_AFTER`].
const MAX_SETTLE: Duration = Duration::from_secs(30);

/// Where and against what a scenario runs.
#[derive(Clone)]
pub struct RunContext {
    pub client: Client,
    pub fixtures_dir: PathBuf,
    /// This scenario's output folder (evidence, backups, doctor report).
    pub out_dir: PathBuf,
    /// The node, for node-level faults, kubelet log conditions and the
    /// node doctor (any provider that gives node access).
    pub node: Option<Arc<AnyNode>>,
    /// The cluster's control-plane components that exit while it runs
    /// (restarted by the local provider's supervisor): a scenario's report
    /// names the ones that exited during it.
    pub cluster_exits: ExitLog,
}

/// The verdict of one scenario.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "result", rename_all = "camelCase")]
pub enum Outcome {
    Passed,
    Failed { step: usize, reason: String },
}

/// One step as it ran.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StepRecord {
    pub index: usize,
    pub kind: String,
    pub summary: String,
    pub duration_ms: u128,
    pub ok: bool,
    /// Quoted facts: what the cluster showed when the step passed, or why it failed.
    pub evidence: Vec<String>,
}

/// Everything a report needs about one scenario.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ScenarioReport {
    pub name: String,
    pub description: String,
    pub catalog_case: Option<u32>,
    /// The public thread reproduced (`owner/repo#number`), when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incident: Option<String>,
    pub file: PathBuf,
    pub namespaces: NamespaceMap,
    pub outcome: Outcome,
    pub steps: Vec<StepRecord>,
    /// The symptom gate's evidence, quoted from the cluster.
    pub symptoms: Vec<String>,
    /// `Kind: summary` of each finding the doctor made before any remedy.
    pub findings: Vec<String>,
    /// Remedies the doctor carried out.
    pub remedies: Vec<String>,
    /// From the start of the doctor step to its diagnosis.
    pub time_to_detect_ms: Option<u128>,
    /// From the start of the doctor step to the recovered gate passing.
    pub time_to_recover_ms: Option<u128>,
    pub duration_ms: u128,
    pub cleanup: cleanup::CleanupReport,
    pub out_dir: PathBuf,
    /// The cluster of its own the scenario ran on, when it had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub isolated: Option<suite::IsolatedCluster>,
    /// Control-plane components of its cluster that exited (and were
    /// restarted) while it ran: a failure then may be the cluster's, not
    /// the scenario's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cluster_exits: Vec<ComponentExit>,
    /// What waited on what when each doctor step looked, before any
    /// remedy: the graph of its first round, with the node doctor's causes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub graphs: Vec<StepGraph>,
    #[serde(skip)]
    pub doctor: Option<DoctorReport>,
}

/// The blocker graph one doctor step saw.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StepGraph {
    /// The step's number in the scenario (from 1, as `steps` lists them).
    pub step: usize,
    pub graph: unstuck_core::doctor::BlockerGraph,
}

impl ScenarioReport {
    pub fn passed(&self) -> bool {
        self.outcome == Outcome::Passed
    }

    /// A report for a scenario that never produced one of its own (its
    /// task panicked): it counts as failed, with the reason.
    pub fn lost(scenario: &Scenario, out_dir: PathBuf, reason: String) -> Self {
        Self::start(
            scenario,
            NamespaceMap::default(),
            out_dir,
            Outcome::Failed { step: 0, reason },
        )
    }

    /// A report with nothing recorded yet.
    fn start(
        scenario: &Scenario,
        namespaces: NamespaceMap,
        out_dir: PathBuf,
        outcome: Outcome,
    ) -> Self {
        Self {
            name: scenario.name.to_string(),
            description: scenario.description.to_string(),
            catalog_case: scenario.catalog_case,
            incident: scenario.incident.as_ref().map(|i| i.to_string()),
            file: scenario.path().to_path_buf(),
            namespaces,
            outcome,
            steps: Vec::new(),
            symptoms: Vec::new(),
            findings: Vec::new(),
            remedies: Vec::new(),
            time_to_detect_ms: None,
            time_to_recover_ms: None,
            duration_ms: 0,
            cleanup: Default::default(),
            out_dir,
            isolated: None,
            cluster_exits: Vec::new(),
            graphs: Vec::new(),
            doctor: None,
        }
    }
}

/// A short random id for this run's namespaces.
pub fn run_id() -> String {
    let n = k8s_openapi::jiff::Timestamp::now().as_nanosecond() as u64
        ^ (u64::from(std::process::id()) << 20);
    let mut x = n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (0..6)
        .map(|_| {
            let c = b"abcdefghijklmnopqrstuvwxyz0123456789"[(x % 36) as usize] as char;
            x /= 36;
            c
        })
        .collect()
}

/// Runs one scenario to its verdict; cleanup always runs.
pub async fn run_scenario(ctx: &RunContext, scenario: &Scenario) -> ScenarioReport {
    let (_keep, never) = tokio::sync::watch::channel(false);
    run_scenario_until(ctx, scenario, never).await
}

/// Like [`run_scenario`], but stops early (still cleaning up) once
/// `cancel` turns true: Ctrl-C of a whole run.
pub async fn run_scenario_until(
    ctx: &RunContext,
    scenario: &Scenario,
    mut cancel: tokio::sync::watch::Receiver<bool>,
) -> ScenarioReport {
    let started = Instant::now();
    let exits_before = ctx.cluster_exits.len();
    let names = Names::for_scenario(scenario, &ctx.fixtures_dir, &run_id());
    let ns = names.namespaces().clone();
    let _ = std::fs::create_dir_all(&ctx.out_dir);
    let mut run = ScenarioRun {
        ctx,
        scenario,
        names,
        created: Vec::new(),
        report: ScenarioReport::start(scenario, ns, ctx.out_dir.clone(), Outcome::Passed),
        doctor_started: None,
        last_injection: None,
        deleting_since: None,
        injected: Vec::new(),
        controllers: Vec::new(),
        backends: Vec::new(),
    };

    let deadline = scenario.timeout.as_std();
    let interrupted = async move {
        while !*cancel.borrow() {
            if cancel.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    };
    let outcome = tokio::select! {
        r = tokio::time::timeout(deadline, run.steps()) => r.unwrap_or_else(|_| Outcome::Failed {
            step: 0,
            reason: format!("the scenario's {} timeout ran out", *scenario.timeout),
        }),
        _ = interrupted => Outcome::Failed { step: 0, reason: "interrupted".into() },
    };
    // The step that was running when time ran out or the run was stopped.
    let outcome = match outcome {
        Outcome::Failed { step: 0, reason } => Outcome::Failed {
            step: run.report.steps.len() + 1,
            reason,
        },
        o => o,
    };
    run.report.outcome = outcome;
    progress::set(scenario.name.as_str(), "cleaning up".into());
    // Faults first: a busy mount or a stopped shim would keep the
    // scenario's pods, and so its namespaces, from ever going.
    let mut reverted = Vec::new();
    if let Some(node) = &ctx.node {
        for fault in run.injected.drain(..) {
            match fault.revert(node.as_ref()).await {
                Ok(done) => reverted.extend(done),
                Err(e) => reverted.push(format!("reverting {} FAILED: {e}", fault.describe())),
            }
        }
    }
    run.report.cleanup = cleanup::cleanup(&ctx.client, &run.created).await;
    run.report.cleanup.reverted = reverted;
    progress::clear(scenario.name.as_str());
    run.controllers.clear();
    let removed = container::remove_all(&mut run.backends).await;
    run.report.cleanup.reverted.extend(removed);
    run.report.duration_ms = started.elapsed().as_millis();
    run.report.cluster_exits = ctx.cluster_exits.since(exits_before);
    if let Ok(text) = serde_json::to_string_pretty(&run.report) {
        let _ = std::fs::write(ctx.out_dir.join("scenario.json"), text);
    }
    run.report
}

/// An object this run created, for cleanup: cleanup acts on it only
/// while the object of that name still has this UID, and removes only
/// the finalizer keys its manifest carried.
#[derive(Clone, Debug)]
pub struct Created {
    pub api_version: String,
    pub kind: String,
    pub namespace: Option<String>,
    pub name: String,
    pub uid: String,
    /// The finalizer keys the run's manifest put on it (and in its
    /// templates), over every apply of it.
    pub keys: cleanup::keys::ManifestKeys,
}

impl std::fmt::Display for Created {
    /// `Kind namespace/name`, or `Kind name` when cluster-scoped.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{} {ns}/{}", self.kind, self.name),
            None => write!(f, "{} {}", self.kind, self.name),
        }
    }
}

struct ScenarioRun<'a> {
    ctx: &'a RunContext,
    scenario: &'a Scenario,
    names: Names,
    created: Vec<Created>,
    report: ScenarioReport,
    doctor_started: Option<Instant>,
    /// When the stuck state was last known to be in place: the last
    /// injection (delete or fault) or symptom gate. The doctor looks only
    /// once that state has aged [`STUCK_AFTER`]: a namespace's content,
    /// for instance, starts deleting only when the namespace controller
    /// gets to it, seconds after the namespace itself.
    last_injection: Option<Instant>,
    /// The latest deletionTimestamp a symptom gate saw on an object it
    /// expected terminating. A pod's deletionTimestamp lies its grace
    /// period in the future, and the kubelet can fail before that: the
    /// symptom is there, but the doctor (rightly) does not call the pod
    /// stuck until it is STUCK_AFTER past that time.
    deleting_since: Option<k8s_openapi::jiff::Timestamp>,
    /// Node faults in place; reverted before cleanup on every path out.
    injected: Vec<Injected>,
    /// Live controllers the scenario started; they run through cleanup.
    controllers: Vec<controller::LiveController>,
    /// Backend containers (`container:` steps); removed when dropped.
    backends: Vec<crate::containers::Backend>,
}

impl ScenarioRun<'_> {
    async fn steps(&mut self) -> Outcome {
        if let Err(e) = self.create_namespaces().await {
            return Outcome::Failed { step: 0, reason: e };
        }
        for (i, step) in self.scenario.steps.iter().enumerate() {
            let index = i + 1;
            let t = Instant::now();
            progress::set(
                self.scenario.name.as_str(),
                format!("step {index}: {}", step.summary()),
            );
            let result = self.step(step).await;
            let (ok, evidence) = match &result {
                Ok(ev) => (true, ev.clone()),
                Err(why) => (false, vec![why.clone()]),
            };
            self.report.steps.push(StepRecord {
                index,
                kind: step.kind().to_string(),
                summary: step.summary(),
                duration_ms: t.elapsed().as_millis(),
                ok,
                evidence,
            });
            if let Err(reason) = result {
                return Outcome::Failed {
                    step: index,
                    reason: format!("step {index} ({}): {reason}", step.summary()),
                };
            }
        }
        Outcome::Passed
    }

    /// Logical namespaces a fixture defines as a Namespace object: those
    /// are created by their `apply` step, because some fields (such as
    /// `spec.finalizers`) can only be set when a namespace is created.
    fn namespaces_from_fixtures(&self) -> Vec<String> {
        self.scenario
            .fixture_files()
            .into_iter()
            .filter_map(|f| read_manifests(&self.ctx.fixtures_dir.join(f)).ok())
            .flatten()
            .filter(|d| d["kind"] == "Namespace")
            .filter_map(|d| {
                d["metadata"]["name"]
                    .as_str()
                    .map(|n| self.names.namespace(n))
            })
            .collect()
    }

    async fn create_namespaces(&mut self) -> Result<(), String> {
        let api: kube::Api<k8s_openapi::api::core::v1::Namespace> =
            kube::Api::all(self.ctx.client.clone());
        let from_fixtures = self.namespaces_from_fixtures();
        for real in self.names.namespaces().real_names() {
            if from_fixtures.contains(&real) {
                // Created (and recorded) by its apply step.
                continue;
            }
            let obj: k8s_openapi::api::core::v1::Namespace = serde_json::from_value(serde_json::json!({
                "metadata": {"name": real, "labels": {"unstuck.dev/scenario": self.scenario.name.as_str()}}
            }))
            .expect("static namespace");
            let made = api.create(&Default::default(), &obj).await.map_err(|e| {
                format!("creating namespace {real}: {}", crate::kube_error::text(&e))
            })?;
            self.created.push(Created {
                api_version: "v1".into(),
                kind: "Namespace".into(),
                namespace: None,
                name: real,
                uid: made.metadata.uid.unwrap_or_default(),
                keys: Default::default(),
            });
        }
        Ok(())
    }

    async fn step(&mut self, step: &Step) -> Result<Vec<String>, String> {
        match step {
            Step::Apply(a) => {
                self.apply(&a.file, a.namespace.as_deref().map(String::as_str))
                    .await
            }
            Step::Delete(d) => {
                let r = &d.object;
                let api_version = self
                    .names
                    .api_version(r.api_version().ok_or("no apiVersion")?);
                let (ar, caps) = resolve(&self.ctx.client, &api_version, &r.kind).await?;
                let ns = r.namespace.as_ref().map(|n| self.names.namespace(n));
                let namespaced = matches!(caps.scope, kube::discovery::Scope::Namespaced);
                let name = self.names.object(&r.kind, &r.name, namespaced);
                let api = api_for(&self.ctx.client, &ar, &caps, ns.as_deref());
                // The object this run created, by UID; outside the run's
                // namespaces nothing else may be deleted.
                let uid = self
                    .created
                    .iter()
                    .find(|c| c.kind == *r.kind && c.namespace == ns && c.name == name)
                    .map(|c| c.uid.clone());
                if !namespaced && uid.is_none() {
                    return Err(format!(
                        "{} {name} is not an object this run created; a scenario deletes only its own cluster-scoped objects",
                        *r.kind
                    ));
                }
                let dp = DeleteParams {
                    preconditions: uid.map(|uid| kube::api::Preconditions {
                        uid: Some(uid),
                        resource_version: None,
                    }),
                    propagation_policy: d.propagation_policy.map(|p| match p {
                        PropagationPolicy::Foreground => kube::api::PropagationPolicy::Foreground,
                        PropagationPolicy::Background => kube::api::PropagationPolicy::Background,
                        PropagationPolicy::Orphan => kube::api::PropagationPolicy::Orphan,
                    }),
                    ..DeleteParams::default()
                };
                api.delete(&name, &dp).await.map_err(|e| {
                    format!(
                        "deleting {} {name}: {}",
                        *r.kind,
                        crate::kube_error::text(&e)
                    )
                })?;
                self.last_injection = Some(Instant::now());
                Ok(vec![format!(
                    "DELETE {} {}{name} accepted{}",
                    *r.kind,
                    ns.map(|n| format!("{n}/")).unwrap_or_default(),
                    d.propagation_policy
                        .map(|p| format!(" (propagationPolicy {p:?})"))
                        .unwrap_or_default()
                )])
            }
            Step::Fault(f) => {
                let node = self.ctx.node.clone().ok_or_else(|| {
                    format!("fault '{}' needs node access; this cluster provider gives none (use the local or kind provider)", f.kind())
                })?;
                let pod = f.pod();
                let ns = self.names.namespace(&pod.namespace);
                let injected = match f {
                    Fault::BusyMount(_) => {
                        busy_mount::inject(
                            &self.ctx.client,
                            node.as_ref(),
                            &ns,
                            &pod.pod,
                            &Default::default(),
                        )
                        .await
                    }
                    Fault::WedgeShim(_) => {
                        wedge_shim::inject(&self.ctx.client, node.as_ref(), &ns, &pod.pod).await
                    }
                    Fault::FreezeCgroup(_) => {
                        freeze_cgroup::inject(&self.ctx.client, node.as_ref(), &ns, &pod.pod).await
                    }
                    Fault::StopKubelet(_) => {
                        stop_kubelet::inject(&self.ctx.client, node.as_ref(), &ns, &pod.pod).await
                    }
                    Fault::RemoveCniConfig(_) => {
                        remove_cni_config::inject(&self.ctx.client, node.as_ref(), &ns, &pod.pod)
                            .await
                    }
                    Fault::HoldVolume(v) => {
                        busy_mount::inject(
                            &self.ctx.client,
                            node.as_ref(),
                            &ns,
                            &pod.pod,
                            &busy_mount::BusyMountOptions {
                                kind: busy_mount::BusyKind::HeldVolume,
                                volume: Some(v.volume.to_string()),
                                holder: true,
                            },
                        )
                        .await
                    }
                }
                .map_err(|e| e.to_string())?;
                let evidence = vec![injected.describe()];
                self.injected.push(injected);
                self.last_injection = Some(Instant::now());
                Ok(evidence)
            }

            Step::Container(c) => self.container(c).await,
            Step::Expect(e) => self.expect(e).await,
            Step::Doctor(d) => self.doctor(d).await,
            Step::Controller(c) => {
                let namespace = self.names.namespace(&c.namespace);
                let watches = if c.watches.is_empty() {
                    vec![namespace.clone()]
                } else {
                    c.watches.iter().map(|w| self.names.namespace(w)).collect()
                };
                // The failure message may name the scenario's groups.
                let cleanup = match &c.cleanup {
                    ControllerCleanup::Fail { reason, message } => ControllerCleanup::Fail {
                        reason: reason.clone(),
                        message: Located::unlocated(self.names.text(message)),
                    },
                    other => other.clone(),
                };
                let started = controller::start(
                    self.ctx.client.clone(),
                    controller::ControllerConfig {
                        namespace,
                        watches,
                        finalizer: self.names.text(&c.finalizer),
                        finish_after: c.finish_after.as_std(),
                        lease: c.lease,
                        cleanup,
                    },
                );
                let line = started.describe();
                self.controllers.push(started);
                Ok(vec![line])
            }
        }
    }

    async fn apply(&mut self, file: &Path, namespace: Option<&str>) -> Result<Vec<String>, String> {
        let path = self.ctx.fixtures_dir.join(file);
        let mut evidence = Vec::new();
        for mut doc in read_manifests(&path)? {
            let logical = doc["metadata"]["name"].as_str().map(str::to_string);
            self.names.document(&mut doc);
            let api_version = doc["apiVersion"]
                .as_str()
                .ok_or_else(|| format!("{}: a document has no apiVersion", path.display()))?
                .to_string();
            let kind = doc["kind"]
                .as_str()
                .ok_or_else(|| format!("{}: a document has no kind", path.display()))?
                .to_string();
            let logical = logical
                .ok_or_else(|| format!("{}: a {kind} has no metadata.name", path.display()))?;
            let (ar, caps) = resolve(&self.ctx.client, &api_version, &kind).await?;
            let real_ns = match (&caps.scope, namespace) {
                (kube::discovery::Scope::Namespaced, Some(ns)) => Some(self.names.namespace(ns)),
                (kube::discovery::Scope::Namespaced, None) => {
                    return Err(format!(
                        "{}: {kind} {logical} is namespaced; give the apply step a `namespace:`",
                        path.display()
                    ));
                }
                (kube::discovery::Scope::Cluster, _) => None,
            };
            let name = self.names.object(&kind, &logical, real_ns.is_some());
            doc["metadata"]["name"] = serde_json::Value::String(name.clone());
            if let Some(ns) = &real_ns {
                doc["metadata"]["namespace"] = serde_json::Value::String(ns.clone());
            }
            let api = api_for(&self.ctx.client, &ar, &caps, real_ns.as_deref());
            let label = format!(
                "{kind} {}{name}",
                real_ns
                    .as_deref()
                    .map(|n| format!("{n}/"))
                    .unwrap_or_default()
            );
            let ours = self
                .created
                .iter()
                .find(|c| c.kind == kind && c.namespace == real_ns && c.name == name)
                .map(|c| c.uid.clone());
            let made =
                create::create_or_replace_ours(&api, &doc, &name, &label, ours.as_deref()).await?;
            let again = ours.is_some() && !made.replaced;
            // The keys as sent: what cleanup may take off this UID again.
            let keys = cleanup::keys::manifest_keys(&doc);
            match self
                .created
                .iter_mut()
                .find(|c| c.kind == kind && c.namespace == real_ns && c.name == name)
            {
                Some(c) => {
                    c.uid = made.uid;
                    cleanup::keys::merge(&mut c.keys.own, &keys.own);
                    cleanup::keys::merge(&mut c.keys.spec, &keys.spec);
                    cleanup::keys::merge(&mut c.keys.template, &keys.template);
                }
                None => self.created.push(Created {
                    api_version: api_version.clone(),
                    kind: kind.clone(),
                    namespace: real_ns.clone(),
                    name: name.clone(),
                    uid: made.uid,
                    keys,
                }),
            }
            evidence.push(format!(
                "{} {label}",
                if made.replaced {
                    "replaced this run's"
                } else if again {
                    "created again (this run's earlier one is gone)"
                } else {
                    "created"
                }
            ));
        }
        Ok(evidence)
    }

    async fn expect(&mut self, e: &Expect) -> Result<Vec<String>, String> {
        let ctx = CheckContext {
            client: &self.ctx.client,
            names: &self.names,
            node: self.ctx.node.as_deref(),
        };
        let conds: &Vec<Condition> = &e.that;
        let what = format!(
            "{} gate: {}",
            phase_name(e.phase),
            conds
                .iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join("; ")
        );
        let evidence = wait::until(what, e.timeout.as_std(), Duration::from_millis(500), || {
            let ctx = &ctx;
            async move {
                let mut held = Vec::new();
                for c in conds {
                    match check(ctx, c).await {
                        Ok(ev) => held.push(ev),
                        Err(seen) => return Poll::Pending(format!("{c}: {seen}")),
                    }
                }
                Poll::Ready(held)
            }
        })
        .await
        .map_err(|e| e.to_string())?;
        match e.phase {
            Phase::Symptom => {
                for e in &evidence {
                    // Two conditions may quote the same line.
                    if !self.report.symptoms.contains(e) {
                        self.report.symptoms.push(e.clone());
                    }
                }
                self.last_injection = Some(Instant::now());
                for c in conds {
                    if let Condition::Terminating(r) = c
                        && let Ok(Some(obj)) = get(&ctx, r).await
                        && let Some(ts) = obj.metadata.deletion_timestamp
                    {
                        self.deleting_since = self.deleting_since.max(Some(ts.0));
                    }
                }
            }
            Phase::Recovered => {
                if let Some(t) = self.doctor_started {
                    self.report.time_to_recover_ms = Some(t.elapsed().as_millis());
                }
            }
        }
        Ok(evidence)
    }
}

fn phase_name(p: Phase) -> &'static str {
    match p {
        Phase::Symptom => "symptom",
        Phase::Recovered => "recovered",
    }
}
