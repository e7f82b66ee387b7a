//! Which objects the doctor may look at and act on: the whole cluster,
//! the namespaces a person named, or a scenario run's own objects.

use unstuck_core::doctor::{
    ApiServiceFacts, ConversionWebhookFacts, DeadWebhookFacts, Finding, FindingDetail,
};

use super::collect::CollectScope;

/// Which objects the doctor may look at and act on.
#[derive(Clone, Debug, Default)]
pub enum Scope {
    /// The whole cluster.
    #[default]
    Cluster,
    /// Findings about these namespaces, objects in them, and cluster-scoped
    /// blockers (APIServices, webhooks) a Terminating namespace among them
    /// names; nothing else cluster-scoped.
    Namespaces(Vec<String>),
    /// A scenario run (`unstuck run`): objects in the run's namespaces,
    /// and cluster-scoped objects whose UID is among those the run
    /// created. Nothing else, even a blocker of the run's namespaces: on
    /// a cluster unstuck did not create that may be someone's live object.
    Run {
        namespaces: Vec<String>,
        created_uids: Vec<String>,
    },
}

impl Scope {
    /// How far the collector needs to look for this scope.
    pub fn collect_scope(&self) -> CollectScope {
        match self {
            Scope::Cluster => CollectScope::Cluster,
            Scope::Namespaces(names) => CollectScope::Namespaces(names.clone()),
            // The run's cluster-scoped objects (CRDs, APIServices, webhook
            // configurations) are diagnosed too, so the whole cluster is read;
            // `admits` keeps the findings to the run's own objects.
            Scope::Run { .. } => CollectScope::Cluster,
        }
    }

    /// Where namespaced objects are read, for a report's scan line.
    pub fn describe(&self) -> String {
        if let Scope::Run { namespaces, .. } = self {
            // Listed cluster-wide (the run's own CRDs and webhooks), judged
            // for the run's objects.
            return format!(
                "cluster-wide for the run's namespaces {}",
                namespaces.join(", ")
            );
        }
        match self.namespaces() {
            None => "cluster-wide".into(),
            Some(names) => format!(
                "in namespace{} {} (and the cluster-scoped blockers of what is there)",
                if names.len() == 1 { "" } else { "s" },
                names.join(", ")
            ),
        }
    }

    /// The namespaces it is limited to; `None` for the whole cluster.
    pub fn namespaces(&self) -> Option<&[String]> {
        match self {
            Scope::Cluster => None,
            Scope::Namespaces(n) | Scope::Run { namespaces: n, .. } => Some(n),
        }
    }

    /// Whether an object in namespace `ns` (`None`: cluster-scoped) is in
    /// scope for waiting and judging what moved: the whole cluster covers
    /// every object, a scope of namespaces only the objects in them.
    pub fn covers_namespace(&self, ns: Option<&str>) -> bool {
        match (self.namespaces(), ns) {
            (None, _) => true,
            (Some(names), Some(ns)) => names.iter().any(|n| n == ns),
            (Some(_), None) => false,
        }
    }

