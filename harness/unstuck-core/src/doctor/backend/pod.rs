//! What the doctor keeps of a pod a backend's Service selects, and
//! whether it is a backend coming back.

use k8s_openapi::{api::core::v1::Pod, jiff::Timestamp};

use super::RECENT;
use crate::doctor::model::BackendPod;

/// Messages are quoted up to this many characters: a crash's termination
/// message can be a whole stack trace.
const QUOTE_MAX: usize = 300;

fn quote(text: &str) -> String {
    let text = text.trim();
    match text.char_indices().nth(QUOTE_MAX) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text.to_owned(),
    }
}

/// Why `pod` is not Ready, one line per cause (see [`BackendPod::causes`]).
fn not_ready_causes(pod: &Pod) -> Vec<String> {
    let Some(status) = pod.status.as_ref() else {
        return vec!["no status yet: no component has reported on it".into()];
    };
    let conditions = status.conditions.iter().flatten();
    if conditions
        .clone()
        .any(|c| c.type_ == "Ready" && c.status == "True")
    {
        return Vec::new();
    }
    let mut out = Vec::new();
    for c in conditions.filter(|c| c.type_ == "PodScheduled" && c.status == "False") {
        out.push(format!(
            "not scheduled ({}): {}",
            c.reason.as_deref().unwrap_or("no reason given"),
            quote(c.message.as_deref().unwrap_or("no message"))
        ));
    }
    let containers = status
        .init_container_statuses
        .iter()
        .flatten()
        .map(|c| (c, "init container"))
        .chain(
            status
                .container_statuses
                .iter()
                .flatten()
                .map(|c| (c, "container")),
        );
    for (c, what) in containers {
        let state = c.state.as_ref();
        if let Some(w) = state.and_then(|s| s.waiting.as_ref()) {
            out.push(format!(
                "{what} {} waiting ({}){}",
                c.name,
                w.reason.as_deref().unwrap_or("no reason given"),
                w.message
                    .as_deref()
                    .map(|m| format!(": {}", quote(m)))
                    .unwrap_or_default()
            ));
        } else if state.is_some_and(|s| s.running.is_some()) && !c.ready {
            out.push(format!(
                "{what} {} is running but not ready (its readiness probe has not passed)",
                c.name
            ));
        }
        if let Some(t) = c.last_state.as_ref().and_then(|s| s.terminated.as_ref()) {
            out.push(format!(
                "{what} {} last terminated ({}, exit code {}{}){}, {} restart(s)",
                c.name,
                t.reason.as_deref().unwrap_or("no reason given"),
                t.exit_code,
                t.finished_at
                    .as_ref()
                    .map(|f| format!(", at {}", f.0))
                    .unwrap_or_default(),
                t.message
                    .as_deref()
                    .map(|m| format!(": {}", quote(m)))
                    .unwrap_or_default(),
                c.restart_count
            ));
        }
    }
    if out.is_empty() && status.phase.as_deref() == Some("Pending") {
        out.push(
            match status.reason.as_deref().or(status.message.as_deref()) {
                Some(r) => format!("Pending: {}", quote(r)),
                None => "Pending, with no container status yet".to_string(),
            },
        );
    }
    out
}

impl BackendPod {
    pub fn from_pod(pod: &Pod) -> Self {
        let status = pod.status.as_ref();
        let statuses: Vec<_> = status
            .into_iter()
            .flat_map(|s| {
                s.init_container_statuses
                    .iter()
                    .flatten()
                    .chain(s.container_statuses.iter().flatten())
            })
            .collect();
        Self {
            name: pod.metadata.name.clone().unwrap_or_default(),
            phase: status.and_then(|s| s.phase.clone()),
            deleting: pod.metadata.deletion_timestamp.is_some(),
            ready: status
                .and_then(|s| s.conditions.as_ref())
                .into_iter()
                .flatten()
                .any(|c| c.type_ == "Ready" && c.status == "True"),
            last_started: statuses
                .iter()
                .filter_map(|c| c.state.as_ref()?.running.as_ref()?.started_at.as_ref())
                .map(|t| t.0)
                .max(),
            last_restart: statuses
                .iter()
                .filter_map(|c| {
                    c.last_state
                        .as_ref()?
                        .terminated
                        .as_ref()?
                        .finished_at
                        .as_ref()
                })
                .map(|t| t.0)
                .max(),
            restarts: statuses
                .iter()
                .map(|c| u32::try_from(c.restart_count).unwrap_or(0))
                .sum(),
            waiting: statuses
                .iter()
                .filter_map(|c| c.state.as_ref()?.waiting.as_ref())
                .map(|w| w.reason.clone().unwrap_or_else(|| "Waiting".into()))
                .collect(),
            causes: not_ready_causes(pod),
        }
    }

    /// `; why: ...` naming its causes, or nothing when none is recorded.
    pub fn causes_text(&self) -> String {
        if self.causes.is_empty() {
            String::new()
        } else {
            format!("; why: {}", self.causes.join("; "))
        }
    }

    /// Why this pod is a backend coming back (or still there), judged at
    /// `now`; `None` for a pod that is going or gone for good.
    pub fn coming_back(&self, now: Timestamp) -> Option<String> {
        let phase = self.phase.as_deref().unwrap_or("Unknown");
        if self.deleting || matches!(phase, "Succeeded" | "Failed") {
            return None;
        }
        let recent = |t: Timestamp| {
            now.duration_since(t).unsigned_abs().le(&RECENT).then(|| {
                format!(
                    "{t} ({} s before the read)",
                    now.duration_since(t).as_secs()
                )
            })
        };
        if self.ready {
            return Some(format!(
                "pod {} is Ready (its endpoint may not be published yet)",
                self.name
            ));
        }
        if phase == "Pending" {
            return Some(format!(
                "pod {} is Pending (starting){}",
                self.name,
                self.causes_text()
            ));
        }
        if !self.waiting.is_empty() {
            return Some(format!(
                "pod {} has a container waiting ({}), {} restart(s): restarting{}",
                self.name,
                self.waiting.join(", "),
                self.restarts,
                self.causes_text()
            ));
        }
        if let Some(t) = self.last_restart.and_then(recent) {
            return Some(format!(
                "pod {} restarted recently: a container last exited at {t}{}",
                self.name,
                self.causes_text()
            ));
        }
        if let Some(t) = self.last_started.and_then(recent) {
            return Some(format!(
                "pod {} started recently (at {t}) and is not ready yet{}",
                self.name,
                self.causes_text()
            ));
        }
        None
    }
}
