//! From what [`super::read`] gathered to the causes of a stuck pod and the
//! sentence that explains them, one cause family at a time. The order of
//! the checks is the order of [`NodeCause`]s in the verdict: later checks
//! defer to earlier ones (the runtime is no cause beside a kernel stall, a
//! frozen cgroup or a failing network DEL; leftover kubelet mounts are none
//! beside a wedged runtime).

use super::super::NodeFacts;
use super::super::kernel::KernelWait;
use super::super::mounts::PodMount;
use super::super::runtime::ShimFact;
use super::read::Deletion;
use super::{NodeCause, NodeFinding, is_cni_teardown_failure};

/// The causes of a stuck pod, most fundamental first; never empty.
pub(super) fn causes(facts: &NodeFacts, f: &NodeFinding, node_unknown: bool) -> Vec<NodeCause> {
    let mut causes = Vec::new();
    if kubelet_down(facts, node_unknown) {
        causes.push(NodeCause::KubeletDown);
    }
    // A process the kernel holds in `D` explains a failing kill by
    // itself; only a shim that is itself stopped still makes the
    // runtime a cause beside it.
    let kernel_stalled = !f.kernel_stalls.is_empty();
    if kernel_stalled {
        causes.push(NodeCause::KernelStall);
    }
    if f.frozen.is_some() {
        causes.push(NodeCause::CgroupFrozen);
    }
    // A failing network DEL fails StopPodSandbox with a healthy
    // runtime: the runtime rungs do not apply unless a shim is
    // itself stopped.
    let cni_failing = f.kill_failures.iter().any(|k| is_cni_teardown_failure(k));
    if cni_failing {
        causes.push(NodeCause::CniTeardownFailed);
    }
    let runtime_wedged = runtime_wedged(facts, f, kernel_stalled, cni_failing);
    if runtime_wedged {
        causes.push(NodeCause::WedgedRuntime);
    }
    if volume_blocked(facts, f, runtime_wedged) {
        causes.push(NodeCause::BusyVolume);
    }
    if causes.is_empty() {
        causes.push(NodeCause::Unknown);
    }
    causes
}

/// No kubelet runs, or (where the node cannot say) the node is
/// `Ready=Unknown`.
fn kubelet_down(facts: &NodeFacts, node_unknown: bool) -> bool {
    facts.kubelet_running == Some(false) || (facts.kubelet_running.is_none() && node_unknown)
}

/// A wedged shim always counts; otherwise unknown tasks or kill failures
/// only when no kernel stall, frozen cgroup or failing network DEL
/// explains them.
fn runtime_wedged(
    facts: &NodeFacts,
    f: &NodeFinding,
    kernel_stalled: bool,
    cni_failing: bool,
) -> bool {
    let unknown = f.tasks.iter().any(|t| t.is_unknown());
    !f.wedged_shims.is_empty()
        || (!kernel_stalled
            && f.frozen.is_none()
            && !cni_failing
            && (unknown
                || (!f.kill_failures.is_empty()
                    && (!f.tasks.is_empty() || !facts.runtime.errors.is_empty()))))
}

/// The kubelet's own mounts still being there only counts when its
/// log cannot be read: with the log, a failing TearDown shows up
/// there, and mounts without failures are a teardown in progress.
fn volume_blocked(facts: &NodeFacts, f: &NodeFinding, runtime_wedged: bool) -> bool {
    let kubelet_mounts_left = f.mounts.iter().any(|m| !m.is_stray());
    !f.busy_volumes.is_empty()
        || f.mounts.iter().any(PodMount::is_stray)
        || (kubelet_mounts_left
            && !facts.kubelet_log_available
            && !runtime_wedged
            && f.tasks.iter().all(|t| t.status != "RUNNING"))
}

