//! The simulator's public face: build a run from a validated scenario, advance it in slices, read
//! its results as plain column tables. Front ends (the Python package) use only this module.

use std::collections::BTreeMap;

/// A column of a results table.
#[derive(Debug, Clone, PartialEq)]
pub enum Column {
    U64(Vec<u64>),
    I64(Vec<i64>),
    F64(Vec<f64>),
    Str(Vec<String>),
}

/// A column's value type, as the table registry (`crate::tables`) declares it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnType {
    U64,
    I64,
    F64,
    Str,
}

impl ColumnType {
    /// The name the docs and the Python side use (Arrow's).
    pub fn name(self) -> &'static str {
        match self {
            ColumnType::U64 => "u64",
            ColumnType::I64 => "i64",
            ColumnType::F64 => "f64",
            ColumnType::Str => "str",
        }
    }
}

impl Column {
    pub fn len(&self) -> usize {
        match self {
            Column::U64(v) => v.len(),
            Column::I64(v) => v.len(),
            Column::F64(v) => v.len(),
            Column::Str(v) => v.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    pub fn ty(&self) -> ColumnType {
        match self {
            Column::U64(_) => ColumnType::U64,
            Column::I64(_) => ColumnType::I64,
            Column::F64(_) => ColumnType::F64,
            Column::Str(_) => ColumnType::Str,
        }
    }
}

/// A table: named columns of equal length, in a fixed order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Table {
    pub columns: Vec<(String, Column)>,
    /// Which rows of a nullable column hold a value (true) and which are null, by column name;
    /// a column absent here has no nulls. Under a null the column keeps its producer's
    /// placeholder (NaN, -1, ...), which is not data: front ends see a null there
    /// (`crate::tables::Null` says which placeholder each column uses).
    pub valid: BTreeMap<String, Vec<bool>>,
}

impl Table {
    pub fn push(&mut self, name: &str, col: Column) {
        debug_assert!(self
            .columns
            .first()
            .is_none_or(|(_, c)| c.len() == col.len()));
        self.columns.push((name.to_string(), col));
    }
    pub fn rows(&self) -> usize {
        self.columns.first().map_or(0, |(_, c)| c.len())
    }
    pub fn get(&self, name: &str) -> Option<&Column> {
        self.columns.iter().find(|(n, _)| n == name).map(|(_, c)| c)
    }
    /// Row `row` of column `name` is null.
    pub fn is_null(&self, name: &str, row: usize) -> bool {
        self.valid.get(name).is_some_and(|v| !v[row])
    }
    /// The validity of column `name` (None: it has no nulls).
    pub fn validity(&self, name: &str) -> Option<&[bool]> {
        self.valid.get(name).map(Vec::as_slice)
    }
    /// Marks column `name`'s nulls: the rows where `valid` is false. A column with no null
    /// keeps no mask.
    pub fn set_validity(&mut self, name: &str, valid: Vec<bool>) {
        debug_assert_eq!(valid.len(), self.rows());
        if valid.iter().all(|&v| v) {
            self.valid.remove(name);
        } else {
            self.valid.insert(name.to_string(), valid);
        }
    }
}

/// The run's tables by name, in a fixed order: the registry's (`crate::tables::REGISTRY`, in
/// its order), then those the middleware layers handed over (by name).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tables(Vec<(String, Table)>);

impl Tables {
    pub fn get(&self, name: &str) -> Option<&Table> {
        self.0.iter().find(|(n, _)| n == name).map(|(_, t)| t)
    }
    pub fn get_mut(&mut self, name: &str) -> Option<&mut Table> {
        self.0.iter_mut().find(|(n, _)| n == name).map(|(_, t)| t)
    }
    /// Adds `t` as `name`, replacing a table of that name in its place.
    pub fn insert(&mut self, name: &str, t: Table) {
        match self.get_mut(name) {
            Some(old) => *old = t,
            None => self.0.push((name.to_string(), t)),
        }
    }
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Table)> {
        self.0.iter().map(|(n, t)| (n.as_str(), t))
    }
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(n, _)| n.as_str())
    }
    pub fn len(&self) -> usize {
        self.0.len()
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl std::ops::Index<&str> for Tables {
    type Output = Table;
    fn index(&self, name: &str) -> &Table {
        self.get(name)
            .unwrap_or_else(|| panic!("no table {name:?} in the results"))
    }
}

impl std::ops::IndexMut<&str> for Tables {
    fn index_mut(&mut self, name: &str) -> &mut Table {
        self.get_mut(name)
            .unwrap_or_else(|| panic!("no table {name:?} in the results"))
    }
}

/// Everything a run measured.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Results {
    /// Every table of the run, by name: the registry's own (`crate::tables::REGISTRY`, which
    /// declares each one's columns, types, nulls and docs: `flows`, `messages`, ...), then the
    /// tables the middleware layers handed over (`Middleware::tables`, e.g. `drum_rounds`, each
    /// with `host` and `tenant` first: `tenants::layer_tables`). Each is written as
    /// `<name>.parquet`.
    pub tables: Tables,
    /// `measure.pcap`: the packet capture as a pcap file (empty when nothing was captured).
    pub pcap: Vec<u8>,
    /// Totals: drops, pfc_pauses, ecn_marks, cnps, retransmissions, ...
    pub counters: BTreeMap<String, u64>,
    /// Headline figures for summaries (e.g. total goodput, mean FCT, Jain index).
    pub headline: BTreeMap<String, f64>,
    /// Run statistics: events, packets, sim_time_ps, ...
    pub stats: BTreeMap<String, f64>,
}

impl Results {
    /// The tables the middleware layers handed over: those the registry does not declare.
    pub fn layer_tables(&self) -> impl Iterator<Item = (&str, &Table)> {
        self.tables
            .iter()
            .filter(|(n, _)| crate::tables::spec(n).is_none())
    }
}

/// A scenario the front end handed us was not valid. `path` is the dotted key path
/// (e.g. `topology.host_link.rate`), `message` says what was expected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScenarioError {
    pub path: String,
    pub message: String,
}

impl std::fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.path.is_empty() {
            write!(f, "{}", self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

impl std::error::Error for ScenarioError {}

/// A config table's refusal of one of its keys: the key path relative to the table (`cpu.post_ns`
/// in `[host]`) and why, in the user's terms. Each config type's `validate` returns it; the
/// scenario, which knows where the table sits, turns it into a [`ScenarioError`] with
/// [`ConfigError::under`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub key: String,
    pub message: String,
}

impl ConfigError {
    pub fn new(key: impl Into<String>, message: impl Into<String>) -> Self {
        ConfigError {
            key: key.into(),
            message: message.into(),
        }
    }

    /// The error of a sub-table, as its parent table sees it (`cpu` + `post_ns` = `cpu.post_ns`).
    pub fn nested(self, sub: &str) -> ConfigError {
        let e = self.under(sub);
        ConfigError {
            key: e.path,
            message: e.message,
        }
    }

    /// The error with its key placed under `table` (`host` + `cpu.post_ns` = `host.cpu.post_ns`).
    pub fn under(self, table: &str) -> ScenarioError {
        let path = match (table.is_empty(), self.key.is_empty()) {
            (true, _) => self.key,
            (false, true) => table.to_string(),
            (false, false) if self.key.starts_with('[') => format!("{table}{}", self.key),
            (false, false) => format!("{table}.{}", self.key),
        };
        ScenarioError {
            path,
            message: self.message,
        }
    }
}
