//! The CRDs that convert through a webhook, for
//! [`unstuck_core::doctor::conversion`] (their Services are looked up with
//! the webhooks', in [`super::services`]).

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{Api, Client, api::ListParams};
use unstuck_core::doctor::conversion::converts_through_webhook;

/// CRDs a page: full CRDs carry their schemas, and only the few that
/// convert through a webhook are kept, so pages stay small.
const CRD_PAGE: u32 = 50;

/// Every CRD whose `spec.conversion.strategy` is `Webhook`.
pub(super) async fn webhook_crds(
    client: &Client,
) -> Result<Vec<CustomResourceDefinition>, kube::Error> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut out = Vec::new();
    let mut lp = ListParams::default().limit(CRD_PAGE);
    loop {
        let page = api.list(&lp).await?;
        out.extend(page.items.into_iter().filter(converts_through_webhook));
        match page.metadata.continue_ {
            Some(c) if !c.is_empty() => lp = lp.continue_token(&c),
            _ => return Ok(out),
        }
    }
}
