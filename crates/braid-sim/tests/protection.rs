//! Protection between tenants on the simulated NIC, as ibverbs defines it: an rkey is honoured
//! only on a QP of its region's protection domain (so never on another tenant's connection), and
//! each tenant has its own address space. The setting is the isolation review's audit
//! (`reviews/isolation.md` section 4): Alice (host 1) holds a secret in a tracked region; Mallory
//! is Eve's own tenant on host 1; Eve (host 0) is connected only to Mallory.

mod common;
use braid_verbs::*;
use common::*;
use serde_json::json;
use std::cell::RefCell;
use std::rc::Rc;

/// Alice's region: the address, its length, and where in it the secret lies.
const ALICE_AT: u64 = 0x10_0000;
const ALICE_LEN: u64 = 64 << 10;
const SECRET_OFF: u64 = 40 << 10;
const SECRET: &[u8] = b"alice's secret: the launch codes";
/// Eve's own buffer.
const EVE_AT: u64 = 0x20_0000;
const US: u64 = 1_000_000;

#[derive(Default)]
struct Board {
    alice_mr: Option<MemoryRegion>,
    /// Mallory's region at Alice's very addresses (her own bytes).
    mallory_mr: Option<MemoryRegion>,
    /// (host, qpn) of Eve's and Mallory's QPs, pair k at index k.
    eve: Vec<(u32, QpNum)>,
    mallory: Vec<(u32, QpNum)>,
    eve_lkey: u32,
    /// Eve's completions: (wr_id, status).
    eve_wcs: Vec<(u64, WcStatus)>,
    /// What each tenant read of its memory at the end.
    alice_end: Vec<u8>,
    eve_end: Vec<u8>,
    mallory_end: Vec<u8>,
    /// Bob's look at Alice's addresses: what reg_mr + read_local gave him, and his own write.
    bob_first: Vec<u8>,
    bob_after_write: Vec<u8>,
}
type B = Rc<RefCell<Board>>;

fn secret_len() -> u64 {
    SECRET.len() as u64
}

struct Alice(B);
impl App for Alice {
    fn start(&mut self, v: &mut dyn Verbs) {
        let mr = v
            .reg_mr(ALICE_AT, ALICE_LEN, Access::ALL.tracked())
            .unwrap();
        v.write_local(ALICE_AT + SECRET_OFF, SECRET).unwrap();
        self.0.borrow_mut().alice_mr = Some(mr);
        v.set_timer(v.now() + 500 * US, 1);
    }
    fn on_event(&mut self, v: &mut dyn Verbs, ev: Event) {
        if ev == Event::Timer(1) {
            self.0.borrow_mut().alice_end =
                v.read_local(ALICE_AT + SECRET_OFF, secret_len()).unwrap();
        }
    }
}

/// One RC QP on a CQ of its own, per pair.
fn qps(v: &mut dyn Verbs, n: usize) -> Vec<(u32, QpNum)> {
    let cq = v.create_cq(64).unwrap();
    v.req_notify_cq(cq).unwrap();
    (0..n)
        .map(|_| (v.local_host(), v.create_qp(&QpInit::rc(cq)).unwrap()))
        .collect()
}

fn connect(v: &mut dyn Verbs, mine: &[(u32, QpNum)], theirs: &[(u32, QpNum)]) {
    for (m, t) in mine.iter().zip(theirs) {
        v.connect_qp(
            m.1,
            RemoteQp {
                host: t.0,
                qpn: t.1,
                udp_sport: None,
            },
        )
        .unwrap();
    }
}

