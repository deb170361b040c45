//! The ARM64 branch-address filter of `svc-delta-v2` (docs/updates.md, *Deltas*): the same
//! transform as xz's ARM64 BCJ filter, written from its description. A BL's 26-bit and an
//! ADRP's 21-bit PC-relative immediates become absolute (the target's word or page), so
//! code that only moved leaves its calls and page loads byte for byte the same, and bsdiff
//! sees fewer differences. Each aligned 4-byte word is turned on its own, by its offset in
//! the file: a pure, size-keeping, invertible transform ([`decode`] undoes [`encode`]) that
//! can be applied a chunk at a time ([`Decoder`]).

/// `e_machine` of an AArch64 ELF file.
const EM_AARCH64: u16 = 183;

/// Whether `b` is a 64-bit little-endian ELF file for AArch64: the only files the filter is
/// made for (on others it would only turn data words that look like instructions).
pub(crate) fn is_aarch64_elf(b: &[u8]) -> bool {
    b.len() >= 20
        && b[..4] == *b"\x7fELF"
        && b[4] == 2
        && b[5] == 1
        && u16::from_le_bytes([b[18], b[19]]) == EM_AARCH64
}

/// Makes the branch addresses of `buf`, which starts at offset `start` of its file, absolute.
pub(crate) fn encode(buf: &mut [u8], start: u64) {
    convert(buf, start, true);
}

/// Undoes [`encode`] on the same bytes at the same offset.
pub(crate) fn decode(buf: &mut [u8], start: u64) {
    convert(buf, start, false);
}

fn convert(buf: &mut [u8], start: u64, encoding: bool) {
    for (i, word) in buf.chunks_exact_mut(4).enumerate() {
        // Offsets are taken modulo 2^32, as xz does: a file is far smaller.
        let pc = (start as u32).wrapping_add((i as u32).wrapping_mul(4));
        let ins = u32::from_le_bytes([word[0], word[1], word[2], word[3]]);
        if let Some(out) = convert_word(ins, pc, encoding) {
            word.copy_from_slice(&out.to_le_bytes());
        }
    }
}

/// One instruction word at offset `pc`, or `None` when it is left as it is.
fn convert_word(ins: u32, pc: u32, encoding: bool) -> Option<u32> {
    if ins >> 26 == 0b100101 {
        // BL: imm26 counts words from the instruction; all of it is turned (±128 MiB).
        let delta = if encoding {
            pc >> 2
        } else {
            (pc >> 2).wrapping_neg()
        };
        return Some(0x9400_0000 | (ins.wrapping_add(delta) & 0x03ff_ffff));
    }
    if ins & 0x9f00_0000 == 0x9000_0000 {
        // ADRP: imm21 = immhi (bits 5..24) : immlo (bits 29..31), pages of 4 KiB from the
        // instruction's page.
        let imm = (ins >> 29 & 3) | (ins >> 3 & 0x001f_fffc);
        // Only immediates within ±512 MiB (18-bit signed values, bits 17..20 all alike)
        // are turned; written back sign-extended, so the decoder takes the same branch.
        if (imm.wrapping_add(0x0002_0000)) & 0x001c_0000 != 0 {
            return None;
        }
        let delta = if encoding {
            pc >> 12
        } else {
            (pc >> 12).wrapping_neg()
        };
        let v = imm.wrapping_add(delta);
        let sign = (v & 0x0002_0000).wrapping_neg() & 0x00e0_0000;
        return Some((ins & 0x9000_001f) | (v & 3) << 29 | (v & 0x0003_fffc) << 3 | sign);
    }
    None
}

/// [`decode`] over a stream of bytes given in pieces of any length: each complete word is
/// decoded at its offset, up to 3 bytes wait for the rest of theirs, and a last piece
/// shorter than a word is left as it is (as [`encode`] left it).
#[derive(Default)]
pub(crate) struct Decoder {
    /// Offset of the first byte not yet given out.
    pos: u64,
    pending: [u8; 4],
    have: usize,
}

