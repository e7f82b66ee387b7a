//! The container runtime's view of one pod on a node, read through
//! [`Node::run`] and the node's process list.

use super::{Node, RuntimeFacts, ShimFact};

/// The runtime's view of the pod with UID `pod_uid`: its containerd
/// containers (by the CRI's `io.kubernetes.pod.uid` label), their tasks,
/// and the shim processes serving them (matched by `-id` and this node's
/// `-address`). `extra_ids` adds container IDs known from elsewhere (the
/// pod's status), for when containerd no longer lists them. Never fails:
/// a query that fails is recorded in [`RuntimeFacts::errors`], because a
/// runtime that does not answer is itself evidence.
pub async fn runtime_facts(node: &dyn Node, pod_uid: &str, extra_ids: &[String]) -> RuntimeFacts {
    use unstuck_core::doctor::node::{
        parse_ctr_container_info, parse_ctr_tasks, parse_shim_cmdline,
    };
    let mut facts = RuntimeFacts::default();
    let filter = format!("labels.\"io.kubernetes.pod.uid\"=={pod_uid}");
    let ids: Vec<String> = match node
        .run(node.ctr().args(["containers", "ls", "-q"]).arg(&filter))
        .await
    {
        Ok(out) => out
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect(),
        Err(e) => {
            facts.errors.push(e.to_string());
            Vec::new()
        }
    };
    for id in &ids {
        match node
            .run(node.ctr().args(["containers", "info"]).arg(id))
            .await
        {
            Ok(json) => match parse_ctr_container_info(&json) {
                Some(c) => facts.containers.push(c),
                None => facts
                    .errors
                    .push(format!("unreadable `ctr containers info {id}` output")),
            },
            Err(e) => facts.errors.push(e.to_string()),
        }
    }
    let mut all_ids = facts.ids();
    all_ids.extend(ids);
    all_ids.extend(extra_ids.iter().cloned());
    all_ids.sort();
    all_ids.dedup();
    // `ctr task ls` asks every shim for its state; a stopped shim costs
    // containerd a 2 s deadline per task, hence the generous timeout.
    match node
        .run(
            node.ctr()
                .args(["tasks", "ls"])
                .timeout(std::time::Duration::from_secs(60)),
        )
        .await
    {
        Ok(out) => {
            facts.tasks = parse_ctr_tasks(&out)
                .into_iter()
                .filter(|t| all_ids.contains(&t.id))
                .collect()
        }
        Err(e) => facts.errors.push(e.to_string()),
    }
    let address = node.containerd_address().display().to_string();
    match node.processes().await {
        Ok(procs) => {
            for p in procs.iter().filter(|p| p.state != 'Z') {
                let Some((id, namespace, addr)) = parse_shim_cmdline(&p.cmdline) else {
                    continue;
                };
                if addr.as_deref() == Some(address.as_str()) && all_ids.contains(&id) {
                    facts.shims.push(ShimFact {
                        pid: p.pid,
                        start_time: p.start_time,
                        state: p.state,
                        id,
                        namespace,
                        address: addr,
                        command: p.command_line(),
                    });
                }
            }
        }
        Err(e) => facts.errors.push(e.to_string()),
    }
    facts
}
