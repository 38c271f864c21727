//! `PeerLink` over the fake NIC: the handshake, a forged receive, an impostor on the board and a
//! link whose peer dies (error injection).

use super::*;
use braid_verbs::rendezvous::Side;
use braid_verbs::testing::{FakeNet, Stop};
use braid_verbs::*;

const A: u32 = 1;
const B: u32 = 2;
const C: u32 = 3;

/// The board keys of the link between `a` and `b` (connection, ready), as an agent derives
/// them from the pair.
fn keys_of(a: u32, b: u32) -> (u64, u64) {
    let k = 100 * a.min(b) as u64 + a.max(b) as u64;
    (k, k + 50)
}

/// One end of a link: its tenant, CQ, QP, endpoint and state machine.
struct End {
    host: u32,
    tenant: TenantId,
    cq: CqId,
    ep: Endpoint,
    link: PeerLink,
    keys: LinkKeys,
}

fn end(net: &mut FakeNet, host: u32, peer: u32) -> End {
    let tenant = net.add_tenant(host, Box::new(Idle), vec![]);
    let (cq, ep) = net.call_as(host, tenant, |v| {
        let cq = v.create_cq(64).unwrap();
        let qp = v.create_qp(&QpInit::rc(cq)).unwrap();
        let mr = v.reg_mr(0x1000, 4096, Access::ALL).unwrap();
        let ep = Endpoint {
            host,
            qpn: qp,
            addr: mr.addr,
            rkey: mr.rkey,
        };
        (cq, ep)
    });
    let (conn, ready) = keys_of(host, peer);
    let keys = LinkKeys::between(host, peer, conn, ready);
    keys.publish(net.board(), ep);
    End {
        host,
        tenant,
        cq,
        ep,
        link: PeerLink::published(peer, ep.qpn),
        keys,
    }
}

fn step(net: &mut FakeNet, e: &mut End) -> Result<bool, LinkError> {
    let board = net.board().clone();
    let (link, keys, ep) = (&mut e.link, e.keys, e.ep);
    net.call_as(e.host, e.tenant, |v| {
        link.advance(v, &board, keys, ep, |v, _| {
            for i in 0..4 {
                v.post_recv(
                    ep.qpn,
                    RecvWr {
                        wr_id: i,
                        sg_list: vec![],
                    },
                )
                .unwrap();
            }
        })
    })
}

fn up(net: &mut FakeNet) -> (End, End) {
    let mut a = end(net, A, B);
    let mut b = end(net, B, A);
    for _ in 0..2 {
        step(net, &mut a).unwrap();
        step(net, &mut b).unwrap();
    }
    assert!(a.link.is_ready() && b.link.is_ready());
    assert_eq!(a.link.remote().map(|r| r.qpn), Some(b.ep.qpn));
    (a, b)
}

fn send(net: &mut FakeNet, host: u32, tenant: TenantId, qp: QpNum, imm: u32) {
    let wr = SendWr::new(9, SendOp::SendWithImm(imm), vec![]);
    net.call_as(host, tenant, |v| v.post_send(qp, wr)).unwrap();
}

fn receives(net: &mut FakeNet, e: &End) -> Vec<WorkCompletion> {
    let mut out = Vec::new();
    net.call_as(e.host, e.tenant, |v| v.poll_cq(e.cq, 64, &mut out));
    out.retain(|w| matches!(w.opcode, WcOpcode::Recv | WcOpcode::RecvWithImm));
    out
}

fn wc_from(host: u32, qp: QpNum) -> WorkCompletion {
    WorkCompletion {
        wr_id: 0,
        status: WcStatus::Success,
        opcode: WcOpcode::RecvWithImm,
        byte_len: 0,
        imm: Some(7),
        qp_num: 1,
        src_host: host,
        src_qp: qp,
    }
}

