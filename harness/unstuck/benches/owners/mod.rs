//! Finalizer owner verdicts (issue 17): over every recorded snapshot and
//! every scenario, how many keys end `Alive`, `Unknown` and `Dead`, and how
//! many live owners were judged `Dead` (the goal is 0). Figures only, no
//! assertion on them.
//!
//! Which owners are live is known by construction: the keys a scenario
//! runs a `controller:` step for (the harness's own controller, alive
//! until it finishes), and Kubernetes' own keys on their kinds while
//! kube-controller-manager runs. Each recording is also asked again with
//! every name taken away (managers, leases and holders renamed to words
//! no key carries), as a live operator whose names share nothing with its
//! key would look: a verdict that then turns `Dead` rested on names. And
//! once more with every owner moved out of the cluster (no pod and no
//! workload outside kube-system; RBAC, writes and events kept), as a
//! management cluster's controller would act: a key whose owner was
//! `Alive` inside and turns `Dead` outside counts as a live owner judged
//! `Dead`. (An owner `Unknown` inside, not shown running, is not counted
//! live once moved: the first version of this line did, and its one
//! "live owner judged Dead" was a crash-looping operator with no RBAC of
//! its own, which can act neither inside nor outside.)

use std::collections::{BTreeMap, BTreeSet};

use unstuck::{
    cluster::local::LocalCluster,
    core::{
        doctor::{
            FinalizerVerdict, OwnerVerdict, Snapshot,
            owner::{OwnerCache, OwnerQuery, is_built_in},
            snapshot::ObjectRecord,
        },
        scenario::{Scenario, Step, load_dir},
    },
    runner::suite::{SuiteOptions, run_suite},
};

#[derive(Default)]
struct Tally {
    alive: usize,
    unknown: usize,
    dead: usize,
    live_judged_dead: Vec<String>,
}

impl Tally {
    fn line(&self, what: &str) -> String {
        format!(
            "  {what:<46} keys {:>3}: Alive {:>3}, Unknown {:>3}, Dead {:>3}; live owners judged Dead: {}{}",
            self.alive + self.unknown + self.dead,
            self.alive,
            self.unknown,
            self.dead,
            self.live_judged_dead.len(),
            if self.live_judged_dead.is_empty() {
                String::new()
            } else {
                format!(" ({})", self.live_judged_dead.join("; "))
            }
        )
    }
}

/// Every object with finalizers in a snapshot: the terminating ones and
/// the Terminating namespaces (their `metadata.finalizers`).
fn records(s: &Snapshot) -> Vec<ObjectRecord> {
    let mut out: Vec<ObjectRecord> = s
        .terminating
        .iter()
        .filter(|r| r.kind != "Namespace")
        .cloned()
        .collect();
    out.extend(
        s.namespaces
            .iter()
            .filter(|n| n.metadata.deletion_timestamp.is_some())
            .map(ObjectRecord::of_namespace),
    );
    out
}

/// The owner verdict on every key of `s`'s objects that `keep` admits,
/// with its object.
fn verdicts(
    s: &Snapshot,
    keep: impl Fn(&ObjectRecord) -> bool,
) -> Vec<(ObjectRecord, String, FinalizerVerdict)> {
    let owners = OwnerCache::new(s);
    let mut out = Vec::new();
    for r in records(s).into_iter().filter(|r| keep(r)) {
        for key in r.finalizers() {
            let v = owners.verdict(&OwnerQuery {
                finalizer: key,
                kind: &r.kind,
                record: Some(&r),
                assume_dead: &[],
            });
            out.push((r.clone(), key.clone(), v));
        }
    }
    out
}

/// Tallies the verdicts on every key of `s`'s objects that `keep` admits.
fn tally(
    s: &Snapshot,
    live: &BTreeSet<String>,
    label: &str,
    keep: impl Fn(&ObjectRecord) -> bool,
    t: &mut Tally,
) {
    for (r, key, v) in verdicts(s, keep) {
        let key = key.as_str();
        match v.verdict {
            OwnerVerdict::Alive { .. } => t.alive += 1,
            OwnerVerdict::Unknown { .. } => t.unknown += 1,
            OwnerVerdict::Dead { .. } => {
                t.dead += 1;
                let built_in_live = is_built_in(key)
                    && !v
                        .verdict
                        .evidence()
                        .iter()
                        .any(|e| e.contains("nothing removes it from"));
                if live.contains(key) || built_in_live {
                    t.live_judged_dead
                        .push(format!("{label}: {key} on {} {}", r.kind, r.name()));
                }
            }
        }
    }
}

