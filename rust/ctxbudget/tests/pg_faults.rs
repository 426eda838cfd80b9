//! Faults of the PostgreSQL store against a real server (feature `postgres`; skipped
//! without `CTXBUDGET_PG_URL`): processes acting as separate hosts, a client SIGKILLed
//! inside a transaction, the server stopped with `pg_ctl stop -m immediate` and restarted
//! under load, connections dropped by the server. Every acknowledged batch must be present
//! exactly once, no batch half-present, seqs gapless, and clients go on.
#![cfg(feature = "postgres")]

mod pg_common;

use std::io::{BufRead, BufReader, Write};
use std::process::Child;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ctxbudget::pg::{AppendOptions, NewRow, PgOptions, PgStore};
use pg_common::*;

const SCHEMA: &str = "ctxbudget_fault_tests";

/// The tests of this file run one at a time: one of them crashes the server.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

fn child_store(url: &str) -> PgStore {
    let idle = std::env::var("IDLE_MS").ok().and_then(|v| v.parse().ok());
    let options = PgOptions {
        reconnect_for: Duration::from_secs(120),
        idle_in_transaction_timeout: Duration::from_millis(idle.unwrap_or(60_000)),
        ..options(SCHEMA)
    };
    PgStore::connect(url, options).expect("child: connect")
}

/// Entry point of the child processes, not a test of its own: the tests below start this
/// binary again with `--ignored child`.
#[test]
#[ignore = "entry point of the child processes that the other tests start"]
fn child() {
    let role = std::env::var(CHILD_ENV).expect("child: started without a role");
    let url = std::env::var(URL_ENV).expect("child: URL");
    let id = std::env::var("CONV").expect("child: CONV");
    let who = std::env::var("WHO").expect("child: WHO");
    let c = child_store(&url).open(&id).expect("child: open");
    let mut out = std::io::stdout();
    match role.as_str() {
        "appender" => {
            let batches: u64 = std::env::var("BATCHES")
                .expect("BATCHES")
                .parse()
                .expect("n");
            for b in 0..batches {
                let n = 1 + (b as usize % 4);
                let opts = AppendOptions {
                    batch_id: Some(format!("{who}-{b}")),
                    ..AppendOptions::default()
                };
                let a = c
                    .append_with(&opts, |_| {
                        (0..n).map(|i| NewRow::new(body(&who, b, i, n))).collect()
                    })
                    .unwrap_or_else(|e| panic!("child {who}: batch {b}: {e}"));
                writeln!(out, "ack {b} {}", a.first_seq).expect("stdout");
                out.flush().expect("flush");
            }
        }
        "hold" => {
            let _ = c.append_with(&AppendOptions::default(), |_| {
                // Inside the transaction, holding the conversation's row lock.
                writeln!(out, "locked").expect("stdout");
                out.flush().expect("flush");
                std::thread::sleep(Duration::from_secs(120));
                vec![NewRow::new(body(&who, 0, 0, 1))]
            });
            panic!("the hold child must be killed");
        }
        other => panic!("unknown child role {other}"),
    }
}

/// A child's acknowledgements so far: (batch, first seq).
type Acks = Arc<Mutex<Vec<(u64, u64)>>>;

/// Reads a child's `ack <batch> <first seq>` lines as they come.
fn collect_acks(child: &mut Child) -> (Acks, std::thread::JoinHandle<()>) {
    let acks = Arc::new(Mutex::new(Vec::new()));
    let stdout = child.stdout.take().expect("piped stdout");
    let sink = acks.clone();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            // The test harness may print on the same line before the child's output.
            let Some(at) = line.find("ack ") else {
                continue;
            };
            let mut words = line[at + 4..].split_whitespace();
            let b = words.next().and_then(|w| w.parse().ok()).expect("batch");
            let s = words.next().and_then(|w| w.parse().ok()).expect("seq");
            sink.lock().unwrap().push((b, s));
        }
    });
    (acks, reader)
}

