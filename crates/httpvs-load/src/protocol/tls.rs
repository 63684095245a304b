//! TLS client configuration shared by every protocol (h1, h2 over TCP; h3 over QUIC via quinn).
//!
//! One [`client_config`] is built per run from `-k` / `--cacert`; each protocol then derives a
//! copy with its own ALPN list through [`AlpnConfigs`], once, not per connection.

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// ALPN identifier of HTTP/2 over TLS.
pub const ALPN_H2: &[u8] = b"h2";
/// ALPN identifier of HTTP/1.1.
pub const ALPN_HTTP11: &[u8] = b"http/1.1";
/// ALPN identifier of HTTP/3.
pub const ALPN_H3: &[u8] = b"h3";

/// Why a TLS client configuration could not be built.
#[derive(Debug, thiserror::Error)]
pub enum TlsConfigError {
    /// The `--cacert` file could not be read or is not PEM.
    #[error("cannot read CA certificate file {path}: {reason}")]
    CaCertUnreadable {
        /// The file as given.
        path: PathBuf,
        /// What went wrong, from the PEM reader.
        reason: String,
    },
    /// The `--cacert` file holds no certificate.
    #[error("no certificate found in CA file {0}")]
    CaCertEmpty(PathBuf),
    /// A certificate in the `--cacert` file was rejected as a trust anchor.
    #[error("CA certificate in {path} is not usable: {source}")]
    CaCertRejected {
        /// The file as given.
        path: PathBuf,
        /// The rustls reason.
        source: rustls::Error,
    },
    /// The ring provider refused the protocol versions (should not happen).
    #[error("TLS setup failed: {0}")]
    Setup(rustls::Error),
    /// rustls refused the client certificate and key (`--cert`, `--key`).
    #[error("the client certificate (--cert, --key) is not usable: {0}")]
    ClientCert(rustls::Error),
}

/// A client certificate chain and its private key (`--cert`, `--key`): sent to a server that
/// asks for one (mutual TLS), over TCP and QUIC alike.
pub struct ClientIdentity {
    /// The chain, leaf first.
    pub chain: Vec<rustls::pki_types::CertificateDer<'static>>,
    /// The leaf's private key.
    pub key: rustls::pki_types::PrivateKeyDer<'static>,
}

impl Clone for ClientIdentity {
    fn clone(&self) -> ClientIdentity {
        ClientIdentity {
            chain: self.chain.clone(),
            key: self.key.clone_key(),
        }
    }
}

impl PartialEq for ClientIdentity {
    fn eq(&self, other: &ClientIdentity) -> bool {
        self.chain == other.chain && self.key.secret_der() == other.key.secret_der()
    }
}

impl std::fmt::Debug for ClientIdentity {
    /// The chain's length only: a key does not belong in a log.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ClientIdentity({} certificates, key)", self.chain.len())
    }
}

/// The client TLS config for `tls` (`-k`, `--cacert`, `--cert`/`--key`), offering `alpn`.
pub fn client_config_for(
    tls: &crate::config::TlsOptions,
    alpn: &[&[u8]],
) -> Result<Arc<ClientConfig>, TlsConfigError> {
    let identity = tls.client_identity.as_deref();
    configure(tls.insecure, tls.cacert.as_deref(), identity, alpn)
}

/// The crypto provider httpvs uses everywhere (ring).
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Builds the run's TLS client configuration.
///
/// `insecure` (`-k`) accepts any certificate but still checks handshake signatures.
/// `cacert` trusts only the certificates in that PEM file. With neither, the system's roots
/// are used (rustls-native-certs); an empty system store simply makes verification fail with
/// a TLS error at connect time, which names the problem.
pub fn client_config(
    insecure: bool,
    cacert: Option<&Path>,
    alpn: &[&[u8]],
) -> Result<Arc<ClientConfig>, TlsConfigError> {
    configure(insecure, cacert, None, alpn)
}

