//! Reading the files a scenario names (CDFs, HPCC topology and flow files): regular files only,
//! of a bounded size, UTF-8 with an optional byte-order mark.
//!
//! A device (`/dev/zero`, `/dev/urandom`) named as a CDF or topology would be read until memory
//! ran out, and a FIFO named as a flow file would block the run (and `braid validate`) forever:
//! both are refused from the file's metadata before it is opened. A regular file larger than
//! the limit is refused from its size; one whose size the kernel does not report (`/proc`) is
//! read only up to the limit. The Python front end's readers (`python/braid/inputs.py`) apply
//! the same rules; docs/scenario.md ("Input files") lists the limits.
//!
//! No message quotes the file's content: only its path, which the user wrote.

use std::io::Read;
use std::path::Path;

const MIB: u64 = 1 << 20;
/// CDF files: real ones (web-search, data-mining, Google RPC) are a few dozen lines.
pub const CDF_LIMIT: u64 = 16 * MIB;
/// HPCC topology files: a k = 48 fat-tree (27,648 hosts) is a few MB.
pub const TOPOLOGY_LIMIT: u64 = 256 * MIB;
/// HPCC flow files: tens of millions of flows at ~40 bytes a line.
pub const FLOWS_LIMIT: u64 = 4096 * MIB;

fn size(n: u64) -> String {
    if n >= MIB {
        format!("{} MiB", n / MIB)
    } else {
        format!("{n} bytes")
    }
}

/// The text of the file at `path`, or one message naming the path and what is wrong with it.
pub fn read_text(path: &Path, limit: u64) -> Result<String, String> {
    let shown = path.display();
    // metadata() follows links: a link to a FIFO is a FIFO.
    let meta = std::fs::metadata(path).map_err(|e| format!("{shown}: cannot read: {e}"))?;
    if meta.is_dir() {
        return Err(format!("{shown}: is a folder, expected a file"));
    }
    if !meta.is_file() {
        return Err(format!(
            "{shown}: is {}, not a regular file (braid reads inputs only from regular files)",
            kind(&meta)
        ));
    }
    if meta.len() > limit {
        return Err(format!(
            "{shown}: is {}, more than the {} braid reads from this kind of input file",
            size(meta.len()),
            size(limit)
        ));
    }
    let file = std::fs::File::open(path).map_err(|e| format!("{shown}: cannot read: {e}"))?;
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("{shown}: cannot read: {e}"))?;
    if bytes.len() as u64 > limit {
        return Err(format!(
            "{shown}: is more than the {} braid reads from this kind of input file",
            size(limit)
        ));
    }
    // A byte-order mark (Windows editors write one) is not part of the data.
    let body = bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(&bytes);
    match std::str::from_utf8(body) {
        Ok(t) => Ok(t.to_string()),
        Err(e) => Err(format!(
            "{shown}: is not UTF-8 text (byte {})",
            e.valid_up_to() + (bytes.len() - body.len())
        )),
    }
}

/// A token of an input file as an error message may show it: quoted when it is number-like
/// (digits, sign, point, exponent; at most 24 characters), otherwise only described, so that a
/// file that is not what was expected (`/etc/passwd` named as a CDF) is not echoed back.
pub fn shown(token: &str) -> String {
    let numeric = !token.is_empty()
        && token.len() <= 24
        && token
            .chars()
            .all(|c| c.is_ascii_digit() || matches!(c, '+' | '-' | '.' | 'e' | 'E'));
    if numeric {
        format!("{token:?}")
    } else {
        format!(
            "text that is not a number ({} characters)",
            token.chars().count()
        )
    }
}

#[cfg(unix)]
fn kind(meta: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() || t.is_block_device() {
        "a device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "a special file"
    }
}

#[cfg(not(unix))]
fn kind(_meta: &std::fs::Metadata) -> &'static str {
    "a special file"
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("braid-input-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[cfg(unix)]
    #[test]
    fn a_device_is_refused_without_reading_it() {
        let e = read_text(Path::new("/dev/zero"), CDF_LIMIT).unwrap_err();
        assert!(
            e.contains("/dev/zero: is a device, not a regular file"),
            "{e}"
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_is_refused_without_opening_it() {
        let d = tmp("fifo");
        let p = d.join("flows.txt");
        let _ = std::fs::remove_file(&p);
        let ok = std::process::Command::new("mkfifo")
            .arg(&p)
            .status()
            .map(|s| s.success());
        if !matches!(ok, Ok(true)) {
            eprintln!("mkfifo unavailable; skipped");
            return;
        }
        // Opening a FIFO with no writer blocks: the check must come first (this test would hang).
        let e = read_text(&p, FLOWS_LIMIT).unwrap_err();
        assert!(e.contains("is a FIFO, not a regular file"), "{e}");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_file_over_the_limit_is_refused_from_its_size() {
        let d = tmp("big");
        let p = d.join("cdf.txt");
        std::fs::write(&p, vec![b'1'; 2048]).unwrap();
        let e = read_text(&p, 1024).unwrap_err();
        assert!(e.contains("is 2048 bytes, more than the 1024 bytes"), "{e}");
        assert!(read_text(&p, 4096).is_ok());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_file_of_unreported_size_is_read_only_up_to_the_limit() {
        // /proc files say 0 bytes; this one is longer than 16 bytes.
        let e = read_text(Path::new("/proc/self/status"), 16).unwrap_err();
        assert!(e.contains("more than the 16 bytes"), "{e}");
    }

    #[test]
    fn only_number_like_tokens_are_quoted() {
        assert_eq!(shown("1.5e3"), "\"1.5e3\"");
        assert_eq!(
            shown("root:x:0:0:root:/root:/bin/bash"),
            "text that is not a number (31 characters)"
        );
    }

    #[test]
    fn a_byte_order_mark_is_dropped_and_bad_utf8_named() {
        let d = tmp("bom");
        let p = d.join("cdf.txt");
        std::fs::write(&p, b"\xef\xbb\xbf100 0\n200 100\n").unwrap();
        assert_eq!(read_text(&p, CDF_LIMIT).unwrap(), "100 0\n200 100\n");
        std::fs::write(&p, b"100 0\n\xff\n").unwrap();
        let e = read_text(&p, CDF_LIMIT).unwrap_err();
        assert!(e.ends_with("is not UTF-8 text (byte 6)"), "{e}");
        std::fs::remove_dir_all(&d).unwrap();
    }
}
