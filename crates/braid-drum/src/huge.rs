//! Large arrays on transparent huge pages.
//!
//! The tiled two-sided passes ([`crate::tiles`]) read each host's run of a tile m entries apart
//! and the tile's rows from n different places: with 4 KB pages every one of those is another
//! page, and at n = 10⁴, m = 5000 the pages a tile touches (10⁴ per array) are far more than
//! the TLB holds, so nearly every access walks the page table. With 2 MB pages a 400 MB array is
//! 200 pages. Linux gives them to a mapping advised `MADV_HUGEPAGE` (the default THP mode
//! `madvise`) when it is first touched, so the arrays are allocated, advised, then filled.
//! Elsewhere (or if the advice fails) these are ordinary vectors.

/// Below this many bytes an array is left alone (the advice pays only when the TLB overflows).
const MIN_BYTES: usize = 8 << 20;

/// Advise the untouched spare capacity of `v` (whole 4 KB pages of it) to use huge pages.
fn advise<T>(v: &mut Vec<T>) {
    let bytes = v.capacity() * std::mem::size_of::<T>();
    if bytes < MIN_BYTES {
        return;
    }
    #[cfg(target_os = "linux")]
    {
        let start = v.as_mut_ptr() as usize;
        let a = (start + 4095) & !4095;
        let b = (start + bytes) & !4095;
        if b > a {
            // SAFETY: [a, b) lies inside the vector's allocation; the advice changes no contents
            unsafe {
                libc::madvise(a as *mut libc::c_void, b - a, libc::MADV_HUGEPAGE);
            }
        }
    }
}

/// `vec![value; len]` on huge pages.
pub fn filled<T: Copy>(len: usize, value: T) -> Vec<T> {
    let mut v = Vec::with_capacity(len);
    advise(&mut v);
    v.resize(len, value);
    v
}

/// A copy of `src` on huge pages.
pub fn copy<T: Copy>(src: &[T]) -> Vec<T> {
    let mut v = Vec::with_capacity(src.len());
    advise(&mut v);
    v.extend_from_slice(src);
    v
}
