//! `kind = "hpcc"`: an HPCC ns-3 topology file.

use super::{resolve, Graph, SpecError, TopologyKind};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// An HPCC ns-3 topology file (line 1 `nodes switches links`, line 2 the switch ids, then
/// `src dst rate delay error_rate`), relative to the scenario's directory. Node ids are kept;
/// names are `n{id}`. `default_loss` is the loss rate of links whose error_rate in the file is
/// 0 (HPCC's ERROR_RATE_PER_LINK: ns-3 gives those links this error model).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(inline)]
pub struct Hpcc {
    pub file: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_loss: Option<f64>,
}

impl TopologyKind for Hpcc {
    fn size_key(&self) -> &'static str {
        "file"
    }

    fn build(&self, base_dir: &Path) -> Result<Graph, SpecError> {
        if let Some(p) = self.default_loss {
            if !(0.0..=1.0).contains(&p) {
                return Err(SpecError::new(
                    "default_loss",
                    "expected a loss probability between 0 and 1",
                ));
            }
        }
        let path = resolve(base_dir, &self.file);
        let mut g = crate::hpcc::read_topology(&path).map_err(|e| SpecError::new("file", e))?;
        if let Some(p) = self.default_loss {
            for l in g.links.iter_mut().filter(|l| l.loss == 0.0) {
                l.loss = p;
            }
        }
        Ok(g)
    }
}
