//! Source: admission webhooks and aggregated APIServices served by the
//! owner. A backend with ready endpoints (an APIService `Available`) shows
//! the product running; one without shows it installed (`Unknown`).
//! CRD-backed (local) APIServices are left out: a CRD outlives the
//! operator that served it, so it proves nothing either way.

use k8s_openapi::api::admissionregistration::v1::WebhookClientConfig;

use super::{Ctx, unreadable, verdict::SourceReport};
use crate::doctor::backend::{BackendState, judge};
use crate::doctor::model::ServiceKey;

/// Where a webhook calls, and what [`crate::doctor::backend::judge`]
/// makes of it (`None`: a URL, not looked up).
fn backend(ctx: &Ctx, config: &WebhookClientConfig) -> (Option<String>, Option<BackendState>) {
    let Some(svc) = &config.service else {
        return (config.url.clone(), None);
    };
    let key = ServiceKey {
        namespace: svc.namespace.clone(),
        name: svc.name.clone(),
    };
    let state = ctx
        .snapshot
        .service_lookup(&key)
        .map(|l| judge(Some(l)).state);
    (
        Some(format!("service {}/{}", svc.namespace, svc.name)),
        state,
    )
}

pub(super) fn check(ctx: &Ctx) -> SourceReport {
    let s = ctx.snapshot;
    let t = ctx.target;
    let mut r = SourceReport {
        unreadable: [
            (
                "validatingwebhookconfigurations.admissionregistration.k8s.io",
                "admissionregistration.k8s.io/v1",
            ),
            (
                "mutatingwebhookconfigurations.admissionregistration.k8s.io",
                "admissionregistration.k8s.io/v1",
            ),
            (
                "apiservices.apiregistration.k8s.io",
                "apiregistration.k8s.io/v1",
            ),
        ]
        .iter()
        .find_map(|(res, gv)| unreadable(s, res, gv)),
        ..SourceReport::default()
    };
    let (webhooks, mut left_over) = webhooks_of_owner(ctx, &mut r);
    let aggregated = api_services_of_owner(ctx, &mut r, &mut left_over);
    r.checked = format!(
        "webhooks and APIServices: none names {} with a backend that is not proven gone ({webhooks} webhooks, {aggregated} aggregated APIServices checked){}",
        t.describe(),
        if left_over.is_empty() {
            String::new()
        } else {
            format!("; left behind: {}", left_over.join("; "))
        }
    );
    r
}

/// Webhooks named for the owner: served (alive), or installed but not
/// shown serving; those whose Service is proven gone are left behind, not
/// installations. Returns how many were checked and the leftovers.
fn webhooks_of_owner(ctx: &Ctx, r: &mut SourceReport) -> (usize, Vec<String>) {
    let s = ctx.snapshot;
    let t = ctx.target;
    let validating = s.validating_webhooks.iter().flat_map(|c| {
        c.webhooks.iter().flatten().map(move |w| {
            (
                "ValidatingWebhookConfiguration",
                c.metadata.name.as_deref(),
                w.name.as_str(),
                &w.client_config,
            )
        })
    });
    let mutating = s.mutating_webhooks.iter().flat_map(|c| {
        c.webhooks.iter().flatten().map(move |w| {
            (
                "MutatingWebhookConfiguration",
                c.metadata.name.as_deref(),
                w.name.as_str(),
                &w.client_config,
            )
        })
    });
    let mut webhooks = 0;
    let mut left_over: Vec<String> = Vec::new();
    for (kind, config, name, client) in validating.chain(mutating) {
        webhooks += 1;
        let config = config.unwrap_or_default();
        let (svc, ready) = backend(ctx, client);
        // The configuration's own name is a free label (`policy-guard`);
        // the webhook's name is a domain its maker owns, and the service
        // is where it runs.
        let how = t
            .named_in(name)
            .or_else(|| svc.as_deref().and_then(|s| t.named_in(s)));
        let Some(how) = how else {
            continue;
        };
        let via = svc.unwrap_or_else(|| "no service".to_owned());
        match ready {
            Some(BackendState::Serving) => r.alive.push(format!(
                "{kind} {config} webhook {name} ({how}) is served by {via}, which has ready endpoints"
            )),
            // A registration whose backend is proven gone is what an
            // uninstall left behind, not an installation: no Unknown.
            Some(BackendState::Gone(why)) => left_over.push(format!(
                "{kind} {config} webhook {name} ({how}) is left with {via} proven gone ({why})"
            )),
            Some(BackendState::Unknown) => r.installed.push(format!(
                "{kind} {config} webhook {name} ({how}) calls {via}, which is not shown serving nor proven gone: installed but not shown running"
            )),
            None => r.installed.push(format!(
                "{kind} {config} webhook {name} ({how}) calls {via}, not looked up: installed, not shown running"
            )),
        }
    }
    (webhooks, left_over)
}

/// Aggregated APIServices named for the owner (its group or its
/// Service): Available is alive; one whose Service the collector proved
/// gone is what an uninstall left behind (into `left_over`), as for a
/// webhook; anything else installed. Returns how many were checked.
fn api_services_of_owner(ctx: &Ctx, r: &mut SourceReport, left_over: &mut Vec<String>) -> usize {
    let s = ctx.snapshot;
    let t = ctx.target;
    let mut aggregated = 0;
    for a in &s.api_services {
        let Some(spec) = &a.spec else {
            continue;
        };
        let Some(svc) = &spec.service else {
            continue;
        };
        aggregated += 1;
        let name = a.metadata.name.as_deref().unwrap_or_default();
        let group = spec.group.as_deref().unwrap_or_default();
        let svc_name = format!(
            "service {}/{}",
            svc.namespace.as_deref().unwrap_or_default(),
            svc.name.as_deref().unwrap_or_default()
        );
        let by_group = t
            .domains
            .iter()
            .find(|d| group == d.as_str() || group.ends_with(&format!(".{d}")))
            .map(|d| format!("group {group} is under {d}"));
        let Some(how) = by_group.or_else(|| t.named_in(&svc_name)) else {
            continue;
        };
        let available = a
            .status
            .as_ref()
            .and_then(|st| st.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == "Available"));
        let line = format!(
            "APIService {name} ({how}) is served by {svc_name}, Available={}",
            available.map_or("<unset>", |c| c.status.as_str())
        );
        let backend = s
            .api_service_backends
            .iter()
            .find(|l| {
                Some(l.service.namespace.as_str()) == svc.namespace.as_deref()
                    && Some(l.service.name.as_str()) == svc.name.as_deref()
            })
            .map(|l| judge(Some(l)).state);
        if available.is_some_and(|c| c.status == "True") {
            r.alive.push(line);
        } else if let Some(BackendState::Gone(why)) = backend {
            left_over.push(format!("{line}, its {svc_name} proven gone ({why})"));
        } else {
            r.installed
                .push(format!("{line}: installed but not shown running"));
        }
    }
    aggregated
}
