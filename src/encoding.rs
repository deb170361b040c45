//! Hex and base64 text of bytes, the one place for them: digests (sha256 in records, logs,
//! ETags), keys in key files and in wpa_supplicant's control protocol, signatures, and the
//! two-digit hex escapes of the formats we read (`%2B`, `\\x2b`, keyfile names' `_2b`).

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

/// Whether `s` is a sha256 as hex text: 64 hex digits (either case), nothing else.
pub fn is_sha256_hex(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The bytes of hex text (either case, surrounding whitespace ignored); `None` if it is not
/// an even number of hex digits.
pub(crate) fn unhex(s: &str) -> Option<Vec<u8>> {
    let s = s.trim();
    if s.len() % 2 != 0 {
        return None;
    }
    s.as_bytes().chunks(2).map(hex_byte).collect()
}

/// The byte of exactly two hex digits (either case); `None` for anything else, a sign
/// included (`u8::from_str_radix` alone reads "+f" as 0x0f).
pub(crate) fn hex_byte(two: &[u8]) -> Option<u8> {
    let digit = |c: u8| (c as char).to_digit(16);
    match two {
        [h, l] => Some((digit(*h)? << 4 | digit(*l)?) as u8),
        _ => None,
    }
}

/// Standard base64 (padding optional; the URL-safe `-` and `_` accepted too); no crate for
/// forty lines.
pub fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let val = |c: u8| -> Option<u32> {
        Some(u32::from(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            _ => return None,
        }))
    };
    let s = s.trim_end_matches('=').as_bytes();
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let mut acc = 0u32;
    let mut bits = 0;
    for &c in s {
        acc = (acc << 6) | val(c)?;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

/// Standard base64 with padding (signatures and keys written by `svc-release`, tests).
pub fn base64_encode(data: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(T[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
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

    /// `u8::from_str_radix` takes a sign: "+f" read as 0x0f, so text that is not hex
    /// (a DPP password, a key file line) passed as hex.
    #[test]
    fn base64_round_trips() {
        for d in [&b""[..], b"f", b"fo", b"foo", b"foob", b"fooba", b"foobar"] {
            assert_eq!(base64_decode(&base64_encode(d)).unwrap(), d);
        }
        assert_eq!(base64_encode(b"foobar"), "Zm9vYmFy");
        assert_eq!(base64_encode(b"fo"), "Zm8=");
        assert_eq!(base64_decode("Zm8"), Some(b"fo".to_vec()));
        assert_eq!(base64_decode("Zm8*"), None);
    }

    #[test]
    fn a_sign_is_not_a_hex_digit() {
        for bad in ["+f", "+f+f", "-0", "+0ab"] {
            assert_eq!(unhex(bad), None, "{bad}");
        }
    }
}
