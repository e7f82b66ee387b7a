//! A pod whose process no kill can end: it writes to a filesystem that is
//! frozen (FIFREEZE, what `fsfreeze -f` and snapshot tools do), so it
//! sleeps uninterruptibly in the kernel and SIGKILL waits for a thaw. The
//! runtime is healthy; restarting it would change nothing. The node doctor
//! must say so (cause `KernelStall`, the wait and the frozen mount quoted)
//! and plan no runtime remedy. Afterwards the test thaws the filesystem
//! and checks the kubelet finishes the pod by itself.
//!
//! The filesystem is an ext4 image on a loop device of the test's own,
//! mounted on the host and given to the pod as a hostPath volume; every
//! path (panic included) thaws, unmounts and detaches it.

use std::{
    path::{Path, PathBuf},
    process::Command,
    time::{Duration, Instant},
};

use k8s_openapi::api::core::v1::Pod;
use kube::{
    Api,
    api::{DeleteParams, PostParams},
};
use unstuck::{
    cluster::local::{self, LocalNode},
    doctor::node::gather,
    node::Node,
    wait::{self, Poll},
};
use unstuck_core::doctor::node::{
    DiagnoseNodeOptions, KernelWait, NodeCause, NodeRemedy, diagnose_pod, plan_node,
};

mod common;

/// An ext4 filesystem on a loop device, mounted at `mount`; frozen on
/// demand. Dropping it thaws, unmounts, detaches and removes it (its
/// directory is a [`common::Scratch`], dropped after the unmount, and
/// removed by itself when making the filesystem panics half-way).
struct LoopFs {
    _dir: common::Scratch,
    mount: PathBuf,
    device: String,
}

