//! The restarts of a kind node's control plane. kubeadm runs etcd,
//! kube-apiserver, kube-controller-manager and kube-scheduler as static
//! pods, so the node's kubelet restarts them itself when they exit (as it
//! does kube-controller-manager after "leaderelection lost"); this only
//! watches, through the API, so that a report can name the exits.

use std::{collections::HashMap, time::Duration};

use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use kube::{
    Api, Client,
    api::{ListParams, LogParams},
};

use crate::cluster::exits::{ComponentExit, ExitLog, Restart};

/// How often the control plane's pods are listed.
const POLL: Duration = Duration::from_secs(2);
/// Lines of the previous container's log kept with its exit.
const LOG_LINES: i64 = 8;

/// A running watch; it ends when dropped.
pub struct RestartWatch {
    exits: ExitLog,
    task: tokio::task::JoinHandle<()>,
}

impl RestartWatch {
    /// Starts watching; restarts before this moment are not reported.
    pub fn start(client: Client) -> Self {
        let exits = ExitLog::default();
        let task = tokio::spawn(watch(client, exits.clone()));
        Self { exits, task }
    }

    pub fn exits(&self) -> ExitLog {
        self.exits.clone()
    }
}

impl Drop for RestartWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn watch(client: Client, exits: ExitLog) {
    let pods: Api<Pod> = Api::namespaced(client, "kube-system");
    let params = ListParams::default().labels("tier=control-plane");
    // (pod, container) -> restart count last seen; `None` until the first list.
    let mut seen: Option<HashMap<(String, String), i32>> = None;
    loop {
        if let Ok(list) = pods.list(&params).await {
            let now = counts(&list.items);
            if let Some(before) = &seen {
                for ((pod, container), count) in &now {
                    let was = before.get(&(pod.clone(), container.clone()));
                    if was.is_some_and(|was| count > was) {
                        let status = list
                            .items
                            .iter()
                            .find(|p| p.metadata.name.as_deref() == Some(pod))
                            .and_then(|p| container_status(p, container));
                        let log_tail = previous_log(&pods, pod, container).await;
                        exits.push(exit_of(container, *count, status, log_tail));
                    }
                }
            }
            seen = Some(now);
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Each control-plane container's restart count.
fn counts(pods: &[Pod]) -> HashMap<(String, String), i32> {
    pods.iter()
        .flat_map(|p| {
            let name = p.metadata.name.clone().unwrap_or_default();
            p.status
                .iter()
                .flat_map(|s| s.container_statuses.iter().flatten())
                .map(move |c| ((name.clone(), c.name.clone()), c.restart_count))
        })
        .collect()
}

fn container_status<'a>(pod: &'a Pod, container: &str) -> Option<&'a ContainerStatus> {
    pod.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .iter()
        .find(|c| c.name == container)
}

/// The end of the exited container's log, as `kubectl logs --previous`.
async fn previous_log(pods: &Api<Pod>, pod: &str, container: &str) -> String {
    let params = LogParams {
        container: Some(container.to_string()),
        previous: true,
        tail_lines: Some(LOG_LINES),
        ..LogParams::default()
    };
    pods.logs(pod, &params)
        .await
        .unwrap_or_else(|e| format!("(its previous log is unreadable: {e})"))
}

/// The exit a restart count going up to `count` stands for, from the
/// container's `lastState.terminated`.
fn exit_of(
    container: &str,
    count: i32,
    status: Option<&ContainerStatus>,
    log_tail: String,
) -> ComponentExit {
    let terminated = status
        .and_then(|s| s.last_state.as_ref())
        .and_then(|s| s.terminated.as_ref());
    ComponentExit {
        component: container.to_string(),
        at: terminated
            .and_then(|t| t.finished_at.as_ref())
            .map(|t| t.0.to_string())
            .unwrap_or_else(|| k8s_openapi::jiff::Timestamp::now().to_string()),
        status: terminated.map_or_else(
            || "exited".to_string(),
            |t| match &t.reason {
                Some(reason) => format!("exit code {} ({reason})", t.exit_code),
                None => format!("exit code {}", t.exit_code),
            },
        ),
        log_tail,
        restart: Restart::Kubelet {
            restart_count: count,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exit_is_read_from_the_containers_last_state() {
        // A kube-controller-manager static pod's status after one restart
        // (the fields the kubelet fills; kind v0.30, Kubernetes v1.34.4).
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "kube-controller-manager-run-ab12-control-plane", "namespace": "kube-system"},
            "status": {"containerStatuses": [{
                "name": "kube-controller-manager",
                "image": "registry.k8s.io/kube-controller-manager:v1.34.4",
                "imageID": "", "ready": true, "restartCount": 1,
                "state": {"running": {"startedAt": "2026-11-24T17:40:12Z"}},
                "lastState": {"terminated": {"exitCode": 137, "reason": "Error",
                    "startedAt": "2026-11-24T17:31:02Z", "finishedAt": "2026-11-24T17:40:01Z"}}
            }]}
        }))
        .unwrap();
        assert_eq!(
            counts(std::slice::from_ref(&pod)),
            HashMap::from([(
                (
                    "kube-controller-manager-run-ab12-control-plane".to_string(),
                    "kube-controller-manager".to_string()
                ),
                1
            )])
        );
        let exit = exit_of(
            "kube-controller-manager",
            1,
            container_status(&pod, "kube-controller-manager"),
            "E1124 17:40:01.000000       1 controllermanager.go:343] \"leaderelection lost\"\n"
                .into(),
        );
        assert_eq!(
            exit.to_string(),
            "kube-controller-manager exited at 2026-11-24T17:40:01Z (exit code 137 (Error)); restarted by the node's kubelet (restart 1); its log ended: E1124 17:40:01.000000       1 controllermanager.go:343] \"leaderelection lost\""
        );
    }
}
