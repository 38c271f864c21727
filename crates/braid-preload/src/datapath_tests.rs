//! The data path over a fake provider: a context whose `ops` record what reaches them, so that
//! what braid hands the provider can be compared with what the application posted (the
//! ibverbs definitions of ibv_post_send's list, bad_wr and ibv_poll_cq's return).

use super::*;
use crate::stats::snapshot;
use braid_middleware::RawConfig;
use braid_verbs::MiddlewareFactory;
use std::collections::VecDeque;
use std::mem::MaybeUninit;

/// What the fake provider saw: (wr_id, opcode, flags, sges, remote_addr).
type Seen = (u64, u32, u32, Vec<ibv_sge>, u64);

static SENT: Mutex<Vec<Seen>> = Mutex::new(Vec::new());
static RECVS: Mutex<Vec<u64>> = Mutex::new(Vec::new());
static CQES: Mutex<VecDeque<ibv_wc>> = Mutex::new(VecDeque::new());
/// The fake provider refuses the WR with this wr_id (ENOMEM, as a full send queue).
static REFUSE: Mutex<Option<u64>> = Mutex::new(None);

unsafe extern "C" fn fake_post_send(
    _qp: *mut ibv_qp,
    mut wr: *mut ibv_send_wr,
    bad: *mut *mut ibv_send_wr,
) -> c_int {
    while !wr.is_null() {
        let w = &*wr;
        if *REFUSE.lock().unwrap() == Some(w.wr_id) {
            *bad = wr;
            return 12;
        }
        let sg = std::slice::from_raw_parts(w.sg_list, w.num_sge as usize).to_vec();
        SENT.lock()
            .unwrap()
            .push((w.wr_id, w.opcode, w.send_flags, sg, w.wr.rdma.remote_addr));
        wr = w.next;
    }
    0
}
unsafe extern "C" fn fake_post_recv(
    _qp: *mut ibv_qp,
    mut wr: *mut ibv_recv_wr,
    _bad: *mut *mut ibv_recv_wr,
) -> c_int {
    while !wr.is_null() {
        RECVS.lock().unwrap().push((*wr).wr_id);
        wr = (*wr).next;
    }
    0
}
unsafe extern "C" fn fake_poll_cq(_cq: *mut ibv_cq, n: c_int, wc: *mut ibv_wc) -> c_int {
    let mut q = CQES.lock().unwrap();
    let mut k = 0;
    while k < n as usize {
        let Some(c) = q.pop_front() else { break };
        *wc.add(k) = c;
        k += 1;
    }
    k as c_int
}
unsafe extern "C" fn fake_notify(_cq: *mut ibv_cq, _s: c_int) -> c_int {
    0
}
unsafe extern "C" fn fake_create_qp_ex(
    _c: *mut ibv_context,
    _a: *mut ibv_qp_init_attr_ex,
) -> *mut ibv_qp {
    std::ptr::null_mut()
}

fn counter(name: &str) -> u64 {
    snapshot().into_iter().find(|(k, _)| *k == name).unwrap().1
}

fn wr(id: u64, opcode: u32, sg: &mut ibv_sge) -> ibv_send_wr {
    ibv_send_wr {
        wr_id: id,
        next: std::ptr::null_mut(),
        sg_list: sg,
        num_sge: 1,
        opcode,
        send_flags: IBV_SEND_SIGNALED,
        imm_data: 0,
        wr: ibv_send_wr_wr {
            rdma: WrRdma {
                remote_addr: 0x9000 + id,
                rkey: 5,
            },
        },
        xrc_remote_srqn: 0,
        bind_mw_or_tso: [0; 6],
    }
}

