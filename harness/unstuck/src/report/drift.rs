//! What a scenario observed, with the parts that change from run to run
//! taken out, so that two Kubernetes versions can be compared: per-run
//! names (`app-6effil`, `kialis.kiali-kvix5d.io`, `run-nkmq08-11-node`),
//! UIDs, container IDs, process IDs, timestamps and durations. What is
//! left is what a version says: condition reasons and messages, kubelet
//! errors, events.

/// `line` with run-specific parts replaced by placeholders. `run_ids` are
/// the run's per-scenario suffixes (the part after the last '-' of its
/// namespaces, e.g. `6effil`).
pub fn normalize(line: &str, run_ids: &[String]) -> String {
    let mut s = line.to_string();
    for id in run_ids.iter().filter(|id| !id.is_empty()) {
        s = s.replace(&format!("-{id}"), "-RUN");
    }
    let s = replace_uids(&s);
    let mut out = String::with_capacity(s.len());
    let mut token = String::new();
    for c in s.chars() {
        if c.is_ascii_alphanumeric() || matches!(c, '-' | ':' | '.' | '_') {
            token.push(c);
        } else {
            out.push_str(&scrub(&token));
            token.clear();
            out.push(c);
        }
    }
    out.push_str(&scrub(&token));
    // klog pads the pid to a width, so pids of other lengths change the
    // spacing only.
    out.split(' ')
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Every UID-shaped run of characters, also inside a longer token
/// (`kubernetes.io/empty-dir/<uid>-data`), as `<uid>`.
fn replace_uids(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        if s.is_char_boundary(i)
            && s.len() - i >= 36
            && s.is_char_boundary(i + 36)
            && is_uid(&s[i..i + 36])
        {
            out.push_str("<uid>");
            i += 36;
        } else {
            let c = s[i..].chars().next().expect("in bounds");
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

/// One token with its run-specific value replaced.
fn scrub(token: &str) -> String {
    let t = token.trim_end_matches(['.', ':']);
    let tail = &token[t.len()..];
    // A klog header's severity and date (`E1123`), and its source line
    // (`pod_workers.go:1324`): code moves between versions, messages less.
    if t.len() == 5
        && matches!(t.as_bytes()[0], b'I' | b'W' | b'E' | b'F')
        && t[1..].bytes().all(|b| b.is_ascii_digit())
    {
        return format!("{}<date>{tail}", &t[..1]);
    }
    if let Some((file, line)) = t.rsplit_once(':')
        && file.ends_with(".go")
        && !line.is_empty()
        && line.bytes().all(|b| b.is_ascii_digit())
    {
        return format!("{file}{tail}");
    }
    if is_timestamp(t) {
        return format!("<time>{tail}");
    }
    if t.contains('.')
        && t.split('.').count() == 2
        && t.split('.')
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
    {
        return format!("<n>{tail}");
    }
    if t.contains(['-', '.']) {
        let parts: Vec<String> = t
            .split_inclusive(['-', '.'])
            .map(|seg| {
                let sep = seg.ends_with(['-', '.']);
                let body = if sep { &seg[..seg.len() - 1] } else { seg };
                let end = if sep { &seg[seg.len() - 1..] } else { "" };
                if is_generated(body) {
                    format!("<hash>{end}")
                } else if body.len() >= 9 && body.bytes().all(|b| b.is_ascii_digit()) {
                    format!("<n>{end}")
                } else {
                    seg.to_string()
                }
            })
            .collect();
        let joined = parts.concat();
        if joined != t {
            return format!("{joined}{tail}");
        }
    }
    let replaced = if t.is_empty() {
        None
    } else if is_uid(t) {
        Some("<uid>")
    } else if t.len() >= 12 && t.bytes().all(|b| b.is_ascii_hexdigit()) {
        Some("<id>")
    } else if is_timestamp(t) {
        Some("<time>")
    } else if is_duration(t) {
        Some("<dur>")
    } else if t.bytes().all(|b| b.is_ascii_digit()) && t.len() >= 3 {
        Some("<n>")
    } else if let Some(rest) = t.strip_prefix("run-") {
        // A local cluster's name or its node's: run-<id>[-<n>][-node].
        (rest.len() >= 6).then_some("<cluster>")
    } else {
        None
    };
    match replaced {
        Some(r) => format!("{r}{tail}"),
        None => token.to_string(),
    }
}

/// A generated name part: a `generateName` suffix (5 characters of
/// Kubernetes' random alphabet: no vowels, no y, no 0, 1 or 3) or a
/// ReplicaSet's pod-template-hash (longer, with a digit), so that plain
/// words stay.
fn is_generated(seg: &str) -> bool {
    seg.bytes()
        .all(|b| b"bcdfghjklmnpqrstvwxz2456789".contains(&b))
        && (seg.len() == 5
            || (6..=10).contains(&seg.len()) && seg.bytes().any(|b| b.is_ascii_digit()))
}

fn is_uid(t: &str) -> bool {
    let parts: Vec<&str> = t.split('-').collect();
    parts.len() == 5
        && parts.iter().map(|p| p.len()).eq([8, 4, 4, 4, 12])
        && parts
            .iter()
            .all(|p| p.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// `2026-11-23T21:00:15Z`, `21:01:15.849800`, `2026-11-24`.
fn is_timestamp(t: &str) -> bool {
    let digits = t.bytes().filter(u8::is_ascii_digit).count();
    digits >= 6
        && t.bytes()
            .all(|b| b.is_ascii_digit() || matches!(b, b'-' | b':' | b'.' | b'T' | b'Z'))
        && (t.contains(':') || t.matches('-').count() == 2)
}

/// `64s`, `1m4s`, `3.2s`, `500ms`.
fn is_duration(t: &str) -> bool {
    let units = t.trim_start_matches(|c: char| c.is_ascii_digit() || c == '.');
    !t.is_empty()
        && t.as_bytes()[0].is_ascii_digit()
        && (matches!(units, "s" | "ms" | "m" | "h")
            || t.bytes()
                .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'h' | b'm' | b's'))
                && t.ends_with('s'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids() -> Vec<String> {
        vec!["ckc8kk".into(), "kvix5d".into()]
    }

    #[test]
    fn run_specific_parts_go() {
        // Recorded on v1.34.4 (broken-runtime-container, node-lost, uninstalled-crd-controller).
        let a = normalize(
            r#"kubelet log: E1123 21:01:15.849800   11514 pod_workers.go:1324] "Error syncing pod, skipping" err="[failed to \"KillContainer\" for \"app\" with KillContainerError: \"rpc error: code = DeadlineExceeded desc = context deadline exceeded\"]" pod="app-ckc8kk/web" podUID="1543272d-8aa8-40c3-8123-58fc1758400a""#,
            &ids(),
        );
        assert_eq!(
            a,
            r#"kubelet log: E<date> <time> <n> pod_workers.go] "Error syncing pod, skipping" err="[failed to \"KillContainer\" for \"app\" with KillContainerError: \"rpc error: code = DeadlineExceeded desc = context deadline exceeded\"]" pod="app-RUN/web" podUID="<uid>""#
        );
        let b = normalize(
            r#"Node run-nkmq08-11-node: Ready=Unknown (NodeStatusUnknown): "Kubelet stopped posting node status.""#,
            &ids(),
        );
        assert_eq!(
            b,
            r#"Node <cluster>: Ready=Unknown (NodeStatusUnknown): "Kubelet stopped posting node status.""#
        );
        let c = normalize(
            r#"Namespace istio-kvix5d: NamespaceFinalizersRemaining=True (SomeFinalizersRemain): "Some content in the namespace has finalizers remaining: kiali-kvix5d.io/finalizer in 1 resource instances""#,
            &ids(),
        );
        assert_eq!(
            c,
            r#"Namespace istio-RUN: NamespaceFinalizersRemaining=True (SomeFinalizersRemain): "Some content in the namespace has finalizers remaining: kiali-RUN.io/finalizer in 1 resource instances""#
        );
        let d = normalize(
            "Pod app-ckc8kk/web has deletionTimestamp 2026-11-23T21:00:15Z and finalizers []",
            &ids(),
        );
        assert_eq!(
            d,
            "Pod app-RUN/web has deletionTimestamp <time> and finalizers []"
        );
        let e = normalize(
            "pod app-ckc8kk/web is 1m4s past its grace period, shim pid 12207 (-id 69875bf0abedcabff9e863232c48e604bd01068b9c8511a4bff6fa38dab0c131)",
            &ids(),
        );
        assert_eq!(
            e,
            "pod app-RUN/web is <dur> past its grace period, shim pid <n> (-id <id>)"
        );
    }

    #[test]
    fn generated_names_and_file_stamps_go() {
        // Recorded on v1.37.2 and v1.33.13: the same pod, named from a
        // different pod-template-hash.
        let a = normalize(
            "OrphanFinalizer: Pod app-RUN/web-54577bb7b-d2q2j has been terminating for 3s",
            &[],
        );
        let b = normalize(
            "OrphanFinalizer: Pod app-RUN/web-c654bb475-pshvv has been terminating for 4s",
            &[],
        );
        assert_eq!(a, b);
        assert_eq!(
            a,
            "OrphanFinalizer: Pod app-RUN/web-<hash>-<hash> has been terminating for <dur>"
        );
        let c = normalize(
            "manifest saved to /tmp/x/backups/validatingwebhookconfiguration.policy-guard-RUN.1795482811810.json",
            &[],
        );
        assert!(c.ends_with("policy-guard-RUN.<n>.json"), "{c}");
        // Words are not hashes.
        let d = "Deployment app-RUN/beacon-controller has 1/1 replicas ready";
        assert_eq!(normalize(d, &[]), d);
    }

    #[test]
    fn uids_inside_names_times_and_decimals_go() {
        let a = normalize(
            r#"volume "kubernetes.io/empty-dir/0c75b10b-55f2-4541-b29b-d3d950c0e196-data" until 2026-11-24 01:08:14.301949248 +0000 UTC m=+8.123456"#,
            &[],
        );
        assert_eq!(
            a,
            r#"volume "kubernetes.io/empty-dir/<uid>-data" until <time> <time> +<n> UTC m=+<n>"#
        );
    }

    #[test]
    fn what_a_version_says_stays() {
        let s = r#"Event Warning Pod/web: FailedKillPod "error killing pod: KillPodSandboxError""#;
        assert_eq!(normalize(s, &ids()), s);
    }
}
