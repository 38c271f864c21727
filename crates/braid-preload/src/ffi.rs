//! Our own `#[repr(C)]` definitions of the public rdma-core structs the preload touches, written
//! from `<infiniband/verbs.h>` (rdma-core 44, Debian 12's libibverbs-dev; the same layouts in
//! upstream v64). Only what is read or written is spelled out; structs reached only through
//! pointers the preload passes on unchanged stay opaque. These are the *public* ABI every
//! ibverbs application is compiled against, which rdma-core keeps stable across releases.

#![allow(non_camel_case_types)]

use std::ffi::{c_int, c_uint, c_void};

/// `pthread_mutex_t` on x86_64 and aarch64 glibc: 40 and 48 bytes; we only need it as padding
/// before later fields, so it is sized for the larger and only used where nothing follows that
/// we read (`ibv_qp`, `ibv_cq`, `ibv_srq` are read up to their last field before the mutex).
#[repr(C, align(8))]
#[derive(Clone, Copy)]
pub struct pthread_mutex_t {
    _opaque: [u8; 40],
}

/// Opaque types: only ever behind pointers.
#[repr(C)]
pub struct ibv_device {
    _opaque: [u8; 0],
}
#[repr(C)]
pub struct ibv_pd {
    pub context: *mut ibv_context,
    pub handle: u32,
}
#[repr(C)]
pub struct ibv_ah {
    _opaque: [u8; 0],
}
#[repr(C)]
pub struct ibv_comp_channel {
    pub context: *mut ibv_context,
    pub fd: c_int,
    pub refcnt: c_int,
}

pub type PostSendFn =
    unsafe extern "C" fn(*mut ibv_qp, *mut ibv_send_wr, *mut *mut ibv_send_wr) -> c_int;
pub type PostRecvFn =
    unsafe extern "C" fn(*mut ibv_qp, *mut ibv_recv_wr, *mut *mut ibv_recv_wr) -> c_int;
pub type PostSrqRecvFn =
    unsafe extern "C" fn(*mut ibv_srq, *mut ibv_recv_wr, *mut *mut ibv_recv_wr) -> c_int;
pub type PollCqFn = unsafe extern "C" fn(*mut ibv_cq, c_int, *mut ibv_wc) -> c_int;
pub type ReqNotifyCqFn = unsafe extern "C" fn(*mut ibv_cq, c_int) -> c_int;
pub type CreateQpExFn =
    unsafe extern "C" fn(*mut ibv_context, *mut ibv_qp_init_attr_ex) -> *mut ibv_qp;
pub type CreateCqExFn =
    unsafe extern "C" fn(*mut ibv_context, *mut ibv_cq_init_attr_ex) -> *mut ibv_cq;

type Compat = Option<unsafe extern "C" fn() -> *mut c_void>;

/// `struct ibv_context_ops` (verbs.h): 32 pointers. `verbs_set_ops()` fills the five data-path
/// ones per context in writable memory; the inline `ibv_post_send` & co. call through them.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_context_ops {
    pub _compat_query_device: Compat,
    pub _compat_query_port: Compat,
    pub _compat_alloc_pd: Compat,
    pub _compat_dealloc_pd: Compat,
    pub _compat_reg_mr: Compat,
    pub _compat_rereg_mr: Compat,
    pub _compat_dereg_mr: Compat,
    pub alloc_mw: Compat,
    pub bind_mw: Compat,
    pub dealloc_mw: Compat,
    pub _compat_create_cq: Compat,
    pub poll_cq: Option<PollCqFn>,
    pub req_notify_cq: Option<ReqNotifyCqFn>,
    pub _compat_cq_event: Compat,
    pub _compat_resize_cq: Compat,
    pub _compat_destroy_cq: Compat,
    pub _compat_create_srq: Compat,
    pub _compat_modify_srq: Compat,
    pub _compat_query_srq: Compat,
    pub _compat_destroy_srq: Compat,
    pub post_srq_recv: Option<PostSrqRecvFn>,
    pub _compat_create_qp: Compat,
    pub _compat_query_qp: Compat,
    pub _compat_modify_qp: Compat,
    pub _compat_destroy_qp: Compat,
    pub post_send: Option<PostSendFn>,
    pub post_recv: Option<PostRecvFn>,
    pub _compat_create_ah: Compat,
    pub _compat_destroy_ah: Compat,
    pub _compat_attach_mcast: Compat,
    pub _compat_detach_mcast: Compat,
    pub _compat_async_event: Compat,
}