impl Decoder {
    /// Decodes `data` into `out` (cleared first): what is complete, in order.
    pub(crate) fn feed(&mut self, data: &[u8], out: &mut Vec<u8>) {
        out.clear();
        out.extend_from_slice(&self.pending[..self.have]);
        out.extend_from_slice(data);
        let whole = out.len() / 4 * 4;
        self.have = out.len() - whole;
        self.pending[..self.have].copy_from_slice(&out[whole..]);
        out.truncate(whole);
        decode(out, self.pos);
        self.pos += whole as u64;
    }

    /// The bytes held back at the end (fewer than 4, never turned).
    pub(crate) fn finish(self) -> Vec<u8> {
        self.pending[..self.have].to_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn word(ins: u32, pc: u64, enc: bool) -> u32 {
        let mut b = ins.to_le_bytes();
        if enc {
            encode(&mut b, pc);
        } else {
            decode(&mut b, pc);
        }
        u32::from_le_bytes(b)
    }

    #[test]
    fn a_bl_becomes_its_absolute_word_address() {
        // `bl` at 0x1000 to 0x2000: imm26 = (0x2000 - 0x1000) / 4 = 0x400.
        let bl = 0x9400_0000 | 0x400;
        // Absolute: 0x2000 / 4 = 0x800.
        assert_eq!(word(bl, 0x1000, true), 0x9400_0800);
        assert_eq!(word(0x9400_0800, 0x1000, false), bl);
        // The same call moved 0x40 bytes on (`bl` at 0x1040 to 0x2040) encodes alike
        // when its target moved alike: (0x2040) / 4 = 0x810.
        assert_eq!(word(0x9400_0400, 0x1040, true), 0x9400_0810);
        // A backward call: `bl` at 0x3000 to 0x1000, imm26 = -0x800 (26-bit two's complement).
        let back = 0x9400_0000 | (0x0400_0000 - 0x800);
        assert_eq!(word(back, 0x3000, true), 0x9400_0000 | (0x1000 / 4));
        assert_eq!(word(0x9400_0400, 0x3000, false), back);
    }

    #[test]
    fn an_adrp_becomes_its_absolute_page() {
        // `adrp x3, #+5 pages` at 0x4_0000 (page 0x40): imm21 = 5, immlo = 1 (bits 29..30),
        // immhi = 1 (bits 5..23), rd = 3.
        let adrp = 0x9000_0000 | 1 << 29 | 1 << 5 | 3;
        // Absolute page 0x45: immlo = 0x45 & 3 = 1, immhi = 0x45 >> 2 = 0x11.
        let abs = 0x9000_0000 | 1 << 29 | 0x11 << 5 | 3;
        assert_eq!(word(adrp, 0x4_0000, true), abs);
        assert_eq!(word(abs, 0x4_0000, false), adrp);
        // A page 2 before at page 1: absolute -1, written sign-extended: imm21 = 0x1fffff.
        let back = 0x9000_0000 | 2 << 29 | 0x7ffff << 5 | 7; // imm21 = -2 (0x1ffffe)
        let enc = word(back, 0x1000, true);
        assert_eq!(enc, 0x9000_0000 | 3 << 29 | 0x7ffff << 5 | 7);
        assert_eq!(word(enc, 0x1000, false), back);
        // Beyond ±512 MiB (imm21 = 0x40000 pages = 1 GiB): left as it is.
        let far = 0x9000_0000 | 0x10000 << 5;
        assert_eq!(word(far, 0x4_0000, true), far);
        // Not an instruction of either kind: left as it is.
        assert_eq!(word(0xd503_201f, 0x4_0000, true), 0xd503_201f);
    }

    fn noise(n: usize, seed: u64) -> Vec<u8> {
        let mut x = seed | 1;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }

    #[test]
    fn random_bytes_round_trip_at_any_offset_and_through_the_decoder_in_pieces() {
        for seed in 1..20u64 {
            // Random words: a BL one in 64, an ADRP one in 16 of them, both kinds met.
            let orig = noise(40_003, seed);
            let start = seed * 4;
            let mut enc = orig.clone();
            encode(&mut enc, start);
            assert_ne!(enc, orig);
            let mut dec = enc.clone();
            decode(&mut dec, start);
            assert_eq!(dec, orig, "seed {seed}");
            // In pieces of odd lengths, from offset 0.
            let mut enc0 = orig.clone();
            encode(&mut enc0, 0);
            let mut d = Decoder::default();
            let (mut all, mut out) = (Vec::new(), Vec::new());
            let mut rest = &enc0[..];
            let mut n = seed as usize;
            while !rest.is_empty() {
                let k = n.min(rest.len());
                d.feed(&rest[..k], &mut out);
                all.extend_from_slice(&out);
                rest = &rest[k..];
                n = n * 7 % 1001 + 1;
            }
            all.extend_from_slice(&d.finish());
            assert_eq!(all, orig, "seed {seed} in pieces");
        }
    }

    /// Real aarch64 code: the cross C library the aarch64 `dist` build links with
    /// (gcc-aarch64-linux-gnu, a prerequisite of scripts/build-static.sh aarch64) and
    /// Rust's aarch64 std, whichever are here.
    fn real_aarch64_binaries() -> Vec<Vec<u8>> {
        let mut paths = vec![std::path::PathBuf::from(
            "/usr/aarch64-linux-gnu/lib/libc.so.6",
        )];
        if let Ok(out) = std::process::Command::new("rustc")
            .args(["--print", "sysroot"])
            .output()
        {
            let root = String::from_utf8_lossy(&out.stdout).trim().to_string();
            let lib =
                std::path::Path::new(&root).join("lib/rustlib/aarch64-unknown-linux-musl/lib");
            if let Ok(rd) = std::fs::read_dir(lib) {
                paths.extend(rd.flatten().map(|e| e.path()).filter(|p| {
                    p.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with("libstd-"))
                        && p.extension().is_some_and(|x| x == "so")
                }));
            }
        }
        paths
            .iter()
            .filter_map(|p| std::fs::read(p).ok())
            .filter(|b| is_aarch64_elf(b))
            .collect()
    }

