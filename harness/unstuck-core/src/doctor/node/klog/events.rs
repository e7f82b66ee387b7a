//! Kubelet log records into the [`KubeletEvent`]s the node doctor acts
//! on; the lines' exact strings and the sync failures they quote.

use super::record::{
    KubeletEvent, KubeletLogEntry, RuntimeCall, SyncFailure, SyncLoopOp, VolumeFailureKind,
};
use super::{KlogLine, go_unquote_prefix, parse_go_time};

/// Parses kubelet log records (see `klog_records`; single lines work
/// too) into the events the doctor acts on, in log order. Records it does
/// not understand are skipped.
pub fn parse_kubelet_log<'a>(lines: impl IntoIterator<Item = &'a str>) -> Vec<KubeletLogEntry> {
    lines
        .into_iter()
        .filter_map(|raw| {
            let line = KlogLine::parse(raw)?;
            let event = event_of(&line)?;
            Some(KubeletLogEntry {
                severity: line.severity,
                time: line.time,
                event,
                raw: raw.trim_end().to_owned(),
            })
        })
        .collect()
}

const TEARDOWN_FAILED: &str = "UnmountVolume.TearDown failed for volume ";
const SUBPATH_FAILED: &str = "error cleaning subPath mounts for volume ";
const TEARDOWN_OK: &str = "UnmountVolume.TearDown succeeded for volume ";

fn event_of(line: &KlogLine) -> Option<KubeletEvent> {
    let m = line.message.as_str();
    if m.contains(TEARDOWN_FAILED) || m.contains(SUBPATH_FAILED) {
        return volume_failure(m);
    }
    if m.starts_with(TEARDOWN_OK) {
        return volume_success(m);
    }
    if let Some(e) = old_sync_loop(m) {
        return Some(e);
    }
    if let Some(e) = orphan_paths(m) {
        return Some(e);
    }
    let (msg, kv) = line.structured()?;
    let get = |k: &str| kv.iter().find(|(key, _)| key == k).map(|(_, v)| v.clone());
    let container_id = || {
        get("containerID").map(|v| {
            // `containerd://<id>` or `{"Type":"containerd","ID":"<id>"}`.
            if let Ok(j) = serde_json::from_str::<serde_json::Value>(&v)
                && let Some(id) = j.get("ID").and_then(|i| i.as_str())
            {
                return id.to_owned();
            }
            v.rsplit("://").next().unwrap_or(&v).to_owned()
        })
    };
    match msg.as_str() {
        "SyncLoop ADD" | "SyncLoop UPDATE" | "SyncLoop DELETE" | "SyncLoop REMOVE"
        | "SyncLoop RECONCILE" => {
            let op = match &msg["SyncLoop ".len()..] {
                "ADD" => SyncLoopOp::Add,
                "UPDATE" => SyncLoopOp::Update,
                "DELETE" => SyncLoopOp::Delete,
                "REMOVE" => SyncLoopOp::Remove,
                _ => SyncLoopOp::Reconcile,
            };
            let pods = get("pods")
                .and_then(|p| serde_json::from_str::<Vec<String>>(&p).ok())
                .unwrap_or_default();
            Some(KubeletEvent::SyncLoop { op, pods })
        }
        "Killing container with a grace period" => Some(KubeletEvent::KillingContainer {
            pod: get("pod"),
            pod_uid: get("podUID"),
            container: get("containerName"),
            container_id: container_id(),
            grace_period: get("gracePeriod").and_then(|g| g.parse().ok()),
        }),
        "Kill container failed" => Some(KubeletEvent::KillContainerFailed {
            pod: get("pod"),
            pod_uid: get("podUID"),
            container: get("containerName"),
            container_id: container_id(),
            error: get("err").unwrap_or_default(),
        }),
        "Error syncing pod, skipping" => {
            let failures = parse_sync_failures(&get("err").unwrap_or_default());
            (!failures.is_empty()).then(|| KubeletEvent::SyncFailed {
                pod: get("pod"),
                pod_uid: get("podUID"),
                failures,
            })
        }
        "Cleaned up orphaned pod volumes dir" => Some(KubeletEvent::OrphanVolumesCleaned {
            pod_uid: get("podUID")?,
            path: get("path").unwrap_or_default(),
        }),
        _ if msg.ends_with(" from runtime service failed") => {
            let name = msg.trim_end_matches(" from runtime service failed");
            let call = match name {
                "StopContainer" => RuntimeCall::StopContainer,
                "StopPodSandbox" => RuntimeCall::StopPodSandbox,
                "RemoveContainer" => RuntimeCall::RemoveContainer,
                "RemovePodSandbox" => RuntimeCall::RemovePodSandbox,
                other => RuntimeCall::Other(other.to_owned()),
            };
            let id = get("containerID").or_else(|| get("podSandboxID"))?;
            Some(KubeletEvent::RuntimeCallFailed {
                call,
                id,
                error: get("err").unwrap_or_default(),
            })
        }
        _ => None,
    }
}

