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
