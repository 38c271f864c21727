//! Build progress: while a run is built (topology, links, nodes, routes, traffic, tenants), the
//! builder reports `(stage, done, total)` to a callback of the caller's — the Python front shows
//! it as a bar for large topologies. Reports are made at fixed points of the work (each stage's
//! start and end and every 1/32 of it), never by wall time, so the same scenario always gives
//! the same reports.

/// The caller's callback: stage name, work done, total work of the stage.
pub type ProgressFn<'a> = &'a mut dyn FnMut(&str, u64, u64);

/// Reports of one build; [`Progress::none`] reports nothing.
pub struct Progress<'a> {
    f: Option<ProgressFn<'a>>,
    next: u64,
}

/// Reports per stage, besides its start and end.
const STEPS: u64 = 32;

impl<'a> Progress<'a> {
    pub fn none() -> Progress<'static> {
        Progress { f: None, next: 0 }
    }

    pub fn new(f: ProgressFn<'a>) -> Progress<'a> {
        Progress {
            f: Some(f),
            next: 0,
        }
    }

    /// `done` of `total` of `stage` is done; reported at 0, at `total` and every `total / 32`.
    #[inline]
    pub fn tick(&mut self, stage: &str, done: u64, total: u64) {
        let Some(f) = self.f.as_mut() else { return };
        if done == 0 || done >= total || done >= self.next {
            self.next = done + total.div_ceil(STEPS).max(1);
            f(stage, done.min(total), total);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_start_end_and_every_thirty_second() {
        let mut got = Vec::new();
        let mut f = |s: &str, d: u64, t: u64| got.push((s.to_string(), d, t));
        {
            let mut p = Progress::new(&mut f);
            for i in 0..=320 {
                p.tick("routes", i, 320);
            }
        }
        assert_eq!(got.len(), 33);
        assert_eq!(got[0], ("routes".to_string(), 0, 320));
        assert_eq!(got[1].1, 10);
        assert_eq!(got[32].1, 320);
        let mut q = Progress::none();
        q.tick("x", 0, 1);
    }
}