#[test]
fn the_peers_message_is_taken_and_a_forged_one_dropped_and_counted() {
    let mut net = FakeNet::new(3);
    let (mut a, b) = up(&mut net);
    send(&mut net, B, b.tenant, b.ep.qpn, 1);
    assert_eq!(net.run(), Stop::Idle);
    let got = receives(&mut net, &a);
    assert_eq!(got.len(), 1);
    assert!(a.link.from_peer(&got[0]), "the peer's own QP");
    assert_eq!(a.link.forged, 0);
    // What the NIC lets through from the peer's host but not from the peer's QP (another
    // tenant there; a real NIC cannot tell them apart, the BTH names no source QP), and
    // anything from elsewhere, is forged.
    assert!(!a.link.from_peer(&wc_from(B, b.ep.qpn + 1)));
    assert!(!a.link.from_peer(&wc_from(C, b.ep.qpn)));
    assert_eq!(a.link.forged, 2);
    // Before it is connected a link takes nothing.
    let mut fresh = PeerLink::published(B, 5);
    assert!(!fresh.from_peer(&wc_from(B, b.ep.qpn)));
    assert_eq!(fresh.forged, 1);
}

/// A tenant of a third host publishes its own endpoint under the link's key before the peer's
/// agent does: the link fails instead of connecting to it.
#[test]
fn an_impostors_endpoint_on_the_board_fails_the_link_unconnected() {
    let mut net = FakeNet::new(3);
    let mut a = end(&mut net, A, B);
    let evil = net.add_tenant(C, Box::new(Idle), vec![]);
    let evil_ep = net.call_as(C, evil, |v| {
        let cq = v.create_cq(8).unwrap();
        let qp = v.create_qp(&QpInit::rc(cq)).unwrap();
        Endpoint {
            host: C,
            qpn: qp,
            addr: 0,
            rkey: 0,
        }
    });
    // The peer's side of the link's key (A < B: A is the client, B the server).
    assert_eq!(a.keys.side, Side::Client);
    net.board()
        .borrow_mut()
        .publish(keys_of(A, B).0, Side::Server, evil_ep);
    assert_eq!(step(&mut net, &mut a), Err(LinkError::Impostor(evil_ep)));
    assert_eq!(a.link.phase, LinkPhase::Failed);
    assert_eq!(a.link.remote(), None);
    assert_eq!(
        net.nic(A).qp_attr(a.ep.qpn).unwrap().state,
        QpState::Init,
        "never connected to the impostor"
    );
}

/// Error injection: the peer's host dies; the link's next message fails (retry exceeded), the
/// link fails once however many errors follow, and a link still waiting gives up once.
#[test]
fn a_dead_peer_fails_the_link_once() {
    let mut net = FakeNet::new(3);
    let (mut a, _b) = up(&mut net);
    net.kill_host(B);
    send(&mut net, A, a.tenant, a.ep.qpn, 1);
    send(&mut net, A, a.tenant, a.ep.qpn, 2);
    net.run();
    let mut out = Vec::new();
    net.call_as(A, a.tenant, |v| v.poll_cq(a.cq, 64, &mut out));
    let errors = out.iter().filter(|w| w.status != WcStatus::Success).count();
    assert_eq!(out[0].status, WcStatus::RetryExceeded);
    assert_eq!(
        errors, 6,
        "the first SEND times out, the other and the 4 RECVs are flushed"
    );
    assert!(
        out.iter().all(|w| w.status != WcStatus::Success),
        "nothing to take"
    );
    let failures = (0..errors).filter(|_| a.link.fail()).count();
    assert_eq!(failures, 1);
    assert!(!a.link.is_ready());
    assert!(!a.link.give_up(), "already failed");
    let mut waiting = end(&mut net, A, C);
    assert!(step(&mut net, &mut waiting).unwrap(), "no peer yet");
    assert!(waiting.link.give_up());
    assert!(!waiting.link.give_up());
}

