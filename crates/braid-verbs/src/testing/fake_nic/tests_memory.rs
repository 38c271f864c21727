//! Registration limits and agent-memory grants on the fake NIC (`nic/memory.rs`), with
//! braid-sim's meaning: ibv_reg_mr's ENOMEM past the device's `max_mr` or a tenant's quota, and
//! a tenant reaching the host agent's bytes only inside what the agent granted it.

use super::*;

const H: u32 = 1;
const AGENT_BUF: u64 = 0x40_000;

fn net_with(limits: MrLimits) -> (FakeNet, TenantId, TenantId) {
    let mut net = FakeNet::with_config(
        1,
        NetConfig {
            mr_limits: limits,
            ..NetConfig::default()
        },
    );
    let t1 = net.add_tenant(H, Box::new(Idle), vec![]);
    let t2 = net.add_tenant(H, Box::new(Idle), vec![]);
    (net, t1, t2)
}

fn reg(net: &mut FakeNet, t: TenantId, addr: u64, len: u64) -> Result<MemoryRegion, VerbsError> {
    net.call_as(H, t, |v| v.reg_mr(addr, len, Access::ALL.tracked()))
}

fn no_memory(r: Result<MemoryRegion, VerbsError>) -> bool {
    matches!(r, Err(VerbsError::NoMemory(_)))
}

#[test]
fn a_tenant_past_its_region_quota_gets_enomem_and_others_do_not() {
    let (mut net, t1, t2) = net_with(MrLimits {
        tenant_max_mr: 2,
        ..MrLimits::default()
    });
    let a = reg(&mut net, t1, 0x1000, 64).unwrap();
    reg(&mut net, t1, 0x2000, 64).unwrap();
    assert!(no_memory(reg(&mut net, t1, 0x3000, 64)), "third region");
    assert_eq!(net.nic(H).mr_refused(), 1);
    // The quota is the tenant's: another tenant and the host agent register freely.
    reg(&mut net, t2, 0x1000, 64).unwrap();
    reg(&mut net, t2, 0x2000, 64).unwrap();
    for i in 0..4 {
        reg(&mut net, AGENT, 0x10_000 + i * 0x1000, 64).unwrap();
    }
    // Deregistering gives the slot back.
    net.call_as(H, t1, |v| v.dereg_mr(&a)).unwrap();
    reg(&mut net, t1, 0x3000, 64).unwrap();
    assert_eq!(net.nic(H).mr_refused(), 1);
}

#[test]
fn a_tenant_past_its_pinned_bytes_gets_enomem() {
    let (mut net, t1, t2) = net_with(MrLimits {
        tenant_max_pinned: 8192,
        ..MrLimits::default()
    });
    reg(&mut net, t1, 0x1000, 4096).unwrap();
    reg(&mut net, t1, 0x10_000, 4096).unwrap();
    // 8192 pinned: one more byte is refused, by size, not by count.
    assert!(no_memory(reg(&mut net, t1, 0x20_000, 1)));
    reg(&mut net, t2, 0x1000, 8192).unwrap();
    assert!(no_memory(reg(&mut net, t2, 0x4000, 4096)));
    reg(&mut net, AGENT, 0x100_000, 1 << 20).unwrap();
    assert_eq!(net.nic(H).mr_refused(), 2);
}

#[test]
fn the_nics_region_table_counts_every_tenant_and_the_agent() {
    let (mut net, t1, t2) = net_with(MrLimits {
        max_mr: 3,
        ..MrLimits::default()
    });
    reg(&mut net, AGENT, 0x1000, 64).unwrap();
    reg(&mut net, t1, 0x1000, 64).unwrap();
    reg(&mut net, t2, 0x1000, 64).unwrap();
    assert!(no_memory(reg(&mut net, t1, 0x2000, 64)));
    assert!(no_memory(reg(&mut net, AGENT, 0x2000, 64)));
    assert_eq!(net.nic(H).mr_refused(), 2);
}

#[test]
fn the_default_table_is_mlx5s_and_no_tenant_quota() {
    let l = NetConfig::default().mr_limits;
    assert_eq!(
        (l.max_mr, l.tenant_max_mr, l.tenant_max_pinned),
        (1 << 24, 0, 0)
    );
}

/// The agent's 8 KiB buffer, its first half granted to tenant 1, its second to tenant 2; the
/// agent's bytes are 0xa1 in the first half and 0xa2 in the second.
fn agent_memory() -> (FakeNet, TenantId, TenantId) {
    let (mut net, t1, t2) = net_with(MrLimits::default());
    reg(&mut net, AGENT, AGENT_BUF, 8192).unwrap();
    net.call_as(H, AGENT, |v| {
        v.write_local(AGENT_BUF, &[0xa1; 4096])?;
        v.write_local(AGENT_BUF + 4096, &[0xa2; 4096])
    })
    .unwrap();
    let shares = net.nic(H).agent_shares();
    shares.borrow_mut().grant(t1, AGENT_BUF, 4096);
    shares.borrow_mut().grant(t2, AGENT_BUF + 4096, 4096);
    (net, t1, t2)
}

fn read(net: &mut FakeNet, t: TenantId, addr: u64, len: u64) -> Vec<u8> {
    net.call_as(H, t, |v| v.read_local(addr, len)).unwrap()
}

