//! Python bindings of the DRUM solver: `braid._core.DrumProblem`, `DrumPiece` and
//! `drum_solve_sharded` (the MPI runner), `drum_solve`, `drum_select_topk` and the `DrumError`
//! exception.
//!
//! Arrays cross the boundary as `bytes` in native byte order (numpy `tobytes()` /
//! `frombuffer`): one copy, no numpy C-API dependency.

use braid_drum as bd;
use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use std::sync::Arc;

create_exception!(
    braid._core,
    DrumError,
    PyValueError,
    "Invalid DRUM input. Attributes: `param` (the parameter at fault) and `message`."
);

fn derr(py: Python<'_>, e: &bd::DrumError) -> PyErr {
    let err = DrumError::new_err(e.to_string());
    let value = err.value(py);
    let _ = value.setattr("param", e.param.as_str());
    let _ = value.setattr("message", e.msg.as_str());
    err
}

fn perr(py: Python<'_>, param: &str, msg: impl Into<String>) -> PyErr {
    derr(py, &bd::DrumError::new(param, msg))
}

fn f64s(py: Python<'_>, b: &[u8], name: &str) -> PyResult<Vec<f64>> {
    if !b.len().is_multiple_of(8) {
        return Err(perr(
            py,
            name,
            "byte length is not a multiple of 8 (expected float64)",
        ));
    }
    Ok(b.chunks_exact(8)
        .map(|c| f64::from_ne_bytes(c.try_into().unwrap()))
        .collect())
}

fn u32s(py: Python<'_>, b: &[u8], name: &str) -> PyResult<Vec<u32>> {
    if !b.len().is_multiple_of(4) {
        return Err(perr(
            py,
            name,
            "byte length is not a multiple of 4 (expected uint32)",
        ));
    }
    Ok(b.chunks_exact(4)
        .map(|c| u32::from_ne_bytes(c.try_into().unwrap()))
        .collect())
}

fn u64s(py: Python<'_>, b: &[u8], name: &str) -> PyResult<Vec<u64>> {
    if !b.len().is_multiple_of(8) {
        return Err(perr(
            py,
            name,
            "byte length is not a multiple of 8 (expected uint64)",
        ));
    }
    Ok(b.chunks_exact(8)
        .map(|c| u64::from_ne_bytes(c.try_into().unwrap()))
        .collect())
}

fn fbytes<'py>(py: Python<'py>, v: &[f64]) -> Bound<'py, PyBytes> {
    // SAFETY: f64 has no padding; the byte view lives only for the copy
    let s =
        unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, std::mem::size_of_val(v)) };
    PyBytes::new(py, s)
}

fn ubytes<'py>(py: Python<'py>, v: &[u32]) -> Bound<'py, PyBytes> {
    let s =
        unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, std::mem::size_of_val(v)) };
    PyBytes::new(py, s)
}

fn u64bytes<'py>(py: Python<'py>, v: &[u64]) -> Bound<'py, PyBytes> {
    let s =
        unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, std::mem::size_of_val(v)) };
    PyBytes::new(py, s)
}

/// Generator parameters from JSON, checked.
fn gen_params(py: Python<'_>, params_json: &str) -> PyResult<bd::GenParams> {
    let g: bd::GenParams =
        serde_json::from_str(params_json).map_err(|e| perr(py, "generator", e.to_string()))?;
    if g.n == 0 || g.m == 0 {
        return Err(perr(
            py,
            if g.n == 0 { "n" } else { "m" },
            "must be at least 1",
        ));
    }
    if g.two_sided && g.n < 2 {
        return Err(perr(py, "n", "two-sided instances need at least 2 hosts"));
    }
    if g.q_range.0 <= 0.0
        || g.q_range.1 < g.q_range.0
        || g.c_range.0 <= 0.0
        || g.c_range.1 < g.c_range.0
    {
        return Err(perr(py, "capacity ranges", "need 0 < low <= high"));
    }
    if g.w_range.0 <= 0.0 || g.w_range.1 < g.w_range.0 {
        return Err(perr(py, "w_range", "need 0 < low <= high"));
    }
    if g.units <= 0.0 || !g.units.is_finite() {
        return Err(perr(py, "units", "must be > 0"));
    }
    if let Some(k) = g.k {
        if k == 0 {
            return Err(perr(py, "k", "must be at least 1"));
        }
    }
    Ok(g)
}

