//! One record per object, however many versions serve it.
//!
//! The collector lists every served version of every group on purpose (a
//! dead aggregated API is exactly one such version), so an object served
//! in several versions comes back once per version: an HPA as
//! autoscaling/v1 and v2, a custom resource as v1alpha1 and v1, and an
//! Event as core v1 and events.k8s.io/v1 (two groups, one object). Kept
//! twice, it is diagnosed twice and patched twice, and the second patch
//! fails its `test` once the first has changed the object.
//!
//! Done here, where the lists are made, rather than in the core before
//! diagnosis: the snapshot then says what the cluster holds (a saved one
//! too), and which version an object is kept under needs discovery's
//! preferred versions, which only the collector has. Every version is
//! still listed: if the preferred one fails (a broken conversion webhook),
//! the object is kept under the version that answered, and the failure is
//! recorded as before.

use std::collections::{BTreeSet, HashMap};

use unstuck_core::doctor::ObjectRecord;

/// `records` with one record per UID, in their order: the one under its
/// group's preferred version (`preferred` holds group/versions, core
/// `v1` included), then the core group (an Event), then the first
/// apiVersion in sort order. Records without a UID are all kept.
pub fn one_per_object(
    records: Vec<ObjectRecord>,
    preferred: &BTreeSet<String>,
) -> Vec<ObjectRecord> {
    let rank = |r: &ObjectRecord| {
        (
            !preferred.contains(&r.api_version),
            !r.group().is_empty(),
            r.api_version.clone(),
        )
    };
    let mut out: Vec<ObjectRecord> = Vec::with_capacity(records.len());
    let mut at: HashMap<String, usize> = HashMap::new();
    for r in records {
        let Some(uid) = r.metadata.uid.clone().filter(|u| !u.is_empty()) else {
            out.push(r);
            continue;
        };
        match at.get(&uid) {
            Some(&i) => {
                if rank(&r) < rank(&out[i]) {
                    out[i] = r;
                }
            }
            None => {
                at.insert(uid, out.len());
                out.push(r);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn record(api_version: &str, kind: &str, name: &str, uid: Option<&str>) -> ObjectRecord {
        ObjectRecord {
            api_version: api_version.into(),
            kind: kind.into(),
            resource: format!("{}s", kind.to_lowercase()),
            namespaced: true,
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                uid: uid.map(Into::into),
                ..Default::default()
            },
        }
    }

    fn kept(records: &[ObjectRecord]) -> Vec<(String, String)> {
        records
            .iter()
            .map(|r| (r.api_version.clone(), r.name().to_owned()))
            .collect()
    }

    #[test]
    fn an_object_served_in_several_versions_is_kept_once_under_the_preferred_one() {
        // Discovery of a v1.34 cluster with a CRD served as v1alpha1 and v1.
        let preferred: BTreeSet<String> = [
            "v1",
            "autoscaling/v2",
            "events.k8s.io/v1",
            "acme.example.com/v1",
        ]
        .map(String::from)
        .into();
        let records = vec![
            record("acme.example.com/v1alpha1", "Gadget", "g1", Some("u-g1")),
            record("acme.example.com/v1", "Gadget", "g1", Some("u-g1")),
            record(
                "autoscaling/v1",
                "HorizontalPodAutoscaler",
                "web",
                Some("u-hpa"),
            ),
            record(
                "autoscaling/v2",
                "HorizontalPodAutoscaler",
                "web",
                Some("u-hpa"),
            ),
            record("events.k8s.io/v1", "Event", "web.1", Some("u-ev")),
            record("v1", "Event", "web.1", Some("u-ev")),
            record("v1", "ConfigMap", "held", Some("u-cm")),
            // Not the same object: two UIDs.
            record("acme.example.com/v1alpha1", "Gadget", "g2", Some("u-g2a")),
            record("acme.example.com/v1", "Gadget", "g2", Some("u-g2b")),
            // No UID to tell: both kept.
            record("v1", "ConfigMap", "odd", None),
            record("v1", "ConfigMap", "odd", None),
        ];
        assert_eq!(
            kept(&one_per_object(records, &preferred)),
            [
                ("acme.example.com/v1", "g1"),
                ("autoscaling/v2", "web"),
                ("v1", "web.1"),
                ("v1", "held"),
                ("acme.example.com/v1alpha1", "g2"),
                ("acme.example.com/v1", "g2"),
                ("v1", "odd"),
                ("v1", "odd"),
            ]
            .map(|(a, b)| (a.to_owned(), b.to_owned()))
        );
    }

    #[test]
    fn when_the_preferred_version_did_not_answer_the_object_is_kept_under_another() {
        let preferred: BTreeSet<String> = ["acme.example.com/v1".to_owned()].into();
        let records = vec![
            record("acme.example.com/v1beta1", "Gadget", "g1", Some("u")),
            record("acme.example.com/v1alpha1", "Gadget", "g1", Some("u")),
        ];
        assert_eq!(
            kept(&one_per_object(records, &preferred)),
            [("acme.example.com/v1alpha1".to_owned(), "g1".to_owned())]
        );
    }
}
