//! Memory per variable (issue 31 §3: 5·10⁷ one-sided in ≤ 8 GB). The one-sided state held h,
//! the row sums and the dual steps (24 bytes per variable) that its fused iteration never
//! reads, and a solve's end held the state and its result at once: 164 bytes of state and a
//! peak of ~205 per variable (10.3 GB at 5·10⁷); now 132 and ~134 (`examples/peak_mem`,
//! docs/drum.md "Scale benchmark").

use braid_drum::*;
use std::sync::Arc;

#[test]
fn one_sided_state_is_at_most_136_bytes_per_variable() {
    let (n, m) = (40, 250);
    let p = Arc::new(generate(&GenParams {
        n,
        m,
        seed: 7,
        ..Default::default()
    }));
    let lay = Arc::new(Layout::build(&p));
    let st = Admm::new(p.clone(), lay, AdmmOptions::default());
    let per_var = footprint::admm(&st) as f64 / (n * m) as f64;
    assert!(per_var <= 136.0, "{per_var:.1} bytes per variable");
    // and the solve that starts without them still gives the unfused passes' answer: a
    // generic x-step on this state allocates them on demand
    let mut g = Admm::new(
        p.clone(),
        Arc::new(Layout::build(&p)),
        AdmmOptions::default(),
    );
    g.x_step(&[]);
    g.gather_rows();
    g.z_step();
    g.y_step();
    assert!(g.x.iter().all(|v| v.is_finite()) && g.hsum.len() == n * m);
}
