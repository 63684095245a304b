//! A frame-level HTTP/2 client: sends HEADERS and RST_STREAM exactly as told (which no library
//! client does on purpose), acks SETTINGS and PING, and records every frame the server sends.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

pub const DATA: u8 = 0x0;
pub const HEADERS: u8 = 0x1;
pub const RST_STREAM: u8 = 0x3;
pub const SETTINGS: u8 = 0x4;
pub const PING: u8 = 0x6;
pub const GOAWAY: u8 = 0x7;

/// One frame from the server.
#[derive(Debug, Clone)]
pub struct Frame {
    pub kind: u8,
    pub flags: u8,
    pub stream: u32,
    pub payload: Vec<u8>,
}

impl Frame {
    /// GOAWAY's (last-stream-id, error code).
    pub fn goaway(&self) -> Option<(u32, u32)> {
        (self.kind == GOAWAY).then(|| {
            let p = &self.payload;
            (
                u32::from_be_bytes([p[0], p[1], p[2], p[3]]) & 0x7fff_ffff,
                u32::from_be_bytes([p[4], p[5], p[6], p[7]]),
            )
        })
    }
}

/// A cleartext (h2c prior knowledge) connection.
pub struct RawH2 {
    stream: TcpStream,
    inbox: Vec<u8>,
}

/// One frame: 9-byte header and payload.
pub fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len();
    let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// A HEADERS frame for `GET path` (static-table and literal fields, no Huffman, no dynamic table).
pub fn get_headers(stream: u32, path: &str) -> Vec<u8> {
    get_headers_with(stream, path, &[(":authority", b"localhost")])
}

/// A HEADERS frame for `GET path` whose block carries `fields` after `:method`, `:scheme` and
/// `:path`, as given (literals without indexing, no Huffman; each name and value under 127 bytes).
pub fn get_headers_with(stream: u32, path: &str, fields: &[(&str, &[u8])]) -> Vec<u8> {
    let mut block = vec![0x82, 0x86]; // :method GET, :scheme http
    block.push(0x04); // :path, literal without indexing
    block.push(path.len() as u8);
    block.extend_from_slice(path.as_bytes());
    for (name, value) in fields {
        block.push(0x00);
        block.push(name.len() as u8);
        block.extend_from_slice(name.as_bytes());
        block.push(value.len() as u8);
        block.extend_from_slice(value);
    }
    frame(HEADERS, 0x4 | 0x1, stream, &block)
}

/// RST_STREAM with CANCEL.
pub fn rst_cancel(stream: u32) -> Vec<u8> {
    frame(RST_STREAM, 0, stream, &8u32.to_be_bytes())
}

impl RawH2 {
    /// Connects and sends the preface and an empty SETTINGS.
    pub fn connect(addr: SocketAddr) -> RawH2 {
        let stream = TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let mut raw = RawH2 {
            stream,
            inbox: Vec::new(),
        };
        let mut hello = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
        hello.extend(frame(SETTINGS, 0, 0, &[]));
        raw.send(&hello);
        raw
    }

    /// Writes bytes; errors (the server closed) are ignored.
    pub fn send(&mut self, bytes: &[u8]) {
        let _ = self.stream.write_all(bytes);
    }

    /// Reads frames until the server closes or `limit` passes, answering SETTINGS and PING.
    pub fn frames_until_closed(&mut self, limit: Duration) -> Vec<Frame> {
        let deadline = Instant::now() + limit;
        let mut frames = Vec::new();
        let mut buf = [0u8; 16384];
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            let wait = left.clamp(Duration::from_millis(1), Duration::from_millis(200));
            let _ = self.stream.set_read_timeout(Some(wait));
            match self.stream.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => self.inbox.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
                Err(_) => break,
            }
            while let Some(f) = self.next_frame() {
                self.answer(&f);
                frames.push(f);
            }
        }
        frames
    }

    fn next_frame(&mut self) -> Option<Frame> {
        if self.inbox.len() < 9 {
            return None;
        }
        let b = &self.inbox;
        let len = (usize::from(b[0]) << 16) | (usize::from(b[1]) << 8) | usize::from(b[2]);
        if b.len() < 9 + len {
            return None;
        }
        let f = Frame {
            kind: b[3],
            flags: b[4],
            stream: u32::from_be_bytes([b[5], b[6], b[7], b[8]]) & 0x7fff_ffff,
            payload: b[9..9 + len].to_vec(),
        };
        self.inbox.drain(..9 + len);
        Some(f)
    }

    fn answer(&mut self, f: &Frame) {
        if f.kind == SETTINGS && f.flags & 1 == 0 {
            self.send(&frame(SETTINGS, 1, 0, &[]));
        }
        if f.kind == PING && f.flags & 1 == 0 {
            let ack = frame(PING, 1, 0, &f.payload);
            self.send(&ack);
        }
    }
}
