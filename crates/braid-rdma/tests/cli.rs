//! The binaries' command lines: bad input gets one clear line and exit 2; a machine that cannot
//! run the real backend gets a line naming what is missing and exit 1.

use std::process::Command;

fn run(bin: &str, args: &[&str]) -> (i32, String) {
    let o = Command::new(bin)
        .args(args)
        .output()
        .expect("run the binary");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

const PERF: &str = env!("CARGO_BIN_EXE_braid-perftest");
const CONF: &str = env!("CARGO_BIN_EXE_braid-conformance");

#[test]
fn bad_arguments_exit_2_with_the_option_named() {
    for (args, needle) in [
        (vec!["write_bw", "-s", "big"], "-s expects a message size"),
        (vec!["nope_bw"], "unknown test \"nope_bw\""),
        (vec!["write_bw", "-c", "UD"], "UD runs send_bw and send_lat"),
        (vec!["read_lat", "-c", "UD"], "needs a connected QP"),
        (vec!["read_lat", "-c", "UC"], "UC has no RDMA READ"),
        (vec!["send_bw", "-c", "XRC"], "-c expects RC, UC or UD"),
        (vec!["write_bw", "--frobnicate"], "unknown option"),
        (vec!["write_bw", "-Q", "0"], "-Q must be at least 1"),
        (
            vec!["write_lat", "-Q", "100"],
            "latency tests signal every message",
        ),
        (vec![], "no test given"),
    ] {
        let (code, err) = run(PERF, &args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    let (code, err) = run(CONF, &["--bogus"]);
    assert_eq!(code, 2);
    assert!(err.contains("unknown argument"), "{err}");
}

#[test]
fn without_the_backend_the_binaries_say_what_is_missing() {
    let Some(why) = braid_rdma::unavailable() else {
        // The backend is built and libibverbs loads here: nothing is missing.
        return;
    };
    for bin in [PERF, CONF] {
        let args: &[&str] = if bin == PERF { &["write_bw"] } else { &[] };
        let (code, err) = run(bin, args);
        assert_eq!(code, 1, "{err}");
        assert!(err.contains(&why), "{err}");
        assert!(
            err.contains("libibverbs") || err.contains("--features rdma"),
            "{err}"
        );
    }
}