/// The verdict in one sentence.
pub(super) fn summary(
    facts: &NodeFacts,
    f: &NodeFinding,
    deletion: &Deletion,
    pod_key: &str,
) -> String {
    let display = format!("pod {pod_key}");
    if !f.stuck {
        return match deletion.overdue {
            None => format!("{display} is not being deleted"),
            Some(_) if deletion.finally_deleted => format!(
                "{display} was finally deleted by the kubelet (grace 0); only finalizers can hold it now"
            ),
            Some(o) => format!(
                "{display} is being deleted ({}s past its deletionTimestamp), not yet stuck",
                o.as_secs()
            ),
        };
    }
    let secs = deletion.overdue.map_or(0, |o| o.as_secs());
    let mut why = Vec::new();
    if f.causes.contains(&NodeCause::KubeletDown) {
        why.push(why_kubelet_down(facts));
    }
    if f.causes.contains(&NodeCause::KernelStall) {
        why.push(why_kernel_stall(f));
    }
    if let Some(fr) = f
        .frozen
        .as_ref()
        .filter(|_| f.causes.contains(&NodeCause::CgroupFrozen))
    {
        why.push(fr.why());
    }
    if f.causes.contains(&NodeCause::WedgedRuntime) {
        why.push(why_wedged_runtime(f));
    }
    if f.causes.contains(&NodeCause::BusyVolume) {
        why.push(why_busy_volume(f));
    }
    if f.causes.contains(&NodeCause::CniTeardownFailed) {
        why.push(why_cni(facts));
    }
    if f.causes.contains(&NodeCause::Unknown) {
        why.push("the node shows no cause yet".to_owned());
    }
    format!(
        "{display} is stuck terminating on {} ({secs}s past its deletionTimestamp): {}",
        facts.node,
        why.join("; and ")
    )
}

fn why_kubelet_down(facts: &NodeFacts) -> String {
    if facts.kubelet_running == Some(false) {
        "its node's kubelet is not running, so nothing kills its containers or confirms its deletion".to_owned()
    } else {
        "its node's kubelet stopped posting status (Ready=Unknown), so nothing confirms its deletion".to_owned()
    }
}

fn why_kernel_stall(f: &NodeFinding) -> String {
    let (task, wait) = &f.kernel_stalls[0];
    let mut line = format!(
        "process {} ({}) waits in the kernel for {}, so no kill can end it",
        task.pid,
        task.command,
        wait.describe()
    );
    if *wait == KernelWait::FrozenFilesystem
        && let Some(m) = &task.mount
    {
        line.push_str(&format!(
                " ({} {} mounted at {} in the container is frozen; it goes on once whoever froze it thaws it, e.g. `fsfreeze --unfreeze` on its mount point)",
                m.fs_type,
                m.source,
                m.mount_point.display()
            ));
    }
    line
}

fn why_wedged_runtime(f: &NodeFinding) -> String {
    if f.wedged_shims.iter().any(ShimFact::is_stopped) {
        "its containerd shim is stopped, so the runtime cannot stop its containers".to_owned()
    } else {
        "the runtime cannot stop its containers".to_owned()
    }
}

fn why_busy_volume(f: &NodeFinding) -> String {
    let stray: Vec<String> = f
        .mounts
        .iter()
        .filter(|m| m.is_stray())
        .map(|m| m.mount.mount_point.display().to_string())
        .collect();
    let vols: Vec<&str> = f.busy_volumes.iter().map(|v| v.volume.as_str()).collect();
    match (vols.is_empty(), stray.is_empty()) {
        (false, false) => format!(
            "the kubelet cannot tear down volume(s) {} because of stray mount(s) {}",
            vols.join(", "),
            stray.join(", ")
        ),
        (false, true) => {
            format!("the kubelet cannot tear down volume(s) {}", vols.join(", "))
        }
        (true, _) => format!("mounts remain under {}", f.pod_dir.display()),
    }
}

fn why_cni(facts: &NodeFacts) -> String {
    match &facts.cni {
        Some(c) if c.configs.is_empty() => format!(
            "the network plugin cannot tear down its sandbox: no CNI configuration is left in {} (\"cni plugin not initialized\")",
            c.conf_dir.display()
        ),
        _ => "the network plugin's DEL fails, so the runtime cannot stop its sandbox (\"failed to destroy network for sandbox\")".to_owned(),
    }
}
