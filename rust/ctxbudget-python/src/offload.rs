//! The I/O pool of the async API (`ctxbudget.aio`, `ctxbudget._bridge`).
//!
//! Blocking core work (an append and its `fdatasync`, a read, a scan, a cold tokenizer
//! load) normally runs right here with the GIL released ([`blocking`] without a bridge).
//! When the calling code runs inside a *bridged* greenlet — synchronous `Session` code
//! that an awaiting task switched into on the event loop's thread — the work is instead
//! queued to a small pool of plain Rust threads that never take the GIL, and the
//! greenlet switches back to its task (the Python `wait` function registered with
//! [`_offload_register`]), which awaits a future for the job. The pool only announces
//! what it finished: a finished job records its id in the loop's [`PyCompletions`] and
//! writes one byte to a socket that the loop watches (`loop.add_reader`); the loop
//! drains the ids and completes their futures, and each task switches back into its
//! greenlet, where the result becomes Python objects on the loop's thread. So no Python
//! thread other than the loop's runs, and nothing competes with the loop for the GIL.
//!
//! The pool starts threads on demand (at most [`set_max_threads`] of them) and a thread
//! that stays idle for [`IDLE_EXIT`] ends. After `fork()` the child starts a fresh pool
//! on its first job; jobs queued in the parent stay the parent's.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::io::{ErrorKind, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyTuple;

/// How long a pool thread waits for work before it ends.
pub(crate) const IDLE_EXIT: Duration = Duration::from_secs(2);

/// Default bound on pool threads: enough to overlap the `fdatasync`s of several
/// conversations, few enough to leave the CPUs to the event loop.
pub(crate) const DEFAULT_MAX_THREADS: usize = 4;

static MAX_THREADS: AtomicUsize = AtomicUsize::new(DEFAULT_MAX_THREADS);
static NEXT_JOB: AtomicU64 = AtomicU64::new(1);
static JOBS_DONE: AtomicU64 = AtomicU64::new(0);

type Job = Box<dyn FnOnce() + Send + 'static>;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Jobs catch their own panics and run outside the lock, so it is never poisoned;
    // if it were, its data is still consistent (every critical section is one step).
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

struct PoolState {
    queue: VecDeque<Job>,
    threads: usize,
    idle: usize,
}

struct Pool {
    pid: u32,
    state: Mutex<PoolState>,
    ready: Condvar,
}

impl Pool {
    fn new() -> Pool {
        Pool {
            pid: std::process::id(),
            state: Mutex::new(PoolState {
                queue: VecDeque::new(),
                threads: 0,
                idle: 0,
            }),
            ready: Condvar::new(),
        }
    }

    /// Queues `job`, starting a thread if every running one is busy (up to the bound).
    fn submit(self: &Arc<Self>, job: Job) -> std::io::Result<()> {
        let mut state = lock(&self.state);
        state.queue.push_back(job);
        if state.queue.len() > state.idle && state.threads < MAX_THREADS.load(Ordering::Relaxed) {
            state.threads += 1;
            let pool = Arc::clone(self);
            let spawned = std::thread::Builder::new()
                .name("ctxbudget-io".to_owned())
                .spawn(move || pool.work());
            if let Err(err) = spawned {
                state.threads -= 1;
                if state.threads == 0 {
                    state.queue.pop_back();
                    return Err(err);
                }
            }
        }
        if state.idle > 0 {
            self.ready.notify_one();
        }
        Ok(())
    }

    fn work(&self) {
        let mut state = lock(&self.state);
        loop {
            if let Some(job) = state.queue.pop_front() {
                drop(state);
                job();
                state = lock(&self.state);
                continue;
            }
            state.idle += 1;
            let (next, waited) = self
                .ready
                .wait_timeout(state, IDLE_EXIT)
                .unwrap_or_else(PoisonError::into_inner);
            state = next;
            state.idle -= 1;
            if waited.timed_out() && state.queue.is_empty() {
                state.threads -= 1;
                return;
            }
        }
    }

    fn threads(&self) -> usize {
        lock(&self.state).threads
    }
}

/// The process's pool (a fresh one in a forked child: the parent's threads do not
/// exist there, and its queue may be mid-update, so it is left untouched).
static POOL: Mutex<Option<Arc<Pool>>> = Mutex::new(None);

