//! Records the commit the binary is built from, for `unstuck --version`.
//! Never fails a build: outside a git checkout (a source tarball, a
//! `cargo install` from the registry, a checkout git refuses to read) the
//! commit is "unknown".

use std::{path::Path, process::Command};

fn main() {
    let commit = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty() && s.chars().all(|c| c.is_ascii_hexdigit()))
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=UNSTUCK_COMMIT={commit}");
    // Rebuilt when HEAD moves (a commit, a checkout), when there is a .git.
    for p in ["../../.git/HEAD", "../../.git/refs/heads"] {
        if Path::new(p).exists() {
            println!("cargo:rerun-if-changed={p}");
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
}