type Bytes<'a> = &'a [u8];

/// A problem from arrays as bytes (not validated).
#[allow(clippy::too_many_arguments)]
fn build_problem(
    py: Python<'_>,
    n: usize,
    m: usize,
    alpha: f64,
    beta: f64,
    (w, a, q, c): (Bytes, Bytes, Bytes, Bytes),
    (guarantee, active, preempt): (Option<Bytes>, Option<Bytes>, Option<Bytes>),
    two_sided: bool,
    (b_ptr, b_dst, b_frac): (Option<Bytes>, Option<Bytes>, Option<Bytes>),
    links: Option<bd::Links>,
) -> PyResult<bd::Problem> {
    let traffic = match (b_ptr, b_dst, b_frac) {
        (Some(p), Some(d), Some(f)) => Some(bd::Traffic {
            ptr: u64s(py, p, "B")?,
            dst: u32s(py, d, "B")?,
            frac: f64s(py, f, "B")?,
        }),
        (None, None, None) => None,
        _ => return Err(perr(py, "B", "needs all of b_ptr, b_dst, b_frac")),
    };
    Ok(bd::Problem {
        n,
        m,
        alpha,
        beta,
        w: f64s(py, w, "w")?,
        a: f64s(py, a, "a")?,
        q_cap: f64s(py, q, "Q")?,
        c_cap: f64s(py, c, "C")?,
        guarantee: match guarantee {
            Some(g) => f64s(py, g, "guarantee")?,
            None => vec![],
        },
        active: match active {
            Some(b) => b.iter().map(|&v| v != 0).collect(),
            None => vec![],
        },
        preempt: match preempt {
            Some(r) => f64s(py, r, "preempt")?,
            None => vec![],
        },
        two_sided,
        traffic,
        links,
    })
}

/// A validated DRUM problem instance (immutable).
#[pyclass(module = "braid._core", frozen)]
pub struct DrumProblem {
    p: Arc<bd::Problem>,
}

#[pymethods]
impl DrumProblem {
    /// The paper's random instance from generator parameters (JSON of `GenParams` fields).
    #[staticmethod]
    fn generate(py: Python<'_>, params_json: &str) -> PyResult<Self> {
        let g = gen_params(py, params_json)?;
        let p = py.detach(move || bd::generate(&g));
        p.validate().map_err(|e| derr(py, &e))?;
        Ok(DrumProblem { p: Arc::new(p) })
    }

    /// Build from arrays (bytes, native order). `b_ptr/b_dst/b_frac`: CSR of B over the sender
    /// entries (uint64, uint32, float64); `link_paths`: uint32 triplets (src, dst, link).
    #[staticmethod]
    #[pyo3(signature = (n, m, alpha, beta, w, a, q, c, guarantee=None, active=None, preempt=None, two_sided=false, b_ptr=None, b_dst=None, b_frac=None, link_cap=None, link_paths=None, link_size=None))]
    #[allow(clippy::too_many_arguments)]
    fn from_arrays(
        py: Python<'_>,
        n: usize,
        m: usize,
        alpha: f64,
        beta: f64,
        w: &[u8],
        a: &[u8],
        q: &[u8],
        c: &[u8],
        guarantee: Option<&[u8]>,
        active: Option<&[u8]>,
        preempt: Option<&[u8]>,
        two_sided: bool,
        b_ptr: Option<&[u8]>,
        b_dst: Option<&[u8]>,
        b_frac: Option<&[u8]>,
        link_cap: Option<&[u8]>,
        link_paths: Option<&[u8]>,
        link_size: Option<&[u8]>,
    ) -> PyResult<Self> {
        let links = match link_cap {
            Some(cap) => {
                let t = u32s(py, link_paths.unwrap_or(&[]), "link_paths")?;
                if t.len() % 3 != 0 {
                    return Err(perr(py, "link_paths", "must be (src, dst, link) triplets"));
                }
                Some(bd::Links {
                    cap: f64s(py, cap, "link_cap")?,
                    paths: t.chunks_exact(3).map(|c| (c[0], c[1], c[2])).collect(),
                    size: match link_size {
                        Some(s) => f64s(py, s, "link_size")?,
                        None => vec![],
                    },
                })
            }
            None => None,
        };
        let p = build_problem(
            py,
            n,
            m,
            alpha,
            beta,
            (w, a, q, c),
            (guarantee, active, preempt),
            two_sided,
            (b_ptr, b_dst, b_frac),
            links,
        )?;
        p.validate().map_err(|e| derr(py, &e))?;
        Ok(DrumProblem { p: Arc::new(p) })
    }

