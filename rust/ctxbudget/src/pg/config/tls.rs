//! TLS for PostgreSQL connections: rustls with the ring provider, checking the server's
//! certificate as libpq's `sslmode` says.
//!
//! - `prefer`/`require`: encrypted, the certificate is not checked — unless `sslrootcert`
//!   names a file, which (as in libpq) makes them check the chain like `verify-ca`.
//! - `verify-ca`: the chain must lead to a trusted root (`sslrootcert`, else the system's
//!   roots); the host name is not checked.
//! - `verify-full`: the chain and the host name. As libpq does, the subject's common name
//!   stands in for the host when the certificate has no subjectAltName at all.
//!
//! A self-signed certificate named in `sslrootcert` is trusted as the server's own
//! certificate (libpq accepts it; webpki alone refuses a CA certificate as an end entity).
//! The handshake's signatures are always verified, in every mode.

use std::sync::Arc;
use std::time::Duration;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{verify_server_cert_signed_by_trust_anchor, verify_server_name};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::ParsedCertificate;
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, Error as TlsError, RootCertStore,
    SignatureScheme,
};
use tokio_postgres_rustls::MakeRustlsConnect;
use x509_cert::der::{Decode, Tag, Tagged};
use x509_cert::Certificate;

use super::SslMode;
use crate::pg::error::{PgError, Result};

/// The `sslrootcert` value that asks for the system's trusted roots (as in libpq 16).
pub(crate) const SYSTEM_ROOTS: &str = "system";

/// ALPN protocol name PostgreSQL servers accept (required by `sslnegotiation=direct`).
const ALPN_POSTGRESQL: &[u8] = b"postgresql";

/// What the verifier checks of the server's certificate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Check {
    /// Nothing (the handshake's signatures only).
    Nothing,
    /// The chain up to a trusted root.
    Chain,
    /// The chain and the host name.
    ChainAndHost,
}

/// The TLS connector for `mode`, trusting the roots in the PEM file `root_cert` (or, for the
/// verify modes without one, the system's roots).
pub(crate) fn connector(mode: SslMode, root_cert: Option<&str>) -> Result<MakeRustlsConnect> {
    let verifier = Verifier::new(mode, root_cert)?;
    let provider = verifier.provider.clone();
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| PgError::Tls(format!("no TLS protocol version is available: {e}")))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    config.alpn_protocols = vec![ALPN_POSTGRESQL.to_vec()];
    Ok(MakeRustlsConnect::new(config))
}

/// The certificates of the PEM file `path`: all of them as roots, the self-signed ones also
/// as certificates the server may present itself.
fn roots_from_file(path: &str) -> Result<(RootCertStore, Vec<CertificateDer<'static>>)> {
    let pem = std::fs::read(path).map_err(|e| {
        PgError::Config(format!(
            "cannot read sslrootcert {path:?}: {e}; name a PEM file of the CA certificates \
             that signed the server's certificate (or sslrootcert=system for the system's roots)"
        ))
    })?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| {
            PgError::Config(format!(
                "sslrootcert {path:?} is not a PEM file of certificates: {e}"
            ))
        })?;
    if certs.is_empty() {
        return Err(PgError::Config(format!(
            "sslrootcert {path:?} holds no PEM certificate (-----BEGIN CERTIFICATE-----)"
        )));
    }
    let mut roots = RootCertStore::empty();
    let mut pinned = Vec::new();
    for cert in certs {
        if let Err(e) = roots.add(cert.clone()) {
            return Err(PgError::Config(format!(
                "sslrootcert {path:?} holds a certificate that cannot be a trusted root: {e}"
            )));
        }
        if is_self_signed(&cert) {
            pinned.push(cert);
        }
    }
    Ok((roots, pinned))
}

/// The system's trusted roots (the files `SSL_CERT_FILE`/`SSL_CERT_DIR` or the platform's
/// store name).
fn system_roots() -> Result<RootCertStore> {
    let found = rustls_native_certs::load_native_certs();
    let mut roots = RootCertStore::empty();
    let (added, _ignored) = roots.add_parsable_certificates(found.certs);
    if added == 0 {
        let why = found
            .errors
            .first()
            .map_or_else(|| "the store is empty".to_string(), ToString::to_string);
        return Err(PgError::Config(format!(
            "verify-ca/verify-full found no trusted root certificates in the system's store \
             ({why}); add sslrootcert=/path/to/ca.pem to the URL, or install the system's CA \
             certificates (or point SSL_CERT_FILE at a PEM bundle)"
        )));
    }
    Ok(roots)
}

