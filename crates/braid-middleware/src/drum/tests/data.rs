//! Bytes and immediate values through shared QPs: the application's immediate data arrives
//! bit-exact (`imm.rs`), and tenants' tracked regions carry real bytes (`bufs.rs`, the layer's
//! `map_local`), every byte of every tenant delivered once under loss, as over raw RDMA.

use super::*;

/// What the peer app saw of each receive: (wr_id, status, opcode, byte_len, imm).
type Seen = Vec<(u64, WcStatus, WcOpcode, u64, Option<u32>)>;

/// Tenant i of H1 sends to tenant i of H2: SEND_WITH_IMM, WRITE_WITH_IMM and plain SENDs
/// interleaved, with immediate values that use all 32 bits.
fn imm_run(f: &dyn MiddlewareFactory) -> Vec<Seen> {
    let (mut net, a, b) = net_of(f, 2);
    let (ea, eb) = pairs(&mut net, &a, &b, Access::ALL, false);
    for e in &eb {
        for k in 0..8 {
            net.call_as(H2, e.t, |v| v.post_recv(e.qp, recv(e, 500 + k)))
                .unwrap();
        }
    }
    let imms = [0xDEAD_BEEF_u32, 0, 0xFFFF_FFFF, 0x8000_0001, 0x00FF_FF00];
    for k in 0..8u64 {
        for (i, e) in ea.iter().enumerate() {
            let x = imms[(k as usize + i) % imms.len()] ^ (i as u32) << 8;
            let len = 16 + 8 * k as u32 + i as u32;
            let wr = match k % 3 {
                0 => SendWr {
                    op: SendOp::SendWithImm(x),
                    ..send(e, k, len)
                },
                1 => SendWr {
                    op: SendOp::WriteWithImm(x),
                    ..write(e, &eb[i], k, 64, len)
                },
                _ => send(e, k, len),
            };
            net.call_as(H1, e.t, |v| v.post_send(e.qp, wr)).unwrap();
        }
    }
    net.run();
    let mut out = Vec::new();
    for e in ea.iter().chain(&eb) {
        let wcs = poll(&mut net, e);
        out.push(
            wcs.iter()
                .map(|w| (w.wr_id, w.status, w.opcode, w.byte_len, w.imm))
                .collect(),
        );
    }
    out
}

#[test]
fn the_applications_immediate_data_arrives_bit_exact_through_a_shared_qp() {
    let raw = imm_run(&crate::RawConfig::default());
    // Raw RDMA: each receive has the sender's own value (the reference).
    assert_eq!(raw[2].len(), 8);
    assert_eq!(raw[2][0].4, Some(0xDEAD_BEEF));
    assert_eq!(raw[3][0].4, Some(0x100));
    assert_eq!(raw[3][3].4, Some(0x00FF_FF00 ^ 0x100));
    for (name, f) in [
        ("drum", &DrumConfig::default() as &dyn MiddlewareFactory),
        ("share", &ShareConfig::default()),
    ] {
        let got = imm_run(f);
        // Senders' completions, receivers' completions: the same as over raw RDMA, imm
        // included (and one shared QP carried both connections).
        assert_eq!(got, raw, "{name}");
    }
    // The cost: one zero-byte companion per WR with immediate data (3 + 3 of the 8 per
    // connection), nothing for the others.
    let (net_sends, _) = {
        let cfg = DrumConfig::default();
        let (mut net, a, b) = net_of(&cfg, 1);
        let ea = end(&mut net, H1, a[0], 0x1000_0000, Access::ALL);
        let eb = end(&mut net, H2, b[0], 0x1000_0000, Access::ALL);
        connect(&mut net, &ea, &eb);
        net.run();
        net.call_as(H2, eb.t, |v| v.post_recv(eb.qp, recv(&eb, 1)))
            .unwrap();
        net.call_as(H2, eb.t, |v| v.post_recv(eb.qp, recv(&eb, 2)))
            .unwrap();
        let wr = SendWr {
            op: SendOp::SendWithImm(7),
            ..send(&ea, 1, 8)
        };
        net.call_as(H1, ea.t, |v| v.post_send(ea.qp, wr)).unwrap();
        net.call_as(H1, ea.t, |v| v.post_send(ea.qp, send(&ea, 2, 8)))
            .unwrap();
        net.run();
        (agent_sends(&net, H1), ())
    };
    let ops: Vec<SendOp> = net_sends.iter().map(|(_, w)| w.op).collect();
    assert_eq!(ops.len(), 3, "{ops:?}");
    assert!(matches!(ops[1], SendOp::SendWithImm(7)));
    assert!(net_sends[1].1.sg_list.is_empty());
}