    /// Copy with another active set (bytes of uint8, one per entry) and/or guarantees.
    #[pyo3(signature = (active=None, guarantee=None, preempt=None))]
    fn with_sets(
        &self,
        py: Python<'_>,
        active: Option<&[u8]>,
        guarantee: Option<&[u8]>,
        preempt: Option<&[u8]>,
    ) -> PyResult<Self> {
        let mut p = (*self.p).clone();
        if let Some(b) = active {
            p.active = b.iter().map(|&v| v != 0).collect();
        }
        if let Some(g) = guarantee {
            p.guarantee = f64s(py, g, "guarantee")?;
        }
        if let Some(r) = preempt {
            p.preempt = f64s(py, r, "preempt")?;
        }
        p.validate().map_err(|e| derr(py, &e))?;
        Ok(DrumProblem { p: Arc::new(p) })
    }

    #[getter]
    fn n(&self) -> usize {
        self.p.n
    }
    #[getter]
    fn m(&self) -> usize {
        self.p.m
    }
    #[getter]
    fn alpha(&self) -> f64 {
        self.p.alpha
    }
    #[getter]
    fn beta(&self) -> f64 {
        self.p.beta
    }
    #[getter]
    fn two_sided(&self) -> bool {
        self.p.two_sided
    }
    #[getter]
    fn has_links(&self) -> bool {
        self.p.links.is_some()
    }
    #[getter]
    fn has_preempt(&self) -> bool {
        self.p.has_preempt()
    }
    fn weight_sum(&self) -> f64 {
        self.p.weight_sum()
    }

    /// Objective sum w U(x) - beta sum 1/z^2 (user units) at (x, z) given as float64 bytes.
    fn objective(&self, py: Python<'_>, x: &[u8], z: &[u8]) -> PyResult<f64> {
        let x = f64s(py, x, "x")?;
        let z = f64s(py, z, "z")?;
        let nn = self.p.entries();
        if x.len() != nn || z.len() != nn {
            return Err(perr(py, "x", format!("x and z need {nn} entries")));
        }
        Ok(self.p.objective(&x, &z))
    }

    /// z = P x (CQ rows) and link loads (user units).
    fn coupling(&self, py: Python<'_>, x: &[u8]) -> PyResult<Py<PyBytes>> {
        let x = f64s(py, x, "x")?;
        if x.len() != self.p.entries() {
            return Err(perr(py, "x", "wrong length"));
        }
        let lay = bd::Layout::build(&self.p);
        let mut r = lay.row_sums(&x);
        // link rows are normalised inside the layout only by their raw coefficients: none here
        r.truncate(lay.rows);
        Ok(fbytes(py, &r).unbind())
    }

    /// The arrays of the problem as bytes: w, a, Q, C, guarantee, active (uint8), preempt,
    /// b_ptr (uint64), b_dst (uint32), b_frac.
    fn arrays<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        problem_arrays(py, &self.p)
    }
}

