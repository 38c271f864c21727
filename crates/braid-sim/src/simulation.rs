//! A run: scenario in, results out. (Being built: this file is replaced by the real world.)
use crate::api::{Results, ScenarioError};
use std::path::Path;

pub struct Simulation {
    now: u64,
    end: u64,
}

impl Simulation {
    /// Builds a run from a scenario given as JSON (the front end parses TOML and applies
    /// overrides). Relative file paths in the scenario resolve against `base_dir`.
    pub fn from_json(_json: &str, _base_dir: &Path, _seed: Option<u64>) -> Result<Self, ScenarioError> {
        Err(ScenarioError { path: String::new(), message: "simulator not built yet".into() })
    }
    pub fn now_ps(&self) -> u64 { self.now }
    pub fn end_ps(&self) -> u64 { self.end }
    /// Advances to `until_ps` (or the end); returns true once the run is finished.
    pub fn advance(&mut self, until_ps: u64) -> bool { self.now = until_ps.min(self.end); self.now >= self.end }
    pub fn is_finished(&self) -> bool { self.now >= self.end }
    pub fn results(&self) -> Results { Results::default() }
}

/// The scenario schema as JSON Schema text.
pub fn scenario_json_schema() -> String { "{}".into() }
