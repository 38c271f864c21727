//! Who shares which rows, worked out once at setup, and the two per-iteration exchanges.
//!
//! A two-sided CQ row e = (host i, app j) has a pair for every sender (l, j) with
//! B[(l,j), i] != 0 (and the receiver's own entry). Rank r owns the rows of its hosts; a row of
//! another rank that one of r's senders feeds is a *ghost* row on r. Ghost rows are numbered after
//! the own rows in global order, which groups them by owner (ranks own increasing host ranges):
//! the partial sums for one owner are one contiguous slice.
//!
//! * forward (`combine`): each rank sends its partial sums over its ghost rows to their owners,
//!   which add them, in rank order, to their own partial sums (in the local solve a row's pairs
//!   are added in sender order, which is rank order; so the sums are the local ones exactly
//!   whenever no rank after the first contributes two pairs to a row, and within rounding
//!   otherwise);
//! * backward (`to_ghosts`): owners send the dual steps of the rows others hold as ghosts.
//!
//! Nothing else crosses ranks per iteration but the residual scalars.

use crate::comm::{Comm, CommResult};
use crate::piece::Piece;
use crate::problem::Layout;

/// The setup's outcome: the shard's layout (own rows, then ghost rows) and its exchanges.
pub struct Plan {
    pub lay: Layout,
    pub ex: Exchange,
}

pub struct Exchange {
    /// false when no rank exchanges (one-sided): then nobody enters the neighbour collective.
    /// Otherwise every rank does, also one without neighbours (the collective is over all).
    collective: bool,
    /// neighbour ranks (sorted): owners of our ghost rows and holders of our rows as ghosts
    pub nbrs: Vec<usize>,
    /// neighbours below our rank come first in `nbrs`: their partial sums precede ours
    lower: usize,
    /// own rows of the shard (ghost rows follow them)
    pub own: usize,
    /// per neighbour: our ghost rows it owns (forward send, backward receive)
    pub ghost_cnt: Vec<usize>,
    /// per neighbour: our rows it holds as ghosts (forward receive, backward send)
    pub recv_cnt: Vec<usize>,
    /// our row of every value received forward, in neighbour order
    recv_rows: Vec<u32>,
    /// for the values from lower neighbours: slot in `lower_acc` of their row
    lower_slot: Vec<u32>,
    /// (slot, row) of the rows lower neighbours feed
    lower_rows: Vec<(u32, u32)>,
    recv_buf: Vec<f64>,
    send_buf: Vec<f64>,
    lower_acc: Vec<f64>,
}

impl Exchange {
    /// No neighbours (one-sided, or one rank).
    pub fn none(own: usize) -> Exchange {
        Exchange {
            collective: false,
            nbrs: Vec::new(),
            lower: 0,
            own,
            ghost_cnt: Vec::new(),
            recv_cnt: Vec::new(),
            recv_rows: Vec::new(),
            lower_slot: Vec::new(),
            lower_rows: Vec::new(),
            recv_buf: Vec::new(),
            send_buf: Vec::new(),
            lower_acc: Vec::new(),
        }
    }

    /// Values this rank sends per iteration (forward + backward).
    pub fn values_per_iteration(&self) -> (usize, usize) {
        (self.ghost_cnt.iter().sum(), self.recv_cnt.iter().sum())
    }

    /// `rows` holds this rank's partial sums over its own rows then its ghost rows; on return
    /// the own rows hold the sums over all ranks' pairs.
    pub fn combine(&mut self, rows: &mut [f64], comm: &mut dyn Comm) -> CommResult<()> {
        if !self.collective {
            return Ok(());
        }
        let own = self.own;
        comm.neighbor_exchange(
            &rows[own..],
            &self.ghost_cnt,
            &self.recv_cnt,
            &mut self.recv_buf,
        )?;
        // rank order: the lower ranks' partials (in order), then ours, then the higher ranks'
        let nlow: usize = self.recv_cnt[..self.lower].iter().sum();
        self.lower_acc.iter_mut().for_each(|a| *a = 0.0);
        for (t, &v) in self.recv_buf[..nlow].iter().enumerate() {
            self.lower_acc[self.lower_slot[t] as usize] += v;
        }
        // (lower sum) + ours: one addition, commutative, so += gives the same bits
        for &(slot, r) in &self.lower_rows {
            rows[r as usize] += self.lower_acc[slot as usize];
        }
        for (t, &v) in self.recv_buf[nlow..].iter().enumerate() {
            rows[self.recv_rows[nlow + t] as usize] += v;
        }
        Ok(())
    }

    /// Send the own-row values `own_vals` to the ranks holding those rows as ghosts; fills
    /// `ghost_vals` (one per ghost row).
    pub fn to_ghosts(
        &mut self,
        own_vals: &[f64],
        ghost_vals: &mut [f64],
        comm: &mut dyn Comm,
    ) -> CommResult<()> {
        if !self.collective {
            return Ok(());
        }
        for (b, &r) in self.send_buf.iter_mut().zip(&self.recv_rows) {
            *b = own_vals[r as usize];
        }
        comm.neighbor_exchange(&self.send_buf, &self.recv_cnt, &self.ghost_cnt, ghost_vals)
    }
}

/// The rank owning global host `i`; `starts[s]` is rank s's first host (`starts[size]` = n).
fn owner(starts: &[usize], i: usize) -> usize {
    starts[..starts.len() - 1].partition_point(|&b| b <= i) - 1
}