fn problem_arrays<'py>(py: Python<'py>, p: &bd::Problem) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("w", fbytes(py, &p.w))?;
    d.set_item("a", fbytes(py, &p.a))?;
    d.set_item("Q", fbytes(py, &p.q_cap))?;
    d.set_item("C", fbytes(py, &p.c_cap))?;
    d.set_item("guarantee", fbytes(py, &p.guarantee))?;
    let act: Vec<u8> = if p.active.is_empty() {
        vec![1; p.entries()]
    } else {
        p.active.iter().map(|&b| b as u8).collect()
    };
    d.set_item("active", PyBytes::new(py, &act))?;
    d.set_item("preempt", fbytes(py, &p.preempt))?;
    if let Some(t) = &p.traffic {
        d.set_item("b_ptr", u64bytes(py, &t.ptr))?;
        d.set_item("b_dst", ubytes(py, &t.dst))?;
        d.set_item("b_frac", fbytes(py, &t.frac))?;
    }
    if let Some(l) = &p.links {
        d.set_item("link_cap", fbytes(py, &l.cap))?;
        let flat: Vec<u32> = l.paths.iter().flat_map(|&(a, b, c)| [a, b, c]).collect();
        d.set_item("link_paths", ubytes(py, &flat))?;
        d.set_item("link_size", fbytes(py, &l.size))?;
    }
    Ok(d)
}

fn result_dict<'py>(py: Python<'py>, r: &bd::SolveResult) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("method", &r.method)?;
    d.set_item("x", fbytes(py, &r.x))?;
    d.set_item("z", fbytes(py, &r.z))?;
    d.set_item("x_feasible", fbytes(py, &r.x_feasible))?;
    d.set_item("z_feasible", fbytes(py, &r.z_feasible))?;
    d.set_item("objective", r.objective)?;
    d.set_item("objective_feasible", r.objective_feasible)?;
    d.set_item("dual_bound", r.dual_bound)?;
    d.set_item("iterations", r.iterations)?;
    d.set_item("converged", r.converged)?;
    d.set_item("setup_time", r.setup_time)?;
    d.set_item("solve_time", r.solve_time)?;
    d.set_item("lambda", fbytes(py, &r.lambda))?;
    d.set_item("mu", fbytes(py, &r.mu))?;
    d.set_item("rho_final", r.rho_final)?;
    let t = PyDict::new(py);
    let tr = &r.trace;
    for (name, v) in [
        ("objective", &tr.objective),
        ("objective_feasible", &tr.objective_feasible),
        ("gap", &tr.gap),
        ("r_pri", &tr.r_pri),
        ("r_dual", &tr.r_dual),
        ("eps_pri", &tr.eps_pri),
        ("eps_dual", &tr.eps_dual),
        ("rho", &tr.rho),
        ("time", &tr.time),
        ("certified_gap", &tr.certified_gap),
    ] {
        t.set_item(name, fbytes(py, v))?;
    }
    t.set_item("lost", ubytes(py, &tr.lost))?;
    t.set_item("certified_iter", ubytes(py, &tr.certified_iter))?;
    d.set_item("trace", t)?;
    Ok(d)
}

/// Solve. `method`: "admm" (Algorithm 1 one-sided, 2 two-sided), "exact" (one-sided reference),
/// "dual" (dual-decomposition subgradient baseline). `options_json`: solver options (JSON).
#[pyfunction]
#[pyo3(signature = (problem, method, options_json = "{}"))]
fn drum_solve<'py>(
    py: Python<'py>,
    problem: &DrumProblem,
    method: &str,
    options_json: &str,
) -> PyResult<Bound<'py, PyDict>> {
    let p = problem.p.clone();
    let res = match method {
        "admm" => {
            let o: bd::AdmmOptions = serde_json::from_str(options_json)
                .map_err(|e| perr(py, "options", e.to_string()))?;
            py.detach(move || bd::solve_admm_arc(p, o))
        }
        "exact" => py.detach(move || bd::solve_reference(&p)),
        "dual" => {
            let o: bd::DualOptions = serde_json::from_str(options_json)
                .map_err(|e| perr(py, "options", e.to_string()))?;
            py.detach(move || bd::solve_dual(&p, &o))
        }
        other => {
            return Err(perr(
                py,
                "method",
                format!("unknown method {other:?}; expected admm, exact or dual"),
            ))
        }
    };
    let r = res.map_err(|e| derr(py, &e))?;
    result_dict(py, &r)
}