/// Mallory: Eve's accomplice on Alice's host. Three QPs for Eve; with `own_region`, a region of
/// her own at Alice's addresses, writable remotely.
struct Mallory(B, bool);
impl App for Mallory {
    fn start(&mut self, v: &mut dyn Verbs) {
        let q = qps(v, 3);
        if self.1 {
            let mr = v
                .reg_mr(ALICE_AT, ALICE_LEN, Access::ALL.tracked())
                .unwrap();
            self.0.borrow_mut().mallory_mr = Some(mr);
        }
        self.0.borrow_mut().mallory = q;
        v.set_timer(v.now() + US, 1);
        v.set_timer(v.now() + 500 * US, 2);
    }
    fn on_event(&mut self, v: &mut dyn Verbs, ev: Event) {
        match ev {
            Event::Timer(1) => {
                let (mine, eve) = {
                    let b = self.0.borrow();
                    (b.mallory.clone(), b.eve.clone())
                };
                connect(v, &mine, &eve);
            }
            Event::Timer(2) if self.1 => {
                self.0.borrow_mut().mallory_end =
                    v.read_local(ALICE_AT + SECRET_OFF, secret_len()).unwrap();
            }
            _ => {}
        }
    }
}

/// Eve: READs Alice's secret and WRITEs over it with Alice's rkey, each on its own connection
/// to Mallory (a refused access puts the QP in Error); with Mallory's region, also a legitimate
/// WRITE to Mallory's bytes at Alice's addresses.
struct Eve(B);
impl App for Eve {
    fn start(&mut self, v: &mut dyn Verbs) {
        let mr = v.reg_mr(EVE_AT, 4096, Access::ALL.tracked()).unwrap();
        v.write_local(EVE_AT, &[0xEE; 64]).unwrap();
        self.0.borrow_mut().eve_lkey = mr.lkey;
        self.0.borrow_mut().eve = qps(v, 3);
        v.set_timer(v.now() + 2 * US, 1);
        v.set_timer(v.now() + 400 * US, 2);
    }
    fn on_event(&mut self, v: &mut dyn Verbs, ev: Event) {
        match ev {
            Event::Timer(1) => {
                let (mine, mallory, alice, mallory_mr, lkey) = {
                    let b = self.0.borrow();
                    let alice = b.alice_mr.unwrap();
                    (
                        b.eve.clone(),
                        b.mallory.clone(),
                        alice,
                        b.mallory_mr,
                        b.eve_lkey,
                    )
                };
                connect(v, &mine, &mallory);
                let sge = |addr, len| {
                    vec![Sge {
                        addr,
                        length: len as u32,
                        lkey,
                    }]
                };
                // 1. READ Alice's secret into Eve's buffer at +1 KiB.
                let mut r = SendWr::new(1, SendOp::Read, sge(EVE_AT + 1024, secret_len()));
                r.remote_addr = ALICE_AT + SECRET_OFF;
                r.rkey = alice.rkey;
                v.post_send(mine[0].1, r).unwrap();
                // 2. WRITE 0xEE over it.
                let mut w = SendWr::new(2, SendOp::Write, sge(EVE_AT, secret_len()));
                w.remote_addr = ALICE_AT + SECRET_OFF;
                w.rkey = alice.rkey;
                v.post_send(mine[1].1, w).unwrap();
                // 3. With Mallory's consent: WRITE into her region, at Alice's addresses.
                if let Some(m) = mallory_mr {
                    let mut w = SendWr::new(3, SendOp::Write, sge(EVE_AT, secret_len()));
                    w.remote_addr = ALICE_AT + SECRET_OFF;
                    w.rkey = m.rkey;
                    v.post_send(mine[2].1, w).unwrap();
                }
            }
            Event::Timer(2) => {
                self.0.borrow_mut().eve_end = v.read_local(EVE_AT + 1024, secret_len()).unwrap();
            }
            Event::Completion(cq) => {
                let mut out = Vec::new();
                poll_and_rearm(v, cq, &mut out).unwrap();
                self.0
                    .borrow_mut()
                    .eve_wcs
                    .extend(out.iter().map(|w| (w.wr_id, w.status)));
            }
            _ => {}
        }
    }
}

