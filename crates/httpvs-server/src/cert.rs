//! The server certificate: loaded from PEM files or generated self-signed, and the TLS/QUIC configs built on it.

use crate::error::ServeError;
use rustls::crypto::ring::default_provider;
use rustls_pki_types::pem::{self, PemObject};
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use sha2::{Digest, Sha256};
use std::path::Path;
use std::sync::Arc;

/// The names a generated certificate is valid for.
const SELF_SIGNED_NAMES: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// A certificate chain with its key, and what clients need to trust it.
pub struct ServerCert {
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    ca_pem: String,
}

/// The largest certificate or key file read: a chain is kilobytes, and /dev/zero must not fill
/// memory.
const MAX_PEM_FILE_BYTES: u64 = 16 << 20;

/// Reads the certificate chain and key files, bounded (`--cert`, `--key`).
pub fn read_pem_files(cert_path: &Path, key_path: &Path) -> Result<(Vec<u8>, Vec<u8>), ServeError> {
    let read = |path: &Path, flag: &'static str| {
        let failed = |source| ServeError::ReadCert {
            flag,
            path: path.to_path_buf(),
            source,
        };
        let file = std::fs::File::open(path).map_err(failed)?;
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(
            &mut std::io::Read::take(file, MAX_PEM_FILE_BYTES + 1),
            &mut bytes,
        )
        .map_err(failed)?;
        if bytes.len() as u64 > MAX_PEM_FILE_BYTES {
            return Err(failed(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("longer than {} MiB", MAX_PEM_FILE_BYTES >> 20),
            )));
        }
        Ok(bytes)
    };
    Ok((read(cert_path, "--cert")?, read(key_path, "--key")?))
}

impl ServerCert {
    /// Generates a self-signed certificate for localhost, 127.0.0.1 and ::1.
    pub fn self_signed() -> Result<ServerCert, ServeError> {
        let names: Vec<String> = SELF_SIGNED_NAMES.iter().map(|s| s.to_string()).collect();
        let generated = rcgen::generate_simple_self_signed(names)
            .map_err(|e| ServeError::Cert(e.to_string()))?;
        let key = PrivateKeyDer::try_from(generated.key_pair.serialize_der())
            .map_err(|e| ServeError::Cert(e.to_string()))?;
        Ok(ServerCert {
            ca_pem: generated.cert.pem(),
            chain: vec![generated.cert.der().clone()],
            key,
        })
    }

    /// Loads a PEM certificate chain and a PEM private key.
    pub fn from_pem_files(cert_path: &Path, key_path: &Path) -> Result<ServerCert, ServeError> {
        let (cert_pem, key_pem) = read_pem_files(cert_path, key_path)?;
        ServerCert::from_pem(&cert_pem, &key_pem, cert_path, key_path)
    }

