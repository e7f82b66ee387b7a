//! Kubelet log lines, klog text format, into [`KubeletEvent`]s.
//!
//! A klog line is `Lmmdd hh:mm:ss.uuuuuu threadid file:line] message`
//! (L = I, W, E or F). The message is either free text (older call sites,
//! and `nestedpendingoperations.go`, which still uses printf) or, for
//! structured logging, a Go-quoted message followed by `key=value` pairs
//! whose values are Go-quoted strings, JSON-ish `{...}`/`[...]`, or bare
//! words. Lines may carry a journald prefix (`Sep 22 20:04:07 host
//! kubelet[3583]: `); the header is found wherever it starts.
//!
//! Only the lines the node doctor acts on become events; the rest are
//! ignored. The exact strings come from the v1.34 kubelet as observed on a
//! real node (see `tests/recorded/node/`) and from the seed articles'
//! older kubelets (volume errors used to be Go-quoted after `Error: `).

use k8s_openapi::jiff::Timestamp;
use serde::{Deserialize, Serialize};

/// klog severity letter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Severity {
    Info,
    Warning,
    Error,
    Fatal,
}

/// One parsed klog line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KlogLine {
    pub severity: Severity,
    /// `mmdd hh:mm:ss.uuuuuu` as printed: klog has no year and no zone.
    pub time: String,
    /// The logging thread id (the kubelet's pid in practice).
    pub thread: u32,
    /// `file.go:line`.
    pub source: String,
    /// Everything after `] `.
    pub message: String,
}

impl KlogLine {
    /// Parses one line, or `None` when it holds no klog header. No-break
    /// spaces read as spaces: logs pasted through web pages (the seed
    /// articles) carry them where klog wrote spaces.
    pub fn parse(line: &str) -> Option<KlogLine> {
        if line.contains('\u{a0}') {
            return Self::parse(&line.replace('\u{a0}', " "));
        }
        (0..line.len()).find_map(|i| parse_header_at(line, i))
    }

    /// For a structured line: the message and its key/value pairs, values
    /// unquoted (Go-quoted strings) or raw (`{...}`, `[...]`, bare words).
    pub fn structured(&self) -> Option<(String, Vec<(String, String)>)> {
        if !self.message.starts_with('"') {
            return None;
        }
        let (msg, used) = go_unquote_prefix(&self.message)?;
        let mut rest = &self.message[used..];
        let mut pairs = Vec::new();
        loop {
            rest = rest.trim_start();
            if rest.is_empty() {
                break;
            }
            let Some(eq) = rest.find('=') else { break };
            let key = rest[..eq].to_owned();
            if key.contains(char::is_whitespace) {
                break;
            }
            let value_text = &rest[eq + 1..];
            let (value, used) = read_value(value_text)?;
            pairs.push((key, value));
            rest = &value_text[used..];
        }
        Some((msg, pairs))
    }
}

fn parse_header_at(line: &str, i: usize) -> Option<KlogLine> {
    let s = line.get(i..)?;
    let b = s.as_bytes();
    let severity = match b.first()? {
        b'I' => Severity::Info,
        b'W' => Severity::Warning,
        b'E' => Severity::Error,
        b'F' => Severity::Fatal,
        _ => return None,
    };
    // A header starts a line or follows a space (journald prefix).
    if i > 0 && !line.as_bytes()[i - 1].is_ascii_whitespace() {
        return None;
    }
    // mmdd hh:mm:ss.frac
    let digits =
        |r: std::ops::Range<usize>| b.get(r).is_some_and(|d| d.iter().all(u8::is_ascii_digit));
    if !(digits(1..5)
        && b.get(5) == Some(&b' ')
        && digits(6..8)
        && b.get(8) == Some(&b':')
        && digits(9..11)
        && b.get(11) == Some(&b':')
        && digits(12..14)
        && b.get(14) == Some(&b'.'))
    {
        return None;
    }
    let frac_end = 15 + b[15..].iter().take_while(|c| c.is_ascii_digit()).count();
    let time = s[1..frac_end].to_owned();
    let rest = s[frac_end..].trim_start();
    let (thread, rest) = rest.split_once(' ')?;
    let thread: u32 = thread.parse().ok()?;
    let (source, message) = rest.trim_start().split_once("] ")?;
    if !source.contains(':') || source.contains(' ') {
        return None;
    }
    Some(KlogLine {
        severity,
        time,
        thread,
        source: source.to_owned(),
        message: message.trim_end_matches(['\r', '\n']).to_owned(),
    })
}

