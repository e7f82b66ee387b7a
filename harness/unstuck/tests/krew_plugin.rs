//! `kubectl unstuck` through krew: `ci/release/krew.sh` packages the test
//! build's `kubectl-unstuck` and writes the plugin manifest; the real krew
//! CLI (built offline by ci/release/krew-cli.sh) installs it from those
//! files into a krew root of the test's own, checking the archive's
//! sha256 against the manifest; kubectl (the one ci/setup.sh built) then
//! finds the plugin on PATH and runs it. Needs ci/setup.sh and
//! ci/release/krew-cli.sh; never skipped.

use std::{path::PathBuf, process::Command};

mod common;

const KREW_VERSION: &str = "v0.4.3";

fn krew() -> PathBuf {
    let krew = unstuck::components::cache_dir()
        .join("krew")
        .join(KREW_VERSION)
        .join("bin/krew");
    assert!(
        krew.is_file(),
        "{} is missing: run ci/release/krew-cli.sh (ci/test.sh does)",
        krew.display()
    );
    krew
}

#[test]
fn krew_installs_the_plugin_from_the_manifest_and_kubectl_runs_it() {
    let dir = common::Scratch::path("unstuck-krew");
    let out = dir.join("dist");
    let o = Command::new("bash")
        .arg(common::repo_root().join("ci/release/krew.sh"))
        .arg(&out)
        .arg("v0.1.0")
        .arg("https://example.invalid/releases/v0.1.0")
        .env("KUBECTL_UNSTUCK_BIN", env!("CARGO_BIN_EXE_kubectl-unstuck"))
        .output()
        .expect("bash runs");
    assert!(o.status.success(), "{}", common::output_text(&o));
    let manifest_path = out.join("unstuck.yaml");
    let archive = out.join("kubectl-unstuck-v0.1.0-linux-amd64.tar.gz");
    let manifest: serde_json::Value =
        serde_saphyr::from_str(&std::fs::read_to_string(&manifest_path).expect("the manifest"))
            .expect("the manifest is YAML");
    assert_eq!(manifest["kind"], "Plugin");
    assert_eq!(manifest["metadata"]["name"], "unstuck");
    let platform = &manifest["spec"]["platforms"][0];
    assert_eq!(
        platform["uri"],
        "https://example.invalid/releases/v0.1.0/kubectl-unstuck-v0.1.0-linux-amd64.tar.gz"
    );

    // krew checks the archive against the manifest's sha256 and its bin.
    let root = dir.join("krew-root");
    let install = |manifest: &std::path::Path| {
        Command::new(krew())
            .args(["install", "--manifest"])
            .arg(manifest)
            .arg("--archive")
            .arg(&archive)
            .env("KREW_ROOT", &root)
            .env("HOME", &dir)
            .output()
            .expect("krew runs")
    };
    // A manifest whose sha256 is not the archive's is refused by krew:
    // the sha256 the script writes is what makes the install pass below.
    let wrong = dir.join("wrong.yaml");
    let text = std::fs::read_to_string(&manifest_path).unwrap();
    let sha = platform["sha256"].as_str().expect("sha256").to_owned();
    std::fs::write(&wrong, text.replace(&sha, &"0".repeat(64))).unwrap();
    let o = install(&wrong);
    assert!(
        !o.status.success(),
        "krew took a wrong sha256: {}",
        common::output_text(&o)
    );
    let o = install(&manifest_path);
    assert!(
        o.status.success(),
        "krew install: {}",
        common::output_text(&o)
    );
    let plugin = root.join("bin/kubectl-unstuck");
    assert!(plugin.exists(), "{} not made by krew", plugin.display());

    // kubectl finds it on PATH and passes its arguments through.
    let kubectl = unstuck::components::locate(unstuck::components::DEFAULT_K8S_VERSION)
        .expect("ci/setup.sh's components")
        .kubectl();
    let path = format!(
        "{}:{}",
        root.join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let o = Command::new(&kubectl)
        .args(["unstuck", "--version"])
        .env("PATH", &path)
        .output()
        .expect("kubectl runs");
    let text = common::output_text(&o);
    assert!(o.status.success(), "{text}");
    assert!(text.contains(env!("CARGO_PKG_VERSION")), "{text}");
    let o = Command::new(&kubectl)
        .args(["plugin", "list"])
        .env("PATH", &path)
        .output()
        .expect("kubectl runs");
    assert!(
        common::output_text(&o).contains("kubectl-unstuck"),
        "{}",
        common::output_text(&o)
    );
}
