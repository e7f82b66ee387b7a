//! The pure core of unstuck: everything that can be decided without talking
//! to a cluster. The scenario model and its loader, and the doctor's
//! diagnosis and remedy planning, which work on a [`doctor::Snapshot`]
//! collected elsewhere. Like kube-core beside kube-client, this crate does
//! no I/O beyond reading a scenario file, so it is tested on recorded
//! objects alone.

pub mod doctor;
pub mod duration;
pub mod scenario;
pub mod text;
