//! Per-run names for everything a scenario creates, so a run never meets
//! an object that was there before it (on a cluster unstuck did not
//! create, `v1beta1.metrics.k8s.io` or `kialis.kiali.io` may be real).
//!
//! Scenario files keep logical names. At run time:
//! - a logical namespace becomes `<name>-<run>`;
//! - an API group the scenario defines (a CRD's or an APIService's
//!   `spec.group`) gets the run's mark on its first label:
//!   `kiali.io` → `kiali-<run>.io`. Every mention of the group follows:
//!   apiVersions, CRD and APIService names (`kialis.kiali-<run>.io`,
//!   `v1beta1.metrics-<run>.k8s.io`), finalizer keys in that group, and
//!   the words a condition expects. A finalizer key must follow its
//!   group: the doctor looks for a key's owner under its parent domains,
//!   so a real operator of the unmarked group would otherwise count;
//! - any other cluster-scoped object becomes `<name>-<run>`;
//! - namespaced objects keep their names: their namespace is the run's.

use std::{collections::BTreeMap, path::Path};

use unstuck_core::scenario::Scenario;

use super::objects::{NamespaceMap, read_manifests};

/// Longest name this module makes: a DNS label, valid for every kind.
const MAX_LABEL: usize = 63;

/// The run's names for one scenario.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Names {
    run: String,
    namespaces: NamespaceMap,
    /// Logical API group → this run's group.
    groups: BTreeMap<String, String>,
}