/// Bob, another tenant of Alice's host, registers Alice's addresses and looks.
struct Bob(B);
impl App for Bob {
    fn start(&mut self, v: &mut dyn Verbs) {
        v.set_timer(v.now() + 10 * US, 1);
    }
    fn on_event(&mut self, v: &mut dyn Verbs, ev: Event) {
        if ev == Event::Timer(1) {
            v.reg_mr(ALICE_AT, ALICE_LEN, Access::ALL.tracked())
                .unwrap();
            let at = ALICE_AT + SECRET_OFF;
            let first = v.read_local(at, secret_len()).unwrap();
            v.write_local(at, &vec![0xBB; SECRET.len()]).unwrap();
            let after = v.read_local(at, secret_len()).unwrap();
            let mut b = self.0.borrow_mut();
            b.bob_first = first;
            b.bob_after_write = after;
        }
    }
}

/// Alice, Mallory (and Bob) on host 1, Eve on host 0; runs 1 ms.
fn audit(mallory_region: bool, bob: bool) -> Board {
    let s = json!({"duration": "1ms",
        "topology": dumbbell(1, 1, link("40Gbps", "1us"), link("40Gbps", "1us"))});
    let mut sim = build(&s);
    let b: B = Default::default();
    sim.add_app(1, Box::new(Alice(b.clone())), vec![]).unwrap();
    sim.add_app(1, Box::new(Mallory(b.clone(), mallory_region)), vec![])
        .unwrap();
    if bob {
        sim.add_app(1, Box::new(Bob(b.clone())), vec![]).unwrap();
    }
    sim.add_app(0, Box::new(Eve(b.clone())), vec![]).unwrap();
    sim.run();
    b.take()
}

/// The review's D1: Eve's READ and WRITE with Alice's rkey over Eve <-> Mallory. The rkey's
/// region is not in the PD of the QP the requests arrive on (Mallory's), so both fail with a
/// remote access error, as over ibverbs; Alice's bytes are unchanged and Eve got none of them.
#[test]
fn another_tenants_rkey_over_ones_own_connection_is_refused() {
    let b = audit(false, false);
    let mut wcs = b.eve_wcs.clone();
    wcs.sort_by_key(|w| w.0);
    assert_eq!(
        wcs,
        vec![
            (1, WcStatus::RemoteAccessError),
            (2, WcStatus::RemoteAccessError)
        ],
        "Eve's READ and WRITE with Alice's rkey"
    );
    assert_eq!(b.alice_end, SECRET, "Alice's bytes unchanged");
    assert_eq!(
        b.eve_end,
        vec![0; SECRET.len()],
        "nothing of Alice's reached Eve"
    );
}

/// The review's D2: Bob registering Alice's addresses gets fresh bytes of his own; his writes
/// land in them, never in Alice's.
#[test]
fn registering_another_tenants_addresses_gives_ones_own_bytes() {
    let b = audit(false, true);
    assert_eq!(
        b.bob_first,
        vec![0; SECRET.len()],
        "Bob read Alice's secret"
    );
    assert_eq!(
        b.bob_after_write,
        vec![0xBB; SECRET.len()],
        "Bob's own write"
    );
    assert_eq!(b.alice_end, SECRET, "Bob's write reached Alice's bytes");
}

/// A WRITE that is allowed (Mallory's own rkey on Mallory's QP) lands in the address space of
/// the region's owner: Mallory's bytes at Alice's addresses change, Alice's do not.
#[test]
fn remote_placement_uses_the_address_space_of_the_regions_owner() {
    let b = audit(true, false);
    let mut wcs = b.eve_wcs.clone();
    wcs.sort_by_key(|w| w.0);
    assert_eq!(
        wcs,
        vec![
            (1, WcStatus::RemoteAccessError),
            (2, WcStatus::RemoteAccessError),
            (3, WcStatus::Success)
        ]
    );
    assert_eq!(
        b.mallory_end,
        vec![0xEE; SECRET.len()],
        "the WRITE reached Mallory"
    );
    assert_eq!(b.alice_end, SECRET, "and not Alice");
}