/// `struct ibv_context` (verbs.h).
#[repr(C)]
pub struct ibv_context {
    pub device: *mut ibv_device,
    pub ops: ibv_context_ops,
    pub cmd_fd: c_int,
    pub async_fd: c_int,
    pub num_comp_vectors: c_int,
    pub mutex: pthread_mutex_t,
    pub abi_compat: *mut c_void,
}

/// `__VERBS_ABI_IS_EXTENDED` (verbs.h): `abi_compat` of a context embedded in a `verbs_context`.
pub const VERBS_ABI_IS_EXTENDED: usize = usize::MAX;

type Opaque = Option<unsafe extern "C" fn()>;

/// `struct verbs_context` (verbs.h): grows *up*, the `ibv_context` is its last field and `sz`
/// says how much of it a provider filled. Only `create_cq_ex` and `create_qp_ex` are used.
#[repr(C)]
pub struct verbs_context {
    pub query_port: Opaque,
    pub advise_mr: Opaque,
    pub alloc_null_mr: Opaque,
    pub read_counters: Opaque,
    pub attach_counters_point_flow: Opaque,
    pub create_counters: Opaque,
    pub destroy_counters: Opaque,
    pub reg_dm_mr: Opaque,
    pub alloc_dm: Opaque,
    pub free_dm: Opaque,
    pub modify_flow_action_esp: Opaque,
    pub destroy_flow_action: Opaque,
    pub create_flow_action_esp: Opaque,
    pub modify_qp_rate_limit: Opaque,
    pub alloc_parent_domain: Opaque,
    pub dealloc_td: Opaque,
    pub alloc_td: Opaque,
    pub modify_cq: Opaque,
    pub post_srq_ops: Opaque,
    pub destroy_rwq_ind_table: Opaque,
    pub create_rwq_ind_table: Opaque,
    pub destroy_wq: Opaque,
    pub modify_wq: Opaque,
    pub create_wq: Opaque,
    pub query_rt_values: Opaque,
    pub create_cq_ex: Option<CreateCqExFn>,
    pub priv_: *mut c_void,
    pub query_device_ex: Opaque,
    pub ibv_destroy_flow: Opaque,
    pub abi_placeholder2: Opaque,
    pub ibv_create_flow: Opaque,
    pub abi_placeholder1: Opaque,
    pub open_qp: Opaque,
    pub create_qp_ex: Option<CreateQpExFn>,
    pub get_srq_num: Opaque,
    pub create_srq_ex: Opaque,
    pub open_xrcd: Opaque,
    pub close_xrcd: Opaque,
    pub abi_placeholder3: u64,
    pub sz: usize,
    pub context: ibv_context,
}

/// `struct ibv_qp` up to `qp_type` (the rest is the provider's mutex and condition).
#[repr(C)]
pub struct ibv_qp {
    pub context: *mut ibv_context,
    pub qp_context: *mut c_void,
    pub pd: *mut ibv_pd,
    pub send_cq: *mut ibv_cq,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut ibv_srq,
    pub handle: u32,
    pub qp_num: u32,
    pub state: c_uint,
    pub qp_type: c_uint,
}

/// `struct ibv_cq` up to `cqe`.
#[repr(C)]
pub struct ibv_cq {
    pub context: *mut ibv_context,
    pub channel: *mut ibv_comp_channel,
    pub cq_context: *mut c_void,
    pub handle: u32,
    pub cqe: c_int,
}

/// `struct ibv_srq` up to `handle`.
#[repr(C)]
pub struct ibv_srq {
    pub context: *mut ibv_context,
    pub srq_context: *mut c_void,
    pub pd: *mut ibv_pd,
    pub handle: u32,
}

/// `struct ibv_mr` (verbs.h).
#[repr(C)]
pub struct ibv_mr {
    pub context: *mut ibv_context,
    pub pd: *mut ibv_pd,
    pub addr: *mut c_void,
    pub length: usize,
    pub handle: u32,
    pub lkey: u32,
    pub rkey: u32,
}

/// `struct ibv_sge`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ibv_sge {
    pub addr: u64,
    pub length: u32,
    pub lkey: u32,
}

