//! The *finally* of a scenario: it runs after the steps whatever way they
//! ended (passed, failed, timed out, interrupted, a step that panicked).
//! Node faults go first — a busy mount or a stopped shim would keep the
//! scenario's pods, and so its namespaces, from ever going — then the
//! run's objects, then its live controllers, then its backend containers. What cleanup could not do is
//! in the report: a fault whose revert failed is `leaked`, as is anything
//! left if cleanup itself panicked.

use std::panic::AssertUnwindSafe;

use futures::FutureExt;

use super::{
    cleanup, progress,
    scenario_state::{ScenarioRun, panic_text},
};

pub(super) async fn run(run: &mut ScenarioRun<'_>) {
    let name = run.scenario.name.as_str();
    progress::set(name, "cleaning up".into());
    let result = AssertUnwindSafe(cleanup_all(run)).catch_unwind().await;
    if let Err(panic) = result {
        run.report.cleanup.leaked.push(format!(
            "cleanup stopped with a panic ({}): what it had not done yet may be left",
            panic_text(panic.as_ref())
        ));
    }
    progress::clear(name);
    // Last: they serve finalizers on the run's objects until those are gone.
    run.controllers.clear();
    remove_registries(run).await;
    // After the objects: a webhook's registration must be gone before its
    // backend, or the run's own deletes would wait on it.
    for backend in run.backends.drain(..) {
        let name = backend.managed.container.clone();
        let errors = backend.remove().await;
        if errors.is_empty() {
            run.report
                .cleanup
                .reverted
                .push(format!("removed container {name}"));
        } else {
            run.report.cleanup.leaked.push(format!(
                "container {name}: removing it failed, it may still be there: {}",
                errors.join("; ")
            ));
        }
    }
}

/// After the objects: the pods that pulled from a registry are gone, so
/// the images they pulled can go from the node.
async fn remove_registries(run: &mut ScenarioRun<'_>) {
    for registry in std::mem::take(&mut run.registries) {
        let host = registry.host.clone();
        let (done, failed) = super::step::registry::remove(run.ctx.node.as_deref(), registry).await;
        run.report.cleanup.reverted.extend(done);
        run.report.cleanup.leaked.extend(
            failed.into_iter().map(|f| {
                format!("registry {host}: removing it failed, it may still be there: {f}")
            }),
        );
    }
}

async fn cleanup_all(run: &mut ScenarioRun<'_>) {
    let mut reverted = Vec::new();
    let mut not_reverted = Vec::new();
    match &run.ctx.node {
        Some(node) => {
            for fault in run.injected.drain(..) {
                match fault.revert(node.as_ref()).await {
                    Ok(done) => reverted.extend(done),
                    Err(e) => not_reverted.push(format!(
                        "{}: reverting it failed, it may still be in place: {e}",
                        fault.describe()
                    )),
                }
            }
        }
        // Faults are injected only through a node: none can be in place.
        None => debug_assert!(run.injected.is_empty()),
    }
    run.report.cleanup = cleanup::cleanup(&run.ctx.client, &run.created).await;
    run.report.cleanup.reverted = reverted;
    run.report.cleanup.leaked.extend(not_reverted);
    // Kept while anything of the run's is still there: `cluster gc
    // --kubeconfig` (or the next run) takes it up once this process is gone.
    if let Some(j) = run.journal.take() {
        let c = &run.report.cleanup;
        if c.failed.is_empty() && c.leaked.is_empty() {
            j.finish();
        }
    }
}
