//! The checks of an `expect` step and its conditions.

use super::{Check, Context, nonempty, positive_timeout, problem};
use crate::scenario::{
    condition::{
        API_SERVICE_CONDITION_TYPES, Condition, NAMESPACE_CONDITION_TYPES, NODE_CONDITION_TYPES,
    },
    located::{Located, Position},
    steps::{Expect, Phase},
};
use crate::text::quoted;

impl Context {
    pub(super) fn expect(&self, expect: &mut Expect, at: Position, doctor_seen: bool) -> Check {
        if expect.phase == Phase::Recovered && !doctor_seen {
            return Err(problem(
                at,
                "an expect with phase: recovered must come after a doctor step (recovered means \
                 recovered by the doctor); use phase: symptom before it",
            ));
        }
        let timeout_at = expect.timeout.position.or(at);
        positive_timeout(&expect.timeout, at)?;
        if expect.timeout.value > self.timeout {
            return Err(problem(
                timeout_at,
                format!(
                    "this expect waits up to {}, longer than the whole scenario's timeout of {}",
                    expect.timeout, self.timeout
                ),
            ));
        }
        if expect.that.is_empty() {
            return Err(problem(
                expect.that.position.or(at),
                "`that` is empty; an expect needs at least one condition",
            ));
        }
        for condition in expect.that.value.iter_mut() {
            self.condition(condition)?;
        }
        Ok(())
    }

    fn condition(&self, condition: &mut Condition) -> Check {
        match condition {
            Condition::Terminating(object) | Condition::Gone(object) => {
                self.object_or_prefix(object)
            }
            Condition::Running(object) => {
                if object.kind.as_str() != "Pod" {
                    return Err(problem(
                        object.kind.position,
                        format!("`running` applies to Pods only, not to {}", object.kind),
                    ));
                }
                self.object(object)
            }
            Condition::Ready(object) => {
                if !matches!(
                    object.kind.as_str(),
                    "Deployment" | "ReplicaSet" | "StatefulSet"
                ) {
                    return Err(problem(
                        object.kind.position,
                        format!(
                            "`ready` applies to Deployments, ReplicaSets and StatefulSets, not to {}",
                            object.kind
                        ),
                    ));
                }
                self.object(object)
            }
            Condition::NamespaceCondition(check) => {
                self.declared(&check.namespace)?;
                known_condition_type(
                    &check.condition_type,
                    NAMESPACE_CONDITION_TYPES,
                    "a namespace",
                )?;
                if let Some(message) = &check.message_contains {
                    nonempty("messageContains", message)?;
                }
                Ok(())
            }
            Condition::ApiServiceCondition(check) => {
                nonempty("name", &check.name)?;
                known_condition_type(
                    &check.condition_type,
                    API_SERVICE_CONDITION_TYPES,
                    "an APIService",
                )?;
                if let Some(message) = &check.message_contains {
                    nonempty("messageContains", message)?;
                }
                Ok(())
            }
            Condition::Condition(check) => {
                let mut object = check.object();
                self.object(&mut object)?;
                check.api_version = object.api_version;
                nonempty("type", &check.condition_type)?;
                if let Some(message) = &check.message_contains {
                    nonempty("messageContains", message)?;
                }
                Ok(())
            }
            Condition::NodeCondition(check) => {
                nonempty("pod", &check.pod)?;
                self.declared(&check.namespace)?;
                known_condition_type(&check.condition_type, NODE_CONDITION_TYPES, "a node")?;
                if let Some(message) = &check.message_contains {
                    nonempty("messageContains", message)?;
                }
                Ok(())
            }
            Condition::NoContentLeft(ns) => self.declared(&ns.namespace),
            Condition::DiscoveryComplete {} => Ok(()),
            Condition::KubeletLog(check) => {
                nonempty("contains", &check.contains)?;
                match (&check.pod, &check.namespace) {
                    (Some(pod), None) => Err(problem(
                        pod.position,
                        "`pod` needs `namespace` too (a logical namespace of the scenario)",
                    )),
                    (None, Some(ns)) => Err(problem(
                        ns.position,
                        "`namespace` without `pod` says nothing: name the pod whose node's log to read",
                    )),
                    (Some(pod), Some(ns)) => {
                        nonempty("pod", pod)?;
                        self.declared(ns)
                    }
                    (None, None) => Ok(()),
                }
            }
            Condition::Event(check) => {
                if let Some(message) = &check.message_contains {
                    nonempty("messageContains", message)?;
                }
                self.declared(&check.namespace)
            }
        }
    }
}

fn known_condition_type(value: &Located<String>, known: &[&str], owner: &str) -> Check {
    if known.contains(&value.as_str()) {
        return Ok(());
    }
    Err(problem(
        value.position,
        format!(
            "{} is not a condition type of {owner}; expected one of: {}",
            quoted(value.as_str()),
            known.join(", ")
        ),
    ))
}
