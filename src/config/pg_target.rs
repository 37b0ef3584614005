//! Reaching the PostgreSQL store (`store.url`), read with the rest of the settings: `store.url` read into the client's configuration, the
//! password from the URL or given apart (`.env`, a file), TLS as the URL's `sslmode` asks,
//! and the URL as it may be shown (its password masked).
//!
//! `sslmode` is read here, not by tokio-postgres (which knows only `disable`, `prefer` and
//! `require`): `disable` is plain; `prefer` (libpq's default) and `require` encrypt without
//! checking the certificate, as libpq does; `verify-full` checks it against `sslrootcert`
//! (a PEM file) or the system's roots and checks the name. `verify-ca` is refused: rustls
//! has no check of the chain without the name, and a weaker check than asked is not given
//! silently. A socket directory (`host=/dir`) has no TLS.

use std::str::FromStr;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime, pem::PemObject};
use rustls::{DigitallySignedStruct, SignatureScheme};

/// Where the store is and how to reach it.
#[derive(Clone)]
pub struct PgTarget {
    config: postgres::Config,
    tls: Option<rustls::ClientConfig>,
    shown: String,
}

impl std::fmt::Debug for PgTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgTarget")
            .field("url", &self.shown)
            .finish()
    }
}

/// Whether `url` names a PostgreSQL store.
pub fn is_postgres_url(url: &str) -> bool {
    url.starts_with("postgres://") || url.starts_with("postgresql://")
}

impl PgTarget {
    /// Read `url`; `password` (from `.env` or a file) is used when the URL has none.
    pub fn parse(url: &str, password: Option<&str>) -> Result<PgTarget, String> {
        let shown = masked(url);
        let invalid = |why: String| format!("{shown}: {why}");
        if !is_postgres_url(url) {
            return Err(invalid("not a postgres:// URL".into()));
        }
        let (base, query) = url.split_once('?').unwrap_or((url, ""));
        let mut kept = Vec::new();
        let (mut mode, mut root) = (None, None);
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            match key {
                "sslmode" => mode = Some(value.to_owned()),
                "sslrootcert" => root = Some(percent_decode(value)),
                _ => kept.push(pair),
            }
        }
        let rebuilt = if kept.is_empty() {
            base.to_owned()
        } else {
            format!("{base}?{}", kept.join("&"))
        };
        let mut config =
            postgres::Config::from_str(&rebuilt).map_err(|e| invalid(e.to_string()))?;
        if config.get_password().is_none()
            && let Some(password) = password
        {
            config.password(password);
        }
        if config.get_dbname().is_none() {
            return Err(invalid("it names no database".into()));
        }
        config.application_name("hermes-gateway");
        config.connect_timeout(std::time::Duration::from_secs(10));
        let mode = mode.as_deref().unwrap_or("prefer");
        let tls = match mode {
            "disable" => {
                config.ssl_mode(postgres::config::SslMode::Disable);
                None
            }
            "allow" | "prefer" | "require" => {
                config.ssl_mode(if mode == "require" {
                    postgres::config::SslMode::Require
                } else {
                    postgres::config::SslMode::Prefer
                });
                Some(unchecked_tls())
            }
            "verify-full" => {
                config.ssl_mode(postgres::config::SslMode::Require);
                Some(checked_tls(root.as_deref()).map_err(invalid)?)
            }
            "verify-ca" => {
                return Err(invalid(
                    "sslmode=verify-ca is not supported (the certificate's name is always checked): use verify-full".into(),
                ));
            }
            other => return Err(invalid(format!("unknown sslmode {other:?}"))),
        };
        // A socket directory has no TLS, and the TLS connector refuses its path as a name.
        let sockets_only = config
            .get_hosts()
            .iter()
            .all(|host| matches!(host, postgres::config::Host::Unix(_)));
        let tls = if sockets_only { None } else { tls };
        Ok(PgTarget { config, tls, shown })
    }

    /// The password it connects with, to be blanked wherever it might show.
    pub fn password(&self) -> Option<String> {
        self.config
            .get_password()
            .map(|p| String::from_utf8_lossy(p).into_owned())
    }

    /// The URL with its password masked, for logs and errors.
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// A new connection (blocking: not on a runtime's thread).
    pub fn connect(&self) -> Result<postgres::Client, postgres::Error> {
        match &self.tls {
            Some(tls) => self
                .config
                .connect(tokio_postgres_rustls::MakeRustlsConnect::new(tls.clone())),
            None => self.config.connect(postgres::NoTls),
        }
    }
}