/// Reads one structured value at the start of `s`: its text and the bytes used.
fn read_value(s: &str) -> Option<(String, usize)> {
    match s.as_bytes().first() {
        Some(b'"') => go_unquote_prefix(s),
        Some(b'{' | b'[') => {
            let mut depth = 0i32;
            let mut in_str = false;
            let mut escaped = false;
            for (i, c) in s.char_indices() {
                if in_str {
                    match (escaped, c) {
                        (true, _) => escaped = false,
                        (false, '\\') => escaped = true,
                        (false, '"') => in_str = false,
                        _ => {}
                    }
                    continue;
                }
                match c {
                    '"' => in_str = true,
                    '{' | '[' => depth += 1,
                    '}' | ']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some((s[..=i].to_owned(), i + 1));
                        }
                    }
                    _ => {}
                }
            }
            Some((s.to_owned(), s.len()))
        }
        Some(_) => {
            let end = s.find(char::is_whitespace).unwrap_or(s.len());
            Some((s[..end].to_owned(), end))
        }
        None => Some((String::new(), 0)),
    }
}

/// Unquotes the Go string literal (as `strconv.Quote` writes it) that
/// starts `s`; returns the text and how many bytes of `s` it used.
pub(crate) fn go_unquote_prefix(s: &str) -> Option<(String, usize)> {
    let mut chars = s.char_indices();
    if chars.next()?.1 != '"' {
        return None;
    }
    let mut out: Vec<u8> = Vec::with_capacity(s.len());
    let mut buf = [0u8; 4];
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Some((String::from_utf8_lossy(&out).into_owned(), i + 1)),
            '\\' => {
                let (_, e) = chars.next()?;
                match e {
                    'n' => out.push(b'\n'),
                    't' => out.push(b'\t'),
                    'r' => out.push(b'\r'),
                    'a' => out.push(7),
                    'b' => out.push(8),
                    'f' => out.push(12),
                    'v' => out.push(11),
                    '\\' | '"' | '\'' => out.push(e as u8),
                    'x' => {
                        let h: String = (0..2).filter_map(|_| chars.next().map(|c| c.1)).collect();
                        out.push(u8::from_str_radix(&h, 16).ok()?);
                    }
                    'u' | 'U' => {
                        let n = if e == 'u' { 4 } else { 8 };
                        let h: String = (0..n).filter_map(|_| chars.next().map(|c| c.1)).collect();
                        let ch = char::from_u32(u32::from_str_radix(&h, 16).ok()?)?;
                        out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                    }
                    '0'..='7' => {
                        let mut v = e.to_digit(8)?;
                        for _ in 0..2 {
                            v = v * 8 + chars.next()?.1.to_digit(8)?;
                        }
                        out.push(u8::try_from(v).ok()?);
                    }
                    other => out.extend_from_slice(other.encode_utf8(&mut buf).as_bytes()),
                }
            }
            c => out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes()),
        }
    }
    None
}

/// Which volume operation failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum VolumeFailureKind {
    /// `UnmountVolume.TearDown failed`: the volume plugin's TearDown (for
    /// an emptyDir, removing its directory; for a mounted volume, umount).
    TearDown,
    /// `error cleaning subPath mounts`: the subPath bind mounts under
    /// `volume-subpaths/` could not be removed (seed 004).
    SubPathCleanup,
}

/// The runtime (CRI) call a `... from runtime service failed` line names.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RuntimeCall {
    StopContainer,
    StopPodSandbox,
    RemoveContainer,
    RemovePodSandbox,
    Other(String),
}

/// The kubelet's pod sync loop operations (`SyncLoop DELETE` etc.).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SyncLoopOp {
    Add,
    Update,
    Delete,
    Remove,
    Reconcile,
}

/// One failed step of a pod sync, as `PodSyncResult.Error` prints it:
/// `failed to "KillContainer" for "c" with KillContainerError: "rpc error: ..."`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SyncFailure {
    /// `KillContainer`, `KillPodSandbox`, `StartContainer`, ...
    pub action: String,
    /// The container name, or the pod UID for sandbox actions.
    pub target: String,
    /// `KillContainerError`, `KillPodSandboxError`, ...
    pub reason: String,
    /// The runtime's error, unquoted.
    pub message: String,
}

impl SyncFailure {
    /// Whether this is a failure to stop something (catalog case 5).
    pub fn is_kill(&self) -> bool {
        self.action == "KillContainer" || self.action == "KillPodSandbox"
    }
}

