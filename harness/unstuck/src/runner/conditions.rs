//! Checking one `expect` condition against the live cluster. A check that
//! holds returns the evidence, quoted from the cluster as a person would
//! see it; one that does not says what it saw instead.

use k8s_openapi::{
    api::core::v1::{Event, Namespace, NamespaceCondition, Node, NodeCondition, Pod},
    kube_aggregator::pkg::apis::apiregistration::v1::{APIService, APIServiceCondition},
};
use kube::{
    Api, Client,
    api::{DynamicObject, ListParams},
};
use unstuck_core::scenario::{Condition, ConditionStatus, Located, ObjectRef};

use super::{
    names::Names,
    objects::{api_for, resolve, resolve_if_served},
};
use crate::{doctor::collect, node::AnyNode};

/// How much of the kubelet's log a condition searches, from its end: far
/// more than a scenario's run writes, far less than a long-lived node's.
const KUBELET_LOG_WINDOW: u64 = 64 << 20;

/// What a condition check needs besides the client.
pub struct CheckContext<'a> {
    pub client: &'a Client,
    /// The run's names for the scenario's logical ones.
    pub names: &'a Names,
    /// The node, whose kubelet log a condition may quote.
    pub node: Option<&'a AnyNode>,
}

/// Holds (with evidence) or not (with what was seen).
pub type CheckResult = Result<String, String>;