/// The URL with the password between `:` and `@` replaced (a `password=` parameter too).
pub fn masked(url: &str) -> String {
    let (base, query) = url.split_once('?').unwrap_or((url, ""));
    let mut shown = match base.split_once("://") {
        Some((scheme, rest)) => match rest.rsplit_once('@') {
            Some((user, host)) => match user.split_once(':') {
                Some((name, _)) => format!("{scheme}://{name}:***@{host}"),
                None => base.to_owned(),
            },
            None => base.to_owned(),
        },
        None => base.to_owned(),
    };
    if !query.is_empty() {
        let pairs: Vec<String> = query
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some(("password", _)) => "password=***".to_owned(),
                _ => pair.to_owned(),
            })
            .collect();
        shown.push('?');
        shown.push_str(&pairs.join("&"));
    }
    shown
}

fn percent_decode(value: &str) -> String {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(byte) = value
                .get(i + 1..i + 3)
                .and_then(|hex| u8::from_str_radix(hex, 16).ok())
        {
            out.push(byte);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// TLS that checks the certificate's chain and name: against `root` (a PEM file) or the
/// system's roots.
fn checked_tls(root: Option<&str>) -> Result<rustls::ClientConfig, String> {
    let builder = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let mut roots = rustls::RootCertStore::empty();
    match root {
        Some(path) => {
            for cert in CertificateDer::pem_file_iter(path)
                .map_err(|e| format!("sslrootcert {path}: {e}"))?
            {
                let cert = cert.map_err(|e| format!("sslrootcert {path}: {e}"))?;
                roots
                    .add(cert)
                    .map_err(|e| format!("sslrootcert {path}: {e}"))?;
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            for cert in found.certs {
                let _ = roots.add(cert);
            }
        }
    }
    if roots.is_empty() {
        return Err(
            "sslmode=verify-full: no root certificate to check the server's against".into(),
        );
    }
    Ok(builder.with_root_certificates(roots).with_no_client_auth())
}

/// TLS that encrypts without checking who answers (libpq's `prefer` and `require`).
fn unchecked_tls() -> rustls::ClientConfig {
    let provider = provider();
    rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("ring supports the default protocol versions")
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
        .with_no_client_auth()
}

/// Accepts any certificate, but still checks the handshake's signatures with it.
#[derive(Debug)]
struct AnyCertificate(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
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
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_password_never_shows() {
        assert_eq!(
            masked("postgres://hermes:s3cret@db.example:5432/hermes?sslmode=verify-full"),
            "postgres://hermes:***@db.example:5432/hermes?sslmode=verify-full"
        );
        assert_eq!(
            masked("postgresql:///hermes?host=/run/pg&password=s3cret"),
            "postgresql:///hermes?host=/run/pg&password=***"
        );
        let target = PgTarget::parse("postgres://hermes:s3cret@db.example/hermes", None).unwrap();
        assert!(!format!("{target:?}").contains("s3cret"));
    }

    #[test]
    fn sslmodes_are_read_here_and_a_weaker_check_is_refused() {
        for mode in ["disable", "prefer", "require"] {
            let target =
                PgTarget::parse(&format!("postgres://h@db/x?sslmode={mode}"), None).unwrap();
            assert_eq!(target.tls.is_some(), mode != "disable", "{mode}");
        }
        let err = PgTarget::parse("postgres://h@db/x?sslmode=verify-ca", None).unwrap_err();
        assert!(err.contains("verify-full"), "{err}");
        let err = PgTarget::parse("postgres://h@db/x?sslmode=bogus", None).unwrap_err();
        assert!(err.contains("bogus"), "{err}");
        let err = PgTarget::parse(
            "postgres://h@db/x?sslmode=verify-full&sslrootcert=/nonexistent.pem",
            None,
        )
        .unwrap_err();
        assert!(err.contains("/nonexistent.pem"), "{err}");
        assert!(
            PgTarget::parse("postgres://h@db", None).is_err(),
            "no database"
        );
    }

    #[test]
    fn a_password_given_apart_is_used_only_when_the_url_has_none() {
        let target = PgTarget::parse("postgres://h@db/x", Some("apart")).unwrap();
        assert_eq!(target.config.get_password(), Some(&b"apart"[..]));
        let target = PgTarget::parse("postgres://h:inline@db/x", Some("apart")).unwrap();
        assert_eq!(target.config.get_password(), Some(&b"inline"[..]));
    }
}
