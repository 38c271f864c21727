//! Python bindings of the simulator: `braid._core.Simulation`, `ScenarioError`, `scenario_schema`.
//!
//! Results come back as plain Python objects: a dict per table mapping column names to numpy
//! arrays (numeric columns, built from one copy of the Rust vector) or lists of str.

use braid_sim::{Column, Results, Table};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use std::path::PathBuf;

/// `braid.scenario.ScenarioError`: defined in Python as a kind of `BraidError` (itself a
/// `ValueError`), so that callers catch every user mistake with one class.
fn scenario_error_type(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    py.import("braid.scenario")?.getattr("ScenarioError")
}

/// Builds a Python `ScenarioError` with `path` and `message` attributes.
pub fn scenario_error(py: Python<'_>, e: &braid_sim::ScenarioError) -> PyErr {
    match scenario_error_type(py).and_then(|t| t.call1((e.path.as_str(), e.message.as_str()))) {
        Ok(v) => PyErr::from_value(v),
        Err(_) => PyValueError::new_err(e.to_string()),
    }
}

/// Lets a `&mut Simulation` cross into `Python::detach`. The closure runs on the calling thread
/// (detach only releases the GIL) and the class is `unsendable`, so no other thread can reach the
/// simulation's single-threaded internals meanwhile.
struct AssertSend<T>(T);
unsafe impl<T> Send for AssertSend<T> {}

/// One simulation run: build it from a scenario (JSON text), advance it in slices of simulated
/// time, read its results.
#[pyclass(module = "braid._core", unsendable)]
pub struct Simulation {
    sim: braid_sim::Simulation,
}

#[pymethods]
impl Simulation {
    /// `Simulation(scenario_json, base_dir, seed=None, progress=None)`; relative file names in
    /// the scenario resolve against `base_dir`. `progress`, if given, is called as
    /// `progress(stage, done, total)` while the run is built (see `braid_sim::progress`); an
    /// exception it raises is raised once the build is over. Raises `ScenarioError` on invalid
    /// input.
    #[new]
    #[pyo3(signature = (scenario_json, base_dir = ".", seed = None, progress = None))]
    fn new(
        py: Python<'_>,
        scenario_json: &str,
        base_dir: &str,
        seed: Option<u64>,
        progress: Option<Py<PyAny>>,
    ) -> PyResult<Self> {
        let base = PathBuf::from(base_dir);
        let json = scenario_json.to_owned();
        let (built, cb_err) = {
            let job = AssertSend((json, base, progress));
            py.detach(move || {
                let job = job;
                let (json, base, progress) = job.0;
                let Some(cb) = progress else {
                    return AssertSend((
                        braid_sim::Simulation::from_json(&json, &base, seed),
                        None,
                    ));
                };
                let mut cb_err: Option<PyErr> = None;
                let mut report = |stage: &str, done: u64, total: u64| {
                    if cb_err.is_some() {
                        return;
                    }
                    Python::attach(|py| {
                        if let Err(e) = cb.call1(py, (stage, done, total)) {
                            cb_err = Some(e);
                        }
                    });
                };
                let built =
                    braid_sim::Simulation::from_json_with_progress(&json, &base, seed, &mut report);
                AssertSend((built, cb_err))
            })
            .0
        };
        if let Some(e) = cb_err {
            return Err(e);
        }
        match built {
            Ok(sim) => Ok(Simulation { sim }),
            Err(e) => Err(scenario_error(py, &e)),
        }
    }

    /// Current simulated time in picoseconds.
    fn now_ps(&self) -> u64 {
        self.sim.now_ps()
    }

    /// Simulated-time limit (the scenario's duration) in picoseconds.
    fn end_ps(&self) -> u64 {
        self.sim.end_ps()
    }

    /// The start of the last traffic flow (ps), when the run ends once its flows are done and has
    /// no applications; None otherwise (the progress bar then measures against `end_ps`).
    fn last_arrival_ps(&self) -> Option<u64> {
        self.sim.last_arrival_ps()
    }

    /// Advances to `until_ps` (or the end) with the GIL released; returns True once finished.
    fn advance(&mut self, py: Python<'_>, until_ps: u64) -> bool {
        let sim = AssertSend(&mut self.sim);
        py.detach(move || {
            let sim = sim;
            sim.0.advance(until_ps)
        })
    }

    fn is_finished(&self) -> bool {
        self.sim.is_finished()
    }