#[test]
fn a_tenant_maps_the_agent_memory_granted_to_it() {
    let (mut net, t1, _) = agent_memory();
    reg(&mut net, t1, AGENT_BUF, 4096).unwrap();
    assert_eq!(read(&mut net, t1, AGENT_BUF, 4), [0xa1; 4]);
    // Shared both ways: the agent sees what the tenant writes.
    net.call_as(H, t1, |v| v.write_local(AGENT_BUF, b"mine"))
        .unwrap();
    assert_eq!(read(&mut net, AGENT, AGENT_BUF, 4), *b"mine");
}

#[test]
fn a_tenant_mapping_another_tenants_grant_gets_its_own_bytes() {
    let (mut net, t1, t2) = agent_memory();
    // Tenant 1 registers tenant 2's half (and the whole buffer): no grant covers it, so the
    // addresses are tenant 1's own, zeroed memory.
    reg(&mut net, t1, AGENT_BUF + 4096, 4096).unwrap();
    reg(&mut net, t1, AGENT_BUF, 8192).unwrap();
    assert_eq!(read(&mut net, t1, AGENT_BUF + 4096, 4), [0; 4]);
    assert_eq!(read(&mut net, t1, AGENT_BUF, 4), [0; 4]);
    net.call_as(H, t1, |v| v.write_local(AGENT_BUF + 4096, b"evil"))
        .unwrap();
    assert_eq!(read(&mut net, AGENT, AGENT_BUF + 4096, 4), [0xa2; 4]);
    // The owner of the grant still sees the agent's bytes.
    reg(&mut net, t2, AGENT_BUF + 4096, 4096).unwrap();
    assert_eq!(read(&mut net, t2, AGENT_BUF + 4096, 4), [0xa2; 4]);
}

#[test]
fn a_grant_without_agent_memory_behind_it_maps_nothing() {
    let (mut net, t1, _) = net_with(MrLimits::default());
    net.nic(H)
        .agent_shares()
        .borrow_mut()
        .grant(t1, AGENT_BUF, 4096);
    reg(&mut net, t1, AGENT_BUF, 4096).unwrap();
    net.call_as(H, t1, |v| v.write_local(AGENT_BUF, b"own!"))
        .unwrap();
    assert_eq!(net.nic(H).read_mem(AGENT, AGENT_BUF, 4), [0; 4]);
}

#[test]
fn a_region_registered_after_the_revoke_is_private() {
    let (mut net, t1, _) = agent_memory();
    let before = reg(&mut net, t1, AGENT_BUF, 1024).unwrap();
    net.nic(H)
        .agent_shares()
        .borrow_mut()
        .revoke(t1, AGENT_BUF, 4096);
    // Mapped before the revoke: still mapped (an mmap outlives its shm_unlink)...
    assert_eq!(read(&mut net, t1, AGENT_BUF, 4), [0xa1; 4]);
    net.call_as(H, t1, |v| v.dereg_mr(&before)).unwrap();
    // ...registered after it: the tenant's own memory.
    reg(&mut net, t1, AGENT_BUF + 2048, 1024).unwrap();
    assert_eq!(read(&mut net, t1, AGENT_BUF + 2048, 4), [0; 4]);
}

#[test]
fn a_remote_write_through_a_granted_region_lands_in_the_agents_memory() {
    // Host 1's tenant 1 exposes its granted slice; host 2 WRITEs into it.
    let mut net = FakeNet::new(2);
    let t1 = net.add_tenant(1, Box::new(Idle), vec![]);
    let t2 = net.add_tenant(2, Box::new(Idle), vec![]);
    net.call_as(1, AGENT, |v| {
        v.reg_mr(AGENT_BUF, 8192, Access::ALL.tracked())
    })
    .unwrap();
    net.nic(1)
        .agent_shares()
        .borrow_mut()
        .grant(t1, AGENT_BUF, 4096);
    let end = |net: &mut FakeNet, host, t, addr| {
        net.call_as(host, t, |v| {
            let cq = v.create_cq(8)?;
            let qp = v.create_qp(&QpInit::rc(cq))?;
            let mr = v.reg_mr(addr, 4096, Access::ALL.tracked())?;
            Ok::<_, VerbsError>((cq, qp, mr))
        })
        .unwrap()
    };
    let (_, q1, m1) = end(&mut net, 1, t1, AGENT_BUF);
    let (c2, q2, m2) = end(&mut net, 2, t2, 0x1000);
    let r = |host, qpn| RemoteQp {
        host,
        qpn,
        udp_sport: None,
    };
    net.call_as(1, t1, |v| v.connect_qp(q1, r(2, q2))).unwrap();
    net.call_as(2, t2, |v| v.connect_qp(q2, r(1, q1))).unwrap();
    net.call_as(2, t2, |v| {
        v.write_local(0x1000, b"remote")?;
        let mut wr = SendWr::new(
            1,
            SendOp::Write,
            vec![Sge {
                addr: 0x1000,
                length: 6,
                lkey: m2.lkey,
            }],
        );
        wr.remote_addr = m1.addr + 8;
        wr.rkey = m1.rkey;
        v.post_send(q2, wr)
    })
    .unwrap();
    net.run();
    let mut wcs = Vec::new();
    net.call_as(2, t2, |v| v.poll_cq(c2, 4, &mut wcs));
    assert_eq!(wcs[0].status, WcStatus::Success);
    assert_eq!(net.nic(1).read_mem(AGENT, AGENT_BUF + 8, 6), *b"remote");
}
