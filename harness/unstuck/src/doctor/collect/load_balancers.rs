//! The Services being deleted that hold the load balancer cleanup key,
//! read whole: the metadata-only lists do not carry
//! `status.loadBalancer.ingress`, which names the load balancer a removal
//! of the key would leave in the cloud
//! ([`unstuck_core::doctor::model::load_balancer`]).

use k8s_openapi::api::core::v1::Service;
use kube::{Api, Client};
use unstuck_core::doctor::model::{ObjectRecord, holds_cleanup_key};

use super::BlindSpot;
use crate::kube_error;

/// One GET per such Service (a handful at most: each is a load balancer
/// someone paid for). A Service gone since the list is skipped; one that
/// cannot be read is a blind spot, and its finding says its status names
/// no address.
pub(super) async fn read(
    client: &Client,
    terminating: &[ObjectRecord],
    namespace_content: &[ObjectRecord],
    blind_spots: &mut Vec<BlindSpot>,
) -> Vec<Service> {
    let mut out: Vec<Service> = Vec::new();
    let held = terminating
        .iter()
        .chain(namespace_content)
        .filter(|r| r.metadata.deletion_timestamp.is_some() && holds_cleanup_key(r));
    for r in held {
        let Some(ns) = r.namespace() else {
            continue;
        };
        match Api::<Service>::namespaced(client.clone(), ns)
            .get(r.name())
            .await
        {
            Ok(s) if !out.iter().any(|o| o.metadata.uid == s.metadata.uid) => out.push(s),
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => blind_spots.push(BlindSpot {
                what: format!("service {ns}/{}", r.name()),
                why: kube_error::text(&e),
            }),
        }
    }
    out
}
