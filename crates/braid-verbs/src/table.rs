//! A named table of rows that a middleware layer hands to whoever runs it
//! ([`crate::Middleware::tables`]): a simulator writes it beside its own results
//! (`<name>.parquet`, braid-sim's `Results::layer_tables`), a real-NIC runner may print or save
//! it. Plain columns of equal length, in a fixed order; the layer owns the schema.

/// One column of a [`LayerTable`].
#[derive(Debug, Clone, PartialEq)]
pub enum LayerColumn {
    U64(Vec<u64>),
    I64(Vec<i64>),
    F64(Vec<f64>),
    Str(Vec<String>),
}

impl LayerColumn {
    pub fn len(&self) -> usize {
        match self {
            LayerColumn::U64(v) => v.len(),
            LayerColumn::I64(v) => v.len(),
            LayerColumn::F64(v) => v.len(),
            LayerColumn::Str(v) => v.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A table a layer measured: `name` (lowercase letters, digits and `_`: it becomes a file name)
/// and named columns of equal length.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LayerTable {
    pub name: String,
    pub columns: Vec<(String, LayerColumn)>,
}

impl LayerTable {
    pub fn new(name: &str) -> Self {
        LayerTable {
            name: name.to_string(),
            columns: Vec::new(),
        }
    }
    /// Adds a column (panics if its length differs from the first column's: a layer's bug).
    pub fn push(&mut self, name: &str, col: LayerColumn) {
        assert!(
            self.columns
                .first()
                .is_none_or(|(_, c)| c.len() == col.len()),
            "layer table {}: column {name} has {} rows, the others {}",
            self.name,
            col.len(),
            self.rows()
        );
        self.columns.push((name.to_string(), col));
    }
    pub fn rows(&self) -> usize {
        self.columns.first().map_or(0, |(_, c)| c.len())
    }
    pub fn get(&self, name: &str) -> Option<&LayerColumn> {
        self.columns.iter().find(|(n, _)| n == name).map(|(_, c)| c)
    }
    /// A name that can become a file name: non-empty, lowercase ASCII letters, digits and `_`.
    pub fn valid_name(name: &str) -> bool {
        !name.is_empty()
            && name.len() <= 64
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_keep_their_order_and_length() {
        let mut t = LayerTable::new("rounds");
        t.push("a", LayerColumn::U64(vec![1, 2]));
        t.push("b", LayerColumn::F64(vec![0.5, 1.5]));
        assert_eq!(t.rows(), 2);
        assert_eq!(t.get("b"), Some(&LayerColumn::F64(vec![0.5, 1.5])));
        assert!(t.get("c").is_none());
        assert!(LayerTable::valid_name("drum_rounds"));
        assert!(!LayerTable::valid_name("../x"));
        assert!(!LayerTable::valid_name(""));
        assert!(!LayerTable::valid_name("Rounds"));
    }

    #[test]
    #[should_panic(expected = "column b has 1 rows")]
    fn a_short_column_is_a_bug() {
        let mut t = LayerTable::new("rounds");
        t.push("a", LayerColumn::U64(vec![1, 2]));
        t.push("b", LayerColumn::U64(vec![1]));
    }
}
