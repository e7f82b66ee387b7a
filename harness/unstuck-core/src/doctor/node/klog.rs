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

/// Parses a Go time as the kubelet prints `time.Time` values:
/// `2026-11-22 02:04:51.521053398 +0000 UTC m=+21.202001230`.
pub fn parse_go_time(s: &str) -> Option<Timestamp> {
    let mut words = s.split_whitespace();
    let text = format!("{} {} {}", words.next()?, words.next()?, words.next()?);
    Timestamp::strptime("%Y-%m-%d %H:%M:%S%.f %z", &text).ok()
}

mod events;
mod record;

pub use events::{is_busy_error, parse_kubelet_log, parse_sync_failures};
pub use record::*;

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