fn configure(
    insecure: bool,
    cacert: Option<&Path>,
    identity: Option<&ClientIdentity>,
    alpn: &[&[u8]],
) -> Result<Arc<ClientConfig>, TlsConfigError> {
    let client_auth =
        |builder: rustls::ConfigBuilder<ClientConfig, rustls::client::WantsClientCert>| {
            match identity {
                Some(id) => builder
                    .with_client_auth_cert(id.chain.clone(), id.key.clone_key())
                    .map_err(TlsConfigError::ClientCert),
                None => Ok(builder.with_no_client_auth()),
            }
        };
    let provider = provider();
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(TlsConfigError::Setup)?;
    let mut config = if insecure {
        client_auth(
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AcceptAnyCertificate { provider })),
        )?
    } else {
        match cacert {
            Some(path) => {
                let (roots, pinned) = roots_from_file(path)?;
                let inner = rustls::client::WebPkiServerVerifier::builder_with_provider(
                    Arc::new(roots),
                    provider,
                )
                .build()
                .map_err(|e| TlsConfigError::CaCertUnreadable {
                    path: path.to_path_buf(),
                    reason: e.to_string(),
                })?;
                client_auth(
                    builder
                        .dangerous()
                        .with_custom_certificate_verifier(Arc::new(TrustedFile { inner, pinned })),
                )?
            }
            None => client_auth(builder.with_root_certificates(system_roots()))?,
        }
    };
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(Arc::new(config))
}

/// Whether the `--cacert` file holds certificates a client could trust, checked before a run
/// (also for an http:// URL, which never reads it: a file that is no PEM is a bad file).
pub fn check_ca_file(path: &Path) -> Result<(), TlsConfigError> {
    roots_from_file(path).map(|_| ())
}

/// A PEM reader's error in words: its own names the missing END marker as a list of bytes.
fn pem_reason(e: &rustls::pki_types::pem::Error) -> String {
    use rustls::pki_types::pem::Error;
    match e {
        Error::MissingSectionEnd { end_marker } => format!(
            "no \"-----END {}-----\" line: the file ends inside a section (cut short?)",
            String::from_utf8_lossy(end_marker)
        ),
        Error::IllegalSectionStart { line } => {
            format!("bad section start \"{}\"", String::from_utf8_lossy(line))
        }
        // Its own words are the base64 decoder's: `InvalidCharacter(33)`.
        Error::Base64Decode(_) => {
            "a BEGIN/END section holds text that is not base64 (a damaged or edited file?)".into()
        }
        other => other.to_string(),
    }
}

/// The `--cacert` file's certificates as trust anchors, and as they are (for [`TrustedFile`]).
fn roots_from_file(
    path: &Path,
) -> Result<(RootCertStore, Vec<CertificateDer<'static>>), TlsConfigError> {
    let unreadable = |e: rustls::pki_types::pem::Error| TlsConfigError::CaCertUnreadable {
        path: path.to_path_buf(),
        reason: pem_reason(&e),
    };
    let mut roots = RootCertStore::empty();
    let mut pinned = Vec::new();
    for cert in CertificateDer::pem_file_iter(path).map_err(unreadable)? {
        let cert = cert.map_err(unreadable)?;
        pinned.push(cert.clone());
        roots
            .add(cert)
            .map_err(|source| TlsConfigError::CaCertRejected {
                path: path.to_path_buf(),
                source,
            })?;
    }
    if roots.is_empty() {
        return Err(TlsConfigError::CaCertEmpty(path.to_path_buf()));
    }
    Ok((roots, pinned))
}

/// `--cacert FILE`: verifies as webpki does against the file's certificates, and also accepts
/// a server certificate that is byte for byte one of them, for the names it holds. The
/// self-signed certificate of `openssl req -x509` marks itself a CA, which webpki refuses as a
/// server's own (`CaUsedAsEndEntity`), where curl, trusting the file, accepts it. Its dates are
/// checked all the same: webpki reads them before anything else, and a refusal for them
/// stands (a CA-signed leaf that expired was accepted when the file held the leaf itself).
#[derive(Debug)]
struct TrustedFile {
    inner: Arc<rustls::client::WebPkiServerVerifier>,
    pinned: Vec<CertificateDer<'static>>,
}

