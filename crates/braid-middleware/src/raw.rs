//! `raw`: plain RDMA, every verb passed straight to the NIC (the baseline of every comparison).

use braid_verbs::{BuildError, HostCtx, Middleware, MiddlewareFactory, Raw, TenantId};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `{ kind = "raw" }`: no parameters.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {}

impl MiddlewareFactory for RawConfig {
    fn name(&self) -> &'static str {
        "raw"
    }
    fn build(&self, _: &mut HostCtx, _: TenantId) -> Result<Box<dyn Middleware>, BuildError> {
        Ok(Box::new(Raw))
    }
}