/// Every tenant's bytes through shared QPs under loss: SENDs into receives, WRITEs into the
/// peer's region, READs back, inline SENDs; checked byte by byte through the tenants' own
/// `read_local`.
fn bytes_run(f: &dyn MiddlewareFactory, lose: bool) -> Vec<Vec<u8>> {
    let (mut net, a, b) = net_of(f, 3);
    // Host memory: over raw RDMA, tenants of a host need addresses of their own.
    let (ea, eb) = pairs(&mut net, &a, &b, Access::ALL.tracked(), true);
    const N: u64 = 6;
    // Source data: region offsets [0, 256 KiB) on the senders, a different pattern each.
    for (i, e) in ea.iter().enumerate() {
        net.call_as(H1, e.t, |v| {
            v.write_local(e.mr.addr, &pattern(i as u64 + 1, 256 << 10))
        })
        .unwrap();
    }
    // Receivers: data the READs will fetch at [512 KiB, +64 KiB).
    for (i, e) in eb.iter().enumerate() {
        net.call_as(H2, e.t, |v| {
            v.write_local(e.mr.addr + (512 << 10), &pattern(100 + i as u64, 64 << 10))
        })
        .unwrap();
    }
    // Receives at [768 KiB + k * 8 KiB) of the receivers.
    for e in &eb {
        for k in 0..N {
            let r = RecvWr {
                wr_id: k,
                sg_list: vec![Sge {
                    addr: e.mr.addr + (768 << 10) + k * 8192,
                    length: 8192,
                    lkey: e.mr.lkey,
                }],
            };
            net.call_as(H2, e.t, |v| v.post_recv(e.qp, r)).unwrap();
        }
    }
    if lose {
        for (h, q) in [H1, H2].into_iter().zip([0, 0]) {
            let _ = q;
            let pipe = net.calls_of(h, AGENT).into_iter().find_map(|c| match c {
                Call::Connect(q, _) => Some(q),
                _ => None,
            });
            if let Some(p) = pipe {
                net.lose_packets(h, p, 5);
            } else {
                // Under raw, each connection's own QP loses.
                for e in if h == H1 { &ea } else { &eb } {
                    net.lose_packets(h, e.qp, 2);
                }
            }
        }
    }
    for (i, e) in ea.iter().enumerate() {
        for k in 0..N {
            let len = 1000 + 1111 * k as u32 + 7 * i as u32;
            // SEND from [k * 16 KiB), WRITE from [128 KiB + k * 16 KiB) to the same offset.
            let mut s = send(e, 10 + k, len);
            s.sg_list[0].addr = e.mr.addr + k * 16384;
            let w = write(e, &eb[i], 20 + k, (128 << 10) + k * 16384, len);
            // READ the peer's [512 KiB + k * 8 KiB) into our [384 KiB + k * 8 KiB).
            let mut r = write(e, &eb[i], 30 + k, (384 << 10) + k * 8192, 4096);
            r.op = SendOp::Read;
            r.remote_addr = eb[i].mr.addr + (512 << 10) + k * 8192;
            for wr in [s, w, r] {
                net.call_as(H1, e.t, |v| v.post_send(e.qp, wr)).unwrap();
            }
        }
        // An inline SEND whose buffer is overwritten right after the post.
        net.call_as(H1, e.t, |v| {
            v.write_local(e.mr.addr + (300 << 10), b"inline bytes, taken at post")?;
            let mut wr = send(e, 99, 27);
            wr.sg_list[0].addr = e.mr.addr + (300 << 10);
            wr.inline = true;
            v.post_send(e.qp, wr)?;
            v.write_local(e.mr.addr + (300 << 10), &[0xEE; 27])
        })
        .unwrap();
    }
    net.call_as(H2, eb[0].t, |v| {
        v.post_recv(
            eb[0].qp,
            RecvWr {
                wr_id: 99,
                sg_list: vec![Sge {
                    addr: eb[0].mr.addr + (900 << 10),
                    length: 64,
                    lkey: eb[0].mr.lkey,
                }],
            },
        )
    })
    .unwrap();
    for e in &eb[1..] {
        net.call_as(H2, e.t, |v| {
            v.post_recv(
                e.qp,
                RecvWr {
                    wr_id: 99,
                    sg_list: vec![Sge {
                        addr: e.mr.addr + (900 << 10),
                        length: 64,
                        lkey: e.mr.lkey,
                    }],
                },
            )
        })
        .unwrap();
    }
    net.run();
    let mut out = Vec::new();
    for (i, (s, r)) in ea.iter().zip(&eb).enumerate() {
        let sw = poll(&mut net, s);
        assert_eq!(sw.len() as u64, 3 * N + 1, "sender {i}: {sw:?}");
        assert!(sw.iter().all(|w| w.status == WcStatus::Success), "{sw:?}");
        let rw = poll(&mut net, r);
        assert_eq!(rw.len() as u64, N + 1, "receiver {i}: {rw:?}");
        assert!(rw.iter().all(|w| w.status == WcStatus::Success));
        let src = pattern(i as u64 + 1, 256 << 10);
        let peer = pattern(100 + i as u64, 64 << 10);
        for k in 0..N as usize {
            let len = 1000 + 1111 * k + 7 * i;
            assert_eq!(rw[k].byte_len, len as u64);
            // Each receive exactly once, in order, with the bytes of its SEND.
            assert_eq!(rw[k].wr_id, k as u64);
            let got = net
                .call_as(H2, r.t, |v| {
                    v.read_local(r.mr.addr + (768 << 10) + k as u64 * 8192, len as u64)
                })
                .unwrap();
            assert_eq!(got, &src[k * 16384..k * 16384 + len], "SEND {k} of {i}");
            let off = (128 << 10) + k * 16384;
            let got = net
                .call_as(H2, r.t, |v| {
                    v.read_local(r.mr.addr + off as u64, len as u64)
                })
                .unwrap();
            assert_eq!(got, &src[off..off + len], "WRITE {k} of {i}");
            let got = net
                .call_as(H1, s.t, |v| {
                    v.read_local(s.mr.addr + (384 << 10) + k as u64 * 8192, 4096)
                })
                .unwrap();
            assert_eq!(got, &peer[k * 8192..k * 8192 + 4096], "READ {k} of {i}");
            out.push(got);
        }
        let got = net
            .call_as(H2, r.t, |v| v.read_local(r.mr.addr + (900 << 10), 27))
            .unwrap();
        assert_eq!(got, b"inline bytes, taken at post", "inline SEND of {i}");
        // Nothing beyond what was sent.
        let after = net
            .call_as(H2, r.t, |v| v.read_local(r.mr.addr + (900 << 10) + 27, 37))
            .unwrap();
        assert!(after.iter().all(|&b| b == 0));
        out.push(
            net.call_as(H2, r.t, |v| v.read_local(r.mr.addr, 1 << 20))
                .unwrap(),
        );
    }
    out
}

