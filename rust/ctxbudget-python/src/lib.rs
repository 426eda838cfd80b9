//! `ctxbudget._ctxbudget`: the PyO3 binding of the `ctxbudget` core crate.
//!
//! What rows, windows, budgets and counts mean is decided in the core; this crate turns
//! Python values into core calls and back. Most modules are that conversion, one per
//! area: `encoding`, `request` and `media` (counting), `history` and `backend` (the store),
//! `rows` and `reports` (its values), `fold` (the window fold), `session_history` (the
//! retrieval tool), `budget` (the ladder), `anchor` (usage anchoring), `models` (the
//! model table), `pg_memory` (memory files of a PostgreSQL conversation), `failpoints`
//! (test builds only).
//!
//! Three modules hold code that exists only because the caller is Python: `pyjson`
//! walks Python rows straight into the JSON bytes the store validates (faster than
//! `json.dumps`), `pyvalue` builds Python objects from core values, and `offload` is the
//! I/O pool that completes `ctxbudget.aio`'s awaitables. Every entry point releases the
//! GIL around I/O and counting, and `errors` maps core errors to Python exceptions and
//! turns a panic into `ctxbudget.InternalError`.

mod anchor;
mod backend;
mod budget;
mod database;
mod encoding;
mod errors;
#[cfg(feature = "failpoints")]
mod failpoints;
mod fold;
mod health;
mod history;
mod media;
mod models;
mod offload;
mod pg_memory;
mod pyjson;
mod pyvalue;
mod reports;
mod request;
mod rows;
mod session_history;

use ctxbudget::tokens;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};

use errors::no_panic;

/// Rows (a list of dicts) as the JSON list the store takes, as `json.dumps` would write
/// them; raises `InvalidRowError` naming the row and field that cannot be written.
#[pyfunction]
fn encode_rows<'py>(py: Python<'py>, rows: &Bound<'py, PyList>) -> PyResult<Bound<'py, PyBytes>> {
    let bytes = no_panic(py, "encode_rows()", || pyjson::encode_rows(rows))??;
    Ok(PyBytes::new(py, &bytes))
}

#[pymodule]
fn _ctxbudget(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<encoding::PyEncoding>()?;
    m.add_class::<budget::PyBudgetCore>()?;
    m.add_function(wrap_pyfunction!(budget::threshold_is_off, m)?)?;
    m.add_class::<history::PyHistory>()?;
    m.add_class::<database::PyDatabase>()?;
    m.add_function(wrap_pyfunction!(database::pg_ddl, m)?)?;
    m.add_class::<pg_memory::PyPgMemoryFiles>()?;
    session_history::add(m)?;
    reports::add(m)?;
    health::add(m)?;
    m.add_class::<fold::PyWindowFold>()?;
    m.add_class::<fold::PyRowFold>()?;
    #[cfg(feature = "failpoints")]
    failpoints::add(m)?;
    m.add("FAILPOINTS", cfg!(feature = "failpoints"))?;
    m.add_function(wrap_pyfunction!(encode_rows, m)?)?;
    m.add_function(wrap_pyfunction!(encoding::encoding_names, m)?)?;
    m.add_function(wrap_pyfunction!(encoding::model_encoding, m)?)?;
    offload::add(m)?;
    media::add(m)?;
    models::add(m)?;
    request::add(m)?;
    anchor::add(m)?;
    m.add("FUNCTIONS_TOKENS", tokens::request::FUNCTIONS_TOKENS)?;
    m.add("FUNCTION_TOKENS", tokens::request::FUNCTION_TOKENS)?;
    budget::add_constants(m)?;
    pg_memory::add_constants(m)?;
    m.add("ROW_KINDS", ctxbudget::transcript::KINDS.to_vec())?;
    m.add("ROLES", ctxbudget::transcript::ROLES.to_vec())?;
    m.add("PART_TYPES", ctxbudget::transcript::PART_TYPES.to_vec())?;
    m.add("MESSAGE_TOKENS", tokens::request::MESSAGE_TOKENS)?;
    m.add("NAME_TOKENS", tokens::request::NAME_TOKENS)?;
    m.add("REPLY_TOKENS", tokens::request::REPLY_TOKENS)?;
    m.add("CALL_TOKENS", tokens::request::CALL_TOKENS)?;
    m.add("OTHER_MEDIA_TOKENS", tokens::request::OTHER_MEDIA_TOKENS)?;
    m.add("DEFAULT_CACHE_SIZE", tokens::DEFAULT_CACHE_CAPACITY)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
