//! QR codes of the DPP bootstrap URI, for the device's label: SVG and PNG. The QR encoding
//! is `qrcodegen`'s; the PNG is written here (1-bit grayscale, stored deflate blocks: a few
//! KiB, no compressor needed).
use qrcodegen::{QrCode, QrCodeEcc};

/// Quiet zone, in modules (the QR standard asks for 4).
const BORDER: i32 = 4;
/// PNG pixels per module.
const SCALE: u32 = 8;

/// The text does not fit in a QR code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TooLong;

impl std::fmt::Display for TooLong {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the text is too long for a QR code")
    }
}

/// `(svg, png)` of `text`.
pub(crate) fn render(text: &str) -> Result<(String, Vec<u8>), TooLong> {
    let qr = QrCode::encode_text(text, QrCodeEcc::Medium).map_err(|_| TooLong)?;
    Ok((svg(&qr), png(&qr)))
}

fn svg(qr: &QrCode) -> String {
    let n = qr.size() + 2 * BORDER;
    let mut path = String::new();
    for y in 0..qr.size() {
        for x in 0..qr.size() {
            if qr.get_module(x, y) {
                path.push_str(&format!("M{},{}h1v1h-1z", x + BORDER, y + BORDER));
            }
        }
    }
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {n} {n}\" shape-rendering=\"crispEdges\">\n<rect width=\"100%\" height=\"100%\" fill=\"#FFFFFF\"/>\n<path d=\"{path}\" fill=\"#000000\"/>\n</svg>\n"
    )
}

fn png(qr: &QrCode) -> Vec<u8> {
    let modules = u32::try_from(qr.size() + 2 * BORDER).unwrap_or(0);
    let side = modules * SCALE;
    let row_bytes = side.div_ceil(8) as usize;
    let mut raw = Vec::with_capacity((row_bytes + 1) * side as usize);
    for py in 0..side {
        raw.push(0); // filter: none
        let mut row = vec![0u8; row_bytes];
        for px in 0..side {
            let (x, y) = ((px / SCALE) as i32 - BORDER, (py / SCALE) as i32 - BORDER);
            // get_module is false outside the symbol: the quiet zone is white.
            if !qr.get_module(x, y) {
                row[(px / 8) as usize] |= 0x80 >> (px % 8);
            }
        }
        raw.extend_from_slice(&row);
    }
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut ihdr = Vec::new();
    ihdr.extend_from_slice(&side.to_be_bytes());
    ihdr.extend_from_slice(&side.to_be_bytes());
    ihdr.extend_from_slice(&[1, 0, 0, 0, 0]); // 1 bit, grayscale, deflate, filter 0, no interlace
    chunk(&mut out, b"IHDR", &ihdr);
    chunk(&mut out, b"IDAT", &zlib_stored(&raw));
    chunk(&mut out, b"IEND", &[]);
    out
}

fn chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    out.extend_from_slice(&u32::try_from(data.len()).unwrap_or(0).to_be_bytes());
    let start = out.len();
    out.extend_from_slice(kind);
    out.extend_from_slice(data);
    let crc = crc32(&out[start..]);
    out.extend_from_slice(&crc.to_be_bytes());
}

fn zlib_stored(data: &[u8]) -> Vec<u8> {
    let mut z = vec![0x78, 0x01];
    let mut blocks = data.chunks(65535).peekable();
    if blocks.peek().is_none() {
        z.extend_from_slice(&[1, 0, 0, 0xff, 0xff]);
    }
    while let Some(b) = blocks.next() {
        z.push(u8::from(blocks.peek().is_none()));
        let len = u16::try_from(b.len()).unwrap_or(0);
        z.extend_from_slice(&len.to_le_bytes());
        z.extend_from_slice(&(!len).to_le_bytes());
        z.extend_from_slice(b);
    }
    let (mut a, mut b) = (1u32, 0u32);
    for &x in data {
        a = (a + u32::from(x)) % 65521;
        b = (b + a) % 65521;
    }
    z.extend_from_slice(&((b << 16) | a).to_be_bytes());
    z
}

fn crc32(data: &[u8]) -> u32 {
    let mut c = 0xffff_ffffu32;
    for &x in data {
        c ^= u32::from(x);
        for _ in 0..8 {
            c = if c & 1 != 0 {
                0xedb8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
        }
    }
    !c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksums_match_their_reference_values() {
        assert_eq!(crc32(b"123456789"), 0xcbf4_3926);
        assert_eq!(crc32(b"IEND"), 0xae42_6082);
        let z = zlib_stored(b"Wikipedia");
        assert_eq!(&z[z.len() - 4..], &0x11e6_0398u32.to_be_bytes());
    }

    #[test]
    fn a_dpp_uri_renders_as_svg_and_png() {
        let uri = "DPP:C:81/1;M:020000000100;V:2;K:MDkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDIgADURzxmttZoIRIPWGoQMV00XHWCAQIhXruVWOz0NjlkIA=;;";
        let (svg, png) = render(uri).unwrap();
        assert!(svg.starts_with("<?xml") && svg.contains("<path d=\"M"));
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        assert_eq!(&png[12..16], b"IHDR");
        let side = u32::from_be_bytes([png[16], png[17], png[18], png[19]]);
        assert_eq!(side % SCALE, 0);
        assert!(png.ends_with(&[0, 0, 0, 0, b'I', b'E', b'N', b'D', 0xae, 0x42, 0x60, 0x82]));
        assert!(png.len() < 64 * 1024, "{}", png.len());
        assert!(render(&"x".repeat(5000)).is_err());
    }
}
