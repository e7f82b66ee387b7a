//! Status conditions (`type`, `status`, `reason`, `message`) of a
//! namespace, an APIService, a node, or any object read without a schema.

use k8s_openapi::{
    api::core::v1::{Namespace, NamespaceCondition, Node, NodeCondition, Pod},
    kube_aggregator::pkg::apis::apiregistration::v1::{APIService, APIServiceCondition},
};
use kube::Api;
use unstuck_core::scenario::{
    ApiServiceConditionCheck, ConditionStatus, Located, NamespaceConditionCheck,
    NodeConditionCheck, ObjectConditionCheck,
};

use super::{
    CheckContext, CheckError, CheckResult, describe,
    lookup::{existing, get},
    verdict,
};

pub(super) async fn namespace(ctx: &CheckContext<'_>, c: &NamespaceConditionCheck) -> CheckResult {
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

pub(super) async fn api_service(
    ctx: &CheckContext<'_>,
    c: &ApiServiceConditionCheck,
) -> CheckResult {
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

pub(super) async fn object(ctx: &CheckContext<'_>, c: &ObjectConditionCheck) -> CheckResult {
    let r = c.object();
    let obj = get(ctx, &r)
        .await?
        .ok_or_else(|| CheckError::Unmet(format!("{} does not exist", describe(ctx, &r))))?;
    let subject = describe(ctx, &r);
    // No conditions yet (or a shape we cannot read) is no condition at all.
    let conds: Vec<DynamicCondition> =
        serde_json::from_value(obj.data["status"]["conditions"].clone()).unwrap_or_default();
    let seen = find_condition(&subject, &conds, &c.condition_type)?;
    judge_check(ctx, subject, seen, c.status, &c.reason, &c.message_contains)
}

pub(super) async fn node(ctx: &CheckContext<'_>, c: &NodeConditionCheck) -> CheckResult {
    let ns = ctx.names.namespace(&c.namespace);
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    let pod = existing(&pods, &c.pod, || {
        format!("pod {ns}/{} does not exist", *c.pod)
    })
    .await?;
    let node_name = pod
        .spec
        .and_then(|s| s.node_name)
        .ok_or_else(|| CheckError::Unmet(format!("pod {ns}/{} is not bound to a node", *c.pod)))?;
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

/// The typed conditions all have the same four fields.
macro_rules! status_condition {
    ($($t:ty),*) => {$(
        impl StatusCondition for $t {
            fn seen(&self) -> Seen<'_> {
                Seen {
                    type_: &self.type_,
                    status: &self.status,
                    reason: self.reason.as_deref(),
                    message: self.message.as_deref(),
                }
            }
        }
    )*};
}

status_condition!(
    NamespaceCondition,
    NodeCondition,
    APIServiceCondition,
    DynamicCondition
);

/// A status condition of an object read without a typed schema.
#[derive(serde::Deserialize)]
struct DynamicCondition {
    #[serde(rename = "type")]
    type_: String,
    status: String,
    reason: Option<String>,
    message: Option<String>,
}

/// The condition of type `type_` among `subject`'s `conds`; when there is
/// none, says which types `subject` has instead.
fn find_condition<'a, C: StatusCondition>(
    subject: &str,
    conds: &'a [C],
    type_: &str,
) -> Result<Seen<'a>, CheckError> {
    conds
        .iter()
        .map(StatusCondition::seen)
        .find(|s| s.type_ == type_)
        .ok_or_else(|| {
            CheckError::Unmet(format!(
                "{subject} has no {type_} condition (has: {})",
                crate::text::list(&conds.iter().map(|c| c.seen().type_).collect::<Vec<_>>())
            ))
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
    verdict(ok, quoted)
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
            judge("Namespace app".into(), seen, "True", Some("R"), Some("m")).unwrap(),
            "Namespace app: NamespaceContentRemaining=True (R): \"m\""
        );
        let seen = find_condition("namespace app", &conds, "NamespaceContentRemaining").unwrap();
        let unmet = judge("Namespace app".into(), seen, "False", None, None).unwrap_err();
        assert!(
            matches!(&unmet, CheckError::Unmet(l) if l.contains("=True (R)")),
            "{unmet}"
        );
    }

    #[test]
    fn a_missing_condition_names_the_types_there_are() {
        let conds = [ns_cond("NamespaceDeletionDiscoveryFailure", "False")];
        let err = find_condition("namespace app", &conds, "NamespaceContentRemaining")
            .err()
            .unwrap();
        assert_eq!(
            err.to_string(),
            "namespace app has no NamespaceContentRemaining condition (has: [NamespaceDeletionDiscoveryFailure])"
        );
        let none: [APIServiceCondition; 0] = [];
        let err = find_condition("APIService v1beta1.metrics.k8s.io", &none, "Available")
            .err()
            .unwrap();
        assert_eq!(
            err.to_string(),
            "APIService v1beta1.metrics.k8s.io has no Available condition (has: [])"
        );
    }
}
