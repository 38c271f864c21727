//! Justitia under the preload, over a fake provider of its own (so that the raw tests' records
//! stay theirs): an application's 64 KiB WRITEs are split into chunks on its own QP, the
//! chunks' completions are hidden (one completion per signaled application WR, with its
//! wr_id), and the chunks leave no faster than the configured `line_rate` allows (the token
//! bucket's analytical bound).

use super::*;
use crate::stats::snapshot;
use std::collections::VecDeque;
use std::mem::MaybeUninit;

/// (wr_id, send_flags, sge addr, sge length, remote_addr, opcode)
type Seen = (u64, u32, u64, u32, u64, u32);
static SENT: Mutex<Vec<Seen>> = Mutex::new(Vec::new());
static CQES: Mutex<VecDeque<ibv_wc>> = Mutex::new(VecDeque::new());

unsafe extern "C" fn j_post_send(
    _qp: *mut ibv_qp,
    mut wr: *mut ibv_send_wr,
    _bad: *mut *mut ibv_send_wr,
) -> c_int {
    while !wr.is_null() {
        let w = &*wr;
        assert_eq!(w.num_sge, 1, "a chunk of one SGE");
        let s = *w.sg_list;
        SENT.lock().unwrap().push((
            w.wr_id,
            w.send_flags,
            s.addr,
            s.length,
            w.wr.rdma.remote_addr,
            w.opcode,
        ));
        wr = w.next;
    }
    0
}
unsafe extern "C" fn j_post_recv(
    _qp: *mut ibv_qp,
    _wr: *mut ibv_recv_wr,
    _bad: *mut *mut ibv_recv_wr,
) -> c_int {
    0
}
unsafe extern "C" fn j_poll_cq(_cq: *mut ibv_cq, n: c_int, wc: *mut ibv_wc) -> c_int {
    let mut q = CQES.lock().unwrap();
    let mut k = 0;
    while k < n as usize {
        let Some(c) = q.pop_front() else { break };
        *wc.add(k) = c;
        k += 1;
    }
    k as c_int
}
unsafe extern "C" fn j_notify(_cq: *mut ibv_cq, _s: c_int) -> c_int {
    0
}

fn counter(name: &str) -> f64 {
    if let Some((_, v)) = snapshot().into_iter().find(|(k, _)| *k == name) {
        return v as f64;
    }
    lock()
        .layer_counters()
        .into_iter()
        .find(|(k, _)| k == name)
        .map_or(0.0, |(_, v)| v)
}

const RATE: u64 = 10_000_000; // line_rate "10Mbps"
const CHUNK: u64 = 16_000; // big_chunk "16KB"
const MSG: u32 = 65_536;

