//! The blocker graph ("X waits on Y") built from snapshots recorded on
//! real clusters while each scenario's failure was in place: each stuck
//! target leads down to the root cause the scenario planted, the root
//! carries the plan step that acts on it, and the graph holds together
//! (every edge's ends are nodes, every citation a finding) on every
//! recorded snapshot.

mod doctor_support;

use std::time::Duration;

use unstuck_core::doctor::{
    Action, BlockerGraph, DiagnoseOptions, Finding, FindingKind, Plan, Snapshot, diagnose,
    graph::{GraphNode, NodeKind, NodeState, mermaid, object_id, tree},
    node::{DiagnoseNodeOptions, NodeFacts, diagnose_pod},
    plan,
};

use doctor_support::recorded;

/// The scenario runner's threshold, as in `doctor_recorded.rs`.
fn opts() -> DiagnoseOptions {
    DiagnoseOptions {
        stuck_after: Duration::from_secs(3),
        ..Default::default()
    }
}

struct Case {
    findings: Vec<Finding>,
    plan: Plan,
    graph: BlockerGraph,
}

impl Case {
    fn of(s: &Snapshot) -> Self {
        let findings = diagnose(s, &opts());
        let plan = plan(&findings, s);
        let graph = BlockerGraph::build(&findings, &plan, s);
        Case {
            findings,
            plan,
            graph,
        }
    }

    /// The tree, for failure messages.
    fn tree(&self) -> String {
        tree::lines(&self.graph).join("\n")
    }

    /// The one node whose label starts with `label`.
    fn node(&self, label: &str) -> &GraphNode {
        let found: Vec<&GraphNode> = self
            .graph
            .nodes
            .iter()
            .filter(|n| n.label.starts_with(label))
            .collect();
        assert_eq!(found.len(), 1, "one node {label}*:\n{}", self.tree());
        found[0]
    }

    /// What `from` waits on, as nodes.
    fn below(&self, from: &GraphNode) -> Vec<&GraphNode> {
        self.graph
            .waits_on(&from.id)
            .filter_map(|e| self.graph.node(&e.to))
            .collect()
    }

    /// The edge from `from` to `to`, and the finding it cites.
    fn cited(&self, from: &GraphNode, to: &GraphNode) -> &Finding {
        let e = self
            .graph
            .waits_on(&from.id)
            .find(|e| e.to == to.id)
            .unwrap_or_else(|| panic!("{} -> {}:\n{}", from.id, to.id, self.tree()));
        let n = e.finding.expect("an API finding argues it");
        &self.findings[n - 1]
    }

    /// The plan step a root cites, checked against the plan itself.
    fn remedy(&self, root: &GraphNode) -> &Action {
        let r = self
            .graph
            .root(&root.id)
            .unwrap_or_else(|| panic!("{} is a root:\n{}", root.id, self.tree()));
        let m = r.remedy.as_ref().expect("a plan step acts on it");
        let step = &self.plan.steps[m.step - 1];
        assert_eq!(step.finding_index + 1, m.finding);
        assert_eq!(step.action.name(), m.action);
        &step.action
    }
}

