//! `unstuck doctor` as its users run it, on real components: `-n` fixes
//! the namespace it names and leaves an unrelated dead APIService
//! byte-identical; `--local-cluster` never dials `$KUBECONFIG` (a trap
//! listener of the test's own, with a control run proving the trap
//! works); the exit codes; the same facts in terminal, JSON and Markdown;
//! `kubectl unstuck` as a kubectl plugin.
//! Needs root and the components built by ci/setup.sh (CI runs both).

use std::{
    net::TcpListener,
    path::Path,
    process::Command,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use k8s_openapi::{
    api::core::v1::{ConfigMap, Namespace},
    kube_aggregator::pkg::apis::apiregistration::v1::APIService,
};
use kube::{
    Api,
    api::{DeleteParams, Patch, PatchParams, PostParams},
};
use unstuck::wait::{self, Poll};

mod common;

const NS: &str = "it-cli-fix";
const CM: &str = "held";
/// A key no component serves, sharing no word with the dead APIService.
const KEY: &str = "widgets.acme-orphan.dev/cleanup";
/// An aggregated API whose Service never existed.
const DEAD_API: &str = "v1alpha1.gone.zz-sample.net";

use common::{doctor_env as doctor, stdout_json as json};

fn finding_kinds(report: &serde_json::Value) -> Vec<(String, String)> {
    report["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .map(|f| {
            (
                f["kind"].as_str().unwrap().to_string(),
                f["subject"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

async fn api_service_json(api: &Api<APIService>) -> serde_json::Value {
    serde_json::to_value(api.get(DEAD_API).await.expect("APIService")).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_on_a_real_cluster_scope_target_exit_codes_and_formats() {
    let name = common::cluster_name("it-doctor-cli");
    let cluster = common::up(&name).await;
    let client = cluster.client();
    let kubeconfig = cluster.kubeconfig();
    let kc = kubeconfig.to_str().unwrap().to_string();

    // The unrelated dead APIService: its Service does not exist.
    let apis: Api<APIService> = Api::all(client.clone());
    apis.create(
        &PostParams::default(),
        &common::from_json(serde_json::json!({
            "metadata": {"name": DEAD_API},
            "spec": {"group": "gone.zz-sample.net", "version": "v1alpha1",
                     "service": {"namespace": "it-cli-elsewhere", "name": "absent"},
                     "insecureSkipTLSVerify": true,
                     "groupPriorityMinimum": 100, "versionPriority": 100}
        })),
    )
    .await
    .expect("create APIService");
    // A ConfigMap held by a finalizer nothing serves, in the namespace to fix.
    common::create_namespace(&client, NS).await;
    common::held_configmap(&client, NS, CM, KEY).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    wait::until(
        format!("APIService {DEAD_API} Available=False"),
        Duration::from_secs(300),
        Duration::from_secs(1),
        || async {
            match apis.get(DEAD_API).await {
                Ok(a) => {
                    let c = unstuck_core::doctor::conditions::api_service_available(&a).cloned();
                    match c {
                        Some(c) if c.status == "False" => Poll::Ready(()),
                        other => Poll::Pending(format!("{other:?}")),
                    }
                }
                Err(e) => Poll::Pending(e.to_string()),
            }
        },
    )
    .await
    .expect("the aggregator judges the APIService");
    let kube_system_uid = Api::<Namespace>::all(client.clone())
        .get("kube-system")
        .await
        .unwrap()
        .metadata
        .uid
        .unwrap();
    let base = ["--kubeconfig", kc.as_str(), "--stuck-after", "1s"];
    let with = |extra: &[&'static str]| -> Vec<String> {
        base.iter()
            .map(|s| s.to_string())
            .chain(extra.iter().map(|s| s.to_string()))
            .collect()
    };
    let run = |args: Vec<String>| {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        doctor(&refs, &[])
    };

    // Both are found cluster-wide, and the whole-cluster plan would delete
    // the APIService: it is dead by the doctor's own rules (the control for
    // the `-n` run below). Wait until both have been stuck past the threshold.
    let whole = wait::until(
        "the doctor to find the dead APIService and the held ConfigMap",
        Duration::from_secs(300),
        Duration::from_secs(2),
        || {
            let o = run(with(&["-o", "json"]));
            async move {
                let kinds = finding_kinds(&json(&o));
                let api = kinds
                    .iter()
                    .any(|(k, s)| k == "DeadApiService" && s.contains(DEAD_API));
                let cm = kinds
                    .iter()
                    .any(|(k, s)| k == "OrphanFinalizer" && s.contains(CM));
                if api && cm {
                    Poll::Ready(o)
                } else {
                    Poll::Pending(format!("{kinds:?}"))
                }
            }
        },
    )
    .await
    .expect("findings");
    assert_eq!(
        whole.status.code(),
        Some(0),
        "{}",
        common::output_text(&whole)
    );
    let report = json(&whole);
    let broken = common::schema_errors(&report);
    assert!(
        broken.is_empty(),
        "the JSON breaks docs/doctor-report.schema.json: {broken:#?}"
    );
    assert_eq!(report["schemaVersion"], "unstuck.dev/doctor-report/v2");
    for f in report["findings"].as_array().expect("findings") {
        assert_eq!(
            f["detail"]["type"], f["kind"],
            "a finding's facts are of its kind: {f:#}"
        );
    }
    // Typed all the way out: the dead APIService's step as data, with its
    // API call and the UID its DELETE is preconditioned on; the held
    // ConfigMap's owner verdict as a field, not inside a sentence.
    let steps = report["planSteps"].as_array().expect("planSteps");
    let delete = steps
        .iter()
        .find(|s| s["action"]["type"] == "DeleteApiService")
        .unwrap_or_else(|| panic!("a DeleteApiService step: {steps:#?}"));
    assert_eq!(delete["action"]["name"], DEAD_API);
    assert_eq!(
        delete["apiCall"],
        serde_json::json!({
            "method": "DELETE",
            "path": format!("/apis/apiregistration.k8s.io/v1/apiservices/{DEAD_API}"),
        })
    );
    let api_uid = api_service_json(&apis).await["metadata"]["uid"].clone();
    assert_eq!(delete["action"]["uid"], api_uid);
    let held = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["kind"] == "OrphanFinalizer" && f["object"]["name"] == CM)
        .expect("the held ConfigMap's finding");
    assert_eq!(held["object"]["namespace"], NS);
    assert!(held["object"]["uid"].is_string(), "{held:#}");
    let verdict = held["detail"]["verdicts"]
        .as_array()
        .expect("detail.verdicts")
        .iter()
        .find(|v| v["finalizer"] == KEY)
        .unwrap_or_else(|| panic!("{KEY}'s verdict: {held:#}"));
    assert_eq!(verdict["verdict"], "Dead");
    assert_eq!(report["target"]["clusterUid"], kube_system_uid.as_str());
    assert_eq!(report["target"]["kubeconfig"], kc.as_str());
    assert!(
        report["plan"].as_array().unwrap().iter().any(|l| l
            .as_str()
            .unwrap()
            .contains(&format!("apiservices/{DEAD_API}"))),
        "the whole-cluster plan deletes the dead APIService: {}",
        common::output_text(&whole)
    );

    // What waits on what: the held ConfigMap's key is a root cause, dead,
    // that the plan's RemoveFinalizers acts on.
    let key_root = format!("finalizer:{KEY}@object:v1:ConfigMap:{NS}/{CM}");
    let root = report["graph"]["roots"]
        .as_array()
        .expect("graph.roots")
        .iter()
        .find(|r| r["id"] == key_root.as_str())
        .unwrap_or_else(|| panic!("{key_root} among the roots: {:#}", report["graph"]));
    assert_eq!(root["state"], "dead");
    assert_eq!(root["remedy"]["action"], "RemoveFinalizers");

    // The same facts in the same order in every format.
    let kinds = finding_kinds(&report);
    let md = run(with(&["-o", "markdown"]));
    let md_text = String::from_utf8_lossy(&md.stdout).to_string();
    assert!(
        md_text.starts_with("# unstuck doctor"),
        "{}",
        common::output_text(&md)
    );
    assert!(md_text.contains(&format!("(kube-system) {kube_system_uid}")));
    let md_kinds: Vec<String> = md_text
        .lines()
        .filter_map(|l| l.strip_prefix("- #"))
        .filter_map(|l| l.split_once(" **").map(|(_, rest)| rest))
        .filter_map(|l| l.split_once("**").map(|(k, _)| k.to_string()))
        .collect();
    assert_eq!(
        md_kinds,
        kinds.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>()
    );
    let term = run(with(&[]));
    let term_text = String::from_utf8_lossy(&term.stdout).to_string();
    assert!(
        term_text.starts_with("target: context ")
            && term_text.lines().next().unwrap().contains(&kube_system_uid),
        "{}",
        common::output_text(&term)
    );
    let positions: Vec<usize> = kinds
        .iter()
        .map(|(k, _)| {
            term_text
                .find(&format!(" {k}: "))
                .unwrap_or_else(|| panic!("{k} in the terminal report\n{term_text}"))
        })
        .collect();
    assert!(positions.is_sorted(), "terminal order {positions:?}");
    // The tree comes after the findings and before the plan.
    let tree = term_text
        .find("what waits on what (")
        .unwrap_or_else(|| panic!("the tree\n{term_text}"));
    let key_line = term_text
        .find(&format!(
            "waits on finalizer {KEY}: owner dead  ← root: RemoveFinalizers (step "
        ))
        .unwrap_or_else(|| panic!("the key as a root\n{term_text}"));
    let plan_at = term_text.find("\nplan:").expect("the plan");
    assert!(
        positions.last().unwrap() < &tree && tree < key_line && key_line < plan_at,
        "{term_text}"
    );
    assert!(md_text.contains("```mermaid\nflowchart TD\n"), "{md_text}");
    let json_text = String::from_utf8_lossy(&whole.stdout).to_string();
    let order: Vec<usize> = [
        "\"target\"",
        "\"blindSpots\"",
        "\"scan\"",
        "\"findings\"",
        "\"plan\"",
        "\"outcome\"",
    ]
    .iter()
    .map(|k| json_text.find(k).expect(k))
    .collect();
    assert!(order.is_sorted(), "JSON section order {order:?}");

    // Exit codes: findings with --fail-on-findings; --apply without a
    // terminal and without --yes is declined and changes nothing.
    let gate = run(with(&["--fail-on-findings"]));
    assert_eq!(
        gate.status.code(),
        Some(3),
        "{}",
        common::output_text(&gate)
    );
    let before = api_service_json(&apis).await;
    let declined = run(with(&["--apply"]));
    assert_eq!(
        declined.status.code(),
        Some(5),
        "{}",
        common::output_text(&declined)
    );
    assert!(String::from_utf8_lossy(&declined.stderr).contains("--yes"));
    assert!(
        cms.get_opt(CM).await.unwrap().is_some(),
        "declined, yet changed"
    );
    let bad = run(with(&["--stuck-after", "soon"]));
    assert_eq!(bad.status.code(), Some(2), "{}", common::output_text(&bad));
    // A `-n` typo is an error naming it, not "nothing stuck found".
    let typo = run(with(&["-n", "no-such-namespace-here"]));
    assert_eq!(
        typo.status.code(),
        Some(1),
        "{}",
        common::output_text(&typo)
    );
    assert!(
        String::from_utf8_lossy(&typo.stderr).contains("no namespace 'no-such-namespace-here'"),
        "{}",
        common::output_text(&typo)
    );

    // A remedy the API server refuses: a ValidatingAdmissionPolicy (CEL,
    // in the API server, no webhook the doctor could see failing) denies
    // any ConfigMap update in the namespace that drops a finalizer, as
    // policy engines guarding finalizers do. The doctor's PATCH is denied:
    // exit 4, with the server's words, and the ConfigMap is still held.
    let policy = keep_finalizers_policy(&client).await;
    let denied_backups = common::Scratch::path("unstuck-cli-denied");
    let mut denied_args = with(&["-n", NS, "--apply", "--yes", "--backup-dir"]);
    denied_args.push(denied_backups.to_str().unwrap().to_string());
    let denied = run(denied_args);
    assert_eq!(
        denied.status.code(),
        Some(4),
        "{}",
        common::output_text(&denied)
    );
    assert!(
        common::output_text(&denied).contains("finalizers are removed only by their owner"),
        "{}",
        common::output_text(&denied)
    );
    assert!(cms.get_opt(CM).await.unwrap().is_some(), "denied, yet gone");
    policy.remove().await;

    // `-n` fixes the named namespace and leaves the unrelated dead
    // APIService byte-identical.
    let backups = common::Scratch::path("unstuck-cli-backups");
    let mut fix_args = with(&["-n", NS, "--apply", "--yes", "--backup-dir"]);
    fix_args.push(backups.join("new").to_str().unwrap().to_string());
    let fixed = run(fix_args);
    assert_eq!(
        fixed.status.code(),
        Some(0),
        "{}",
        common::output_text(&fixed)
    );
    let fixed_text = String::from_utf8_lossy(&fixed.stdout);
    assert!(
        !fixed_text.contains(DEAD_API),
        "{}",
        common::output_text(&fixed)
    );
    common::wait_gone(&cms, CM, Duration::from_secs(120), Duration::from_secs(1))
        .await
        .expect("the -n run fixed its namespace");
    assert_eq!(
        api_service_json(&apis).await,
        before,
        "the unrelated APIService changed"
    );

    // The fix's backup is private to its owner.
    use std::os::unix::fs::PermissionsExt as _;
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let saved: Vec<_> = std::fs::read_dir(backups.join("new"))
        .expect("backup dir")
        .map(|e| e.unwrap().path())
        .collect();
    assert!(!saved.is_empty());
    assert_eq!(mode(&backups.join("new")), 0o700);
    assert!(saved.iter().all(|p| mode(p) == 0o600), "{saved:?}");

    local_cluster_never_dials_kubeconfig(&name).await;
    context_picks_the_cluster(&kubeconfig, &kube_system_uid);

    let layout = cluster.layout().clone();
    let report = cluster.down().await;
    assert!(report.errors.is_empty(), "{report}");
    assert!(unstuck::cluster::local::leftovers(&layout).is_empty());
}

/// A ValidatingAdmissionPolicy and its binding that deny dropping a
/// finalizer from a ConfigMap in [`NS`], in force once the API server
/// denies a server-side dry run of that very write.
async fn keep_finalizers_policy(client: &kube::Client) -> KeepFinalizers {
    use k8s_openapi::api::admissionregistration::v1::{
        ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
    };
    let policies: Api<ValidatingAdmissionPolicy> = Api::all(client.clone());
    let bindings: Api<ValidatingAdmissionPolicyBinding> = Api::all(client.clone());
    policies
        .create(
            &PostParams::default(),
            &common::from_json(serde_json::json!({
                "metadata": {"name": POLICY},
                "spec": {
                    "failurePolicy": "Fail",
                    "matchConstraints": {"resourceRules": [{
                        "apiGroups": [""], "apiVersions": ["v1"],
                        "operations": ["UPDATE"], "resources": ["configmaps"]
                    }]},
                    "validations": [{
                        "expression": "!has(oldObject.metadata.finalizers) || (has(object.metadata.finalizers) && oldObject.metadata.finalizers.all(f, f in object.metadata.finalizers))",
                        "message": "finalizers are removed only by their owner"
                    }]
                }
            })),
        )
        .await
        .expect("create the policy");
    bindings
        .create(
            &PostParams::default(),
            &common::from_json(serde_json::json!({
                "metadata": {"name": POLICY},
                "spec": {
                    "policyName": POLICY,
                    "validationActions": ["Deny"],
                    "matchResources": {"namespaceSelector": {
                        "matchLabels": {"kubernetes.io/metadata.name": NS}
                    }}
                }
            })),
        )
        .await
        .expect("create the binding");
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    wait::until(
        "the policy to deny dropping the finalizer",
        Duration::from_secs(60),
        Duration::from_millis(500),
        || async {
            let drop = Patch::Merge(serde_json::json!({"metadata": {"finalizers": null}}));
            match cms
                .patch(CM, &PatchParams::default().dry_run(), &drop)
                .await
            {
                Err(kube::Error::Api(e)) if e.message.contains("removed only by their owner") => {
                    Poll::Ready(())
                }
                other => Poll::Pending(format!("{other:?}")),
            }
        },
    )
    .await
    .expect("the policy is in force");
    KeepFinalizers { policies, bindings }
}

const POLICY: &str = "it-cli-keep-finalizers";

struct KeepFinalizers {
    policies: Api<k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy>,
    bindings: Api<k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicyBinding>,
}

impl KeepFinalizers {
    async fn remove(self) {
        let dp = DeleteParams::default();
        self.bindings
            .delete(POLICY, &dp)
            .await
            .expect("delete the binding");
        self.policies
            .delete(POLICY, &dp)
            .await
            .expect("delete the policy");
        // Out of force once a dry run of the same write is admitted.
        let cms: Api<ConfigMap> = Api::namespaced(self.policies.clone().into_client(), NS);
        wait::until(
            "the policy to be out of force",
            Duration::from_secs(60),
            Duration::from_millis(500),
            || async {
                let drop = Patch::Merge(serde_json::json!({"metadata": {"finalizers": null}}));
                match cms
                    .patch(CM, &PatchParams::default().dry_run(), &drop)
                    .await
                {
                    Ok(_) => Poll::Ready(()),
                    other => Poll::Pending(format!("{other:?}")),
                }
            },
        )
        .await
        .expect("the policy is gone");
    }
}

/// `--context` picks a context of the kubeconfig over its current one, as
/// kubectl's does: the current context here points at a closed port, and
/// the run reaches the cluster only through the named one. A context the
/// file does not have is an error that lists the ones it has.
fn context_picks_the_cluster(kubeconfig: &Path, kube_system_uid: &str) {
    let mut kc = kube::config::Kubeconfig::read_from(kubeconfig).expect("read kubeconfig");
    let real = kc.current_context.clone().expect("a current context");
    let mut dead_cluster = kc.clusters[0].clone();
    dead_cluster.name = "closed-port".into();
    // Port 9 (discard) on loopback: nothing listens there.
    dead_cluster.cluster.as_mut().unwrap().server = Some("https://127.0.0.1:9".into());
    let mut elsewhere = kc.contexts[0].clone();
    elsewhere.name = "elsewhere".into();
    elsewhere.context.as_mut().unwrap().cluster = "closed-port".into();
    kc.clusters.push(dead_cluster);
    kc.contexts.push(elsewhere);
    kc.current_context = Some("elsewhere".into());
    let path = common::Scratch::path("unstuck-cli-contexts");
    std::fs::write(&path, serde_json::to_string_pretty(&kc).unwrap()).unwrap();
    let p = path.to_str().unwrap();
    let named = doctor(&["--kubeconfig", p, "--context", &real, "-o", "json"], &[]);
    assert_eq!(
        named.status.code(),
        Some(0),
        "{}",
        common::output_text(&named)
    );
    let report = json(&named);
    assert_eq!(report["target"]["context"], real.as_str());
    assert_eq!(report["target"]["clusterUid"], kube_system_uid);
    let missing = doctor(&["--kubeconfig", p, "--context", "nope"], &[]);
    let text = common::output_text(&missing);
    assert_eq!(missing.status.code(), Some(1), "{text}");
    assert!(
        text.contains("no context \"nope\"") && text.contains("elsewhere") && text.contains(&real),
        "{text}"
    );
}

/// `--local-cluster` uses that cluster's kubeconfig for the API too: a
/// `$KUBECONFIG` pointing at a trap listener is never dialled. The
/// control run (no --local-cluster) proves the trap catches a client.
async fn local_cluster_never_dials_kubeconfig(cluster: &str) {
    let trap = TcpListener::bind("127.0.0.1:0").expect("trap listener");
    let port = trap.local_addr().unwrap().port();
    let hits = Arc::new(AtomicUsize::new(0));
    let counted = hits.clone();
    std::thread::spawn(move || {
        for conn in trap.incoming() {
            counted.fetch_add(1, Ordering::SeqCst);
            drop(conn);
        }
    });
    let dir = common::Scratch::dir("unstuck-trap");
    let trap_kc = dir.join("trap.kubeconfig");
    write_trap_kubeconfig(&trap_kc, port);
    let env = [("KUBECONFIG", trap_kc.to_str().unwrap())];

    let control = doctor(&[], &env);
    assert_ne!(
        control.status.code(),
        Some(0),
        "{}",
        common::output_text(&control)
    );
    assert!(
        hits.load(Ordering::SeqCst) > 0,
        "the control run never reached the trap: {}",
        common::output_text(&control)
    );
    hits.store(0, Ordering::SeqCst);

    let local = doctor(&["--local-cluster", cluster, "--stuck-after", "1s"], &env);
    assert!(
        matches!(local.status.code(), Some(0)),
        "{}",
        common::output_text(&local)
    );
    assert_eq!(
        hits.load(Ordering::SeqCst),
        0,
        "--local-cluster dialled $KUBECONFIG: {}",
        common::output_text(&local)
    );
    let out = String::from_utf8_lossy(&local.stdout);
    assert!(
        out.lines()
            .next()
            .unwrap_or("")
            .contains(&format!("clusters/{cluster}/")),
        "{}",
        common::output_text(&local)
    );
    let clash = doctor(&["--local-cluster", cluster, "--kubeconfig", "/x"], &env);
    assert_eq!(
        clash.status.code(),
        Some(2),
        "{}",
        common::output_text(&clash)
    );
}

fn write_trap_kubeconfig(path: &Path, port: u16) {
    let kc = serde_json::json!({
        "apiVersion": "v1", "kind": "Config", "current-context": "trap",
        "clusters": [{"name": "trap", "cluster": {"server": format!("https://127.0.0.1:{port}"),
                      "insecure-skip-tls-verify": true}}],
        "users": [{"name": "trap", "user": {"token": "not-a-real-token"}}],
        "contexts": [{"name": "trap", "context": {"cluster": "trap", "user": "trap"}}]
    });
    std::fs::write(path, kc.to_string()).unwrap();
}

#[test]
fn kubectl_runs_it_as_the_unstuck_plugin() {
    let bin = Path::new(env!("CARGO_BIN_EXE_kubectl-unstuck"));
    assert_eq!(bin.file_name().unwrap(), "kubectl-unstuck");
    let own = Command::new(bin)
        .args(["doctor", "--help"])
        .output()
        .unwrap();
    assert!(own.status.success(), "{}", common::output_text(&own));
    assert!(String::from_utf8_lossy(&own.stdout).contains("--fail-on-findings"));
    // Through kubectl's own plugin lookup, when kubectl is installed.
    let path = format!(
        "{}:{}",
        bin.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    match Command::new("kubectl")
        .args(["unstuck", "doctor", "--help"])
        .env("PATH", &path)
        .output()
    {
        Ok(o) => {
            assert!(o.status.success(), "{}", common::output_text(&o));
            assert!(
                String::from_utf8_lossy(&o.stdout).contains("Exit codes:"),
                "{}",
                common::output_text(&o)
            );
        }
        Err(e) => eprintln!("kubectl not installed ({e}); checked the plugin binary only"),
    }
}

#[test]
fn local_cluster_and_kubeconfig_conflict() {
    let o = doctor(&["--local-cluster", "x", "--kubeconfig", "/y"], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", common::output_text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("cannot be used with"));
}

/// A namespace of its own for the consent test.
const CONSENT_NS: &str = "it-cli-consent";
/// `--stuck-after` of the consent test: long enough that the ConfigMap
/// deleted just before the doctor starts is not stuck in the plan it
/// shows, short enough that the doctor's own wait for late deletions
/// (at most 30 s) lets a later round meet it stuck.
const CONSENT_STUCK_AFTER: &str = "20s";

/// What is applied is what was shown: `--apply --yes` without a terminal
/// covers only the plan printed before it. The ConfigMap shown stuck is
/// freed; one that becomes stuck only after the plan was shown (a later
/// round finds it) is left untouched, the output says so and the exit code
/// is 6. Running the doctor again shows it, and applies it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_yes_covers_only_the_plan_shown_and_leaves_what_a_later_round_finds() {
    let name = common::cluster_name("it-doctor-consent");
    let cluster = common::up(&name).await;
    let client = cluster.client();
    let kc = cluster.kubeconfig().to_str().unwrap().to_string();
    common::create_namespace(&client, CONSENT_NS).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), CONSENT_NS);
    for cm in ["shown", "late"] {
        cms.create(
            &PostParams::default(),
            &common::from_json(serde_json::json!({"metadata": {"name": cm, "finalizers": [KEY]}})),
        )
        .await
        .expect("configmap");
    }
    let base = [
        "--kubeconfig",
        kc.as_str(),
        "-n",
        CONSENT_NS,
        "--stuck-after",
        CONSENT_STUCK_AFTER,
        "-o",
        "json",
    ];
    let with = |extra: &[&str]| -> Vec<String> {
        base.iter().chain(extra).map(|s| s.to_string()).collect()
    };
    let run = |args: Vec<String>| {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        doctor(&refs, &[])
    };
    let backups = common::Scratch::path("unstuck-consent-backups");
    let backup_dir = backups.to_str().unwrap().to_string();

    cms.delete("shown", &DeleteParams::default())
        .await
        .expect("delete shown");
    wait::until(
        "the doctor to find ConfigMap shown stuck",
        Duration::from_secs(300),
        Duration::from_secs(2),
        || {
            let o = run(with(&[]));
            async move {
                let kinds = finding_kinds(&json(&o));
                if kinds
                    .iter()
                    .any(|(k, s)| k == "OrphanFinalizer" && s.ends_with("/shown"))
                {
                    Poll::Ready(())
                } else {
                    Poll::Pending(format!("{kinds:?}"))
                }
            }
        },
    )
    .await
    .expect("shown is stuck");

    // `late` starts deleting now: not stuck yet when the plan is shown, stuck
    // by the time a later round of the same run looks.
    cms.delete("late", &DeleteParams::default())
        .await
        .expect("delete late");
    let applied = run(with(&["--apply", "--yes", "--backup-dir", &backup_dir]));
    let report = json(&applied);
    assert_eq!(
        applied.status.code(),
        Some(6),
        "{}",
        common::output_text(&applied)
    );
    // The plan --yes covered was printed before anything was applied, and
    // did not hold `late`.
    let stderr = String::from_utf8_lossy(&applied.stderr);
    let printed = stderr
        .split_once("--yes covers this plan")
        .map(|(_, plan)| plan)
        .unwrap_or_else(|| {
            panic!(
                "no plan printed before applying: {}",
                common::output_text(&applied)
            )
        });
    assert!(
        printed.contains("/configmaps/shown"),
        "{}",
        common::output_text(&applied)
    );
    assert!(
        !printed.contains("/configmaps/late"),
        "{}",
        common::output_text(&applied)
    );
    let lines: Vec<&str> = report["applied"]
        .as_array()
        .expect("applied")
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    let late_path = format!("/api/v1/namespaces/{CONSENT_NS}/configmaps/late");
    let shown_path = format!("/api/v1/namespaces/{CONSENT_NS}/configmaps/shown");
    assert!(
        lines.contains(&format!(
            "left RemoveFinalizers {late_path}: remove [{KEY}]: not in the confirmed plan; run the doctor again to review it"
        ).as_str()),
        "{}",
        common::output_text(&applied)
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with(&format!("RemoveFinalizers {shown_path}: removed"))),
        "{}",
        common::output_text(&applied)
    );
    assert!(
        report["outcome"]
            .as_str()
            .unwrap()
            .contains("1 step(s) left, not in the confirmed plan"),
        "{}",
        common::output_text(&applied)
    );
    // Nothing was written to `late`: no call, no backup of it.
    assert!(
        !lines
            .iter()
            .any(|l| l.contains(&late_path) && !l.starts_with("left ")),
        "{}",
        common::output_text(&applied)
    );
    let late = cms
        .get_opt("late")
        .await
        .unwrap()
        .expect("late still there");
    assert_eq!(late.metadata.finalizers, Some(vec![KEY.to_string()]));
    assert!(late.metadata.deletion_timestamp.is_some());
    let backed_up: Vec<String> = std::fs::read_dir(&backups)
        .expect("backup dir")
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        backed_up.iter().any(|f| f.contains(".shown.")),
        "{backed_up:?}"
    );
    assert!(
        !backed_up.iter().any(|f| f.contains(".late.")),
        "{backed_up:?}"
    );
    // The shown target was fixed.
    common::wait_gone(
        &cms,
        "shown",
        Duration::from_secs(60),
        Duration::from_secs(1),
    )
    .await
    .expect("the shown target was fixed");

    // What makes a write fail when the object moved after the doctor read
    // it: the server refuses a JSON patch whose resourceVersion `test` no
    // longer holds, with a 422 that says no more than this (the doctor
    // reads it as "changed since it was read" and reads again).
    let stale: json_patch::Patch = serde_json::from_value(serde_json::json!([
        {"op": "test", "path": "/metadata/resourceVersion", "value": "1"},
        {"op": "replace", "path": "/metadata/finalizers", "value": []},
    ]))
    .unwrap();
    match cms
        .patch("late", &PatchParams::default(), &Patch::<()>::Json(stale))
        .await
    {
        Err(kube::Error::Api(s)) => {
            assert_eq!(s.code, 422, "{s:?}");
            assert!(
                s.message
                    .contains("the server rejected our request due to an error in our request"),
                "{s:?}"
            );
        }
        other => panic!("a patch testing a stale resourceVersion: {other:?}"),
    }
    let late = cms.get("late").await.unwrap();
    assert_eq!(late.metadata.finalizers, Some(vec![KEY.to_string()]));

    // Run again: now `late` is in the plan shown, and is applied.
    let again = run(with(&["--apply", "--yes", "--backup-dir", &backup_dir]));
    assert_eq!(
        again.status.code(),
        Some(0),
        "{}",
        common::output_text(&again)
    );
    common::wait_gone(
        &cms,
        "late",
        Duration::from_secs(60),
        Duration::from_secs(1),
    )
    .await
    .expect("the second run fixed what the first left");

    let layout = cluster.layout().clone();
    let report = cluster.down().await;
    assert!(report.errors.is_empty(), "{report}");
    assert!(unstuck::cluster::local::leftovers(&layout).is_empty());
}

/// The schema has teeth: a minimal report holds, and each thing a consumer
/// relies on, broken, is refused.
#[test]
fn the_documented_schema_refuses_a_report_that_breaks_it() {
    let valid = serde_json::json!({
        "schemaVersion": "unstuck.dev/doctor-report/v2",
        "target": {"kubeconfig": null, "context": null, "server": "https://127.0.0.1:6443",
                   "clusterUid": "u", "serverVersion": "v1.34.4"},
        "blindSpots": [],
        "scan": {"typesListed": 1, "objectsSeen": 1, "seconds": 0.1, "scope": "cluster-wide",
                 "terminatingNamespaces": 0},
        "findings": [],
        "normalSoFar": [],
        "graph": {"nodes": [], "edges": [], "roots": [], "targets": []},
        "plan": [],
        "planSteps": [{"step": 1, "finding": 1, "why": "its owner is gone", "forceLevel": 1,
                       "action": {"type": "RemoveFinalizers"},
                       "apiCall": {"method": "PATCH", "path": "/api/v1/namespaces/a/configmaps/b"}}],
        "node": [],
        "applied": [],
        "backups": [],
        "targets": [],
        "outcome": "dry run"
    });
    assert_eq!(common::schema_errors(&valid), Vec::<String>::new());
    let broken = |edit: fn(&mut serde_json::Value)| {
        let mut r = valid.clone();
        edit(&mut r);
        common::schema_errors(&r)
    };
    assert!(!broken(|r| r["schemaVersion"] = "unstuck.dev/doctor-report/v1".into()).is_empty());
    assert!(!broken(|r| drop(r.as_object_mut().unwrap().remove("planSteps"))).is_empty());
    // A write without its API call, and a wait with one.
    assert!(
        !broken(|r| drop(r["planSteps"][0].as_object_mut().unwrap().remove("apiCall"))).is_empty()
    );
    assert!(!broken(|r| r["planSteps"][0]["action"]["type"] = "Wait".into()).is_empty());
    assert!(
        !broken(
            |r| r["targets"] = serde_json::json!([{"target": {"apiVersion": "v1",
        "kind": "ConfigMap", "name": "b"}, "state": "Stuck"}])
        )
        .is_empty()
    );
}
