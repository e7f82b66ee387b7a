//! Who serves a finalizer key. "No live owner" is argued from evidence in
//! the snapshot, never assumed, and the evidence is quoted either way.
//!
//! 1. Kubernetes' own keys (`builtin`, every key kube-controller-manager,
//!    kube-apiserver and the cloud provider set in v1.33-v1.37): `Alive`
//!    while their controller is, `Unknown` otherwise, `Dead` on a kind
//!    their controllers never touch. `kubernetes` in `metadata.finalizers`
//!    is `Dead`: only a Namespace's `spec.finalizers` token has a
//!    controller. CSI sidecar and snapshot-controller keys are `Alive` by a
//!    lease mentioning them, else `Unknown`, never `Dead`.
//! 2. Any other key is asked about by what could act on the object,
//!    whatever it is called:
//!    - `able`: ServiceAccounts RBAC lets update or patch the object
//!      ([`rbac`]), the pods and workloads that run as them, and the
//!      Leases those pods hold;
//!    - `writes`: writes to the object since its deletion began, by any
//!      manager that is not a person's client or Kubernetes' own;
//!    - `events`: Events about the object, from any reporter;
//!    - by its names: the domain (`domain/path`, or a dotted key without
//!      `/`) and product words ([`words`]), widened for well-known keys
//!      ([`known_keys`]): `leases`, `workloads` (by name, labels,
//!      service account, image), `served` (webhooks and APIServices),
//!      writes by a manager and events from a component named for it.
//! 3. The verdict (`verdict`): `Alive` needs positive evidence;
//!    `Unknown` when something could act but is not shown to, when the
//!    owner looks installed but is not shown running, or when a source
//!    could not be read; `Dead` needs every source read and lists each
//!    check. Two kinds of key are never `Dead` by evidence: one with no
//!    domain and only generic words (nothing to look for by name), and one
//!    under `kubernetes.io`, `k8s.io` or `x-k8s.io` that Kubernetes itself
//!    does not set (someone's controller unstuck does not know).
//! 4. `--assume-dead KEY` turns that key's `Unknown` into `Dead`; never
//!    `Alive` into anything.
//!
//! Protection (`kubernetes.io/pvc-protection` on a claim a scheduled pod
//! references, `kubernetes.io/pv-protection` on a `Bound` volume,
//! `kubernetes.io/vac-protection` on a class a claim or volume names) is
//! judged separately by [`protection_in_use`]: those keys are normal and
//! never stripped, whatever their owner's state.

mod able;
mod builtin;
pub mod cloud;
mod events;
pub mod known_keys;
mod leases;
mod protection;
pub mod rbac;
mod served;
mod verdict;
pub mod words;
mod workloads;
mod writes;

use std::{cell::RefCell, collections::HashMap, rc::Rc};

pub use builtin::{
    PV_PROTECTION, PVC_PROTECTION, VAC_PROTECTION, controller_manager_alive, is_built_in,
};
pub use known_keys::{KNOWN_KEYS, KnownKey, known_key};
pub use protection::protection_in_use;

pub use super::model::{FinalizerVerdict, OwnerVerdict};

use super::model::{ObjectRecord, Snapshot};
use crate::text::quoted;
use rbac::Request;
use verdict::SourceReport;
use words::OwnerWords;

/// A write or an event this recent shows its author running now.
const RECENT_SECS: i64 = 120;
/// A lease stale, or an event older, than this no longer suggests a
/// restart in progress.
const INSTALLED_SECS: i64 = 600;

/// One key on one object, asked about.
#[derive(Clone, Copy, Debug)]
pub struct OwnerQuery<'a> {
    /// The finalizer key.
    pub finalizer: &'a str,
    /// The kind of the object that carries it.
    pub kind: &'a str,
    /// The object: where it lives in the API (whose rights to update it
    /// are a source) and its metadata (its managedFields and the Events
    /// about it are sources). `None` leaves those sources unasked, and the
    /// key is then never `Dead` unless Kubernetes' own.
    pub record: Option<&'a ObjectRecord>,
    /// Keys the operator named with `--assume-dead`.
    pub assume_dead: &'a [String],
}

/// What every source sees.
struct Ctx<'a> {
    finalizer: &'a str,
    target: &'a OwnerWords,
    record: Option<&'a ObjectRecord>,
    snapshot: &'a Snapshot,
}

