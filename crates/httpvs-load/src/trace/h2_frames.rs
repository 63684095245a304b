//! HTTP/2 frames of one traced connection: the load generator's own frame tap
//! (`protocol::h2::frame_tap`) follows the plaintext both ways, and this observer turns each
//! frame into a [`TraceEvent`](super::event::TraceEvent), decoding header blocks with HPACK.

use super::event::{Direction, EventKind, H2Detail, H2Frame, HeaderBlock, Priority};
use super::hpack::{pseudo_first, BlockDecoder};
use super::recorder::Recorder;
use crate::protocol::h2::frame_tap::{self, flag, kind, FrameHeader, FrameObserver, FrameTap};
use crate::protocol::wire::WireTap;

/// The plaintext tap of a traced h2 connection.
#[derive(Debug)]
pub struct H2Wire {
    sent: FrameTap,
    received: FrameTap,
    frames: FrameDecoder,
    /// The server's close was seen (and shown).
    ended: bool,
}

impl H2Wire {
    /// A tap recording into `recorder`; `show_body` keeps DATA payloads as text.
    pub fn new(recorder: Recorder, show_body: bool) -> H2Wire {
        H2Wire {
            sent: FrameTap::new(frame_tap::Direction::Sent),
            received: FrameTap::new(frame_tap::Direction::Received),
            frames: FrameDecoder {
                recorder,
                show_body,
                sent: BlockState::default(),
                received: BlockState::default(),
            },
            ended: false,
        }
    }
}

impl WireTap for H2Wire {
    fn sent(&mut self, bytes: &[u8]) {
        self.sent.feed(bytes, &mut self.frames);
    }

    fn received(&mut self, bytes: &[u8]) {
        self.received.feed(bytes, &mut self.frames);
    }

    /// The server's FIN (or TLS close_notify): shown, with a frame it cut short.
    fn closed(&mut self) {
        if self.ended {
            return;
        }
        self.note_cut_off();
        self.ended = true;
        let recorder = &self.frames.recorder;
        recorder.record(Direction::Recv, EventKind::PeerClosed);
    }
}

impl H2Wire {
    /// A note for each direction that stopped inside a frame: that frame was never shown.
    fn note_cut_off(&self) {
        for (tap, way) in [(&self.sent, "sent"), (&self.received, "received")] {
            let Some((header, came)) = tap.cut_off() else {
                continue;
            };
            let text = match header {
                Some(h) => format!(
                    "the connection ended inside a {} frame {way} on stream {}: {came} of its \
                     {} payload bytes came, so it is not shown",
                    super::names::h2_frame(h.kind),
                    h.stream_id,
                    h.length
                ),
                None => format!(
                    "the connection ended inside a frame header {way}: {came} of its 9 bytes came"
                ),
            };
            self.frames
                .recorder
                .record(Direction::Local, EventKind::Note { text });
        }
    }
}

impl Drop for H2Wire {
    /// A connection that ended without a FIN (a reset, our own close) may still have cut a
    /// frame short.
    fn drop(&mut self) {
        if !self.ended {
            self.note_cut_off();
        }
    }
}

/// One direction's header-block state: HPACK table and a block split over CONTINUATION.
#[derive(Debug, Default)]
struct BlockState {
    hpack: BlockDecoder,
    pending: Option<PendingBlock>,
}

/// A header block whose END_HEADERS has not arrived yet.
#[derive(Debug)]
struct PendingBlock {
    bytes: Vec<u8>,
    priority: Option<Priority>,
    promised_stream: Option<u32>,
}

#[derive(Debug)]
struct FrameDecoder {
    recorder: Recorder,
    show_body: bool,
    sent: BlockState,
    received: BlockState,
}

fn event_dir(dir: frame_tap::Direction) -> Direction {
    match dir {
        frame_tap::Direction::Sent => Direction::Send,
        frame_tap::Direction::Received => Direction::Recv,
    }
}

