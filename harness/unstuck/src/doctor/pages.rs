//! Paged LISTs: a cluster of 100k objects is read 500 objects a page, and
//! of each page only what diagnosis needs is kept (objects being deleted,
//! objects in a Terminating namespace), so memory follows what is stuck,
//! not the size of the cluster.

use std::{collections::BTreeSet, sync::Arc};

use kube::{
    Api, Client,
    api::{DynamicObject, ListParams},
    core::PartialObjectMeta,
};
use unstuck_core::doctor::ObjectRecord;

use super::collect::ListableType;

/// Objects per LIST page: a cluster of 100k objects is read in pages so
/// that only what diagnosis needs is kept between them.
pub const PAGE: u32 = 500;

/// Whether an error means "not allowed" or "no answer in time": a blind
/// spot rather than a fact about the cluster.
pub(super) fn is_blind(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(s) => s.code == 401 || s.code == 403,
        other => {
            let text = format!("{other:?}").to_lowercase();
            text.contains("timeout") || text.contains("timed out") || text.contains("elapsed")
        }
    }
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
pub(super) struct Kept {
    pub seen: usize,
    pub terminating: Vec<ObjectRecord>,
    pub namespace_content: Vec<ObjectRecord>,
}

/// Lists `t`'s metadata page by page (in `namespace`, or everywhere),
/// keeping only what diagnosis needs from each page.
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
    let mut kept = Kept {
        seen: 0,
        terminating: Vec::new(),
        namespace_content: Vec::new(),
    };
    let mut lp = ListParams::default().limit(PAGE);
    let mut restarted = false;
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
                kept = Kept {
                    seen: 0,
                    terminating: Vec::new(),
                    namespace_content: Vec::new(),
                };
                continue;
            }
            Err(e) => break Err(e),
        };
        kept.seen += page.items.len();
        for item in page.items {
            keep(&t, item, &terminating_ns, &mut kept);
        }
        match page.metadata.continue_ {
            Some(c) if !c.is_empty() => lp = lp.continue_token(&c),
            _ => break Ok(()),
        }
    };
    (t, namespace, r.map(|()| kept))
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
