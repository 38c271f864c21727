//! The path a flow's packets took, replayed after the run for `flows.path`: ECMP's hash, or a
//! per-flow balancer's own choice (WCMP's weighted hash). A switch whose policy chooses per
//! packet or per flowlet (spraying, adaptive routing, LetFlow) has no replay: the flow's packets
//! may have crossed it on several ports, and the table says so instead of naming the one port
//! the 5-tuple hash would have picked.

use super::path_capacity::{Fabric, PathCapacity};
use super::{port_at, Role, World};
use crate::packet::{Packet, PktKind};

impl World {
    /// Node ids a packet from host `src_host` to host `dst_host` with UDP source port `sport`
    /// visits, each switch choosing as its policy does (`cap`: the capacities WCMP weighs by,
    /// evaluated on demand). None: a switch on the way chooses per packet or per flowlet. The
    /// routes are those at the end of the run (after any failover reroute).
    pub(crate) fn flow_path(
        &self,
        src_host: u32,
        dst_host: u32,
        sport: u16,
        cap: &mut PathCapacity,
    ) -> Option<Vec<u32>> {
        if !self.lb_any {
            return Some(self.path_of(src_host, dst_host, sport));
        }
        let src = self.hosts[src_host as usize].node;
        let dst = self.hosts[dst_host as usize].node;
        let mut pk = Packet::control(PktKind::Data, 0);
        pk.src = src;
        pk.dst = dst;
        pk.sport = sport;
        let mut path = vec![src];
        let mut behind = Vec::new();
        let mut node = self.ports[port_at(&self.hot, src, 0)].peer_node;
        while node != dst && path.len() < 64 {
            path.push(node);
            let Role::Switch(s) = self.nodes[node as usize].role else {
                return Some(path);
            };
            let port = match &self.switches[s as usize].lb {
                None => self.route(s as usize, &pk),
                Some(lb) => {
                    let Some(cands) = self
                        .group_of(s as usize, &pk)
                        .and_then(|g| self.groups.get(g as usize).map(|c| (g, c)))
                    else {
                        return Some(path);
                    };
                    let (gid, cands) = cands;
                    if cands.len() == 1 {
                        Some(cands[0])
                    } else {
                        behind.clear();
                        if lb.wants_path_capacity() {
                            let fabric = Fabric {
                                ports: &self.ports,
                                hot: &self.hot,
                                routes: &self.routes,
                                groups: &self.groups,
                            };
                            cap.behind(&fabric, dst_host, dst, node, cands, &mut behind);
                        }
                        let (a, b) = (self.hot[node as usize], self.hot[node as usize + 1]);
                        let at = crate::net::lb::Pick {
                            now: 0,
                            pk: &pk,
                            hash: self.switch_hash(s as usize, &pk),
                            gid,
                            candidates: cands,
                            ports: &self.ports[a.first_port as usize..b.first_port as usize],
                            behind: &behind,
                        };
                        Some(cands[lb.replay(&at)?])
                    }
                }
            };
            let Some(p) = port else {
                return Some(path);
            };
            node = self.ports[port_at(&self.hot, node, p)].peer_node;
        }
        path.push(node);
        Some(path)
    }

    /// FCT of a WRITE of `bytes` alone on `path` (node ids) at line rate: the store-and-forward
    /// pipeline of [`super::ideal::pipeline_fct`]; 0 if the path does not reach `dst_host`.
    pub fn ideal_fct_on(&self, path: &[u32], dst_host: u32, bytes: u64) -> u64 {
        if path.last() != Some(&self.hosts[dst_host as usize].node) {
            return 0;
        }
        let mut hops = Vec::with_capacity(path.len());
        for w in path.windows(2) {
            let Some(p) = self.node_ports(w[0]).iter().find(|p| p.peer_node == w[1]) else {
                return 0;
            };
            hops.push((p.rate, p.delay));
        }
        super::ideal::pipeline_fct(&hops, bytes, self.params.nic.mtu as u64)
    }
}