fn is_self_signed(der: &CertificateDer<'_>) -> bool {
    Certificate::from_der(der).is_ok_and(|c| c.tbs_certificate.subject == c.tbs_certificate.issuer)
}

/// Checks the server's certificate as [`Check`] says.
#[derive(Debug)]
struct Verifier {
    check: Check,
    roots: RootCertStore,
    /// Self-signed certificates of `sslrootcert`, trusted as they are.
    pinned: Vec<CertificateDer<'static>>,
    provider: Arc<CryptoProvider>,
}

impl Verifier {
    fn new(mode: SslMode, root_cert: Option<&str>) -> Result<Verifier> {
        let explicit = root_cert.filter(|p| *p != SYSTEM_ROOTS);
        let check = match mode {
            SslMode::Disable => Check::Nothing,
            SslMode::Prefer | SslMode::Require if explicit.is_none() => Check::Nothing,
            SslMode::Prefer | SslMode::Require | SslMode::VerifyCa => Check::Chain,
            SslMode::VerifyFull => Check::ChainAndHost,
        };
        let (roots, pinned) = match (check, explicit) {
            (Check::Nothing, _) => (RootCertStore::empty(), Vec::new()),
            (_, Some(path)) => roots_from_file(path)?,
            (_, None) => (system_roots()?, Vec::new()),
        };
        Ok(Verifier {
            check,
            roots,
            pinned,
            provider: Arc::new(rustls::crypto::ring::default_provider()),
        })
    }