/// The snapshot with every name a key could be matched by replaced:
/// field managers, Lease names and holders, workload and pod names, labels
/// and images. RBAC, pods' states, writes and events stay as recorded.
fn without_names(s: &Snapshot) -> Snapshot {
    let mut s = s.clone();
    let anon = |i: usize| format!("agent-{i:04x}");
    let mut n = 0;
    let mut next = || {
        n += 1;
        anon(n)
    };
    for r in s
        .terminating
        .iter_mut()
        .chain(s.namespace_content.iter_mut())
    {
        for m in r.metadata.managed_fields.iter_mut().flatten() {
            let keep = m.manager.as_deref().is_some_and(|x| {
                x.starts_with("kube") || x.starts_with("unstuck") || x == "unknown"
            });
            if !keep {
                m.manager = Some(next());
            }
        }
    }
    for l in &mut s.leases {
        if l.metadata.namespace.as_deref() == Some("kube-system") {
            continue;
        }
        l.metadata.name = Some(next());
        if let Some(spec) = &mut l.spec {
            spec.holder_identity = Some(next());
        }
    }
    for d in &mut s.deployments {
        d.metadata.name = Some(next());
        d.metadata.labels = None;
        if let Some(spec) = &mut d.spec {
            spec.template.metadata = None;
            for c in spec
                .template
                .spec
                .iter_mut()
                .flat_map(|p| p.containers.iter_mut())
            {
                c.image = Some("registry.internal:5000/mirror/agent:1".into());
            }
        }
    }
    for p in &mut s.pods {
        if p.metadata.namespace.as_deref() == Some("kube-system") {
            continue;
        }
        p.metadata.name = Some(next());
        p.metadata.labels = None;
        for c in p.spec.iter_mut().flat_map(|sp| sp.containers.iter_mut()) {
            c.image = Some("registry.internal:5000/mirror/agent:1".into());
        }
    }
    for e in &mut s.events {
        if let Some(src) = &mut e.source
            && src
                .component
                .as_deref()
                .is_some_and(|c| !c.starts_with("kube") && c != "default-scheduler")
        {
            src.component = Some("agent".into());
        }
    }
    s
}

/// The snapshot as if every owner ran outside the cluster (a management
/// cluster's controller, a cloud provider's): no pod and no workload
/// outside `kube-system` any more; RBAC, writes and events as recorded.
fn moved_outside(s: &Snapshot) -> Snapshot {
    let mut s = s.clone();
    let inside = |m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
        m.namespace.as_deref() == Some("kube-system")
    };
    s.pods.retain(|x| inside(&x.metadata));
    s.deployments.retain(|x| inside(&x.metadata));
    s.stateful_sets.retain(|x| inside(&x.metadata));
    s.daemon_sets.retain(|x| inside(&x.metadata));
    s.replica_sets.retain(|x| inside(&x.metadata));
    s.jobs.retain(|x| inside(&x.metadata));
    s.cron_jobs.retain(|x| inside(&x.metadata));
    s
}

/// The keys of `s` whose owner is judged `Alive` as recorded.
fn alive_keys(s: &Snapshot) -> BTreeSet<String> {
    verdicts(s, |_| true)
        .into_iter()
        .filter(|(_, _, v)| matches!(v.verdict, OwnerVerdict::Alive { .. }))
        .map(|(_, key, _)| key)
        .collect()
}

/// The keys each scenario runs a live controller for, by scenario name.
fn live_keys(scenarios: &[Scenario]) -> BTreeMap<String, BTreeSet<String>> {
    scenarios
        .iter()
        .map(|s| {
            let keys = s
                .steps
                .value
                .iter()
                .filter_map(|st| match &st.value {
                    Step::Controller(c) => Some(c.finalizer.value.clone()),
                    _ => None,
                })
                .collect();
            (s.name.value.clone(), keys)
        })
        .collect()
}

pub async fn run() {
    let root = super::repo_root();
    let scenarios = load_dir(&root.join("scenarios")).expect("scenarios load");
    let live = live_keys(&scenarios);
    println!("finalizer owner verdicts (issue 17):");
    recorded_verdicts(&root, &live);
    // `UNSTUCK_BENCH_OWNERS_SCENARIOS=0`: the recordings only (seconds,
    // where the scenarios take ten minutes).
    if std::env::var("UNSTUCK_BENCH_OWNERS_SCENARIOS").as_deref() != Ok("0") {
        scenario_verdicts(&root, &scenarios, &live).await;
    }
}

