//! Cluster providers. `local` (the default) runs real components on this
//! machine; others plug in beside it.

pub mod exits;
pub mod identity;
pub mod kind;
pub mod local;
pub mod provider;
pub mod readiness;