impl Names {
    pub fn new<'a>(
        namespaces: impl IntoIterator<Item = &'a str>,
        groups: impl IntoIterator<Item = String>,
        run: &str,
    ) -> Self {
        let groups = groups
            .into_iter()
            .map(|g| {
                let marked = mark_group(&g, run);
                (g, marked)
            })
            .collect();
        Self {
            run: run.to_string(),
            namespaces: NamespaceMap::new(namespaces, run),
            groups,
        }
    }

    /// The names for `scenario`: the groups come from the CRDs and
    /// APIServices among its fixtures (unreadable fixtures are left to the
    /// apply step to report).
    pub fn for_scenario(scenario: &Scenario, fixtures_dir: &Path, run: &str) -> Self {
        let mut groups: Vec<String> = scenario
            .fixture_files()
            .into_iter()
            .filter_map(|f| read_manifests(&fixtures_dir.join(f)).ok())
            .flatten()
            .filter_map(|d| defined_group(&d))
            .collect();
        // A registry's host is renamed like a group (`shop.registry.unstuck.local`
        // → `shop-<run>.registry.unstuck.local`): two runs on one node each
        // get their own hosts.toml, and image names and expected messages follow.
        groups.extend(scenario.registries().iter().map(|r| r.host()));
        Self::new(scenario.namespace_names(), groups, run)
    }

    pub fn run(&self) -> &str {
        &self.run
    }

    pub fn namespaces(&self) -> &NamespaceMap {
        &self.namespaces
    }

    /// The run's namespace for a logical one.
    pub fn namespace(&self, logical: &str) -> String {
        self.namespaces.real(logical)
    }

    /// `group/version` (or `v1`) with a renamed group.
    pub fn api_version(&self, api_version: &str) -> String {
        match api_version.split_once('/') {
            Some((g, v)) => format!("{}/{v}", self.groups.get(g).map_or(g, String::as_str)),
            None => api_version.to_string(),
        }
    }

    /// `text` with every renamed group in it replaced, where it stands as
    /// a whole domain (`kiali.io/finalizer`, `kialis.kiali.io`, but not
    /// `mykiali.io` or `kiali.io.example`).
    pub fn text(&self, text: &str) -> String {
        if self.groups.is_empty() {
            return text.to_string();
        }
        // Longest first: of two groups where one ends the other, the
        // longer one is the match.
        let mut groups: Vec<(&String, &String)> = self.groups.iter().collect();
        groups.sort_by_key(|(g, _)| std::cmp::Reverse(g.len()));
        let bytes = text.as_bytes();
        let mut out = String::with_capacity(text.len());
        let mut i = 0;
        'scan: while i < text.len() {
            let starts_domain = i == 0 || !is_label_char(bytes[i - 1]);
            if starts_domain || bytes[i - 1] == b'.' {
                for (g, marked) in &groups {
                    let end = i + g.len();
                    if text[i..].starts_with(g.as_str()) && ends_domain(bytes, end) {
                        out.push_str(marked);
                        i = end;
                        continue 'scan;
                    }
                }
            }
            let c = text[i..].chars().next().expect("i is on a char boundary");
            out.push(c);
            i += c.len_utf8();
        }
        out
    }

    /// The name this run gives an object whose fixture (or step) names it
    /// `logical`.
    pub fn object(&self, kind: &str, logical: &str, namespaced: bool) -> String {
        match (namespaced, kind) {
            (true, _) => logical.to_string(),
            (false, "Namespace") => self.namespace(logical),
            // Their names are made of their group, which carries the mark.
            (false, "CustomResourceDefinition" | "APIService") => self.text(logical),
            (false, _) => with_suffix(logical, &self.run),
        }
    }

    /// Points the Service references of a registration (an APIService's
    /// `spec.service`, a webhook's or a CRD conversion webhook's
    /// `clientConfig.service`) at the run's namespace when they name one
    /// of the scenario's logical namespaces: a backend the scenario runs
    /// in its own namespace is then the one the registration calls. Any
    /// other namespace (`kube-system`, a product's uninstalled one) stays.
    pub fn service_references(&self, doc: &mut serde_json::Value) {
        // `get_mut`, never `IndexMut`: indexing a missing key would add it
        // (as null) to what is sent to the API.
        fn at<'v>(
            v: &'v mut serde_json::Value,
            path: &[&str],
        ) -> Option<&'v mut serde_json::Value> {
            path.iter().try_fold(v, |v, key| v.get_mut(*key))
        }
        let kind = doc.get("kind").and_then(|k| k.as_str()).map(str::to_owned);
        let mut services: Vec<&mut serde_json::Value> = Vec::new();
        match kind.as_deref() {
            Some("APIService") => services.extend(at(doc, &["spec", "service"])),
            Some("ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration") => {
                if let Some(hooks) = at(doc, &["webhooks"]).and_then(|h| h.as_array_mut()) {
                    services.extend(
                        hooks
                            .iter_mut()
                            .filter_map(|h| at(h, &["clientConfig", "service"])),
                    );
                }
            }
            Some("CustomResourceDefinition") => services.extend(at(
                doc,
                &["spec", "conversion", "webhook", "clientConfig", "service"],
            )),
            _ => {}
        }
        for service in services {
            let Some(ns) = service.get("namespace").and_then(|n| n.as_str()) else {
                continue;
            };
            if self.namespaces.is_logical(ns) {
                service["namespace"] = serde_json::Value::String(self.namespace(ns));
            }
        }
    }

    /// Rewrites a fixture document: every string and map key that names
    /// a renamed group. `metadata.name` and `metadata.namespace` are the
    /// apply step's (it knows the kind's scope).
    pub fn document(&self, doc: &mut serde_json::Value) {
        use serde_json::Value;
        match doc {
            Value::String(s) => *s = self.text(s),
            Value::Array(items) => items.iter_mut().for_each(|v| self.document(v)),
            Value::Object(map) => {
                let old = std::mem::take(map);
                for (k, mut v) in old {
                    self.document(&mut v);
                    map.insert(self.text(&k), v);
                }
            }
            _ => {}
        }
    }
}

/// The group a fixture document defines: a CRD's or an APIService's
/// `spec.group`.
fn defined_group(doc: &serde_json::Value) -> Option<String> {
    match doc["kind"].as_str()? {
        "CustomResourceDefinition" | "APIService" => doc["spec"]["group"]
            .as_str()
            .filter(|g| !g.is_empty())
            .map(str::to_string),
        _ => None,
    }
}