    pub(crate) fn admits(&self, f: &Finding) -> bool {
        if let Scope::Run {
            namespaces,
            created_uids,
        } = self
        {
            return match &f.subject.namespace {
                Some(ns) => namespaces.contains(ns),
                None => f
                    .subject
                    .uid
                    .as_ref()
                    .is_some_and(|u| created_uids.contains(u)),
            };
        }
        let Scope::Namespaces(names) = self else {
            return true;
        };
        match (&f.subject.namespace, f.subject.kind.as_str(), &f.detail) {
            (Some(ns), _, _) => names.contains(ns),
            (None, "Namespace", _) => names.contains(&f.subject.name),
            // A cluster-scoped blocker (an APIService, a webhook) is in
            // scope only once a Terminating namespace among those named
            // names it in its condition: `-n` must never reach a cluster-wide
            // object that blocks nothing the user asked about.
            (
                None,
                _,
                FindingDetail::DeadApiService(ApiServiceFacts {
                    blocks_namespaces, ..
                })
                | FindingDetail::ApiServiceUnavailable(ApiServiceFacts {
                    blocks_namespaces, ..
                })
                | FindingDetail::DeadConversionWebhook(ConversionWebhookFacts {
                    blocks_namespaces,
                    ..
                }),
            ) => blocks_namespaces.iter().any(|b| names.contains(b)),
            // A webhook also when it rejects the write that would release
            // a stuck object among them (a finalizer patch, the namespace's
            // own finalizers): that is a blocker of what was asked about.
            (
                None,
                _,
                FindingDetail::DeadWebhook(DeadWebhookFacts {
                    blocks_namespaces,
                    rejects,
                    ..
                })
                | FindingDetail::WebhookBackendFailing {
                    blocks_namespaces,
                    rejects,
                    ..
                },
            ) => {
                blocks_namespaces.iter().any(|b| names.contains(b))
                    || rejects.iter().any(|r| {
                        let s = &r.subject;
                        match &s.namespace {
                            Some(ns) => names.contains(ns),
                            None => s.kind == "Namespace" && names.contains(&s.name),
                        }
                    })
            }
            (None, _, _) => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use unstuck_core::doctor::ObjectRef;

    use super::*;

    fn api_service(blocks: &[&str]) -> Finding {
        Finding {
            subject: ObjectRef {
                api_version: "apiregistration.k8s.io/v1".into(),
                kind: "APIService".into(),
                namespace: None,
                name: "v1beta1.metrics.k8s.io".into(),
                uid: None,
            },
            summary: String::new(),
            evidence: Vec::new(),
            detail: FindingDetail::DeadApiService(ApiServiceFacts {
                reason: "ServiceNotFound".into(),
                message: String::new(),
                status: "False".into(),
                service: "monitoring/adapter".into(),
                group_version: "metrics.k8s.io/v1beta1".into(),
                resource_version: None,
                blocks_namespaces: blocks.iter().map(|s| s.to_string()).collect(),
                outage: None,
            }),
        }
    }

    #[test]
    fn namespaces_admit_a_cluster_scoped_blocker_only_when_a_named_namespace_names_it() {
        let scope = Scope::Namespaces(vec!["app".into()]);
        assert!(!scope.admits(&api_service(&[])), "blocks nothing named");
        assert!(!scope.admits(&api_service(&["other"])));
        assert!(scope.admits(&api_service(&["other", "app"])));
        assert!(Scope::Cluster.admits(&api_service(&[])));
        let mut crd = api_service(&[]);
        crd.subject.kind = "CustomResourceDefinition".into();
        crd.detail = FindingDetail::OrphanFinalizer(Default::default());
        assert!(!scope.admits(&crd), "other cluster-scoped objects are out");
    }

    #[test]
    fn a_failing_webhook_that_rejects_a_release_in_scope_is_in_scope() {
        let scope = Scope::Namespaces(vec!["app".into()]);
        let rejects = |ns: &str| {
            vec![unstuck_core::doctor::rejected::RejectedWrite {
                subject: ObjectRef {
                    api_version: "v1".into(),
                    kind: "Namespace".into(),
                    namespace: None,
                    name: ns.into(),
                    uid: None,
                },
                operation: "UPDATE".into(),
                resource: "namespaces".into(),
                purpose: "removing its metadata finalizers".into(),
                assumed: None,
            }]
        };
        let mut f = api_service(&[]);
        f.subject.kind = "ValidatingWebhookConfiguration".into();
        f.detail = FindingDetail::WebhookBackendFailing {
            configuration: unstuck_core::doctor::WebhookConfigKind::Validating,
            configuration_name: "namespace-policy".into(),
            webhook: "validate.namespaces.policy.example.com".into(),
            service: None,
            verdict: "not serving".into(),
            quote: String::new(),
            timeout: None,
            blocks_namespaces: Vec::new(),
            rejects: rejects("app"),
        };
        assert!(scope.admits(&f));
        if let FindingDetail::WebhookBackendFailing { rejects: r, .. } = &mut f.detail {
            *r = rejects("other");
        }
        assert!(!scope.admits(&f), "it rejects nothing asked about");
    }
}
