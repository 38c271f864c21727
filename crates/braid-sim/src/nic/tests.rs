//! Unit tests of the NIC's private helpers.

use super::PsnSet;

#[test]
fn the_sync_audit_set_knows_when_every_earlier_psn_is_in() {
    let mut a = PsnSet::default();
    for p in [0, 1, 3, 4] {
        a.insert(p);
    }
    assert!(
        a.all_below(2) && !a.all_below(3) && !a.all_below(5),
        "PSN 2 is missing"
    );
    a.insert(2);
    assert!(a.all_below(5) && !a.all_below(6));
    a.insert(1);
    assert!(a.all_below(5), "a duplicate changes nothing");
}

#[test]
fn the_pause_mask_matches_the_bit_by_bit_fold() {
    for m in 0u16..256 {
        let paused: [bool; 8] = std::array::from_fn(|i| m >> i & 1 == 1);
        let fold = paused
            .iter()
            .enumerate()
            .fold(0u8, |acc, (i, &x)| acc | ((x as u8) << i));
        assert_eq!(super::tx::pause_mask(&paused), fold, "{paused:?}");
    }
}
