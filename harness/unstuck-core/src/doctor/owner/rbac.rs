//! Who may remove a finalizer, by RBAC: the grants of `update` or `patch`
//! on the object's resource, evaluated over the cluster's Roles,
//! ClusterRoles and their bindings as kube-apiserver's RBAC authorizer
//! does (`plugin/pkg/auth/authorizer/rbac/rbac.go`, `RuleAllows` in
//! `pkg/apis/rbac/v1/evaluation_helpers.go`): a rule allows a request when
//! its verbs, apiGroups, resources and resourceNames each contain the
//! request's value or `*`. An aggregated ClusterRole (one with an
//! `aggregationRule`) is resolved here from its selectors, over every
//! ClusterRole whose labels match, as kube-controller-manager's
//! clusterrole-aggregation controller would fill it: a controller that is
//! down or slow leaves the role's own `rules` empty or stale, and an empty
//! list is no proof that nobody may update the object.
//!
//! Removing a key from `metadata.finalizers` is an `update` or `patch` of
//! the object itself (not of a subresource); a Namespace's
//! `spec.finalizers` go through `update` on `namespaces/finalize`.
//!
//! Only in-cluster principals can be mapped to something that runs here:
//! ServiceAccounts (by kind, or as the user
//! `system:serviceaccount:NS:NAME`) and the groups every ServiceAccount is
//! in (`system:serviceaccounts`, `system:serviceaccounts:NS`,
//! `system:authenticated`). Users and other groups act from outside the
//! cluster; they are counted, and their writes show in managedFields.

use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule, RoleRef, Subject};

pub use crate::doctor::model::rbac::Rbac;

/// The request a finalizer's remover would make.
#[derive(Clone, Copy, Debug)]
pub struct Request<'a> {
    /// API group (`""` for core).
    pub group: &'a str,
    /// Plural resource, with `/subresource` when one is needed
    /// (`namespaces/finalize`).
    pub resource: &'a str,
    /// The object's namespace (`None`: cluster-scoped).
    pub namespace: Option<&'a str>,
    /// The object's name.
    pub name: &'a str,
}

/// Who a grant is to.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Grantee {
    /// One ServiceAccount.
    ServiceAccount {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
    /// Every ServiceAccount (`system:serviceaccounts`,
    /// `system:authenticated`).
    AllServiceAccounts(String),
    /// Every ServiceAccount of one namespace (`system:serviceaccounts:NS`).
    NamespaceServiceAccounts {
        /// The group's name.
        group: String,
        /// The namespace.
        namespace: String,
    },
}

impl Grantee {
    /// Whether a pod running as ServiceAccount `ns/sa` holds this grant.
    pub fn covers(&self, ns: &str, sa: &str) -> bool {
        match self {
            Grantee::ServiceAccount { namespace, name } => namespace == ns && name == sa,
            Grantee::AllServiceAccounts(_) => true,
            Grantee::NamespaceServiceAccounts { namespace, .. } => namespace == ns,
        }
    }
}

impl std::fmt::Display for Grantee {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Grantee::ServiceAccount { namespace, name } => {
                write!(f, "ServiceAccount {namespace}/{name}")
            }
            Grantee::AllServiceAccounts(g) | Grantee::NamespaceServiceAccounts { group: g, .. } => {
                write!(f, "group {g}")
            }
        }
    }
}

/// How far a grant reaches beyond the object's own type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Breadth {
    /// The rule names the object's group and resource.
    Specific,
    /// The rule names the object's group, with every resource in it.
    GroupWide,
    /// The rule names every group (`apiGroups: ["*"]`): a cluster-admin
    /// kind of right, held by GitOps controllers and admin tools that
    /// serve no finalizer of their own.
    Wildcard,
}

/// One grant of `update`/`patch` on the object to an in-cluster principal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grant {
    /// Who holds it.
    pub grantee: Grantee,
    /// `ClusterRole NAME` or `Role NS/NAME`.
    pub role: String,
    /// `ClusterRoleBinding NAME` or `RoleBinding NS/NAME`.
    pub binding: String,
    /// The rule that allows it, as a person would read it.
    pub rule: String,
    /// How far it reaches.
    pub breadth: Breadth,
}

/// What the grants search found besides the grants themselves.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Grants {
    /// Grants to ServiceAccounts (or their groups).
    pub to_service_accounts: Vec<Grant>,
    /// Users and groups outside the cluster that hold such a grant
    /// (`system:masters` holders are not listed: RBAC does not decide for
    /// them).
    pub to_others: Vec<String>,
    /// Of those, the grants that name the object's group (not `*`) to a
    /// User or Group that is not one of Kubernetes' own (`system:`): an
    /// identity acting from outside the cluster, whose only trace here
    /// would be its writes.
    pub to_outside: Vec<OutsideGrant>,
}