#[test]
fn an_orphan_finalizer_on_a_configmap_is_the_root_under_the_configmap() {
    let c = Case::of(&recorded("orphan-finalizer-configmap"));
    let cm = c.node("ConfigMap app-");
    assert!(cm.label.ends_with("/mymap"));
    assert_eq!(cm.state, NodeState::Terminating);
    assert!(c.graph.targets.contains(&cm.id), "{}", c.tree());
    let key = c.below(cm);
    assert_eq!(key.len(), 1, "{}", c.tree());
    assert_eq!(key[0].label, "finalizer kubernetes");
    assert_eq!(key[0].state, NodeState::Dead);
    assert_eq!(c.cited(cm, key[0]).kind(), FindingKind::OrphanFinalizer);
    match c.remedy(key[0]) {
        Action::RemoveFinalizers(r) => assert_eq!(r.remove, vec!["kubernetes".to_owned()]),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_namespace_behind_an_orphan_finalizer_leads_through_the_object_to_the_dead_key() {
    let c = Case::of(&recorded("uninstalled-crd-controller"));
    let ns = c.node("namespace istio-");
    assert!(c.graph.targets.contains(&ns.id), "{}", c.tree());
    let cr = c.node("Kiali istio-");
    assert_eq!(c.below(ns), vec![cr], "{}", c.tree());
    assert_eq!(
        c.cited(ns, cr).kind(),
        FindingKind::NamespaceBlockedByContent
    );
    // The CR is waited on, so it is no target of its own.
    assert!(!c.graph.targets.contains(&cr.id));
    let key = c.below(cr);
    assert_eq!(key.len(), 1);
    assert_eq!(key[0].label, "finalizer kiali.io/finalizer");
    assert_eq!(key[0].state, NodeState::Dead);
    assert!(matches!(c.remedy(key[0]), Action::RemoveFinalizers(r) if r.target.kind == "Kiali"));
    // The terminal tree says it in that order.
    let lines = tree::lines(&c.graph);
    let at = |s: &str| {
        lines
            .iter()
            .position(|l| l.contains(s))
            .unwrap_or_else(|| panic!("{s}:\n{}", c.tree()))
    };
    assert!(at("namespace istio-") < at("waits on Kiali istio-"));
    assert!(at("waits on Kiali istio-") < at("finalizer kiali.io/finalizer: owner dead"));
    assert!(
        lines[at("finalizer kiali.io/finalizer")].contains("← root: RemoveFinalizers (step "),
        "{}",
        c.tree()
    );
    assert!(lines.iter().all(|l| l.chars().count() <= tree::LINE_WIDTH));
}

#[test]
fn a_dead_webhook_leads_from_the_namespace_to_its_missing_service() {
    let c = Case::of(&recorded("dead-admission-webhook"));
    let ns = c.node("namespace shop");
    let hook = c.node("webhook validate.policy.example.com");
    assert_eq!(hook.kind, NodeKind::Webhook);
    assert_eq!(hook.state, NodeState::FailingClosed);
    assert_eq!(c.below(ns), vec![hook], "{}", c.tree());
    let svc = c.node("Service policy-system/policy-webhook");
    assert_eq!(c.below(hook), vec![svc]);
    assert_eq!(svc.state, NodeState::Gone);
    assert_eq!(svc.detail.as_deref(), Some("ServiceNotFound"));
    assert_eq!(c.cited(hook, svc).kind(), FindingKind::DeadWebhook);
    assert!(matches!(
        c.remedy(svc),
        Action::SetWebhookFailurePolicy(w) if w.webhook == "validate.policy.example.com"
    ));
    assert_eq!(c.graph.roots.len(), 1, "{}", c.tree());
}

#[test]
fn a_dead_apiservice_leads_from_the_namespace_to_its_missing_service() {
    let s = doctor_support::with_missing_backend(
        recorded("dead-metrics-apiservice"),
        "v1beta1.metrics.k8s.io",
    );
    let c = Case::of(&s);
    let ns = c.node("namespace app-");
    let api = c.node("APIService v1beta1.metrics.k8s.io");
    assert_eq!(api.state, NodeState::Unavailable);
    assert_eq!(c.below(ns), vec![api], "{}", c.tree());
    let svc = c.node("Service monitoring/prometheus-adapter");
    assert_eq!(c.below(api), vec![svc]);
    assert_eq!(svc.state, NodeState::Gone);
    assert!(matches!(
        c.remedy(svc),
        Action::DeleteApiService(d) if d.name == "v1beta1.metrics.k8s.io"
    ));
}

#[test]
fn a_foreground_chain_leads_from_the_owner_through_its_dependents_to_their_keys() {
    let c = Case::of(&recorded("foreground-deletion-chain"));
    let deploy = c.node("Deployment fd/web");
    assert!(c.graph.targets.contains(&deploy.id), "{}", c.tree());
    let rs = c.below(deploy);
    assert_eq!(rs.len(), 1, "{}", c.tree());
    assert!(rs[0].label.starts_with("ReplicaSet fd/web-"));
    // The ReplicaSet argues its own part of the chain.
    let pods = c.below(rs[0]);
    assert_eq!(pods.len(), 2, "{}", c.tree());
    for pod in pods {
        let by = c.cited(rs[0], pod);
        assert_eq!(by.kind(), FindingKind::WaitingOnDependents);
        assert_eq!(
            by.subject.name,
            rs[0].label.trim_start_matches("ReplicaSet fd/")
        );
        let key = c.below(pod);
        assert_eq!(key.len(), 1);
        assert_eq!(key[0].label, "finalizer pods.guard.example.com/protect");
        assert!(matches!(c.remedy(key[0]), Action::RemoveFinalizers(_)));
    }
    // foregroundDeletion is the garbage collector's; never a root.
    assert!(
        !c.graph
            .nodes
            .iter()
            .any(|n| n.label.contains("foregroundDeletion")),
        "{}",
        c.tree()
    );
}

#[test]
fn a_claim_in_use_waits_on_its_user_and_nothing_is_changed() {
    let c = Case::of(&recorded("pvc-protection-in-use"));
    let claim = c.node("PersistentVolumeClaim app-");
    let key = c.below(claim);
    assert_eq!(key.len(), 1);
    assert_eq!(key[0].state, NodeState::InUse);
    let user = c.below(key[0]);
    assert_eq!(user.len(), 1, "{}", c.tree());
    assert_eq!(user[0].kind, NodeKind::Object);
    assert!(user[0].label.starts_with("Pod app-"), "{}", c.tree());
    assert_eq!(user[0].state, NodeState::InUse);
    assert!(matches!(c.remedy(user[0]), Action::Wait { .. }));
}

#[test]
fn a_namespace_spec_token_without_a_handler_is_a_root() {
    let c = Case::of(&doctor_support::load_snapshot("namespace-spec-finalizer"));
    for ns in ["namespace spec-content", "namespace spec-empty"] {
        let ns = c.node(ns);
        let token = c
            .below(ns)
            .into_iter()
            .find(|n| n.kind == NodeKind::SpecToken)
            .unwrap_or_else(|| panic!("{}", c.tree()));
        assert_eq!(token.state, NodeState::NoHandler);
        assert!(c.graph.root(&token.id).is_some());
    }
    // /finalize only where the content is provably gone.
    let empty = c.node("namespace spec-empty");
    let token = c.below(empty)[0];
    assert!(matches!(c.remedy(token), Action::FinalizeNamespace(f) if f.name == "spec-empty"));
    let content = c.node("namespace spec-content");
    let token = c
        .below(content)
        .into_iter()
        .find(|n| n.kind == NodeKind::SpecToken)
        .unwrap();
    assert!(
        matches!(c.remedy(token), Action::Refuse { .. }),
        "{}",
        c.tree()
    );
}

#[test]
fn a_pod_on_a_lost_node_waits_on_its_kubelet_and_the_kyverno_pod_on_the_webhook() {
    let c = Case::of(&recorded("node-lost"));
    let pod = c.node("Pod lost/web");
    let kubelet = c.below(pod);
    assert_eq!(kubelet.len(), 1);
    assert_eq!(kubelet[0].kind, NodeKind::Node);
    assert_eq!(kubelet[0].state, NodeState::NotReady);

    let c = Case::of(&recorded("kyverno-webhook-blocks-final-pod-delete"));
    let pod = c.node("Pod kyverno-");
    let hook = c.below(pod);
    assert_eq!(hook.len(), 1, "{}", c.tree());
    assert_eq!(hook[0].kind, NodeKind::Webhook);
    let svc = c.below(hook[0]);
    assert_eq!(svc[0].state, NodeState::Gone);
    assert!(matches!(
        c.remedy(svc[0]),
        Action::SetWebhookFailurePolicy(_)
    ));
}

#[test]
fn the_node_doctor_names_what_a_pod_waits_on_instead_of_the_api_guess() {
    let facts: NodeFacts = doctor_support::node_facts("busy-mount");
    let nf = diagnose_pod(&facts, &DiagnoseNodeOptions::default());
    let g = BlockerGraph::build_with_nodes(&[], &Plan::default(), &Snapshot::default(), &[&nf]);
    let pod = g.node(&object_id(&nf.pod)).expect("the pod");
    assert!(g.targets.contains(&pod.id));
    let below: Vec<&GraphNode> = g.waits_on(&pod.id).filter_map(|e| g.node(&e.to)).collect();
    assert_eq!(below.len(), 1, "{:#?}", g);
    assert!(
        below[0].label.starts_with("volume teardown of pod"),
        "{:#?}",
        below
    );
    assert_eq!(below[0].state, NodeState::Failing);
    assert_eq!(below[0].detail.as_deref(), Some("data"));
    assert!(g.root(&below[0].id).is_some());
    assert!(
        g.edges[0].why.starts_with("node doctor: "),
        "{:#?}",
        g.edges
    );
    assert_eq!(g.edges[0].finding, None);
}

#[test]
fn the_mermaid_diagram_names_the_root_cause() {
    let c = Case::of(&recorded("dead-admission-webhook"));
    let d = mermaid::flowchart(&c.graph);
    assert_eq!(d.left_out, 0);
    let root_line = d
        .text
        .lines()
        .find(|l| l.contains("Service policy-system/policy-webhook: gone (ServiceNotFound)"))
        .unwrap_or_else(|| panic!("{}", d.text));
    assert!(
        root_line.contains("root: SetWebhookFailurePolicy (step "),
        "{root_line}"
    );
    let id = root_line.trim().split('[').next().unwrap();
    assert!(
        d.text.contains(&format!("  class {id} root\n")),
        "{}",
        d.text
    );
}

/// Every recorded snapshot, hand-made and real.
fn every_snapshot() -> Vec<(String, Snapshot)> {
    let mut out: Vec<(String, Snapshot)> = doctor_support::fixture_names()
        .into_iter()
        .map(|n| (n.clone(), doctor_support::load_snapshot(&n)))
        .collect();
    let real = doctor_support::recorded_dir().join("real-v1.34.4");
    let mut names: Vec<String> = std::fs::read_dir(&real)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".json"))
        .collect();
    names.sort();
    for n in names {
        out.push((n.clone(), recorded(&n)));
    }
    out
}

