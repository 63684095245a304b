//! Small I/O pieces the server's stream wrappers share: bytes replayed before a stream's own,
//! and a write side that passes straight through to the wrapped stream.

use tokio::io::ReadBuf;

/// Bytes already read from a stream (its probed opening), read again before anything else.
#[derive(Debug, Default)]
pub struct Prefix {
    bytes: Vec<u8>,
    pos: usize,
}

impl Prefix {
    /// `bytes` to replay.
    pub fn new(bytes: Vec<u8>) -> Prefix {
        Prefix { bytes, pos: 0 }
    }

    /// Fills `buf` from what is left to replay; false once it is all read (and freed).
    pub fn read_into(&mut self, buf: &mut ReadBuf<'_>) -> bool {
        if self.pos >= self.bytes.len() {
            return false;
        }
        let rest = &self.bytes[self.pos..];
        let n = rest.len().min(buf.remaining());
        buf.put_slice(&rest[..n]);
        self.pos += n;
        if self.pos == self.bytes.len() {
            *self = Prefix::default();
        }
        true
    }
}

/// `impl AsyncWrite for $ty<S>` passing every call to its field `inner`.
macro_rules! write_through_inner {
    ($ty:ident) => {
        impl<S: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for $ty<S> {
            fn poll_write(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                buf: &[u8],
            ) -> std::task::Poll<std::io::Result<usize>> {
                std::pin::Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
            }

            fn poll_write_vectored(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                bufs: &[std::io::IoSlice<'_>],
            ) -> std::task::Poll<std::io::Result<usize>> {
                std::pin::Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
            }

            fn is_write_vectored(&self) -> bool {
                self.inner.is_write_vectored()
            }

            fn poll_flush(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                std::pin::Pin::new(&mut self.get_mut().inner).poll_flush(cx)
            }

            fn poll_shutdown(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                std::pin::Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
            }
        }
    };
}
pub(crate) use write_through_inner;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefix_is_read_once_in_pieces() {
        let mut prefix = Prefix::new(b"hello".to_vec());
        let mut small = [0u8; 3];
        let mut buf = ReadBuf::new(&mut small);
        assert!(prefix.read_into(&mut buf));
        assert_eq!(buf.filled(), b"hel");
        let mut rest = [0u8; 8];
        let mut buf = ReadBuf::new(&mut rest);
        assert!(prefix.read_into(&mut buf));
        assert_eq!(buf.filled(), b"lo");
        assert!(!prefix.read_into(&mut buf));
    }
}