#[test]
fn the_data_path_goes_through_braid_and_the_provider_sees_what_the_app_posted() {
    // SAFETY (whole test): every struct lives on this stack frame or in boxes until the end.
    unsafe {
        let mut v: Box<verbs_context> = Box::new(MaybeUninit::zeroed().assume_init());
        v.sz = size_of::<verbs_context>();
        v.create_qp_ex = Some(fake_create_qp_ex);
        v.context.abi_compat = VERBS_ABI_IS_EXTENDED as *mut _;
        v.context.ops.post_send = Some(fake_post_send);
        v.context.ops.post_recv = Some(fake_post_recv);
        v.context.ops.poll_cq = Some(fake_poll_cq);
        v.context.ops.req_notify_cq = Some(fake_notify);
        let ctx: *mut ibv_context = &mut v.context;
        let raw = RawConfig::default()
            .build(&mut braid_verbs::HostCtx::new(0, Default::default()), 1)
            .unwrap();
        assert!(adopt_context(ctx, raw));
        // The five data-path pointers and create_qp_ex are braid's now.
        assert_eq!(
            (*ctx).ops.post_send.map(|f| f as usize),
            Some(braid_post_send as *const () as usize)
        );
        assert_eq!(
            (*ctx).ops.poll_cq.map(|f| f as usize),
            Some(braid_poll_cq as *const () as usize)
        );
        assert_eq!(
            v.create_qp_ex.map(|f| f as usize),
            Some(crate::interpose::braid_create_qp_ex as *const () as usize)
        );

        let mut cq: ibv_cq = MaybeUninit::zeroed().assume_init();
        cq.context = ctx;
        let mut qp: ibv_qp = MaybeUninit::zeroed().assume_init();
        qp.context = ctx;
        qp.qp_num = 0x11;
        qp.qp_type = IBV_QPT_RC;
        qp.send_cq = &mut cq;
        {
            let mut st = lock();
            let cx = st.find(ctx).unwrap();
            cx.backend.adopt_qp(&mut qp);
            cx.backend.adopt_cq(&mut cq);
        }

        // A list: WRITE, an atomic (the seam lacks it: to the provider alone, in place), READ.
        let mut sg = [
            ibv_sge {
                addr: 0x1000,
                length: 4096,
                lkey: 1,
            },
            ibv_sge {
                addr: 0x2000,
                length: 8,
                lkey: 1,
            },
            ibv_sge {
                addr: 0x3000,
                length: 64,
                lkey: 1,
            },
        ];
        let [s0, s1, s2] = &mut sg;
        let mut w = [
            wr(1, IBV_WR_RDMA_WRITE, s0),
            wr(2, 6, s1),
            wr(3, IBV_WR_RDMA_READ, s2),
        ];
        let p: *mut ibv_send_wr = w.as_mut_ptr();
        (*p).next = p.add(1);
        (*p.add(1)).next = p.add(2);
        let before = counter("send_wrs_braid");
        let mut bad = std::ptr::null_mut();
        let post = (*ctx).ops.post_send.unwrap();
        assert_eq!(post(&mut qp, p, &mut bad), 0);
        let sent = SENT.lock().unwrap().clone();
        assert_eq!(
            sent.iter().map(|s| (s.0, s.1)).collect::<Vec<_>>(),
            vec![(1, IBV_WR_RDMA_WRITE), (2, 6), (3, IBV_WR_RDMA_READ)]
        );
        assert_eq!(sent[0].3, vec![sg[0]]);
        assert_eq!((sent[2].2, sent[2].4), (IBV_SEND_SIGNALED, 0x9003));
        assert_eq!(counter("send_wrs_braid") - before, 2);

        // The provider refuses WR 3 (queue full): ibv_post_send returns its errno and bad_wr
        // points at the application's own WR 3, not at braid's copy.
        SENT.lock().unwrap().clear();
        *REFUSE.lock().unwrap() = Some(3);
        (*p.add(1)).opcode = IBV_WR_SEND;
        assert_eq!(post(&mut qp, p, &mut bad), 12);
        assert!(std::ptr::eq(bad, p.add(2)));
        assert_eq!(SENT.lock().unwrap().len(), 2);
        *REFUSE.lock().unwrap() = None;

        // Receives.
        let mut r = ibv_recv_wr {
            wr_id: 77,
            next: std::ptr::null_mut(),
            sg_list: &mut sg[0],
            num_sge: 1,
        };
        let mut rbad = std::ptr::null_mut();
        assert_eq!((*ctx).ops.post_recv.unwrap()(&mut qp, &mut r, &mut rbad), 0);
        assert_eq!(*RECVS.lock().unwrap(), vec![77]);

        // Completions come back as the provider wrote them, every field.
        let c1 = ibv_wc {
            wr_id: 1,
            opcode: IBV_WC_RDMA_WRITE,
            qp_num: 0x11,
            sl: 3,
            slid: 9,
            pkey_index: 2,
            vendor_err: 0,
            ..Default::default()
        };
        let c2 = ibv_wc {
            wr_id: 77,
            opcode: IBV_WC_RECV,
            byte_len: 4096,
            qp_num: 0x11,
            src_qp: 0x22,
            wc_flags: 1, // IBV_WC_GRH: not in the seam, kept from the provider's record
            ..Default::default()
        };
        CQES.lock().unwrap().extend([c1, c2]);
        let mut out = [ibv_wc::default(); 4];
        let cqes = counter("cqes_braid");
        assert_eq!((*ctx).ops.poll_cq.unwrap()(&mut cq, 4, out.as_mut_ptr()), 2);
        assert_eq!(&out[..2], &[c1, c2]);
        assert_eq!(counter("cqes_braid") - cqes, 2);
        assert_eq!((*ctx).ops.poll_cq.unwrap()(&mut cq, 4, out.as_mut_ptr()), 0);

        // A QP the preload did not adopt (the extended API refused) goes to the provider.
        let mut other: ibv_qp = MaybeUninit::zeroed().assume_init();
        other.context = ctx;
        other.qp_num = 0x99;
        let pass = counter("send_wrs_passthrough");
        SENT.lock().unwrap().clear();
        assert_eq!(post(&mut other, p.add(2), &mut bad), 0);
        assert_eq!(counter("send_wrs_passthrough") - pass, 1);

        release_context(ctx);
        assert_eq!(
            (*ctx).ops.post_send.map(|f| f as usize),
            Some(fake_post_send as *const () as usize)
        );
    }
}

