//! The frame observer every h2 connection runs: encoded header bytes each way (as h2load
//! counts them), the server's first SETTINGS (its stream limit), and GOAWAY as it arrives.

use super::conn_state::ConnState;
use super::frame_tap::{flag, kind, Direction, FrameHeader, FrameObserver};
use crate::protocol::wire::WireCounter;
use std::sync::Arc;
use tokio::sync::oneshot;

/// SETTINGS_MAX_CONCURRENT_STREAMS (RFC 9113 §6.5.2).
const SETTINGS_MAX_CONCURRENT_STREAMS: u16 = 0x3;

/// Counts header blocks and watches SETTINGS and GOAWAY on one connection.
#[derive(Debug)]
pub struct ConnAccounting {
    counter: Arc<WireCounter>,
    state: Arc<ConnState>,
    /// Fires once with the server's stream limit (`None`: unlimited) when its SETTINGS arrive.
    first_settings: Option<oneshot::Sender<Option<u32>>>,
}

impl ConnAccounting {
    /// An observer reporting into `counter` and `state`; `first_settings` learns the limit.
    pub fn new(
        counter: Arc<WireCounter>,
        state: Arc<ConnState>,
        first_settings: oneshot::Sender<Option<u32>>,
    ) -> Self {
        ConnAccounting {
            counter,
            state,
            first_settings: Some(first_settings),
        }
    }
}

impl ConnAccounting {
    fn count_block(&self, dir: Direction, bytes: u64) {
        if bytes == 0 {
            return;
        }
        match dir {
            Direction::Sent => self.counter.add_header_sent(bytes),
            Direction::Received => self.counter.add_header_received(bytes),
        }
    }
}

/// The header-block bytes of a HEADERS/CONTINUATION frame, without padding or priority
/// fields (padding needs the payload; see `on_payload`). This matches h2load's `bytes_head`.
fn header_block_len(header: &FrameHeader) -> u64 {
    match header.kind {
        kind::HEADERS => {
            let priority = if header.has(flag::PRIORITY) { 5 } else { 0 };
            u64::from(header.length).saturating_sub(priority)
        }
        kind::CONTINUATION => u64::from(header.length),
        _ => 0,
    }
}

impl FrameObserver for ConnAccounting {
    fn on_header(&mut self, dir: Direction, header: &FrameHeader) -> bool {
        // Padded blocks are counted once their pad length is known.
        let padded_headers = header.kind == kind::HEADERS && header.has(flag::PADDED);
        if !padded_headers {
            self.count_block(dir, header_block_len(header));
        }
        let control = dir == Direction::Received
            && header.stream_id == 0
            && (header.kind == kind::GOAWAY
                || (header.kind == kind::SETTINGS && !header.has(flag::ACK)));
        padded_headers || control
    }

    fn on_payload(&mut self, dir: Direction, header: &FrameHeader, payload: &[u8]) {
        match header.kind {
            kind::HEADERS => {
                // Pad Length byte plus the padding itself are not header block.
                let padding = payload.first().map_or(0, |&n| 1 + u64::from(n));
                self.count_block(dir, header_block_len(header).saturating_sub(padding));
            }
            kind::GOAWAY if payload.len() >= 8 => {
                let last = u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]]);
                let code = u32::from_be_bytes([payload[4], payload[5], payload[6], payload[7]]);
                self.state.goaway_received(last & 0x7fff_ffff, code);
            }
            kind::SETTINGS => {
                if let Some(tx) = self.first_settings.take() {
                    let _ = tx.send(max_concurrent_streams(payload));
                }
            }
            _ => {}
        }
    }
}

/// The MAX_CONCURRENT_STREAMS value in a SETTINGS payload (the last one wins), if any.
fn max_concurrent_streams(payload: &[u8]) -> Option<u32> {
    payload
        .chunks_exact(6)
        .rev()
        .find(|s| u16::from_be_bytes([s[0], s[1]]) == SETTINGS_MAX_CONCURRENT_STREAMS)
        .map(|s| u32::from_be_bytes([s[2], s[3], s[4], s[5]]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_stream_limit_in_settings() {
        let payload = [0, 1, 0, 0, 16, 0, 0, 3, 0, 0, 0, 128, 0, 4, 0, 1, 0, 0];
        assert_eq!(max_concurrent_streams(&payload), Some(128));
        assert_eq!(max_concurrent_streams(&[0, 4, 0, 1, 0, 0]), None);
    }

    #[test]
    fn header_blocks_exclude_priority_fields() {
        let h = |kind, flags, length| FrameHeader {
            length,
            kind,
            flags,
            stream_id: 1,
        };
        assert_eq!(header_block_len(&h(kind::HEADERS, flag::PRIORITY, 30)), 25);
        assert_eq!(header_block_len(&h(kind::CONTINUATION, 0, 30)), 30);
        assert_eq!(header_block_len(&h(kind::DATA, 0, 30)), 0);
    }
}