/// A leg (re-class) of an up link over the fake NIC: each end creates a QP in its class and
/// publishes it under the generation's keys; the class-bound traffic moves to the leg only once
/// both ends are connected, control stays on the first QP, a leg's receive counts only from the
/// peer's QP of the same generation, and a failed leg leaves the link up.
#[test]
fn a_leg_in_another_class_takes_over_once_both_ends_are_connected() {
    let mut net = FakeNet::new(3);
    let (mut a, mut b) = up(&mut net);
    assert_eq!(a.link.class_qp(), Some((a.ep.qpn, None)));
    assert!(a.link.wants_reclass(Some(3)) && !a.link.wants_reclass(None));
    let gen_keys = |e: &End, g: u32| {
        let (conn, ready) = keys_of(e.host, if e.host == A { B } else { A });
        LinkKeys::between(
            e.host,
            if e.host == A { B } else { A },
            conn + 1000 * g as u64,
            ready + 1000 * g as u64,
        )
    };
    let leg = |net: &mut FakeNet, e: &mut End, class: Option<u8>, g: u32| {
        let qp = net.call_as(e.host, e.tenant, |v| {
            v.create_qp(&QpInit {
                priority: class,
                ..QpInit::rc(e.cq)
            })
            .unwrap()
        });
        gen_keys(e, g).publish(net.board(), Endpoint { qpn: qp, ..e.ep });
        e.link.reclass(qp, class, g, false);
        qp
    };
    let step_legs = |net: &mut FakeNet, e: &mut End| {
        let board = net.board().clone();
        let ks: Vec<LinkKeys> = (0..4).map(|g| gen_keys(e, g)).collect();
        let ep = e.ep;
        let link = &mut e.link;
        net.call_as(e.host, e.tenant, |v| {
            link.advance_legs(
                v,
                &board,
                |g| ks[g as usize],
                |qp| Endpoint { qpn: qp, ..ep },
            )
        })
    };
    let g = a.link.next_generation();
    assert_eq!(g, 1);
    let qa = leg(&mut net, &mut a, Some(3), g);
    assert!(!a.link.wants_reclass(Some(3)), "a leg on its way counts");
    assert_eq!(a.link.take_unannounced(), vec![1]);
    assert!(a.link.take_unannounced().is_empty());
    // Until the peer has its end, A's traffic stays on the first QP.
    assert!(step_legs(&mut net, &mut a).0, "waits for the peer");
    assert_eq!(a.link.class_qp(), Some((a.ep.qpn, None)));
    assert!(!a.link.settled());
    // The peer learns the generation (on the first QP) and makes its end in its own class.
    assert!(b.link.wants_generation(1) && !b.link.wants_generation(MAX_GENERATIONS));
    let qb = leg(&mut net, &mut b, None, 1);
    assert!(!b.link.wants_generation(1));
    let (w, e) = step_legs(&mut net, &mut b);
    assert!(w && e.is_empty(), "connected, waits for A's ready record");
    let (w, e) = step_legs(&mut net, &mut a);
    assert!(!w && e.is_empty());
    assert_eq!(a.link.class_qp(), Some((qa, Some(3))));
    assert_eq!(a.link.legs()[0].remote().map(|r| r.qpn), Some(qb));
    assert!(!step_legs(&mut net, &mut b).0);
    assert_eq!(b.link.class_qp(), Some((qb, None)));
    assert!(a.link.settled() && b.link.settled());
    assert!(a.link.owns(qa) && a.link.owns(a.ep.qpn) && !a.link.owns(qb));
    // A message on the leg from the peer's leg QP counts; one from the peer's first QP does not.
    net.call_as(A, a.tenant, |v| {
        v.post_recv(
            qa,
            RecvWr {
                wr_id: 0,
                sg_list: vec![],
            },
        )
    })
    .unwrap();
    send(&mut net, B, b.tenant, qb, 2);
    assert_eq!(net.run(), Stop::Idle);
    let got = receives(&mut net, &a);
    let on_leg: Vec<_> = got.iter().filter(|w| w.qp_num == qa).collect();
    assert!(!on_leg.is_empty());
    assert!(a.link.from_peer(on_leg[0]));
    let mut wrong = *on_leg[0];
    wrong.src_qp = b.ep.qpn;
    assert!(!a.link.from_peer(&wrong));
    // A failed leg: the traffic returns to the first QP, the link stays up and wants a new
    // generation for the class.
    assert!(a.link.fail_qp(qa));
    assert!(!a.link.fail_qp(qa), "counted once");
    assert!(a.link.is_ready());
    assert_eq!(a.link.class_qp(), Some((a.ep.qpn, None)));
    assert!(a.link.wants_reclass(Some(3)));
    assert_eq!(a.link.next_generation(), 2);
}

/// A peer asking for generation after generation gets at most `MAX_GENERATIONS - 1` legs.
#[test]
fn generations_are_bounded() {
    let mut l = PeerLink::published_in(B, 1, None);
    let mut made = 0;
    for g in 1..100 {
        if l.wants_generation(g) {
            l.reclass(10 + g, Some(g as u8), g, true);
            made += 1;
        }
    }
    assert_eq!(made, MAX_GENERATIONS - 1);
    assert!(!l.wants_reclass(Some(200)), "no generation left");
}
