//! The docs' table of files (README.md) and column reference (docs/report.md) are generated from
//! the table registry (`braid_sim::tables`): this test fails when they differ, and with
//! `BRAID_BLESS=1` writes the generated text into them (between the `tables:` markers).

use std::path::PathBuf;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Checks (or with BRAID_BLESS=1 rewrites) the text between `<!-- tables:NAME begin -->` and
/// `<!-- tables:NAME end -->` in `file`.
fn check(file: &str, name: &str, want: &str) {
    let path = repo().join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    let (begin, end) = (
        format!("<!-- tables:{name} begin (generated from crates/braid-sim/src/tables; BRAID_BLESS=1 cargo test -p braid-sim --test tables_docs) -->\n"),
        format!("<!-- tables:{name} end -->"),
    );
    let a = text
        .find(&begin)
        .unwrap_or_else(|| panic!("{file} lacks the marker {begin}"))
        + begin.len();
    let b = a + text[a..]
        .find(&end)
        .unwrap_or_else(|| panic!("{file} lacks the marker {end}"));
    if text[a..b] == *want {
        return;
    }
    if std::env::var_os("BRAID_BLESS").is_some() {
        let new = format!("{}{}{}", &text[..a], want, &text[b..]);
        std::fs::write(&path, new).unwrap();
        return;
    }
    panic!(
        "{file}'s {name} section differs from the table registry; run \
         BRAID_BLESS=1 cargo test -p braid-sim --test tables_docs\n--- in {file}:\n{}\n--- generated:\n{want}",
        &text[a..b]
    );
}

#[test]
fn readmes_table_of_files_is_the_registrys() {
    check("README.md", "files", &braid_sim::tables::markdown_files());
}

#[test]
fn reports_column_reference_is_the_registrys() {
    check(
        "docs/report.md",
        "columns",
        &braid_sim::tables::markdown_columns(),
    );
}

#[test]
fn every_table_is_documented() {
    for s in braid_sim::tables::REGISTRY {
        assert!(!s.doc.is_empty(), "{}", s.name);
        for c in s.columns {
            assert!(!c.doc.is_empty(), "{}.{}", s.name, c.name);
        }
    }
}
