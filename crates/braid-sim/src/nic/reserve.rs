//! Reserved QP numbers (issue 28, lazy flow generation): a range of numbers handed out now whose
//! QPs are created later, each at its own number. A generated flow's sender reserves one number
//! per flow when it starts (where it used to create every flow's QP) and creates each QP when its
//! flow starts; its QPs get the numbers they always got, and with them the same UDP source port
//! (ECMP path) and initial PSN, both hashed from (host, QP number). A reserved number's slot costs
//! nothing until its QP is created. Not a verb (ibverbs has none): the simulator makes the
//! reservation below the tenant's stack (`hostverbs.rs`, `braid_apps::QpPlan`).

use super::{Nic, NicParams};
use braid_verbs::*;

impl Nic {
    /// Hands out the next `n` QP numbers without creating their QPs; returns the first.
    pub fn reserve_qps(&mut self, n: u32) -> QpNum {
        let base = self.qp_next;
        self.qp_next += n;
        if n > 0 {
            self.reserved.push((base, base + n));
        }
        base
    }

    /// The UDP source port of QP `qpn`: a live QP's, or the one a reserved number's QP would be
    /// created with (its flow never started: the flows table still names its port and path, as
    /// when every QP was created at the start); None for a number without either.
    pub fn sport_of(&self, qpn: QpNum) -> Option<u16> {
        match self.qp(qpn) {
            Some(q) => Some(q.sport),
            None if self.reserved.iter().any(|&(a, b)| qpn >= a && qpn < b) => {
                Some(self.default_sport(qpn))
            }
            None => None,
        }
    }

    /// Creates the QP of reserved number `qpn`: a number already handed out whose QP was never
    /// created (the caller checks it is its own reservation). A number never handed out, or one
    /// whose QP exists, is refused. (A reserved QP destroyed by its own tenant leaves a free
    /// slot that tenant could fill again: not tracked, as no tenant destroys one.)
    pub fn create_qp_at(
        &mut self,
        init: &QpInit,
        p: &NicParams,
        qpn: QpNum,
    ) -> Result<QpNum, VerbsError> {
        if qpn >= self.qp_next {
            return Err(VerbsError::InvalidArgument(
                "a reserved QP number: this one was never reserved",
            ));
        }
        if self.qps.get(qpn as usize).is_some_and(|q| q.is_some()) {
            return Err(VerbsError::InvalidArgument(
                "a reserved QP number: this one's QP exists already",
            ));
        }
        self.create_qp_numbered(init, p, qpn)
    }
}

#[cfg(test)]
mod tests {
    use super::super::*;
    use crate::nic::config::NicConfig;
    use crate::transport::config::TransportConfig;

    /// Reserved numbers are skipped by ordinary creation, and created later at their own
    /// number with the port and PSN their number gives; a number never handed out, or one whose
    /// QP exists, is refused (a tenant cannot take a QP number it was not given).
    #[test]
    fn reserved_numbers_are_created_late_as_they_would_have_been_early() {
        let p = NicParams::new(NicConfig::default(), TransportConfig::default());
        let mut eager = Nic::new(3, 100_000_000_000, &p, 1);
        let mut lazy = Nic::new(3, 100_000_000_000, &p, 1);
        let (ce, cl) = (eager.create_cq(64), lazy.create_cq(64));
        let early: Vec<QpNum> = (0..5)
            .map(|_| eager.create_qp(&QpInit::rc(ce), &p).unwrap())
            .collect();
        assert_eq!(lazy.create_qp(&QpInit::rc(cl), &p).unwrap(), 0);
        let base = lazy.reserve_qps(3);
        assert_eq!(base, 1);
        // The next ordinary QP comes after the reservation.
        assert_eq!(lazy.create_qp(&QpInit::rc(cl), &p).unwrap(), 4);
        assert_eq!(lazy.qps_created(), 5);
        assert_eq!(lazy.sport_of(2), Some(eager.qp(2).unwrap().sport));
        assert_eq!(lazy.sport_of(9), None);
        for n in [3, 1] {
            assert_eq!(lazy.create_qp_at(&QpInit::rc(cl), &p, n).unwrap(), n);
            let (a, b) = (lazy.qp(n).unwrap(), eager.qp(early[n as usize]).unwrap());
            assert_eq!((a.sport, a.sq_psn), (b.sport, b.sq_psn));
        }
        assert!(
            lazy.create_qp_at(&QpInit::rc(cl), &p, 5).is_err(),
            "never handed out"
        );
        assert!(lazy.create_qp_at(&QpInit::rc(cl), &p, 3).is_err(), "exists");
        assert!(lazy.create_qp_at(&QpInit::rc(cl), &p, 4).is_err(), "exists");
        assert_eq!(lazy.qps_created(), 5);
    }
}
