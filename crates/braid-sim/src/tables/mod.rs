//! The registry of the run's output tables: each table declared once (its name, columns, types,
//! nulls and docs) beside the function that builds it. Everything else reads this list: the
//! results (`results::assemble` builds every table in it, in its order), the Python side
//! (`braid._core.table_specs`: which files to write and read, which columns are nullable), the
//! names a middleware layer's table may not take (`tenants::layer_tables`), and the docs' table
//! of files (README.md) and column reference (docs/report.md), which `tests/tables_docs.rs`
//! checks against [`markdown_files`] and [`markdown_columns`].
//!
//! A new table: one file (its spec and builder, `pub const SPEC`) and one line in [`REGISTRY`].
//!
//! Nulls: `Column` has no null, so a producer writes a placeholder (NaN for "unknown", -1 or a
//! maximum for "none") where a value is missing, and the spec names it ([`Null`]); [`TableSpec::finish`]
//! turns the placeholders into the table's validity masks, so front ends see nulls, never the
//! placeholder (polars' convention, and Arrow's: a missing value is a null, not a number).

use crate::api::{ColumnType, Table};
use crate::measure::FlowLog;
use crate::transport_report::TransportTotals;
use crate::world::World;
use braid_engine::Time;

pub mod flows;
pub mod messages;
pub mod pfc;
pub mod ports;
pub mod queues;
pub mod throughput;

/// What a table builder reads: the world, the flow log and the moment of the results.
pub struct Source<'a> {
    pub world: &'a World,
    pub log: &'a FlowLog,
    pub now: Time,
    /// The transports' totals at the end of warm-up, subtracted from the counters.
    pub transport_base: Option<&'a TransportTotals>,
}

/// How a producer marks a missing value in a nullable column (the placeholder under a null).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Null {
    /// Never null.
    Never,
    /// An f64 column: NaN is null ("unknown", "not measured").
    Nan,
    /// An i64 column: a negative value is null ("none": the -1 of an unset time or flow).
    Negative,
    /// A u64 column: this value is null (e.g. `u32::MAX` for "no such host").
    Is(u64),
}

impl Null {
    pub fn nullable(self) -> bool {
        self != Null::Never
    }
    /// The rows of `c` that hold a value.
    fn validity(self, c: &crate::api::Column) -> Option<Vec<bool>> {
        use crate::api::Column as C;
        match (self, c) {
            (Null::Nan, C::F64(v)) => Some(v.iter().map(|x| !x.is_nan()).collect()),
            (Null::Negative, C::I64(v)) => Some(v.iter().map(|&x| x >= 0).collect()),
            (Null::Is(n), C::U64(v)) => Some(v.iter().map(|&x| x != n).collect()),
            _ => None,
        }
    }
    /// The placeholder of columns a table adds at run time (`Extra`): NaN for f64, a negative
    /// value for i64; integers counted from 0 and text have none.
    fn of_extra(ty: ColumnType) -> Null {
        match ty {
            ColumnType::F64 => Null::Nan,
            ColumnType::I64 => Null::Negative,
            ColumnType::U64 | ColumnType::Str => Null::Never,
        }
    }
}

/// One declared column.
#[derive(Debug, Clone, Copy)]
pub struct Col {
    pub name: &'static str,
    pub ty: ColumnType,
    pub null: Null,
    pub doc: &'static str,
}

/// A column that is never null.
pub const fn col(name: &'static str, ty: ColumnType, doc: &'static str) -> Col {
    Col {
        name,
        ty,
        null: Null::Never,
        doc,
    }
}

/// A nullable column, and the placeholder its producer writes under a null.
pub const fn nullable(name: &'static str, ty: ColumnType, null: Null, doc: &'static str) -> Col {
    Col {
        name,
        ty,
        null,
        doc,
    }
}

/// Columns a table adds at run time beside the declared ones (a transport's counters, a
/// layer's CPU time): their type (None: any) and what they hold. An f64 extra is null where NaN,
/// an i64 one where negative.
#[derive(Debug, Clone, Copy)]
pub struct Extra {
    pub ty: Option<ColumnType>,
    pub doc: &'static str,
}

/// One output table: `<name>.parquet` in a results folder, `RunResult.<name>` in Python.
#[derive(Debug, Clone, Copy)]
pub struct TableSpec {
    pub name: &'static str,
    /// One sentence for the docs' table of files.
    pub doc: &'static str,
    /// The declared columns, in the table's order (run-time extras may sit between them).
    pub columns: &'static [Col],
    pub extra: Option<Extra>,
    pub build: fn(&Source) -> Table,
}

/// The run's own tables, in the order they are written and listed.
pub const REGISTRY: &[&TableSpec] = &[
    &flows::SPEC,
    &messages::SPEC,
    &throughput::SPEC,
    &queues::SPEC,
    &crate::transport_report::SPEC,
    &crate::tenants::SPEC,
    &ports::SPEC,
    &pfc::SPEC,
    &crate::trace::cc::SPEC,
];