    /// The chain of `end_entity` leads to a trusted root, or it is a pinned certificate
    /// within its validity period.
    fn check_chain(
        &self,
        end_entity: &CertificateDer<'_>,
        parsed: &ParsedCertificate<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> std::result::Result<(), TlsError> {
        let algorithms = self.provider.signature_verification_algorithms.all;
        match verify_server_cert_signed_by_trust_anchor(
            parsed,
            &self.roots,
            intermediates,
            now,
            algorithms,
        ) {
            Ok(()) => Ok(()),
            Err(e) => match self
                .pinned
                .iter()
                .any(|p| p.as_ref() == end_entity.as_ref())
            {
                true => within_validity(end_entity, now),
                false => Err(e),
            },
        }
    }
}

/// `now` lies within the certificate's validity period.
fn within_validity(der: &CertificateDer<'_>, now: UnixTime) -> std::result::Result<(), TlsError> {
    let cert = Certificate::from_der(der).map_err(|_| CertificateError::BadEncoding)?;
    let validity = cert.tbs_certificate.validity;
    let now = Duration::from_secs(now.as_secs());
    if now < validity.not_before.to_unix_duration() {
        return Err(CertificateError::NotValidYet.into());
    }
    if now > validity.not_after.to_unix_duration() {
        return Err(CertificateError::Expired.into());
    }
    Ok(())
}

/// libpq's fallback for a certificate without subjectAltName: a common name of the subject
/// equals the host (ASCII case aside), or is `*.rest` and the host is one label then `.rest`.
fn common_name_matches(der: &CertificateDer<'_>, host: &str) -> bool {
    let Ok(cert) = Certificate::from_der(der) else {
        return false;
    };
    let tbs = &cert.tbs_certificate;
    let has_alt_names = tbs.extensions.as_ref().is_some_and(|exts| {
        exts.iter()
            .any(|e| e.extn_id == x509_cert::der::oid::db::rfc5280::ID_CE_SUBJECT_ALT_NAME)
    });
    if has_alt_names {
        return false;
    }
    tbs.subject
        .0
        .iter()
        .flat_map(|rdn| rdn.0.iter())
        .filter(|atv| atv.oid == x509_cert::der::oid::db::rfc4519::CN)
        .filter(|atv| {
            matches!(
                atv.value.tag(),
                Tag::Utf8String | Tag::PrintableString | Tag::Ia5String | Tag::TeletexString
            )
        })
        .filter_map(|atv| std::str::from_utf8(atv.value.value()).ok())
        .any(|name| name_matches(name, host))
}

fn name_matches(pattern: &str, host: &str) -> bool {
    if pattern.eq_ignore_ascii_case(host) {
        return true;
    }
    match pattern.strip_prefix('*') {
        Some(rest) if rest.starts_with('.') && host.len() > rest.len() => {
            let (label, tail) = host.split_at(host.len() - rest.len());
            tail.eq_ignore_ascii_case(rest) && !label.contains('.')
        }
        _ => false,
    }
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, TlsError> {
        if self.check == Check::Nothing {
            return Ok(ServerCertVerified::assertion());
        }
        let parsed = ParsedCertificate::try_from(end_entity)?;
        self.check_chain(end_entity, &parsed, intermediates, now)?;
        if self.check == Check::ChainAndHost {
            if let Err(e) = verify_server_name(&parsed, server_name) {
                if !common_name_matches(end_entity, &server_name.to_str()) {
                    return Err(e);
                }
            }
        }
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, TlsError> {
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
    ) -> std::result::Result<HandshakeSignatureValid, TlsError> {
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

/// What tokio-postgres's error says when the TLS step of a connection failed.
const TLS_STEP: &str = "error performing TLS handshake";

/// The connection failed in its TLS step for a reason a retry cannot change: TLS refused the
/// server's certificate or the server's alert ended the handshake (a rustls error), the host
/// cannot be a TLS server name, or the server does not offer TLS. A transport failure during
/// the handshake (reset, end of stream) is not one: the server may be restarting.
pub(crate) fn is_tls_refusal(error: &postgres::Error) -> bool {
    if !error.to_string().starts_with(TLS_STEP) {
        return false;
    }
    let Some(inner) = std::error::Error::source(error) else {
        return true;
    };
    match inner.downcast_ref::<std::io::Error>() {
        Some(io) => io.get_ref().is_some_and(|e| {
            e.is::<TlsError>() || e.is::<rustls::pki_types::InvalidDnsNameError>()
        }),
        None => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A test certificate (made with openssl, valid for a century): `ca` signed `leaf_san`
    /// (subjectAltName db.example.test and 127.0.0.1, CN not-the-host.example) and
    /// `leaf_cn` (CN *.example.test, no subjectAltName); `self_signed` is a CA:TRUE
    /// certificate for CN localhost, as `openssl req -x509` makes; `other_ca` signed nothing.
    fn pem_path(name: &str) -> String {
        format!(
            "{}/src/pg/config/testdata/{name}.pem",
            env!("CARGO_MANIFEST_DIR")
        )
    }

    fn der(name: &str) -> CertificateDer<'static> {
        let pem = std::fs::read(pem_path(name)).unwrap();
        CertificateDer::from_pem_slice(&pem).unwrap()
    }

    fn host(name: &str) -> ServerName<'static> {
        ServerName::try_from(name.to_string()).unwrap()
    }

    /// Whether the verifier for `mode` (trusting the PEM file `root`) accepts certificate
    /// `cert` from `server`, at `now`.
    fn verdict_at(
        mode: SslMode,
        root: Option<&str>,
        cert: &str,
        server: &str,
        now: UnixTime,
    ) -> std::result::Result<(), TlsError> {
        let root = root.map(pem_path);
        let v = Verifier::new(mode, root.as_deref()).unwrap();
        v.verify_server_cert(&der(cert), &[], &host(server), &[], now)
            .map(|_| ())
    }

    fn verdict(
        mode: SslMode,
        root: Option<&str>,
        cert: &str,
        server: &str,
    ) -> std::result::Result<(), TlsError> {
        verdict_at(mode, root, cert, server, UnixTime::now())
    }

    #[test]
    fn require_and_prefer_check_nothing_without_a_root_file() {
        for mode in [SslMode::Prefer, SslMode::Require] {
            for cert in ["self_signed", "leaf_san", "leaf_cn", "other_ca"] {
                assert!(
                    verdict(mode, None, cert, "anything.test").is_ok(),
                    "{mode:?}"
                );
            }
        }
    }

    #[test]
    fn an_explicit_root_file_makes_require_check_the_chain_as_libpq() {
        assert!(verdict(SslMode::Require, Some("ca"), "leaf_san", "x.test").is_ok());
        assert!(verdict(SslMode::Require, Some("ca"), "self_signed", "localhost").is_err());
        assert!(verdict(SslMode::Prefer, Some("other_ca"), "leaf_san", "x.test").is_err());
    }

    #[test]
    fn verify_ca_checks_the_chain_not_the_host() {
        for cert in ["leaf_san", "leaf_cn"] {
            assert!(verdict(SslMode::VerifyCa, Some("ca"), cert, "wrong.host").is_ok());
            assert!(verdict(SslMode::VerifyCa, Some("ca"), cert, "127.0.0.9").is_ok());
        }
        assert!(matches!(
            verdict(
                SslMode::VerifyCa,
                Some("other_ca"),
                "leaf_san",
                "db.example.test"
            ),
            Err(TlsError::InvalidCertificate(
                CertificateError::UnknownIssuer
            ))
        ));
        assert!(verdict(SslMode::VerifyCa, Some("ca"), "self_signed", "localhost").is_err());
    }

    #[test]
    fn verify_full_checks_the_chain_and_the_host() {
        let full = |root, cert, server| verdict(SslMode::VerifyFull, Some(root), cert, server);
        assert!(full("ca", "leaf_san", "db.example.test").is_ok());
        assert!(full("ca", "leaf_san", "DB.Example.Test").is_ok());
        assert!(full("ca", "leaf_san", "127.0.0.1").is_ok());
        // The CN is ignored when subjectAltName is present.
        assert!(full("ca", "leaf_san", "not-the-host.example").is_err());
        assert!(full("ca", "leaf_san", "other.example.test").is_err());
        assert!(full("ca", "leaf_san", "127.0.0.2").is_err());
        assert!(full("other_ca", "leaf_san", "db.example.test").is_err());
        // Without subjectAltName the CN names the host (one wildcard label).
        assert!(full("ca", "leaf_cn", "db.example.test").is_ok());
        assert!(full("ca", "leaf_cn", "a.db.example.test").is_err());
        assert!(full("ca", "leaf_cn", "example.test").is_err());
    }

    #[test]
    fn a_self_signed_root_file_pins_that_certificate() {
        let pinned = |mode, server| verdict(mode, Some("self_signed"), "self_signed", server);
        assert!(pinned(SslMode::VerifyCa, "127.0.0.1").is_ok());
        assert!(pinned(SslMode::Require, "127.0.0.1").is_ok());
        assert!(pinned(SslMode::VerifyFull, "localhost").is_ok());
        assert!(pinned(SslMode::VerifyFull, "127.0.0.1").is_err());
        // Pinned, but only within its validity period.
        let later = UnixTime::since_unix_epoch(Duration::from_secs(200 * 365 * 86_400 + 7));
        assert!(matches!(
            verdict_at(
                SslMode::VerifyCa,
                Some("self_signed"),
                "self_signed",
                "h",
                later
            ),
            Err(TlsError::InvalidCertificate(CertificateError::Expired))
        ));
        // Pinning is for self-signed certificates: a leaf in the root file is no root.
        assert!(verdict(SslMode::VerifyCa, Some("leaf_san"), "leaf_san", "h").is_err());
    }

    #[test]
    fn a_bad_root_file_is_a_config_error_naming_it() {
        let missing = Verifier::new(SslMode::VerifyCa, Some("/nonexistent/root.pem"));
        assert!(
            matches!(&missing, Err(PgError::Config(m)) if m.contains("/nonexistent/root.pem")),
            "{missing:?}"
        );
        let not_pem = format!("{}/Cargo.toml", env!("CARGO_MANIFEST_DIR"));
        let empty = Verifier::new(SslMode::VerifyFull, Some(&not_pem));
        assert!(
            matches!(&empty, Err(PgError::Config(m)) if m.contains("no PEM certificate")),
            "{empty:?}"
        );
        // require without a root file reads nothing, and neither does disable (a unix
        // socket's connection, whatever sslmode says) with one.
        assert!(Verifier::new(SslMode::Require, None).is_ok());
        assert!(Verifier::new(SslMode::Disable, Some("/nonexistent/root.pem")).is_ok());
    }

    #[test]
    fn common_name_wildcards_match_one_label() {
        assert!(name_matches("db.example.test", "DB.example.TEST"));
        assert!(name_matches("*.example.test", "db.example.test"));
        assert!(!name_matches("*.example.test", "a.b.example.test"));
        assert!(!name_matches("*.example.test", ".example.test"));
        assert!(!name_matches("*.example.test", "example.test"));
        assert!(!name_matches("*example.test", "myexample.test"));
    }
}