/// `... No retries permitted until <ts> (durationBeforeRetry <d>). Error: <err>`,
/// where `<err>` is Go-quoted in older kubelets.
fn volume_failure(m: &str) -> Option<KubeletEvent> {
    let retry_at = m
        .split_once("No retries permitted until ")
        .and_then(|(_, r)| r.split_once(" (durationBeforeRetry"))
        .and_then(|(ts, _)| parse_go_time(ts));
    let retry_after = m
        .split_once("(durationBeforeRetry ")
        .and_then(|(_, r)| r.split_once(')'))
        .map(|(d, _)| d.to_owned());
    let err_text = match m.split_once("Error: ") {
        Some((_, e)) if e.starts_with('"') => go_unquote_prefix(e)?.0,
        Some((_, e)) => e.to_owned(),
        None => m.to_owned(),
    };
    let (kind, after) = if let Some((_, a)) = err_text.split_once(TEARDOWN_FAILED) {
        (VolumeFailureKind::TearDown, a)
    } else {
        (
            VolumeFailureKind::SubPathCleanup,
            err_text.split_once(SUBPATH_FAILED)?.1,
        )
    };
    let (volume, after) = quoted_then(after, " (UniqueName: ")?;
    let (unique_name, after) = quoted_then(after, ") pod ")?;
    let (_pod, after) = quoted_then(after, " (UID: ")?;
    let (pod_uid, after) = quoted_then(after, ")")?;
    let error = after.trim_start().trim_start_matches(':').trim().to_owned();
    Some(KubeletEvent::VolumeTearDownFailed {
        kind,
        volume,
        unique_name,
        pod_uid,
        error,
        retry_at,
        retry_after,
    })
}

/// `UnmountVolume.TearDown succeeded for volume "<uniq>" (OuterVolumeSpecName: "<vol>") pod "<uid>" (UID: "<uid>"). ...`
fn volume_success(m: &str) -> Option<KubeletEvent> {
    let after = m.strip_prefix(TEARDOWN_OK)?;
    let (unique_name, after) = quoted_then(after, " (OuterVolumeSpecName: ")?;
    let (volume, after) = quoted_then(after, ") pod ")?;
    let (_pod, after) = quoted_then(after, " (UID: ")?;
    let (pod_uid, _) = quoted_then(after, ")")?;
    Some(KubeletEvent::VolumeTearDownSucceeded {
        volume,
        unique_name,
        pod_uid,
    })
}

/// Reads `"<text>"` at the start of `s` (plain quotes, as `%q` of a
/// simple name prints) followed by `sep`; returns the text and what
/// follows `sep`.
fn quoted_then<'a>(s: &'a str, sep: &str) -> Option<(String, &'a str)> {
    let s = s.trim_start();
    let (text, used) = go_unquote_prefix(s)?;
    let rest = s[used..].strip_prefix(sep)?;
    Some((text, rest))
}

/// Pre-structured-logging kubelets: `SyncLoop (DELETE, "api"): "name_ns(uid)"`.
fn old_sync_loop(m: &str) -> Option<KubeletEvent> {
    let rest = m.strip_prefix("SyncLoop (")?;
    let (op, rest) = rest.split_once(',')?;
    let op = match op {
        "ADD" => SyncLoopOp::Add,
        "UPDATE" => SyncLoopOp::Update,
        "DELETE" => SyncLoopOp::Delete,
        "REMOVE" => SyncLoopOp::Remove,
        "RECONCILE" => SyncLoopOp::Reconcile,
        _ => return None,
    };
    let (_, pods) = rest.split_once("): ")?;
    let pods = pods
        .split(", ")
        .filter_map(|p| go_unquote_prefix(p.trim()).map(|(t, _)| t))
        .collect();
    Some(KubeletEvent::SyncLoop { op, pods })
}

/// `orphaned pod "<uid>" found, but volume paths are still present on disk`
/// (structured or not).
fn orphan_paths(m: &str) -> Option<KubeletEvent> {
    let text = if m.starts_with('"') {
        go_unquote_prefix(m)?.0
    } else {
        m.to_owned()
    };
    let (_, rest) = text.split_once("rphaned pod ")?;
    if !text.contains("volume paths are still present on disk") {
        return None;
    }
    let (uid, _) = go_unquote_prefix(rest.trim_start())?;
    Some(KubeletEvent::OrphanVolumePathsPresent { pod_uid: uid })
}

/// Parses `PodSyncResult` error text (a kubelet `Error syncing pod` err,
/// or a `FailedKillPod` event message): every
/// `failed to "<action>" for "<target>" with <Reason>: "<message>"`.
pub fn parse_sync_failures(text: &str) -> Vec<SyncFailure> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("failed to \"") {
        rest = &rest[i + "failed to ".len()..];
        let parsed = (|| {
            let (action, used) = go_unquote_prefix(rest)?;
            let r = rest[used..].strip_prefix(" for ")?;
            let (target, used) = go_unquote_prefix(r)?;
            let r = r[used..].strip_prefix(" with ")?;
            let (reason, r) = r.split_once(": ")?;
            let (message, used) = go_unquote_prefix(r)?;
            let consumed = rest.len() - r[used..].len();
            Some((
                SyncFailure {
                    action,
                    target,
                    reason: reason.to_owned(),
                    message,
                },
                consumed,
            ))
        })();
        match parsed {
            Some((f, consumed)) => {
                out.push(f);
                rest = &rest[consumed..];
            }
            None => continue,
        }
    }
    out
}

/// Whether an error text says something is busy: `EBUSY` from unlink or
/// rmdir, `umount`'s "target is busy", also as a zh_CN umount prints it
/// (seed 003: `目标忙`).
pub fn is_busy_error(error: &str) -> bool {
    let e = error.to_lowercase();
    e.contains("device or resource busy")
        || e.contains("target is busy")
        || e.contains("ebusy")
        || error.contains("目标忙")
}