/// `kiali.io` → `kiali-<run>.io`; the first label stays a DNS label.
fn mark_group(group: &str, run: &str) -> String {
    let (first, rest) = match group.split_once('.') {
        Some((f, r)) => (f, Some(r)),
        None => (group, None),
    };
    let first = with_suffix(first, run);
    match rest {
        Some(r) => format!("{first}.{r}"),
        None => first,
    }
}

/// `<name>-<run>`, the name shortened so the whole is a DNS label.
fn with_suffix(name: &str, run: &str) -> String {
    let keep = MAX_LABEL.saturating_sub(run.len() + 1).min(name.len());
    let mut cut = keep;
    while !name.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}-{run}", name[..cut].trim_end_matches(['-', '.']))
}

fn is_label_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-' || b == b'_'
}

/// Whether a domain that ends at `end` ends there: not followed by more
/// of a label, nor by `.label`.
fn ends_domain(bytes: &[u8], end: usize) -> bool {
    match bytes.get(end) {
        None => true,
        Some(b'.') => !bytes.get(end + 1).is_some_and(|b| is_label_char(*b)),
        Some(b) => !is_label_char(*b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> Names {
        Names::new(
            ["app", "istio"],
            ["kiali.io".to_string(), "metrics.k8s.io".to_string()],
            "k3x9q2",
        )
    }

    #[test]
    fn a_group_gets_the_mark_on_its_first_label() {
        let n = names();
        assert_eq!(
            n.api_version("kiali.io/v1alpha1"),
            "kiali-k3x9q2.io/v1alpha1"
        );
        assert_eq!(n.api_version("v1"), "v1");
        assert_eq!(n.api_version("apps/v1"), "apps/v1");
        assert_eq!(
            n.object("CustomResourceDefinition", "kialis.kiali.io", false),
            "kialis.kiali-k3x9q2.io"
        );
        assert_eq!(
            n.object("APIService", "v1beta1.metrics.k8s.io", false),
            "v1beta1.metrics-k3x9q2.k8s.io"
        );
    }

    #[test]
    fn every_mention_of_a_renamed_group_follows_it_and_nothing_else_does() {
        let n = names();
        for (before, after) in [
            ("kiali.io/finalizer", "kiali-k3x9q2.io/finalizer"),
            (
                "Some resources are remaining: kialis.kiali.io has 1 resource instances",
                "Some resources are remaining: kialis.kiali-k3x9q2.io has 1 resource instances",
            ),
            ("metrics.k8s.io/v1beta1", "metrics-k3x9q2.k8s.io/v1beta1"),
            ("at the end: kiali.io.", "at the end: kiali-k3x9q2.io."),
            ("pods.metrics.k8s.io", "pods.metrics-k3x9q2.k8s.io"),
            // Not the group: a longer label, a longer domain, another group.
            ("mykiali.io/finalizer", "mykiali.io/finalizer"),
            ("kiali.io.example/x", "kiali.io.example/x"),
            ("example.com/removed-product", "example.com/removed-product"),
            ("k8s.io", "k8s.io"),
        ] {
            assert_eq!(n.text(before), after, "{before}");
        }
    }

    #[test]
    fn other_cluster_scoped_objects_get_a_suffix_and_namespaced_ones_keep_their_name() {
        let n = names();
        assert_eq!(
            n.object("PersistentVolume", "unstuck-pvc-protection", false),
            "unstuck-pvc-protection-k3x9q2"
        );
        assert_eq!(
            n.object("ValidatingWebhookConfiguration", "policy-guard", false),
            "policy-guard-k3x9q2"
        );
        assert_eq!(n.object("Namespace", "app", false), "app-k3x9q2");
        assert_eq!(n.object("ConfigMap", "mymap", true), "mymap");
        let long = n.object("ClusterRole", &"r".repeat(80), false);
        assert!(
            long.len() <= MAX_LABEL && long.ends_with("-k3x9q2"),
            "{long}"
        );
    }

    /// The recorded fixtures of scenario 02, as the apply step rewrites them.
    #[test]
    fn a_crd_and_its_object_are_rewritten_consistently() {
        let n = names();
        let mut crd = serde_json::json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "kialis.kiali.io"},
            "spec": {"group": "kiali.io", "names": {"kind": "Kiali", "plural": "kialis"}}
        });
        let mut cr = serde_json::json!({
            "apiVersion": "kiali.io/v1alpha1", "kind": "Kiali",
            "metadata": {"name": "kiali", "finalizers": ["kiali.io/finalizer"],
                         "annotations": {"kiali.io/owner": "x"}},
            "spec": {"deployment": {"namespace": "istio-system"}}
        });
        n.document(&mut crd);
        n.document(&mut cr);
        assert_eq!(crd["spec"]["group"], "kiali-k3x9q2.io");
        assert_eq!(crd["metadata"]["name"], "kialis.kiali-k3x9q2.io");
        assert_eq!(crd["apiVersion"], "apiextensions.k8s.io/v1");
        assert_eq!(cr["apiVersion"], "kiali-k3x9q2.io/v1alpha1");
        assert_eq!(cr["metadata"]["finalizers"][0], "kiali-k3x9q2.io/finalizer");
        assert_eq!(cr["metadata"]["annotations"]["kiali-k3x9q2.io/owner"], "x");
        assert_eq!(cr["metadata"]["name"], "kiali");
        assert_eq!(cr["spec"]["deployment"]["namespace"], "istio-system");
    }

    #[test]
    fn a_registrations_service_in_a_logical_namespace_follows_the_run() {
        let n = Names::new(["monitoring"], Vec::new(), "r1");
        let mut api = serde_json::json!({
            "kind": "APIService",
            "spec": {"service": {"namespace": "monitoring", "name": "adapter"}}
        });
        n.service_references(&mut api);
        assert_eq!(api["spec"]["service"]["namespace"], "monitoring-r1");
        let mut hooks = serde_json::json!({
            "kind": "ValidatingWebhookConfiguration",
            "webhooks": [
                {"clientConfig": {"service": {"namespace": "monitoring", "name": "a"}}},
                {"clientConfig": {"service": {"namespace": "kube-system", "name": "b"}}},
                {"clientConfig": {"url": "https://127.0.0.1:9443/"}}
            ]
        });
        n.service_references(&mut hooks);
        assert_eq!(
            hooks["webhooks"][0]["clientConfig"]["service"]["namespace"],
            "monitoring-r1"
        );
        assert_eq!(
            hooks["webhooks"][1]["clientConfig"]["service"]["namespace"], "kube-system",
            "a namespace the scenario does not declare is left as written"
        );
        assert!(
            hooks["webhooks"][2]["clientConfig"]
                .get("service")
                .is_none()
        );
    }

    #[test]
    fn groups_come_from_crds_and_apiservices_only() {
        let crd =
            serde_json::json!({"kind": "CustomResourceDefinition", "spec": {"group": "kiali.io"}});
        let api = serde_json::json!({"kind": "APIService", "spec": {"group": "metrics.k8s.io"}});
        let local = serde_json::json!({"kind": "APIService", "spec": {"group": ""}});
        let cm = serde_json::json!({"kind": "ConfigMap", "spec": {"group": "x.io"}});
        assert_eq!(defined_group(&crd).as_deref(), Some("kiali.io"));
        assert_eq!(defined_group(&api).as_deref(), Some("metrics.k8s.io"));
        assert_eq!(defined_group(&local), None);
        assert_eq!(defined_group(&cm), None);
    }

    #[test]
    fn with_no_group_text_is_unchanged() {
        let n = Names::new(["app"], [], "abc123");
        assert_eq!(n.text("kiali.io/finalizer"), "kiali.io/finalizer");
    }
}
