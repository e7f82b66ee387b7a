//! Well-known finalizer keys outside Kubernetes itself, and the controller
//! that serves each. An entry only adds words to look for (the names its
//! controller's workloads carry) and a line naming the controller: the
//! verdict still comes from the evidence.
//!
//! Only keys confirmed in the projects' own sources are listed; where each
//! was read is noted beside it. Not listed because not confirmed there:
//! Strimzi, the Prometheus operator, Knative, Tekton, Argo Rollouts, Argo
//! CD's `/foreground` and `/background` variants.
//! Kubernetes' own keys live in `builtin.rs`.

/// One well-known key, or a prefix of keys, and who serves it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KnownKey {
    /// The exact key, or a prefix ending in `/` that every key of this
    /// controller starts with.
    pub key: &'static str,
    /// The project.
    pub project: &'static str,
    /// The controller that removes the key.
    pub controller: &'static str,
    /// Words its workloads, pods, leases or events carry.
    pub look_for: &'static [&'static str],
}

/// The table.
pub const KNOWN_KEYS: &[KnownKey] = &[
    // cert-manager, internal/controller/feature/features.go
    // (`UseDomainQualifiedFinalizer`: "acme.cert-manager.io/finalizer
    // instead of finalizer.acme.cert-manager.io").
    KnownKey {
        key: "acme.cert-manager.io/finalizer",
        project: "cert-manager",
        controller: "the cert-manager controller (ACME orders and challenges)",
        look_for: &["cert-manager", "jetstack"],
    },
    KnownKey {
        key: "finalizer.acme.cert-manager.io",
        project: "cert-manager",
        controller: "the cert-manager controller (ACME orders and challenges)",
        look_for: &["cert-manager", "jetstack"],
    },
    // Argo CD, pkg/apis/application/v1alpha1 (`ResourcesFinalizerName`),
    // also removed by the ApplicationSet controller.
    KnownKey {
        key: "resources-finalizer.argocd.argoproj.io",
        project: "Argo CD",
        controller: "argocd-application-controller (and the ApplicationSet controller)",
        look_for: &["argocd", "argocd-application-controller"],
    },
    // Argo Workflows, workflow/artifacts/gc (`Finalizer`).
    KnownKey {
        key: "workflows.argoproj.io/artifact-gc",
        project: "Argo Workflows",
        controller: "the Argo Workflows workflow-controller",
        look_for: &["workflow-controller", "argoproj"],
    },
    // Istio, operator/pkg/controller/istiocontrolplane (`finalizer`).
    KnownKey {
        key: "istio-finalizer.install.istio.io",
        project: "Istio",
        controller: "istio-operator",
        look_for: &["istio-operator", "istio"],
    },
    // Crossplane, crossplane-runtime pkg/reconciler/managed
    // (`managedFinalizerName`): removed by the provider serving the
    // managed resource, not by Crossplane's core.
    KnownKey {
        key: "finalizer.managedresource.crossplane.io",
        project: "Crossplane",
        controller: "the Crossplane provider that manages the resource",
        look_for: &["crossplane", "provider"],
    },
    // Rancher, rancher/norman lifecycle/object.go (`finalizerKey`,
    // `ScopedFinalizerKey`).
    KnownKey {
        key: "controller.cattle.io/",
        project: "Rancher",
        controller: "Rancher's controllers (norman lifecycle handlers)",
        look_for: &["rancher", "cattle"],
    },
    KnownKey {
        key: "clusterscoped.controller.cattle.io/",
        project: "Rancher",
        controller: "Rancher's controllers (norman lifecycle handlers)",
        look_for: &["rancher", "cattle"],
    },
    // rancher/wrangler pkg/generic/remove.go (`finalizerKey`); used by
    // Rancher, k3s and Harvester controllers.
    KnownKey {
        key: "wrangler.cattle.io/",
        project: "Rancher wrangler",
        controller: "a wrangler-based controller (Rancher, k3s, Harvester)",
        look_for: &["rancher", "cattle", "k3s", "harvester"],
    },
    // KubeSphere, kubesphere/kubesphere pkg/controller (workspacerole,
    // workspacerolebinding, groupbinding controllers).
    KnownKey {
        key: "finalizers.kubesphere.io/",
        project: "KubeSphere",
        controller: "ks-controller-manager",
        look_for: &["kubesphere", "ks-controller-manager"],
    },
    // Velero, pkg/controller/pod_volume_backup_controller.go
    // (`PodVolumeFinalizer`): removed by the node-agent DaemonSet.
    KnownKey {
        key: "velero.io/pod-volume-finalizer",
        project: "Velero",
        controller: "Velero's node-agent",
        look_for: &["velero", "node-agent"],
    },
];

/// The entry serving `finalizer`: an exact key, or a prefix it starts with.
pub fn known_key(finalizer: &str) -> Option<&'static KnownKey> {
    KNOWN_KEYS.iter().find(|k| {
        if k.key.ends_with('/') {
            finalizer.starts_with(k.key)
        } else {
            finalizer == k.key
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_and_prefix() {
        assert_eq!(
            known_key("finalizers.kubesphere.io/namespaces").map(|k| k.project),
            Some("KubeSphere")
        );
        assert_eq!(
            known_key("clusterscoped.controller.cattle.io/project-namespace-auth_local")
                .map(|k| k.project),
            Some("Rancher")
        );
        assert!(known_key("acme.cert-manager.io/finalizer-x").is_none());
        assert!(known_key("kiali.io/finalizer").is_none());
    }
}
