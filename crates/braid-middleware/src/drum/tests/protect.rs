//! What the agent does for a tenant, it does only over what that tenant owns: a one-sided access
//! through the global buffer only to a slice of the tenant owning the connection it arrives on,
//! and a connection's arrivals only to that connection, whatever another tenant connects to.
//! Plain RDMA over the fake NIC (each tenant its own QP and regions) is the reference.

use super::*;

/// What a peer connected to tenant 1 gets when it names tenant 2's rkey at tenant 2's address
/// (in bounds, rights granted): the status and the QP's state, under `f` on every tenant.
fn foreign_rkey_in_bounds(f: &dyn MiddlewareFactory, read: bool) -> (WcStatus, QpState) {
    let (mut net, a, b) = net_of(f, 2);
    let e1 = end(&mut net, H1, a[0], 0x1000_0000, Access::ALL);
    let e2 = end(&mut net, H1, a[1], 0x2000_0000, Access::ALL);
    let p = end(&mut net, H2, b[0], 0x1000_0000, Access::ALL);
    connect(&mut net, &p, &e1);
    net.run();
    let mut wr = write(&p, &e2, 2, 0, 8);
    if read {
        wr.op = SendOp::Read;
    }
    net.call_as(H2, p.t, |v| v.post_send(p.qp, wr)).unwrap();
    net.run();
    let st = poll(&mut net, &p)[0].status;
    (st, state(&mut net, &p))
}

/// ibverbs: an rkey is valid only on a QP of its region's protection domain. Under DRUM the NIC
/// sees the agents' global key on a shared QP, so the agent must check the slice's owner.
#[test]
fn a_foreign_rkey_over_ones_own_connection_is_refused() {
    let raw = crate::RawConfig::default();
    for read in [false, true] {
        let want = foreign_rkey_in_bounds(&raw, read);
        assert_eq!(
            want,
            (WcStatus::RemoteAccessError, QpState::Error),
            "raw, read={read}"
        );
        let drum = foreign_rkey_in_bounds(&DrumConfig::default(), read);
        assert_eq!(drum, want, "drum, read={read}");
        let share = foreign_rkey_in_bounds(&ShareConfig::default(), read);
        assert_eq!(share, want, "share, read={read}");
    }
}

/// (receives of the victim, receives of the attacker) after the victim's peer SENDs twice: once
/// after the attacker connected its QP to the victim peer's QP number, once after the attacker
/// destroyed that QP again.
fn hijacked_arrivals(f: &dyn MiddlewareFactory) -> (usize, usize) {
    let (mut net, a, b) = net_of(f, 2);
    let victim = end(&mut net, H1, a[0], 0x1000_0000, Access::ALL);
    let attacker = end(&mut net, H1, a[1], 0x2000_0000, Access::ALL);
    let peer = end(&mut net, H2, b[0], 0x1000_0000, Access::ALL);
    connect(&mut net, &victim, &peer);
    net.run();
    net.call_as(H1, attacker.t, |v| v.connect_qp(attacker.qp, rq(&peer)))
        .unwrap();
    for e in [&victim, &attacker] {
        for i in 0..2 {
            net.call_as(H1, e.t, |v| v.post_recv(e.qp, recv(e, i)))
                .unwrap();
        }
    }
    net.run();
    net.call_as(H2, peer.t, |v| v.post_send(peer.qp, send(&peer, 1, 64)))
        .unwrap();
    net.run();
    let mut got = (
        poll(&mut net, &victim).len(),
        poll(&mut net, &attacker).len(),
    );
    net.call_as(H1, attacker.t, |v| v.destroy_qp(attacker.qp))
        .unwrap();
    net.call_as(H2, peer.t, |v| v.post_send(peer.qp, send(&peer, 2, 64)))
        .unwrap();
    net.run();
    got.0 += poll(&mut net, &victim).len();
    got
}

/// A tenant that connects its QP to the QP number another tenant's connection is connected to
/// gets none of that connection's messages, and destroying it takes nothing from the victim.
#[test]
fn naming_another_connections_peer_steals_none_of_its_messages() {
    let raw = crate::RawConfig::default();
    let want = hijacked_arrivals(&raw);
    assert_eq!(want, (2, 0), "raw");
    assert_eq!(hijacked_arrivals(&DrumConfig::default()), want, "drum");
    assert_eq!(hijacked_arrivals(&ShareConfig::default()), want, "share");
}

/// The default PD's `reg_mr_in` gives a slice, as `reg_mr` does (a WRITE with its key goes
/// through); other PDs are not offered under DRUM or SHARE.
#[test]
fn drum_offers_the_default_protection_domain_only() {
    for f in [
        &DrumConfig::default() as &dyn MiddlewareFactory,
        &ShareConfig::default(),
    ] {
        let (mut net, a, b) = net_of(f, 1);
        let e = end(&mut net, H1, a[0], 0x1000_0000, Access::ALL);
        let p = end(&mut net, H2, b[0], 0x1000_0000, Access::ALL);
        connect(&mut net, &e, &p);
        net.run();
        let mr = net
            .call_as(H1, e.t, |v| {
                v.reg_mr_in(DEFAULT_PD, 0x5000_0000, 4096, Access::ALL)
            })
            .unwrap();
        let mut w = write(&e, &p, 3, 0, 8);
        w.sg_list[0] = Sge {
            addr: mr.addr,
            length: 8,
            lkey: mr.lkey,
        };
        net.call_as(H1, e.t, |v| v.post_send(e.qp, w)).unwrap();
        net.run();
        assert_eq!(statuses(&mut net, &e), vec![(3, WcStatus::Success)]);
        assert!(matches!(
            net.call_as(H1, e.t, |v| v.alloc_pd()),
            Err(VerbsError::Unsupported(_))
        ));
        let init = QpInit {
            pd: 7,
            ..QpInit::rc(e.cq)
        };
        assert!(matches!(
            net.call_as(H1, e.t, |v| v.create_qp(&init)),
            Err(VerbsError::Unsupported(_))
        ));
    }
}
