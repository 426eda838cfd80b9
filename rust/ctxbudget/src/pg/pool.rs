//! A small connection pool: at most `size` connections, each with its prepared statements.

use std::collections::{HashMap, HashSet};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use postgres::{Client, Statement};

use super::config::{PgOptions, Target};
use super::error::{PgError, Result};

/// One connection and the statements prepared on it.
pub(crate) struct Conn {
    pub client: Client,
    statements: HashMap<&'static str, Statement>,
    /// Names of the statements prepared on the server by SQL `PREPARE` (see
    /// [`Conn::query_by`]).
    pub(crate) server_prepared: HashSet<&'static str>,
}

impl Conn {
    /// The prepared statement for `sql` (prepared on first use on this connection).
    pub fn statement(&mut self, sql: &'static str) -> Result<Statement> {
        if let Some(s) = self.statements.get(sql) {
            return Ok(s.clone());
        }
        let s = self
            .client
            .prepare(sql)
            .map_err(PgError::db("preparing a statement"))?;
        self.statements.insert(sql, s.clone());
        Ok(s)
    }
}

struct State {
    idle: Vec<Conn>,
    /// Connections handed out or being opened.
    busy: usize,
    /// Set by [`Pool::close`]: no connection is handed out any more.
    closed: bool,
}

pub(crate) struct Pool {
    target: Target,
    size: usize,
    options: PgOptions,
    state: Mutex<State>,
    freed: Condvar,
}

/// A connection checked out of the pool; back in the pool when dropped, unless broken.
pub(crate) struct Pooled<'a> {
    pool: &'a Pool,
    conn: Option<Conn>,
}

impl Pool {
    pub fn new(target: Target, options: &PgOptions) -> Pool {
        Pool {
            target,
            size: options.pool_size.max(1),
            options: options.clone(),
            state: Mutex::new(State {
                idle: Vec::new(),
                busy: 0,
                closed: false,
            }),
            freed: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Opens a connection outside the pool (migrations, tests of the seam), giving up
    /// connecting at `until` when given.
    pub fn open(&self, until: Option<Instant>) -> Result<Conn> {
        let client = match until {
            None => self.target.config.connect(self.target.tls.clone()),
            Some(until) => {
                let mut config = self.target.config.clone();
                let left = until
                    .saturating_duration_since(Instant::now())
                    .max(Duration::from_millis(1));
                let timeout = config.get_connect_timeout().map_or(left, |t| left.min(*t));
                config.connect_timeout(timeout);
                config.connect(self.target.tls.clone())
            }
        }
        .map_err(PgError::connect)?;
        Ok(Conn {
            client,
            statements: HashMap::new(),
            server_prepared: HashSet::new(),
        })
    }

    /// A connection: an idle one, a new one while under `size`, or the next one freed
    /// (waiting at most the pool timeout, and past `until` not at all).
    pub fn get(&self, until: Option<Instant>) -> Result<Pooled<'_>> {
        let start = Instant::now();
        let give_up = until.map_or(start + self.options.pool_timeout, |u| {
            u.min(start + self.options.pool_timeout)
        });
        let mut state = self.lock();
        loop {
            if state.closed {
                return Err(PgError::Closed);
            }
            while let Some(conn) = state.idle.pop() {
                if conn.client.is_closed() {
                    continue;
                }
                state.busy += 1;
                return Ok(Pooled {
                    pool: self,
                    conn: Some(conn),
                });
            }
            if state.busy < self.size {
                state.busy += 1;
                drop(state);
                return match self.open(until) {
                    Ok(conn) => Ok(Pooled {
                        pool: self,
                        conn: Some(conn),
                    }),
                    Err(e) => {
                        self.release(None);
                        Err(e)
                    }
                };
            }
            let now = Instant::now();
            let Some(left) = give_up.checked_duration_since(now).filter(|l| !l.is_zero()) else {
                return Err(PgError::PoolTimeout {
                    waited_ms: now.duration_since(start).as_millis(),
                    size: self.size,
                });
            };
            state = self
                .freed
                .wait_timeout(state, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    fn release(&self, conn: Option<Conn>) {
        let mut state = self.lock();
        state.busy = state.busy.saturating_sub(1);
        if let Some(conn) = conn {
            if !conn.client.is_closed() && !state.closed {
                state.idle.push(conn);
            }
        }
        drop(state);
        self.freed.notify_one();
    }

    /// Closes every idle connection (the next use opens fresh ones).
    pub fn clear_idle(&self) {
        self.lock().idle.clear();
    }

    /// Closes the idle connections and refuses every later request
    /// ([`PgError::Closed`]); connections in use close when their call returns them.
    pub fn close(&self) {
        let mut state = self.lock();
        state.closed = true;
        state.idle.clear();
        drop(state);
        self.freed.notify_all();
    }

    /// True once [`Pool::close`] ran.
    pub fn is_closed(&self) -> bool {
        self.lock().closed
    }
}

impl Pooled<'_> {
    /// The connection (present until the guard is consumed or dropped).
    pub fn conn(&mut self) -> Result<&mut Conn> {
        self.conn
            .as_mut()
            .ok_or_else(|| PgError::Config("a pooled connection was used after release".into()))
    }

    /// Drops the connection instead of returning it (it broke or is in an unknown state).
    pub fn discard(mut self) {
        self.conn = None;
    }
}

impl Drop for Pooled<'_> {
    fn drop(&mut self) {
        let conn = self.conn.take();
        self.pool.release(conn);
    }
}
