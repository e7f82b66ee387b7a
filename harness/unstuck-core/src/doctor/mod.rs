//! The doctor: snapshot types, diagnosis and remedy planning.