pub async fn check(ctx: &CheckContext<'_>, cond: &Condition) -> CheckResult {
    match cond {
        Condition::Terminating(r) if r.name_prefix().is_some() => {
            let found = with_prefix(ctx, r).await?;
            let names: Vec<String> = found
                .iter()
                .map(|o| o.metadata.name.clone().unwrap_or_default())
                .collect();
            match found
                .into_iter()
                .find(|o| o.metadata.deletion_timestamp.is_some())
            {
                Some(obj) => Ok(format!(
                    "{} {} has deletionTimestamp {} and finalizers {:?}",
                    *r.kind,
                    real_namespace(ctx, r)
                        .map(|ns| format!("{ns}/"))
                        .unwrap_or_default()
                        + obj.metadata.name.as_deref().unwrap_or_default(),
                    obj.metadata
                        .deletion_timestamp
                        .map(|t| t.0.to_string())
                        .unwrap_or_default(),
                    obj.metadata.finalizers.unwrap_or_default()
                )),
                None => Err(format!(
                    "no {} is being deleted (found: {names:?})",
                    describe(ctx, r)
                )),
            }
        }
        Condition::Gone(r) if r.name_prefix().is_some() => {
            let found = with_prefix(ctx, r).await?;
            if found.is_empty() {
                Ok(format!("no {} exists", describe(ctx, r)))
            } else {
                Err(format!(
                    "{} still exist: {:?}",
                    describe(ctx, r),
                    found
                        .iter()
                        .map(|o| o.metadata.name.clone().unwrap_or_default())
                        .collect::<Vec<_>>()
                ))
            }
        }
        Condition::Terminating(r) => {
            let obj = get(ctx, r)
                .await?
                .ok_or_else(|| format!("{} does not exist", describe(ctx, r)))?;
            match &obj.metadata.deletion_timestamp {
                Some(ts) => Ok(format!(
                    "{} has deletionTimestamp {} and finalizers {:?}",
                    describe(ctx, r),
                    ts.0,
                    obj.metadata.finalizers.unwrap_or_default()
                )),
                None => Err(format!(
                    "{} exists but is not being deleted",
                    describe(ctx, r)
                )),
            }
        }
        Condition::Gone(r) => match get_if_served(ctx, r).await? {
            Served::No(api_version) => Ok(format!(
                "{} is gone: the API no longer serves {api_version} {} (its CRD is gone)",
                describe(ctx, r),
                *r.kind
            )),
            Served::Yes(None) => Ok(format!("{} is gone (GET returns 404)", describe(ctx, r))),
            Served::Yes(Some(obj)) => Err(format!(
                "{} still exists (deletionTimestamp {:?}, finalizers {:?})",
                describe(ctx, r),
                obj.metadata.deletion_timestamp.map(|t| t.0.to_string()),
                obj.metadata.finalizers.unwrap_or_default()
            )),
        },
        Condition::Running(r) => {
            let ns = ctx.names.namespace(
                r.namespace
                    .as_deref()
                    .map(String::as_str)
                    .unwrap_or("default"),
            );
            let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
            let pod = existing(&pods, &r.name, || {
                format!("pod {ns}/{} does not exist", *r.name)
            })
            .await?;
            match pod.status.and_then(|s| s.phase) {
                Some(p) if p == "Running" => Ok(format!("pod {ns}/{} is Running", *r.name)),
                other => Err(format!("pod {ns}/{} phase {other:?}", *r.name)),
            }
        }
        Condition::Ready(r) => {
            let obj = get(ctx, r)
                .await?
                .ok_or_else(|| format!("{} does not exist", describe(ctx, r)))?;
            let want = obj.data["spec"]["replicas"].as_i64().unwrap_or(1);
            let ready = obj.data["status"]["readyReplicas"].as_i64().unwrap_or(0);
            let generation = obj.metadata.generation.unwrap_or(0);
            let observed = obj.data["status"]["observedGeneration"]
                .as_i64()
                .unwrap_or(0);
            let line = format!(
                "{} has {ready}/{want} replicas ready (generation {generation}, observed {observed})",
                describe(ctx, r)
            );
            if obj.metadata.deletion_timestamp.is_none() && observed >= generation && ready >= want
            {
                Ok(line)
            } else {
                Err(line)
            }
        }
        Condition::NamespaceCondition(c) => {
            let ns = ctx.names.namespace(&c.namespace);
            let api: Api<Namespace> = Api::all(ctx.client.clone());
            let obj = existing(&api, &ns, || format!("namespace {ns} does not exist")).await?;
            let conds = obj.status.and_then(|s| s.conditions).unwrap_or_default();
            let seen = find_condition(&format!("namespace {ns}"), &conds, &c.condition_type)?;
            judge_check(
                ctx,
                format!("Namespace {ns}"),
                seen,
                c.status,
                &c.reason,
                &c.message_contains,
            )
        }
        Condition::ApiServiceCondition(c) => {
            let api: Api<APIService> = Api::all(ctx.client.clone());
            let name = ctx.names.object("APIService", &c.name, false);
            let obj = existing(&api, &name, || format!("APIService {name} does not exist")).await?;
            let service = obj.spec.as_ref().and_then(|s| s.service.as_ref()).map(|s| {
                format!(
                    "{}/{}",
                    s.namespace.clone().unwrap_or_default(),
                    s.name.clone().unwrap_or_default()
                )
            });
            let conds = obj.status.and_then(|s| s.conditions).unwrap_or_default();
            let seen = find_condition(&format!("APIService {name}"), &conds, &c.condition_type)?;
            let subject = format!(
                "APIService {name} (service {})",
                service.unwrap_or_else(|| "Local".into())
            );
            judge_check(ctx, subject, seen, c.status, &c.reason, &c.message_contains)
        }
        Condition::Condition(c) => {
            let r = c.object();
            let obj = get(ctx, &r)
                .await?
                .ok_or_else(|| format!("{} does not exist", describe(ctx, &r)))?;
            let conds: Vec<DynamicCondition> =
                serde_json::from_value(obj.data["status"]["conditions"].clone())
                    .unwrap_or_default();
            let subject = describe(ctx, &r);
            let seen = find_condition(&subject, &conds, &c.condition_type)?;
            judge_check(ctx, subject, seen, c.status, &c.reason, &c.message_contains)
        }
        Condition::NodeCondition(c) => {
            let ns = ctx.names.namespace(&c.namespace);
            let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
            let pod = existing(&pods, &c.pod, || {
                format!("pod {ns}/{} does not exist", *c.pod)
            })
            .await?;
            let node_name = pod
                .spec
                .and_then(|s| s.node_name)
                .ok_or_else(|| format!("pod {ns}/{} is not bound to a node", *c.pod))?;
            let nodes: Api<Node> = Api::all(ctx.client.clone());
            let node = existing(&nodes, &node_name, || {
                format!("node {node_name} does not exist")
            })
            .await?;
            let conds = node.status.and_then(|s| s.conditions).unwrap_or_default();
            let subject = format!("Node {node_name}");
            let seen = find_condition(&subject, &conds, &c.condition_type)?;
            judge_check(ctx, subject, seen, c.status, &c.reason, &c.message_contains)
        }
        Condition::NoContentLeft(r) => {
            let ns = ctx.names.namespace(&r.namespace);
            let discovered = collect::discover(ctx.client)
                .await
                .map_err(|e| e.to_string())?;
            if !discovered.failures.is_empty() {
                return Err(format!(
                    "cannot prove {ns} empty: discovery fails for {:?}",
                    discovered
                        .failures
                        .iter()
                        .map(|f| &f.group_version)
                        .collect::<Vec<_>>()
                ));
            }
            // Objects of a deleted namespace stay in storage and listable
            // (kubernetes#36891) under the namespace's path, which serves a
            // list whether or not the Namespace object exists. (Not a
            // cluster-wide list with a metadata.namespace field selector:
            // v1.37's podcertificaterequests refuse that field label.)
            let lp = ListParams::default();
            let mut left = Vec::new();
            let namespaced: Vec<_> = discovered.types.iter().filter(|t| t.namespaced).collect();
            for t in &namespaced {
                let api: Api<DynamicObject> =
                    Api::namespaced_with(ctx.client.clone(), &ns, &t.api_resource());
                let items = api
                    .list_metadata(&lp)
                    .await
                    .map_err(|e| format!("list {}: {}", t.resource, crate::kube_error::text(&e)))?
                    .items;
                left.extend(
                    items
                        .into_iter()
                        .map(|i| format!("{} {}", t.kind, i.metadata.name.unwrap_or_default())),
                );
            }
            if left.is_empty() {
                Ok(format!(
                    "no object of {} namespaced types is left in storage for namespace {ns}",
                    namespaced.len()
                ))
            } else {
                Err(format!(
                    "left in storage for namespace {ns}: {}",
                    left.join(", ")
                ))
            }
        }
        Condition::DiscoveryComplete {} => {
            let discovered = collect::discover(ctx.client)
                .await
                .map_err(|e| e.to_string())?;
            if discovered.failures.is_empty() {
                Ok(format!(
                    "discovery complete: {} listable types, no failing group/version",
                    discovered.types.len()
                ))
            } else {
                Err(format!(
                    "discovery fails for: {}",
                    discovered
                        .failures
                        .iter()
                        .map(|f| format!("{} ({})", f.group_version, f.message))
                        .collect::<Vec<_>>()
                        .join("; ")
                ))
            }
        }
        Condition::KubeletLog(k) => {
            let node = ctx
                .node
                .ok_or("this cluster provider gives no access to the kubelet log")?;
            let text = node
                .kubelet_log_tail(KUBELET_LOG_WINDOW)
                .await
                .map_err(|e| e.to_string())?
                .ok_or_else(|| format!("node {} has no kubelet log yet", node.name()))?;
            // A pod is named in kubelet lines as ns/name or, in volume
            // operations, only by its UID: accept either.
            let mut pod_keys = Vec::new();
            if let (Some(p), Some(ns)) = (&k.pod, &k.namespace) {
                let ns = ctx.names.namespace(ns);
                pod_keys.push(format!("{ns}/{}", p.as_str()));
                let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
                if let Ok(Some(pod)) = pods.get_opt(p).await
                    && let Some(uid) = pod.metadata.uid
                {
                    pod_keys.push(uid);
                }
            }
            let wanted = ctx.names.text(&k.contains);
            let hit = text.lines().rev().find(|l| {
                l.contains(wanted.as_str())
                    && (pod_keys.is_empty() || pod_keys.iter().any(|key| l.contains(key)))
            });
            match hit {
                Some(line) => Ok(format!("kubelet log: {}", line.trim())),
                None => Err(format!("no kubelet log line contains \"{}\"", wanted)),
            }
        }
        Condition::Event(e) => {
            let ns = ctx.names.namespace(&e.namespace);
            let api: Api<Event> = Api::namespaced(ctx.client.clone(), &ns);
            let events = api
                .list(&ListParams::default())
                .await
                .map_err(|err| err.to_string())?
                .items;
            let hit = events.iter().find(|ev| {
                e.reason
                    .as_ref()
                    .is_none_or(|r| ev.reason.as_deref() == Some(r.as_str()))
                    && e.involved_name
                        .as_ref()
                        .is_none_or(|n| ev.involved_object.name.as_deref() == Some(n.as_str()))
                    && e.involved_kind
                        .as_ref()
                        .is_none_or(|k| ev.involved_object.kind.as_deref() == Some(k.as_str()))
                    && e.message_contains.as_ref().is_none_or(|m| {
                        ev.message
                            .as_deref()
                            .unwrap_or_default()
                            .contains(ctx.names.text(m).as_str())
                    })
            });
            match hit {
                Some(ev) => Ok(format!(
                    "Event {} {}/{}: {} \"{}\"",
                    ev.type_.clone().unwrap_or_default(),
                    ev.involved_object.kind.clone().unwrap_or_default(),
                    ev.involved_object.name.clone().unwrap_or_default(),
                    ev.reason.clone().unwrap_or_default(),
                    ev.message.clone().unwrap_or_default()
                )),
                None => Err(format!("no matching event among {} in {ns}", events.len())),
            }
        }
    }
}