impl ServerCertVerifier for TrustedFile {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let refused = match self.inner.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        ) {
            Ok(verified) => return Ok(verified),
            Err(e) => e,
        };
        // webpki reads the dates first, before it refuses a CA as a server's own: a date it
        // refused is a date, whoever holds the certificate (curl refuses it too).
        use rustls::CertificateError as Cert;
        let dated = matches!(
            refused,
            rustls::Error::InvalidCertificate(
                Cert::Expired
                    | Cert::ExpiredContext { .. }
                    | Cert::NotValidYet
                    | Cert::NotValidYetContext { .. }
            )
        );
        if dated
            || !self
                .pinned
                .iter()
                .any(|c| c.as_ref() == end_entity.as_ref())
        {
            return Err(refused);
        }
        let parsed = rustls::server::ParsedCertificate::try_from(end_entity)?;
        rustls::client::verify_server_name(&parsed, server_name)?;
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// The platform's trust store; certificates it cannot parse are skipped, as browsers do.
fn system_roots() -> RootCertStore {
    let mut roots = RootCertStore::empty();
    let found = rustls_native_certs::load_native_certs();
    roots.add_parsable_certificates(found.certs);
    roots
}

/// Per-protocol copies of the run's TLS configuration with the protocol's ALPN list.
///
/// Cloning a `ClientConfig` per connection would cost allocations on every connect, so the
/// derived copy is kept, keyed by the identity of the base configuration.
#[derive(Debug, Default)]
pub struct AlpnConfigs {
    cached: Mutex<Option<(Arc<ClientConfig>, Arc<ClientConfig>)>>,
}

impl AlpnConfigs {
    /// `base` with exactly `alpn` as its ALPN offer.
    pub fn get(&self, base: &Arc<ClientConfig>, alpn: &[&[u8]]) -> Arc<ClientConfig> {
        if base
            .alpn_protocols
            .iter()
            .map(Vec::as_slice)
            .eq(alpn.iter().copied())
        {
            return base.clone();
        }
        // A poisoned lock only means another thread panicked mid-get; the cache is still valid.
        let mut cached = self.cached.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((key, derived)) = cached.as_ref() {
            if Arc::ptr_eq(key, base) {
                return derived.clone();
            }
        }
        let mut config = ClientConfig::clone(base);
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        let derived = Arc::new(config);
        *cached = Some((base.clone(), derived.clone()));
        derived
    }
}

/// The name to verify the certificate against and send as SNI: IPv6 literals lose their brackets.
pub fn server_name(host: &str) -> Option<ServerName<'static>> {
    ServerName::try_from(bare_host(host).to_string()).ok()
}

/// A URL's host as TLS and QUIC take it: `[::1]` is `::1`.
pub fn bare_host(host: &str) -> &str {
    host.strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host)
}

