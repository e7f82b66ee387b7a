//! The README's first command for an SRE, `cargo install --path
//! harness/unstuck`, run as written with `--debug` (a release build would
//! add about ten minutes to CI), into a target directory of its own (the
//! tests' `target/debug/unstuck` must not be replaced under the tests that
//! run it; cargo alone decides whether the workspace's features differ)
//! and at the lowest CPU priority (the clusters of the tests beside it
//! come first). What it installs then does what the README says: `unstuck
//! --version`, `kubectl-unstuck --version`, and `unstuck doctor` on a real
//! local cluster. Needs cargo, root and ci/setup.sh's components; never
//! skipped.

use std::process::Command;

mod common;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cargo_install_puts_both_binaries_in_place_and_the_doctor_runs() {
    let root = common::Scratch::path("unstuck-install");
    let repo = common::repo_root();
    let target = repo.join("target/install");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let o = Command::new("nice")
        .args(["-n", "19"])
        .arg(&cargo)
        .args([
            "install",
            "--path",
            "harness/unstuck",
            "--locked",
            "--offline",
            "--debug",
        ])
        .arg("--root")
        .arg(&root)
        .arg("--target-dir")
        .arg(&target)
        .current_dir(&repo)
        .output()
        .expect("cargo runs");
    assert!(
        o.status.success(),
        "cargo install: {}",
        common::output_text(&o)
    );
    let bin = root.join("bin");
    for name in ["unstuck", "kubectl-unstuck"] {
        let o = Command::new(bin.join(name))
            .arg("--version")
            .output()
            .unwrap_or_else(|e| panic!("{name} installed in {}: {e}", bin.display()));
        let text = common::output_text(&o);
        assert!(
            o.status.success() && text.contains(env!("CARGO_PKG_VERSION")),
            "{name} --version: {text}"
        );
    }

    // `unstuck doctor` on the cluster the kubeconfig names: nothing stuck.
    let cluster = common::up(&common::cluster_name("it-install")).await;
    let o = Command::new(bin.join("unstuck"))
        .arg("doctor")
        .env("KUBECONFIG", cluster.kubeconfig())
        .output()
        .expect("the installed unstuck runs");
    let text = common::output_text(&o);
    assert!(o.status.success(), "{text}");
    assert!(text.contains("nothing stuck found"), "{text}");

    let layout = cluster.layout().clone();
    let report = cluster.down().await;
    assert!(report.errors.is_empty(), "{report}");
    assert!(unstuck::cluster::local::leftovers(&layout).is_empty());
}
