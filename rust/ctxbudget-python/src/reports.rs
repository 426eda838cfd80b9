//! The store's reports and results as frozen Python classes, built from the core's
//! structs (no JSON text in between, one definition of each field). `ctxbudget` exports
//! them under the names it always had (`ctxbudget.VerifyReport`, …).

use ctxbudget::store as core;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};
use pyo3::IntoPyObjectExt;

/// Conversion of a field to plain Python data (`to_dict`, as `dataclasses.asdict` did).
pub(crate) trait Plain {
    fn plain<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>>;
}

macro_rules! plain_by_value {
    ($($t:ty),*) => {$(
        impl Plain for $t {
            fn plain<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
                self.clone().into_bound_py_any(py)
            }
        }
    )*};
}
plain_by_value!(u64, i64, u32, bool, String);

impl<T: Plain> Plain for Option<T> {
    fn plain<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        match self {
            Some(v) => v.plain(py),
            None => Ok(py.None().into_bound(py)),
        }
    }
}

impl<T: Plain> Plain for Vec<T> {
    fn plain<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let list = PyList::empty(py);
        for item in self {
            list.append(item.plain(py)?)?;
        }
        Ok(list.into_any())
    }
}

impl Plain for (u64, u64, String) {
    fn plain<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(PyTuple::new(
            py,
            [self.0.plain(py)?, self.1.plain(py)?, self.2.plain(py)?],
        )?
        .into_any())
    }
}

/// A frozen report class with read-only attributes, `==`, `repr()` and `to_dict()`.
macro_rules! report {
    ($(#[$doc:meta])* $pyname:literal $name:ident { $($(#[$fdoc:meta])* $field:ident : $ty:ty),* $(,)? }) => {
        $(#[$doc])*
        #[pyclass(module = "ctxbudget._ctxbudget", name = $pyname, frozen, eq, get_all)]
        #[derive(Clone, Debug, PartialEq)]
        pub(crate) struct $name {
            $($(#[$fdoc])* pub(crate) $field: $ty),*
        }

        impl Plain for $name {
            fn plain<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
                Ok(self.to_dict(py)?.into_any())
            }
        }

        #[pymethods]
        impl $name {
            /// The fields as a dict, nested reports as dicts (what `dataclasses.asdict`
            /// gave for the former dataclass).
            fn to_dict<'py>(
                &self,
                py: Python<'py>,
            ) -> PyResult<Bound<'py, ::pyo3::types::PyDict>> {
                let d = ::pyo3::types::PyDict::new(py);
                $(d.set_item(stringify!($field), self.$field.plain(py)?)?;)*
                Ok(d)
            }

            fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
                let fields: Vec<String> = vec![$(
                    format!(
                        "{}={}",
                        stringify!($field),
                        self.$field.clone().into_bound_py_any(py)?.repr()?
                    )
                ),*];
                Ok(format!("{}({})", $pyname, fields.join(", ")))
            }
        }
    };
}
pub(crate) use report;

report!(
    /// What an append committed.
    "AppendResult" PyAppendResult {
        first_seq: u64,
        last_seq: u64,
        epoch: u64,
        window: String,
    }
);

report!(
    /// One contiguous run of a context window.
    "WindowInfo" PyWindowInfo {
        window_id: String,
        boundary_kind: String,
        first_seq: u64,
        item_count: u64,
    }
);

report!(
    /// Identity, size and timestamps of a file.
    "Stamp" PyStamp {
        dev: u64,
        ino: u64,
        size: u64,
        mtime_ns: i64,
        ctime_ns: i64,
    }
);

report!(
    /// The append receipt (`history/receipt.json`).
    "Receipt" PyReceipt {
        version: u32,
        epoch: u64,
        state: String,
        seq: u64,
        committed_end: u64,
        anchor_crc: u32,
        chat: Option<PyStamp>,
        archive: Option<PyStamp>,
        floor: u64,
    }
);

report!(
    /// What `History.rotate` moved to the archive.
    "RotateReport" PyRotateReport {
        rows: u64,
        bytes: u64,
        epoch: Option<u64>,
    }
);

report!(
    /// What `History.delete` removed for good.
    "DeleteReport" PyDeleteReport {
        existed: bool,
        rows: u64,
        bytes: u64,
        memory_files: u64,
        recovered_files: u64,
        other_files: u64,
    }
);

report!(
    /// What `History.prune` removed for good.
    "PruneReport" PyPruneReport {
        rows: u64,
        bytes: u64,
        kept_from: u64,
        floor_seq: u64,
        epoch: Option<u64>,
    }
);

report!(
    /// Findings of a full check of one transcript file.
    "FileReport" PyFileReport {
        bytes: u64,
        batches: u64,
        rows: u64,
        legacy_rows: u64,
        malformed_lines: u64,
        torn_bytes: u64,
        damage: Option<(u64, u64, String)>,
    }
);

impl From<core::AppendResult> for PyAppendResult {
    fn from(r: core::AppendResult) -> Self {
        PyAppendResult {
            first_seq: r.first_seq,
            last_seq: r.last_seq,
            epoch: r.epoch,
            window: r.window,
        }
    }
}

impl From<core::WindowInfo> for PyWindowInfo {
    fn from(w: core::WindowInfo) -> Self {
        PyWindowInfo {
            window_id: w.window_id,
            boundary_kind: w.boundary_kind,
            first_seq: w.first_seq,
            item_count: w.item_count,
        }
    }
}

impl From<core::Stamp> for PyStamp {
    fn from(s: core::Stamp) -> Self {
        PyStamp {
            dev: s.dev,
            ino: s.ino,
            size: s.size,
            mtime_ns: s.mtime_ns,
            ctime_ns: s.ctime_ns,
        }
    }
}

impl From<core::RotateReport> for PyRotateReport {
    fn from(r: core::RotateReport) -> Self {
        PyRotateReport {
            rows: r.rows,
            bytes: r.bytes,
            epoch: r.epoch,
        }
    }
}

impl From<core::DeleteReport> for PyDeleteReport {
    fn from(r: core::DeleteReport) -> Self {
        PyDeleteReport {
            existed: r.existed,
            rows: r.rows,
            bytes: r.bytes,
            memory_files: r.memory_files,
            recovered_files: r.recovered_files,
            other_files: r.other_files,
        }
    }
}

impl From<core::PruneReport> for PyPruneReport {
    fn from(r: core::PruneReport) -> Self {
        PyPruneReport {
            rows: r.rows,
            bytes: r.bytes,
            kept_from: r.kept_from,
            floor_seq: r.floor_seq,
            epoch: r.epoch,
        }
    }
}

impl From<core::FileReport> for PyFileReport {
    fn from(f: core::FileReport) -> Self {
        PyFileReport {
            bytes: f.bytes,
            batches: f.batches,
            rows: f.rows,
            legacy_rows: f.legacy_rows,
            malformed_lines: f.malformed_lines,
            torn_bytes: f.torn_bytes,
            damage: f.damage,
        }
    }
}

/// Registers the report classes.
pub(crate) fn add(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyAppendResult>()?;
    m.add_class::<PyWindowInfo>()?;
    m.add_class::<PyStamp>()?;
    m.add_class::<PyReceipt>()?;
    m.add_class::<PyRotateReport>()?;
    m.add_class::<PyDeleteReport>()?;
    m.add_class::<PyPruneReport>()?;
    m.add_class::<PyFileReport>()?;
    Ok(())
}
