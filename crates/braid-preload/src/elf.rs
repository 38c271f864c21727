//! Whether a program can be reached by `LD_PRELOAD` at all: a statically linked executable has
//! no program interpreter (no `PT_INTERP` program header, ELF gABI), so the dynamic linker never
//! runs for it and the preload is never loaded. Read from the file's ELF64 header and program
//! headers (offsets from the System V gABI, `<elf.h>`).

/// What the launcher learns about a program file.
#[derive(Debug, PartialEq, Eq)]
pub enum Linkage {
    /// Has a program interpreter: LD_PRELOAD applies.
    Dynamic,
    /// No interpreter: LD_PRELOAD cannot reach it.
    Static,
    /// Not an ELF64 little-endian file (a script: its interpreter decides).
    NotElf,
}

const PT_INTERP: u32 = 3;

fn u16_at(b: &[u8], o: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(o..o + 2)?.try_into().ok()?))
}
fn u32_at(b: &[u8], o: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(o..o + 4)?.try_into().ok()?))
}
fn u64_at(b: &[u8], o: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(o..o + 8)?.try_into().ok()?))
}

pub fn linkage(b: &[u8]) -> Linkage {
    // e_ident: magic, EI_CLASS 2 (ELF64), EI_DATA 1 (little-endian).
    if b.len() < 64 || &b[..4] != b"\x7fELF" || b[4] != 2 || b[5] != 1 {
        return Linkage::NotElf;
    }
    let (Some(phoff), Some(phentsize), Some(phnum)) =
        (u64_at(b, 0x20), u16_at(b, 0x36), u16_at(b, 0x38))
    else {
        return Linkage::NotElf;
    };
    for i in 0..phnum as usize {
        let o = phoff as usize + i * phentsize as usize;
        if u32_at(b, o) == Some(PT_INTERP) {
            return Linkage::Dynamic;
        }
    }
    Linkage::Static
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal ELF64 header with the given program header types.
    fn elf(types: &[u32]) -> Vec<u8> {
        let mut b = vec![0u8; 64 + 56 * types.len()];
        b[..4].copy_from_slice(b"\x7fELF");
        b[4] = 2;
        b[5] = 1;
        b[0x20..0x28].copy_from_slice(&64u64.to_le_bytes());
        b[0x36..0x38].copy_from_slice(&56u16.to_le_bytes());
        b[0x38..0x3a].copy_from_slice(&(types.len() as u16).to_le_bytes());
        for (i, t) in types.iter().enumerate() {
            b[64 + 56 * i..68 + 56 * i].copy_from_slice(&t.to_le_bytes());
        }
        b
    }

    #[test]
    fn an_interpreter_makes_a_program_dynamic() {
        // PT_PHDR 6, PT_INTERP 3, PT_LOAD 1: a PIE as gcc links it.
        assert_eq!(linkage(&elf(&[6, 3, 1])), Linkage::Dynamic);
        assert_eq!(linkage(&elf(&[1, 1, 4])), Linkage::Static);
        assert_eq!(linkage(b"#!/bin/sh\necho hi\n"), Linkage::NotElf);
    }

    #[test]
    fn the_test_binary_itself_is_dynamic() {
        let me = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        assert_eq!(linkage(&me), Linkage::Dynamic);
    }
}