    /// Everything measured so far, as a dict: "tables" (name -> table: column name -> numpy
    /// array or list of str, or `(values, valid)` for a column with nulls; `table_to_py`),
    /// "pcap", "counters" (name -> int), "headline" and "stats" (name -> float). With
    /// `tables=False` only the last three (numpy is then not imported).
    #[pyo3(signature = (tables = true))]
    fn results<'py>(&self, py: Python<'py>, tables: bool) -> PyResult<Bound<'py, PyDict>> {
        let r = {
            let sim = AssertSend(&self.sim);
            py.detach(move || {
                let sim = sim;
                AssertSend(sim.0.results())
            })
            .0
        };
        results_to_py(py, &r, tables)
    }

    fn __repr__(&self) -> String {
        format!(
            "<braid Simulation at {} ps of {} ps{}>",
            self.sim.now_ps(),
            self.sim.end_ps(),
            if self.sim.is_finished() {
                ", finished"
            } else {
                ""
            }
        )
    }
}

/// `capacity(scenario_json, base_dir=".", check=True)`: what the scenario will cost, estimated
/// before anything is built or drawn (`braid_sim::capacity`): a dict of `hosts`, `switches`,
/// `qps`, `flows`, `samples`, `memory` (bytes), `outputs` (bytes of the results folder), `by_key` (bytes by the key that causes them),
/// `line` (the text `braid validate` prints) and `warnings` (lines). With `check`, raises `ScenarioError` naming the costliest key when the
/// memory exceeds `BRAID_MEMORY_LIMIT` (else the memory available), or on invalid input.
#[pyfunction]
#[pyo3(signature = (scenario_json, base_dir = ".", check = true))]
pub fn capacity<'py>(
    py: Python<'py>,
    scenario_json: &str,
    base_dir: &str,
    check: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let base = PathBuf::from(base_dir);
    let r = if check {
        braid_sim::capacity::check_json(scenario_json, &base)
    } else {
        braid_sim::Scenario::from_json(scenario_json)
            .map(|sc| braid_sim::capacity::estimate(&sc, &base))
    };
    let e = r.map_err(|e| scenario_error(py, &e))?;
    let d = PyDict::new(py);
    d.set_item("hosts", e.hosts)?;
    d.set_item("switches", e.switches)?;
    d.set_item("qps", e.qps)?;
    d.set_item("flows", e.flows)?;
    d.set_item("samples", e.samples)?;
    d.set_item("memory", e.memory)?;
    d.set_item("outputs", e.outputs)?;
    d.set_item("line", e.line())?;
    d.set_item("warnings", PyList::new(py, &e.warnings)?)?;
    let by_key = PyDict::new(py);
    for p in &e.parts {
        by_key.set_item(&p.key, p.bytes)?;
    }
    d.set_item("by_key", by_key)?;
    Ok(d)
}

/// `parse_bytes("10KB")` -> 10000: a size as the scenario reads one (`braid_units::Bytes`,
/// the one parser), for the front's options that take sizes (`braid plot --buckets`). A bad size
/// is a ValueError carrying the parser's message.
#[pyfunction]
pub fn parse_bytes(text: &str) -> PyResult<u64> {
    text.parse::<braid_units::Bytes>()
        .map(|b| b.0)
        .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))
}

/// `parse_duration_ps("10us")` -> 10_000_000: a duration as the scenario reads one, in
/// picoseconds (`braid plot --window`). A bad duration is a ValueError with the parser's message.
#[pyfunction]
pub fn parse_duration_ps(text: &str) -> PyResult<u64> {
    text.parse::<braid_units::Duration>()
        .map(|d| d.0)
        .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))
}

/// The scenario schema as JSON Schema text.
#[pyfunction]
pub fn scenario_schema() -> String {
    braid_sim::scenario_json_schema()
}

pub(crate) fn numeric<'py, T: Copy>(
    py: Python<'py>,
    frombuffer: &Bound<'py, PyAny>,
    v: &[T],
    dtype: &str,
) -> PyResult<Bound<'py, PyAny>> {
    // SAFETY: T is a plain integer or float type; viewing its storage as bytes is sound.
    let bytes =
        unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, std::mem::size_of_val(v)) };
    let buf = PyBytes::new(py, bytes);
    // The array views the (immutable) bytes object; copy so that callers get a writable array.
    frombuffer.call1((buf, dtype))?.call_method0("copy")
}

