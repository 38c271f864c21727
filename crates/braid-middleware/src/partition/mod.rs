//! `partition`: RDMA load balancing via data partition (Wang et al., "RDMA Load Balancing via
//! Data Partition"; `docs/partition.md`).
//!
//! One logical connection is carried by `qps` RC QPs, each with its own UDP source port so that
//! ECMP hashes them onto (possibly) different paths. The application creates one QP; the layer
//! creates `qps - 1` more beside it ("members"), publishes them on the out-of-band board under a
//! key derived from (host, the application's QP number), and connects them when the application
//! connects its QP (that is when it learns the peer's host and QP number). A peer that published
//! nothing (it does not run the layer) gets a one-member connection: plain RDMA through the layer.
//!
//! Every message the application posts is cut into `chunk`-byte chunks:
//! - WRITE: chunks are WRITEs at `remote_addr + offset` (the RDMA address is the chunk's
//!   (data id, offset) header: the peer's NIC places it, zero copy);
//! - SEND / SEND_WITH_IMM: chunks are SENDs of a 32-byte header (data id, total size, offset,
//!   length, imm) plus the payload, into the receiving layer's own tracked buffers; the receiver
//!   allocates by total size, reassembles by (data id, offset) in any arrival order, and copies
//!   the message into the application's posted RECV (`Work::Copy`);
//! - WRITE_WITH_IMM: WRITEs, then the last chunk as a WRITE_WITH_IMM with the application's imm,
//!   preceded on the same QP by a header SEND so the receiver can report the total length.
//!
//! The last chunk of a message that completes at the receiver (SEND, *_WITH_IMM) is held back
//! until every earlier chunk of the connection has completed, or is queued on the same QP behind
//! them (RC orders one QP), so the receiver's completion still means "all earlier data placed".
//!
//! Assignment (`assign`): `static` deals chunk i to member i mod n up front (the paper's even
//! allocation); `dynamic` gives a member the next chunk when its previous ones complete (the
//! paper's Algorithms 1 and 2), at most `window` bytes outstanding per member (`window = chunk`
//! is exactly one chunk per QP, the paper's loop).
//!
//! The application sees one completion per message (signaled or on error), in posting order.
//! A member that fails (RetryExceeded, flushed) is dropped and its unfinished chunks are re-sent
//! on the surviving members (`resend = true`, the default); when none survives, or with
//! `resend = false`, the application's WR completes with the error and its logical QP goes to
//! Error.

mod conn;
mod layer;
mod rx;
mod send;
#[cfg(test)]
mod tests;
mod wire;

pub use layer::PartitionLayer;

use braid_units::Bytes;
use braid_verbs::{BuildError, HostCtx, Middleware, MiddlewareFactory, TenantId};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How chunks are dealt to the members of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Assign {
    /// Chunk i goes to member i mod n (the paper's even allocation, its Fig. 2).
    Static,
    /// A member gets the next chunk when its outstanding ones complete (Algorithms 1 and 2,
    /// Fig. 3).
    Dynamic,
}

/// The largest `qps` (the paper sweeps 1 to 16).
pub const MAX_QPS: u32 = 16;

/// `{ kind = "partition", qps = 4, chunk = "32KiB", assign = "dynamic" }`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct PartitionConfig {
    /// QPs per logical connection, the application's included (1..=16). The paper finds 2 to 5
    /// reasonable.
    pub qps: u32,
    /// Chunk size. The paper's threshold: flat up to 32K, worse above.
    pub chunk: Bytes,
    /// `static` or `dynamic`.
    pub assign: Assign,
    /// Bytes outstanding per member QP (at least one chunk is always allowed). `window = chunk`
    /// is the paper's one chunk per QP; the default (256 KiB) keeps a few round trips of a 40G
    /// path in flight even when queues build, so small chunks are not round-trip bound.
    pub window: Bytes,
    /// Re-send a failed member's chunks on the surviving members (true), or fail the
    /// application's WR and logical QP at once (false).
    pub resend: bool,
    /// Receive buffers per member QP for SEND chunks (posted once the application posts a RECV).
    pub recv_buffers: u32,
    /// Spread members over the host's addresses too (member i uses address i mod k), so static
    /// routes that match the source address (`routes[].src`) can pin paths.
    pub spread_addrs: bool,
}

impl Default for PartitionConfig {
    fn default() -> Self {
        PartitionConfig {
            qps: 4,
            chunk: Bytes(32 * 1024),
            assign: Assign::Dynamic,
            window: Bytes(256 * 1024),
            resend: true,
            recv_buffers: 16,
            spread_addrs: true,
        }
    }
}

impl PartitionConfig {
    /// Checks every key; the error names the first one at fault.
    pub fn validate(&self) -> Result<(), BuildError> {
        if self.qps == 0 || self.qps > MAX_QPS {
            return Err(BuildError::new("qps", "expected an integer from 1 to 16"));
        }
        if self.chunk.0 < 64 || self.chunk.0 > (1 << 30) {
            return Err(BuildError::new(
                "chunk",
                "expected a size from 64 B to 1 GiB",
            ));
        }
        if self.window.0 == 0 {
            return Err(BuildError::new("window", "expected at least 1 B"));
        }
        if self.recv_buffers == 0 || self.recv_buffers > 4096 {
            return Err(BuildError::new(
                "recv_buffers",
                "expected an integer from 1 to 4096",
            ));
        }
        Ok(())
    }
}

impl MiddlewareFactory for PartitionConfig {
    fn name(&self) -> &'static str {
        "partition"
    }
    fn build(
        &self,
        host: &mut HostCtx,
        tenant: TenantId,
    ) -> Result<Box<dyn Middleware>, BuildError> {
        self.validate()?;
        let caps = host.caps();
        // Paths come from UDP source ports (ECMP), or, on a NIC that derives the port itself
        // (rxe: from the QP number), from the host's addresses: member i on address i mod k,
        // routed by source address (two subnets, one per link).
        let by_addr = self.spread_addrs && caps.local_addrs.len() > 1;
        if self.qps > 1 && !caps.sport_control && !by_addr {
            return Err(BuildError::missing_cap(
                "UDP source-port control (to spread its QPs over ECMP paths), or several local addresses with spread_addrs",
                "partition",
            ));
        }
        if !caps.data_tracking {
            return Err(BuildError::missing_cap(
                "data tracking (chunk headers are read by the receiver)",
                "partition",
            ));
        }
        let Some(board) = host.board().cloned() else {
            return Err(BuildError::missing_cap(
                "an out-of-band board to exchange its extra QPs (HostCtx::board)",
                "partition",
            ));
        };
        Ok(Box::new(PartitionLayer::new(
            self.clone(),
            tenant,
            board,
            host.seed(),
        )))
    }
}