/// `-k`: trusts any certificate, but still verifies that the handshake was signed by its key.
#[derive(Debug)]
struct AcceptAnyCertificate {
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for AcceptAnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// rustls's words for a certificate it refused, with the debug spelling of the rarer ones
/// (`Other(OtherError(CaUsedAsEndEntity))`) made plain and the common causes explained.
pub fn plain_words(text: &str) -> String {
    let mut text = text.to_owned();
    while let Some(at) = text.find("Other(OtherError(") {
        let inner_start = at + "Other(OtherError(".len();
        let Some(len) = text[inner_start..].find("))") else {
            break;
        };
        let inner = text[inner_start..inner_start + len].to_owned();
        text.replace_range(at..inner_start + len + 2, &inner);
    }
    const WHY: [(&str, &str); 2] = [
        (
            "CaUsedAsEndEntity",
            "the server presents a CA certificate as its own: give that certificate itself to --cacert (a self-signed one), or serve one that CA signed",
        ),
        (
            "NotValidForName",
            "not issued for the host in the URL",
        ),
    ];
    for (name, why) in WHY {
        if text.ends_with(name) {
            text.push_str(&format!(" ({why})"));
        }
    }
    validity_in_words(&text).unwrap_or(text)
}

/// rustls's dates of a certificate outside its validity, UNIX seconds apart ("verification
/// time 1795775589 (UNIX), but certificate is not valid after 1609459200 (186316389 seconds
/// ago)"), as how long ago it expired or how long until it is valid.
fn validity_in_words(text: &str) -> Option<String> {
    let (start, ago) = if let Some(at) = text.find("certificate expired: verification time") {
        (at, true)
    } else {
        (
            text.find("certificate not valid yet: verification time")?,
            false,
        )
    };
    let open = text[start..].rfind('(')? + start;
    let seconds: u64 = text[open + 1..].split(' ').next()?.parse().ok()?;
    let span = match seconds {
        s if s >= 2 * 86_400 => format!("{} days", s / 86_400),
        s if s >= 2 * 3_600 => format!("{} hours", s / 3_600),
        s if s >= 120 => format!("{} minutes", s / 60),
        s => format!("{s} seconds"),
    };
    let said = if ago {
        format!("certificate expired {span} ago")
    } else {
        format!("certificate not valid yet, for another {span}")
    };
    let end = text[open..].find(')')? + open + 1;
    Some(format!("{}{said}{}", &text[..start], &text[end..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The validity dates come as UNIX seconds from rustls: said as a span instead.
    #[test]
    fn validity_dates_are_said_as_spans() {
        assert_eq!(
            plain_words("invalid peer certificate: certificate expired: verification time 1795775589 (UNIX), but certificate is not valid after 1609459200 (186316389 seconds ago)"),
            "invalid peer certificate: certificate expired 2156 days ago"
        );
        assert_eq!(
            plain_words("invalid peer certificate: certificate not valid yet: verification time 100 (UNIX), but certificate is not valid before 7300 (7200 seconds in the future)"),
            "invalid peer certificate: certificate not valid yet, for another 2 hours"
        );
    }

    #[test]
    fn refused_certificates_are_said_in_plain_words() {
        assert_eq!(
            plain_words("invalid peer certificate: Other(OtherError(CaUsedAsEndEntity))"),
            "invalid peer certificate: CaUsedAsEndEntity (the server presents a CA certificate as its own: give that certificate itself to --cacert (a self-signed one), or serve one that CA signed)"
        );
        // The engine's own hint covers an unknown issuer.
        assert_eq!(
            plain_words("invalid peer certificate: UnknownIssuer"),
            "invalid peer certificate: UnknownIssuer"
        );
        assert_eq!(
            plain_words("received fatal alert: HandshakeFailure"),
            "received fatal alert: HandshakeFailure"
        );
    }

    #[test]
    fn insecure_config_offers_the_given_alpn() {
        let config = client_config(true, None, &[ALPN_H2, ALPN_HTTP11]).unwrap();
        assert_eq!(
            config.alpn_protocols,
            vec![b"h2".to_vec(), b"http/1.1".to_vec()]
        );
    }

    #[test]
    fn alpn_copies_are_cached_per_base() {
        let base = client_config(true, None, &[]).unwrap();
        let configs = AlpnConfigs::default();
        let a = configs.get(&base, &[ALPN_H2]);
        let b = configs.get(&base, &[ALPN_H2]);
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(a.alpn_protocols, vec![b"h2".to_vec()]);
        let same = configs.get(&a, &[ALPN_H2]);
        assert!(Arc::ptr_eq(&a, &same));
    }

    #[test]
    fn missing_cacert_file_is_a_clear_error() {
        let err = client_config(false, Some(Path::new("/nonexistent/ca.pem")), &[]).unwrap_err();
        assert!(err.to_string().contains("/nonexistent/ca.pem"), "{err}");
    }

    #[test]
    fn server_names_strip_ipv6_brackets() {
        assert!(server_name("[::1]").is_some());
        assert!(server_name("127.0.0.1").is_some());
        assert!(server_name("localhost").is_some());
    }
}
