//! NamespaceSpecFinalizerStuck: a Terminating namespace's own
//! `spec.finalizers` tokens that nothing will remove.

use super::*;
use crate::text::quoted;

impl Diagnosis<'_> {
    /// NamespaceSpecFinalizerStuck: spec.finalizers tokens that nothing
    /// will remove.
    pub(super) fn namespace_spec_finalizers(
        &self,
        facts: StuckNamespace<'_>,
        findings: &mut Vec<Finding>,
    ) {
        let StuckNamespace {
            ns,
            name,
            age,
            subject,
            base_evidence,
            discovery_cond,
        } = facts;
        let tokens = ns
            .spec
            .as_ref()
            .and_then(|s| s.finalizers.clone())
            .unwrap_or_default();
        if tokens.is_empty() {
            return;
        }
        let discovery_complete =
            self.snapshot.discovery_failures.is_empty() && discovery_cond.is_none();
        let mut content_remaining = self.content_listing(name);
        let failing_conditions = failing_conditions(ns);
        let (kcm_alive, kcm_evidence) = controller_manager_alive(self.snapshot);
        let provably_empty = content_remaining.is_empty() && discovery_complete;
        let mut stuck_tokens = Vec::new();
        let mut evidence = base_evidence;
        evidence.push(format!("spec.finalizers [{}]", tokens.join(", ")));
        for token in &tokens {
            if token != "kubernetes" {
                stuck_tokens.push(token.clone());
                evidence.push(format!(
                    "spec token {token} has no handler: the namespace controller removes only \"kubernetes\"; only PUT /finalize clears it",
                    token = quoted(token)
                ));
            } else if !kcm_alive {
                stuck_tokens.push(token.clone());
                evidence.push(
                    "spec token \"kubernetes\" is removed by the namespace controller in kube-controller-manager, which is not known to be alive".into(),
                );
                evidence.extend(kcm_evidence.iter().cloned());
            } else if provably_empty
                && failing_conditions.is_empty()
                && age > self.threshold + NAMESPACE_RETRY_CAP
            {
                stuck_tokens.push(token.clone());
                evidence.push(format!(
                    "spec token \"kubernetes\" is still set {} after deletion although the namespace is empty, discovery is complete and no condition reports a failure (the controller retries at least every {})",
                    fmt_secs(age.as_secs()),
                    fmt_secs(NAMESPACE_RETRY_CAP.as_secs())
                ));
            }
        }
        if stuck_tokens.is_empty() {
            return;
        }
        if content_remaining.is_empty() {
            evidence.push(if discovery_complete {
                "the snapshot lists no content left in the namespace and discovery was complete".into()
            } else {
                "the snapshot lists no content, but discovery was incomplete, so that proves nothing".into()
            });
        } else {
            evidence.push(format!(
                "content still in the namespace: {}",
                content_remaining.join(", ")
            ));
        }
        evidence.extend(failing_conditions.iter().cloned());
        content_remaining.extend(
            [NS_CONTENT_REMAINING, NS_FINALIZERS_REMAINING]
                .into_iter()
                .filter_map(|t| failing_namespace_condition(ns, t))
                .filter_map(|c| c.message.clone()),
        );
        findings.push(Finding {
            subject,
            summary: format!(
                "namespace {name} keeps spec.finalizers [{}] that nothing will remove{}",
                stuck_tokens.join(", "),
                if provably_empty {
                    "; its content is provably gone"
                } else {
                    "; content is not provably gone"
                }
            ),
            evidence,
            detail: FindingDetail::NamespaceSpecFinalizerStuck {
                tokens,
                stuck_tokens,
                content_remaining,
                discovery_complete,
                resource_version: ns.metadata.resource_version.clone(),
            },
        });
    }
}
