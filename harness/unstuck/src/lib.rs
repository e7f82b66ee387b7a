//! unstuck: injects the failures that leave Kubernetes objects stuck in
//! Terminating, runs its doctor against them and proves recovery.
//!
//! The pure decisions (scenario model, diagnosis, remedy planning) live in
//! [`unstuck_core`]; this crate does the I/O: clusters, nodes, the
//! doctor's collect and apply steps, the runner and the reports.

pub mod cluster;
pub mod components;
pub mod containers;
pub mod doctor;
pub mod exec;
pub mod faults;
pub mod host;
pub mod kube_error;
pub mod node;
pub mod report;
pub mod runner;
pub mod wait;

pub use unstuck_core as core;