/// What a kubelet log line says, for the lines the node doctor acts on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all_fields = "camelCase")]
pub enum KubeletEvent {
    /// A volume could not be torn down; the kubelet retries after
    /// `retry_at` (backoff doubling from 500 ms to 2m2s).
    VolumeTearDownFailed {
        kind: VolumeFailureKind,
        /// The volume's name in the pod spec (`OuterVolumeSpecName`).
        volume: String,
        /// `kubernetes.io/empty-dir/<uid>-<volume>` and the like.
        unique_name: String,
        pod_uid: String,
        /// The plugin's error, e.g. `unlinkat <path>: device or resource busy`.
        error: String,
        /// `No retries permitted until ...`, when it parsed.
        retry_at: Option<Timestamp>,
        /// `durationBeforeRetry`, as printed (`500ms`, `2m2s`).
        retry_after: Option<String>,
    },
    /// A volume was torn down: a prior failure for it is resolved.
    VolumeTearDownSucceeded {
        volume: String,
        unique_name: String,
        pod_uid: String,
    },
    /// `Killing container with a grace period`: the kubelet started to stop a container.
    KillingContainer {
        pod: Option<String>,
        pod_uid: Option<String>,
        container: Option<String>,
        container_id: Option<String>,
        grace_period: Option<i64>,
    },
    /// `Kill container failed`: stopping one container failed.
    KillContainerFailed {
        pod: Option<String>,
        pod_uid: Option<String>,
        container: Option<String>,
        container_id: Option<String>,
        error: String,
    },
    /// `Error syncing pod, skipping` (or the `FailedKillPod` event text):
    /// the pod sync's failed steps.
    SyncFailed {
        pod: Option<String>,
        pod_uid: Option<String>,
        failures: Vec<SyncFailure>,
    },
    /// `StopContainer from runtime service failed` and the like: a CRI
    /// call by container or sandbox ID.
    RuntimeCallFailed {
        call: RuntimeCall,
        id: String,
        error: String,
    },
    /// The kubelet's sync loop saw the pod change; `Remove` after the final
    /// delete is the kubelet finishing the pod itself.
    SyncLoop { op: SyncLoopOp, pods: Vec<String> },
    /// `Cleaned up orphaned pod volumes dir`: the pod's volumes dir is gone.
    OrphanVolumesCleaned { pod_uid: String, path: String },
    /// `orphaned pod "<uid>" found, but volume paths are still present on
    /// disk`: a pod deleted (often forced) while its volumes stayed.
    OrphanVolumePathsPresent { pod_uid: String },
}

impl KubeletEvent {
    /// Whether the event is about the pod with this UID, `ns/name`, or one
    /// of these container/sandbox IDs.
    pub fn concerns(&self, uid: &str, pod: &str, ids: &[String]) -> bool {
        let is_pod = |p: &Option<String>, u: &Option<String>| {
            u.as_deref() == Some(uid) || p.as_deref() == Some(pod)
        };
        match self {
            KubeletEvent::VolumeTearDownFailed { pod_uid, .. }
            | KubeletEvent::VolumeTearDownSucceeded { pod_uid, .. }
            | KubeletEvent::OrphanVolumesCleaned { pod_uid, .. }
            | KubeletEvent::OrphanVolumePathsPresent { pod_uid } => pod_uid == uid,
            KubeletEvent::KillingContainer {
                pod,
                pod_uid,
                container_id,
                ..
            }
            | KubeletEvent::KillContainerFailed {
                pod,
                pod_uid,
                container_id,
                ..
            } => {
                is_pod(pod, pod_uid)
                    || container_id
                        .as_deref()
                        .is_some_and(|c| ids.iter().any(|i| i == c))
            }
            KubeletEvent::SyncFailed { pod, pod_uid, .. } => is_pod(pod, pod_uid),
            KubeletEvent::RuntimeCallFailed { id, .. } => ids.iter().any(|i| i == id),
            KubeletEvent::SyncLoop { pods, .. } => pods
                .iter()
                .any(|p| p == pod || p.contains(&format!("({uid})"))),
        }
    }
}

/// One kubelet log line the doctor understood.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KubeletLogEntry {
    pub severity: Severity,
    /// `mmdd hh:mm:ss.uuuuuu` from the klog header.
    pub time: String,
    pub event: KubeletEvent,
    /// The line as logged, for evidence.
    pub raw: String,
}