fn sh(program: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| format!("{program}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    } else {
        Err(format!(
            "{program} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl LoopFs {
    fn create(name: &str) -> LoopFs {
        let dir = common::Scratch::dir(name);
        let image = dir.join("fs.img");
        let mount = dir.join("mnt");
        std::fs::create_dir_all(&mount).unwrap();
        std::fs::File::create(&image)
            .unwrap()
            .set_len(16 << 20)
            .unwrap();
        let image_s = image.to_str().unwrap();
        sh("mkfs.ext4", &["-q", "-F", image_s]).expect("mkfs.ext4 (e2fsprogs, from ci/setup.sh)");
        let device = sh("losetup", &["--find", "--show", image_s]).expect("losetup");
        let fs = LoopFs {
            _dir: dir,
            mount,
            device,
        };
        sh("mount", &[&fs.device, fs.mount.to_str().unwrap()]).expect("mount");
        fs
    }

    fn freeze(&self) {
        sh("fsfreeze", &["--freeze", self.mount.to_str().unwrap()]).expect("fsfreeze --freeze");
    }

    fn thaw(&self) -> Result<String, String> {
        sh("fsfreeze", &["--unfreeze", self.mount.to_str().unwrap()])
    }
}

impl Drop for LoopFs {
    fn drop(&mut self) {
        // Thawing a filesystem that is not frozen fails harmlessly (EINVAL).
        let _ = self.thaw();
        let m = self.mount.to_str().unwrap();
        if sh("umount", &[m]).is_err() {
            let _ = sh("umount", &["-l", m]);
        }
        let _ = sh("losetup", &["-d", &self.device]);
        // `_dir` goes next, as the fields drop.
    }
}

fn loop_device_attached(device: &str) -> bool {
    sh("losetup", &["--list", "--noheadings", "--output", "NAME"])
        .map(|out| out.lines().any(|l| l.trim() == device))
        .unwrap_or(false)
}

fn is_mounted(path: &Path) -> bool {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .any(|l| l.split(' ').nth(4) == path.to_str())
}

#[tokio::test(flavor = "current_thread")]
async fn a_write_to_a_frozen_filesystem_is_a_kernel_stall_not_a_runtime_fault() {
    let fs = LoopFs::create("unstuck-it-frozen");
    let cluster = common::up(&common::cluster_name("it-kernel-stall")).await;
    let client = cluster.client();
    let node = LocalNode::of(&cluster);

    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pod: Pod = common::from_json(serde_json::json!({
        "metadata": {"name": "writer"},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "c", "image": local::config::TEST_IMAGE, "imagePullPolicy": "Never",
                            "command": ["sh", "-c", "while :; do echo x >> /data/log; sleep 0.2; done"],
                            "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
            "volumes": [{"name": "data", "hostPath": {"path": fs.mount.to_str().unwrap(), "type": "Directory"}}]
        }
    }));
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let log = fs.mount.join("log");
    wait::until(
        "the pod to write to the loop filesystem",
        Duration::from_secs(180),
        Duration::from_millis(500),
        || {
            let log = log.clone();
            async move {
                match std::fs::metadata(&log) {
                    Ok(m) if m.len() > 0 => Poll::Ready(()),
                    other => Poll::Pending(format!("{other:?}")),
                }
            }
        },
    )
    .await
    .unwrap();
    let uid = pods
        .get("writer")
        .await
        .unwrap()
        .metadata
        .uid
        .unwrap_or_default();

    fs.freeze();
    // The writer blocks on its next write, within a fraction of a second.
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let procs = node.pod_processes(&uid).await.unwrap();
        if procs.iter().any(|p| p.state == 'D') {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no process of the pod went into D after the freeze: {procs:#?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    pods.delete("writer", &DeleteParams::default())
        .await
        .unwrap();

    // Grace 1 s + the doctor's 10 s threshold; give a loaded machine minutes.
    let opts = DiagnoseNodeOptions::default();
    let deadline = Instant::now() + Duration::from_secs(240);
    let (facts, finding) = loop {
        let facts = gather(&client, &node, "default", "writer", 16 << 20)
            .await
            .unwrap()
            .expect("the pod stays while its process is stuck");
        let finding = diagnose_pod(&facts, &opts);
        if finding.stuck && finding.causes.contains(&NodeCause::KernelStall) {
            break (facts, finding);
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for KernelStall; last finding: {finding:#?}"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    };

    // The verdict: the kernel holds the writer, on the frozen ext4 mount.
    let (task, wait) = &finding.kernel_stalls[0];
    assert_eq!(*wait, KernelWait::FrozenFilesystem, "{finding:#?}");
    assert_eq!(task.state, 'D');
    let mount = task.mount.as_ref().expect("the blocked call's mount");
    assert_eq!(mount.fs_type, "ext4", "{task:#?}");
    assert_eq!(mount.source, fs.device, "{task:#?}");
    assert_eq!(
        task.path.as_deref(),
        Some(Path::new("/data/log")),
        "the path read from the blocked call: {task:#?}"
    );
    assert!(
        !finding.causes.contains(&NodeCause::WedgedRuntime),
        "a healthy runtime blamed: {finding:#?}"
    );
    assert!(
        finding.summary.contains("frozen") && finding.summary.contains("no kill can end it"),
        "{}",
        finding.summary
    );
    assert!(
        finding
            .evidence
            .iter()
            .any(|e| e.starts_with("kernel: pid") && e.contains("/data/log")),
        "{:#?}",
        finding.evidence
    );
    // The plan restarts nothing: only the permission-only force delete.
    let plan = plan_node(&finding);
    assert!(
        plan.iter().all(|s| !matches!(
            s.remedy,
            NodeRemedy::RestartRuntime | NodeRemedy::KillShim { .. }
        )),
        "{plan:#?}"
    );
    assert!(plan.iter().all(|s| s.force), "{plan:#?}");
    if let Some(dir) = std::env::var_os("UNSTUCK_RECORD_NODE_FIXTURES") {
        let dir = PathBuf::from(dir).join("frozen-filesystem");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("facts.json"),
            serde_json::to_string_pretty(&facts).unwrap(),
        )
        .unwrap();
    }

    // Thawed, the pending SIGKILL ends the writer and the kubelet finishes.
    fs.thaw().expect("thaw");
    // The pod is gone after the thaw.
    common::wait_gone(
        &pods,
        "writer",
        Duration::from_secs(300),
        Duration::from_secs(1),
    )
    .await
    .unwrap();

    let layout = cluster.layout().clone();
    let report = cluster.down().await;
    assert!(report.errors.is_empty(), "teardown problems: {report}");
    assert!(
        local::leftovers(&layout).is_empty(),
        "{:#?}",
        local::leftovers(&layout)
    );
    let (device, mount) = (fs.device.clone(), fs.mount.clone());
    drop(fs);
    assert!(!is_mounted(&mount), "{} still mounted", mount.display());
    assert!(!loop_device_attached(&device), "{device} still attached");
}
