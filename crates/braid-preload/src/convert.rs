//! Work requests and completions between libibverbs' structs and the verbs seam's types.
//!
//! A WR the seam can express (SEND, SEND_WITH_IMM, WRITE, WRITE_WITH_IMM, READ with the FENCE,
//! SIGNALED and INLINE flags; UD SENDs through an address-handle table) goes through braid's
//! layers; anything else (atomics, memory-window binds, SEND_WITH_INV, TSO, SOLICITED,
//! IP_CSUM) is handed to the provider unchanged by the caller. Immediate data is in network
//! byte order in libibverbs and in host order in the seam.

use crate::ffi::*;
use braid_verbs::{RecvWr, RemoteQp, SendOp, SendWr, Sge, WcOpcode, WcStatus, WorkCompletion};
use std::ffi::c_uint;

/// The send flags the seam carries; a WR with any other flag is passed through.
const SEAM_FLAGS: c_uint = IBV_SEND_FENCE | IBV_SEND_SIGNALED | IBV_SEND_INLINE;

/// # Safety
/// `wr.sg_list` must point to `wr.num_sge` elements (ibv_post_send's contract).
pub unsafe fn sges(list: *const ibv_sge, n: i32) -> Vec<Sge> {
    if n <= 0 || list.is_null() {
        return Vec::new();
    }
    std::slice::from_raw_parts(list, n as usize)
        .iter()
        .map(|s| Sge {
            addr: s.addr,
            length: s.length,
            lkey: s.lkey,
        })
        .collect()
}

/// The seam's form of `wr`, or None when the seam cannot express it. `ud_ah` names a UD
/// destination (address handle and Q_Key) by a number the backend can map back.
///
/// # Safety
/// As [`sges`].
pub unsafe fn send_to_seam(
    wr: &ibv_send_wr,
    qp_type: c_uint,
    ud_ah: &mut dyn FnMut(*mut ibv_ah, u32) -> u32,
) -> Option<SendWr> {
    if wr.send_flags & !SEAM_FLAGS != 0 {
        return None;
    }
    let imm = u32::from_be(wr.imm_data);
    let op = match wr.opcode {
        IBV_WR_SEND => SendOp::Send,
        IBV_WR_SEND_WITH_IMM => SendOp::SendWithImm(imm),
        IBV_WR_RDMA_WRITE if qp_type != IBV_QPT_UD => SendOp::Write,
        IBV_WR_RDMA_WRITE_WITH_IMM if qp_type != IBV_QPT_UD => SendOp::WriteWithImm(imm),
        IBV_WR_RDMA_READ if qp_type == IBV_QPT_RC => SendOp::Read,
        _ => return None,
    };
    let mut s = SendWr::new(wr.wr_id, op, sges(wr.sg_list, wr.num_sge));
    s.signaled = wr.send_flags & IBV_SEND_SIGNALED != 0;
    s.inline = wr.send_flags & IBV_SEND_INLINE != 0;
    s.fence = wr.send_flags & IBV_SEND_FENCE != 0;
    match op {
        SendOp::Write | SendOp::WriteWithImm(_) | SendOp::Read => {
            s.remote_addr = wr.wr.rdma.remote_addr;
            s.rkey = wr.wr.rdma.rkey;
        }
        _ if qp_type == IBV_QPT_UD => {
            let ud = wr.wr.ud;
            s.ud_dest = Some(RemoteQp {
                host: ud_ah(ud.ah, ud.remote_qkey),
                qpn: ud.remote_qpn,
                udp_sport: None,
            });
        }
        _ => {}
    }
    Some(s)
}

