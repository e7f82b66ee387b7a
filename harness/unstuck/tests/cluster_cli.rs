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
    let client = unstuck::cluster::client::client_for(&kubeconfig)
        .await
        .expect("a client");
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
    let gc = {
        let _sweeps = common::sweep_lock();
        p.ok(&["cluster", "gc"])
    };
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

/// A directory of this test process's own for `what` (the commands make
/// it), removed when the guard goes, even when the test panics.
fn own_dir(what: &str) -> common::Scratch {
    common::Scratch::path(&format!("unstuck-cli-{what}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cluster_commands_work_on_the_local_provider() {
    // `gc` looks at every provider: an empty kind record directory keeps
    // it off kind clusters other tests made. Local clusters stay in the
    // shared root, which hands out slots (ports, links) without clashes;
    // `gc` there removes only clusters whose harness died, as every
    // local `up` does first anyway.
    let no_kind = own_dir("no-kind");
    the_cluster_commands_work_on(&Provider {
        name: "local",
        env: vec![("UNSTUCK_KIND_STATE_DIR", no_kind.as_os_str().into())],
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cluster_commands_work_on_the_kind_provider() {
    // Records of the test's own, and an empty local root: `gc` must only
    // ever see this test's clusters.
    let (records, no_local) = (own_dir("kind"), own_dir("no-local"));
    the_cluster_commands_work_on(&Provider {
        name: "kind",
        env: vec![
            ("UNSTUCK_KIND_STATE_DIR", records.as_os_str().into()),
            ("UNSTUCK_STATE_DIR", no_local.as_os_str().into()),
        ],
    })
    .await;
    let left: Vec<_> = std::fs::read_dir(&records)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "kind records left: {left:?}");
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
    let no_kind = own_dir("no-kind-pair");
    let p = Provider {
        name: "local",
        env: vec![("UNSTUCK_KIND_STATE_DIR", no_kind.as_os_str().into())],
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

/// One of the four clusters of the test below: its provider, its name,
/// and what `up` said of it.
struct Made<'a> {
    provider: &'a Provider,
    name: String,
    kubeconfig: PathBuf,
    /// A local cluster's slot (its links and ports are named by it).
    slot: Option<u8>,
    /// A kind cluster's node container and network, by engine ID, and
    /// the node's volumes (from its record).
    engine: Option<KindEngine>,
}

#[derive(Debug, PartialEq)]
struct KindEngine {
    container_id: String,
    network_id: String,
    volumes: Vec<String>,
}

/// What the engine itself (`docker ps`, `docker network ls` by label and
/// by name) holds under cluster `name`'s label and network name.
fn engine_view(name: &str) -> (Vec<String>, bool) {
    let labelled = common::labelled(unstuck::cluster::kind::CLUSTER_LABEL, name);
    let network = unstuck::cluster::kind::network_name(name);
    let networks = common::docker(&[
        "network",
        "ls",
        "--filter",
        &format!("name=^{network}$"),
        "--format",
        "{{.Name}}",
    ]);
    (labelled, networks.lines().any(|n| n == network))
}

/// The engine IDs of kind cluster `name`'s node container and network,
/// and its volumes as its record (in `records`) names them.
fn kind_engine(name: &str, records: &Path) -> KindEngine {
    use unstuck::cluster::kind::{KindState, network_name, node_container};
    let node = node_container(name);
    let inspect = |what: &str, format: &str, of: &str| {
        common::docker(&[what, "inspect", "--format", format, of])
            .trim()
            .to_string()
    };
    let state = KindState::load(&records.join(name))
        .expect("the kind record reads")
        .unwrap_or_else(|| panic!("no record of kind cluster {name}"));
    KindEngine {
        container_id: inspect("container", "{{.Id}}", &node),
        network_id: inspect("network", "{{.Id}}", &network_name(name)),
        volumes: state.volumes,
    }
}

/// The engine's volume names.
fn engine_volumes() -> Vec<String> {
    common::docker(&["volume", "ls", "--format", "{{.Name}}"])
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Four `cluster up` started within a second (issue 30), two local and
/// two kind: all four come up; `cluster list` lists each with its own
/// provider; the engine holds exactly one node container and one network
/// for each kind cluster (the node on its own network only) and nothing
/// for the local ones. Then each goes down in turn: nothing of it is
/// left (processes, mounts, links, cgroups, directory; containers,
/// network, volumes, record), and every other one still answers, the
/// kind ones with the very same container and network.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_clusters_of_two_providers_brought_up_at_once_keep_to_their_own() {
    // kind records of the test's own, so that `list` shows exactly its
    // kind clusters; local clusters share the root (it hands out slots).
    let records = own_dir("kind-four");
    let env = vec![("UNSTUCK_KIND_STATE_DIR", records.as_os_str().to_owned())];
    let local = Provider {
        name: "local",
        env: env.clone(),
    };
    let kind = Provider { name: "kind", env };
    let plan: Vec<(&Provider, String)> = vec![
        (&local, common::cluster_name("it-four-local-a")),
        (&kind, common::cluster_name("it-four-kind-a")),
        (&local, common::cluster_name("it-four-local-b")),
        (&kind, common::cluster_name("it-four-kind-b")),
    ];
    let _cleanup = [&local, &kind].map(|p| DownOnDrop {
        provider: p,
        names: plan
            .iter()
            .filter(|(q, _)| q.name == p.name)
            .map(|(_, n)| n.clone())
            .collect(),
    });

    let started = std::time::Instant::now();
    let ups: Vec<_> = plan
        .iter()
        .enumerate()
        .map(|(i, (p, name))| {
            let env: Vec<(String, OsString)> = p
                .env
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect();
            let (provider, name) = (p.name, name.clone());
            std::thread::spawn(move || {
                // 0.25 s apart, all four within a second: each start-up
                // sweep runs while the ones before it boot.
                std::thread::sleep(Duration::from_millis(250 * i as u64));
                let env: Vec<(&str, &OsStr)> = env
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.as_os_str()))
                    .collect();
                let args = [
                    "cluster",
                    "up",
                    "--provider",
                    provider,
                    "--timeout",
                    "600",
                    &name,
                ];
                common::unstuck_env(&args, &env)
            })
        })
        .collect();
    let mut made = Vec::new();
    for ((p, name), up) in plan.iter().zip(ups) {
        let o = up.join().expect("the up thread");
        let text = common::output_text(&o);
        assert!(o.status.success(), "cluster up {name} beside three: {text}");
        for (_, other) in plan.iter().filter(|(_, n)| n != name) {
            assert!(
                !text.contains(&format!("'{other}'")),
                "{name}'s up touched {other}: {text}"
            );
        }
        let stdout = String::from_utf8_lossy(&o.stdout);
        assert!(
            stdout.contains(&format!("{} cluster '{name}' is up", p.name)),
            "{stdout}"
        );
        let kubeconfig: PathBuf = stdout
            .lines()
            .find_map(|l| l.trim().strip_prefix("export KUBECONFIG="))
            .unwrap_or_else(|| panic!("no kubeconfig in: {stdout}"))
            .into();
        made.push(Made {
            provider: p,
            name: name.clone(),
            kubeconfig,
            slot: None,
            engine: None,
        });
    }
    eprintln!(
        "four clusters up in {:.0} s",
        started.elapsed().as_secs_f64()
    );

    // `cluster list`: each once, under its own provider, up; and no kind
    // cluster but the test's two in its records.
    let list = local.ok(&["cluster", "list"]);
    eprintln!("{list}");
    for m in &mut made {
        let rows: Vec<&str> = list
            .lines()
            .filter(|l| l.split('\t').next() == Some(m.name.as_str()))
            .collect();
        assert_eq!(rows.len(), 1, "{} listed once: {list}", m.name);
        let row: Vec<String> = rows[0].split('\t').map(str::to_owned).collect();
        assert_eq!(row[1], m.provider.name, "{row:?}");
        assert_eq!(row.last().map(String::as_str), Some("up"), "{row:?}");
        m.slot = slot_of(&row);
    }
    let kind_listed: Vec<&str> = list
        .lines()
        .filter(|l| l.split('\t').nth(1) == Some("kind"))
        .filter_map(|l| l.split('\t').next())
        .collect();
    let mut kind_made: Vec<&str> = made
        .iter()
        .filter(|m| m.provider.name == "kind")
        .map(|m| m.name.as_str())
        .collect();
    kind_made.sort_unstable();
    let mut kind_listed_sorted = kind_listed.clone();
    kind_listed_sorted.sort_unstable();
    assert_eq!(kind_listed_sorted, kind_made, "{list}");
    let local_slots: Vec<_> = made.iter().filter_map(|m| m.slot).collect();
    assert_eq!(local_slots.len(), 2, "both local clusters have a slot");
    assert_ne!(local_slots[0], local_slots[1], "each its own slot");

    // The engine, asked directly: a kind cluster's node and network, the
    // node on that network alone; nothing under a local cluster's name.
    let volumes = engine_volumes();
    for m in &mut made {
        let (labelled, has_network) = engine_view(&m.name);
        if m.provider.name == "kind" {
            let node = unstuck::cluster::kind::node_container(&m.name);
            assert_eq!(labelled, vec![format!("container {node}")], "{}", m.name);
            assert!(has_network, "kind cluster {} has its network", m.name);
            let attached = common::docker(&[
                "container",
                "inspect",
                "--format",
                "{{range $k, $v := .NetworkSettings.Networks}}{{$k}} {{end}}",
                &node,
            ]);
            assert_eq!(
                attached.trim(),
                unstuck::cluster::kind::network_name(&m.name),
                "{node} is on its own network only"
            );
            let engine = kind_engine(&m.name, &records);
            assert!(!engine.volumes.is_empty(), "{engine:?}");
            for v in &engine.volumes {
                assert!(volumes.contains(v), "volume {v} of {} exists", m.name);
            }
            eprintln!("kind cluster {}: {engine:?}", m.name);
            m.engine = Some(engine);
        } else {
            assert!(
                labelled.is_empty() && !has_network,
                "the engine holds something of local cluster {}: {labelled:?}",
                m.name
            );
        }
    }

    // Down one at a time: nothing of it is left, the others untouched.
    for i in 0..made.len() {
        let m = &made[i];
        let down = m
            .provider
            .ok(&["cluster", "down", "--provider", m.provider.name, &m.name]);
        assert!(
            down.contains(&format!("{} cluster '{}' is down", m.provider.name, m.name))
                && !down.contains("LEFT"),
            "{down}"
        );
        let mut left = m.provider.leftovers(&m.name, m.slot).await;
        if let Some(engine) = &m.engine {
            let volumes = engine_volumes();
            left.extend(
                engine
                    .volumes
                    .iter()
                    .filter(|v| volumes.contains(v))
                    .map(|v| format!("volume {v}")),
            );
            if records.join(&m.name).exists() {
                left.push(format!("record {}", records.join(&m.name).display()));
            }
        }
        let (labelled, has_network) = engine_view(&m.name);
        assert!(
            left.is_empty() && labelled.is_empty() && !has_network,
            "down left of {}: {left:?} {labelled:?} network: {has_network}",
            m.name
        );
        assert!(local.row(&m.name).is_none(), "{} still listed", m.name);
        for other in &made[i + 1..] {
            let row = other.provider.row(&other.name);
            assert_eq!(
                row.as_ref().and_then(|r| r.last()).map(String::as_str),
                Some("up"),
                "{} is no longer up after {} went down: {row:?}",
                other.name,
                m.name
            );
            let client = unstuck::cluster::client::client_for(&other.kubeconfig)
                .await
                .expect("a client");
            client.apiserver_version().await.unwrap_or_else(|e| {
                panic!(
                    "{} stopped answering after {} went down: {e}",
                    other.name, m.name
                )
            });
            if let Some(before) = &other.engine {
                assert_eq!(
                    &kind_engine(&other.name, &records),
                    before,
                    "{}'s container or network changed when {} went down",
                    other.name,
                    m.name
                );
            }
        }
    }
    let left: Vec<_> = std::fs::read_dir(&records)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "kind records left: {left:?}");
}