    #[test]
    fn a_real_aarch64_binary_round_trips_and_its_calls_are_turned() {
        let bins = real_aarch64_binaries();
        assert!(
            !bins.is_empty(),
            "no aarch64 ELF here: install gcc-aarch64-linux-gnu (scripts/build-static.sh aarch64 does)"
        );
        for orig in bins {
            let mut enc = orig.clone();
            encode(&mut enc, 0);
            let turned = enc
                .chunks_exact(4)
                .zip(orig.chunks_exact(4))
                .filter(|(a, b)| a != b)
                .count();
            assert!(
                turned > 1000,
                "only {turned} words turned in {} bytes",
                orig.len()
            );
            let mut d = Decoder::default();
            let (mut all, mut out) = (Vec::new(), Vec::new());
            for piece in enc.chunks(65_537) {
                d.feed(piece, &mut out);
                all.extend_from_slice(&out);
            }
            all.extend_from_slice(&d.finish());
            assert!(all == orig, "the decoded file is the original");
        }
    }

    #[test]
    fn elf_machine_is_read() {
        let mut h = vec![0u8; 64];
        h[..4].copy_from_slice(b"\x7fELF");
        h[4] = 2;
        h[5] = 1;
        h[18..20].copy_from_slice(&183u16.to_le_bytes());
        assert!(is_aarch64_elf(&h));
        h[18..20].copy_from_slice(&62u16.to_le_bytes()); // x86_64
        assert!(!is_aarch64_elf(&h));
        assert!(!is_aarch64_elf(b"\x7fELF"));
    }
}
