//! Cluster providers. `local` (the default) runs real components on this
//! machine; others plug in beside it.

pub mod identity;
pub mod local;
