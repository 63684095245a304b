//! The negotiated TLS version, seen without touching the connection code: rustls names the
//! secrets of its key schedule through `KeyLog`, and TLS 1.3 and 1.2 use different labels.
//! Only the label is kept; the secrets themselves are dropped at once.

use std::sync::Mutex;

/// A `KeyLog` that remembers which TLS version's key schedule ran.
#[derive(Debug, Default)]
pub struct TlsVersionLog {
    version: Mutex<Option<&'static str>>,
}

impl TlsVersionLog {
    /// The version of the last handshake, once one ran.
    pub fn version(&self) -> Option<&'static str> {
        *self.version.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl rustls::KeyLog for TlsVersionLog {
    fn log(&self, label: &str, _client_random: &[u8], _secret: &[u8]) {
        // TLS 1.2 logs only the master secret (NSS label CLIENT_RANDOM); TLS 1.3 logs its
        // traffic secrets under their own labels.
        let version = if label == "CLIENT_RANDOM" {
            "TLSv1.2"
        } else {
            "TLSv1.3"
        };
        *self.version.lock().unwrap_or_else(|p| p.into_inner()) = Some(version);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::KeyLog;

    #[test]
    fn labels_tell_the_version() {
        let log = TlsVersionLog::default();
        assert_eq!(log.version(), None);
        log.log("CLIENT_HANDSHAKE_TRAFFIC_SECRET", &[0; 32], &[1; 32]);
        assert_eq!(log.version(), Some("TLSv1.3"));
        log.log("CLIENT_RANDOM", &[0; 32], &[1; 48]);
        assert_eq!(log.version(), Some("TLSv1.2"));
    }
}
