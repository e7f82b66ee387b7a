//! Reads what the finalizer-owner evidence needs beyond the core snapshot:
//! every Deployment, StatefulSet and DaemonSet, every Role, ClusterRole
//! and binding (who could remove a key), and every PersistentVolumeClaim
//! (which VolumeAttributesClasses are in use). A list that fails (a 403
//! for an RBAC-limited user, a timeout) is recorded in
//! `Snapshot::unreadable`, never an error: the doctor then keeps such
//! keys `Unknown` instead of arguing their owner dead.

use k8s_openapi::api::{
    apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet},
    batch::v1::{CronJob, Job},
    core::v1::PersistentVolumeClaim,
    rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding},
};
use kube::Resource;
use kube::{Api, Client, api::ListParams};
use serde::de::DeserializeOwned;
use unstuck_core::doctor::{
    owner::rbac::Rbac,
    snapshot::{Snapshot, Unreadable},
};

/// Lists one type across the cluster, page by page.
async fn list_all<K>(client: &Client) -> Result<Vec<K>, kube::Error>
where
    K: kube::Resource + Clone + DeserializeOwned + std::fmt::Debug,
    K::DynamicType: Default,
{
    let api: Api<K> = Api::all(client.clone());
    let mut lp = ListParams::default().limit(500);
    let mut out = Vec::new();
    loop {
        let page = api.list(&lp).await?;
        out.extend(page.items);
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => lp = lp.continue_token(&token),
            _ => return Ok(out),
        }
    }
}

fn keep<K>(
    resource: &str,
    r: Result<Vec<K>, kube::Error>,
    unreadable: &mut Vec<Unreadable>,
) -> Vec<K> {
    r.unwrap_or_else(|e| {
        unreadable.push(Unreadable {
            resource: resource.to_owned(),
            message: crate::kube_error::text(&e),
        });
        Vec::new()
    })
}

/// `plural.group` as kubectl spells it, for `Snapshot::unreadable`.
fn resource_name<K: Resource<DynamicType = ()>>() -> String {
    let group = K::group(&());
    if group.is_empty() {
        K::plural(&()).into_owned()
    } else {
        format!("{}.{group}", K::plural(&()))
    }
}

/// Lists `K`, recording a failure in `unreadable`.
fn kept<K: Resource<DynamicType = ()>>(
    r: Result<Vec<K>, kube::Error>,
    unreadable: &mut Vec<Unreadable>,
) -> Vec<K> {
    keep(&resource_name::<K>(), r, unreadable)
}

/// Fills the snapshot's workload, RBAC and claim lists; failures become
/// `unreadable`.
pub async fn collect(client: &Client, snapshot: &mut Snapshot) {
    let (deployments, stateful_sets, daemon_sets, replica_sets, jobs, cron_jobs) = tokio::join!(
        list_all::<Deployment>(client),
        list_all::<StatefulSet>(client),
        list_all::<DaemonSet>(client),
        list_all::<ReplicaSet>(client),
        list_all::<Job>(client),
        list_all::<CronJob>(client),
    );
    let (roles, cluster_roles, role_bindings, cluster_role_bindings, claims) = tokio::join!(
        list_all::<Role>(client),
        list_all::<ClusterRole>(client),
        list_all::<RoleBinding>(client),
        list_all::<ClusterRoleBinding>(client),
        list_all::<PersistentVolumeClaim>(client),
    );
    let u = &mut snapshot.unreadable;
    snapshot.deployments = kept(deployments, u);
    snapshot.stateful_sets = kept(stateful_sets, u);
    snapshot.daemon_sets = kept(daemon_sets, u);
    snapshot.replica_sets = kept(replica_sets, u);
    snapshot.jobs = kept(jobs, u);
    snapshot.cron_jobs = kept(cron_jobs, u);
    // The RBAC lists count only whole: a grant read from half of them
    // would be no proof that nothing else holds one.
    let rbac_read = [
        roles.is_ok(),
        cluster_roles.is_ok(),
        role_bindings.is_ok(),
        cluster_role_bindings.is_ok(),
    ];
    let rbac = Rbac {
        roles: kept(roles, u),
        cluster_roles: kept(cluster_roles, u),
        role_bindings: kept(role_bindings, u),
        cluster_role_bindings: kept(cluster_role_bindings, u),
    };
    snapshot.rbac = rbac_read.iter().all(|ok| *ok).then_some(rbac);
    snapshot.persistent_volume_claims = claims
        .map_err(|e| {
            u.push(Unreadable {
                resource: resource_name::<PersistentVolumeClaim>(),
                message: crate::kube_error::text(&e),
            })
        })
        .ok();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resources_are_named_as_kubectl_names_them() {
        assert_eq!(resource_name::<Deployment>(), "deployments.apps");
        assert_eq!(
            resource_name::<ClusterRoleBinding>(),
            "clusterrolebindings.rbac.authorization.k8s.io"
        );
        assert_eq!(
            resource_name::<PersistentVolumeClaim>(),
            "persistentvolumeclaims"
        );
    }
}