/// GETs `name`; a 404 is an error saying what is missing (`missing()`).
async fn existing<K>(
    api: &Api<K>,
    name: &str,
    missing: impl FnOnce() -> String,
) -> Result<K, String>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.get_opt(name)
        .await
        .map_err(|e| e.to_string())?
        .ok_or_else(missing)
}

/// A status condition as the cluster shows it.
struct Seen<'a> {
    type_: &'a str,
    status: &'a str,
    reason: Option<&'a str>,
    message: Option<&'a str>,
}

/// The k8s-openapi status condition types a check can look up.
trait StatusCondition {
    fn seen(&self) -> Seen<'_>;
}

impl StatusCondition for NamespaceCondition {
    fn seen(&self) -> Seen<'_> {
        Seen {
            type_: &self.type_,
            status: &self.status,
            reason: self.reason.as_deref(),
            message: self.message.as_deref(),
        }
    }
}

impl StatusCondition for NodeCondition {
    fn seen(&self) -> Seen<'_> {
        Seen {
            type_: &self.type_,
            status: &self.status,
            reason: self.reason.as_deref(),
            message: self.message.as_deref(),
        }
    }
}

impl StatusCondition for APIServiceCondition {
    fn seen(&self) -> Seen<'_> {
        Seen {
            type_: &self.type_,
            status: &self.status,
            reason: self.reason.as_deref(),
            message: self.message.as_deref(),
        }
    }
}