unsafe extern "C" fn noop_post_send(
    _qp: *mut ibv_qp,
    _wr: *mut ibv_send_wr,
    _bad: *mut *mut ibv_send_wr,
) -> c_int {
    0
}
unsafe extern "C" fn one_cqe(_cq: *mut ibv_cq, _n: c_int, wc: *mut ibv_wc) -> c_int {
    *wc = ibv_wc {
        wr_id: 1,
        qp_num: 0x33,
        opcode: IBV_WC_RDMA_WRITE,
        ..Default::default()
    };
    1
}

/// What the preload adds per verb on the CPU, against calling the provider's function directly
/// (a provider that does nothing, so only braid's part is timed). A measurement, not a check:
/// `cargo test -p braid-preload overhead -- --ignored --nocapture` (test profile, opt-level 2).
#[test]
#[ignore]
fn overhead_per_verb() {
    unsafe {
        let mut v: Box<verbs_context> = Box::new(MaybeUninit::zeroed().assume_init());
        v.context.ops.post_send = Some(noop_post_send);
        v.context.ops.post_recv = Some(fake_post_recv);
        v.context.ops.poll_cq = Some(one_cqe);
        v.context.ops.req_notify_cq = Some(fake_notify);
        let ctx: *mut ibv_context = &mut v.context;
        let raw = RawConfig::default()
            .build(&mut braid_verbs::HostCtx::new(0, Default::default()), 1)
            .unwrap();
        assert!(adopt_context(ctx, raw));
        let mut cq: ibv_cq = MaybeUninit::zeroed().assume_init();
        cq.context = ctx;
        let mut qp: ibv_qp = MaybeUninit::zeroed().assume_init();
        qp.context = ctx;
        qp.qp_num = 0x33;
        qp.qp_type = IBV_QPT_RC;
        {
            let mut st = lock();
            let cx = st.find(ctx).unwrap();
            cx.backend.adopt_qp(&mut qp);
            cx.backend.adopt_cq(&mut cq);
        }
        let mut sg = ibv_sge {
            addr: 0x1000,
            length: 64,
            lkey: 1,
        };
        let mut w = wr(1, IBV_WR_RDMA_WRITE, &mut sg);
        let mut wc = [ibv_wc::default(); 16];
        let mut bad = std::ptr::null_mut();
        let n: u32 = std::env::var("BRAID_OVERHEAD_N")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(1_000_000);
        let time = |f: &mut dyn FnMut()| {
            let t = std::time::Instant::now();
            for _ in 0..n {
                f();
            }
            t.elapsed().as_nanos() as f64 / n as f64
        };
        let post = (*ctx).ops.post_send.unwrap();
        let poll = (*ctx).ops.poll_cq.unwrap();
        let direct_post = time(&mut || {
            std::hint::black_box(noop_post_send(&mut qp, &mut w, &mut bad));
        });
        let braid_post = time(&mut || {
            std::hint::black_box(post(&mut qp, &mut w, &mut bad));
        });
        let direct_poll = time(&mut || {
            std::hint::black_box(one_cqe(&mut cq, 16, wc.as_mut_ptr()));
        });
        let braid_poll = time(&mut || {
            std::hint::black_box(poll(&mut cq, 16, wc.as_mut_ptr()));
        });
        release_context(ctx);
        println!(
            "overhead per verb (ns): post_send direct {direct_post:.1}, through braid \
             {braid_post:.1}; poll_cq (1 CQE) direct {direct_poll:.1}, through braid {braid_poll:.1}"
        );
        assert_eq!(wc[0].qp_num, 0x33);
    }
}
