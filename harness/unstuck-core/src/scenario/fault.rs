//! A `fault` step, as written: `- fault: {busyMount: {pod: web, namespace: app}}`,
//! or with a fault's own parameters beside the pod,
//! `- fault: {holdVolume: {pod: envoy, namespace: app, volume: cfg}}`.
//!
//! One type for every fault: which faults exist, and what each takes, is
//! the [catalogue](super::fault_catalogue)'s, so adding a fault adds no
//! type or match arm here. An unknown fault name is refused while parsing
//! (serde's "unknown variant ..., expected one of ..." at the name); an
//! unknown or missing parameter by validation, at its line.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer, de, ser::SerializeMap};

use super::fault_catalogue::{FAULT_NAMES, FaultSpec, POD_KEYS, fault_spec};
use super::located::Located;
use super::refs::PodRef;

/// A fault injected on a node, because it cannot be caused through the API.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fault {
    /// Its name, one of the catalogue's.
    pub kind: Located<String>,
    /// The pod it targets (and so the node it is injected on).
    pub pod: PodRef,
    /// Its own parameters, in the order written.
    pub params: Vec<FaultParam>,
}

/// One parameter of a fault, as written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FaultParam {
    pub name: Located<String>,
    pub value: Located<String>,
}

impl Fault {
    /// The fault's name as written in the file.
    pub fn kind(&self) -> &str {
        &self.kind
    }

    /// The pod the fault targets.
    pub fn pod(&self) -> &PodRef {
        &self.pod
    }

    /// The catalogue's entry (always there in a loaded scenario).
    pub fn spec(&self) -> Option<&'static FaultSpec> {
        fault_spec(&self.kind)
    }

    /// The value of the parameter `name`, when written.
    pub fn param(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|p| p.name.as_str() == name)
            .map(|p| p.value.as_str())
    }

    /// The parameters as a JSON object, for an injector to deserialize
    /// into its own type.
    pub fn params_json(&self) -> serde_json::Value {
        serde_json::Value::Object(
            self.params
                .iter()
                .map(|p| (p.name.value.clone(), p.value.value.clone().into()))
                .collect(),
        )
    }

    /// Whether the fault touches a node (and so may disturb other
    /// scenarios' pods on it).
    pub fn is_node_level(&self) -> bool {
        self.spec().is_none_or(|s| s.node_level)
    }
}

impl fmt::Display for Fault {
    /// `holdVolume on pod app/envoy (volume cfg)`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} on pod {}", self.kind, self.pod)?;
        for (i, p) in self.params.iter().enumerate() {
            f.write_str(if i == 0 { " (" } else { ", " })?;
            write!(f, "{} {}", p.name, p.value)?;
        }
        if !self.params.is_empty() {
            f.write_str(")")?;
        }
        Ok(())
    }
}

impl Serialize for Fault {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        struct Body<'a>(&'a Fault);
        impl Serialize for Body<'_> {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                let mut map = serializer.serialize_map(Some(2 + self.0.params.len()))?;
                map.serialize_entry("pod", &self.0.pod.pod)?;
                map.serialize_entry("namespace", &self.0.pod.namespace)?;
                for p in &self.0.params {
                    map.serialize_entry(&p.name, &p.value)?;
                }
                map.end()
            }
        }
        let mut map = serializer.serialize_map(Some(1))?;
        map.serialize_entry(&self.kind, &Body(self))?;
        map.end()
    }
}

impl<'de> Deserialize<'de> for Fault {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(FaultVisitor)
    }
}

/// Reads the one-key mapping `{<name>: {...}}`.
struct FaultVisitor;

impl<'de> de::Visitor<'de> for FaultVisitor {
    type Value = Fault;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a mapping with one fault, such as {busyMount: {pod: web, namespace: app}}")
    }

    fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<Fault, A::Error> {
        let Some(kind) = map.next_key::<Located<String>>()? else {
            return Err(de::Error::invalid_length(0, &self));
        };
        if fault_spec(&kind).is_none() {
            return Err(de::Error::unknown_variant(&kind, &FAULT_NAMES));
        }
        let body: Body = map.next_value()?;
        if let Some(second) = map.next_key::<Located<String>>()? {
            return Err(de::Error::custom(format_args!(
                "a fault step injects one fault; `{}` is a second one (make it a step of its own)",
                second.as_str()
            )));
        }
        Ok(Fault {
            kind,
            pod: body.pod,
            params: body.params,
        })
    }
}

/// What is written under the fault's name: the pod's keys and the rest.
struct Body {
    pod: PodRef,
    params: Vec<FaultParam>,
}

impl<'de> Deserialize<'de> for Body {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(BodyVisitor)
    }
}

struct BodyVisitor;

impl<'de> de::Visitor<'de> for BodyVisitor {
    type Value = Body;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a mapping with pod, namespace and the fault's parameters")
    }

    fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<Body, A::Error> {
        let (mut pod, mut namespace) = (None, None);
        let mut params = Vec::new();
        while let Some(key) = map.next_key::<Located<String>>()? {
            let value: Located<String> = map.next_value()?;
            match key.as_str() {
                k if k == POD_KEYS[0] => pod = Some(value),
                k if k == POD_KEYS[1] => namespace = Some(value),
                _ => params.push(FaultParam { name: key, value }),
            }
        }
        Ok(Body {
            pod: PodRef {
                pod: pod.ok_or_else(|| de::Error::missing_field("pod"))?,
                namespace: namespace.ok_or_else(|| de::Error::missing_field("namespace"))?,
            },
            params,
        })
    }
}