/// A status condition of an object read without a typed schema.
#[derive(serde::Deserialize)]
struct DynamicCondition {
    #[serde(rename = "type")]
    type_: String,
    status: String,
    reason: Option<String>,
    message: Option<String>,
}

impl StatusCondition for DynamicCondition {
    fn seen(&self) -> Seen<'_> {
        Seen {
            type_: &self.type_,
            status: &self.status,
            reason: self.reason.as_deref(),
            message: self.message.as_deref(),
        }
    }
}

/// The condition of type `type_` among `subject`'s `conds`; when there is
/// none, says which types `subject` has instead.
fn find_condition<'a, C: StatusCondition>(
    subject: &str,
    conds: &'a [C],
    type_: &str,
) -> Result<Seen<'a>, String> {
    conds
        .iter()
        .map(StatusCondition::seen)
        .find(|s| s.type_ == type_)
        .ok_or_else(|| {
            format!(
                "{subject} has no {type_} condition (has: {:?})",
                conds.iter().map(|c| c.seen().type_).collect::<Vec<_>>()
            )
        })
}

/// [`judge`] with a check's expected status, reason and message (the
/// message in the run's names).
fn judge_check(
    ctx: &CheckContext<'_>,
    subject: String,
    seen: Seen<'_>,
    status: ConditionStatus,
    reason: &Option<String>,
    message_contains: &Option<Located<String>>,
) -> CheckResult {
    let message = message_contains.as_deref().map(|m| ctx.names.text(m));
    judge(
        subject,
        seen,
        status.as_str(),
        reason.as_deref(),
        message.as_deref(),
    )
}

/// Compares a condition with what the scenario expects; either way the
/// result quotes it as `subject: Type=Status (Reason): "message"`.
fn judge(
    subject: String,
    seen: Seen<'_>,
    status: &str,
    reason: Option<&str>,
    message_contains: Option<&str>,
) -> CheckResult {
    let (got_reason, message) = (
        seen.reason.unwrap_or_default(),
        seen.message.unwrap_or_default(),
    );
    let quoted = format!(
        "{subject}: {}={} ({got_reason}): \"{message}\"",
        seen.type_, seen.status
    );
    let ok = seen.status == status
        && reason.is_none_or(|r| r == got_reason)
        && message_contains.is_none_or(|m| message.contains(m));
    if ok { Ok(quoted) } else { Err(quoted) }
}

fn describe(ctx: &CheckContext<'_>, r: &ObjectRef) -> String {
    match real_namespace(ctx, r) {
        Some(ns) => format!("{} {ns}/{}", *r.kind, real_name(ctx, r)),
        None => format!("{} {}", *r.kind, real_name(ctx, r)),
    }
}

/// The run's name for the object: a namespace's and a cluster-scoped
/// object's names are logical (a reference without a namespace is
/// cluster-scoped).
fn real_name(ctx: &CheckContext<'_>, r: &ObjectRef) -> String {
    ctx.names.object(&r.kind, &r.name, r.namespace.is_some())
}

fn real_namespace(ctx: &CheckContext<'_>, r: &ObjectRef) -> Option<String> {
    r.namespace.as_ref().map(|ns| ctx.names.namespace(ns))
}