/// A table as a dict of column name -> numpy array or list of str. A column with nulls
/// (`Table::valid`) comes as `(values, valid)`, `valid` a numpy bool array (false: null, the
/// value under it is a placeholder); text columns come as a list with None for the nulls.
fn table_to_py<'py>(
    py: Python<'py>,
    frombuffer: &Bound<'py, PyAny>,
    t: &Table,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (name, col) in &t.columns {
        let valid = t.validity(name);
        let v: Bound<'py, PyAny> = match col {
            // Little-endian on every platform braid builds for; "=" is native order.
            Column::U64(v) => numeric(py, frombuffer, v, "=u8")?,
            Column::I64(v) => numeric(py, frombuffer, v, "=i8")?,
            Column::F64(v) => numeric(py, frombuffer, v, "=f8")?,
            Column::Str(v) => {
                let items = v
                    .iter()
                    .enumerate()
                    .map(|(i, s)| valid.is_none_or(|m| m[i]).then_some(s.as_str()));
                PyList::new(py, items)?.into_any()
            }
        };
        match (valid, col) {
            (Some(m), Column::U64(_) | Column::I64(_) | Column::F64(_)) => {
                let bytes: Vec<u8> = m.iter().map(|&b| b as u8).collect();
                let mask = numeric(py, frombuffer, &bytes, "?")?;
                d.set_item(name, (v, mask))?;
            }
            _ => d.set_item(name, v)?,
        }
    }
    Ok(d)
}

/// The table registry (`braid_sim::tables::REGISTRY`) as Python data: one dict per table, in
/// order, with `name`, `doc`, `columns` (dicts of `name`, `type` (u64, i64, f64, str),
/// `nullable`, `doc`) and `extra` (what columns beyond the declared ones hold, or None).
#[pyfunction]
pub fn table_specs(py: Python<'_>) -> PyResult<Bound<'_, PyList>> {
    let out = PyList::empty(py);
    for s in braid_sim::tables::REGISTRY {
        let t = PyDict::new(py);
        t.set_item("name", s.name)?;
        t.set_item("doc", s.doc)?;
        let cols = PyList::empty(py);
        for c in s.columns {
            let cd = PyDict::new(py);
            cd.set_item("name", c.name)?;
            cd.set_item("type", c.ty.name())?;
            cd.set_item("nullable", c.null.nullable())?;
            cd.set_item("doc", c.doc)?;
            cols.append(cd)?;
        }
        t.set_item("columns", cols)?;
        t.set_item("extra", s.extra.map(|e| e.doc))?;
        out.append(t)?;
    }
    Ok(out)
}

pub fn results_to_py<'py>(
    py: Python<'py>,
    r: &Results,
    tables: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    if tables {
        let frombuffer = py.import("numpy")?.getattr("frombuffer")?;
        // Every table by name, in `Results::tables`' order: the registry's, then the ones the
        // middleware layers handed over.
        let all = PyDict::new(py);
        for (name, t) in r.tables.iter() {
            all.set_item(name, table_to_py(py, &frombuffer, t)?)?;
        }
        d.set_item("tables", all)?;
        // The packet capture (`measure.pcap`), a whole pcap file; None when nothing was captured.
        if r.pcap.is_empty() {
            d.set_item("pcap", py.None())?;
        } else {
            d.set_item("pcap", PyBytes::new(py, &r.pcap))?;
        }
    }
    let counters = PyDict::new(py);
    for (k, v) in &r.counters {
        counters.set_item(k, *v)?;
    }
    d.set_item("counters", counters)?;
    let headline = PyDict::new(py);
    for (k, v) in &r.headline {
        headline.set_item(k, *v)?;
    }
    d.set_item("headline", headline)?;
    let stats = PyDict::new(py);
    for (k, v) in &r.stats {
        stats.set_item(k, *v)?;
    }
    d.set_item("stats", stats)?;
    Ok(d)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Simulation>()?;
    m.add("ScenarioError", scenario_error_type(m.py())?)?;
    m.add_function(wrap_pyfunction!(scenario_schema, m)?)?;
    m.add_function(wrap_pyfunction!(capacity, m)?)?;
    m.add_function(wrap_pyfunction!(parse_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(parse_duration_ps, m)?)?;
    m.add_function(wrap_pyfunction!(table_specs, m)?)?;
    Ok(())
}
