//! Model parameters as they appear in scenario files: switches, NICs, transports, measurement.
//! Defaults are the values of the papers the models come from; every one can be set.
//!
//! Each config type lives beside the code it configures and validates itself (issue 29 step 1);
//! this module only re-exports them under the names scenarios and the Python front know.

pub use crate::dcqcn::config::{DcqcnConfig, DcqcnNotify, DcqcnReaction};
pub use crate::hostverbs::{CpuConfig, HostConfig};
pub use crate::measure::MeasureConfig;
pub use crate::net::config::{
    EcnByPort, EcnByRate, EcnConfig, EcnCurve, PfcConfig, Scheduler, SwitchConfig,
};
pub use crate::nic::config::{AckPriority, ArbiterPolicy, NicConfig};
pub use crate::stacks::MiddlewareConfig;
pub use crate::trace::ports::{QueueFacing, QueueSpec};
pub use crate::transport::config::{
    IrnConfig, MpRdmaConfig, Recovery, SyncMode, TransportConfig, TransportKind, TransportOverride,
};
pub use crate::world::config::{LinkEvent, RouteAddr, RouteSrc, StaticRoute};

// The kinds, their configs and their factories are braid-apps' (`braid_apps::kinds`, the tagged
// `AppSpec`); an `[[apps]]` entry places one in the run (`crate::app_build::AppEntry`).
pub use crate::app_build::AppEntry;
pub use braid_apps::redis::RedisMix;
pub use braid_apps::{AppKind, AppMode, AppSpec};
