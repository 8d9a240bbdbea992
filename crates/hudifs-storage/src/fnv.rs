//! FNV-1a, the stable hash of names kept on disk (cache files, daemon directories): unlike
//! `DefaultHasher`, it does not change with the Rust version, so a name given by one build is
//! found by the next.

const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const PRIME: u64 = 0x0000_0100_0000_01b3;

/// The 64-bit FNV-1a hash of `bytes`.
pub fn fnv1a(bytes: impl IntoIterator<Item = u8>) -> u64 {
    bytes
        .into_iter()
        .fold(OFFSET, |h, b| (h ^ u64::from(b)).wrapping_mul(PRIME))
}

/// A 128-bit name of `bytes` as 32 hex digits: FNV-1a beside a second lane that starts at
/// `second` and rotates each step. Where a collision must never be served, the caller checks
/// what the name stands for on reuse; the width makes a miss from one rare.
pub fn fnv1a_wide_hex(bytes: impl IntoIterator<Item = u8>, second: u64) -> String {
    let (mut a, mut b) = (OFFSET, second);
    for x in bytes {
        a = (a ^ u64::from(x)).wrapping_mul(PRIME);
        b = (b ^ u64::from(x)).wrapping_mul(PRIME).rotate_left(5);
    }
    format!("{a:016x}{b:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        // The published FNV-1a 64 test vectors.
        assert_eq!(fnv1a(*b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(*b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a(*b"foobar"), 0x8594_4171_f739_67e8);
        let w = fnv1a_wide_hex(*b"foobar", 1);
        assert_eq!(&w[..16], "85944171f73967e8");
        assert_eq!(w.len(), 32);
    }
}