/// Why a source type could not be read: the collector recorded it as
/// unreadable, or its group/version failed discovery.
fn unreadable(snapshot: &Snapshot, resource: &str, group_version: &str) -> Option<String> {
    if let Some(u) = snapshot.unreadable.iter().find(|u| u.resource == resource) {
        return Some(format!(
            "{resource} could not be read ({}), so the owner cannot be argued dead",
            u.message
        ));
    }
    snapshot
        .discovery_failures
        .iter()
        .find(|d| d.group_version == group_version)
        .map(|d| {
            format!(
                "{resource} could not be read ({group_version}: {}), so the owner cannot be argued dead",
                d.message
            )
        })
}

/// Argues whether `finalizer`, found in the `metadata.finalizers` of
/// `object`, has a live owner, without assumptions. See the module docs.
pub fn finalizer_owner(
    finalizer: &str,
    object: &ObjectRecord,
    snapshot: &Snapshot,
) -> OwnerVerdict {
    owner_verdict(
        &OwnerQuery {
            finalizer,
            kind: &object.kind,
            record: Some(object),
            assume_dead: &[],
        },
        snapshot,
    )
    .verdict
}

/// Argues whether a key's owner is alive, dead or not known, applying
/// `--assume-dead`. See the module docs for the rules. To ask about many
/// objects, use one [`OwnerCache`].
pub fn owner_verdict(q: &OwnerQuery, snapshot: &Snapshot) -> FinalizerVerdict {
    OwnerCache::new(snapshot).verdict(q)
}

/// What the cluster-wide sources say about one key: the same for every
/// object that carries it.
struct KeyEvidence {
    known: Option<&'static KnownKey>,
    target: OwnerWords,
    /// By name: leases, workloads, pods, webhooks/APIServices, events
    /// (none when the key names nothing to look for).
    reports: Vec<SourceReport>,
}

/// Verdicts on many objects of one snapshot. The cluster-wide sources are
/// read once per key, not once per object: a namespace holding thousands
/// of stuck objects with one key costs one search of the pods and events.
pub struct OwnerCache<'a> {
    snapshot: &'a Snapshot,
    by_key: RefCell<HashMap<String, Rc<KeyEvidence>>>,
    /// Who could act, per key and request: the same for every object of
    /// one type in one namespace (by name too, where a rule names objects).
    by_access: RefCell<HashMap<AccessKey, SourceReport>>,
}

/// Key, group, resource, namespace and (only where some rule has
/// `resourceNames`) name.
type AccessKey = (String, String, String, Option<String>, Option<String>);

impl<'a> OwnerCache<'a> {
    /// An empty cache over `snapshot`.
    pub fn new(snapshot: &'a Snapshot) -> Self {
        OwnerCache {
            snapshot,
            by_key: RefCell::new(HashMap::new()),
            by_access: RefCell::new(HashMap::new()),
        }
    }

    /// [`owner_verdict`], with the key's cluster-wide evidence reused.
    pub fn verdict(&self, q: &OwnerQuery) -> FinalizerVerdict {
        let (verdict, assumed_dead) = verdict::assume(q.finalizer, self.argue(q), q.assume_dead);
        FinalizerVerdict {
            finalizer: q.finalizer.to_owned(),
            verdict,
            assumed_dead,
        }
    }

    fn argue(&self, q: &OwnerQuery) -> OwnerVerdict {
        let (finalizer, snapshot) = (q.finalizer, self.snapshot);
        if let Some(v) = builtin::built_in_verdict(q, snapshot) {
            return v;
        }
        if finalizer == "kubernetes" {
            return OwnerVerdict::Dead {
                evidence: vec![
                    "\"kubernetes\" in metadata.finalizers has no controller: the namespace controller only handles the \"kubernetes\" token in a Namespace's spec.finalizers".to_owned(),
                ],
            };
        }
        if let Some((_, word)) = builtin::EXTERNAL
            .iter()
            .find(|(p, _)| finalizer.starts_with(p))
        {
            return builtin::external_verdict(finalizer, word, snapshot);
        }
        let key = self.key_evidence(finalizer);
        let ctx = Ctx {
            finalizer,
            target: &key.target,
            record: q.record,
            snapshot,
        };
        let request = q.record.map(|r| Request {
            group: r.group(),
            resource: &r.resource,
            namespace: r.namespace(),
            name: r.name(),
        });
        let preface = key
            .known
            .map(|k| {
                vec![format!(
                    "{finalizer} is a well-known key of {}, served by {}",
                    k.project, k.controller
                )]
            })
            .unwrap_or_default();
        let mut reports = vec![
            self.able(&ctx, request.as_ref()),
            writes::check(&ctx, request.as_ref()),
            events::about_object(&ctx),
        ];
        reports.extend(key.reports.iter().cloned());
        let verdict = verdict::combine(preface, &reports);
        match verdict {
            OwnerVerdict::Dead { evidence } => match never_dead(finalizer, &key.target) {
                Some(why) => {
                    let mut lines = vec![why];
                    lines.extend(evidence);
                    OwnerVerdict::Unknown { evidence: lines }
                }
                None => OwnerVerdict::Dead { evidence },
            },
            other => other,
        }
    }