/// Top-k selection with aging. scores: float64 bytes, age: uint32 bytes (one per entry).
/// Returns (active uint8 bytes, new age uint32 bytes).
#[pyfunction]
fn drum_select_topk<'py>(
    py: Python<'py>,
    n: usize,
    m: usize,
    k: usize,
    scores: &[u8],
    age: &[u8],
    max_wait: u32,
) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
    let s = f64s(py, scores, "scores")?;
    let mut a = u32s(py, age, "age")?;
    if s.len() != n * m || a.len() != n * m {
        return Err(perr(
            py,
            "scores",
            format!("scores and age need n*m = {} entries", n * m),
        ));
    }
    if k == 0 {
        return Err(perr(py, "k", "must be at least 1"));
    }
    let act = bd::select::select_topk(n, m, k, &s, &mut a, max_wait);
    let ab: Vec<u8> = act.iter().map(|&b| b as u8).collect();
    Ok((PyBytes::new(py, &ab), ubytes(py, &a)))
}

/// One rank's hosts of an instance (`braid.drum.mpi.Shard`): its data only, traffic rows with
/// global destination hosts.
#[pyclass(module = "braid._core", frozen)]
pub struct DrumPiece {
    pc: bd::Piece,
}

#[pymethods]
impl DrumPiece {
    /// Hosts h0..h1 of the paper's random instance (GenParams JSON), generated alone.
    #[staticmethod]
    fn generate(py: Python<'_>, params_json: &str, h0: usize, h1: usize) -> PyResult<Self> {
        let g = gen_params(py, params_json)?;
        if h0 > h1 || h1 > g.n {
            return Err(perr(
                py,
                "hosts",
                format!("range {h0}..{h1} outside 0..{}", g.n),
            ));
        }
        let pc = py.detach(move || bd::Piece::generate(&g, h0, h1));
        Ok(DrumPiece { pc })
    }

    /// Hosts h0..h1 cut out of a whole problem.
    #[staticmethod]
    fn slice(py: Python<'_>, problem: &DrumProblem, h0: usize, h1: usize) -> PyResult<Self> {
        let pc = bd::Piece::slice(&problem.p, h0, h1).map_err(|e| derr(py, &e))?;
        Ok(DrumPiece { pc })
    }

    /// The rank's own arrays (bytes, native order) for hosts h0..h0+len(q) of n_total; the CSR
    /// of B is over the rank's sender entries and names global destination hosts. Validated by
    /// the solve (collectively).
    #[staticmethod]
    #[pyo3(signature = (n_total, h0, m, alpha, beta, w, a, q, c, guarantee=None, active=None, preempt=None, two_sided=false, b_ptr=None, b_dst=None, b_frac=None))]
    #[allow(clippy::too_many_arguments)]
    fn from_arrays(
        py: Python<'_>,
        n_total: usize,
        h0: usize,
        m: usize,
        alpha: f64,
        beta: f64,
        w: &[u8],
        a: &[u8],
        q: &[u8],
        c: &[u8],
        guarantee: Option<&[u8]>,
        active: Option<&[u8]>,
        preempt: Option<&[u8]>,
        two_sided: bool,
        b_ptr: Option<&[u8]>,
        b_dst: Option<&[u8]>,
        b_frac: Option<&[u8]>,
    ) -> PyResult<Self> {
        let q_cap = f64s(py, q, "Q")?;
        let p = build_problem(
            py,
            q_cap.len(),
            m,
            alpha,
            beta,
            (w, a, q, c),
            (guarantee, active, preempt),
            two_sided,
            (b_ptr, b_dst, b_frac),
            None,
        )?;
        Ok(DrumPiece {
            pc: bd::Piece::new(p, h0, n_total),
        })
    }

