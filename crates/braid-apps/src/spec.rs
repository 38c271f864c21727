//! An `[[apps]]` table's keys: those every kind takes ([`AppCommon`], written once here and
//! put into every kind's config by [`app_config!`]) and each kind's own, declared in the kind's
//! file beside its factory ([`KindConfig`]). The tagged [`crate::AppSpec`] (`kind = "..."`)
//! holds one of them.
//!
//! A runner (the simulator, `braid-perftest`) owns the keys that place an application
//! (`src`, `dst`, its transport and verbs stack); they are not here.

use crate::{AppFactory, AppKind, KeyError, PerfKind, PerfSpec};

/// The keys every kind takes, in the units the applications use: bytes and picoseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AppCommon {
    pub size: u64,
    pub qps: u32,
    pub tx_depth: u32,
    pub iterations: Option<u64>,
    pub duration: Option<u64>,
    pub start: u64,
    pub cq_mod: u32,
    pub priority: Option<u8>,
}

impl AppCommon {
    /// The checks every kind makes; `attacker`: an attacker's `duration` is its patience and
    /// its `iterations` a count of its own, so it may set both.
    pub fn validate(&self, attacker: bool) -> Result<(), KeyError> {
        if self.qps == 0 {
            return Err(KeyError::new("qps", "expected at least 1"));
        }
        if self.tx_depth == 0 {
            return Err(KeyError::new("tx_depth", "expected at least 1"));
        }
        if self.cq_mod == 0 {
            return Err(KeyError::new("cq_mod", "expected at least 1"));
        }
        if self.iterations.is_some() && self.duration.is_some() && !attacker {
            return Err(KeyError::new(
                "duration",
                "set either iterations or duration, not both",
            ));
        }
        if self.iterations == Some(0) {
            return Err(KeyError::new("iterations", "expected at least 1"));
        }
        Ok(())
    }

    /// The benchmark engine's parameters, for an app running as `kind`.
    pub fn perf(&self, kind: PerfKind, post_list: u32) -> PerfSpec {
        PerfSpec {
            kind,
            size: self.size,
            qps: self.qps,
            tx_depth: self.tx_depth,
            iterations: self.iterations,
            duration: self.duration,
            start: self.start,
            cq_mod: self.cq_mod,
            post_list,
            priority: self.priority,
        }
    }
}

/// A kind's config, as its file declares it with [`app_config!`].
pub trait KindConfig {
    /// The optional keys only some kinds take (`ONLY_SOME_KINDS` in `kinds.rs`) that this one
    /// does (a test checks them against the config's own keys).
    fn keys() -> &'static [&'static str]
    where
        Self: Sized;

    /// An attacker (`crate::attack`): its `duration` is its patience, and it is nobody's victim.
    fn attacker() -> bool
    where
        Self: Sized,
    {
        false
    }

    /// The keys every kind takes.
    fn common(&self) -> AppCommon;

    /// Checks the kind's own keys and makes its factory; `kind` says which of the kinds that
    /// share this config (the perftest kinds) it is.
    fn factory(&self, kind: AppKind) -> Result<Box<dyn AppFactory>, KeyError>;

    /// An attacker's victim (the index of the `[[apps]]` entry it attacks), if it names one.
    fn victim(&self) -> Option<u32> {
        None
    }
}

pub(crate) fn one() -> u32 {
    1
}

pub(crate) fn sixteen() -> u32 {
    16
}

/// Declares a kind's config: the struct with the keys every kind takes (serde, schema, unknown
/// keys refused) followed by the kind's own, and its [`AppCommon`].
macro_rules! app_config {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $( $(#[$fmeta:meta])* pub $field:ident : $ty:ty, )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
        #[serde(deny_unknown_fields)]
        #[schemars(inline)]
        pub struct $name {
            /// Bytes per message (kv, redis: the largest value).
            pub size: braid_units::Bytes,
            #[serde(default = "crate::spec::one")]
            pub qps: u32,
            /// Outstanding work requests per QP.
            #[serde(default = "crate::spec::sixteen")]
            pub tx_depth: u32,
            /// Messages per QP; with neither iterations nor duration, 1000.
            pub iterations: Option<u64>,
            pub duration: Option<braid_units::Duration>,
            #[serde(default)]
            pub start: braid_units::Duration,
            /// Use signaled completions every `cq_mod` messages (perftest --cq-mod).
            #[serde(default = "crate::spec::one")]
            pub cq_mod: u32,
            /// Service level (traffic class) of this application's QPs, both ends: the priority of
            /// its packets in switches and its class at the NIC's arbiter (`nic.arbiter`).
            /// Default: `nic.priority`.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub priority: Option<u8>,
            $( $(#[$fmeta])* pub $field: $ty, )*
        }

        impl $name {
            /// The keys every kind takes, in bytes and picoseconds.
            pub fn common_keys(&self) -> $crate::spec::AppCommon {
                $crate::spec::AppCommon {
                    size: self.size.0,
                    qps: self.qps,
                    tx_depth: self.tx_depth,
                    iterations: self.iterations,
                    duration: self.duration.map(|d| d.0),
                    start: self.start.0,
                    cq_mod: self.cq_mod,
                    priority: self.priority,
                }
            }

        }
    };
}

pub(crate) use app_config;
