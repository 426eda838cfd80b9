//! Where the PostgreSQL store's time goes: the store's reads and appends as they are,
//! beside the same work done in one statement, on one server and one connection each,
//! interleaved (docs/decisions.md, "PostgreSQL conversations behind the Store seam").
//!
//! `cargo run --profile quick -p ctxbudget --features postgres --example pg_profile -- URL [ROUNDS]`
//!
//! URL must be one without TLS (the unix socket, `CTXBUDGET_PG_SOCKET_URL` of
//! `scripts/pg-cluster`): the one-statement variants use a plain client. Prints p50 of
//! each measure in microseconds. Everything lives in the schema `ctxbudget_profile`,
//! dropped at the end.
use std::time::Instant;

use ctxbudget::pg::{PgOptions, PgStore};
use ctxbudget::store::ReadFrom;
use ctxbudget::transcript::NewRow;
use ctxbudget::transcript::Store;
use postgres::{Client, NoTls};

const SCHEMA: &str = "ctxbudget_profile";
/// One statement for a step's read: the conversation's counters and its new rows, in
/// one snapshot (a single statement sees one).
const READ_ONE: &str =
    "SELECT c.epoch, c.last_seq, c.floor_seq, c.archived_before, r.seq, r.body, r.floor \
     FROM ctxbudget_conversations c \
     LEFT JOIN ctxbudget_rows r ON r.conversation = c.conversation AND r.seq > $2 \
     WHERE c.conversation = $1 ORDER BY r.seq";
/// One statement for a conditional append: moves `last_seq` from $2 to $3 (the row lock
/// is taken here, and a concurrent writer makes the WHERE fail), marks the transaction as
/// the library's append (as the store's lock statement does) and inserts the rows.
const APPEND_ONE: &str = "WITH c AS ( \
       UPDATE ctxbudget_conversations SET last_seq = $3 \
       WHERE conversation = $1 AND last_seq = $2 \
       RETURNING epoch, set_config('ctxbudget.appending', conversation, true)), \
     ins AS ( \
       INSERT INTO ctxbudget_rows (conversation, seq, body) \
       SELECT $1, t.s, t.b FROM unnest($4::int8[], $5::bytea[]) AS t(s, b) \
       WHERE EXISTS (SELECT 1 FROM c) RETURNING 1) \
     SELECT (SELECT epoch FROM c), (SELECT count(*) FROM ins)";
const BODIES: &str = "SELECT seq, body FROM ctxbudget_rows \
     WHERE conversation = $1 AND seq >= $2 AND seq <= $3 ORDER BY seq";

fn p50(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn time<T>(out: &mut Vec<f64>, f: impl FnOnce() -> T) -> T {
    let start = Instant::now();
    let t = f();
    out.push(start.elapsed().as_secs_f64() * 1e6);
    t
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let url = args
        .next()
        .ok_or("usage: pg_profile URL_WITHOUT_TLS [ROUNDS]")?;
    let rounds: usize = args.next().map_or(Ok(200), |r| r.parse())?;
    let options = PgOptions {
        schema: Some(SCHEMA.into()),
        ..PgOptions::default()
    };
    let store = PgStore::connect(&url, options)?;
    let pid = std::process::id();
    let (ours_id, big_id, raw_id) = (
        format!("profile-{pid}"),
        format!("profile-big-{pid}"),
        format!("profile-raw-{pid}"),
    );
    let ours = store.history(&ours_id)?;
    let big = store.history(&big_id)?;
    store.history(&raw_id)?;
    let mut raw = Client::connect(&url, NoTls)?;
    raw.batch_execute(&format!("SET search_path TO {SCHEMA}"))?;

    // 2 MiB in 500 rows of ~4 KiB, as the session_history bench.
    let text = "The agent inspected the deployment logs, compared two configs. ".repeat(63);
    for _ in 0..5 {
        let batch: Vec<NewRow> = (0..100)
            .map(|_| NewRow::text("message", "user", &text))
            .collect();
        big.append_rows(&batch, None)?;
    }
    let big_last = big.read(ReadFrom::Seq(0))?.last_seq;
    let pair = [
        NewRow::text("message", "user", &text[..300]),
        NewRow::text("message", "assistant", &text[..1000]),
    ];
    let pair_bodies: Vec<Vec<u8>> = vec![vec![b'x'; 400], vec![b'y'; 1100]];

    let select1 = raw.prepare("SELECT 1")?;
    let read_one = raw.prepare(READ_ONE)?;
    let append_one = raw.prepare(APPEND_ONE)?;
    let bodies = raw.prepare(BODIES)?;
    let mut m: Vec<(&str, Vec<f64>)> = [
        "round trip (SELECT 1, prepared)",
        "PgHistory::read of 2 new rows (what WindowFold.advance() asks the store)",
        "step read in one statement (counters + new rows)",
        "append now: 2 rows, if_last_seq (BEGIN, lock, insert, COMMIT)",
        "append in one statement (conditional UPDATE + INSERT, autocommit)",
        "2 MiB of bodies, unprepared query (as the scan reads now)",
        "2 MiB of bodies, prepared statement",
        "2 MiB detoasted and searched on the server (position(), nothing sent)",
    ]
    .into_iter()
    .map(|name| (name, Vec::with_capacity(rounds)))
    .collect();
    let (mut ours_last, mut raw_last) = (ours.read(ReadFrom::Seq(0))?.last_seq, 0u64);
    for _ in 0..rounds {
        time(&mut m[0].1, || raw.query(&select1, &[]))?;
        let done = time(&mut m[3].1, || ours.append_rows(&pair, Some(ours_last)))?;
        let since = ours_last + 1;
        ours_last = done.last_seq;
        time(&mut m[1].1, || ours.read(ReadFrom::Seq(since)))?;
        let seqs = [raw_last as i64 + 1, raw_last as i64 + 2];
        let got = time(&mut m[4].1, || {
            raw.query(
                &append_one,
                &[
                    &raw_id,
                    &(raw_last as i64),
                    &seqs[1],
                    &seqs.to_vec(),
                    &pair_bodies,
                ],
            )
        })?;
        let inserted: i64 = got[0].get(1);
        if inserted != 2 {
            return Err("the one-statement append did not insert its rows".into());
        }
        let before = raw_last as i64;
        raw_last += 2;
        time(&mut m[2].1, || raw.query(&read_one, &[&raw_id, &before]))?;
        let range: [&(dyn postgres::types::ToSql + Sync); 3] = [&big_id, &1i64, &(big_last as i64)];
        time(&mut m[5].1, || raw.query(BODIES, &range))?;
        time(&mut m[6].1, || raw.query(&bodies, &range))?;
        time(&mut m[7].1, || {
            raw.query(
                "SELECT count(*) FROM ctxbudget_rows WHERE conversation = $1 \
                 AND position('\\x7a7a71'::bytea IN body) > 0",
                &[&big_id],
            )
        })?;
    }
    println!("| measure ({rounds} rounds, interleaved) | p50 µs |");
    println!("|---|---|");
    for (name, v) in m {
        println!("| {name} | {:.0} |", p50(v));
    }
    raw.batch_execute(&format!("DROP SCHEMA {SCHEMA} CASCADE"))?;
    Ok(())
}