/// Two-sided setup: find the ghost rows, tell their owners how many of our pairs feed each (the
/// owners need the total senders n_e per row), fetch the receivers' a (a pair's coefficient is
/// a_receiver * fraction), and build the layout.
pub fn two_sided(piece: &Piece, starts: &[usize], comm: &mut dyn Comm) -> CommResult<Plan> {
    let p = &*piece.p;
    let (m, h0, h1) = (p.m, piece.h0, piece.h1());
    let nn = p.n * m;
    let size = comm.size();
    let me = comm.rank();
    let t = p.traffic.as_ref().expect("validated: two-sided has B");
    // remote rows fed by our senders, with multiplicity
    let mut remote: Vec<u64> = Vec::new();
    for kl in 0..nn {
        let (l, j) = (h0 + kl / m, kl % m);
        for q in t.ptr[kl] as usize..t.ptr[kl + 1] as usize {
            let i = t.dst[q] as usize;
            if t.frac[q] > 0.0 && i != l && !(h0..h1).contains(&i) {
                remote.push((i * m + j) as u64);
            }
        }
    }
    remote.sort_unstable();
    let mut ghost: Vec<u64> = Vec::new();
    let mut ghost_pairs: Vec<u64> = Vec::new();
    for &r in &remote {
        if ghost.last() == Some(&r) {
            *ghost_pairs.last_mut().unwrap() += 1;
        } else {
            ghost.push(r);
            ghost_pairs.push(1);
        }
    }
    drop(remote);
    let mut per_owner = vec![0usize; size];
    for &r in &ghost {
        per_owner[owner(starts, r as usize / m)] += 1;
    }
    // (row, pairs) to each owner; ghost is sorted, hence grouped by owner in rank order
    let send: Vec<u64> = ghost
        .iter()
        .zip(&ghost_pairs)
        .flat_map(|(&r, &c)| [r, c])
        .collect();
    let counts: Vec<usize> = per_owner.iter().map(|c| 2 * c).collect();
    let (got, got_counts) = comm.alltoallv(&send, &counts)?;
    // our rows that others feed: their local index, and the pair counts for n_e
    let base = (h0 * m) as u64;
    let mut row_n = vec![0u32; nn];
    let mut recv_rows: Vec<u32> = Vec::with_capacity(got.len() / 2);
    for c in got.chunks_exact(2) {
        let r = (c[0] - base) as usize;
        row_n[r] += c[1] as u32;
        recv_rows.push(r as u32);
    }
    let per_src: Vec<usize> = got_counts.iter().map(|c| c / 2).collect();
    // reply with the a of the requested rows (as bits), get ours back in ghost order
    let reply: Vec<u64> = recv_rows
        .iter()
        .map(|&r| p.a[r as usize].to_bits())
        .collect();
    let (ghost_a_bits, _) = comm.alltoallv(&reply, &per_src)?;
    let ghost_a: Vec<f64> = ghost_a_bits.iter().map(|&b| f64::from_bits(b)).collect();
    // the pairs, sender-major as in Layout::build
    let rows = nn + ghost.len();
    let mut send_ptr = Vec::with_capacity(nn + 1);
    let mut pair_row: Vec<u32> = Vec::with_capacity(nn);
    let mut pair_coef: Vec<f64> = Vec::with_capacity(nn);
    send_ptr.push(0u64);
    for kl in 0..nn {
        let (l, j) = (h0 + kl / m, kl % m);
        pair_row.push(kl as u32);
        pair_coef.push(p.a[kl]);
        for q in t.ptr[kl] as usize..t.ptr[kl + 1] as usize {
            let (i, f) = (t.dst[q] as usize, t.frac[q]);
            if f > 0.0 && i != l {
                if (h0..h1).contains(&i) {
                    let r = (i - h0) * m + j;
                    pair_row.push(r as u32);
                    pair_coef.push(p.a[r] * f);
                } else {
                    let g = ghost.binary_search(&((i * m + j) as u64)).unwrap();
                    pair_row.push((nn + g) as u32);
                    pair_coef.push(ghost_a[g] * f);
                }
            }
        }
        send_ptr.push(pair_row.len() as u64);
    }
    let mut lay = Layout::from_pairs(
        p.n,
        m,
        rows,
        false,
        send_ptr,
        pair_row,
        pair_coef,
        Vec::new(),
    );
    for (r, c) in row_n.iter_mut().enumerate() {
        *c += lay.row_len(r) as u32;
    }
    row_n.resize(rows, 0); // ghost rows: their owners count them
    lay.row_n = row_n;
    // neighbours and the per-neighbour counts
    let nbrs: Vec<usize> = (0..size)
        .filter(|&s| s != me && (per_owner[s] > 0 || per_src[s] > 0))
        .collect();
    let ghost_cnt: Vec<usize> = nbrs.iter().map(|&s| per_owner[s]).collect();
    let recv_cnt: Vec<usize> = nbrs.iter().map(|&s| per_src[s]).collect();
    let lower = nbrs.partition_point(|&s| s < me);
    let nlow: usize = recv_cnt[..lower].iter().sum();
    let mut lower_rows: Vec<(u32, u32)> = Vec::new();
    let mut lower_slot = Vec::with_capacity(nlow);
    {
        let mut slot_of = std::collections::HashMap::new();
        for &r in &recv_rows[..nlow] {
            let next = slot_of.len() as u32;
            let s = *slot_of.entry(r).or_insert_with(|| {
                lower_rows.push((next, r));
                next
            });
            lower_slot.push(s);
        }
    }
    let nrecv = recv_rows.len();
    let ex = Exchange {
        collective: true,
        nbrs,
        lower,
        own: nn,
        ghost_cnt,
        recv_cnt,
        recv_rows,
        lower_slot,
        lower_acc: vec![0.0; lower_rows.len()],
        lower_rows,
        recv_buf: vec![0.0; nrecv],
        send_buf: vec![0.0; nrecv],
    };
    Ok(Plan { lay, ex })
}
