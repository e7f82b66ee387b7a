//! Scenario files: the model and the loader.
