//! What the online decider records per round, the table it hands to the results
//! (`drum_rounds`), and the CPU model of its work (the agent's `solver` component).

use braid_drum::online::LocalInstance;
use braid_verbs::{BuildError, LayerColumn, LayerTable};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The name of the per-round table in the results (`drum_rounds.parquet`).
pub const TABLE: &str = "drum_rounds";

/// One finished round of this host's solver, as this host saw it. Counts are cumulative since
/// the decider started (over every epoch and cold restart).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RoundRecord {
    pub t_ps: u64,
    /// This host's address (what the solver names it by).
    pub host_addr: u32,
    pub epoch: u32,
    pub round: u64,
    /// rounds of the current solve
    pub iterations: u64,
    /// connections in the host's instance
    pub connections: u64,
    /// control messages and bytes this host's solver sent (before any loss) and received
    pub messages: u64,
    pub bytes: u64,
    pub messages_received: u64,
    pub bytes_received: u64,
    /// expected values missing at a window's end, replaced by the last round's (lost or late)
    pub stale_values: u64,
    /// values that arrived after their round (kept as the newest known)
    pub late_values: u64,
    /// half-rounds that ended at the window's deadline
    pub timeouts: u64,
    /// `ctrl = "ud"`: messages from peers this host's receiver found missing on the wire
    pub ctrl_lost: u64,
    /// messages dropped by the loss injection (`ctrl_loss`) before they were posted
    pub ctrl_injected_losses: u64,
    /// the solver's local objective estimate
    pub objective: f64,
    /// the run's normalized gap to the offline optimum (NaN without `report_gap`)
    pub gap: f64,
    /// the `solver` CPU charged so far, ns
    pub cpu_ns: f64,
}

/// The records as a table: one row per record, the columns in [`RoundRecord`]'s order
/// (`t_ps` as `time_ps`, `messages`/`bytes` as `messages_sent`/`bytes_sent`).
pub fn table(r: &[RoundRecord]) -> LayerTable {
    let mut t = LayerTable::new(TABLE);
    let u = |f: &dyn Fn(&RoundRecord) -> u64| LayerColumn::U64(r.iter().map(f).collect());
    let x = |f: &dyn Fn(&RoundRecord) -> f64| LayerColumn::F64(r.iter().map(f).collect());
    t.push("time_ps", u(&|r| r.t_ps));
    t.push("host_addr", u(&|r| r.host_addr as u64));
    t.push("epoch", u(&|r| r.epoch as u64));
    t.push("round", u(&|r| r.round));
    t.push("iterations", u(&|r| r.iterations));
    t.push("connections", u(&|r| r.connections));
    t.push("messages_sent", u(&|r| r.messages));
    t.push("bytes_sent", u(&|r| r.bytes));
    t.push("messages_received", u(&|r| r.messages_received));
    t.push("bytes_received", u(&|r| r.bytes_received));
    t.push("stale_values", u(&|r| r.stale_values));
    t.push("late_values", u(&|r| r.late_values));
    t.push("timeouts", u(&|r| r.timeouts));
    t.push("ctrl_lost", u(&|r| r.ctrl_lost));
    t.push("ctrl_injected_losses", u(&|r| r.ctrl_injected_losses));
    t.push("objective", x(&|r| r.objective));
    t.push("gap", x(&|r| r.gap));
    t.push("cpu_ns", x(&|r| r.cpu_ns));
    t
}

/// `online.cpu`: what the solver's work costs the host's CPU, charged as the agent's `solver`
/// component (docs/drum-agent.md: the constants were measured on `braid_drum::online` in
/// release, see `print_solver_round_cost` in the tests).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct SolverCpu {
    /// Per round: the fixed part (the round's bookkeeping and stop test).
    pub round_ns: f64,
    /// Per round and connection of the host's instance (its x-update and its CQ row's
    /// z-update under Q and C).
    pub conn_ns: f64,
    /// Per round and pair with a remote host (each outbound and inbound pair: its item encoded
    /// or decoded, its share of the update).
    pub pair_ns: f64,
    /// Per control message sent or received (building or parsing the header, the post or poll
    /// around it).
    pub msg_ns: f64,
    /// Per connection at each decision (building the instance from the IO monitor's
    /// statistics).
    pub build_ns: f64,
}