/// Same scenario, same seed: identical outcome.
#[test]
fn the_audit_is_deterministic() {
    let (a, b) = (audit(true, true), audit(true, true));
    assert_eq!(a.eve_wcs, b.eve_wcs);
    assert_eq!(a.mallory_end, b.mallory_end);
}

// ------------------------------------------------------------- DRUM's global buffer

/// Carol, a DRUM tenant of host 1: her tracked region lives in her slice of the agent's global
/// buffer (the first slice, at the buffer's start); she writes the secret there.
struct Carol(B);
impl App for Carol {
    fn start(&mut self, v: &mut dyn Verbs) {
        let mr = v
            .reg_mr(ALICE_AT, ALICE_LEN, Access::ALL.tracked())
            .unwrap();
        v.write_local(ALICE_AT + SECRET_OFF, SECRET).unwrap();
        self.0.borrow_mut().alice_mr = Some(mr);
        v.set_timer(v.now() + 500 * US, 1);
    }
    fn on_event(&mut self, v: &mut dyn Verbs, ev: Event) {
        if ev == Event::Timer(1) {
            self.0.borrow_mut().alice_end =
                v.read_local(ALICE_AT + SECRET_OFF, secret_len()).unwrap();
        }
    }
}

/// Dave, another tenant of host 1 (DRUM or raw), registers the global buffer's first slice by
/// address, reads it and writes over it.
struct Dave(B);
impl App for Dave {
    fn start(&mut self, v: &mut dyn Verbs) {
        v.set_timer(v.now() + 10 * US, 1);
    }
    fn on_event(&mut self, v: &mut dyn Verbs, ev: Event) {
        if ev == Event::Timer(1) {
            let slice = braid_middleware::drum::state::GLOBAL_ADDR;
            // Below DRUM's layer if Dave has one: the addresses the NIC sees.
            v.reg_mr(slice, ALICE_LEN, Access::ALL.tracked()).unwrap();
            let at = slice + SECRET_OFF;
            let first = v.read_local(at, secret_len()).unwrap();
            v.write_local(at, &vec![0xDD; SECRET.len()]).unwrap();
            let mut b = self.0.borrow_mut();
            b.bob_first = first;
        }
    }
}

/// Carol under DRUM and Dave raw on host 1: what Dave read at Carol's slice, and what Carol
/// read of her own secret at the end.
fn drum_slice_audit() -> Board {
    let s = json!({"duration": "1ms",
        "topology": dumbbell(1, 1, link("40Gbps", "1us"), link("40Gbps", "1us"))});
    let mut sim = build(&s);
    let b: B = Default::default();
    let caps = sim.world().hosts[1].caps.clone();
    let shares = sim.world().hosts[1].nic.mem.shares.clone();
    let mut ctx = HostCtx::new(1, caps)
        .with_board(braid_verbs::rendezvous::board())
        .with_shares(shares);
    let layer = braid_middleware::DrumConfig::default()
        .build(&mut ctx, 1)
        .expect("drum builds");
    sim.set_agent(1, ctx.take_agents()).unwrap();
    sim.add_app(1, Box::new(Carol(b.clone())), vec![layer])
        .unwrap();
    sim.add_app(1, Box::new(Dave(b.clone())), vec![]).unwrap();
    sim.run();
    b.take()
}

/// The DRUM agent shares each tenant's slice of its global buffer with that tenant only
/// (`AgentShares`): Dave, registering Carol's slice by its address, gets his own bytes (zeros)
/// and his writes land there, not in Carol's secret. Before the explicit share, the agent's
/// memory was shared with every tenant of the host by address and Dave read the secret. Fails
/// with the share check removed (`memory.rs`, `register_in`: `covers`).
#[test]
fn a_tenant_mapping_another_tenants_drum_slice_gets_its_own_bytes() {
    let b = drum_slice_audit();
    assert_eq!(
        b.alice_end, SECRET,
        "Carol's secret unchanged, read through her slice"
    );
    assert_eq!(
        b.bob_first,
        vec![0; SECRET.len()],
        "Dave read Carol's slice"
    );
}
