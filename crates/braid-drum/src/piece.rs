//! One rank's part of an instance: the data of hosts `h0..h0+n` and nothing else.
//!
//! A piece is a [`Problem`] over its own hosts (numbered from 0 inside it) whose traffic rows are
//! its own senders' and name *global* destination hosts. It is built by generating only those
//! hosts ([`Piece::generate`]), by cutting them out of a whole problem ([`Piece::slice`], for
//! data that starts on one rank) or from the rank's own arrays ([`Piece::new`]).

use crate::gen::{generate_range, GenParams};
use crate::problem::{DrumError, Problem, Result, Traffic};
use std::sync::Arc;

#[derive(Clone, Debug)]
pub struct Piece {
    pub p: Arc<Problem>,
    /// global index of the first host
    pub h0: usize,
    /// hosts of the whole instance
    pub n_total: usize,
}

impl Piece {
    /// Wrap the rank's own data (not validated here: the sharded solve validates every piece
    /// and reports the first error on all ranks, so that no rank is left waiting).
    pub fn new(p: Problem, h0: usize, n_total: usize) -> Piece {
        Piece {
            p: Arc::new(p),
            h0,
            n_total,
        }
    }

    pub fn h1(&self) -> usize {
        self.h0 + self.p.n
    }

    /// Hosts `h0..h1` of the paper's random instance, generated alone.
    pub fn generate(g: &GenParams, h0: usize, h1: usize) -> Piece {
        Piece::new(generate_range(g, h0, h1), h0, g.n)
    }

    /// Hosts `h0..h1` cut out of a whole problem.
    pub fn slice(full: &Problem, h0: usize, h1: usize) -> Result<Piece> {
        if full.links.is_some() {
            return Err(links_error());
        }
        if h0 > h1 || h1 > full.n {
            return Err(DrumError::new(
                "hosts",
                format!("range {h0}..{h1} outside 0..{}", full.n),
            ));
        }
        let m = full.m;
        let (a, b) = (h0 * m, h1 * m);
        let cut = |v: &Vec<f64>| {
            if v.is_empty() {
                Vec::new()
            } else {
                v[a..b].to_vec()
            }
        };
        let traffic = full.traffic.as_ref().map(|t| {
            let (s, e) = (t.ptr[a] as usize, t.ptr[b] as usize);
            Traffic {
                ptr: t.ptr[a..=b].iter().map(|&q| q - s as u64).collect(),
                dst: t.dst[s..e].to_vec(),
                frac: t.frac[s..e].to_vec(),
            }
        });
        let p = Problem {
            n: h1 - h0,
            m,
            alpha: full.alpha,
            beta: full.beta,
            w: full.w[a..b].to_vec(),
            a: full.a[a..b].to_vec(),
            q_cap: full.q_cap[h0..h1].to_vec(),
            c_cap: full.c_cap[h0..h1].to_vec(),
            guarantee: cut(&full.guarantee),
            active: if full.active.is_empty() {
                Vec::new()
            } else {
                full.active[a..b].to_vec()
            },
            preempt: cut(&full.preempt),
            two_sided: full.two_sided,
            traffic,
            links: None,
        };
        Ok(Piece::new(p, h0, full.n))
    }

    /// The checks on the piece's own data (see [`Problem::validate_local`]); the guarantees
    /// against the CQE capacities need the other ranks' traffic and are checked by the solve.
    pub fn validate(&self) -> Result<()> {
        if self.p.links.is_some() {
            return Err(links_error());
        }
        if self.h1() > self.n_total {
            return Err(DrumError::new(
                "hosts",
                format!(
                    "piece {}..{} outside the instance's {} hosts",
                    self.h0,
                    self.h1(),
                    self.n_total
                ),
            ));
        }
        if self.p.n == 0 {
            // a rank without hosts is allowed (more ranks than hosts): nothing to check
            return Ok(());
        }
        self.p.validate_local(self.h0, self.n_total)
    }
}

fn links_error() -> DrumError {
    DrumError::new(
        "links",
        "the sharded solver does not take fabric link capacities (a link row couples senders on \
         every rank); solve such problems on one machine",
    )
}