fn appender(url: &str, id: &str, who: &str, batches: u64) -> Child {
    spawn_child(
        "child",
        "appender",
        &[
            (URL_ENV, url.to_string()),
            ("CONV", id.to_string()),
            ("WHO", who.to_string()),
            ("BATCHES", batches.to_string()),
        ],
    )
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    // Bounded: 120 s at most, then the test fails saying what it waited for.
    for _ in 0..12_000 {
        if done() {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("gave up waiting for {what}");
}

fn check_acks(
    stored: &std::collections::HashMap<(String, u64), u64>,
    who: &str,
    acks: &[(u64, u64)],
) {
    for (b, first) in acks {
        assert_eq!(
            stored.get(&(who.to_string(), *b)),
            Some(first),
            "acknowledged batch {who}/{b} at seq {first} must be present once, there"
        );
    }
}

#[test]
fn a_hung_client_cannot_hold_a_conversation() {
    let Some(url) = url() else { return };
    let _serial = serial();
    let id = unique("hung");
    let c = child_store(&url).open(&id).unwrap();
    // The child hangs inside its append's transaction (it is not killed); the server ends
    // its session after its idle-in-transaction timeout (1 s here), and the lock with it.
    let mut hold = spawn_child(
        "child",
        "hold",
        &[
            (URL_ENV, url.clone()),
            ("CONV", id.clone()),
            ("WHO", "hung".into()),
            ("IDLE_MS", "1000".into()),
        ],
    );
    let lines = BufReader::new(hold.stdout.take().unwrap()).lines();
    let locked = lines.map_while(Result::ok).any(|l| l.contains("locked"));
    assert!(locked, "the hold child did not reach its transaction");
    let appended = c
        .append(vec![NewRow::new(body("parent", 0, 0, 1))])
        .unwrap();
    assert_eq!(appended.first_seq, 1, "nothing of the hung client's batch");
    hold.kill().unwrap();
    hold.wait().unwrap();
    let stored = check_batches(&c.rows_since(1, None).unwrap());
    assert_eq!(stored.len(), 1);
}

#[test]
fn processes_as_hosts_append_to_one_conversation() {
    let Some(url) = url() else { return };
    let _serial = serial();
    let id = unique("procs");
    child_store(&url).open(&id).unwrap();
    let (n, batches) = (4, 30);
    let mut kids: Vec<_> = (0..n)
        .map(|k| {
            let mut c = appender(&url, &id, &format!("p{k}"), batches);
            let (acks, reader) = collect_acks(&mut c);
            (c, acks, reader)
        })
        .collect();
    let mut all = Vec::new();
    for (k, (child, acks, reader)) in kids.iter_mut().enumerate() {
        assert!(child.wait().unwrap().success(), "child {k} failed");
        all.push((format!("p{k}"), acks.clone()));
        let _ = reader;
    }
    for (_, _, reader) in kids {
        reader.join().unwrap();
    }
    let stored = check_batches(
        &child_store(&url)
            .open(&id)
            .unwrap()
            .rows_since(1, None)
            .unwrap(),
    );
    assert_eq!(stored.len(), (n as u64 * batches) as usize);
    for (who, acks) in all {
        let acks = acks.lock().unwrap();
        assert_eq!(acks.len() as u64, batches);
        check_acks(&stored, &who, &acks);
    }
}

#[test]
fn a_client_killed_inside_a_transaction_leaves_nothing() {
    let Some(url) = url() else { return };
    let _serial = serial();
    let id = unique("kill");
    let c = child_store(&url).open(&id).unwrap();
    c.append(vec![NewRow::new(body("parent", 0, 0, 1))])
        .unwrap();
    // 1. Killed while holding the conversation's lock inside its transaction.
    let mut hold = spawn_child(
        "child",
        "hold",
        &[
            (URL_ENV, url.clone()),
            ("CONV", id.clone()),
            ("WHO", "hold".into()),
        ],
    );
    let lines = BufReader::new(hold.stdout.take().unwrap()).lines();
    let locked = lines.map_while(Result::ok).any(|l| l.contains("locked"));
    assert!(locked, "the hold child did not reach its transaction");
    hold.kill().unwrap(); // SIGKILL
    hold.wait().unwrap();
    // The lock died with the client: the next append goes on, nothing of the killed one.
    let next = c
        .append(vec![NewRow::new(body("parent", 1, 0, 1))])
        .unwrap();
    assert_eq!(next.first_seq, 2);
    // 2. Killed at an arbitrary moment of a stream of appends.
    let mut kid = appender(&url, &id, "k", 10_000);
    let (acks, reader) = collect_acks(&mut kid);
    wait_for("40 acknowledged batches", || {
        acks.lock().unwrap().len() >= 40
    });
    kid.kill().unwrap();
    kid.wait().unwrap();
    reader.join().unwrap();
    c.append(vec![NewRow::new(body("parent", 2, 0, 1))])
        .unwrap();
    let stored = check_batches(&c.rows_since(1, None).unwrap());
    check_acks(&stored, "k", &acks.lock().unwrap());
    assert!(stored.contains_key(&("parent".to_string(), 2)));
    assert!(!stored.contains_key(&("hold".to_string(), 0)));
}

#[test]
fn the_server_crashes_and_restarts_under_load() {
    let Some(url) = url() else { return };
    let _serial = serial();
    let Ok(dir) = std::env::var(CLUSTER_ENV) else {
        assert!(
            std::env::var(REQUIRE_ENV).as_deref() != Ok("1"),
            "{REQUIRE_ENV}=1 but {CLUSTER_ENV} is not set (scripts/pg-cluster start sets it)"
        );
        eprintln!("skipped: {CLUSTER_ENV} is not set, the server cannot be crashed");
        return;
    };
    let id = unique("crash");
    child_store(&url).open(&id).unwrap();
    let (n, batches) = (3, 60u64);
    let mut kids: Vec<_> = (0..n)
        .map(|k| {
            let mut c = appender(&url, &id, &format!("c{k}"), batches);
            let (acks, reader) = collect_acks(&mut c);
            (c, acks, reader)
        })
        .collect();
    let acked = |kids: &[(Child, Acks, _)], at_least: usize| {
        kids.iter()
            .all(|(_, a, _)| a.lock().unwrap().len() >= at_least)
    };
    wait_for("every client's first acks", || acked(&kids, 5));
    cluster("crash", &dir); // pg_ctl stop -m immediate: no checkpoint, clients cut off
    let before: usize = kids.iter().map(|(_, a, _)| a.lock().unwrap().len()).sum();
    std::thread::sleep(Duration::from_millis(500));
    cluster("resume", &dir); // WAL recovery, then clients reconnect
    let mut results = Vec::new();
    for (k, (mut child, acks, reader)) in kids.drain(..).enumerate() {
        assert!(child.wait().unwrap().success(), "client {k} did not go on");
        reader.join().unwrap();
        results.push((format!("c{k}"), acks));
    }
    let stored = check_batches(
        &child_store(&url)
            .open(&id)
            .unwrap()
            .rows_since(1, None)
            .unwrap(),
    );
    assert_eq!(stored.len(), n * batches as usize);
    let mut total = 0;
    for (who, acks) in results {
        let acks = acks.lock().unwrap();
        assert_eq!(acks.len() as u64, batches, "{who} acknowledged every batch");
        check_acks(&stored, &who, &acks);
        total += acks.len();
    }
    assert!(before < total, "the crash happened during the load");
}

#[test]
fn dropped_connections_are_reopened() {
    let Some(url) = url() else { return };
    let _serial = serial();
    let app = unique("drop");
    let sep = if url.contains('?') { '&' } else { '?' };
    let store = PgStore::connect(
        &format!("{url}{sep}application_name={app}"),
        options(SCHEMA),
    )
    .unwrap();
    let id = unique("dropconv");
    let c = store.open(&id).unwrap();
    let batches = 150u64;
    let writer = std::thread::spawn(move || {
        (0..batches)
            .map(|b| {
                let opts = AppendOptions {
                    batch_id: Some(format!("d-{b}")),
                    ..AppendOptions::default()
                };
                let n = 1 + b as usize % 3;
                let a = c
                    .append_with(&opts, |_| {
                        (0..n).map(|i| NewRow::new(body("d", b, i, n))).collect()
                    })
                    .unwrap();
                (b, a.first_seq)
            })
            .collect::<Vec<_>>()
    });
    let mut sql = raw(&url, SCHEMA);
    let mut terminated = 0i64;
    // Bounded: at most 40 rounds, 25 ms apart (a new connection gets time to do work).
    for _ in 0..40 {
        if writer.is_finished() {
            break;
        }
        let row = sql
            .query_one(
                "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity \
                 WHERE application_name = $1",
                &[&app],
            )
            .unwrap();
        terminated += row.get::<_, i64>(0);
        std::thread::sleep(Duration::from_millis(25));
    }
    let acks = writer.join().unwrap();
    assert!(
        terminated > 0,
        "no connection was dropped; the test did not test"
    );
    let stored = check_batches(&store.open(&id).unwrap().rows_since(1, None).unwrap());
    assert_eq!(stored.len(), batches as usize);
    check_acks(&stored, "d", &acks);
}