    #[getter]
    fn h0(&self) -> usize {
        self.pc.h0
    }
    #[getter]
    fn h1(&self) -> usize {
        self.pc.h1()
    }
    #[getter]
    fn n(&self) -> usize {
        self.pc.n_total
    }
    #[getter]
    fn m(&self) -> usize {
        self.pc.p.m
    }
    #[getter]
    fn alpha(&self) -> f64 {
        self.pc.p.alpha
    }
    #[getter]
    fn beta(&self) -> f64 {
        self.pc.p.beta
    }
    #[getter]
    fn two_sided(&self) -> bool {
        self.pc.p.two_sided
    }
    /// The piece's arrays as bytes (as `DrumProblem.arrays`; B names global hosts).
    fn arrays<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        problem_arrays(py, &self.pc.p)
    }
}

/// The Python communicator (`braid.drum.mpi._MpiComm`) seen from Rust. Each call takes the GIL
/// for the duration of the MPI call; a Python exception is kept and re-raised after the solve.
struct PyComm {
    obj: Py<PyAny>,
    rank: usize,
    size: usize,
    err: Option<PyErr>,
}

impl PyComm {
    fn call<T>(
        &mut self,
        f: impl FnOnce(Python<'_>, &Bound<'_, PyAny>) -> PyResult<T>,
    ) -> bd::comm::CommResult<T> {
        let r = Python::attach(|py| f(py, self.obj.bind(py)));
        r.map_err(|e| {
            let msg = Python::attach(|py| e.value(py).to_string());
            self.err.get_or_insert(e);
            bd::DrumError::new("mpi", msg)
        })
    }
}

fn bytes_of<T: Copy>(v: &[T]) -> &[u8] {
    // SAFETY: plain numeric types without padding; the view lives as long as v
    unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, std::mem::size_of_val(v)) }
}

impl bd::comm::Comm for PyComm {
    fn rank(&self) -> usize {
        self.rank
    }
    fn size(&self) -> usize {
        self.size
    }
    fn allreduce(&mut self, v: &mut [f64], op: bd::comm::Op) -> bd::comm::CommResult<()> {
        let name = match op {
            bd::comm::Op::Sum => "sum",
            bd::comm::Op::Min => "min",
        };
        let out: Vec<u8> = self.call(|py, o| {
            o.call_method1("allreduce", (PyBytes::new(py, bytes_of(v)), name))?
                .extract()
        })?;
        for (x, c) in v.iter_mut().zip(out.chunks_exact(8)) {
            *x = f64::from_ne_bytes(c.try_into().unwrap());
        }
        Ok(())
    }
    fn allgather(&mut self, v: &[u8]) -> bd::comm::CommResult<Vec<Vec<u8>>> {
        self.call(|py, o| {
            o.call_method1("allgather", (PyBytes::new(py, v),))?
                .extract()
        })
    }
    fn alltoallv(
        &mut self,
        send: &[u64],
        counts: &[usize],
    ) -> bd::comm::CommResult<(Vec<u64>, Vec<usize>)> {
        let (b, rc): (Vec<u8>, Vec<usize>) = self.call(|py, o| {
            o.call_method1(
                "alltoallv",
                (PyBytes::new(py, bytes_of(send)), counts.to_vec()),
            )?
            .extract()
        })?;
        let v = b
            .chunks_exact(8)
            .map(|c| u64::from_ne_bytes(c.try_into().unwrap()))
            .collect();
        Ok((v, rc))
    }
    fn set_neighbors(&mut self, nbrs: &[usize]) -> bd::comm::CommResult<()> {
        self.call(|_py, o| {
            o.call_method1("set_neighbors", (nbrs.to_vec(),))
                .map(|_| ())
        })
    }
    fn neighbor_exchange(
        &mut self,
        send: &[f64],
        send_counts: &[usize],
        recv_counts: &[usize],
        recv: &mut [f64],
    ) -> bd::comm::CommResult<()> {
        let b: Vec<u8> = self.call(|py, o| {
            o.call_method1(
                "neighbor_exchange",
                (
                    PyBytes::new(py, bytes_of(send)),
                    send_counts.to_vec(),
                    recv_counts.to_vec(),
                ),
            )?
            .extract()
        })?;
        if b.len() != 8 * recv.len() {
            return Err(bd::DrumError::new(
                "mpi",
                format!(
                    "neighbour exchange returned {} bytes, expected {}",
                    b.len(),
                    8 * recv.len()
                ),
            ));
        }
        for (x, c) in recv.iter_mut().zip(b.chunks_exact(8)) {
            *x = f64::from_ne_bytes(c.try_into().unwrap());
        }
        Ok(())
    }
}