/// Part 1: every recorded snapshot, as recorded and with its names taken
/// away.
fn recorded_verdicts(root: &std::path::Path, live: &BTreeMap<String, BTreeSet<String>>) {
    let recorded = root.join("harness/unstuck-core/tests/recorded");
    let mut files: Vec<std::path::PathBuf> = Vec::new();
    for dir in [recorded.clone(), recorded.join("real-v1.34.4")] {
        for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            if e.path().extension().is_some_and(|x| x == "json") {
                files.push(e.path());
            }
        }
    }
    files.sort();
    let (mut as_recorded, mut nameless, mut outside) =
        (Tally::default(), Tally::default(), Tally::default());
    let mut count = 0;
    for f in &files {
        let Ok(s) =
            serde_json::from_str::<Snapshot>(&std::fs::read_to_string(f).unwrap_or_default())
        else {
            continue;
        };
        count += 1;
        let stem = f
            .file_stem()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let keys = live.get(&stem).cloned().unwrap_or_default();
        tally(&s, &keys, &stem, |_| true, &mut as_recorded);
        tally(
            &without_names(&s),
            &keys,
            &format!("{stem} (nameless)"),
            |_| true,
            &mut nameless,
        );
        // An owner shown running in the cluster (`Alive`), moved out of
        // it, is still live. (A scenario's live key whose owner was not
        // shown running inside, say a crash-looping operator with no
        // rights of its own, is no running owner once moved either.)
        tally(
            &moved_outside(&s),
            &alive_keys(&s),
            &format!("{stem} (owners outside)"),
            |_| true,
            &mut outside,
        );
    }
    println!(
        "{}",
        as_recorded.line(&format!("{count} recorded snapshots"))
    );
    println!(
        "{}",
        nameless.line(&format!("{count} recorded snapshots, names taken away"))
    );
    println!(
        "{}",
        outside.line(&format!("{count} recorded snapshots, owners moved outside"))
    );
}

/// Part 2: every scenario, on a local cluster: the doctor's first
/// snapshot of each, asked the same way.
async fn scenario_verdicts(
    root: &std::path::Path,
    scenarios: &[Scenario],
    live: &BTreeMap<String, BTreeSet<String>>,
) {
    let name = format!("bench-owners-{}", std::process::id());
    let cluster = match LocalCluster::up(super::owned(&name)).await {
        Ok(c) => c,
        Err(e) => {
            println!("  scenarios: no local cluster ({e})");
            return;
        }
    };
    let out = std::env::temp_dir().join(format!("unstuck-bench-owners-{}", std::process::id()));
    let opts = SuiteOptions {
        client: cluster.client(),
        fixtures_dir: root.join("fixtures"),
        out_dir: out.clone(),
        node: Some(std::sync::Arc::new(
            unstuck::cluster::local::LocalNode::open(&name).expect("node"),
        )),
        parallelism: 8,
        // Scenarios that must run alone take turns on this cluster.
        own_clusters: None,
        cluster: name.clone(),
        k8s_version: cluster.k8s_version().to_owned(),
        provider: Default::default(),
        shard: None,
        cluster_exits: cluster.component_exits(),
        journal: None,
    };
    let (_keep, never) = tokio::sync::watch::channel(false);
    let report = run_suite(&opts, scenarios.to_vec(), never).await;
    let mut t = Tally::default();
    let mut ran = 0;
    for s in &report.scenarios {
        let Some(round) = s.doctor.as_ref().and_then(|d| d.rounds.first()) else {
            continue;
        };
        ran += 1;
        let keys = live.get(s.name()).cloned().unwrap_or_default();
        // The snapshot is the whole cluster: only this scenario's objects.
        let mine = s.namespaces.real_names();
        let own = |r: &ObjectRecord| {
            let ns = if r.kind == "Namespace" {
                Some(r.name())
            } else {
                r.namespace()
            };
            ns.is_some_and(|n| mine.iter().any(|m| m == n))
        };
        tally(&round.snapshot, &keys, s.name(), own, &mut t);
    }
    println!(
        "{}",
        t.line(&format!(
            "{ran} scenarios with a doctor step ({} passed)",
            report.scenarios.iter().filter(|s| s.passed()).count()
        ))
    );
    let _ = std::fs::remove_dir_all(&out);
    let _ = cluster.down().await;
}