impl Default for SolverCpu {
    fn default() -> Self {
        SolverCpu {
            // Measured (print_solver_round_cost, release, best of 5 on the 2-core build
            // machine): one-sided, 8 hosts x 10/40/160 connections: 1.14/3.13/11.4 us per
            // host-round = ~470 ns + ~70 ns per connection; two-sided (fanout 2: 40/160/640
            // remote pairs per host) 6.3/71/313 us: ~480 ns per remote pair on top.
            round_ns: 500.0,
            conn_ns: 70.0,
            pair_ns: 480.0,
            // Assumed: not separable from the pairs in that measurement (a header built or
            // parsed, the slot copy); the post or poll itself is charged by the verbs' own model.
            msg_ns: 100.0,
            // Assumed: a few map lookups per connection when the instance is rebuilt.
            build_ns: 40.0,
        }
    }
}

fn ps(ns: f64) -> u64 {
    (ns * 1000.0).round() as u64
}

impl SolverCpu {
    pub(crate) fn check(&self) -> Result<(), BuildError> {
        for (k, v) in [
            ("round_ns", self.round_ns),
            ("conn_ns", self.conn_ns),
            ("pair_ns", self.pair_ns),
            ("msg_ns", self.msg_ns),
            ("build_ns", self.build_ns),
        ] {
            if !(v.is_finite() && (0.0..=1e9).contains(&v)) {
                return Err(BuildError::new(
                    format!("online.cpu.{k}"),
                    "expected a number of nanoseconds in [0, 1e9]",
                ));
            }
        }
        Ok(())
    }

    /// One round of the host's instance `i`.
    pub fn round_ps(&self, i: &LocalInstance) -> u64 {
        let pairs = i.conns.iter().map(|c| c.out.len()).sum::<usize>() + i.inbound.len();
        ps(self.round_ns + self.conn_ns * i.conns.len() as f64 + self.pair_ns * pairs as f64)
    }

    pub fn message_ps(&self) -> u64 {
        ps(self.msg_ns)
    }

    /// Building the instance of `n` connections.
    pub fn build_ps(&self, n: usize) -> u64 {
        ps(self.build_ns * n as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use braid_drum::online::{Connection, Inbound, Outbound};

    #[test]
    fn a_round_costs_its_connections_and_remote_pairs() {
        let c = SolverCpu {
            round_ns: 100.0,
            conn_ns: 10.0,
            pair_ns: 1.0,
            msg_ns: 5.0,
            build_ns: 2.0,
        };
        let conn = |id, out: Vec<Outbound>| Connection {
            id,
            weight: 1.0,
            a: 1.0,
            demand: f64::INFINITY,
            out,
            links: vec![],
        };
        let i = LocalInstance {
            alpha: 1.0,
            beta: 0.0,
            q_cap: 1.0,
            c_cap: 1.0,
            links: vec![],
            conns: vec![
                conn(1, vec![]),
                conn(
                    2,
                    vec![Outbound {
                        host: 9,
                        conn: 3,
                        frac: 1.0,
                    }],
                ),
            ],
            inbound: vec![Inbound {
                host: 9,
                conn: 4,
                row: 1,
            }],
        };
        // 100 + 2 x 10 + 2 pairs x 1 ns.
        assert_eq!(c.round_ps(&i), 122_000);
        assert_eq!(c.message_ps(), 5_000);
        assert_eq!(c.build_ps(3), 6_000);
        assert!(c.check().is_ok());
        let bad = SolverCpu { pair_ns: -1.0, ..c };
        assert!(bad
            .check()
            .unwrap_err()
            .to_string()
            .contains("online.cpu.pair_ns"));
    }

    #[test]
    fn the_table_has_a_row_per_record() {
        let r = RoundRecord {
            t_ps: 5,
            host_addr: 2,
            epoch: 1,
            round: 3,
            iterations: 3,
            connections: 4,
            messages: 6,
            bytes: 120,
            messages_received: 5,
            bytes_received: 100,
            stale_values: 1,
            late_values: 0,
            timeouts: 1,
            ctrl_lost: 1,
            ctrl_injected_losses: 0,
            objective: -1.5,
            gap: f64::NAN,
            cpu_ns: 10.0,
        };
        let t = table(&[r, RoundRecord { round: 4, ..r }]);
        assert_eq!(t.name, TABLE);
        assert_eq!(t.rows(), 2);
        assert_eq!(t.get("round"), Some(&LayerColumn::U64(vec![3, 4])));
        assert_eq!(t.get("messages_sent"), Some(&LayerColumn::U64(vec![6, 6])));
    }
}
