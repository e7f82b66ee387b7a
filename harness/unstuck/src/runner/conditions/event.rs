//! An Event in one of the run's namespaces.

use k8s_openapi::api::core::v1::Event;
use kube::{Api, api::ListParams};
use unstuck_core::scenario::EventCheck;

use super::{CheckContext, CheckError, CheckResult};

pub(super) async fn event(ctx: &CheckContext<'_>, e: &EventCheck) -> CheckResult {
    let ns = ctx.names.namespace(&e.namespace);
    let api: Api<Event> = Api::namespaced(ctx.client.clone(), &ns);
    let events = api
        .list(&ListParams::default())
        .await
        .map_err(CheckError::api(format!("listing events in {ns}")))?
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
        None => Err(CheckError::Unmet(format!(
            "no matching event among {} in {ns}",
            events.len()
        ))),
    }
}
