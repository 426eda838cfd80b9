//! Shared helpers of the PostgreSQL store's tests: the server's URL, fresh schemas, child
//! processes acting as separate hosts.
#![allow(dead_code)]

use std::collections::HashMap;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};

use ctxbudget::pg::{PgConversation, PgOptions, PgStore, StoredRow};

/// Set by the test runner: a URL of a throwaway server (scripts/pg-cluster start).
pub const URL_ENV: &str = "CTXBUDGET_PG_URL";
/// Set by the test runner: the throwaway cluster's folder (for crash/resume).
pub const CLUSTER_ENV: &str = "CTXBUDGET_PG_CLUSTER";
/// When "1", a missing server fails the tests instead of skipping them (CI).
pub const REQUIRE_ENV: &str = "CTXBUDGET_REQUIRE_POSTGRES";
/// Role of a child process (see `child_main`).
pub const CHILD_ENV: &str = "CTXBUDGET_PG_TEST_CHILD";

/// The server's URL, or `None` (the test then returns early: skipped).
pub fn url() -> Option<String> {
    match std::env::var(URL_ENV) {
        Ok(u) if !u.is_empty() => Some(u),
        _ => {
            assert!(
                std::env::var(REQUIRE_ENV).as_deref() != Ok("1"),
                "{REQUIRE_ENV}=1 but {URL_ENV} is not set: start a server with \
                 `eval \"$(scripts/pg-cluster start)\"`"
            );
            eprintln!("skipped: {URL_ENV} is not set (./dev test starts a throwaway server)");
            None
        }
    }
}

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// A name unique to this process and call.
pub fn unique(prefix: &str) -> String {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("{prefix}_{}_{n}_{nanos}", std::process::id())
}

/// Options using the shared test schema `schema`.
pub fn options(schema: &str) -> PgOptions {
    PgOptions {
        schema: Some(schema.to_string()),
        ..PgOptions::default()
    }
}

/// A store on the shared test schema (created on first use).
pub fn store(url: &str) -> PgStore {
    PgStore::connect(url, options("ctxbudget_tests")).expect("connect to the test server")
}

/// A fresh conversation in the shared test schema.
pub fn conversation(url: &str, prefix: &str) -> PgConversation {
    store(url)
        .open(&unique(prefix))
        .expect("open a conversation")
}

/// A raw client for checks and sabotage outside the library (without TLS: the test
/// server accepts both).
pub fn raw(url: &str, schema: &str) -> postgres::Client {
    let plain = url.replace("sslmode=require", "sslmode=disable");
    let mut c = postgres::Client::connect(&plain, postgres::NoTls).expect("raw connect");
    c.batch_execute(&format!("SET search_path = \"{schema}\""))
        .expect("search_path");
    c
}

/// Set by the test runner: the root that signed the test server's certificate.
pub const ROOTCERT_ENV: &str = "CTXBUDGET_PG_ROOTCERT";

/// The PEM file of the root that signed the test server's certificate, when known.
pub fn root_cert() -> Option<String> {
    std::env::var(ROOTCERT_ENV)
        .ok()
        .filter(|p| !p.is_empty())
        .or_else(|| {
            std::env::var(CLUSTER_ENV)
                .ok()
                .map(|dir| format!("{dir}/root.crt"))
        })
}

/// Body of row `i` of batch `batch` (of `n` rows) written by `who`.
pub fn body(who: &str, batch: u64, i: usize, n: usize) -> Vec<u8> {
    format!(r#"{{"who":"{who}","batch":{batch},"i":{i},"n":{n}}}"#).into_bytes()
}

/// Parses a body back.
pub fn parse(row: &StoredRow) -> (String, u64, usize, usize) {
    let v: serde_json::Value = serde_json::from_slice(&row.body).expect("row body is JSON");
    (
        v["who"].as_str().unwrap_or_default().to_string(),
        v["batch"].as_u64().unwrap_or(0),
        v["i"].as_u64().unwrap_or(0) as usize,
        v["n"].as_u64().unwrap_or(0) as usize,
    )
}

/// Checks the invariants of a conversation's rows: seqs 1..=N without gaps, every batch
/// present once and whole (its rows consecutive, in order). Returns (who, batch) → first seq.
pub fn check_batches(rows: &[StoredRow]) -> HashMap<(String, u64), u64> {
    for (i, r) in rows.iter().enumerate() {
        assert_eq!(r.seq, i as u64 + 1, "seqs must be gapless from 1");
    }
    let mut seen: HashMap<(String, u64), u64> = HashMap::new();
    let mut i = 0;
    while i < rows.len() {
        let (who, batch, k, n) = parse(&rows[i]);
        assert_eq!(k, 0, "seq {} starts inside a batch", rows[i].seq);
        assert!(
            seen.insert((who.clone(), batch), rows[i].seq).is_none(),
            "batch {who}/{batch} is present twice"
        );
        for j in 0..n {
            let r = rows
                .get(i + j)
                .unwrap_or_else(|| panic!("batch {who}/{batch} is cut"));
            assert_eq!(
                parse(r),
                (who.clone(), batch, j, n),
                "batch {who}/{batch} is not whole"
            );
        }
        i += n;
    }
    seen
}

/// Starts this test binary again as a child running test `test` with `role`.
pub fn spawn_child(test: &str, role: &str, envs: &[(&str, String)]) -> Child {
    let exe = std::env::current_exe().expect("current_exe");
    let mut cmd = Command::new(exe);
    cmd.args([
        test,
        "--exact",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(CHILD_ENV, role)
    .stdout(Stdio::piped())
    .stderr(Stdio::inherit());
    for (k, v) in envs {
        cmd.env(k, v);
    }
    cmd.spawn().expect("spawn child")
}

/// The repository's scripts/pg-cluster.
pub fn cluster_script() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/pg-cluster")
}

/// Runs `scripts/pg-cluster ACTION CLUSTER`.
pub fn cluster(action: &str, dir: &str) {
    let status = Command::new(cluster_script())
        .args([action, dir])
        .status()
        .expect("run scripts/pg-cluster");
    assert!(status.success(), "scripts/pg-cluster {action} failed");
}

/// `url` with its user replaced by `role` (the test server trusts every local role, so
/// no password is needed).
pub fn as_role(url: &str, role: &str) -> String {
    let (scheme, rest) = url.split_once("://").expect("a URL with a scheme");
    let host = rest.rsplit_once('@').map_or(rest, |(_, host)| host);
    format!("{scheme}://{role}@{host}")
}

/// Creates the login role `role` with `USAGE` on `schema` and `grants` (e.g. `SELECT`)
/// on every table in it, as an operator following docs/guide-deploy.md would.
pub fn create_role(url: &str, schema: &str, role: &str, grants: &str) {
    let mut admin = raw(url, schema);
    admin
        .batch_execute(&format!(
            "CREATE ROLE \"{role}\" LOGIN; \
             GRANT USAGE ON SCHEMA \"{schema}\" TO \"{role}\"; \
             GRANT {grants} ON ALL TABLES IN SCHEMA \"{schema}\" TO \"{role}\""
        ))
        .expect("create the role");
}
