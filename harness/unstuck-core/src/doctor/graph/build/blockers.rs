//! The [`Builder`]'s nodes for what blocks a stuck object from outside
//! it: webhooks, Services, APIServices, CRDs, and the parts of a node.

use super::{Builder, NodePart, object_id, object_label, pod_key};
use crate::doctor::backend::{BackendState, judge};
use crate::doctor::graph::{NodeKind, NodeState};
use crate::doctor::model::{ObjectRef, ServiceKey, WebhookConfigKind};
use crate::doctor::webhook::{may_have_failed, webhooks};

impl<'a> Builder<'a> {
    /// One webhook of one configuration.
    pub fn webhook(
        &mut self,
        kind: WebhookConfigKind,
        configuration: &str,
        name: &str,
        state: NodeState,
        detail: Option<String>,
    ) -> String {
        self.node(
            format!("webhook:{}:{configuration}:{name}", kind.kind()),
            NodeKind::Webhook,
            format!("webhook {name} ({} {configuration})", kind.kind()),
            state,
            detail,
        )
    }

    /// The registered webhooks called `name` that namespace `namespace`'s
    /// content failure `message` can mean (an error names a webhook only by
    /// its name; [`may_have_failed`] narrows it by namespaceSelector and
    /// the URL quoted), with the Service behind each; a node of its own,
    /// `Unknown`, when none is registered any more.
    pub fn webhooks_blamed(
        &mut self,
        name: &str,
        namespace: &str,
        message: &str,
        finding: usize,
    ) -> Vec<String> {
        let ns = self
            .snapshot
            .namespaces
            .iter()
            .find(|n| n.metadata.name.as_deref() == Some(namespace));
        let found: Vec<(WebhookConfigKind, String, String, Option<ServiceKey>)> =
            webhooks(self.snapshot)
                .into_iter()
                .filter(|w| w.name == name)
                .filter(|w| ns.is_none_or(|ns| may_have_failed(w, ns, message)))
                .map(|w| {
                    (
                        w.config_kind,
                        w.config_name.to_owned(),
                        w.failure_policy.to_owned(),
                        w.service(),
                    )
                })
                .collect();
        if found.is_empty() {
            return vec![self.node(
                format!("webhook:?:?:{name}"),
                NodeKind::Webhook,
                format!("webhook {name}"),
                NodeState::Unknown,
                Some("not registered any more".into()),
            )];
        }
        let mut ids = Vec::new();
        for (kind, config, policy, service) in found {
            let backend = service.as_ref().map(|s| (s, judge(self.lookup(s))));
            let (state, detail) = match &backend {
                Some((_, j)) if j.is_gone() && policy == "Fail" => (NodeState::FailingClosed, None),
                _ => (
                    NodeState::Unknown,
                    Some(format!("failurePolicy {policy}; backend not proven gone")),
                ),
            };
            let id = self.webhook(kind, &config, name, state, detail);
            if let Some((svc, _)) = backend {
                let svc = svc.clone();
                let to = self.service(&svc);
                self.edge(
                    &id,
                    &to,
                    format!("webhook {name} calls Service {svc}"),
                    Some(finding),
                );
            }
            ids.push(id);
        }
        ids
    }

    /// The collector's lookup of Service `key`, for a webhook or an
    /// APIService.
    pub fn lookup(&self, key: &ServiceKey) -> Option<&'a crate::doctor::ServiceLookup> {
        self.snapshot.service_lookup(key).or_else(|| {
            self.snapshot
                .api_service_backends
                .iter()
                .find(|l| l.service == *key)
        })
    }

    /// Service `key`, in the state the collector's lookup proves.
    pub fn service(&mut self, key: &ServiceKey) -> String {
        let lookup = self.lookup(key);
        let j = judge(lookup);
        let (state, detail) = match j.state {
            BackendState::Gone(reason) => (NodeState::Gone, Some(reason.to_owned())),
            BackendState::Serving => (NodeState::Present, Some("serving".to_owned())),
            // Installed but not serving: the root is why, when shown.
            BackendState::Unknown => (
                NodeState::Unknown,
                Some(match crate::doctor::backend::not_serving_cause(lookup) {
                    Some(cause) => format!("not serving, not proven gone: {cause}"),
                    None => "not proven gone".to_owned(),
                }),
            ),
        };
        self.node(
            format!("service:{key}"),
            NodeKind::Service,
            format!("Service {key}"),
            state,
            detail,
        )
    }

    /// APIService `name`, unavailable when its `Available` condition is not
    /// `True`.
    pub fn api_service(&mut self, name: &str) -> String {
        let r = ObjectRef {
            api_version: "apiregistration.k8s.io/v1".into(),
            kind: "APIService".into(),
            namespace: None,
            name: name.to_owned(),
            uid: None,
        };
        let (state, detail) = match self.snapshot.api_service(name) {
            None => (NodeState::Gone, Some("not registered any more".to_owned())),
            Some(a) => match crate::doctor::conditions::api_service_available(a) {
                Some(c) if c.status == "True" => (NodeState::Present, None),
                Some(c) => (NodeState::Unavailable, c.reason.clone()),
                None => (
                    NodeState::Unknown,
                    Some("no Available condition".to_owned()),
                ),
            },
        };
        self.node(
            object_id(&r),
            NodeKind::ApiService,
            object_label(&r),
            state,
            detail,
        )
    }

    /// CustomResourceDefinition `name` (`<plural>.<group>`).
    // No finding names a CRD yet; the conversion-webhook finding (issue 18)
    // will: the namespaces it breaks wait on the CRD, the CRD on its Service.
    pub fn crd(&mut self, name: &str, state: NodeState, detail: Option<String>) -> String {
        let r = ObjectRef {
            api_version: "apiextensions.k8s.io/v1".into(),
            kind: "CustomResourceDefinition".into(),
            namespace: None,
            name: name.to_owned(),
            uid: None,
        };
        self.node(
            object_id(&r),
            NodeKind::Crd,
            object_label(&r),
            state,
            detail,
        )
    }

    /// Something on node `node` a pod waits on: `part` is `kubelet`,
    /// `runtime` or `network` (shared by every pod of the node), or a
    /// part of the pod's own (`volumes`, `kernel`), then keyed by `pod`.
    pub fn on_node(
        &mut self,
        node: &str,
        part: NodePart,
        pod: &ObjectRef,
        state: NodeState,
        detail: Option<String>,
    ) -> String {
        let (id, kind, label) = match part {
            NodePart::Kubelet => (
                format!("node:{node}:kubelet"),
                NodeKind::Node,
                format!("kubelet on node {node}"),
            ),
            NodePart::Runtime => (
                format!("node:{node}:runtime"),
                NodeKind::Runtime,
                format!("container runtime on node {node}"),
            ),
            NodePart::Network => (
                format!("node:{node}:network"),
                NodeKind::Runtime,
                format!("network plugin on node {node}"),
            ),
            NodePart::Volumes => (
                format!("node:{node}:volumes:{}", pod_key(pod)),
                NodeKind::Runtime,
                format!("volume teardown of pod {} on node {node}", pod_key(pod)),
            ),
            NodePart::Kernel => (
                format!("node:{node}:kernel:{}", pod_key(pod)),
                NodeKind::Runtime,
                format!(
                    "processes of pod {} in the kernel on node {node}",
                    pod_key(pod)
                ),
            ),
            NodePart::Other(what) => (
                format!("node:{node}:{what}:{}", pod_key(pod)),
                NodeKind::Runtime,
                format!("{what} of pod {} on node {node}", pod_key(pod)),
            ),
        };
        self.node(id, kind, label, state, detail)
    }
}
