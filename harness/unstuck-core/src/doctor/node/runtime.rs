//! The container runtime's view of a pod: `ctr` output and shim processes.
//!
//! With containerd's CRI plugin every pod has a sandbox (pause) container
//! and its app containers, all labelled `io.kubernetes.pod.uid`. A
//! `containerd-shim-runc-v2` process serves them; containerd groups a
//! pod's containers into the sandbox's shim, whose command line carries
//! `-id <sandbox id>` (ungrouped setups run one shim per container, `-id
//! <container id>`). A SIGSTOPped shim answers nothing: `ctr task ls`
//! shows its tasks as `UNKNOWN` with pid 0, and every stop request from
//! the kubelet runs into its deadline (catalog case 5).

use serde::{Deserialize, Serialize};

/// Sandbox or app container.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ContainerKind {
    Sandbox,
    Container,
    Unknown,
}

/// As containerd labels it (`io.cri-containerd.kind`); `unknown` when the
/// label is missing.
impl std::fmt::Display for ContainerKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ContainerKind::Sandbox => "sandbox",
            ContainerKind::Container => "container",
            ContainerKind::Unknown => "unknown",
        })
    }
}

/// One containerd container of a pod (`ctr containers info`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeContainer {
    pub id: String,
    pub kind: ContainerKind,
    /// The sandbox it runs in (for a sandbox: itself).
    pub sandbox_id: Option<String>,
    /// The container's name in the pod spec (none for a sandbox).
    pub name: Option<String>,
    pub pod_uid: Option<String>,
    pub image: Option<String>,
}

/// Parses the JSON `ctr containers info <id>` prints.
pub fn parse_ctr_container_info(json: &str) -> Option<RuntimeContainer> {
    let v: serde_json::Value = serde_json::from_str(json).ok()?;
    let id = v.get("ID")?.as_str()?.to_owned();
    let label = |k: &str| {
        v.get("Labels")
            .and_then(|l| l.get(k))
            .and_then(|s| s.as_str())
            .map(str::to_owned)
    };
    let annotation = |k: &str| {
        v.get("Spec")
            .and_then(|s| s.get("annotations"))
            .and_then(|a| a.get(k))
            .and_then(|s| s.as_str())
            .map(str::to_owned)
    };
    let kind = match label("io.cri-containerd.kind").as_deref() {
        Some("sandbox") => ContainerKind::Sandbox,
        Some("container") => ContainerKind::Container,
        _ => ContainerKind::Unknown,
    };
    let sandbox_id = match kind {
        ContainerKind::Sandbox => Some(id.clone()),
        _ => annotation("io.kubernetes.cri.sandbox-id"),
    };
    Some(RuntimeContainer {
        sandbox_id,
        name: label("io.kubernetes.container.name"),
        pod_uid: label("io.kubernetes.pod.uid"),
        image: v.get("Image").and_then(|s| s.as_str()).map(str::to_owned),
        kind,
        id,
    })
}

/// One line of `ctr task ls`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskFact {
    pub id: String,
    pub pid: i64,
    /// `RUNNING`, `STOPPED`, `PAUSED`, `UNKNOWN`, ...
    pub status: String,
}

impl TaskFact {
    /// containerd could not get the task's state from its shim.
    pub fn is_unknown(&self) -> bool {
        self.status == "UNKNOWN"
    }
}

/// Parses `ctr task ls` (header `TASK PID STATUS`, then one row per task).
pub fn parse_ctr_tasks(text: &str) -> Vec<TaskFact> {
    text.lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let id = w.next()?;
            let pid = w.next()?.parse().ok()?;
            let status = w.next()?;
            Some(TaskFact {
                id: id.to_owned(),
                pid,
                status: status.to_owned(),
            })
        })
        .collect()
}

/// A shim process serving some of the pod's containers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ShimFact {
    pub pid: i32,
    /// With the pid, names the process even after pid reuse.
    pub start_time: u64,
    /// `T` is stopped (SIGSTOP), `Z` a zombie.
    pub state: char,
    /// `-id`: the sandbox (or container) it serves.
    pub id: String,
    /// `-namespace`, normally `k8s.io`.
    pub namespace: Option<String>,
    /// `-address`: the containerd socket it belongs to.
    pub address: Option<String>,
    pub command: String,
}

impl ShimFact {
    /// Stopped by a signal (or traced): it answers nothing.
    pub fn is_stopped(&self) -> bool {
        matches!(self.state, 'T' | 't')
    }
}

/// `(id, namespace, address)` from a containerd shim's argv, or `None`
/// when the process is not a shim.
pub fn parse_shim_cmdline(argv: &[String]) -> Option<(String, Option<String>, Option<String>)> {
    let program = argv.first()?;
    let base = program.rsplit('/').next().unwrap_or(program);
    if !base.starts_with("containerd-shim") {
        return None;
    }
    let flag = |name: &str| {
        argv.iter().enumerate().find_map(|(i, a)| {
            let a = a.trim_start_matches('-');
            if a == name {
                argv.get(i + 1).cloned()
            } else {
                a.strip_prefix(name)
                    .and_then(|r| r.strip_prefix('='))
                    .map(str::to_owned)
            }
        })
    };
    Some((flag("id")?, flag("namespace"), flag("address")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shim_cmdlines_parse_and_others_do_not() {
        let argv: Vec<String> = "/usr/bin/containerd-shim-runc-v2 -namespace k8s.io -id 117b -address /c/containerd.sock"
            .split(' ')
            .map(str::to_owned)
            .collect();
        assert_eq!(
            parse_shim_cmdline(&argv),
            Some((
                "117b".into(),
                Some("k8s.io".into()),
                Some("/c/containerd.sock".into())
            ))
        );
        assert!(parse_shim_cmdline(&["/usr/bin/containerd".into(), "--config=x".into()]).is_none());
    }

    #[test]
    fn task_rows_skip_the_header() {
        let t = parse_ctr_tasks("TASK    PID    STATUS\nabc    0      UNKNOWN\ndef 42 RUNNING\n");
        assert_eq!(t.len(), 2);
        assert!(t[0].is_unknown());
        assert_eq!(t[1].pid, 42);
    }
}