/// The seam's SGEs as ibverbs SGEs in `sg` (reused), and the list pointer and count a WR
/// carries (null for an empty list, as ibverbs callers pass it).
fn fill_sges(list: &[Sge], sg: &mut Vec<ibv_sge>) -> (*mut ibv_sge, i32) {
    sg.clear();
    sg.extend(list.iter().map(|s| ibv_sge {
        addr: s.addr,
        length: s.length,
        lkey: s.lkey,
    }));
    let ptr = if sg.is_empty() {
        std::ptr::null_mut()
    } else {
        sg.as_mut_ptr()
    };
    (ptr, sg.len() as i32)
}

/// `wr` back in libibverbs' form, its SGEs in `sg` (which must outlive the post). `ah` maps a
/// UD destination's number back to its address handle and Q_Key. None: an op only braid's own
/// NICs have (cross-channel WAIT/ENABLE, NOP), which no layer posts on an application's QP.
pub fn send_from_seam(
    wr: &SendWr,
    sg: &mut Vec<ibv_sge>,
    ah: &dyn Fn(u32) -> Option<(*mut ibv_ah, u32)>,
) -> Option<ibv_send_wr> {
    let (sg_list, num_sge) = fill_sges(&wr.sg_list, sg);
    let (opcode, imm) = match wr.op {
        SendOp::Send => (IBV_WR_SEND, 0),
        SendOp::SendWithImm(i) => (IBV_WR_SEND_WITH_IMM, i),
        SendOp::Write => (IBV_WR_RDMA_WRITE, 0),
        SendOp::WriteWithImm(i) => (IBV_WR_RDMA_WRITE_WITH_IMM, i),
        SendOp::Read => (IBV_WR_RDMA_READ, 0),
        _ => return None,
    };
    let mut flags = 0;
    if wr.signaled {
        flags |= IBV_SEND_SIGNALED;
    }
    if wr.inline {
        flags |= IBV_SEND_INLINE;
    }
    if wr.fence {
        flags |= IBV_SEND_FENCE;
    }
    let union = match (wr.op, wr.ud_dest) {
        (SendOp::Send | SendOp::SendWithImm(_), Some(d)) => {
            let (h, qkey) = ah(d.host)?;
            ibv_send_wr_wr {
                ud: WrUd {
                    ah: h,
                    remote_qpn: d.qpn,
                    remote_qkey: qkey,
                },
            }
        }
        _ => {
            // Zeroed whole (the union is as large as its atomic member), then the rdma member.
            let mut u = ibv_send_wr_wr {
                atomic: WrAtomic {
                    remote_addr: 0,
                    compare_add: 0,
                    swap: 0,
                    rkey: 0,
                },
            };
            u.rdma = WrRdma {
                remote_addr: wr.remote_addr,
                rkey: wr.rkey,
            };
            u
        }
    };
    Some(ibv_send_wr {
        wr_id: wr.wr_id,
        next: std::ptr::null_mut(),
        sg_list,
        num_sge,
        opcode,
        send_flags: flags,
        imm_data: imm.to_be(),
        wr: union,
        xrc_remote_srqn: 0,
        bind_mw_or_tso: [0; 6],
    })
}

/// # Safety
/// As [`sges`].
pub unsafe fn recv_to_seam(wr: &ibv_recv_wr) -> RecvWr {
    RecvWr {
        wr_id: wr.wr_id,
        sg_list: sges(wr.sg_list, wr.num_sge),
    }
}

pub fn recv_from_seam(wr: &RecvWr, sg: &mut Vec<ibv_sge>) -> ibv_recv_wr {
    let (sg_list, num_sge) = fill_sges(&wr.sg_list, sg);
    ibv_recv_wr {
        wr_id: wr.wr_id,
        next: std::ptr::null_mut(),
        sg_list,
        num_sge,
    }
}

