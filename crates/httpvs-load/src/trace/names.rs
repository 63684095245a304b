//! Names for the numbers on the wire: HTTP/2 frame types, flags, settings and error codes
//! (RFC 9113), and HTTP/3 frame types (RFC 9114), as `nghttp -v` and the RFCs spell them.

use crate::protocol::h2::frame_tap::{flag, kind};

/// HTTP/2 frame type name.
pub fn h2_frame(ty: u8) -> String {
    match ty {
        kind::DATA => "DATA".into(),
        kind::HEADERS => "HEADERS".into(),
        kind::PRIORITY => "PRIORITY".into(),
        kind::RST_STREAM => "RST_STREAM".into(),
        kind::SETTINGS => "SETTINGS".into(),
        kind::PUSH_PROMISE => "PUSH_PROMISE".into(),
        kind::PING => "PING".into(),
        kind::GOAWAY => "GOAWAY".into(),
        kind::WINDOW_UPDATE => "WINDOW_UPDATE".into(),
        kind::CONTINUATION => "CONTINUATION".into(),
        other => format!("UNKNOWN(0x{other:02x})"),
    }
}

/// The names of the flags set on a frame of type `ty`.
pub fn h2_flags(ty: u8, flags: u8) -> Vec<&'static str> {
    let known: &[(u8, &str)] = match ty {
        kind::DATA => &[(flag::END_STREAM, "END_STREAM"), (flag::PADDED, "PADDED")],
        kind::HEADERS => &[
            (flag::END_STREAM, "END_STREAM"),
            (flag::END_HEADERS, "END_HEADERS"),
            (flag::PADDED, "PADDED"),
            (flag::PRIORITY, "PRIORITY"),
        ],
        kind::SETTINGS | kind::PING => &[(flag::ACK, "ACK")],
        kind::PUSH_PROMISE => &[(flag::END_HEADERS, "END_HEADERS"), (flag::PADDED, "PADDED")],
        kind::CONTINUATION => &[(flag::END_HEADERS, "END_HEADERS")],
        _ => &[],
    };
    known
        .iter()
        .filter(|(bit, _)| flags & bit != 0)
        .map(|(_, name)| *name)
        .collect()
}

/// SETTINGS identifier name.
pub fn h2_setting(id: u16) -> String {
    match id {
        0x1 => "SETTINGS_HEADER_TABLE_SIZE".into(),
        0x2 => "SETTINGS_ENABLE_PUSH".into(),
        0x3 => "SETTINGS_MAX_CONCURRENT_STREAMS".into(),
        0x4 => "SETTINGS_INITIAL_WINDOW_SIZE".into(),
        0x5 => "SETTINGS_MAX_FRAME_SIZE".into(),
        0x6 => "SETTINGS_MAX_HEADER_LIST_SIZE".into(),
        0x8 => "SETTINGS_ENABLE_CONNECT_PROTOCOL".into(),
        0x9 => "SETTINGS_NO_RFC7540_PRIORITIES".into(),
        other => format!("SETTINGS_UNKNOWN_0x{other:02x}"),
    }
}

/// HTTP/2 error code name.
pub fn h2_error(code: u32) -> &'static str {
    match crate::error::h2_code_name(u64::from(code)) {
        // The text adds the code in hex after every name, as nghttp does.
        "UNKNOWN" => "UNKNOWN_ERROR",
        name => name,
    }
}

/// HTTP/3 frame type name (reserved "grease" types show as such).
pub fn h3_frame(ty: u64) -> String {
    match ty {
        0x0 => "DATA".into(),
        0x1 => "HEADERS".into(),
        0x3 => "CANCEL_PUSH".into(),
        0x4 => "SETTINGS".into(),
        0x5 => "PUSH_PROMISE".into(),
        0x7 => "GOAWAY".into(),
        0xd => "MAX_PUSH_ID".into(),
        t if t >= 0x21 && (t - 0x21) % 0x1f == 0 => "RESERVED(grease)".into(),
        other => format!("UNKNOWN(0x{other:x})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_rfcs() {
        assert_eq!(h2_frame(kind::WINDOW_UPDATE), "WINDOW_UPDATE");
        assert_eq!(
            h2_flags(kind::HEADERS, 0x25),
            ["END_STREAM", "END_HEADERS", "PRIORITY"]
        );
        assert_eq!(h2_flags(kind::SETTINGS, 0x1), ["ACK"]);
        assert_eq!(h2_setting(3), "SETTINGS_MAX_CONCURRENT_STREAMS");
        assert_eq!(h2_error(7), "REFUSED_STREAM");
        // The hex follows the name once, where the text puts it (it read twice).
        assert_eq!(h2_error(0x1234), "UNKNOWN_ERROR");
        assert_eq!(h3_frame(1), "HEADERS");
        assert_eq!(h3_frame(0x21 + 0x1f * 3), "RESERVED(grease)");
    }
}