/// A grant of `update`/`patch` on the object to a User or Group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutsideGrant {
    /// `User alice` or `Group platform-ops`.
    pub subject: String,
    pub role: String,
    pub binding: String,
    pub rule: String,
}

const VERBS: [&str; 2] = ["update", "patch"];

fn has(list: &[String], value: &str) -> bool {
    list.iter().any(|v| v == "*" || v == value)
}

/// `resources` matching as `ResourceMatches` does: `*`, the exact
/// `resource/subresource`, or `*/subresource`.
fn resource_matches(rule: &PolicyRule, resource: &str) -> bool {
    rule.resources.iter().flatten().any(|r| {
        r == "*"
            || r == resource
            || resource
                .split_once('/')
                .is_some_and(|(_, sub)| r == &format!("*/{sub}"))
    })
}

/// Whether `rule` lets its holder update or patch the requested object,
/// and how broadly.
fn rule_allows(rule: &PolicyRule, req: &Request) -> Option<Breadth> {
    let verbs_ok = VERBS.iter().any(|v| has(&rule.verbs, v));
    let groups = rule.api_groups.as_deref().unwrap_or_default();
    let names_ok = rule
        .resource_names
        .as_deref()
        .is_none_or(|n| n.is_empty() || n.iter().any(|x| x == req.name));
    if !verbs_ok || !has(groups, req.group) || !resource_matches(rule, req.resource) || !names_ok {
        return None;
    }
    Some(if groups.iter().any(|g| g == "*") {
        Breadth::Wildcard
    } else if rule.resources.iter().flatten().any(|r| r == req.resource) {
        Breadth::Specific
    } else {
        Breadth::GroupWide
    })
}

fn describe_rule(rule: &PolicyRule) -> String {
    let list = |v: &[String]| {
        v.iter()
            .map(|s| if s.is_empty() { "\"\"" } else { s.as_str() })
            .collect::<Vec<_>>()
            .join(",")
    };
    let mut s = format!(
        "verbs [{}] on apiGroups [{}] resources [{}]",
        list(&rule.verbs),
        list(rule.api_groups.as_deref().unwrap_or_default()),
        list(rule.resources.as_deref().unwrap_or_default())
    );
    if let Some(names) = rule.resource_names.as_deref().filter(|n| !n.is_empty()) {
        s.push_str(&format!(" resourceNames [{}]", list(names)));
    }
    s
}

/// The narrowest rule of `rules` that allows the request: a role that
/// names the type says the most about its holder.
fn best_rule<'r>(rules: &'r [PolicyRule], req: &Request) -> Option<(&'r PolicyRule, Breadth)> {
    rules
        .iter()
        .filter_map(|r| rule_allows(r, req).map(|b| (r, b)))
        .min_by_key(|(_, b)| *b)
}

impl Rbac {
    fn rules_of(
        &self,
        role_ref: &RoleRef,
        binding_ns: Option<&str>,
    ) -> Option<(String, Vec<PolicyRule>)> {
        match (role_ref.kind.as_str(), binding_ns) {
            ("ClusterRole", _) => self
                .cluster_roles
                .iter()
                .find(|r| r.metadata.name.as_deref() == Some(role_ref.name.as_str()))
                .map(|r| {
                    let aggregated = r.aggregation_rule.is_some();
                    (
                        if aggregated {
                            format!("ClusterRole {} (aggregated)", role_ref.name)
                        } else {
                            format!("ClusterRole {}", role_ref.name)
                        },
                        self.cluster_role_rules(r),
                    )
                }),
            ("Role", Some(ns)) => self
                .roles
                .iter()
                .find(|r| {
                    r.metadata.namespace.as_deref() == Some(ns)
                        && r.metadata.name.as_deref() == Some(role_ref.name.as_str())
                })
                .map(|r| {
                    (
                        format!("Role {ns}/{}", role_ref.name),
                        r.rules.clone().unwrap_or_default(),
                    )
                }),
            _ => None,
        }
    }

    /// A ClusterRole's rules: its own, and for an aggregated one also the
    /// rules of every ClusterRole its selectors match (recursively, each
    /// role once), whatever the aggregation controller has written yet.
    pub fn cluster_role_rules(&self, role: &ClusterRole) -> Vec<PolicyRule> {
        let mut rules: Vec<PolicyRule> = Vec::new();
        let mut seen: Vec<&str> = Vec::new();
        let mut todo = vec![role];
        while let Some(r) = todo.pop() {
            let name = r.metadata.name.as_deref().unwrap_or_default();
            if seen.contains(&name) {
                continue;
            }
            seen.push(name);
            for rule in r.rules.iter().flatten() {
                if !rules.contains(rule) {
                    rules.push(rule.clone());
                }
            }
            let Some(agg) = &r.aggregation_rule else {
                continue;
            };
            for sel in agg.cluster_role_selectors.iter().flatten() {
                todo.extend(self.cluster_roles.iter().filter(|c| {
                    c.metadata
                        .labels
                        .as_ref()
                        .is_some_and(|l| crate::doctor::admission::selector_matches(sel, l))
                }));
            }
        }
        rules
    }