#[test]
fn on_every_recorded_snapshot_the_graph_holds_together_and_is_stable() {
    for (name, s) in every_snapshot() {
        let c = Case::of(&s);
        let g = &c.graph;
        let ids: std::collections::HashSet<&str> = g.nodes.iter().map(|n| n.id.as_str()).collect();
        assert_eq!(ids.len(), g.nodes.len(), "{name}: ids are unique");
        for e in &g.edges {
            assert!(
                ids.contains(e.from.as_str()) && ids.contains(e.to.as_str()),
                "{name}: {e:?}"
            );
            let n = e.finding.expect("API findings only");
            assert!(n >= 1 && n <= c.findings.len(), "{name}: {e:?}");
        }
        for r in &g.roots {
            assert!(
                g.waits_on(&r.id).next().is_none(),
                "{name}: root {} waits",
                r.id
            );
        }
        for t in &g.targets {
            assert!(
                !g.edges.iter().any(|e| &e.to == t),
                "{name}: target {t} is waited on"
            );
        }
        // Every finding is in the graph: its subject, or (a webhook
        // configuration's) the webhook it names.
        for f in &c.findings {
            let there = g.node(&object_id(&f.subject)).is_some()
                || (matches!(
                    f.kind(),
                    FindingKind::DeadWebhook | FindingKind::WebhookBackendFailing
                ) && g.nodes.iter().any(|n| n.id.contains(&f.subject.name)));
            assert!(there, "{name}: {} {} not in the graph", f.kind(), f.subject);
        }
        // Every Terminating namespace a finding is about leads somewhere.
        for f in c.findings.iter().filter(|f| f.subject.kind == "Namespace") {
            assert!(
                g.waits_on(&object_id(&f.subject)).next().is_some(),
                "{name}: {} waits on nothing:\n{}",
                f.subject,
                c.tree()
            );
        }
        // Same input, same graph, same ids; and JSON round-trips.
        assert_eq!(Case::of(&s).graph, *g, "{name}");
        let back: BlockerGraph = serde_json::from_str(&serde_json::to_string(g).unwrap()).unwrap();
        assert_eq!(back, *g, "{name}");
    }
}