fn pool() -> Arc<Pool> {
    // Only taken with the GIL held, so never held by another thread at a Python fork().
    let mut current = lock(&POOL);
    let pid = std::process::id();
    match current.as_ref() {
        Some(p) if p.pid == pid => Arc::clone(p),
        _ => {
            if let Some(stale) = current.take() {
                std::mem::forget(stale);
            }
            let fresh = Arc::new(Pool::new());
            *current = Some(Arc::clone(&fresh));
            fresh
        }
    }
}

/// Sets the bound on pool threads for new threads (running ones above it end once idle).
pub(crate) fn set_max_threads(n: usize) {
    MAX_THREADS.store(n.max(1), Ordering::Relaxed);
}

/// Where finished jobs of one event loop are announced.
struct Signal {
    done: Mutex<Vec<u64>>,
    tx: UnixStream,
    rx: UnixStream,
}

impl Signal {
    fn complete(&self, id: u64) {
        let first = {
            let mut done = lock(&self.done);
            done.push(id);
            done.len() == 1
        };
        if first {
            // One byte per batch; the loop drains every id it finds. A full buffer means
            // a wake-up is already pending.
            let _ = (&self.tx).write(&[1]);
        }
    }
}

thread_local! {
    /// The completions of the bridged greenlet running on this thread, if any.
    static BRIDGE: RefCell<Option<Arc<Signal>>> = const { RefCell::new(None) };
}

/// Texts at least this long are counted on the pool inside a bridged call: counting
/// 4 KiB takes 0.1–0.5 ms on the loop's thread, longer than handing it off.
pub(crate) const COUNT_OFFLOAD_BYTES: usize = 4096;

/// Whether counting `bytes` of text should go to the pool (inside a bridged call only;
/// elsewhere counts run in place with the GIL released).
pub(crate) fn offload_count(bytes: usize) -> bool {
    bytes >= COUNT_OFFLOAD_BYTES && _offload_active()
}

/// The Python function that suspends the current greenlet until job `id` is done.
static WAIT: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// Runs `job` without the GIL and returns its result: here, or — inside a bridged
/// greenlet — on the pool while the greenlet's task awaits it and the event loop runs
/// other tasks. A panic in `job` is
/// resumed here, so the caller's panic guard turns it into a Python exception.
pub(crate) fn blocking<T: Send + 'static>(
    py: Python<'_>,
    job: impl FnOnce() -> T + Send + 'static,
) -> PyResult<T> {
    let Some(signal) = BRIDGE.with(|b| b.borrow().clone()) else {
        return Ok(py.detach(job));
    };
    let Some(wait) = WAIT.get(py) else {
        return Ok(py.detach(job));
    };
    let id = NEXT_JOB.fetch_add(1, Ordering::Relaxed);
    let slot: Arc<Mutex<Option<std::thread::Result<T>>>> = Arc::new(Mutex::new(None));
    let filled = Arc::clone(&slot);
    pool()
        .submit(Box::new(move || {
            let result = catch_unwind(AssertUnwindSafe(job));
            *lock(&filled) = Some(result);
            JOBS_DONE.fetch_add(1, Ordering::Relaxed);
            signal.complete(id);
        }))
        .map_err(|e| {
            PyRuntimeError::new_err(format!(
                "ctxbudget could not start an I/O thread ({e}); nothing was done"
            ))
        })?;
    wait.call1(py, (id,))?;
    let taken = lock(&slot).take();
    match taken {
        Some(Ok(value)) => Ok(value),
        Some(Err(payload)) => resume_unwind(payload),
        None => Err(PyRuntimeError::new_err(
            "an async ctxbudget call was resumed before its I/O finished; please report this",
        )),
    }
}

/// The completion socket of one event loop: finished job ids (and posted tickets) that
/// the loop turns into completed futures (see `ctxbudget._bridge`).
#[pyclass(module = "ctxbudget._ctxbudget", name = "Completions", frozen)]
pub(crate) struct PyCompletions {
    signal: Arc<Signal>,
}

#[pymethods]
impl PyCompletions {
    #[new]
    fn new() -> PyResult<Self> {
        let (tx, rx) = UnixStream::pair()?;
        tx.set_nonblocking(true)?;
        rx.set_nonblocking(true)?;
        Ok(PyCompletions {
            signal: Arc::new(Signal {
                done: Mutex::new(Vec::new()),
                tx,
                rx,
            }),
        })
    }

    /// The descriptor the event loop watches for readability.
    fn fileno(&self) -> i32 {
        self.signal.rx.as_raw_fd()
    }

