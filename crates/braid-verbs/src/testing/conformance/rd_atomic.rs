//! `max_rd_atomic` and `max_dest_rd_atomic` (ibverbs' `ibv_qp_attr` fields of the same names):
//! 0 is refused, and a QP pair that holds one READ outstanding (requester) and remembers one
//! (responder) still carries a burst of READs far beyond one, interleaved with WRITEs: every
//! WR completes successfully, in posting order, with its bytes. A requester never has more
//! READs in flight than its responder has resources for (ibverbs' `max_rd_atomic` against the
//! peer's `max_dest_rd_atomic`; rxe's requester waits for a free `rd_atomic` credit): READs
//! beyond the limit wait in the send queue, and everything posted behind them with them. A
//! backend that issued them anyway would overrun the responder's single resource, which the
//! simulator and the fake NIC answer with a NAK (Invalid Request, reported as a remote access
//! error).

use super::*;

/// Offsets of the READs' sources in B's half and their landing places in A's, 3000 bytes each.
const READ_LEN: u32 = 3000;
const READS: u64 = 8;
/// A's area the READs land in.
const LAND: u64 = 64 << 10;

pub(super) fn max_rd_atomic(out: SharedOutcome) -> Box<dyn App> {
    const STEPS: &[Step] = &[
        |c, v| {
            // ibv_modify_qp refuses 0 (EINVAL); the seam refuses it at create_qp.
            for (what, init) in [
                (
                    "max_rd_atomic 0",
                    QpInit {
                        max_rd_atomic: 0,
                        ..QpInit::rc(c.cq_a)
                    },
                ),
                (
                    "max_dest_rd_atomic 0",
                    QpInit {
                        max_dest_rd_atomic: 0,
                        ..QpInit::rc(c.cq_a)
                    },
                ),
            ] {
                let r = v.create_qp(&init);
                c.note(format!(
                    "{what}: {}",
                    if r.is_ok() { "accepted" } else { "refused" }
                ));
                check(matches!(r, Err(VerbsError::InvalidArgument(_))), || {
                    format!("{what} gave {r:?}, not InvalidArgument")
                })?;
            }
            // B's sources: a pattern per READ.
            for i in 0..READS {
                let pat = vec![0x10 + i as u8; READ_LEN as usize];
                v.write_local(BASE + B_OFF + i * 4096, &pat).map_err(err)?;
            }
            // 8 READs with WRITEs between them (ids 100+): READs beyond the one allowed wait,
            // and the WRITEs behind them too.
            let mut id = 0;
            for i in 0..READS {
                let mut r = c.wr(i, SendOp::Read, 0, B_OFF + i * 4096, READ_LEN);
                r.sg_list[0].addr = BASE + LAND + i * 4096;
                v.post_send(c.qa, r).map_err(err)?;
                if i % 3 == 2 {
                    v.post_send(
                        c.qa,
                        c.wr(100 + id, SendOp::Write, 0, B_OFF + 256 * 1024 + id * 64, 64),
                    )
                    .map_err(err)?;
                    id += 1;
                }
            }
            Ok(Wait::Wcs(READS as usize + 2))
        },
        |c, v| {
            let wcs = c.a_wcs();
            for w in &wcs {
                c.note(show(w));
            }
            let ids: Vec<u64> = wcs.iter().map(|w| w.wr_id).collect();
            check(ids == [0, 1, 2, 100, 3, 4, 5, 101, 6, 7], || {
                format!("completions in the order {ids:?}, not as posted")
            })?;
            check(wcs.iter().all(|w| w.status == WcStatus::Success), || {
                "a WR beyond max_rd_atomic did not succeed".into()
            })?;
            for i in 0..READS {
                let got = v
                    .read_local(BASE + LAND + i * 4096, READ_LEN as u64)
                    .map_err(err)?;
                check(got.iter().all(|&b| b == 0x10 + i as u8), || {
                    format!("READ {i}'s bytes are not its source's")
                })?;
            }
            c.note("8 READs through one READ resource, bytes exact");
            Ok(Wait::Go)
        },
    ];
    script(Setup { rd_atomic: 1, ..RC }, STEPS, 2000 * MS, out)
}
