//! What the integration tests that bring up real local clusters share.

use unstuck::cluster::local::layout::validate_name;

/// The longest cluster name [`validate_name`] accepts.
const MAX_NAME_LEN: usize = 30;

/// A local cluster name unique to this test process: `base` followed by
/// the process id, so two `cargo test` runs on one machine never ask for
/// the same cluster. `base` is shortened if needed to stay a valid name.
pub fn cluster_name(base: &str) -> String {
    let suffix = format!("-{}", std::process::id());
    let keep = MAX_NAME_LEN.saturating_sub(suffix.len()).min(base.len());
    let name = format!("{}{suffix}", base[..keep].trim_end_matches('-'));
    if let Err(e) = validate_name(&name) {
        panic!("test cluster name from '{base}': {e}");
    }
    name
}

#[test]
fn cluster_names_are_valid_and_carry_the_process_id() {
    let pid = std::process::id().to_string();
    for base in ["it-scenarios", "it-fault-cleanup", "it-node-subpath"] {
        let name = cluster_name(base);
        assert_eq!(name, format!("{base}-{pid}"));
    }
    let long = cluster_name(&"a-".repeat(20));
    assert!(
        long.len() <= MAX_NAME_LEN && long.ends_with(&format!("-{pid}")),
        "{long}"
    );
}

/// An object from its JSON, for the objects tests create.
#[allow(dead_code)]
pub fn from_json<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> T {
    serde_json::from_value(v).expect("a valid object")
}
