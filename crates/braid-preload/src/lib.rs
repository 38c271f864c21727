//! `libbraid_preload.so`: braid's mechanisms under unmodified libibverbs applications.
//!
//! Loaded with `LD_PRELOAD`, it interposes the exported control verbs ([`interpose`]), swaps the
//! data-path pointers of every context it sees opened ([`datapath`]) and runs each
//! `ibv_post_send`, `ibv_post_recv`, `ibv_poll_cq` and `ibv_req_notify_cq` through a braid
//! [`braid_verbs::Stack`] of the mechanism `BRAID_MIDDLEWARE` names ([`config`]) over a second
//! `Verbs` backend that speaks for the application's own objects ([`backend`]). Its counters
//! ([`stats`]) are printed at exit. See docs/preload.md.

pub mod backend;
pub mod config;
pub mod convert;
pub mod datapath;
pub mod elf;
pub mod ffi;
pub mod host;
pub mod interpose;
pub mod stats;

use std::sync::OnceLock;

static CHOICE: OnceLock<config::Choice> = OnceLock::new();

/// The mechanism of this process (read at load; `raw` if the constructor did not run).
pub fn choice() -> &'static config::Choice {
    CHOICE
        .get_or_init(|| config::parse(None).unwrap_or_else(|_| unreachable!("the default parses")))
}

/// Runs when the library is loaded: a bad `BRAID_MIDDLEWARE` stops the application before it
/// starts, with one line and exit code 2.
extern "C" fn on_load() {
    match config::from_env() {
        Ok(c) => {
            let _ = CHOICE.set(c);
        }
        Err(e) => {
            eprintln!("braid-preload: {e}");
            std::process::exit(2);
        }
    }
}

/// Runs at exit: the counters, when the preload saw a device or was asked for them.
extern "C" fn on_exit() {
    let asked = std::env::var_os("BRAID_PRELOAD_STATS").is_some();
    let seen = stats::c::contexts.load(std::sync::atomic::Ordering::Relaxed) > 0;
    if asked || seen {
        let layers = datapath::lock().layer_counters();
        stats::dump(choice().name(), &layers);
    }
}

#[used]
#[link_section = ".init_array"]
static ON_LOAD: extern "C" fn() = on_load;

#[used]
#[link_section = ".fini_array"]
static ON_EXIT: extern "C" fn() = on_exit;