/// Files a results folder holds besides the tables, for the docs' table of files (name, doc).
pub const OTHER_FILES: &[(&str, &str)] = &[
    ("summary.json", "scenario (with overrides), seed, braid version, headline metrics, counters (with MP-RDMA: `mp_rdma_<counter>` summed over QPs and `mp_rdma_ood_p50/p99/p999/max` of all received packets), run statistics, wall and CPU time, events/s"),
    ("trace.pcap", "with `measure.pcap`: chosen flows' packets and/or ports' frames as a pcap file with real Ethernet/IPv4/UDP/BTH/RETH/AETH headers, for Wireshark and tshark (docs/scenario.md, \"Packet traces\")"),
];

/// The docs' line for the tables middleware layers hand over (not in the registry: their
/// columns are the layer's).
pub const LAYER_TABLES_DOC: &str = "tables a middleware layer hands over (`RunResult.layer_tables`, read back by `braid.results.read_results` under their names, listed by `braid report`), `host` and `tenant` first, a float column's NaN written as null: `drum_rounds`, one row per host and round of DRUM's online solver (`decider = \"online\"`; columns in [docs/drum-agent.md](docs/drum-agent.md))";

/// Names a middleware layer's table may not take: the registry's, and the other files'.
pub fn reserved(name: &str) -> bool {
    spec(name).is_some() || name == "summary" || name == "trace"
}

/// The spec of the registry's table `name`.
pub fn spec(name: &str) -> Option<&'static TableSpec> {
    REGISTRY.iter().copied().find(|s| s.name == name)
}

impl TableSpec {
    /// Builds the table from `src` and finishes it ([`TableSpec::finish`]).
    pub fn make(&self, src: &Source) -> Table {
        self.finish((self.build)(src))
    }

    /// Marks the nulls of `t` (built by this spec's builder) from their placeholders; in debug
    /// builds, checks that `t` is what the spec declares.
    pub fn finish(&self, mut t: Table) -> Table {
        debug_assert_eq!(self.conforms(&t), Ok(()), "table {}", self.name);
        let masks: Vec<(String, Vec<bool>)> = t
            .columns
            .iter()
            .filter_map(|(name, c)| {
                let null = match self.columns.iter().find(|d| d.name == name) {
                    Some(d) => d.null,
                    None => Null::of_extra(c.ty()),
                };
                null.validity(c).map(|v| (name.clone(), v))
            })
            .collect();
        for (name, v) in masks {
            t.set_validity(&name, v);
        }
        t
    }

    /// Whether `t` has exactly the declared columns, in the declared order and of the declared
    /// types, plus (only if the spec allows extras) extras of the allowed type.
    pub fn conforms(&self, t: &Table) -> Result<(), String> {
        let mut next = 0;
        for (name, c) in &t.columns {
            match self.columns.iter().position(|d| d.name == name) {
                Some(k) => {
                    if k != next {
                        return Err(format!(
                            "column {name} at the place of {}",
                            self.columns.get(next).map_or("nothing", |d| d.name)
                        ));
                    }
                    if c.ty() != self.columns[k].ty {
                        return Err(format!(
                            "column {name} is {}, declared {}",
                            c.ty().name(),
                            self.columns[k].ty.name()
                        ));
                    }
                    next += 1;
                }
                None => match self.extra {
                    None => return Err(format!("undeclared column {name}")),
                    Some(e) if e.ty.is_some_and(|ty| ty != c.ty()) => {
                        return Err(format!("extra column {name} is {}", c.ty().name()))
                    }
                    Some(_) => {}
                },
            }
        }
        if next != self.columns.len() {
            return Err(format!("missing column {}", self.columns[next].name));
        }
        Ok(())
    }
}

/// The README's table of files: one row per file of a results folder.
pub fn markdown_files() -> String {
    let mut out = String::from("| file | contents |\n|---|---|\n");
    let row = |out: &mut String, f: &str, d: &str| out.push_str(&format!("| `{f}` | {d} |\n"));
    row(&mut out, OTHER_FILES[0].0, OTHER_FILES[0].1);
    for s in REGISTRY {
        row(&mut out, &format!("{}.parquet", s.name), s.doc);
    }
    row(&mut out, "<name>.parquet", LAYER_TABLES_DOC);
    for (f, d) in &OTHER_FILES[1..] {
        row(&mut out, f, d);
    }
    out
}

/// docs/report.md's column reference: per table, its columns with type, nullability and doc.
pub fn markdown_columns() -> String {
    let mut out = String::new();
    for s in REGISTRY {
        out.push_str(&format!("### `{}.parquet`\n\n{}\n\n", s.name, s.doc));
        out.push_str("| column | type | null | meaning |\n|---|---|---|---|\n");
        for c in s.columns {
            let null = if c.null.nullable() { "yes" } else { "no" };
            out.push_str(&format!(
                "| `{}` | {} | {} | {} |\n",
                c.name,
                c.ty.name(),
                null,
                c.doc
            ));
        }
        if let Some(e) = s.extra {
            let ty = e.ty.map_or("any", ColumnType::name);
            out.push_str(&format!("| (more) | {ty} | f64, i64: yes | {} |\n", e.doc));
        }
        out.push('\n');
    }
    out
}
