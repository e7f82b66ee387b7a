//! What the `apply`, `delete` and `expect` steps say. The object and pod
//! references they share with conditions and faults are in
//! [`refs`](super::refs).

use std::{fmt, path::PathBuf};

use serde::{Deserialize, Deserializer, Serialize, de};

use super::condition::Condition;
use super::located::Located;
use super::refs::LogicalRef;
use crate::duration::Duration;

/// How long an `expect` step waits when it does not set `timeout`.
pub const DEFAULT_EXPECT_TIMEOUT: Duration = Duration::from_secs(60);

/// What a `delete` step deletes: an object reference, written inline
/// (`delete: {kind: ConfigMap, name: mymap, namespace: app}`), plus how
/// its dependents go (`propagationPolicy`, as in `DeleteOptions`; the
/// server's default for the kind when left out).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "DeleteWire", into = "DeleteWire")]
pub struct DeleteSpec {
    /// The object.
    pub object: LogicalRef,
    /// `Foreground`, `Background` or `Orphan`.
    pub propagation_policy: Option<PropagationPolicy>,
}

/// `DeleteOptions.propagationPolicy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum PropagationPolicy {
    /// The owner waits (finalizer `foregroundDeletion`) until every
    /// dependent with `blockOwnerDeletion` is gone.
    Foreground,
    /// The owner goes at once; the garbage collector deletes dependents.
    Background,
    /// Dependents are left, their ownerReferences removed.
    Orphan,
}

/// As the API and a scenario write it.
impl std::fmt::Display for PropagationPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PropagationPolicy::Foreground => "Foreground",
            PropagationPolicy::Background => "Background",
            PropagationPolicy::Orphan => "Orphan",
        })
    }
}

/// The written form of a [`DeleteSpec`]: the object reference's keys and
/// `propagationPolicy` side by side.
#[derive(Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct DeleteWire {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    api_version: Option<String>,
    kind: Located<String>,
    name: Located<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    namespace: Option<Located<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    propagation_policy: Option<PropagationPolicy>,
}

impl From<DeleteWire> for DeleteSpec {
    fn from(w: DeleteWire) -> Self {
        DeleteSpec {
            object: LogicalRef {
                api_version: w.api_version,
                kind: w.kind,
                name: w.name,
                namespace: w.namespace,
            },
            propagation_policy: w.propagation_policy,
        }
    }
}

impl From<DeleteSpec> for DeleteWire {
    fn from(d: DeleteSpec) -> Self {
        DeleteWire {
            api_version: d.object.api_version,
            kind: d.object.kind,
            name: d.object.name,
            namespace: d.object.namespace,
            propagation_policy: d.propagation_policy,
        }
    }
}

/// What an `apply` step applies. Written either as a bare path
/// (`apply: crd-orphan/crd.yaml`) or as a mapping
/// (`apply: {file: crd-orphan/widget.yaml, namespace: app}`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ApplySpec {
    /// Manifest file, relative to the fixtures directory. It may hold
    /// several YAML documents.
    pub file: Located<PathBuf>,
    /// Logical namespace for the file's namespaced objects that do not name
    /// one themselves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<Located<String>>,
}

impl fmt::Display for ApplySpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(ns) = &self.namespace {
            write!(f, " in namespace {ns}")?;
        }
        Ok(())
    }
}

/// The long form of [`ApplySpec`], as written.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ApplyLong {
    file: Located<PathBuf>,
    #[serde(default)]
    namespace: Option<Located<String>>,
}

/// The two ways of writing an [`ApplySpec`], before positions are settled.
enum ApplyForm {
    Short(String),
    Long(ApplyLong),
}

impl<'de> Deserialize<'de> for ApplyForm {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct FormVisitor;

        impl<'de> de::Visitor<'de> for FormVisitor {
            type Value = ApplyForm;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a fixture path, or a mapping with `file` and optional `namespace`")
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<ApplyForm, E> {
                Ok(ApplyForm::Short(v.to_owned()))
            }

            fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<ApplyForm, A::Error> {
                // Hand the same map to the derived impl, so unknown keys and
                // missing `file` are reported exactly as for any other struct.
                ApplyLong::deserialize(de::value::MapAccessDeserializer::new(map))
                    .map(ApplyForm::Long)
            }
        }

        deserializer.deserialize_any(FormVisitor)
    }
}

impl<'de> Deserialize<'de> for ApplySpec {
    /// Accepts both forms. A bare path takes the position of the `apply`
    /// value itself, so a missing fixture is reported on the step's line.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let form = Located::<ApplyForm>::deserialize(deserializer)?;
        Ok(match form.value {
            ApplyForm::Short(file) => ApplySpec {
                file: Located::new(PathBuf::from(file), form.position),
                namespace: None,
            },
            ApplyForm::Long(long) => ApplySpec {
                file: long.file,
                namespace: long.namespace,
            },
        })
    }
}

/// A gate: every condition must hold at the same time before the timeout.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Expect {
    /// What the gate proves; see [`Phase`].
    pub phase: Phase,
    /// How long to wait (default 60s).
    #[serde(default = "default_expect_timeout")]
    pub timeout: Located<Duration>,
    /// The conditions. Never empty.
    pub that: Located<Vec<Condition>>,
}

impl fmt::Display for Expect {
    /// `expect symptom within 60s: ConfigMap app/mymap is Terminating; ...`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "expect {} within {}: ", self.phase, self.timeout)?;
        for (i, condition) in self.that.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            condition.fmt(f)?;
        }
        Ok(())
    }
}

/// What an `expect` step proves, which decides how its failure is reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Phase {
    /// The fidelity gate: the injected failure really shows the symptoms the
    /// seed documents describe. If this fails the harness is broken, not
    /// the doctor.
    Symptom,
    /// After the doctor: the cluster is healthy again. If this fails the
    /// doctor's remedy did not work.
    Recovered,
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Phase::Symptom => "symptom",
            Phase::Recovered => "recovered",
        })
    }
}

fn default_expect_timeout() -> Located<Duration> {
    Located::unlocated(DEFAULT_EXPECT_TIMEOUT)
}
