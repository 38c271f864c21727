//! `braid._core`: the Rust core as a Python extension module.

use pyo3::prelude::*;

mod drum;
mod hpcc;
mod sim;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    // How this extension was built: scripts/build-ext.sh sets BRAID_BUILD ("release, profile-guided"
    // or "release"), so a benchmark's numbers say which build they measured.
    let build = match option_env!("BRAID_BUILD") {
        Some(b) => b,
        None if cfg!(debug_assertions) => "debug",
        None => "release",
    };
    m.add("__build__", build)?;
    sim::register(m)?;
    drum::register(m)?;
    hpcc::register(m)?;
    Ok(())
}