    /// [`able::check`], once per key and request.
    fn able(&self, ctx: &Ctx, req: Option<&Request>) -> SourceReport {
        let Some(req) = req else {
            return able::check(ctx, None);
        };
        let names_matter = self
            .snapshot
            .rbac
            .as_ref()
            .is_some_and(|r| r.names_objects(req));
        let key = (
            ctx.finalizer.to_owned(),
            req.group.to_owned(),
            req.resource.to_owned(),
            req.namespace.map(str::to_owned),
            names_matter.then(|| req.name.to_owned()),
        );
        if let Some(r) = self.by_access.borrow().get(&key) {
            return r.clone();
        }
        let r = able::check(ctx, Some(req));
        self.by_access.borrow_mut().insert(key, r.clone());
        r
    }

    fn key_evidence(&self, finalizer: &str) -> Rc<KeyEvidence> {
        if let Some(k) = self.by_key.borrow().get(finalizer) {
            return Rc::clone(k);
        }
        let known = known_key(finalizer);
        let target = OwnerWords::of(finalizer, known);
        let reports = if target.is_empty() {
            Vec::new()
        } else {
            let ctx = Ctx {
                finalizer,
                target: &target,
                record: None,
                snapshot: self.snapshot,
            };
            vec![
                leases::check(&ctx),
                workloads::check_workloads(&ctx),
                workloads::check_pods(&ctx),
                served::check(&ctx),
                events::check(&ctx),
            ]
        };
        let k = Rc::new(KeyEvidence {
            known,
            target,
            reports,
        });
        self.by_key
            .borrow_mut()
            .insert(finalizer.to_owned(), Rc::clone(&k));
        k
    }
}

/// Why a key whose sources all came back empty is still not `Dead`: it
/// names nothing to look for, or it sits under Kubernetes' own domains
/// without being one of Kubernetes' keys.
fn never_dead(finalizer: &str, target: &OwnerWords) -> Option<String> {
    if target.is_empty() {
        return Some(format!(
            "{} has no domain and only generic words, so no owner can be looked for by name and none is argued dead; confirm, then --assume-dead {finalizer}",
            quoted(finalizer)
        ));
    }
    let domain = finalizer.split_once('/').map_or(finalizer, |(d, _)| d);
    let k8s = ["kubernetes.io", "k8s.io", "x-k8s.io"]
        .into_iter()
        .find(|p| domain == *p || domain.ends_with(&format!(".{p}")));
    k8s.map(|p| {
        format!(
            "{finalizer} is under {p} but is not a key Kubernetes itself sets (v1.33-v1.37): a controller unstuck does not know, so its owner is not argued dead; confirm, then --assume-dead {finalizer}"
        )
    })
}

/// `metrics.k8s.io/v1beta1, ...` from the snapshot's discovery failures.
pub(crate) fn failing_group_versions(snapshot: &Snapshot) -> String {
    let mut gvs: Vec<&str> = snapshot
        .discovery_failures
        .iter()
        .map(|d| d.group_version.as_str())
        .collect();
    gvs.sort_unstable();
    gvs.dedup();
    gvs.join(", ")
}

/// Seconds as `1h2m3s` / `2m5s` / `42s` (negative values keep their sign).
pub fn fmt_secs(secs: i64) -> String {
    let sign = if secs < 0 { "-" } else { "" };
    let s = secs.unsigned_abs();
    let (h, m, s) = (s / 3600, (s % 3600) / 60, s % 60);
    if h > 0 {
        format!("{sign}{h}h{m}m{s}s")
    } else if m > 0 {
        format!("{sign}{m}m{s}s")
    } else {
        format!("{sign}{s}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds() {
        assert_eq!(fmt_secs(42), "42s");
        assert_eq!(fmt_secs(125), "2m5s");
        assert_eq!(fmt_secs(3723), "1h2m3s");
        assert_eq!(fmt_secs(-5), "-5s");
    }
}