    /// A PEM certificate chain and a PEM private key already read from `cert_path` and
    /// `key_path` (named in errors).
    pub fn from_pem(
        cert_pem: &[u8],
        key_pem: &[u8],
        cert_path: &Path,
        key_path: &Path,
    ) -> Result<ServerCert, ServeError> {
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem)
            .collect::<Result<_, _>>()
            .map_err(|e| {
                ServeError::Cert(format!("{}: {}", cert_path.display(), pem_reason(&e)))
            })?;
        if chain.is_empty() {
            return Err(ServeError::Cert(format!(
                "{}: no CERTIFICATE block",
                cert_path.display()
            )));
        }
        // rustls takes no passphrase. A PKCS#8 one read "no PRIVATE KEY block", an OpenSSL
        // legacy one (`Proc-Type: 4,ENCRYPTED` in a BEGIN RSA/EC PRIVATE KEY block)
        // "InvalidCharacter(45)": both are said as what they are.
        let text = String::from_utf8_lossy(key_pem);
        if text.contains("-----BEGIN ENCRYPTED") || text.contains("Proc-Type: 4,ENCRYPTED") {
            return Err(ServeError::Cert(format!(
                "{}: the private key is encrypted; decrypt it first (openssl pkey -in {0} -out key.pem)",
                key_path.display()
            )));
        }
        let key = match PrivateKeyDer::from_pem_slice(key_pem) {
            Ok(key) => key,
            Err(pem::Error::NoItemsFound) => {
                let path = key_path.display();
                return Err(ServeError::Cert(format!("{path}: no PRIVATE KEY block")));
            }
            Err(e) => {
                let path = key_path.display();
                return Err(ServeError::Cert(format!("{path}: {}", pem_reason(&e))));
            }
        };
        let cert = ServerCert {
            chain,
            key,
            ca_pem: String::from_utf8_lossy(cert_pem).into_owned(),
        };
        // The pair is checked here, where the files are known: the listeners' own set-up said
        // "invalid peer certificate: BadEncoding" or "KeyMismatch", naming neither file.
        cert.base_config(rustls::DEFAULT_VERSIONS)
            .map_err(|e| ServeError::Cert(pair_problem(&e, cert_path, key_path)))?;
        Ok(cert)
    }

    /// The chain and its key (for a client certificate read the same way: `load --cert`).
    pub fn into_parts(self) -> (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>) {
        (self.chain, self.key)
    }

    /// The PEM clients should trust (the generated cert, or the loaded chain file).
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// The DER of the leaf certificate.
    pub fn leaf_der(&self) -> &[u8] {
        self.chain.first().map_or(&[], |c| c.as_ref())
    }

    /// SHA-256 of the leaf certificate's DER, lower-case hex.
    pub fn fingerprint(&self) -> String {
        hex_sha256(self.leaf_der())
    }

    /// A rustls server config for TCP: TLS 1.2/1.3 with ALPN h2 then http/1.1.
    pub fn tls_config(&self) -> Result<Arc<rustls::ServerConfig>, ServeError> {
        let mut config = self
            .base_config(rustls::DEFAULT_VERSIONS)
            .map_err(|e| ServeError::Cert(e.to_string()))?;
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }

    /// A quinn server config: TLS 1.3 with ALPN h3.
    pub fn quic_config(&self) -> Result<quinn::ServerConfig, ServeError> {
        let mut config = self
            .base_config(&[&rustls::version::TLS13])
            .map_err(|e| ServeError::Cert(e.to_string()))?;
        config.alpn_protocols = vec![b"h3".to_vec()];
        config.max_early_data_size = 0;
        let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(config)
            .map_err(|e| ServeError::Cert(e.to_string()))?;
        Ok(quinn::ServerConfig::with_crypto(Arc::new(crypto)))
    }

    fn base_config(
        &self,
        versions: &[&'static rustls::SupportedProtocolVersion],
    ) -> Result<rustls::ServerConfig, rustls::Error> {
        rustls::ServerConfig::builder_with_provider(Arc::new(default_provider()))
            .with_protocol_versions(versions)?
            .with_no_client_auth()
            .with_single_cert(self.chain.clone(), self.key.clone_key())
    }
}

/// What is wrong with a certificate and key pair, naming the file at fault.
fn pair_problem(e: &rustls::Error, cert_path: &Path, key_path: &Path) -> String {
    let (cert, key) = (cert_path.display(), key_path.display());
    match e {
        rustls::Error::InconsistentKeys(_) => {
            format!("{key} is not the private key of {cert}'s certificate")
        }
        rustls::Error::InvalidCertificate(why) => {
            format!("{cert}: the certificate cannot be read ({why:?})")
        }
        // rustls's own words are "unexpected error: failed to parse private key as RSA,
        // ECDSA, or EdDSA", naming neither file.
        rustls::Error::General(why) if why.contains("private key") => {
            format!("{key}: its PRIVATE KEY block is not an RSA, ECDSA or EdDSA key")
        }
        other => format!("{cert} with {key}: {other}"),
    }
}