#[test]
fn every_byte_of_every_tenant_arrives_once_through_shared_qps_under_loss() {
    let raw = bytes_run(&crate::RawConfig::default(), true);
    for (name, f) in [
        ("drum", &DrumConfig::default() as &dyn MiddlewareFactory),
        ("share", &ShareConfig::default()),
    ] {
        for lose in [false, true] {
            // The receivers' whole regions end up as over raw RDMA.
            assert_eq!(bytes_run(f, lose), raw, "{name}, loss {lose}");
        }
    }
}

#[test]
fn tracked_regions_need_a_tracking_nic_and_stay_each_tenants_own() {
    let (mut net, a, _b) = net_of(&DrumConfig::default(), 2);
    let t = Access::ALL.tracked();
    let e1 = end(&mut net, H1, a[0], 0x1000_0000, t);
    let e2 = end(&mut net, H1, a[1], 0x1000_0000, t);
    // Same application address, different bytes: each tenant its own slice.
    net.call_as(H1, e1.t, |v| v.write_local(0x1000_0000, b"one"))
        .unwrap();
    net.call_as(H1, e2.t, |v| v.write_local(0x1000_0000, b"two"))
        .unwrap();
    assert_eq!(
        net.call_as(H1, e1.t, |v| v.read_local(0x1000_0000, 3))
            .unwrap(),
        b"one"
    );
    assert_eq!(
        net.call_as(H1, e2.t, |v| v.read_local(0x1000_0000, 3))
            .unwrap(),
        b"two"
    );
    // Outside its regions: refused.
    assert!(net
        .call_as(H1, e1.t, |v| v.read_local(0x5000_0000, 3))
        .is_err());
    // A NIC that does not keep bytes: a tracked region is refused.
    let mut caps = FakeNet::default_caps(9);
    caps.data_tracking = false;
    let mut h = HostCtx::new(9, caps.clone()).with_board(rendezvous::board());
    let _layer = DrumConfig::default().build(&mut h, 1).ok().unwrap();
    let mut net = FakeNet::new(0);
    net.add_host(caps);
    let t9 = net
        .add_tenant_with(9, Box::new(Idle), &[&DrumConfig::default()])
        .unwrap();
    net.run();
    let r = net.call_as(9, t9, |v| v.reg_mr(0x1000, 64, Access::ALL.tracked()));
    assert!(matches!(r, Err(VerbsError::Unsupported(_))), "{r:?}");
}
