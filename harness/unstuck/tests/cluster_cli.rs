//! `unstuck cluster up/status/list/down/gc` do the same for every
//! provider, through the provider interface: the same commands, the same
//! output, run here against a real local cluster and a real kind cluster
//! (from the offline node image; nothing is pulled). Each provider's
//! test makes two clusters: one kept (`up` without `--hold`), which `gc`
//! must leave alone and `down` removes, and one held by a harness that
//! is killed together with its reaper, which `list` must show stale and
//! `gc` must remove. Afterwards nothing of either is on the machine.
//! Needs root, the components (ci/setup.sh), Docker and the node image
//! (ci/kind/setup.sh); never skipped.

use std::{
    ffi::{OsStr, OsString},
    path::{Path, PathBuf},
    time::Duration,
};

use unstuck::{
    cluster::local::{self, Layout, state::state_root},
    host,
};

mod common;

/// A provider under test: its name on the command line and the
/// environment its commands run with.
struct Provider {
    name: &'static str,
    env: Vec<(&'static str, OsString)>,
}

impl Provider {
    fn env(&self) -> Vec<(&str, &OsStr)> {
        self.env.iter().map(|(k, v)| (*k, v.as_os_str())).collect()
    }

    /// `unstuck ARGS` with this provider's environment; stdout, or a
    /// panic showing the whole run when it fails.
    fn ok(&self, args: &[&str]) -> String {
        let o = common::unstuck_env(args, &self.env());
        assert!(
            o.status.success(),
            "unstuck {}: {}",
            args.join(" "),
            common::output_text(&o)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    /// `cluster list`'s row of cluster `name`: name, provider, version,
    /// detail, up/stale.
    fn row(&self, name: &str) -> Option<Vec<String>> {
        let list = self.ok(&["cluster", "list"]);
        assert!(
            list.starts_with("NAME\tPROVIDER\tVERSION\tDETAIL\tSTATE\n"),
            "a header first: {list}"
        );
        list.lines()
            .map(|l| l.split('\t').map(str::to_owned).collect::<Vec<_>>())
            .find(|f| f.first().map(String::as_str) == Some(name))
    }

    /// What is still on the machine of cluster `name` (with `slot`, for
    /// the local provider's links and ports).
    async fn leftovers(&self, name: &str, slot: Option<u8>) -> Vec<String> {
        match self.name {
            "local" => {
                let slot = slot.expect("a local cluster's slot");
                local::leftovers(&Layout::new(name, slot, &state_root()))
            }
            _ => common::kind_leftovers(name).await,
        }
    }
}

/// Deletes the test's clusters if a panic left them up (a passing test
/// has deleted them already; `down` of one that is gone only says so).
struct DownOnDrop<'a> {
    provider: &'a Provider,
    names: Vec<String>,
}

impl Drop for DownOnDrop<'_> {
    fn drop(&mut self) {
        for name in &self.names {
            let o = common::unstuck_env(
                &["cluster", "down", "--provider", self.provider.name, name],
                &self.provider.env(),
            );
            if o.status.success() {
                eprintln!(
                    "deleted {} cluster {name} left by a failure",
                    self.provider.name
                );
            }
        }
    }
}

/// The slot in a local cluster's `list` detail (`slot N`).
fn slot_of(row: &[String]) -> Option<u8> {
    row.get(3)?.strip_prefix("slot ")?.parse().ok()
}

/// The `__reap` process of the cluster whose record is `.../name`.
fn reaper_of(name: &str) -> host::Process {
    host::processes()
        .into_iter()
        .find(|p| {
            p.state != 'Z'
                && p.cmdline.iter().any(|a| a == "__reap")
                && p.cmdline
                    .last()
                    .is_some_and(|a| Path::new(a).file_name() == Some(OsStr::new(name)))
        })
        .unwrap_or_else(|| panic!("no reaper of {name}"))
}

fn sigkill(pid: i32) {
    host::signal(pid, libc::SIGKILL).unwrap_or_else(|e| panic!("SIGKILL {pid}: {e}"));
}

async fn the_cluster_commands_work_on(p: &Provider) {
    let kept = common::cluster_name(&format!("it-cli-{}", p.name));
    let held = common::cluster_name(&format!("it-cli-{}-held", p.name));
    let _cleanup = DownOnDrop {
        provider: p,
        names: vec![kept.clone(), held.clone()],
    };

    // `up` without --hold: the cluster outlives the command.
    let up = p.ok(&["cluster", "up", "--provider", p.name, &kept]);
    assert!(
        up.contains(&format!("{} cluster '{kept}' is up (Kubernetes ", p.name)),
        "{up}"
    );
    let kubeconfig: PathBuf = up
        .lines()
        .find_map(|l| l.trim().strip_prefix("export KUBECONFIG="))
        .unwrap_or_else(|| panic!("no kubeconfig in: {up}"))
        .into();
    // The kubeconfig `up` printed reaches the cluster, after `up` exited.
    let client = local::client_for(&kubeconfig).await.expect("a client");
    client
        .apiserver_version()
        .await
        .expect("the kept cluster answers after `up` exited");

    // `list` and `status` show it, the same way for every provider.
    let row = p.row(&kept).expect("the kept cluster is listed");
    assert_eq!(row[1], p.name, "{row:?}");
    assert_eq!(row.last().map(String::as_str), Some("up"), "{row:?}");
    let kept_slot = slot_of(&row);
    let status = p.ok(&["cluster", "status", &kept]);
    assert!(
        status.starts_with(&format!("{kept} ({}, ", p.name)) && !status.contains("STALE"),
        "{status}"
    );
    assert!(
        status.contains(&format!("kubeconfig: {}", kubeconfig.display())),
        "{status}"
    );
    assert!(status.contains("  node: "), "{status}");

    // A held cluster whose harness and reaper are both killed is stale.
    let (mut holder, lines) = common::spawn_unstuck(
        &["cluster", "up", "--provider", p.name, "--hold", &held],
        &p.env(),
    );
    common::wait_for_line(&lines, "is up", Duration::from_secs(400));
    let held_slot = slot_of(&p.row(&held).expect("the held cluster is listed"));
    sigkill(reaper_of(&held).pid);
    sigkill(holder.id() as i32);
    holder.wait().expect("the holder is reaped");
    let row = p
        .row(&held)
        .expect("a killed harness's cluster stays listed");
    assert_eq!(row.last().map(String::as_str), Some("stale"), "{row:?}");
    assert!(
        !p.leftovers(&held, held_slot).await.is_empty(),
        "the stale cluster is still there before gc"
    );

    // `gc` removes the stale one and leaves the kept one.
    let gc = p.ok(&["cluster", "gc"]);
    assert!(
        gc.contains(&format!("removed stale {} cluster '{held}'", p.name)),
        "{gc}"
    );
    assert!(!gc.contains(&format!("'{kept}'")), "{gc}");
    assert!(p.row(&held).is_none(), "gc removed {held} from the list");
    let left = p.leftovers(&held, held_slot).await;
    assert!(left.is_empty(), "gc left of {held}: {left:?}");
    assert_eq!(
        p.row(&kept).and_then(|r| r.last().cloned()).as_deref(),
        Some("up"),
        "gc leaves a kept cluster alone"
    );

    // `down` removes the kept one; `status` then no longer knows it.
    let down = p.ok(&["cluster", "down", "--provider", p.name, &kept]);
    assert!(
        down.contains(&format!("{} cluster '{kept}' is down", p.name)) && !down.contains("LEFT"),
        "{down}"
    );
    assert!(p.row(&kept).is_none(), "down removed {kept} from the list");
    let left = p.leftovers(&kept, kept_slot).await;
    assert!(left.is_empty(), "down left of {kept}: {left:?}");
    let gone = common::unstuck_env(&["cluster", "status", &kept], &p.env());
    assert!(!gone.status.success(), "{}", common::output_text(&gone));
}

/// A directory of this test process's own for `what`.
fn own_dir(what: &str) -> PathBuf {
    std::env::temp_dir().join(format!("unstuck-cli-{what}-{}", std::process::id()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cluster_commands_work_on_the_local_provider() {
    // `gc` looks at every provider: an empty kind record directory keeps
    // it off kind clusters other tests made. Local clusters stay in the
    // shared root, which hands out slots (ports, links) without clashes;
    // `gc` there removes only clusters whose harness died, as every
    // local `up` does first anyway.
    the_cluster_commands_work_on(&Provider {
        name: "local",
        env: vec![("UNSTUCK_KIND_STATE_DIR", own_dir("no-kind").into())],
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cluster_commands_work_on_the_kind_provider() {
    // Records of the test's own, and an empty local root: `gc` must only
    // ever see this test's clusters.
    let records = own_dir("kind");
    the_cluster_commands_work_on(&Provider {
        name: "kind",
        env: vec![
            ("UNSTUCK_KIND_STATE_DIR", records.clone().into()),
            ("UNSTUCK_STATE_DIR", own_dir("no-local").into()),
        ],
    })
    .await;
    let left: Vec<_> = std::fs::read_dir(&records)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "kind records left: {left:?}");
    std::fs::remove_dir_all(&records)
        .or_else(|e| match e.kind() {
            std::io::ErrorKind::NotFound => Ok(()),
            _ => Err(e),
        })
        .expect("removing the test's record directory");
}

/// Two `cluster up` started together (issue 30): each run's start-up
/// sweep must see the other's cluster, which has no apiserver yet while
/// it boots, as claimed by the live process creating it, not as stale.
/// Before the claim, the second `up` tore the first down mid-boot
/// (`etcd exited during start-up (signal: 15 (SIGTERM))`) five times out
/// of five. Both come up, both are listed up, both go down, and nothing
/// of either is left, its cgroups in every hierarchy included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_local_clusters_brought_up_at_once_both_come_up() {
    let p = Provider {
        name: "local",
        env: vec![("UNSTUCK_KIND_STATE_DIR", own_dir("no-kind-pair").into())],
    };
    let names = [
        common::cluster_name("it-pair-a"),
        common::cluster_name("it-pair-b"),
    ];
    let _cleanup = DownOnDrop {
        provider: &p,
        names: names.to_vec(),
    };
    let ups: Vec<_> = names
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let env: Vec<(String, OsString)> = p
                .env
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect();
            let name = name.clone();
            std::thread::spawn(move || {
                // 0.3 s apart: the second sweep runs while the first boots.
                std::thread::sleep(Duration::from_millis(300 * i as u64));
                let env: Vec<(&str, &OsStr)> = env
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.as_os_str()))
                    .collect();
                common::unstuck_env(&["cluster", "up", "--provider", "local", &name], &env)
            })
        })
        .collect();
    for (name, up) in names.iter().zip(ups) {
        let o = up.join().expect("the up thread");
        assert!(
            o.status.success(),
            "cluster up {name} beside another: {}",
            common::output_text(&o)
        );
        for other in names.iter().filter(|n| *n != name) {
            assert!(
                !common::output_text(&o).contains(&format!("removed stale cluster '{other}'")),
                "{name}'s up swept {other} while it started: {}",
                common::output_text(&o)
            );
        }
    }
    let mut slots = Vec::new();
    for name in &names {
        let row = p.row(name).expect("both clusters are listed");
        assert_eq!(row.last().map(String::as_str), Some("up"), "{row:?}");
        slots.push(slot_of(&row));
    }
    assert_ne!(slots[0], slots[1], "each cluster has its own slot");
    for (name, slot) in names.iter().zip(slots) {
        let down = p.ok(&["cluster", "down", "--provider", "local", name]);
        assert!(
            down.contains(&format!("local cluster '{name}' is down")) && !down.contains("LEFT"),
            "{down}"
        );
        let left = p.leftovers(name, slot).await;
        assert!(left.is_empty(), "down left of {name}: {left:?}");
    }
}