impl FrameObserver for FrameDecoder {
    fn on_header(&mut self, _dir: frame_tap::Direction, header: &FrameHeader) -> bool {
        header.kind != kind::DATA || self.show_body || header.has(flag::PADDED)
    }

    /// A DATA frame is shown once all of it came: one the connection cut short is not.
    fn on_skipped(&mut self, dir: frame_tap::Direction, header: &FrameHeader) {
        let detail = H2Detail::Data {
            data_len: u64::from(header.length),
            text: None,
        };
        self.emit(dir, header, detail);
    }

    fn on_payload(&mut self, dir: frame_tap::Direction, header: &FrameHeader, payload: &[u8]) {
        let detail = match header.kind {
            kind::DATA => self.data(header, payload),
            kind::HEADERS | kind::PUSH_PROMISE | kind::CONTINUATION => {
                self.header_block(dir, header, payload)
            }
            kind::PRIORITY => priority(payload).map_or(H2Detail::Malformed, H2Detail::Priority),
            kind::RST_STREAM => {
                u32_at(payload, 0).map_or(H2Detail::Malformed, |code| H2Detail::RstStream { code })
            }
            // Whole 6-byte entries, none in an ACK (RFC 9113 §6.5).
            kind::SETTINGS
                if !payload.len().is_multiple_of(6)
                    || header.has(flag::ACK) && !payload.is_empty() =>
            {
                H2Detail::Malformed
            }
            kind::SETTINGS => H2Detail::Settings(
                payload
                    .chunks_exact(6)
                    .map(|s| (u16::from_be_bytes([s[0], s[1]]), be32(&s[2..6])))
                    .collect(),
            ),
            kind::PING => payload
                .try_into()
                .map_or(H2Detail::Malformed, H2Detail::Ping),
            kind::GOAWAY => match (u32_at(payload, 0), u32_at(payload, 4)) {
                (Some(last), Some(code)) => H2Detail::Goaway {
                    last_stream: last & 0x7fff_ffff,
                    code,
                    debug: String::from_utf8_lossy(&payload[8..]).into_owned(),
                },
                _ => H2Detail::Malformed,
            },
            kind::WINDOW_UPDATE => u32_at(payload, 0).map_or(H2Detail::Malformed, |n| {
                H2Detail::WindowUpdate(n & 0x7fff_ffff)
            }),
            _ => H2Detail::None,
        };
        self.emit(dir, header, detail);
    }
}

impl FrameDecoder {
    fn emit(&self, dir: frame_tap::Direction, header: &FrameHeader, detail: H2Detail) {
        let frame = H2Frame {
            frame_type: header.kind,
            flags: header.flags,
            stream: header.stream_id,
            length: header.length,
            detail,
        };
        self.recorder
            .record(event_dir(dir), EventKind::H2Frame(frame));
    }

    fn data(&self, header: &FrameHeader, payload: &[u8]) -> H2Detail {
        let Some((data, _)) = unpad(header, payload) else {
            return H2Detail::Malformed;
        };
        let shown = self.show_body.then(|| self.recorder.body_room(data.len()));
        H2Detail::Data {
            data_len: data.len() as u64,
            text: shown
                .filter(|room| *room > 0 || data.is_empty())
                .map(|room| String::from_utf8_lossy(&data[..room]).into_owned()),
        }
    }

