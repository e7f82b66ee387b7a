//! The faults a scenario can name, as data: the one place the scenario
//! format learns a fault's name, whether it touches a node, and what it
//! takes besides its pod.
//!
//! The injectors live in the harness crate (`unstuck::faults`), which this
//! crate cannot see; its table is checked against this one by a unit test
//! there (`table_matches_the_core_catalogue`), so the two cannot drift.
//! The catalogue is here, not there, because loading a scenario (and
//! refusing an unknown fault at its line) is the core's job and must work
//! without the harness: `unstuck scenarios`, the core's own tests and the
//! scaffold all read it.

use std::fmt::Write as _;

use crate::doctor::model::NodeCause;

/// One fault a scenario can inject.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FaultSpec {
    /// Its name in a scenario file (`- fault: {<name>: {...}}`).
    pub name: &'static str,
    /// Whether it touches a node, which other scenarios' pods may share:
    /// a scenario that injects it runs alone and needs node access.
    pub node_level: bool,
    /// What it takes besides `pod` and `namespace`.
    pub params: &'static [ParamSpec],
    /// The node doctor's finding its symptom is.
    pub reproduces: NodeCause,
    /// What it does, in a sentence, for the README and the scaffold.
    pub about: &'static str,
}

/// One parameter of a fault, written beside `pod` and `namespace`. Its
/// value is a string.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParamSpec {
    pub name: &'static str,
    pub required: bool,
    /// What it names, for error messages and the README.
    pub about: &'static str,
}

/// The keys every fault takes: the pod, by logical namespace and name.
pub const POD_KEYS: [&str; 2] = ["pod", "namespace"];

/// Every fault there is, in the order error messages list them.
pub const CATALOGUE: &[FaultSpec] = &[
    FaultSpec {
        name: "busyMount",
        node_level: true,
        params: &[],
        reproduces: NodeCause::BusyVolume,
        about: "a tmpfs nested inside one of the pod's volume directories, so the kubelet's volume TearDown fails with EBUSY (catalog case 4)",
    },
    FaultSpec {
        name: "wedgeShim",
        node_level: true,
        params: &[],
        reproduces: NodeCause::WedgedRuntime,
        about: "SIGSTOP to the pod's containerd shim, so every stop request runs into its deadline (catalog case 5)",
    },
    FaultSpec {
        name: "stopKubelet",
        node_level: true,
        params: &[],
        reproduces: NodeCause::KubeletDown,
        about: "the kubelet of the pod's node is stopped: the node goes Ready=Unknown and nothing confirms a deletion (seed 004); every pod on the node stalls, so scenarios using it are `serial`",
    },
    FaultSpec {
        name: "holdVolume",
        node_level: true,
        params: &[ParamSpec {
            name: "volume",
            required: true,
            about: "the volume's name in the pod spec",
        }],
        reproduces: NodeCause::BusyVolume,
        about: "a process whose working directory is the kubelet's mount of one of the pod's volumes, so its unmount fails with \"target is busy\" (kubernetes/kubernetes#113426)",
    },
    FaultSpec {
        name: "removeCniConfig",
        node_level: true,
        params: &[],
        reproduces: NodeCause::CniTeardownFailed,
        about: "the node's CNI configuration is moved away: \"cni plugin not initialized\", every sandbox teardown fails and the node turns NotReady (containerd/containerd#8774)",
    },
    FaultSpec {
        name: "freezeCgroup",
        node_level: true,
        params: &[],
        reproduces: NodeCause::CgroupFrozen,
        about: "the pod's cgroup is frozen with the cgroup freezer, so the runtime's kill never finishes",
    },
    FaultSpec {
        name: "missingCniPlugin",
        node_level: true,
        params: &[ParamSpec {
            name: "plugin",
            required: true,
            about: "a plugin type the node has no binary for",
        }],
        reproduces: NodeCause::CniTeardownFailed,
        about: "the node's CNI configuration chains a plugin that is not installed: \"failed to find plugin ... in path\", every sandbox teardown and setup fails while the node stays Ready (kubernetes/kubernetes#56902)",
    },
];

/// The fault named `name`.
pub fn fault_spec(name: &str) -> Option<&'static FaultSpec> {
    CATALOGUE.iter().find(|f| f.name == name)
}

/// Every fault's name, in catalogue order (for serde's "expected one of").
pub const FAULT_NAMES: [&str; CATALOGUE.len()] = {
    let mut names = [""; CATALOGUE.len()];
    let mut i = 0;
    while i < CATALOGUE.len() {
        names[i] = CATALOGUE[i].name;
        i += 1;
    }
    names
};

impl FaultSpec {
    /// The parameter named `name`.
    pub fn param(&self, name: &str) -> Option<&'static ParamSpec> {
        self.params.iter().find(|p| p.name == name)
    }

    /// How it is written, with every parameter: `holdVolume: {pod, namespace, volume}`.
    pub fn usage(&self) -> String {
        let mut keys: Vec<&str> = POD_KEYS.to_vec();
        keys.extend(self.params.iter().map(|p| p.name));
        format!("{}: {{{}}}", self.name, keys.join(", "))
    }
}

/// The faults as a Markdown list, one line each: the README's list of
/// faults is this text (a test compares them).
pub fn catalogue_markdown() -> String {
    let mut out = String::new();
    for f in CATALOGUE {
        let _ = write!(out, "- `{}`", f.name);
        for p in f.params {
            let optional = if p.required { "" } else { ", optional" };
            let _ = write!(out, " with `{}:` ({}{optional})", p.name, p.about);
        }
        let _ = writeln!(
            out,
            ": {}. The node doctor's finding: `{}`.",
            f.about, f.reproduces
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_camel_case_and_params_are_not_pod_keys() {
        for (i, f) in CATALOGUE.iter().enumerate() {
            assert!(
                f.name.starts_with(|c: char| c.is_ascii_lowercase())
                    && f.name.chars().all(|c| c.is_ascii_alphanumeric()),
                "{}",
                f.name
            );
            assert!(
                CATALOGUE[..i].iter().all(|g| g.name != f.name),
                "{} twice",
                f.name
            );
            assert_eq!(fault_spec(f.name), Some(f));
            assert_eq!(FAULT_NAMES[i], f.name);
            for p in f.params {
                assert!(!POD_KEYS.contains(&p.name), "{}: {}", f.name, p.name);
            }
        }
        assert_eq!(fault_spec("killNode"), None);
    }

    #[test]
    fn usage_lists_the_pod_keys_then_the_params() {
        assert_eq!(
            fault_spec("holdVolume").unwrap().usage(),
            "holdVolume: {pod, namespace, volume}"
        );
        assert_eq!(
            fault_spec("busyMount").unwrap().usage(),
            "busyMount: {pod, namespace}"
        );
    }

    /// The README's list of faults is the catalogue's, so a new fault's
    /// line there comes from its table line here.
    #[test]
    fn the_readme_lists_the_catalogue() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md");
        let readme = std::fs::read_to_string(path).expect("README.md");
        let expected = catalogue_markdown();
        assert!(
            readme.contains(&expected),
            "README.md's list of faults differs from the catalogue; put this list in its place:\n{expected}"
        );
    }
}
