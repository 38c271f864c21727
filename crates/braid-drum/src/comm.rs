//! What the sharded solver needs from a message-passing layer, and an in-process implementation.
//!
//! The sharded ADMM ([`crate::shard`]) is written against [`Comm`]; the Python package implements
//! it over mpi4py (`braid.drum.mpi`), and [`ThreadComm`] runs ranks as threads of one process so
//! that the Rust tests can check the sharded solve against the local one without MPI.
//!
//! Reductions must give the same bits on every rank (the ρ and stop decisions depend on them):
//! MPI does not promise that of `Allreduce`, so the mpi4py implementation broadcasts rank 0's
//! result; [`ThreadComm`] adds in rank order.

use crate::problem::DrumError;
use std::sync::{Arc, Barrier, Mutex};

pub type CommResult<T> = Result<T, DrumError>;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Sum,
    Min,
}

pub trait Comm {
    fn rank(&self) -> usize;
    fn size(&self) -> usize;
    /// Element-wise reduction of a short vector; the same result on every rank.
    fn allreduce(&mut self, v: &mut [f64], op: Op) -> CommResult<()>;
    /// Every rank's bytes, in rank order.
    fn allgather(&mut self, v: &[u8]) -> CommResult<Vec<Vec<u8>>>;
    /// Personalised exchange for the setup: `send` holds `counts[s]` values for rank s, in rank
    /// order; returns what every rank sent here, in rank order, and the counts.
    fn alltoallv(&mut self, send: &[u64], counts: &[usize]) -> CommResult<(Vec<u64>, Vec<usize>)>;
    /// Fix the neighbours (sorted ranks, the same relation seen from both sides) for
    /// [`Comm::neighbor_exchange`].
    fn set_neighbors(&mut self, nbrs: &[usize]) -> CommResult<()>;
    /// Exchange with the neighbours only: `send_counts[t]` values for neighbour t and
    /// `recv_counts[t]` from it, in neighbour order, into `recv`.
    fn neighbor_exchange(
        &mut self,
        send: &[f64],
        send_counts: &[usize],
        recv_counts: &[usize],
        recv: &mut [f64],
    ) -> CommResult<()>;
}

/// One rank alone (no communication).
pub struct Solo;

impl Comm for Solo {
    fn rank(&self) -> usize {
        0
    }
    fn size(&self) -> usize {
        1
    }
    fn allreduce(&mut self, _v: &mut [f64], _op: Op) -> CommResult<()> {
        Ok(())
    }
    fn allgather(&mut self, v: &[u8]) -> CommResult<Vec<Vec<u8>>> {
        Ok(vec![v.to_vec()])
    }
    fn alltoallv(&mut self, send: &[u64], counts: &[usize]) -> CommResult<(Vec<u64>, Vec<usize>)> {
        Ok((send.to_vec(), counts.to_vec()))
    }
    fn set_neighbors(&mut self, _nbrs: &[usize]) -> CommResult<()> {
        Ok(())
    }
    fn neighbor_exchange(
        &mut self,
        _send: &[f64],
        _send_counts: &[usize],
        _recv_counts: &[usize],
        _recv: &mut [f64],
    ) -> CommResult<()> {
        Ok(())
    }
}

/// Board shared by the thread ranks: each rank posts its message for every destination, waits
/// for all, reads what was posted for it, waits again (so the board may be reused).
struct Board {
    size: usize,
    barrier: Barrier,
    slots: Mutex<Vec<Vec<Vec<u8>>>>, // slots[from][to]
}

/// Ranks as threads of one process (tests, and a reference for what the MPI layer must do).
pub struct ThreadComm {
    rank: usize,
    board: Arc<Board>,
    nbrs: Vec<usize>,
}

impl ThreadComm {
    /// `size` connected ranks; hand one to each thread.
    pub fn group(size: usize) -> Vec<ThreadComm> {
        let board = Arc::new(Board {
            size,
            barrier: Barrier::new(size),
            slots: Mutex::new(vec![vec![Vec::new(); size]; size]),
        });
        (0..size)
            .map(|rank| ThreadComm {
                rank,
                board: board.clone(),
                nbrs: Vec::new(),
            })
            .collect()
    }

    /// Post `msgs[to]` for every rank and return what every rank posted for this one.
    fn post(&self, msgs: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
        self.board.slots.lock().unwrap()[self.rank] = msgs;
        self.board.barrier.wait();
        let got = {
            let s = self.board.slots.lock().unwrap();
            (0..self.board.size)
                .map(|from| s[from][self.rank].clone())
                .collect()
        };
        self.board.barrier.wait();
        got
    }
}

fn f64_bytes(v: &[f64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_ne_bytes()).collect()
}

fn bytes_f64(b: &[u8]) -> Vec<f64> {
    b.chunks_exact(8)
        .map(|c| f64::from_ne_bytes(c.try_into().unwrap()))
        .collect()
}

impl Comm for ThreadComm {
    fn rank(&self) -> usize {
        self.rank
    }
    fn size(&self) -> usize {
        self.board.size
    }
    fn allreduce(&mut self, v: &mut [f64], op: Op) -> CommResult<()> {
        let all = self.post(vec![f64_bytes(v); self.board.size]);
        for (j, x) in v.iter_mut().enumerate() {
            let vals = all.iter().map(|b| bytes_f64(b)[j]);
            *x = match op {
                Op::Sum => vals.fold(0.0, |a, b| a + b),
                Op::Min => vals.fold(f64::INFINITY, f64::min),
            };
        }
        Ok(())
    }
    fn allgather(&mut self, v: &[u8]) -> CommResult<Vec<Vec<u8>>> {
        Ok(self.post(vec![v.to_vec(); self.board.size]))
    }
    fn alltoallv(&mut self, send: &[u64], counts: &[usize]) -> CommResult<(Vec<u64>, Vec<usize>)> {
        let mut msgs = Vec::with_capacity(self.board.size);
        let mut o = 0;
        for &c in counts {
            msgs.push(
                send[o..o + c]
                    .iter()
                    .flat_map(|x| x.to_ne_bytes())
                    .collect(),
            );
            o += c;
        }
        let got = self.post(msgs);
        let rc = got.iter().map(|b| b.len() / 8).collect();
        let recv = got
            .iter()
            .flat_map(|b| {
                b.chunks_exact(8)
                    .map(|c| u64::from_ne_bytes(c.try_into().unwrap()))
            })
            .collect();
        Ok((recv, rc))
    }
    fn set_neighbors(&mut self, nbrs: &[usize]) -> CommResult<()> {
        self.nbrs = nbrs.to_vec();
        Ok(())
    }
    fn neighbor_exchange(
        &mut self,
        send: &[f64],
        send_counts: &[usize],
        recv_counts: &[usize],
        recv: &mut [f64],
    ) -> CommResult<()> {
        let mut msgs = vec![Vec::new(); self.board.size];
        let mut o = 0;
        for (t, &c) in send_counts.iter().enumerate() {
            msgs[self.nbrs[t]] = f64_bytes(&send[o..o + c]);
            o += c;
        }
        let got = self.post(msgs);
        let mut o = 0;
        for (t, &c) in recv_counts.iter().enumerate() {
            let v = bytes_f64(&got[self.nbrs[t]]);
            if v.len() != c {
                return Err(DrumError::new(
                    "comm",
                    format!(
                        "rank {} expected {c} values from rank {}, got {}",
                        self.rank,
                        self.nbrs[t],
                        v.len()
                    ),
                ));
            }
            recv[o..o + c].copy_from_slice(&v);
            o += c;
        }
        Ok(())
    }
}
