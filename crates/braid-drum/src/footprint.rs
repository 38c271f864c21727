//! Bytes held by a solve's data (problem, layout, scaled copy, ADMM state): the memory a rank
//! needs, measured without the allocator's and the interpreter's noise (peak RSS adds those).

use crate::admm::Admm;
use crate::problem::{Layout, Problem};
use crate::scaled::Scaled;

fn b<T>(v: &[T]) -> usize {
    std::mem::size_of_val(v)
}

pub fn problem(p: &Problem) -> usize {
    let t = p
        .traffic
        .as_ref()
        .map_or(0, |t| b(&t.ptr) + b(&t.dst) + b(&t.frac));
    let l = p
        .links
        .as_ref()
        .map_or(0, |l| b(&l.cap) + b(&l.paths) + b(&l.size));
    b(&p.w)
        + b(&p.a)
        + b(&p.q_cap)
        + b(&p.c_cap)
        + b(&p.guarantee)
        + b(&p.active)
        + b(&p.preempt)
        + t
        + l
}

pub fn layout(l: &Layout) -> usize {
    b(&l.send_ptr)
        + b(&l.pair_row)
        + b(&l.pair_coef)
        + b(&l.pair_sender)
        + b(&l.row_ptr)
        + b(&l.row_pair)
        + b(&l.sum_p2)
        + b(&l.link_cap)
        + b(&l.row_n)
}

pub fn scaled(s: &Scaled) -> usize {
    b(&s.w)
        + b(&s.beta)
        + b(&s.q)
        + b(&s.c)
        + b(&s.lo)
        + b(&s.hi)
        + b(&s.r)
        + b(&s.host_soc)
        + b(&s.link_cap)
}

/// Problem + layout + scaled copy + iterates of an ADMM state.
pub fn admm(st: &Admm) -> usize {
    let it = b(&st.x)
        + b(&st.z)
        + b(&st.v)
        + b(&st.dv)
        + b(&st.y)
        + b(&st.h)
        + b(&st.hsum)
        + b(&st.lam)
        + b(&st.mu)
        + b(&st.rs)
        + b(&st.rp2);
    problem(&st.p) + layout(&st.lay) + scaled(&st.sc) + it
}
