//! A pod's cgroups as the cgroup freezer shows them, and freezing or
//! thawing one: what the `freezeCgroup` fault and the node doctor's
//! `ThawCgroup` remedy share.
//!
//! Read by one shell script through [`Node::run`] (the host itself for the
//! local provider, `docker exec` for kind), so both providers read the
//! same files the same way: every freezer hierarchy the node mounts (the
//! v1 `freezer` controller and the unified cgroup2 one, both present on a
//! hybrid host), the pod's directory in it (`pod<uid>` with the cgroupfs
//! driver, `...-pod<uid_>.slice` with systemd), everything below it (its
//! containers) and every directory above it (shared with other pods).

use std::{path::Path, time::Duration};

use unstuck_core::doctor::node::{CgroupFact, CgroupVersion, FreezerState};

use super::{Node, NodeError};
use crate::exec::Cmd;

const FIELD: char = '\x1f';
const ITEM: char = '\x1e';

/// One record per cgroup: `v1|v2 FIELD path FIELD name=content ITEM ...
/// FIELD pid ITEM pid ...`. `$1` is `pod` and a pod UID, or `one`, a
/// version and a directory.
const SCRIPT: &str = r#"
emit() {
  v="$1"; d="$2"
  if [ "$v" = v1 ]; then files="freezer.state freezer.self_freezing freezer.parent_freezing"
  else files="cgroup.freeze cgroup.events"; fi
  out=""
  for f in $files; do
    [ -r "$d/$f" ] || continue
    c=$(tr '\n' ';' < "$d/$f" 2>/dev/null)
    out="$out$f=$c$(printf '\036')"
  done
  p=$(tr '\n' '\036' < "$d/cgroup.procs" 2>/dev/null)
  printf '%s\037%s\037%s\037%s\n' "$v" "$d" "$out" "$p"
}
if [ "$1" = one ]; then emit "$2" "$3"; exit 0; fi
u="$2"; us=$(printf '%s' "$u" | tr - _)
while read -r _ mnt type opts _; do
  case "$type" in
    cgroup) case ",$opts," in *,freezer,*) echo "v1 $mnt";; esac;;
    cgroup2) echo "v2 $mnt";;
  esac
done < /proc/self/mounts | sort -u | while read -r v mnt; do
  find "$mnt" -type d \( -name "*pod$u*" -o -name "*pod$us*" \) -print -prune 2>/dev/null |
  while read -r pod; do
    d="$pod"
    while :; do
      d=$(dirname "$d")
      case "$d" in "$mnt"|/) break;; esac
      emit "$v" "$d"
    done
    find "$pod" -type d 2>/dev/null | while read -r c; do emit "$v" "$c"; done
  done
done
"#;

fn script(args: &[&str]) -> Cmd {
    Cmd::new("sh")
        .arg("-c")
        .arg(SCRIPT)
        .arg("sh")
        .args(args.iter().copied())
        .timeout(Duration::from_secs(30))
}

/// Parses the script's records; one per path (a hierarchy mounted twice
/// shows its directories twice).
pub fn parse(text: &str) -> Vec<CgroupFact> {
    let mut out: Vec<CgroupFact> = Vec::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split(FIELD).collect();
        if f.len() < 4 {
            continue;
        }
        let version = match f[0] {
            "v1" => CgroupVersion::V1,
            "v2" => CgroupVersion::V2,
            _ => continue,
        };
        let files = f[2]
            .split(ITEM)
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| {
                let v = v.trim_end_matches(';').replace(';', "\n");
                (k.to_owned(), v.trim().to_owned())
            })
            .collect();
        let procs = f[3]
            .split(ITEM)
            .filter_map(|p| p.trim().parse().ok())
            .collect();
        if out.iter().any(|c| c.path == Path::new(f[1])) {
            continue;
        }
        out.push(CgroupFact {
            path: f[1].into(),
            version,
            files,
            procs,
        });
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

fn run_error(node: &dyn Node) -> impl FnOnce(crate::exec::RunError) -> NodeError {
    let name = node.name().to_owned();
    move |source| NodeError::Run { node: name, source }
}

/// Every cgroup of the pod with UID `uid` (its own, its containers') and
/// every one above it, in each freezer hierarchy of the node.
pub async fn pod_cgroups(node: &dyn Node, uid: &str) -> Result<Vec<CgroupFact>, NodeError> {
    let out = node
        .run(script(&["pod", uid]))
        .await
        .map_err(run_error(node))?;
    Ok(parse(&out))
}

/// One cgroup's freezer as it reads now.
pub async fn read_cgroup(
    node: &dyn Node,
    path: &Path,
    version: CgroupVersion,
) -> Result<CgroupFact, NodeError> {
    let v = match version {
        CgroupVersion::V1 => "v1",
        CgroupVersion::V2 => "v2",
    };
    let p = path.display().to_string();
    let out = node
        .run(script(&["one", v, &p]))
        .await
        .map_err(run_error(node))?;
    parse(&out)
        .into_iter()
        .next()
        .ok_or_else(|| NodeError::Failed {
            node: node.name().to_owned(),
            what: format!("reading the freezer of {p}: nothing read"),
        })
}

/// Freezes (`frozen`) or thaws one cgroup, then waits up to 10 s for its
/// freezer to say so (a freeze finishes once every task reached the
/// freezer). Returns the cgroup as last read.
pub async fn set_frozen(
    node: &dyn Node,
    path: &Path,
    version: CgroupVersion,
    frozen: bool,
) -> Result<CgroupFact, NodeError> {
    let file = path.join(version.control_file());
    node.write_file(&file, version.control_value(frozen))
        .await?;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let c = read_cgroup(node, path, version).await?;
        let done = if frozen {
            c.state() == FreezerState::Frozen
        } else {
            !c.is_frozen()
        };
        if done {
            return Ok(c);
        }
        if std::time::Instant::now() >= deadline {
            return Err(NodeError::Failed {
                node: node.name().to_owned(),
                what: format!(
                    "wrote {} to {}, but after 10 s it reads {}",
                    version.control_value(frozen),
                    file.display(),
                    c.quote()
                ),
            });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_parse_and_duplicates_go() {
        let text = "v1\x1f/sys/fs/cgroup/freezer/k/podu\x1ffreezer.state=FROZEN;\x1efreezer.self_freezing=1;\x1efreezer.parent_freezing=0;\x1e\x1f12\x1e\n\
                    v1\x1f/sys/fs/cgroup/freezer/k/podu\x1ffreezer.state=FROZEN;\x1e\x1f\n\
                    v2\x1f/sys/fs/cgroup/unified/k/podu\x1fcgroup.freeze=0;\x1ecgroup.events=populated 1;frozen 0;\x1e\x1f12\x1e13\x1e\n\
                    junk\n";
        let c = parse(text);
        assert_eq!(c.len(), 2, "{c:#?}");
        let v1 = &c[0];
        assert_eq!(v1.version, CgroupVersion::V1);
        assert_eq!(v1.files["freezer.state"], "FROZEN");
        assert!(v1.frozen_here());
        assert_eq!(v1.procs, [12]);
        let v2 = &c[1];
        assert_eq!(v2.files["cgroup.events"], "populated 1\nfrozen 0");
        assert!(!v2.is_frozen());
        assert_eq!(v2.procs, [12, 13]);
    }
}
