//! MP-RDMA receiver: the cyclic bitmap of two-bit slots from rcv_nxt, and the ACKs, NACKs and
//! synchronise NACKs it generates (§3.3, §3.4).

use super::{MpRdmaTransport, Slot};
use crate::transport::{DataInfo, Reply, RxClass};

impl MpRdmaTransport {
    /// Receiver side: the slot of a PSN within the window.
    pub(super) fn slot(&mut self, psn: u32) -> &mut Slot {
        let l = self.bitmap.len();
        &mut self.bitmap[psn as usize % l]
    }

    /// A data packet arrives: duplicate, beyond the bitmap, early synchronise, or accepted.
    pub(super) fn rx_data(&mut self, d: DataInfo, out: &mut Vec<Reply>) -> RxClass {
        if d.read_response {
            return RxClass::Accept;
        }

        let l = self.bitmap.len() as u32;
        let dup =
            d.psn < self.rcv_nxt || (d.psn - self.rcv_nxt < l && *self.slot(d.psn) != Slot::Empty);
        if dup {
            self.stats.dup_rx += 1;
            out.push(Reply::Ack {
                cum: self.rcv_nxt,
                sack: Some(d.psn),
                echo_sport: d.sport,
                ece: d.ce,
                retx: d.retx,
            });
            return RxClass::Duplicate;
        }
        if d.psn - self.rcv_nxt >= l {
            // Beyond the bitmap: drop, and NACK the PSN that holds the window back (every such
            // drop: the sender ignores repeats while that PSN's retransmission is in flight).
            self.stats.bitmap_drops += 1;
            out.push(Reply::Nak {
                expected: self.rcv_nxt,
            });
            return RxClass::Drop;
        }
        if let Some(first) = d.sync_first {
            if self.rcv_nxt < first {
                // §3.4: a synchronise message updates memory only after every earlier message is
                // complete. Drop it and NACK it: the sender resends it once the hole is filled.
                self.stats.sync_dropped += 1;
                if self.sync_early_hi.is_none_or(|h| first > h) {
                    self.sync_early_hi = Some(first);
                    self.stats.sync_early += 1;
                }
                out.push(Reply::SyncNak {
                    expected: self.rcv_nxt,
                    psn: d.psn,
                });
                return RxClass::Drop;
            }
        }
        RxClass::Accept
    }

    /// An accepted packet: mark its slot, advance rcv_nxt over received slots, ACK it.
    pub(super) fn rx_accepted(&mut self, d: DataInfo, out: &mut Vec<Reply>) {
        if d.read_response {
            return;
        }
        let ood = d.psn - self.rcv_nxt;
        self.stats.max_ood = self.stats.max_ood.max(ood);
        let last = self.stats.ood_hist.len() - 1;
        self.stats.ood_hist[(ood as usize).min(last)] += 1;
        *self.slot(d.psn) = match (d.last, d.completion) {
            (false, _) => Slot::Received,
            (true, false) => Slot::Tail,
            (true, true) => Slot::TailWithCompletion,
        };
        // Advance over every received slot (the NIC completes messages whose tail it passed).
        while *self.slot(self.rcv_nxt) != Slot::Empty {
            let n = self.rcv_nxt;
            *self.slot(n) = Slot::Empty;
            self.rcv_nxt += 1;
        }
        out.push(Reply::Ack {
            cum: self.rcv_nxt,
            sack: Some(d.psn),
            echo_sport: d.sport,
            ece: d.ce,
            retx: d.retx,
        });
    }

    pub(super) fn rx_read_request(&mut self, psn: u32, npsn: u32, out: &mut Vec<Reply>) -> RxClass {
        // READ requests are served in order (their responses use the connection's own port).
        if psn > self.rcv_nxt {
            if self.nak_sent_for != Some(self.rcv_nxt) {
                self.nak_sent_for = Some(self.rcv_nxt);
                out.push(Reply::Nak {
                    expected: self.rcv_nxt,
                });
            }
            return RxClass::Drop;
        }
        if psn == self.rcv_nxt {
            for k in 0..npsn {
                *self.slot(psn + k) = Slot::Empty;
            }
            self.rcv_nxt += npsn;
            while *self.slot(self.rcv_nxt) != Slot::Empty {
                let n = self.rcv_nxt;
                *self.slot(n) = Slot::Empty;
                self.rcv_nxt += 1;
            }
        }
        RxClass::Accept
    }
}
