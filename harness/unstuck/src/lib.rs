//! unstuck: injects the failures that leave Kubernetes objects stuck in
//! Terminating, runs its doctor against them and proves recovery.
//!
//! The pure decisions (scenario model, diagnosis, remedy planning) live in
//! [`unstuck_core`]; this crate does the I/O: clusters, nodes, the
//! doctor's collect and apply steps, the runner and the reports.

pub mod cluster;
pub mod components;
pub mod containers;
pub mod docker;
pub mod doctor;
pub mod exec;
pub mod faults;
pub mod host;
pub mod kube_error;
pub mod node;
pub mod report;
pub mod runner;
pub mod style;
pub mod text;
pub mod wait;
pub mod waiting;

pub use unstuck_core as core;

/// The tracing target of the debug lines that mark where a run is (etcd
/// starting, a doctor's apply beginning, a cluster's teardown ...): off by
/// default, `UNSTUCK_LOG=info,unstuck::step=debug` shows them. A test
/// that stops a run at a given point waits for its line; a person reading
/// a log of a run that died learns how far it got.
pub const STEP_LOG: &str = "unstuck::step";
