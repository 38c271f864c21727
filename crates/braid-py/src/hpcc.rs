//! braid-topo's readers of HPCC ns-3's input files, for Python: `hpcc_topology(path)` and
//! `hpcc_flows(path, topology)`. `braid import-hpcc` reads the files through these, so it and a
//! run (`topology.kind = "hpcc"`, `pattern = "hpcc"`) read them with one reader and refuse a bad
//! file in the same words. Errors are `ValueError("path:line: message")`.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use std::path::Path;

/// `hpcc_topology(path)`: an HPCC topology file as a dict of `nodes` (the count), `switches` and
/// `hosts` (node ids, ascending), and `links`, a list of `(a, b, rate_bps, delay_ps, loss)`.
#[pyfunction]
pub fn hpcc_topology<'py>(py: Python<'py>, path: &str) -> PyResult<Bound<'py, PyDict>> {
    let g = braid_topo::hpcc::read_topology(Path::new(path)).map_err(PyValueError::new_err)?;
    let d = PyDict::new(py);
    d.set_item("nodes", g.nodes.len())?;
    let switches: Vec<u32> = (0..g.nodes.len() as u32)
        .filter(|&i| g.nodes[i as usize].kind == braid_topo::NodeKind::Switch)
        .collect();
    d.set_item("switches", PyList::new(py, switches)?)?;
    d.set_item("hosts", PyList::new(py, g.hosts())?)?;
    let links = g
        .links
        .iter()
        .map(|l| (l.a, l.b, l.rate_bps, l.delay_ps, l.loss));
    d.set_item("links", PyList::new(py, links)?)?;
    Ok(d)
}

/// `hpcc_flows(path, topology)`: an HPCC flow file whose node ids are those of the HPCC topology
/// file `topology`, read and checked as a run reads it: a dict of numpy arrays `src`, `dst` (host
/// indices), `priority`, `dport`, `size` (bytes) and `start_ps`, one entry per flow.
#[pyfunction]
pub fn hpcc_flows<'py>(
    py: Python<'py>,
    path: &str,
    topology: &str,
) -> PyResult<Bound<'py, PyDict>> {
    let g = braid_topo::hpcc::read_topology(Path::new(topology)).map_err(PyValueError::new_err)?;
    let flows =
        braid_topo::hpcc::read_flows_on(Path::new(path), &g).map_err(PyValueError::new_err)?;
    let frombuffer = py.import("numpy")?.getattr("frombuffer")?;
    let col = |f: fn(&braid_topo::FlowDesc) -> u64| flows.iter().map(f).collect::<Vec<u64>>();
    let d = PyDict::new(py);
    for (name, v) in [
        ("src", col(|f| f.src as u64)),
        ("dst", col(|f| f.dst as u64)),
        ("priority", col(|f| f.priority as u64)),
        ("dport", col(|f| f.dport as u64)),
        ("size", col(|f| f.size)),
        ("start_ps", col(|f| f.start_ps)),
    ] {
        d.set_item(name, crate::sim::numeric(py, &frombuffer, &v, "=u8")?)?;
    }
    Ok(d)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(hpcc_topology, m)?)?;
    m.add_function(wrap_pyfunction!(hpcc_flows, m)?)?;
    Ok(())
}