/// `wr.rdma`, `wr.atomic` and `wr.ud` of `ibv_send_wr` share one union; `atomic` is the largest
/// (8 + 8 + 8 + 4, padded to 32).
#[repr(C)]
#[derive(Clone, Copy)]
pub union ibv_send_wr_wr {
    pub rdma: WrRdma,
    pub atomic: WrAtomic,
    pub ud: WrUd,
}
#[repr(C)]
#[derive(Clone, Copy)]
pub struct WrRdma {
    pub remote_addr: u64,
    pub rkey: u32,
}
#[repr(C)]
#[derive(Clone, Copy)]
pub struct WrAtomic {
    pub remote_addr: u64,
    pub compare_add: u64,
    pub swap: u64,
    pub rkey: u32,
}
#[repr(C)]
#[derive(Clone, Copy)]
pub struct WrUd {
    pub ah: *mut ibv_ah,
    pub remote_qpn: u32,
    pub remote_qkey: u32,
}

/// `struct ibv_send_wr` (verbs.h). The trailing `qp_type` (xrc) and `bind_mw`/`tso` unions are
/// kept as bytes: the preload passes WRs that use them through unchanged.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_send_wr {
    pub wr_id: u64,
    pub next: *mut ibv_send_wr,
    pub sg_list: *mut ibv_sge,
    pub num_sge: c_int,
    pub opcode: c_uint,
    pub send_flags: c_uint,
    /// Network byte order for the `*_WITH_IMM` opcodes.
    pub imm_data: u32,
    pub wr: ibv_send_wr_wr,
    pub xrc_remote_srqn: u32,
    /// `bind_mw` { mw*, rkey, ibv_mw_bind_info { mr*, addr, length, access } } is the larger
    /// member of the last union: 8 + 4(+4) + 8 + 8 + 8 + 4(+4) = 48 bytes.
    pub bind_mw_or_tso: [u64; 6],
}

/// `struct ibv_recv_wr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_recv_wr {
    pub wr_id: u64,
    pub next: *mut ibv_recv_wr,
    pub sg_list: *mut ibv_sge,
    pub num_sge: c_int,
}

/// `struct ibv_wc` (verbs.h).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ibv_wc {
    pub wr_id: u64,
    pub status: c_uint,
    pub opcode: c_uint,
    pub vendor_err: u32,
    pub byte_len: u32,
    /// Network byte order when `wc_flags & IBV_WC_WITH_IMM`.
    pub imm_data: u32,
    pub qp_num: u32,
    pub src_qp: u32,
    pub wc_flags: c_uint,
    pub pkey_index: u16,
    pub slid: u16,
    pub sl: u8,
    pub dlid_path_bits: u8,
}

/// `struct ibv_qp_cap`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_qp_cap {
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_inline_data: u32,
}

/// `struct ibv_qp_init_attr_ex` up to `comp_mask` and `send_ops_flags` (the fields between are
/// kept as the C layout has them so that `send_ops_flags` sits at its offset).
#[repr(C)]
pub struct ibv_qp_init_attr_ex {
    pub qp_context: *mut c_void,
    pub send_cq: *mut ibv_cq,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut ibv_srq,
    pub cap: ibv_qp_cap,
    pub qp_type: c_uint,
    pub sq_sig_all: c_int,
    pub comp_mask: u32,
    pub pd: *mut ibv_pd,
    pub xrcd: *mut c_void,
    pub create_flags: u32,
    pub max_tso_header: u16,
    pub rwq_ind_tbl: *mut c_void,
    /// `struct ibv_rx_hash_conf` { u8 function; u8 key_len; u8 *key; u64 fields_mask }.
    pub rx_hash_conf: [u64; 3],
    pub source_qpn: u32,
    pub send_ops_flags: u64,
}

/// The head of `struct ibv_qp_attr`, up to the destination GID (what the preload reads at RTR:
/// the QP state, the remote QP number and the remote GID).
#[repr(C)]
pub struct ibv_qp_attr_head {
    pub qp_state: c_uint,
    pub cur_qp_state: c_uint,
    pub path_mtu: c_uint,
    pub path_mig_state: c_uint,
    pub qkey: u32,
    pub rq_psn: u32,
    pub sq_psn: u32,
    pub dest_qp_num: u32,
    pub qp_access_flags: c_uint,
    pub cap: ibv_qp_cap,
    /// `ah_attr.grh.dgid` (ah_attr starts with grh, grh with dgid; 8-byte aligned).
    pub dgid: [u8; 16],
}
/// `IBV_QP_STATE` in `ibv_modify_qp`'s mask; `IBV_QPS_RTR`.
pub const IBV_QP_STATE: c_int = 1;
pub const IBV_QPS_RTR: c_uint = 2;

