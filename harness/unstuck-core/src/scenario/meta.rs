//! What a scenario is, as every report of a run shows it: the one place a
//! scenario's descriptive fields are gathered for the reports. A field
//! added here (and filled in [`Scenario::meta`]) reaches the JSON report
//! of every run as it is; a renderer that shows it is the only other
//! change.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::model::{Scenario, incident_url};

/// A scenario's metadata, without its steps. Keys are snake_case, as the
/// run reports have always written them (`catalog_case`), unlike the
/// scenario file's camelCase.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScenarioMeta {
    /// [`Scenario::name`].
    pub name: String,
    /// [`Scenario::description`].
    pub description: String,
    /// [`Scenario::catalog_case`].
    #[serde(default)]
    pub catalog_case: Option<u32>,
    /// [`Scenario::incident`]: `owner/repo#number`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incident: Option<String>,
    /// [`Scenario::seeds`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub seeds: Vec<String>,
    /// The file the scenario was loaded from.
    pub file: PathBuf,
}

impl ScenarioMeta {
    /// The web address of the incident's thread, when it names one.
    pub fn incident_url(&self) -> Option<String> {
        self.incident.as_deref().and_then(incident_url)
    }
}

impl Scenario {
    /// The scenario's metadata, as reports keep it.
    pub fn meta(&self) -> ScenarioMeta {
        ScenarioMeta {
            name: self.name.to_string(),
            description: self.description.to_string(),
            catalog_case: self.catalog_case,
            incident: self.incident.as_ref().map(|i| i.to_string()),
            seeds: self.seeds.iter().map(|s| s.to_string()).collect(),
            file: self.path().to_path_buf(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_metadata_is_the_scenario_files_own() {
        let s = crate::scenario::load_str(
            "name: demo\ndescription: a demo\ncatalogCase: 3\nseeds: [\"001\"]\nincident: a/b#7\nnamespaces: [app]\nsteps:\n  - delete: {kind: ConfigMap, name: m, namespace: app}\n",
            std::path::Path::new("scenarios/demo.yaml"),
        )
        .expect("loads");
        let meta = s.meta();
        assert_eq!(
            meta,
            ScenarioMeta {
                name: "demo".into(),
                description: "a demo".into(),
                catalog_case: Some(3),
                incident: Some("a/b#7".into()),
                seeds: vec!["001".into()],
                file: "scenarios/demo.yaml".into(),
            }
        );
        assert_eq!(
            meta.incident_url().as_deref(),
            Some("https://github.com/a/b/issues/7")
        );
    }
}