/// Splits log text into records: a klog header line plus the lines after
/// it that carry no header of their own. Unstructured messages keep their
/// newlines, so one entry can span lines: a failed unmount prints
/// `unmount failed: exit status 32`, then `Unmounting arguments: ...` and
/// `Output: umount: ...: target is busy.` on lines of their own.
pub fn klog_records(text: &str) -> Vec<String> {
    let mut records: Vec<String> = Vec::new();
    for line in text.lines() {
        match records.last_mut() {
            Some(last) if KlogLine::parse(line).is_none() => {
                last.push('\n');
                last.push_str(line);
            }
            _ => records.push(line.to_owned()),
        }
    }
    records
}

/// Parses kubelet log records (see [`klog_records`]; single lines work
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

/// Parses a Go time as the kubelet prints `time.Time` values:
/// `2026-11-22 02:04:51.521053398 +0000 UTC m=+21.202001230`.
pub fn parse_go_time(s: &str) -> Option<Timestamp> {
    let mut words = s.split_whitespace();
    let text = format!("{} {} {}", words.next()?, words.next()?, words.next()?);
    Timestamp::strptime("%Y-%m-%d %H:%M:%S%.f %z", &text).ok()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_strings_unquote_with_escapes() {
        let (s, used) = go_unquote_prefix(r#""a \"b\"\n\t\x41\u00e9" rest"#).unwrap();
        assert_eq!(s, "a \"b\"\n\tAé");
        assert_eq!(used, r#""a \"b\"\n\t\x41\u00e9""#.len());
        assert!(go_unquote_prefix(r#""unterminated"#).is_none());
    }

    #[test]
    fn headers_are_found_after_a_journald_prefix() {
        let l = KlogLine::parse("9月 22 20:04:07 ee-test kubelet[3583]: E0922 20:04:07.711666    3583 nestedpendingoperations.go:264] Operation x").unwrap();
        assert_eq!(l.severity, Severity::Error);
        assert_eq!(l.time, "0922 20:04:07.711666");
        assert_eq!(l.thread, 3583);
        assert_eq!(l.source, "nestedpendingoperations.go:264");
        assert_eq!(l.message, "Operation x");
        assert!(KlogLine::parse("no header here").is_none());
    }

    #[test]
    fn structured_values_of_every_shape() {
        let l = KlogLine::parse(r#"I1122 02:04:50.258160    5380 kuberuntime_container.go:866] "Killing container with a grace period" pod="default/busy" containerID={"Type":"containerd","ID":"db0b"} pods=["a/b","c/d"] gracePeriod=2"#).unwrap();
        let (msg, kv) = l.structured().unwrap();
        assert_eq!(msg, "Killing container with a grace period");
        assert_eq!(
            kv,
            vec![
                ("pod".into(), "default/busy".into()),
                (
                    "containerID".into(),
                    r#"{"Type":"containerd","ID":"db0b"}"#.into()
                ),
                ("pods".into(), r#"["a/b","c/d"]"#.into()),
                ("gracePeriod".into(), "2".into()),
            ]
        );
    }

    #[test]
    fn go_times_parse_with_zone_and_monotonic_suffix() {
        let t = parse_go_time("2026-11-22 02:04:51.521053398 +0000 UTC m=+21.202001230").unwrap();
        assert_eq!(t.to_string(), "2026-11-22T02:04:51.521053398Z");
        let t = parse_go_time("2018-09-22 20:04:08.711632504 +0800 CST").unwrap();
        assert_eq!(t.to_string(), "2018-09-22T12:04:08.711632504Z");
    }

    #[test]
    fn sync_failures_parse_from_brackets_and_escapes() {
        let f = parse_sync_failures(
            r#"error killing pod: [failed to "KillContainer" for "c" with KillContainerError: "rpc error: code = DeadlineExceeded desc = context deadline exceeded", failed to "KillPodSandbox" for "103ae535" with KillPodSandboxError: "x \"y\""]"#,
        );
        assert_eq!(f.len(), 2);
        assert_eq!(f[0].action, "KillContainer");
        assert_eq!(f[0].target, "c");
        assert_eq!(f[0].reason, "KillContainerError");
        assert!(f[0].message.contains("DeadlineExceeded"));
        assert_eq!(f[1].target, "103ae535");
        assert_eq!(f[1].message, "x \"y\"");
        assert!(f.iter().all(SyncFailure::is_kill));
    }

    #[test]
    fn busy_errors_in_three_spellings() {
        assert!(is_busy_error("unlinkat /x: device or resource busy"));
        assert!(is_busy_error("umount: /x: target is busy."));
        assert!(is_busy_error("umount: /x:目标忙。"));
        assert!(!is_busy_error("no such file or directory"));
    }
}
