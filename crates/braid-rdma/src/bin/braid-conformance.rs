//! The verbs conformance suite (`braid_verbs::testing::conformance`) on a real RDMA device:
//! `braid-conformance [-d DEVICE] [--middleware NAME[,NAME]]` (the cases then run through that
//! stack, built by each mechanism's config as in a scenario). Prints each case's result and observations, then
//! `N passed, M failed`; exits 0 only when every case passed.

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut device = None;
    let mut middleware: Vec<String> = Vec::new();
    let mut busy = false;
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "-d" | "--ib-dev" if i + 1 < args.len() => {
                device = Some(args[i + 1].clone());
                i += 2;
            }
            "--middleware" if i + 1 < args.len() => {
                middleware = args[i + 1].split(',').map(str::to_string).collect();
                i += 2;
            }
            "--busy-poll" => {
                busy = true;
                i += 1;
            }
            "-h" | "--help" => {
                println!(
                    "usage: braid-conformance [-d DEVICE] [--middleware NAME[,NAME]] [--busy-poll]"
                );
                return;
            }
            other => {
                eprintln!("braid-conformance: unknown argument {other:?} (expected: -d DEVICE, --middleware NAME[,NAME], --busy-poll)");
                std::process::exit(2);
            }
        }
    }
    if let Some(why) = braid_rdma::unavailable() {
        eprintln!("braid-conformance: {why}");
        std::process::exit(1);
    }
    #[cfg(feature = "rdma")]
    std::process::exit(run(device.as_deref(), &middleware, busy));
    #[cfg(not(feature = "rdma"))]
    let _ = (device, middleware, busy);
}

#[cfg(feature = "rdma")]
fn run(device: Option<&str>, middleware: &[String], busy: bool) -> i32 {
    use braid_middleware::MiddlewareEntry;
    use braid_rdma::real::{host::Host, nic::Nic};
    use braid_verbs::testing::conformance::{cases, report, Outcome};
    use std::cell::RefCell;
    use std::rc::Rc;
    use std::time::Duration;

    let (mut passed, mut failed) = (0, 0);
    for case in cases() {
        if case.bare_only && !middleware.is_empty() {
            println!(
                "{} SKIP: checks the device's own queue limit (bare device only)",
                case.name
            );
            continue;
        }
        let nic = match Nic::open(device) {
            Ok(n) => n,
            Err(e) => {
                eprintln!("braid-conformance: {e}");
                return 1;
            }
        };
        let mut host = Host::new(nic);
        host.busy_poll = busy;
        let mut ctx = host.ctx();
        let tenant = host.next_tenant();
        let mut layers: Vec<Box<dyn braid_verbs::Middleware>> = Vec::new();
        for name in middleware {
            let built =
                serde_json::from_value::<MiddlewareEntry>(serde_json::json!({"kind": name}))
                    .map_err(|e| e.to_string())
                    .and_then(|e| {
                        e.0.factory()
                            .build(&mut ctx, tenant)
                            .map_err(|e| e.to_string())
                    });
            match built {
                Ok(l) => layers.push(l),
                Err(e) => {
                    eprintln!("braid-conformance: --middleware {name}: {e}");
                    return 1;
                }
            }
        }
        host.set_agent(ctx.take_agents());
        let out = Rc::new(RefCell::new(Outcome::default()));
        host.add_app((case.app)(out.clone()), layers);
        // The case's own limit, plus slack for a slow (emulated) machine.
        let limit = Duration::from_nanos(case.limit_ps / 1000) * 3 + Duration::from_secs(2);
        host.run(limit);
        let o = out.borrow();
        if matches!(o.result, Some(Ok(()))) {
            passed += 1;
        } else {
            failed += 1;
        }
        print!("{}", report(case.name, &o));
    }
    println!(
        "conformance (real NIC: {}{}, middleware: {}): {passed} passed, {failed} failed",
        device.unwrap_or("first device"),
        if busy { ", busy polling" } else { "" },
        if middleware.is_empty() {
            "none".to_string()
        } else {
            middleware.join(",")
        }
    );
    println!("{passed} passed, {failed} failed");
    i32::from(failed > 0)
}
