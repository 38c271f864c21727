//! braid over real RNICs: the verbs seam ([`braid_verbs::Verbs`]) implemented over rdma-core's
//! libibverbs, an event loop that drives an [`braid_verbs::App`] and its middleware stack on a
//! real device as the simulator does, out-of-band endpoint exchange over TCP, and the binaries
//! `braid-perftest` and `braid-conformance`.
//!
//! The backend is behind the `rdma` cargo feature (off by default: building it needs clang,
//! libclang-dev and cmake for the binding's bindgen step). The binding is `rdma-mummy-sys`, the
//! FFI layer of the `sideway` crate: it loads `libibverbs.so.1` at run time, so a binary built
//! with the feature still starts on a machine without rdma-core and reports what is missing.

pub mod memory;
pub mod oob;
pub mod psn;
pub mod wr_ledger;

#[cfg(feature = "rdma")]
pub mod real {
    pub mod consts;
    pub mod host;
    pub mod nic;
}

/// Why the real backend cannot run here, if it cannot: one line naming what is missing.
pub fn unavailable() -> Option<String> {
    #[cfg(not(feature = "rdma"))]
    {
        Some(
            "braid was built without the real-NIC backend: rebuild with `cargo build -p braid-rdma --features rdma` (needs clang, libclang-dev and cmake; at run time rdma-core's libibverbs1 and ibverbs-providers)".into(),
        )
    }
    #[cfg(feature = "rdma")]
    {
        (!real::nic::libibverbs_present()).then(|| {
            "libibverbs.so.1 cannot be loaded: install rdma-core's libibverbs1 and ibverbs-providers (apt-get install ibverbs-providers)".into()
        })
    }
}
