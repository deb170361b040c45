//! Hex text of bytes, the one place for it: digests (sha256 in records, logs, ETags), keys
//! in key files and in wpa_supplicant's control protocol.

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[usize::from(b >> 4)] as char);
        s.push(DIGITS[usize::from(b & 0x0f)] as char);
    }
    s
}

/// The bytes of hex text (either case, surrounding whitespace ignored); `None` if it is not
/// an even number of hex digits.
pub(crate) fn unhex(s: &str) -> Option<Vec<u8>> {
    let s = s.trim();
    if s.len() % 2 != 0 {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| s.get(i..i + 2).and_then(|h| u8::from_str_radix(h, 16).ok()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_what_is_not_hex() {
        let all: Vec<u8> = (0..=255).collect();
        assert_eq!(hex(&[0x00, 0x0f, 0xa5, 0xff]), "000fa5ff");
        assert_eq!(unhex(&hex(&all)).unwrap(), all);
        assert_eq!(unhex(" 0A0b\n").unwrap(), vec![0x0a, 0x0b]);
        for bad in ["0", "zz", "0x00", "é0"] {
            assert_eq!(unhex(bad), None, "{bad}");
        }
    }
}