    /// Whether a rule that names the objects it allows (`resourceNames`)
    /// could allow updating objects of `req`'s type: only then can two
    /// objects of one type in one namespace differ in who may update them.
    pub fn names_objects(&self, req: &Request) -> bool {
        let rules = self
            .roles
            .iter()
            .flat_map(|r| r.rules.iter().flatten())
            .chain(
                self.cluster_roles
                    .iter()
                    .flat_map(|r| r.rules.iter().flatten()),
            );
        rules.into_iter().any(|r| {
            r.resource_names.as_ref().is_some_and(|n| !n.is_empty())
                && VERBS.iter().any(|v| has(&r.verbs, v))
                && has(r.api_groups.as_deref().unwrap_or_default(), req.group)
                && resource_matches(r, req.resource)
        })
    }

    /// Every grant of `update` or `patch` on the requested object.
    pub fn grants(&self, req: &Request) -> Grants {
        let mut out = Grants::default();
        let cluster = self.cluster_role_bindings.iter().map(|b| {
            (
                format!(
                    "ClusterRoleBinding {}",
                    b.metadata.name.as_deref().unwrap_or_default()
                ),
                None,
                &b.role_ref,
                b.subjects.as_deref().unwrap_or_default(),
            )
        });
        // A RoleBinding grants only inside its own namespace.
        let namespaced = self
            .role_bindings
            .iter()
            .filter(|b| req.namespace.is_some() && b.metadata.namespace.as_deref() == req.namespace)
            .map(|b| {
                (
                    format!(
                        "RoleBinding {}/{}",
                        b.metadata.namespace.as_deref().unwrap_or_default(),
                        b.metadata.name.as_deref().unwrap_or_default()
                    ),
                    b.metadata.namespace.as_deref(),
                    &b.role_ref,
                    b.subjects.as_deref().unwrap_or_default(),
                )
            });
        for (binding, ns, role_ref, subjects) in cluster.chain(namespaced) {
            let Some((role, rules)) = self.rules_of(role_ref, ns) else {
                continue;
            };
            let Some((rule, breadth)) = best_rule(&rules, req) else {
                continue;
            };
            for s in subjects {
                match grantee(s, ns) {
                    Some(grantee) => out.to_service_accounts.push(Grant {
                        grantee,
                        role: role.clone(),
                        binding: binding.clone(),
                        rule: describe_rule(rule),
                        breadth,
                    }),
                    None if s.kind == "Group" && s.name == "system:masters" => {}
                    None => {
                        out.to_others
                            .push(format!("{} {} ({binding})", s.kind, s.name));
                        if breadth != Breadth::Wildcard && !s.name.starts_with("system:") {
                            out.to_outside.push(OutsideGrant {
                                subject: format!("{} {}", s.kind, s.name),
                                role: role.clone(),
                                binding: binding.clone(),
                                rule: describe_rule(rule),
                            });
                        }
                    }
                }
            }
        }
        out.to_others.sort();
        out.to_others.dedup();
        out
    }
}

/// The in-cluster principal a binding's subject names, if it is one.
fn grantee(s: &Subject, binding_ns: Option<&str>) -> Option<Grantee> {
    match s.kind.as_str() {
        "ServiceAccount" => Some(Grantee::ServiceAccount {
            // A RoleBinding's ServiceAccount subject may leave its
            // namespace out: it is then the binding's own.
            namespace: s
                .namespace
                .clone()
                .filter(|n| !n.is_empty())
                .or_else(|| binding_ns.map(str::to_owned))?,
            name: s.name.clone(),
        }),
        "User" => {
            let rest = s.name.strip_prefix("system:serviceaccount:")?;
            let (namespace, name) = rest.split_once(':')?;
            Some(Grantee::ServiceAccount {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
            })
        }
        "Group" if s.name == "system:serviceaccounts" || s.name == "system:authenticated" => {
            Some(Grantee::AllServiceAccounts(s.name.clone()))
        }
        "Group" => s.name.strip_prefix("system:serviceaccounts:").map(|ns| {
            Grantee::NamespaceServiceAccounts {
                group: s.name.clone(),
                namespace: ns.to_owned(),
            }
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
