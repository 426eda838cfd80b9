//! Connection settings: the URL, TLS, the pool and the schema.

use std::str::FromStr;
use std::time::Duration;

use tokio_postgres_rustls::MakeRustlsConnect;

use super::error::{PgError, Result};

mod redact;
mod tls;
pub(crate) use redact::redact_secrets;
pub(crate) use tls::is_tls_refusal;

/// Default of [`PgOptions::idle_in_transaction_timeout`].
pub const IDLE_IN_TRANSACTION_TIMEOUT: Duration = Duration::from_secs(60);

/// How a [`PgStore`](super::PgStore) connects.
#[derive(Clone, Debug)]
pub struct PgOptions {
    /// Most connections the pool opens (default 8).
    pub pool_size: usize,
    /// Longest wait for a free pooled connection (default 30 s).
    pub pool_timeout: Duration,
    /// Longest wait for the server to accept a connection (default 10 s).
    pub connect_timeout: Duration,
    /// How long an operation keeps reconnecting and retrying when the connection breaks or
    /// the server restarts (default 30 s; zero = no retry). Appends are retried under their
    /// batch id, so a retry never commits a batch twice.
    pub reconnect_for: Duration,
    /// The PostgreSQL schema holding the tables (created if missing); `None` = the
    /// connection's `search_path` (normally `public`).
    pub schema: Option<String>,
    /// Longest a session may sit idle inside a transaction before the server ends it
    /// (default 60 s), so that a client that hangs while holding a conversation's lock
    /// cannot stop the other hosts; its transaction is rolled back. At least 1 ms.
    pub idle_in_transaction_timeout: Duration,
    /// Whether connecting creates or migrates the schema when it is missing or older
    /// (default true: the simple case). False for runtime roles without `CREATE`: the
    /// store then only checks the version and fails with
    /// [`PgError::NotMigrated`](super::PgError::NotMigrated) until the migration has
    /// been run ([`PgStore::migrate`](super::PgStore::migrate), `ctxbudget db migrate`).
    pub migrate: bool,
    /// The server's `statement_timeout` for every session of the pool (`None`: the
    /// server's own setting). A statement cancelled by it fails with a database error.
    pub statement_timeout: Option<Duration>,
    /// The server's `lock_timeout` for every session of the pool (`None`: the server's
    /// own setting): how long a write waits for a conversation another host is writing.
    pub lock_timeout: Option<Duration>,
}

impl Default for PgOptions {
    fn default() -> Self {
        PgOptions {
            pool_size: 8,
            pool_timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(10),
            reconnect_for: Duration::from_secs(30),
            schema: None,
            idle_in_transaction_timeout: IDLE_IN_TRANSACTION_TIMEOUT,
            migrate: true,
            statement_timeout: None,
            lock_timeout: None,
        }
    }
}

/// How TLS is used, as libpq's `sslmode` says. As in libpq, an explicit `sslrootcert` file
/// makes `prefer` and `require` verify the certificate chain too.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SslMode {
    /// No TLS.
    Disable,
    /// TLS when the server offers it, not verified (libpq's default).
    Prefer,
    /// TLS required; the certificate is not verified (libpq's `require`).
    Require,
    /// TLS required; the certificate chain is verified (against `sslrootcert`, else the
    /// system's roots), not the host name.
    VerifyCa,
    /// TLS required; the certificate chain and the host name are verified.
    VerifyFull,
}

/// A parsed connection URL and the TLS connector it asks for.
pub(crate) struct Target {
    pub config: postgres::Config,
    pub tls: MakeRustlsConnect,
    pub ssl_mode: SslMode,
}