/// Polls (which delivers the host's due timers and wakes) until the provider has seen `n`
/// WRs, at most 20 s.
unsafe fn poll_until_sent(cq: *mut ibv_cq, ctx: *mut ibv_context, n: usize) -> Vec<ibv_wc> {
    let mut got = Vec::new();
    let mut out = [ibv_wc::default(); 16];
    let t0 = std::time::Instant::now();
    while SENT.lock().unwrap().len() < n {
        assert!(
            t0.elapsed().as_secs() < 20,
            "only {} of {n} chunks reached the provider",
            SENT.lock().unwrap().len()
        );
        let k = (*ctx).ops.poll_cq.unwrap()(cq, 16, out.as_mut_ptr());
        got.extend_from_slice(&out[..k.max(0) as usize]);
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
    got
}

#[test]
fn justitia_splits_hides_chunk_completions_and_paces_at_the_configured_rate() {
    let choice = crate::config::parse(Some(
        r#"{"kind":"justitia","line_rate":"10Mbps","big_chunk":"16KB"}"#,
    ))
    .unwrap();
    // SAFETY (whole test): every struct lives on this frame or in boxes until the end.
    unsafe {
        let mut v: Box<verbs_context> = Box::new(MaybeUninit::zeroed().assume_init());
        v.sz = size_of::<verbs_context>();
        v.context.abi_compat = VERBS_ABI_IS_EXTENDED as *mut _;
        v.context.ops.post_send = Some(j_post_send);
        v.context.ops.post_recv = Some(j_post_recv);
        v.context.ops.poll_cq = Some(j_poll_cq);
        v.context.ops.req_notify_cq = Some(j_notify);
        let ctx: *mut ibv_context = &mut v.context;
        assert_eq!(adopt_with(ctx, &choice, 0), Ok(true));

        let mut cq: ibv_cq = MaybeUninit::zeroed().assume_init();
        cq.context = ctx;
        let mut qp: ibv_qp = MaybeUninit::zeroed().assume_init();
        qp.context = ctx;
        qp.qp_num = 0x51;
        qp.qp_type = IBV_QPT_RC;
        qp.send_cq = &mut cq;
        qp.recv_cq = &mut cq;
        lock().find(ctx).unwrap().backend.adopt_cq(&mut cq);
        // As ibv_create_qp and ibv_modify_qp(RTR) do it: through the stack.
        crate::interpose::adopt_qp(&mut qp, false);
        assert!(counter("qps_adopted") >= 1.0);

        // One signaled 64 KiB WRITE: 5 chunks of at most 16,000 B on the same QP, covering
        // the application's buffer and remote range exactly, in order.
        let mut sge = ibv_sge {
            addr: 0x10_0000,
            length: MSG,
            lkey: 7,
        };
        let mut w = ibv_send_wr {
            wr_id: 42,
            next: std::ptr::null_mut(),
            sg_list: &mut sge,
            num_sge: 1,
            opcode: IBV_WR_RDMA_WRITE,
            send_flags: IBV_SEND_SIGNALED,
            imm_data: 0,
            wr: ibv_send_wr_wr {
                rdma: WrRdma {
                    remote_addr: 0x80_0000,
                    rkey: 9,
                },
            },
            xrc_remote_srqn: 0,
            bind_mw_or_tso: [0; 6],
        };
        let mut bad = std::ptr::null_mut();
        let post = (*ctx).ops.post_send.unwrap();
        assert_eq!(post(&mut qp, &mut w, &mut bad), 0);
        let n = (MSG as u64).div_ceil(CHUNK) as usize;
        let early = poll_until_sent(&mut cq, ctx, n);
        assert!(
            early.is_empty(),
            "no completion before the provider wrote one"
        );
        let sent = SENT.lock().unwrap().clone();
        assert_eq!(sent.len(), n);
        let mut off = 0u64;
        for (i, s) in sent.iter().enumerate() {
            assert_eq!(s.5, IBV_WR_RDMA_WRITE);
            assert_eq!((s.2, s.4), (0x10_0000 + off, 0x80_0000 + off), "chunk {i}");
            assert_ne!(s.0, 42, "chunks carry braid's tagged wr_ids");
            off += s.3 as u64;
        }
        assert_eq!(off, MSG as u64, "the chunks cover the message exactly");
        assert!(
            sent[n - 1].1 & IBV_SEND_SIGNALED != 0,
            "the last chunk is signaled"
        );

        // The provider completes every signaled chunk: the application sees one completion,
        // its own wr_id, and nothing for the others.
        let mut cqe = Vec::new();
        for s in sent.iter().filter(|s| s.1 & IBV_SEND_SIGNALED != 0) {
            cqe.push(ibv_wc {
                wr_id: s.0,
                opcode: IBV_WC_RDMA_WRITE,
                qp_num: 0x51,
                ..Default::default()
            });
        }
        CQES.lock().unwrap().extend(cqe);
        let mut out = [ibv_wc::default(); 16];
        let k = (*ctx).ops.poll_cq.unwrap()(&mut cq, 16, out.as_mut_ptr());
        assert_eq!(k, 1, "one completion for the application's one signaled WR");
        assert_eq!(
            (out[0].wr_id, out[0].opcode, out[0].status),
            (42, IBV_WC_RDMA_WRITE, 0)
        );
        assert_eq!(
            (*ctx).ops.poll_cq.unwrap()(&mut cq, 16, out.as_mut_ptr()),
            0
        );
        assert_eq!(counter("justitia.chunks"), n as f64);
        assert_eq!(counter("justitia.split_wrs"), 1.0);

        // Pacing: 4 more WRITEs (262,144 B). The bucket holds max_tokens (5) chunks and
        // refills at line_rate, so the provider cannot have seen them all before
        // (262,144 - 5 x 16,000) B x 8 / 10 Mbit/s = 145.7 ms have passed.
        SENT.lock().unwrap().clear();
        // Wall time by the test's own clock, not the preload's.
        let t0 = std::time::Instant::now();
        for i in 0..4 {
            w.wr_id = 100 + i;
            assert_eq!(post(&mut qp, &mut w, &mut bad), 0);
        }
        poll_until_sent(&mut cq, ctx, 4 * n);
        let elapsed_ps = t0.elapsed().as_nanos() as u64 * 1000;
        let bound_ps = (4 * MSG as u64 - 5 * CHUNK) * 8 * 1_000_000_000_000 / RATE;
        assert!(
            elapsed_ps >= bound_ps,
            "{} chunks in {} us, faster than the bucket allows ({} us)",
            4 * n,
            elapsed_ps / 1_000_000,
            bound_ps / 1_000_000
        );
        assert!(counter("justitia.tokens_waited") >= 1.0);
        assert!(
            counter("host.events") >= 1.0,
            "grants came as wakes or timers"
        );
        release_context(ctx);
    }
}
