//! `fault`: a failure injected on the node, kept for the *finally* to
//! revert. The step is a thin call into `faults/`; which injector a fault
//! takes is decided in [`inject`] alone.

use std::time::Instant;

use kube::Client;
use unstuck_core::scenario::Fault;

use super::{Evidence, ScenarioRun, StepError};
use crate::{
    faults::{
        FaultError, Injected, busy_mount, freeze_cgroup, remove_cni_config, stop_kubelet,
        wedge_shim,
    },
    node::AnyNode,
};

pub(super) async fn run(run: &mut ScenarioRun<'_>, f: &Fault) -> Result<Evidence, StepError> {
    let node = run
        .ctx
        .node
        .clone()
        .ok_or(StepError::NoNode { fault: f.kind() })?;
    let ns = run.names.namespace(&f.pod().namespace);
    let injected = inject(&run.ctx.client, node.as_ref(), &ns, f)
        .await
        .map_err(|source| StepError::Fault {
            fault: f.to_string(),
            source: Box::new(source),
        })?;
    let evidence = vec![injected.describe()];
    run.injected.push(injected);
    run.last_injection = Some(Instant::now());
    Ok(evidence)
}

/// The scenario's fault to its injector, on the pod in the run's
/// namespace `ns`.
async fn inject(
    client: &Client,
    node: &AnyNode,
    ns: &str,
    f: &Fault,
) -> Result<Injected, FaultError> {
    let pod = f.pod();
    match f {
        Fault::BusyMount(_) => {
            busy_mount::inject(client, node, ns, &pod.pod, &Default::default()).await
        }
        Fault::WedgeShim(_) => wedge_shim::inject(client, node, ns, &pod.pod).await,
        Fault::FreezeCgroup(_) => freeze_cgroup::inject(client, node, ns, &pod.pod).await,
        Fault::StopKubelet(_) => stop_kubelet::inject(client, node, ns, &pod.pod).await,
        Fault::RemoveCniConfig(_) => remove_cni_config::inject(client, node, ns, &pod.pod).await,
        Fault::HoldVolume(v) => {
            let opts = busy_mount::BusyMountOptions {
                kind: busy_mount::BusyKind::HeldVolume,
                volume: Some(v.volume.to_string()),
                holder: true,
            };
            busy_mount::inject(client, node, ns, &pod.pod, &opts).await
        }
    }
}
