//! Encoding the frames an HTTP/2 client sends (RFC 9113 §6): the shared encoders of
//! `httpvs_h2wire::frame`, under the paths the client code and its tests use.

pub use httpvs_h2wire::frame::client_preface as preface;
pub use httpvs_h2wire::frame::{
    code, data, goaway, head, headers, ping_ack, rst_stream, setting, settings_ack, window_update,
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::h2::frame_tap::{
        flag, kind, Direction, FrameHeader, FrameObserver, FrameTap,
    };

    #[derive(Default)]
    struct Frames(Vec<FrameHeader>);

    impl FrameObserver for Frames {
        fn on_header(&mut self, _: Direction, header: &FrameHeader) -> bool {
            self.0.push(*header);
            false
        }
    }

    #[test]
    fn a_large_block_continues_and_the_tap_reads_it_back() {
        let mut out = Vec::new();
        preface(&mut out, &[(setting::ENABLE_PUSH, 0)], 1 << 20);
        headers(&mut out, 1, &[7; 40], true, 16);
        data(&mut out, 1, b"abc", true);
        let mut frames = Frames::default();
        FrameTap::new(Direction::Sent).feed(&out, &mut frames);
        let seen: Vec<(u8, u8, u32)> = frames
            .0
            .iter()
            .map(|h| (h.kind, h.flags, h.length))
            .collect();
        assert_eq!(
            seen,
            [
                (kind::SETTINGS, 0, 6),
                (kind::WINDOW_UPDATE, 0, 4),
                (kind::HEADERS, flag::END_STREAM, 16),
                (kind::CONTINUATION, 0, 16),
                (kind::CONTINUATION, flag::END_HEADERS, 8),
                (kind::DATA, flag::END_STREAM, 3),
            ]
        );
    }
}
