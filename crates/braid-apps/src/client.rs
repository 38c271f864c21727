//! A client's connections, opened the same way by every request/benchmark client.

use crate::*;
use braid_verbs::rendezvous::{Endpoint, Side};

/// Where a client's connections live: `n` slots of `size` bytes from `base`, connection ids
/// from `conn0`, the QPs' priority and type, the flow they measure, the access of their MR.
pub(crate) struct ClientSlots {
    pub n: usize,
    pub size: u64,
    pub base: u64,
    pub priority: Option<u8>,
    pub conn0: u32,
    pub flow: u32,
    pub qp_type: QpType,
    pub access: Access,
}

/// A client's ends: its armed CQ, the lkey of the one MR over its slots, its RC QPs.
pub(crate) struct ClientEnds {
    pub cq: CqId,
    pub lkey: u32,
    pub qps: Vec<QpNum>,
}

/// Opens a client's connections: one CQ (armed), one MR over the slots, one RC QP per slot, each
/// published on the board as connection `conn0 + i` with its slot's address; the first QP is
/// logged as the flow's sending QP.
pub(crate) fn open_client(
    v: &mut dyn Verbs,
    c: ClientSlots,
    log: &SharedMeter,
    rdv: &Rendezvous,
) -> ClientEnds {
    let cq = v.create_cq(1 << 16).expect("create CQ");
    v.req_notify_cq(cq).expect("arm CQ");
    let mr = v
        .reg_mr(c.base, c.size.max(1) * c.n as u64, c.access)
        .expect("register memory");
    let mut qps = Vec::with_capacity(c.n);
    for i in 0..c.n {
        let qp = v
            .create_qp(&QpInit {
                priority: c.priority,
                qp_type: c.qp_type,
                ..QpInit::rc(cq)
            })
            .expect("create QP");
        qps.push(qp);
        if i == 0 {
            log.borrow_mut().sending_qp(c.flow, v.local_host(), qp);
        }
        rdv.borrow_mut().publish(
            (c.conn0 + i as u32) as u64,
            Side::Client,
            Endpoint {
                host: v.local_host(),
                qpn: qp,
                addr: c.base + i as u64 * c.size,
                rkey: mr.rkey,
            },
        );
    }
    ClientEnds {
        cq,
        lkey: mr.lkey,
        qps,
    }
}
