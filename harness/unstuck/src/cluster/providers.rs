//! Every provider by its kind: the one place that knows them all, so that
//! the interface ([`super::provider`]) imports none of them and no
//! provider imports another.

use std::sync::Arc;

use super::{
    kind::KindProvider,
    local::LocalProvider,
    provider::{AnyProvider, CreateOptions, ProviderKind},
};

/// The provider of `kind`, making clusters with `opts`.
pub fn provider(kind: ProviderKind, opts: CreateOptions) -> AnyProvider {
    match kind {
        ProviderKind::Local => Arc::new(LocalProvider(opts)),
        ProviderKind::Kind => Arc::new(KindProvider(opts)),
    }
}

/// Every provider, for the commands that look at all clusters (`cluster
/// list/status/gc`, the reaper); their create options are the defaults.
pub fn all() -> Vec<AnyProvider> {
    ProviderKind::ALL
        .into_iter()
        .map(|k| {
            provider(
                k,
                CreateOptions::owned(crate::components::DEFAULT_K8S_VERSION, None),
            )
        })
        .collect()
}