/// Parses `postgres://` / `postgresql://` URLs. Besides libpq's usual parameters it takes
/// `sslmode` (`disable|prefer|require|verify-ca|verify-full`) and `sslrootcert` (a PEM file
/// of trusted roots; `system` or none = the system's roots for the verify modes).
pub(crate) fn parse(url: &str, options: &PgOptions) -> Result<Target> {
    check_scheme(url)?;
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, q),
        None => (url, ""),
    };
    let mut ssl_mode = SslMode::Prefer;
    let mut root_cert: Option<String> = None;
    let mut kept: Vec<&str> = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        match key {
            "sslmode" => {
                ssl_mode = match value {
                    "disable" => SslMode::Disable,
                    "allow" | "prefer" => SslMode::Prefer,
                    "require" => SslMode::Require,
                    "verify-ca" => SslMode::VerifyCa,
                    "verify-full" => SslMode::VerifyFull,
                    other => {
                        return Err(PgError::Config(format!(
                            "sslmode={other} is not one of disable, prefer, require, \
                             verify-ca, verify-full"
                        )))
                    }
                }
            }
            "sslrootcert" => root_cert = Some(percent_decode(value)?),
            _ => kept.push(pair),
        }
    }
    let driver_mode = match ssl_mode {
        SslMode::Disable => "disable",
        SslMode::Prefer => "prefer",
        _ => "require",
    };
    kept.push(match driver_mode {
        "disable" => "sslmode=disable",
        "prefer" => "sslmode=prefer",
        _ => "sslmode=require",
    });
    let rebuilt = format!("{base}?{}", kept.join("&"));
    let mut config = postgres::Config::from_str(&rebuilt).map_err(|e| {
        // The driver's message is "invalid connection string"; what is invalid (an
        // unknown option, a bad value) is its source's.
        let why = std::error::Error::source(&e).map_or(String::new(), |s| format!(" ({s})"));
        PgError::Config(format!(
            "cannot parse the URL {:?}: {e}{why}",
            redact_secrets(url)
        ))
    })?;
    check_complete(&config, url)?;
    // As libpq, no TLS over unix sockets (the server offers none there; the socket's
    // permissions guard it): sslmode applies to TCP hosts only.
    let unix_only = !config.get_hosts().is_empty()
        && config.get_hostaddrs().is_empty()
        && config
            .get_hosts()
            .iter()
            .all(|h| !matches!(h, postgres::config::Host::Tcp(_)));
    if unix_only {
        config.ssl_mode(postgres::config::SslMode::Disable);
    }
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(options.connect_timeout);
    }
    // Server settings for every session, after any `options` the URL gives.
    let mut settings: Vec<String> = config
        .get_options()
        .map(str::to_string)
        .into_iter()
        .collect();
    settings.push(format!(
        "-c idle_in_transaction_session_timeout={}",
        options.idle_in_transaction_timeout.as_millis().max(1)
    ));
    for (name, value) in [
        ("statement_timeout", options.statement_timeout),
        ("lock_timeout", options.lock_timeout),
    ] {
        if let Some(value) = value {
            settings.push(format!("-c {name}={}", value.as_millis().max(1)));
        }
    }
    if let Some(schema) = &options.schema {
        if schema.is_empty() || schema.len() > 63 || schema.contains('\0') {
            return Err(PgError::Config(format!(
                "schema name {schema:?} must be 1 to 63 bytes without NUL"
            )));
        }
        let quoted = super::schema::quote_ident(schema);
        // The options string is split on spaces; a backslash escapes one.
        settings.push(format!("-c search_path={}", quoted.replace(' ', "\\ ")));
    }
    config.options(&settings.join(" "));
    if config.get_application_name().is_none() {
        config.application_name("ctxbudget");
    }
    let tls_mode = if unix_only {
        SslMode::Disable
    } else {
        ssl_mode
    };
    let tls = tls::connector(tls_mode, root_cert.as_deref())?;
    Ok(Target {
        config,
        tls,
        ssl_mode,
    })
}

/// What the driver would refuse only when connecting (as "invalid configuration", which
/// would then be retried as if the server were down): refused here, at once, as what it is.
fn check_complete(config: &postgres::Config, url: &str) -> Result<()> {
    let (hosts, addrs) = (config.get_hosts().len(), config.get_hostaddrs().len());
    let problem = if hosts == 0 && addrs == 0 {
        Some("it names no host (postgresql://user@HOST/database)".to_owned())
    } else if hosts > 0 && addrs > 0 && hosts != addrs {
        Some(format!("it names {hosts} hosts but {addrs} hostaddrs"))
    } else if config.get_ports().len() > 1 && config.get_ports().len() != hosts.max(addrs) {
        Some(format!(
            "it names {} ports for {} hosts",
            config.get_ports().len(),
            hosts.max(addrs)
        ))
    } else if config.get_user().is_none() {
        Some("it names no user (postgresql://USER@host/database)".to_owned())
    } else {
        None
    };
    match problem {
        Some(problem) => Err(PgError::Config(format!(
            "the URL {:?} is incomplete: {problem}",
            redact_secrets(url)
        ))),
        None => Ok(()),
    }
}

/// The URL schemes accepted, as messages name them.
pub(crate) const ACCEPTED_FORMS: &str =
    "postgresql://user@host:port/database (or postgres://…), with libpq parameters after `?`";

