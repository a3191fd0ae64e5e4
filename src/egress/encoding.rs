//! A response's content codings, read from every `Content-Encoding` line and every coding
//! in each (a sender may stack them: `identity` then `gzip` on two lines, or `gzip, gzip`),
//! and undone one step at a time, last applied first, each step within [`Bounds`] (a
//! decompression bomb stops at the bytes allowed, before they are allocated).

use std::io::Read as _;

use super::mask::{Bounds, Overflow};

/// Bytes read from a decoder at a time.
const READ: usize = 64 << 10;

/// One content coding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Coding {
    /// Nothing done.
    Identity,
    /// `gzip` or `x-gzip`.
    Gzip,
    /// `deflate` (zlib).
    Deflate,
    /// One the host does not decode (`br`, `zstd`, `compress`, anything else).
    Other(String),
}

/// Why a step did not decode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// A coding the host does not decode, named.
    Unsupported(String),
    /// The bytes are not what the coding says.
    Corrupt(String),
    /// A bound passed.
    Bound(Overflow),
}

impl From<Overflow> for DecodeError {
    fn from(o: Overflow) -> Self {
        DecodeError::Bound(o)
    }
}

/// Whether `name` is `Content-Encoding`.
pub fn is_content_encoding(name: &str) -> bool {
    name.eq_ignore_ascii_case("content-encoding")
}

/// Every coding of a response with `headers`, in the order they were applied.
pub fn codings(headers: &[(String, Vec<u8>)]) -> Vec<Coding> {
    headers
        .iter()
        .filter(|(k, _)| is_content_encoding(k))
        .flat_map(|(_, v)| v.split(|b| *b == b','))
        .map(|c| String::from_utf8_lossy(c).trim().to_ascii_lowercase())
        .filter(|c| !c.is_empty())
        .map(|c| match c.as_str() {
            "identity" => Coding::Identity,
            "gzip" | "x-gzip" => Coding::Gzip,
            "deflate" => Coding::Deflate,
            _ => Coding::Other(c),
        })
        .collect()
}

/// `input` with `coding` undone, within `bounds`.
pub fn decode(coding: &Coding, input: &[u8], bounds: &mut Bounds) -> Result<Vec<u8>, DecodeError> {
    let mut reader: Box<dyn std::io::Read + '_> = match coding {
        Coding::Identity => return Ok(input.to_vec()),
        Coding::Gzip => Box::new(flate2::read::MultiGzDecoder::new(input)),
        Coding::Deflate => Box::new(flate2::read::ZlibDecoder::new(input)),
        Coding::Other(name) => return Err(DecodeError::Unsupported(name.clone())),
    };
    let mut out = Vec::new();
    let mut buf = vec![0; READ];
    loop {
        let n = reader
            .read(&mut buf)
            .map_err(|e| DecodeError::Corrupt(e.to_string()))?;
        if n == 0 {
            return Ok(out);
        }
        bounds.push(&mut out, &buf[..n])?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;
    use std::time::{Duration, Instant};

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        e.write_all(bytes).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn every_line_and_every_coding_is_read_in_order() {
        let h = |k: &str, v: &str| (k.to_string(), v.as_bytes().to_vec());
        let headers = vec![
            h("Content-Encoding", "identity"),
            h("x-other", "gzip"),
            h("content-encoding", " GZIP , x-gzip,,deflate"),
            h("Content-Encoding", "br"),
        ];
        assert_eq!(
            codings(&headers),
            vec![
                Coding::Identity,
                Coding::Gzip,
                Coding::Gzip,
                Coding::Deflate,
                Coding::Other("br".into())
            ]
        );
    }

    #[test]
    fn a_bomb_stops_at_its_bound_before_it_is_allocated() {
        let bomb = gzip(&vec![0; 64 << 20]);
        let mut granted = 0u64;
        let mut room = |n| {
            granted += n;
            true
        };
        let mut b = Bounds::new(1 << 20, Instant::now() + Duration::from_secs(60), &mut room);
        assert_eq!(
            decode(&Coding::Gzip, &bomb, &mut b),
            Err(DecodeError::Bound(Overflow::TooLarge))
        );
        assert!(granted <= 1 << 20, "{granted}");
        let mut room = |_| true;
        let mut b = Bounds::new(1 << 20, Instant::now() + Duration::from_secs(60), &mut room);
        assert_eq!(decode(&Coding::Gzip, &gzip(b"hi"), &mut b).unwrap(), b"hi");
        assert!(matches!(
            decode(&Coding::Deflate, b"not zlib", &mut b),
            Err(DecodeError::Corrupt(_))
        ));
    }
}
