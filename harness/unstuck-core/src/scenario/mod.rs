//! Scenario files: the model and the loader.
//!
//! A scenario reproduces one incident, in the spirit of chainsaw tests: plain
//! Kubernetes manifests (fixtures) plus a few declarative step kinds. Users
//! write scenarios to reproduce what they saw; the built-in scenarios use the
//! same format.
//!
//! ```yaml
//! name: orphan-finalizer-configmap        # DNS label, <= 40 characters
//! description: A ConfigMap carries a finalizer nobody serves.
//! catalogCase: 1                          # failure-catalog.md case (optional)
//! seeds: ["001", "000"]                   # seed documents (optional)
//! namespaces: [app]                       # logical names, mapped per run
//! timeout: 3m                             # whole scenario (default 5m)
//! serial: false                           # must run alone (default false)
//! steps:
//!   - apply: orphan/configmap.yaml        # short form, or:
//!   - apply: {file: orphan/widget.yaml, namespace: app}
//!   - delete: {kind: ConfigMap, name: mymap, namespace: app}
//!   - fault: {busyMount: {pod: web, namespace: app}}
//!   - container:                          # a backend beside the cluster
//!       {name: backend, role: webhook, fault: hang,
//!        service: {namespace: app, name: hook}, register: hook/webhook.yaml}
//!   - expect:
//!       phase: symptom                    # symptom | recovered
//!       timeout: 60s                      # default 60s
//!       that:
//!         - terminating: {kind: ConfigMap, name: mymap, namespace: app}
//!         - namespaceCondition: {namespace: app, type: NamespaceContentRemaining, status: "True"}
//!   - doctor: {expectFindings: [OrphanFinalizer]}   # apply: true by default
//!   - expect: {phase: recovered, that: [{gone: {kind: ConfigMap, name: mymap, namespace: app}}]}
//! ```
//!
//! Loading is strict. Unknown keys, YAML 1.1 booleans (`yes`), unquoted
//! condition statuses, duplicate keys and undeclared namespaces are errors,
//! each reported as `file:line:column: message` with the offending line:
//! a scenario that silently means something else than it says would test
//! nothing while passing.

mod agents;
mod condition;
mod container;
mod error;
mod fault;
pub mod fault_catalogue;
mod kinds;
mod load;
mod located;
mod meta;
mod model;
mod refs;
mod registry;
pub mod scaffold;
mod shard;
mod steps;
mod validate;

pub use agents::{ControllerCleanup, ControllerSpec, DoctorCheck};
pub use condition::{
    API_SERVICE_CONDITION_TYPES, ApiServiceConditionCheck, Condition, ConditionStatus, EventCheck,
    KubeletLogCheck, NAMESPACE_CONDITION_TYPES, NamespaceConditionCheck, NamespaceRef,
    NodeConditionCheck, ObjectConditionCheck,
};
pub use container::{BACKEND_IMAGE, BackendFault, ContainerRole, ContainerSpec, ServiceRef};
pub use error::{Diagnostic, LoadError, LoadErrors};
pub use fault::{Fault, FaultParam};
pub use fault_catalogue::{CATALOGUE, FaultSpec, ParamSpec, fault_spec};
pub use kinds::{default_api_version, is_namespaced};
pub use load::{load_dir, load_file, load_str};
pub use located::{Located, Position};
pub use meta::ScenarioMeta;
pub use model::{DEFAULT_SCENARIO_TIMEOUT, Scenario, Step, incident_url};
pub use refs::{LogicalRef, PodRef};
pub use registry::{REGISTRY_DOMAIN, RegistryAuth, RegistryFault, RegistrySpec};
pub use shard::{Shard, ShardError};
pub use steps::{ApplySpec, DEFAULT_EXPECT_TIMEOUT, DeleteSpec, Expect, Phase, PropagationPolicy};
pub use validate::MAX_NAME_LEN;
