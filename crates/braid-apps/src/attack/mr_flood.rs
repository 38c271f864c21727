//! The memory-registration flood: `regions` registrations of `size` bytes each, one after the
//! other, kept (never deregistered), as Husky's attacks on the NIC's translation and protection
//! tables (MTT/MPT) do. A NIC with a registration limit refuses the ones past it; the attacker
//! counts what was granted and what was refused. Registering alone never touches the victim's
//! traffic: the simulator's translation cache (`nic.mtt`, docs/scenario.md) charges accesses,
//! not registrations, so here it measures that registering cannot touch another tenant.

use super::{AttackEnds, Tally};
use crate::SharedMeter;
use braid_verbs::*;

/// `kind = "mr_flood"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MrFlood {
    pub regions: u64,
    pub size: u64,
}

/// Registrations when `iterations` does not say.
const DEFAULT_REGIONS: u64 = 1000;

crate::spec::app_config! {
    /// `kind = "mr_flood"`'s keys: `iterations` registrations of `size` bytes.
    pub struct MrFloodConfig {}
}

impl crate::spec::KindConfig for MrFloodConfig {
    fn keys() -> &'static [&'static str] {
        &[]
    }
    fn attacker() -> bool {
        true
    }
    fn common(&self) -> crate::AppCommon {
        self.common_keys()
    }
    fn factory(
        &self,
        _kind: crate::AppKind,
    ) -> Result<Box<dyn crate::AppFactory>, crate::KeyError> {
        let k = self.common_keys();
        Ok(Box::new(MrFlood {
            regions: k.iterations.unwrap_or(DEFAULT_REGIONS),
            size: k.size,
        }))
    }
}

impl crate::AppFactory for MrFlood {
    fn build(&self, e: crate::AppEnds) -> (Box<dyn App>, Box<dyn App>) {
        MrFlood::build(self, e.into())
    }
}

impl MrFlood {
    pub fn build(&self, e: AttackEnds) -> (Box<dyn App>, Box<dyn App>) {
        let f = Flood {
            cfg: *self,
            flow: e.flow,
            meter: e.meter,
            base: e.client_base,
            tally: Tally::default(),
            done: false,
        };
        (Box::new(Idle), Box::new(f))
    }
}

struct Flood {
    cfg: MrFlood,
    flow: u32,
    meter: SharedMeter,
    base: u64,
    tally: Tally,
    done: bool,
}

impl App for Flood {
    fn start(&mut self, v: &mut dyn Verbs) {
        self.meter.borrow_mut().started(self.flow, v.now());
        let size = self.cfg.size.max(1);
        for i in 0..self.cfg.regions {
            self.tally.tries += 1;
            // Page-aligned, side by side in the attacker's own address range.
            let addr = self.base + i * size.div_ceil(4096) * 4096;
            match v.reg_mr(addr, size, Access::ALL) {
                Ok(_) => self.tally.succeeded += 1,
                Err(_) => self.tally.refused += 1,
            }
        }
        self.done = true;
        let mut m = self.meter.borrow_mut();
        m.attack(self.flow, self.tally);
        m.finished(self.flow, v.now());
    }

    fn on_event(&mut self, _: &mut dyn Verbs, _: Event) {}

    fn is_done(&self) -> bool {
        self.done
    }
}
