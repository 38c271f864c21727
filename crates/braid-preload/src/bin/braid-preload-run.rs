//! `braid-preload-run PROGRAM [ARGS...]`: runs PROGRAM under libbraid_preload.so (the library
//! beside this launcher, or `BRAID_PRELOAD_LIB`). A statically linked PROGRAM cannot be reached
//! by LD_PRELOAD: it is run unchanged, with one warning line.

use braid_preload::elf::{linkage, Linkage};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;

fn find(prog: &str) -> Option<PathBuf> {
    if prog.contains('/') {
        return Some(PathBuf::from(prog));
    }
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(prog))
            .find(|f| f.is_file())
    })
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(prog) = args.first() else {
        eprintln!(
            "braid-preload-run: expected a program to run: braid-preload-run PROGRAM [ARGS...]"
        );
        std::process::exit(2);
    };
    let Some(path) = find(prog) else {
        eprintln!(
            "braid-preload-run: PROGRAM {prog:?} not found (expected a path or a name on PATH)"
        );
        std::process::exit(2);
    };
    let lib = std::env::var_os("BRAID_PRELOAD_LIB")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let exe = std::env::current_exe().unwrap_or_default();
            exe.with_file_name("libbraid_preload.so")
        });
    let mut cmd = std::process::Command::new(&path);
    cmd.args(&args[1..]);
    match std::fs::read(&path).map(|b| linkage(&b)) {
        Ok(Linkage::Static) => eprintln!(
            "braid-preload-run: {} is statically linked: LD_PRELOAD cannot reach it; it runs \
             unchanged, without braid",
            path.display()
        ),
        _ => {
            let mut pre = lib.into_os_string();
            if let Some(old) = std::env::var_os("LD_PRELOAD").filter(|o| !o.is_empty()) {
                pre.push(" ");
                pre.push(old);
            }
            cmd.env("LD_PRELOAD", pre);
        }
    }
    let e = cmd.exec();
    eprintln!("braid-preload-run: cannot run {}: {e}", path.display());
    std::process::exit(127);
}
