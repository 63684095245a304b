//! Reading the files a user names (a request body, a plan, a results file), bounded: a path
//! like /dev/zero or a pipe that never ends is refused at a size, not read until memory runs out.

use std::io::Read;
use std::path::Path;

/// The whole of `path`, or an error (`InvalidData`, "longer than N MiB") past `limit` bytes.
/// Pipes and FIFOs are read as files are (`--data-file <(cmd)`).
pub fn read_bounded(path: &Path, limit: u64) -> std::io::Result<Vec<u8>> {
    read_to_limit(std::fs::File::open(path)?, limit)
}

/// All of `reader` (a file, stdin), or an error (`InvalidData`, "longer than N MiB") past
/// `limit` bytes.
pub fn read_to_limit(reader: impl Read, limit: u64) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    reader
        .take(limit.saturating_add(1))
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("longer than {} MiB", limit >> 20),
        ));
    }
    Ok(bytes)
}

/// [`read_bounded`] as UTF-8 text.
pub fn read_text_bounded(path: &Path, limit: u64) -> std::io::Result<String> {
    utf8(read_bounded(path, limit)?)
}

/// Bytes read as UTF-8 text, or an `InvalidData` error.
pub fn utf8(bytes: Vec<u8>) -> std::io::Result<String> {
    String::from_utf8(bytes)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "not UTF-8 text"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endless_file_is_refused_at_the_limit() {
        let err = read_bounded(Path::new("/dev/zero"), 1 << 20).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidData);
        assert_eq!(err.to_string(), "longer than 1 MiB");
        let dir = std::env::temp_dir().join(format!("httpvs-files-{}", std::process::id()));
        std::fs::write(&dir, b"exactly").unwrap();
        assert_eq!(read_bounded(&dir, 7).unwrap(), b"exactly");
        assert!(read_bounded(&dir, 6).is_err());
        std::fs::write(&dir, [0xff, 0xfe]).unwrap();
        assert_eq!(
            read_text_bounded(&dir, 10).unwrap_err().to_string(),
            "not UTF-8 text"
        );
        let _ = std::fs::remove_file(&dir);
    }
}