/// Solve this rank's piece with the others (collective over `comm`, a
/// `braid.drum.mpi._MpiComm`). Returns the rank's part of the result (its hosts' allocations,
/// the global figures).
#[pyfunction]
fn drum_solve_sharded<'py>(
    py: Python<'py>,
    piece: &DrumPiece,
    options_json: &str,
    comm: Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyDict>> {
    let o: bd::AdmmOptions =
        serde_json::from_str(options_json).map_err(|e| perr(py, "options", e.to_string()))?;
    let rank: usize = comm.getattr("rank")?.extract()?;
    let size: usize = comm.getattr("size")?.extract()?;
    let mut pc = PyComm {
        obj: comm.unbind(),
        rank,
        size,
        err: None,
    };
    let piece = piece.pc.clone();
    let (res, pc) = py.detach(move || {
        let r = bd::solve_sharded(&piece, o, &mut pc);
        (r, pc)
    });
    if let Some(e) = pc.err {
        return Err(e);
    }
    let r = res.map_err(|e| derr(py, &e))?;
    let d = PyDict::new(py);
    d.set_item("h0", r.h0)?;
    d.set_item("n", r.n_total)?;
    for (name, v) in [
        ("x", &r.x),
        ("z", &r.z),
        ("x_feasible", &r.x_feasible),
        ("z_feasible", &r.z_feasible),
        ("lambda", &r.lambda),
        ("mu", &r.mu),
    ] {
        d.set_item(name, fbytes(py, v))?;
    }
    d.set_item("objective", r.objective)?;
    d.set_item("objective_feasible", r.objective_feasible)?;
    d.set_item("dual_bound", r.dual_bound)?;
    d.set_item("weight_sum", r.weight_sum)?;
    d.set_item("iterations", r.iterations)?;
    d.set_item("converged", r.converged)?;
    d.set_item("setup_time", r.setup_time)?;
    d.set_item("solve_time", r.solve_time)?;
    d.set_item("rho_final", r.rho_final)?;
    d.set_item("neighbors", r.neighbors.clone())?;
    d.set_item("values_sent", r.values_sent)?;
    d.set_item("state_bytes", r.state_bytes)?;
    let t = PyDict::new(py);
    let tr = &r.trace;
    for (name, v) in [
        ("objective", &tr.objective),
        ("objective_feasible", &tr.objective_feasible),
        ("gap", &tr.gap),
        ("r_pri", &tr.r_pri),
        ("r_dual", &tr.r_dual),
        ("eps_pri", &tr.eps_pri),
        ("eps_dual", &tr.eps_dual),
        ("rho", &tr.rho),
        ("time", &tr.time),
        ("certified_gap", &tr.certified_gap),
    ] {
        t.set_item(name, fbytes(py, v))?;
    }
    t.set_item("lost", ubytes(py, &tr.lost))?;
    t.set_item("certified_iter", ubytes(py, &tr.certified_iter))?;
    d.set_item("trace", t)?;
    Ok(d)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("DrumError", m.py().get_type::<DrumError>())?;
    m.add_class::<DrumProblem>()?;
    m.add_class::<DrumPiece>()?;
    m.add_function(wrap_pyfunction!(drum_solve_sharded, m)?)?;
    m.add_function(wrap_pyfunction!(drum_solve, m)?)?;
    m.add_function(wrap_pyfunction!(drum_select_topk, m)?)?;
    Ok(())
}