/// `struct ibv_cq_init_attr_ex` (only passed on).
#[repr(C)]
pub struct ibv_cq_init_attr_ex {
    _opaque: [u8; 0],
}

// enum ibv_wr_opcode
pub const IBV_WR_RDMA_WRITE: c_uint = 0;
pub const IBV_WR_RDMA_WRITE_WITH_IMM: c_uint = 1;
pub const IBV_WR_SEND: c_uint = 2;
pub const IBV_WR_SEND_WITH_IMM: c_uint = 3;
pub const IBV_WR_RDMA_READ: c_uint = 4;
// enum ibv_send_flags
pub const IBV_SEND_FENCE: c_uint = 1 << 0;
pub const IBV_SEND_SIGNALED: c_uint = 1 << 1;
pub const IBV_SEND_SOLICITED: c_uint = 1 << 2;
pub const IBV_SEND_INLINE: c_uint = 1 << 3;
// enum ibv_wc_status (the rest: braid_verbs::WcStatus::from_ibv)
pub const IBV_WC_SUCCESS: c_uint = 0;
pub const IBV_WC_WR_FLUSH_ERR: c_uint = 5;
// enum ibv_wc_opcode
pub const IBV_WC_SEND: c_uint = 0;
pub const IBV_WC_RDMA_WRITE: c_uint = 1;
pub const IBV_WC_RDMA_READ: c_uint = 2;
pub const IBV_WC_RECV: c_uint = 1 << 7;
pub const IBV_WC_RECV_RDMA_WITH_IMM: c_uint = IBV_WC_RECV + 1;
// enum ibv_wc_flags
pub const IBV_WC_WITH_IMM: c_uint = 1 << 1;
// enum ibv_qp_type
pub const IBV_QPT_RC: c_uint = 2;
pub const IBV_QPT_UC: c_uint = 3;
pub const IBV_QPT_UD: c_uint = 4;
// enum ibv_qp_init_attr_mask
pub const IBV_QP_INIT_ATTR_SEND_OPS_FLAGS: u32 = 1 << 6;

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    /// Sizes and offsets as the C compiler lays out verbs.h on x86_64 (checked with
    /// `offsetof`/`sizeof` against Debian 12's header; see docs/preload.md).
    #[test]
    #[cfg(target_arch = "x86_64")]
    fn layouts_match_verbs_h() {
        assert_eq!(size_of::<ibv_context_ops>(), 32 * 8);
        assert_eq!(offset_of!(ibv_context_ops, poll_cq), 11 * 8);
        assert_eq!(offset_of!(ibv_context_ops, post_srq_recv), 20 * 8);
        assert_eq!(offset_of!(ibv_context_ops, post_send), 25 * 8);
        assert_eq!(size_of::<ibv_context>(), 328);
        assert_eq!(offset_of!(ibv_context, abi_compat), 320);
        assert_eq!(size_of::<ibv_send_wr>(), 128);
        assert_eq!(offset_of!(ibv_send_wr, wr), 40);
        assert_eq!(size_of::<ibv_recv_wr>(), 32);
        assert_eq!(size_of::<ibv_wc>(), 48);
        assert_eq!(offset_of!(ibv_qp, qp_num), 52);
        assert_eq!(offset_of!(ibv_qp_init_attr_ex, send_ops_flags), 128);
        assert_eq!(offset_of!(verbs_context, create_qp_ex), 264);
        assert_eq!(offset_of!(verbs_context, context), 320);
        // ibv_qp_attr's head: nine 4-byte fields, ibv_qp_cap (20 B), then ah_attr.grh.dgid at
        // the next 8-byte boundary (union ibv_gid holds two __be64). Derived from verbs.h's
        // declarations, not yet compared with gcc's offsetof.
        assert_eq!(offset_of!(ibv_qp_attr_head, dest_qp_num), 28);
        assert_eq!(offset_of!(ibv_qp_attr_head, dgid), 56);
    }
}
