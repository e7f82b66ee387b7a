//! Metadata LISTs, paged or streamed: a type of a few pages is read 500
//! objects a page; a larger one (100k ConfigMaps) as one streaming list
//! (a watch with `sendInitialEvents`, served from the API server's watch
//! cache, one object per event) where the server and the user's rights
//! allow it, else paged too. Of each page or event only what diagnosis
//! needs is kept (objects being deleted, objects in a Terminating
//! namespace), so memory follows what is stuck, not the size of the
//! cluster.
//!
//! Consistency is that of a paged list: a streaming list with no
//! resourceVersion is a consistent read (the state at least as new as the
//! request, from one snapshot, like the pages of one list), and its
//! events are not mixed with the first page's. As before, each type is
//! its own snapshot; the doctor re-reads every object before it writes
//! (`recheck`).

use std::{collections::BTreeSet, sync::Arc};

use futures::{StreamExt, pin_mut};
use kube::{
    Api, Client,
    api::{DynamicObject, ListParams, WatchEvent, WatchParams},
    core::PartialObjectMeta,
};
use unstuck_core::doctor::ObjectRecord;

use super::collect::types::ListableType;

/// Objects per LIST page: a cluster of 100k objects is read in pages so
/// that only what diagnosis needs is kept between them.
pub const PAGE: u32 = 500;

/// Whether an error means "not allowed" or "no answer in time": a blind
/// spot rather than a fact about the cluster. A timeout is found by its
/// type anywhere in the error's causes: the client's read and connect
/// timeouts (hyper-timeout) are I/O errors of kind `TimedOut`, a deadline
/// of tokio's is its `Elapsed`.
pub(super) fn is_blind(e: &kube::Error) -> bool {
    if let kube::Error::Api(s) = e {
        return s.code == 401 || s.code == 403;
    }
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(c) = cause {
        let timed_out = c
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::TimedOut)
            || c.downcast_ref::<tokio::time::error::Elapsed>().is_some();
        if timed_out {
            return true;
        }
        cause = c.source();
    }
    false
}

/// Every page of a typed list.
pub(super) async fn list_all<K>(api: Api<K>) -> Result<Vec<K>, kube::Error>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let mut out = Vec::new();
    let mut lp = ListParams::default().limit(PAGE);
    loop {
        let page = api.list(&lp).await?;
        out.extend(page.items);
        match page.metadata.continue_ {
            Some(c) if !c.is_empty() => lp = lp.continue_token(&c),
            _ => return Ok(out),
        }
    }
}

/// What one type's paged metadata list kept: the objects being deleted and
/// those in a Terminating namespace, and how many it saw.
#[derive(Default)]
pub(super) struct Kept {
    pub seen: usize,
    pub terminating: Vec<ObjectRecord>,
    pub namespace_content: Vec<ObjectRecord>,
}

/// Lists `t`'s metadata (in `namespace`, or everywhere), keeping only what
/// diagnosis needs. A type that fits in a few pages is paged. A larger
/// one is read again as a streaming list: one request, one object per
/// event, so memory stays that of one object and the API server's
/// per-page cost is paid once; if the server gives no complete stream,
/// paging resumes where the first page ended.
pub(super) async fn list_kept(
    client: Client,
    t: ListableType,
    namespace: Option<String>,
    terminating_ns: Arc<BTreeSet<String>>,
) -> (ListableType, Option<String>, Result<Kept, kube::Error>) {
    let api: Api<DynamicObject> = match &namespace {
        Some(ns) => Api::namespaced_with(client, ns, &t.api_resource()),
        None => Api::all_with(client, &t.api_resource()),
    };
    let mut kept = Kept::default();
    let mut lp = ListParams::default().limit(PAGE);
    let mut restarted = false;
    let mut streamed = false;
    let r = loop {
        let page = match api.list_metadata(&lp).await {
            Ok(p) => p,
            // A continue token expires (410 Gone) when the list outlives
            // etcd's compaction: start this type over once, from a fresh
            // snapshot, rather than keep half of two.
            Err(kube::Error::Api(s))
                if s.code == 410 && lp.continue_token.is_some() && !restarted =>
            {
                restarted = true;
                lp = ListParams::default().limit(PAGE);
                kept = Kept::default();
                continue;
            }
            Err(e) => break Err(e),
        };
        let more = page.metadata.continue_.filter(|c| !c.is_empty());
        let first = lp.continue_token.is_none() && !streamed;
        if first && more.is_some() && worth_streaming(page.metadata.remaining_item_count) {
            streamed = true;
            // The stream is a whole list on its own: this first page is
            // not mixed into it.
            if let Some(all) = stream_kept(&api, &t, &terminating_ns).await {
                break Ok(all);
            }
        }
        kept.seen += page.items.len();
        for item in page.items {
            keep(&t, item, &terminating_ns, &mut kept);
        }
        match more {
            Some(c) => lp = lp.continue_token(&c),
            None => break Ok(kept),
        }
    };
    (t, namespace, r)
}