/// The seam's view of a completion. Opcodes the seam lacks (atomics, binds, local invalidate)
/// read as [`WcOpcode::Nop`]: only the application sees them, from the provider's own record.
pub fn wc_to_seam(wc: &ibv_wc) -> WorkCompletion {
    let with_imm = wc.wc_flags & IBV_WC_WITH_IMM != 0;
    let opcode = match wc.opcode {
        IBV_WC_SEND => WcOpcode::Send,
        IBV_WC_RDMA_WRITE => WcOpcode::Write,
        IBV_WC_RDMA_READ => WcOpcode::Read,
        IBV_WC_RECV if with_imm => WcOpcode::RecvWithImm,
        IBV_WC_RECV => WcOpcode::Recv,
        IBV_WC_RECV_RDMA_WITH_IMM => WcOpcode::RecvWithImm,
        _ => WcOpcode::Nop,
    };
    WorkCompletion {
        wr_id: wc.wr_id,
        status: WcStatus::from_ibv(wc.status),
        opcode,
        byte_len: wc.byte_len as u64,
        imm: with_imm.then(|| u32::from_be(wc.imm_data)),
        qp_num: wc.qp_num,
        src_host: 0,
        src_qp: wc.src_qp,
    }
}

/// A completion a layer made (none of the provider's), in libibverbs' form. A RecvWithImm
/// becomes IBV_WC_RECV_RDMA_WITH_IMM: the seam does not say whether a SEND or a WRITE carried it.
pub fn wc_from_seam(wc: &WorkCompletion) -> ibv_wc {
    let opcode = match wc.opcode {
        WcOpcode::Send | WcOpcode::Nop => IBV_WC_SEND,
        WcOpcode::Write => IBV_WC_RDMA_WRITE,
        WcOpcode::Read => IBV_WC_RDMA_READ,
        WcOpcode::Recv => IBV_WC_RECV,
        WcOpcode::RecvWithImm => IBV_WC_RECV_RDMA_WITH_IMM,
        _ => IBV_WC_SEND,
    };
    ibv_wc {
        wr_id: wc.wr_id,
        status: WcStatus::to_ibv(wc.status),
        opcode,
        byte_len: wc.byte_len as u32,
        imm_data: wc.imm.unwrap_or(0).to_be(),
        qp_num: wc.qp_num,
        src_qp: wc.src_qp,
        wc_flags: if wc.imm.is_some() { IBV_WC_WITH_IMM } else { 0 },
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blank() -> ibv_send_wr {
        ibv_send_wr {
            wr_id: 0,
            next: std::ptr::null_mut(),
            sg_list: std::ptr::null_mut(),
            num_sge: 0,
            opcode: 0,
            send_flags: 0,
            imm_data: 0,
            wr: ibv_send_wr_wr {
                atomic: WrAtomic {
                    remote_addr: 0,
                    compare_add: 0,
                    swap: 0,
                    rkey: 0,
                },
            },
            xrc_remote_srqn: 0,
            bind_mw_or_tso: [0; 6],
        }
    }

    /// ibverbs' definition: imm_data is big-endian on the wire and in the struct
    /// (verbs.h: "Immediate data in network byte order"); the seam's value is the number.
    #[test]
    fn a_write_with_imm_round_trips_with_network_order_immediate() {
        let mut sg = [
            ibv_sge {
                addr: 0x1000,
                length: 100,
                lkey: 7,
            },
            ibv_sge {
                addr: 0x3000,
                length: 28,
                lkey: 8,
            },
        ];
        let mut w = blank();
        w.wr_id = 42;
        w.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
        w.send_flags = IBV_SEND_SIGNALED | IBV_SEND_FENCE;
        w.imm_data = 0x0102_0304u32.to_be();
        w.sg_list = sg.as_mut_ptr();
        w.num_sge = 2;
        w.wr.rdma = WrRdma {
            remote_addr: 0xdead_0000,
            rkey: 99,
        };
        let s = unsafe { send_to_seam(&w, IBV_QPT_RC, &mut |_, _| 0) }.unwrap();
        assert_eq!(s.op, SendOp::WriteWithImm(0x0102_0304));
        assert_eq!(s.len(), 128);
        assert!(s.signaled && s.fence && !s.inline);
        assert_eq!((s.remote_addr, s.rkey), (0xdead_0000, 99));
        let mut back_sg = Vec::new();
        let b = send_from_seam(&s, &mut back_sg, &|_| None).unwrap();
        assert_eq!(b.opcode, w.opcode);
        assert_eq!(b.send_flags, w.send_flags);
        assert_eq!(b.imm_data.to_ne_bytes(), [1, 2, 3, 4]);
        assert_eq!(
            unsafe { (b.wr.rdma.remote_addr, b.wr.rdma.rkey) },
            (0xdead_0000, 99)
        );
        assert_eq!(back_sg, sg.to_vec());
    }

    #[test]
    fn what_the_seam_cannot_express_is_left_to_the_provider() {
        let mut w = blank();
        w.opcode = 6; // IBV_WR_ATOMIC_FETCH_AND_ADD
        assert!(unsafe { send_to_seam(&w, IBV_QPT_RC, &mut |_, _| 0) }.is_none());
        w.opcode = IBV_WR_SEND;
        w.send_flags = IBV_SEND_SOLICITED;
        assert!(unsafe { send_to_seam(&w, IBV_QPT_RC, &mut |_, _| 0) }.is_none());
        w.send_flags = 0;
        assert!(unsafe { send_to_seam(&w, IBV_QPT_RC, &mut |_, _| 0) }.is_some());
        // READ exists only on RC (IBA 9.7.4: UC carries SEND and WRITE, UD only SEND).
        w.opcode = IBV_WR_RDMA_READ;
        assert!(unsafe { send_to_seam(&w, IBV_QPT_UC, &mut |_, _| 0) }.is_none());
    }

    #[test]
    fn a_ud_send_keeps_its_address_handle_and_qkey() {
        let mut w = blank();
        w.opcode = IBV_WR_SEND;
        let ah = 0x5000usize as *mut ibv_ah;
        w.wr.ud = WrUd {
            ah,
            remote_qpn: 0x11,
            remote_qkey: 0x1111_1111,
        };
        let mut table = Vec::new();
        let s = unsafe {
            send_to_seam(&w, IBV_QPT_UD, &mut |a, q| {
                table.push((a, q));
                table.len() as u32 - 1
            })
        }
        .unwrap();
        assert_eq!(s.ud_dest.unwrap().qpn, 0x11);
        let b = send_from_seam(&s, &mut Vec::new(), &|i| table.get(i as usize).copied()).unwrap();
        let ud = unsafe { b.wr.ud };
        assert_eq!(
            (ud.ah, ud.remote_qpn, ud.remote_qkey),
            (ah, 0x11, 0x1111_1111)
        );
    }

    #[test]
    fn completions_map_status_opcode_and_immediate() {
        let wc = ibv_wc {
            wr_id: 9,
            status: IBV_WC_SUCCESS,
            opcode: IBV_WC_RECV,
            byte_len: 64,
            imm_data: 5u32.to_be(),
            qp_num: 17,
            src_qp: 18,
            wc_flags: IBV_WC_WITH_IMM,
            ..Default::default()
        };
        let s = wc_to_seam(&wc);
        assert_eq!(s.opcode, WcOpcode::RecvWithImm);
        assert_eq!(s.imm, Some(5));
        let e = wc_to_seam(&ibv_wc {
            status: IBV_WC_WR_FLUSH_ERR,
            opcode: IBV_WC_RDMA_READ,
            ..wc
        });
        assert_eq!((e.status, e.opcode), (WcStatus::Flushed, WcOpcode::Read));
        let back = wc_from_seam(&e);
        assert_eq!(
            (back.status, back.opcode),
            (IBV_WC_WR_FLUSH_ERR, IBV_WC_RDMA_READ)
        );
        assert_eq!(
            wc_to_seam(&ibv_wc { status: 21, ..wc }).status,
            WcStatus::Other(21)
        );
    }
}
