//! The suite on a third backend: the in-process fake NIC, with its defaults. (With
//! `NetConfig::ud_grh` on, raw ibverbs' layout with the 40-byte GRH in front of UD payloads,
//! the UD case fails: byte_len 240 for 200 bytes; the seam means the payload alone, as the
//! simulator and the real backend give it.)

use super::*;
use crate::testing::{FakeNet, NetConfig};

fn run_on_fake() -> (String, Vec<&'static str>) {
    let mut text = String::new();
    let mut failed = Vec::new();
    for case in cases() {
        let mut net = FakeNet::with_config(1, NetConfig::default());
        let h = net.hosts()[0];
        let out = Rc::new(RefCell::new(Outcome::default()));
        net.add_tenant(h, (case.app)(out.clone()), Vec::new());
        net.run_until(case.limit_ps + 1);
        let o = out.borrow();
        if !matches!(o.result, Some(Ok(()))) {
            failed.push(case.name);
        }
        text.push_str(&report(case.name, &o));
    }
    (text, failed)
}

#[test]
fn the_suite_on_the_fake_nic() {
    let (text, failed) = run_on_fake();
    println!("{text}");
    assert_eq!(failed, Vec::<&str>::new(), "{text}");
}