/// A PEM reader's error in words: its own are a base64 decoder's (`InvalidCharacter(33)`) or
/// name the missing END marker as a list of bytes. (`load --cacert` reads PEM in
/// httpvs-load's `tls.rs`, which words them the same way.)
pub fn pem_reason(e: &pem::Error) -> String {
    match e {
        pem::Error::MissingSectionEnd { end_marker } => format!(
            "no \"-----END {}-----\" line: the file ends inside a section (cut short?)",
            String::from_utf8_lossy(end_marker)
        ),
        pem::Error::IllegalSectionStart { line } => {
            format!("bad section start \"{}\"", String::from_utf8_lossy(line))
        }
        pem::Error::Base64Decode(_) => {
            "a BEGIN/END section holds text that is not base64 (a damaged or edited file?)".into()
        }
        other => other.to_string(),
    }
}

/// Lower-case hex SHA-256 of `bytes`.
pub fn hex_sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn self_signed_cert_builds_tls_and_quic_configs() {
        let cert = ServerCert::self_signed().unwrap();
        assert_eq!(cert.fingerprint().len(), 64);
        assert!(cert.ca_pem().contains("BEGIN CERTIFICATE"));
        cert.tls_config().unwrap();
        cert.quic_config().unwrap();
    }

    /// A key that is not the certificate's, or an encrypted one, names its file and says
    /// what is wrong (they read "KeyMismatch" and "no PRIVATE KEY block").
    #[test]
    fn a_bad_pair_names_its_files() {
        let pem = |names: &[&str]| {
            let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
            let g = rcgen::generate_simple_self_signed(names).unwrap();
            (g.cert.pem(), g.key_pair.serialize_pem())
        };
        let (cert_a, key_a) = pem(&["a.test"]);
        let (_, key_b) = pem(&["b.test"]);
        let (c, k) = (Path::new("c.pem"), Path::new("k.pem"));
        ServerCert::from_pem(cert_a.as_bytes(), key_a.as_bytes(), c, k).unwrap();
        let err = |cert: &str, key: &str| {
            ServerCert::from_pem(cert.as_bytes(), key.as_bytes(), c, k)
                .err()
                .unwrap()
                .to_string()
        };
        assert!(
            err(&cert_a, &key_b).ends_with("k.pem is not the private key of c.pem's certificate"),
            "{}",
            err(&cert_a, &key_b)
        );
        // Damaged files say what is wrong in words: they read "InvalidCharacter(33)" and
        // "unexpected error: failed to parse private key as RSA, ECDSA, or EdDSA".
        let garbage = "-----BEGIN CERTIFICATE-----\n!!garbage!!\n-----END CERTIFICATE-----\n";
        assert!(
            err(garbage, &key_a)
                .contains("c.pem: a BEGIN/END section holds text that is not base64"),
            "{}",
            err(garbage, &key_a)
        );
        let junk_key = "-----BEGIN PRIVATE KEY-----\nAAAAAAAAAAAAAAAA\n-----END PRIVATE KEY-----\n";
        assert!(
            err(&cert_a, junk_key).contains("k.pem: its PRIVATE KEY block is not an RSA"),
            "{}",
            err(&cert_a, junk_key)
        );
        let encrypted =
            "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIB\n-----END ENCRYPTED PRIVATE KEY-----\n";
        assert!(
            err(&cert_a, encrypted).contains("k.pem: the private key is encrypted"),
            "{}",
            err(&cert_a, encrypted)
        );
    }

    /// An OpenSSL legacy encrypted key (a Proc-Type header in an RSA or EC key block) is said
    /// to be encrypted, as a PKCS#8 one is; it read "InvalidCharacter(45)".
    #[test]
    fn a_legacy_encrypted_key_is_said_to_be_encrypted() {
        let legacy = b"-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,00\n\nAAAA\n-----END RSA PRIVATE KEY-----\n";
        let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        let err = ServerCert::from_pem(
            cert.cert.pem().as_bytes(),
            legacy,
            Path::new("c.pem"),
            Path::new("k.pem"),
        )
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
        assert!(err.contains("k.pem: the private key is encrypted"), "{err}");
    }

    #[test]
    fn missing_file_is_a_read_error() {
        let err = ServerCert::from_pem_files(Path::new("/nonexistent.pem"), Path::new("/x"));
        assert!(matches!(err, Err(ServeError::ReadCert { .. })));
    }
}