pub(super) fn keep(
    t: &ListableType,
    item: PartialObjectMeta<DynamicObject>,
    terminating_ns: &BTreeSet<String>,
    kept: &mut Kept,
) {
    let in_terminating_ns = t.namespaced
        && item
            .metadata
            .namespace
            .as_ref()
            .is_some_and(|ns| terminating_ns.contains(ns));
    let deleting = item.metadata.deletion_timestamp.is_some();
    if !(deleting || in_terminating_ns) {
        return;
    }
    let record = ObjectRecord {
        api_version: t.api_version.clone(),
        kind: t.kind.clone(),
        resource: t.resource.clone(),
        namespaced: t.namespaced,
        metadata: item.metadata,
    };
    if in_terminating_ns {
        kept.namespace_content.push(record.clone());
    }
    if deleting {
        kept.terminating.push(record);
    }
}

/// The annotation on the bookmark that closes a streaming list's initial
/// events (KEP-3157): everything before it is the list.
const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";

/// How long the server may take to stream one type's initial events.
const STREAM_TIMEOUT_SECS: u32 = 60;

/// What one event of a streaming list means for the list.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Step {
    More,
    Done,
    /// Not part of a conforming streaming list (a change before the
    /// initial-events-end bookmark): the stream is not used.
    Unexpected(&'static str),
}

/// Folds one event of a streaming list into `kept`.
pub(super) fn fold(
    t: &ListableType,
    event: WatchEvent<PartialObjectMeta<DynamicObject>>,
    terminating_ns: &BTreeSet<String>,
    kept: &mut Kept,
) -> Result<Step, kube::Error> {
    match event {
        WatchEvent::Added(item) => {
            kept.seen += 1;
            keep(t, item, terminating_ns, kept);
            Ok(Step::More)
        }
        WatchEvent::Bookmark(b) => Ok(
            if b.metadata
                .annotations
                .get(INITIAL_EVENTS_END)
                .map(String::as_str)
                == Some("true")
            {
                Step::Done
            } else {
                Step::More
            },
        ),
        WatchEvent::Modified(_) => Ok(Step::Unexpected(
            "MODIFIED before the end of the initial events",
        )),
        WatchEvent::Deleted(_) => Ok(Step::Unexpected(
            "DELETED before the end of the initial events",
        )),
        WatchEvent::Error(s) => Err(kube::Error::Api(s)),
    }
}

/// Objects left after the first page past which one streaming list is
/// quicker than paging on. The v1.34 watch cache serves each page by
/// collecting every object from the continue key to the end of the type
/// and then cutting it to `limit`, so paging through n objects costs
/// about n²/(2·500): 200 pages of 100k took 2.9 to 3.5 s, one stream
/// 1.4 to 1.5 s (the scale bench, a loaded 2-core machine).
/// A stream has its own start-up (its first event after 50 to 100 ms)
/// and costs the doctor more CPU per object; at 20k the two measured
/// alike (0.34 s paged, 0.46 s streamed, same run).
/// (k8s.io/apiserver v0.34.4, storage/cacher: `btreeStore::ListPrefix`,
/// `Cacher::GetList`.)
const STREAM_PAST_OBJECTS: i64 = 20_000;

/// Whether the rest of a list (`remaining` objects after the first page,
/// as the server counted them) is worth a streaming list. A server that
/// does not count (it may not, with selectors) may have any number.
pub(super) fn worth_streaming(remaining: Option<i64>) -> bool {
    remaining.is_none_or(|n| n > STREAM_PAST_OBJECTS)
}

/// One type as a streaming list (a watch with `sendInitialEvents`, a
/// consistent read served from the API server's watch cache, one object
/// per event): `None` when the server did not give a complete one, for
/// whatever reason (no `watch` right, WatchList off, a server that
/// predates it, a timeout, an error event); the caller then pages.
async fn stream_kept(
    api: &Api<DynamicObject>,
    t: &ListableType,
    terminating_ns: &BTreeSet<String>,
) -> Option<Kept> {
    let mut kept = Kept::default();
    let wp = WatchParams::streaming_lists().timeout(STREAM_TIMEOUT_SECS);
    // An empty resourceVersion with NotOlderThan: a consistent read, the
    // state at least as new as the moment the request arrived.
    let events = match api.watch_metadata(&wp, "").await {
        Ok(s) => s,
        Err(e) => {
            tracing::debug!(resource = %t.resource, error = %e, "streaming list refused; paging");
            return None;
        }
    };
    pin_mut!(events);
    while let Some(event) = events.next().await {
        match event.and_then(|ev| fold(t, ev, terminating_ns, &mut kept)) {
            Ok(Step::More) => {}
            Ok(Step::Done) => {
                tracing::debug!(resource = %t.resource, objects = kept.seen, "streamed list");
                return Some(kept);
            }
            Ok(Step::Unexpected(why)) => {
                tracing::debug!(resource = %t.resource, why, "streaming list not used; paging");
                return None;
            }
            Err(e) => {
                tracing::debug!(resource = %t.resource, error = %e, "streaming list failed; paging");
                return None;
            }
        }
    }
    tracing::debug!(resource = %t.resource, "streaming list ended early; paging");
    None
}

#[cfg(test)]
mod tests;