/// Refuses anything but a `postgresql://` or `postgres://` URL, naming the accepted forms;
/// an SQLAlchemy-style `postgresql+asyncpg://` is told to drop its driver (the URL's
/// parameters are read as libpq's, not as that driver's, so it is not guessed at).
fn check_scheme(url: &str) -> Result<()> {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        return Ok(());
    }
    let advice = match url.split_once("://") {
        Some((scheme, _)) if scheme.starts_with("postgres") && scheme.contains('+') => {
            let (base, driver) = scheme.split_once('+').unwrap_or((scheme, ""));
            format!("; drop +{driver}: ctxbudget connects with its own driver, so write {base}://…")
        }
        _ => String::new(),
    };
    Err(PgError::Config(format!(
        "expected a URL {ACCEPTED_FORMS}, got {:?}{advice}",
        redact_secrets(url)
    )))
}

fn percent_decode(value: &str) -> Result<String> {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
            let byte = u8::from_str_radix(hex, 16)
                .map_err(|_| PgError::Config(format!("bad percent escape in {value:?}")))?;
            out.push(byte);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| PgError::Config(format!("{value:?} is not UTF-8")))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every way `parse` can refuse a URL names no secret, in `Display` or `Debug`.
    #[test]
    fn refusals_never_show_a_secret() {
        let o = PgOptions::default();
        let secret = "Zq8-unlikely-PW";
        for url in [
            format!("postgresql+asyncpg://bob:{secret}@db/x"),
            format!("postgres+psycopg://bob:{secret}@db/x"),
            format!("mysql://bob:{secret}@db/x"),
            format!("postgresql://bob:{secret}@"),
            format!("postgresql://bob:{secret}@/x"),
            format!("postgresql://h1,h2:1,2,3/x?password={secret}"),
            format!("host=db password={secret}"),
            format!("postgresql://bob:{secret}@db/x?nosuchparameter=1"),
            format!("postgresql://bob@db/x?password={secret}&nosuchparameter=1"),
            format!("postgresql://bob@db/x?sslpassword={secret}&sslmode=sometimes"),
            format!("postgresql://bob@db/x?password={secret}&port=notaport"),
            format!("postgresql://bob:{secret}@db/x?sslmode=verify-ca&sslrootcert=%2Fno%2Fca.pem"),
        ] {
            let Err(e) = parse(&url, &o) else {
                panic!("{url} was accepted")
            };
            for shown in [e.to_string(), format!("{e:?}")] {
                assert!(!shown.contains(secret), "{shown}");
                assert!(!shown.contains("Zq8"), "{shown}");
            }
        }
        // Whoever builds the error, its text goes through the redaction.
        let built = PgError::Config(format!("postgresql://u:{secret}@h/x"));
        assert!(!built.to_string().contains(secret));
        assert!(!format!("{built:?}").contains(secret));
    }

    #[test]
    fn a_driver_suffix_is_refused_with_what_to_drop() {
        let o = PgOptions::default();
        match parse("postgresql+asyncpg://u@h/db", &o) {
            Err(PgError::Config(m)) => {
                assert!(m.contains("drop +asyncpg"), "{m}");
                assert!(m.contains("postgresql://"), "{m}");
            }
            other => panic!("expected a Config error, got {:?}", other.err()),
        }
    }

    #[test]
    fn parses_ssl_modes() {
        let o = PgOptions::default();
        for (mode, want) in [
            ("disable", SslMode::Disable),
            ("prefer", SslMode::Prefer),
            ("require", SslMode::Require),
            ("verify-ca", SslMode::VerifyCa),
            ("verify-full", SslMode::VerifyFull),
        ] {
            // A root file of the tests', so that the verify modes need no system roots.
            let root = format!(
                "{}/src/pg/config/testdata/ca.pem",
                env!("CARGO_MANIFEST_DIR")
            );
            let t = parse(
                &format!("postgresql://u@h/db?sslmode={mode}&sslrootcert={root}"),
                &o,
            );
            assert_eq!(t.map(|t| t.ssl_mode).ok(), Some(want), "{mode}");
        }
        // A root file that cannot be read is named, at parse time.
        match parse(
            "postgresql://u@h/db?sslmode=verify-ca&sslrootcert=%2Fno%2Fca.pem",
            &o,
        ) {
            Err(PgError::Config(m)) => assert!(m.contains("/no/ca.pem"), "{m}"),
            other => panic!("expected a Config error, got {:?}", other.err()),
        }
        assert!(matches!(
            parse("postgresql://u@h/db?sslmode=sometimes", &o),
            Err(PgError::Config(_))
        ));
        assert!(matches!(
            parse("mysql://u@h/db", &o),
            Err(PgError::Config(_))
        ));
        assert_eq!(
            percent_decode("%2Ftmp%2Fa.pem").ok().as_deref(),
            Some("/tmp/a.pem")
        );
    }
}
