//! `braid._core`: the Rust core as a Python extension module.

use pyo3::prelude::*;

mod drum;
mod sim;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    sim::register(m)?;
    drum::register(m)?;
    Ok(())
}