/// GETs the referenced object; `None` when it does not exist.
/// An object looked up without waiting for its type to be served.
enum Served {
    /// The API does not serve the type (a custom resource whose CRD is
    /// gone): no object of it can exist. Carries the run's apiVersion.
    No(String),
    /// The type is served; the object, if it exists.
    Yes(Option<Box<DynamicObject>>),
}

/// Like [`get`], but a type the API does not serve is an answer, not a
/// wait: `gone` of a custom resource holds once its CRD is gone. (A gate
/// that re-creates the CRD must also check it `Established`, or `gone`
/// would hold before the type is served.)
async fn get_if_served(ctx: &CheckContext<'_>, r: &ObjectRef) -> Result<Served, String> {
    match api_if_served(ctx, r).await? {
        Err(api_version) => Ok(Served::No(api_version)),
        Ok(api) => api
            .get_opt(&real_name(ctx, r))
            .await
            .map(|o| Served::Yes(o.map(Box::new)))
            .map_err(|e| e.to_string()),
    }
}

/// The dynamic API of `r`'s type in its real namespace, or, when the API
/// does not serve that type now, `Err` with the run's apiVersion.
async fn api_if_served(
    ctx: &CheckContext<'_>,
    r: &ObjectRef,
) -> Result<Result<Api<DynamicObject>, String>, String> {
    let api_version = ctx.names.api_version(
        r.api_version()
            .ok_or_else(|| format!("{} has no apiVersion", *r.kind))?,
    );
    let Some((ar, caps)) = resolve_if_served(ctx.client, &api_version, &r.kind).await? else {
        return Ok(Err(api_version));
    };
    let ns = real_namespace(ctx, r);
    Ok(Ok(api_for(ctx.client, &ar, &caps, ns.as_deref())))
}

/// The objects of `r`'s kind in its namespace whose names start with its
/// prefix (none when the type is not served).
async fn with_prefix(ctx: &CheckContext<'_>, r: &ObjectRef) -> Result<Vec<DynamicObject>, String> {
    let prefix = r.name_prefix().unwrap_or_default();
    let Ok(api) = api_if_served(ctx, r).await? else {
        return Ok(Vec::new());
    };
    let list = api
        .list(&ListParams::default())
        .await
        .map_err(|e| e.to_string())?;
    Ok(list
        .items
        .into_iter()
        .filter(|o| {
            o.metadata
                .name
                .as_deref()
                .is_some_and(|n| n.starts_with(prefix))
        })
        .collect())
}

pub async fn get(ctx: &CheckContext<'_>, r: &ObjectRef) -> Result<Option<DynamicObject>, String> {
    let api_version = ctx.names.api_version(
        r.api_version()
            .ok_or_else(|| format!("{} has no apiVersion", *r.kind))?,
    );
    let (ar, caps) = resolve(ctx.client, &api_version, &r.kind).await?;
    let ns = real_namespace(ctx, r);
    let api = api_for(ctx.client, &ar, &caps, ns.as_deref());
    api.get_opt(&real_name(ctx, r))
        .await
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ns_cond(type_: &str, status: &str) -> NamespaceCondition {
        NamespaceCondition {
            type_: type_.into(),
            status: status.into(),
            reason: Some("R".into()),
            message: Some("m".into()),
            ..Default::default()
        }
    }

    #[test]
    fn a_condition_is_found_by_type_and_quoted() {
        let conds = [
            ns_cond("NamespaceDeletionDiscoveryFailure", "False"),
            ns_cond("NamespaceContentRemaining", "True"),
        ];
        let seen = find_condition("namespace app", &conds, "NamespaceContentRemaining").unwrap();
        assert_eq!(
            judge("Namespace app".into(), seen, "True", Some("R"), Some("m")),
            Ok("Namespace app: NamespaceContentRemaining=True (R): \"m\"".into())
        );
    }

    #[test]
    fn a_missing_condition_names_the_types_there_are() {
        let conds = [ns_cond("NamespaceDeletionDiscoveryFailure", "False")];
        let err = find_condition("namespace app", &conds, "NamespaceContentRemaining")
            .err()
            .unwrap();
        assert_eq!(
            err,
            "namespace app has no NamespaceContentRemaining condition (has: [\"NamespaceDeletionDiscoveryFailure\"])"
        );
        let none: [APIServiceCondition; 0] = [];
        let err = find_condition("APIService v1beta1.metrics.k8s.io", &none, "Available")
            .err()
            .unwrap();
        assert_eq!(
            err,
            "APIService v1beta1.metrics.k8s.io has no Available condition (has: [])"
        );
    }
}