    /// Collects a header block fragment; the frame that ends the block carries the decoding.
    fn header_block(
        &mut self,
        dir: frame_tap::Direction,
        header: &FrameHeader,
        payload: &[u8],
    ) -> H2Detail {
        let state = match dir {
            frame_tap::Direction::Sent => &mut self.sent,
            frame_tap::Direction::Received => &mut self.received,
        };
        let fragment = match header.kind {
            kind::CONTINUATION => match state.pending.as_mut() {
                Some(pending) => {
                    pending.bytes.extend_from_slice(payload);
                    payload.len()
                }
                None => return H2Detail::Malformed,
            },
            _ => {
                let Some((mut rest, _)) = unpad(header, payload) else {
                    return H2Detail::Malformed;
                };
                let mut pending = PendingBlock {
                    bytes: Vec::new(),
                    priority: None,
                    promised_stream: None,
                };
                if header.kind == kind::HEADERS && header.has(flag::PRIORITY) {
                    let Some(p) = priority(rest) else {
                        return H2Detail::Malformed;
                    };
                    pending.priority = Some(p);
                    rest = &rest[5..];
                }
                if header.kind == kind::PUSH_PROMISE {
                    let Some(id) = u32_at(rest, 0) else {
                        return H2Detail::Malformed;
                    };
                    pending.promised_stream = Some(id & 0x7fff_ffff);
                    rest = &rest[4..];
                }
                pending.bytes.extend_from_slice(rest);
                let len = rest.len();
                state.pending = Some(pending);
                len
            }
        };
        if !header.has(flag::END_HEADERS) {
            return H2Detail::HeaderFragment {
                fragment: fragment as u64,
            };
        }
        let Some(block) = state.pending.take() else {
            return H2Detail::Malformed;
        };
        let encoded = block.bytes.len() as u64;
        let (fields, decoded, error) = match state.hpack.decode(&block.bytes) {
            Ok(d) => (pseudo_first(d.fields), d.decoded_bytes, None),
            Err(why) => (Vec::new(), 0, Some(why)),
        };
        H2Detail::Headers(HeaderBlock {
            fields,
            encoded,
            decoded,
            priority: block.priority,
            promised_stream: block.promised_stream,
            error,
        })
    }
}

/// The payload without its Pad Length byte and padding (when PADDED), and the pad length.
fn unpad<'a>(header: &FrameHeader, payload: &'a [u8]) -> Option<(&'a [u8], usize)> {
    if !header.has(flag::PADDED) {
        return Some((payload, 0));
    }
    let (&pad, rest) = payload.split_first()?;
    let keep = rest.len().checked_sub(usize::from(pad))?;
    Some((&rest[..keep], usize::from(pad)))
}

fn priority(bytes: &[u8]) -> Option<Priority> {
    let dep = u32_at(bytes, 0)?;
    Some(Priority {
        exclusive: dep & 0x8000_0000 != 0,
        depends_on: dep & 0x7fff_ffff,
        weight: *bytes.get(4)?,
    })
}

fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    bytes.get(at..at + 4).map(be32)
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::event::TraceEvent;

    fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let len = (payload.len() as u32).to_be_bytes();
        let mut out = vec![len[1], len[2], len[3], kind, flags];
        out.extend_from_slice(&stream.to_be_bytes());
        out.extend_from_slice(payload);
        out
    }

    fn frames_of(events: &[TraceEvent]) -> Vec<H2Frame> {
        events
            .iter()
            .filter_map(|e| match &e.kind {
                EventKind::H2Frame(f) => Some(f.clone()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn decodes_settings_goaway_and_a_block_split_over_continuation() {
        let recorder = Recorder::start_now();
        let mut wire = H2Wire::new(recorder.clone(), false);
        let mut bytes = frame(kind::SETTINGS, 0, 0, &[0, 3, 0, 0, 0, 100]);
        // RFC 7541 C.4.1, split after 5 bytes, padded by 2 in the HEADERS frame.
        let block = [
            0x82, 0x86, 0x84, 0x41, 0x8c, 0xf1, 0xe3, 0xc2, 0xe5, 0xf2, 0x3a, 0x6b, 0xa0, 0xab,
            0x90, 0xf4, 0xff,
        ];
        let mut headers = vec![2];
        headers.extend_from_slice(&block[..5]);
        headers.extend_from_slice(&[0, 0]);
        bytes.extend(frame(kind::HEADERS, flag::PADDED, 1, &headers));
        bytes.extend(frame(kind::CONTINUATION, flag::END_HEADERS, 1, &block[5..]));
        bytes.extend(frame(kind::DATA, flag::END_STREAM, 1, b"hello"));
        bytes.extend(frame(kind::GOAWAY, 0, 0, &[0, 0, 0, 1, 0, 0, 0, 0]));
        for b in &bytes {
            wire.received(std::slice::from_ref(b));
        }
        let frames = frames_of(&recorder.events());
        assert_eq!(frames.len(), 5);
        assert_eq!(frames[0].detail, H2Detail::Settings(vec![(3, 100)]));
        assert_eq!(frames[1].detail, H2Detail::HeaderFragment { fragment: 5 });
        let H2Detail::Headers(decoded) = &frames[2].detail else {
            panic!("{:?}", frames[2]);
        };
        assert_eq!(decoded.encoded, block.len() as u64);
        assert_eq!(decoded.fields[3].1, "www.example.com");
        assert_eq!(
            frames[3].detail,
            H2Detail::Data {
                data_len: 5,
                text: None
            }
        );
        assert_eq!(
            frames[4].detail,
            H2Detail::Goaway {
                last_stream: 1,
                code: 0,
                debug: String::new()
            }
        );
    }

    #[test]
    fn a_frame_cut_short_is_not_shown_at_its_announced_length_but_noted() {
        let recorder = Recorder::start_now();
        let mut wire = H2Wire::new(recorder.clone(), false);
        // A DATA frame of 50 bytes of which 31 came, then the server's FIN.
        let data = frame(kind::DATA, 0, 1, &[b'a'; 50]);
        wire.received(&data[..9 + 31]);
        wire.closed();
        // A second FIN (a read after the end) shows nothing more.
        wire.closed();
        let events = recorder.events();
        assert!(frames_of(&events).is_empty(), "{events:?}");
        let kinds: Vec<&EventKind> = events.iter().map(|e| &e.kind).collect();
        assert_eq!(kinds.len(), 2, "{kinds:?}");
        let EventKind::Note { text } = kinds[0] else {
            panic!("{kinds:?}");
        };
        assert!(
            text.contains("inside a DATA frame received on stream 1: 31 of its 50 payload bytes"),
            "{text}"
        );
        assert_eq!(kinds[1], &EventKind::PeerClosed);
    }

    #[test]
    fn malformed_settings_and_priority_fields_are_marked() {
        let recorder = Recorder::start_now();
        let mut wire = H2Wire::new(recorder.clone(), false);
        let mut bytes = frame(kind::SETTINGS, 0, 0, &[0, 3, 0, 0, 0, 100, 0]);
        bytes.extend(frame(kind::SETTINGS, flag::ACK, 0, &[0, 3, 0, 0, 0, 100]));
        // PRIORITY flag with 2 bytes: no room for its 5.
        bytes.extend(frame(
            kind::HEADERS,
            flag::PRIORITY | flag::END_HEADERS,
            1,
            &[0x88, 0x88],
        ));
        wire.received(&bytes);
        let details: Vec<H2Detail> = frames_of(&recorder.events())
            .into_iter()
            .map(|f| f.detail)
            .collect();
        assert_eq!(details, vec![H2Detail::Malformed; 3]);
    }

    /// A PING or WINDOW_UPDATE of length 0 is malformed in the text as in the JSON: the text
    /// left the label off any frame of length 0.
    #[test]
    fn empty_frames_that_need_a_payload_are_marked_in_the_text() {
        let recorder = Recorder::start_now();
        let mut wire = H2Wire::new(recorder.clone(), false);
        let mut bytes = frame(kind::PING, 0, 0, &[]);
        bytes.extend(frame(kind::WINDOW_UPDATE, 0, 0, &[]));
        bytes.extend(frame(kind::SETTINGS, flag::ACK, 0, &[]));
        wire.received(&bytes);
        let mut out = String::new();
        for event in recorder.events().iter() {
            crate::trace::text::render_event(&mut out, event);
        }
        assert_eq!(out.matches("; malformed payload").count(), 2, "{out}");
    }
}