    /// Ids of the jobs finished since the last call (clears the wake-up first, so none
    /// is lost).
    fn drain(&self) -> Vec<u64> {
        let mut buf = [0u8; 256];
        loop {
            match (&self.signal.rx).read(&mut buf) {
                Ok(n) if n == buf.len() => continue,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                _ => break,
            }
        }
        std::mem::take(&mut *lock(&self.signal.done))
    }

    /// A new id for [`post`](Self::post), distinct from every job id: what a bridged
    /// call waits on when it waits for something other than a job (a session's lock).
    fn ticket(&self) -> u64 {
        NEXT_JOB.fetch_add(1, Ordering::Relaxed)
    }

    /// Announces `id` as finished, as a job does (from any thread): the loop resumes
    /// the call waiting on it, if any. Posting an id twice, or one nothing waits on,
    /// changes nothing.
    fn post(&self, id: u64) {
        self.signal.complete(id);
    }

    /// `greenlet.switch(*args)` with this loop's completions as the bridge of the
    /// blocking calls the greenlet makes until it next suspends or ends (the awaiting
    /// task calls it to run its call's next stretch).
    #[pyo3(signature = (glet, *args))]
    fn resume<'py>(
        &self,
        glet: &Bound<'py, PyAny>,
        args: &Bound<'py, PyTuple>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let previous = BRIDGE.with(|b| b.replace(Some(Arc::clone(&self.signal))));
        let result = glet.call_method1("switch", args);
        BRIDGE.with(|b| *b.borrow_mut() = previous);
        result
    }
}

/// Registers the function that suspends a bridged greenlet until a job is done (it
/// switches back to the greenlet's task, which awaits the job's future).
#[pyfunction]
pub(crate) fn _offload_register(py: Python<'_>, wait: Py<PyAny>) -> PyResult<()> {
    WAIT.set(py, wait)
        .map_err(|_| PyValueError::new_err("the async bridge is already registered"))
}

/// `(max_threads, running_threads, jobs_done)` of the I/O pool (`jobs_done` counts
/// since the process started); `max_threads` sets the bound.
#[pyfunction]
#[pyo3(signature = (max_threads = None))]
pub(crate) fn offload_pool(max_threads: Option<usize>) -> PyResult<(usize, usize, u64)> {
    if let Some(n) = max_threads {
        if n == 0 {
            return Err(PyValueError::new_err(
                "max_threads must be at least 1, e.g. offload_pool(max_threads=4)",
            ));
        }
        set_max_threads(n);
    }
    let running = lock(&POOL)
        .as_ref()
        .filter(|p| p.pid == std::process::id())
        .map_or(0, |p| p.threads());
    Ok((
        MAX_THREADS.load(Ordering::Relaxed),
        running,
        JOBS_DONE.load(Ordering::Relaxed),
    ))
}

/// Whether blocking work started now would go to the pool (a bridged greenlet runs).
#[pyfunction]
pub(crate) fn _offload_active() -> bool {
    BRIDGE.with(|b| b.borrow().is_some())
}

/// `os.fsync(fd)` through [`blocking`]: inside a bridged greenlet it runs on the pool
/// (so the Python-side writes of the memory tool and the budget record do not block the
/// event loop), elsewhere here with the GIL released. Raises `OSError` as `os.fsync`.
#[pyfunction]
pub(crate) fn fsync(py: Python<'_>, fd: i32) -> PyResult<()> {
    if fd < 0 {
        return Err(PyValueError::new_err(format!(
            "fsync() needs an open file descriptor, got {fd}"
        )));
    }
    // SAFETY: the caller passes a descriptor it holds open for this call; it is only
    // duplicated here, on the caller's thread, and the job syncs and closes the copy.
    let borrowed = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
    let file = std::fs::File::from(borrowed.try_clone_to_owned()?);
    blocking(py, move || file.sync_all())?.map_err(PyErr::from)
}

/// Registers the I/O pool's classes and functions.
pub(crate) fn add(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyCompletions>()?;
    m.add_function(wrap_pyfunction!(_offload_register, m)?)?;
    m.add_function(wrap_pyfunction!(offload_pool, m)?)?;
    m.add_function(wrap_pyfunction!(fsync, m)?)?;
    m.add_function(wrap_pyfunction!(_offload_active, m)?)?;
    Ok(())
}
