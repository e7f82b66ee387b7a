//! What the doctor knows about a cluster ([`Snapshot`]): plain data, filled
//! by a collector and read by [`super::diagnose()`] and [`super::plan()`].
//! The types are the model's ([`super::model::snapshot`], which describes
//! the file format, and [`super::model::object`]), re-exported here under
//! their old paths.

pub use super::model::object::{ObjectRecord, display_name, split_api_version};
pub use super::model::snapshot::{
    DiscoveryFailure, Snapshot, Unreadable, container_statuses, status_container_ids,
};
