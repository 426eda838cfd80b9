//! The store's state and health reports as frozen Python classes: a common part every
//! backend fills, and a `detail` that is one class per kind of store (`FileVerify`,
//! `PostgresVerify`, …) or `NoDetail` where a store has nothing to add. Each detail
//! class names its store in `kind` (`"file"`, `"postgres"`, `"log"`).

use ctxbudget::store::{
    self as core, ReceiptRead, ReceiptState, RecoveryDetail, StateDetail, VerifyDetail,
};
use pyo3::prelude::*;
use pyo3::IntoPyObjectExt;

use crate::reports::{report, Plain, PyFileReport, PyReceipt, PyStamp};

report!(
    /// A store with nothing to add to the common part of a report; `kind` says which
    /// (`postgres` or `log`).
    "NoDetail" PyNoDetail {
        kind: String,
    }
);

report!(
    /// What only a workspace's files say about the state: the receipt as stored.
    "FileState" PyFileState {
        kind: String,
        receipt: Option<PyReceipt>,
    }
);

report!(
    /// A store's epoch, last seq and floor of one moment.
    "StoreState" PyStoreState {
        epoch: Option<u64>,
        last_seq: u64,
        floor_seq: u64,
        detail: PyStateDetail,
    }
);

report!(
    /// Rows of one part of a transcript (live or archived).
    "RowCounts" PyRowCounts {
        rows: u64,
        malformed: u64,
    }
);

report!(
    /// What only the file store's check finds.
    "FileVerify" PyFileVerify {
        kind: String,
        chat: PyFileReport,
        archive: PyFileReport,
        receipt: String,
    }
);

report!(
    /// What only a PostgreSQL conversation's check finds.
    "PostgresVerify" PyPostgresVerify {
        kind: String,
        rows_past_last_seq: u64,
    }
);

report!(
    /// What `History.verify` found.
    "VerifyReport" PyVerifyReport {
        ok: bool,
        epoch: Option<u64>,
        last_seq: u64,
        floor_seq: u64,
        live: PyRowCounts,
        archive: PyRowCounts,
        seq_violations: u64,
        first_seq_violation: Option<String>,
        detail: PyVerifyDetail,
    }
);

report!(
    /// What only the file store's recovery does.
    "FileRecovery" PyFileRecovery {
        kind: String,
        chat_torn_bytes: u64,
        archive_torn_bytes: u64,
        moved_to: Vec<String>,
        rotation_rolled_back_bytes: u64,
        damage: Option<String>,
    }
);

report!(
    /// What `History.recover` did.
    "RecoveryReport" PyRecoveryReport {
        changed: bool,
        epoch: Option<u64>,
        detail: PyRecoveryDetail,
    }
);

/// A detail field: one of several classes, each converted as itself.
macro_rules! detail {
    ($(#[$doc:meta])* $name:ident { $($variant:ident($ty:ty)),* $(,)? }) => {
        $(#[$doc])*
        #[derive(Clone, Debug, PartialEq)]
        pub(crate) enum $name {
            $($variant($ty)),*
        }

        impl<'py> IntoPyObject<'py> for $name {
            type Target = PyAny;
            type Output = Bound<'py, PyAny>;
            type Error = PyErr;

            fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
                match self {
                    $($name::$variant(d) => d.into_bound_py_any(py)),*
                }
            }
        }

        impl Plain for $name {
            fn plain<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
                match self {
                    $($name::$variant(d) => d.plain(py)),*
                }
            }
        }
    };
}

detail!(
    /// `StoreState.detail`.
    PyStateDetail {
        File(PyFileState),
        Other(PyNoDetail),
    }
);

detail!(
    /// `VerifyReport.detail`.
    PyVerifyDetail {
        File(PyFileVerify),
        Postgres(PyPostgresVerify),
        Other(PyNoDetail),
    }
);

detail!(
    /// `RecoveryReport.detail`.
    PyRecoveryDetail {
        File(PyFileRecovery),
        Other(PyNoDetail),
    }
);

fn no_detail(name: &str) -> PyNoDetail {
    PyNoDetail {
        kind: name.to_owned(),
    }
}

/// The receipt, or `None` when it is missing or unreadable.
fn receipt(read: ReceiptRead) -> Option<PyReceipt> {
    let ReceiptRead::Valid(r) = read else {
        return None;
    };
    Some(PyReceipt {
        version: r.version,
        epoch: r.epoch,
        state: match r.state {
            ReceiptState::Pending => "pending",
            ReceiptState::Stable => "stable",
        }
        .to_owned(),
        seq: r.seq,
        committed_end: r.committed_end,
        anchor_crc: r.anchor_crc,
        chat: r.files.chat.map(PyStamp::from),
        archive: r.files.archive.map(PyStamp::from),
        floor: r.floor,
    })
}

impl From<core::StoreState> for PyStoreState {
    fn from(s: core::StoreState) -> Self {
        PyStoreState {
            epoch: s.epoch,
            last_seq: s.last_seq,
            floor_seq: s.floor_seq,
            detail: match s.detail {
                StateDetail::File { receipt: r } => PyStateDetail::File(PyFileState {
                    kind: "file".to_owned(),
                    receipt: receipt(r),
                }),
                StateDetail::Postgres => PyStateDetail::Other(no_detail("postgres")),
                StateDetail::Log => PyStateDetail::Other(no_detail("log")),
            },
        }
    }
}

impl From<core::RowCounts> for PyRowCounts {
    fn from(c: core::RowCounts) -> Self {
        PyRowCounts {
            rows: c.rows,
            malformed: c.malformed,
        }
    }
}

impl From<core::VerifyReport> for PyVerifyReport {
    fn from(v: core::VerifyReport) -> Self {
        PyVerifyReport {
            ok: v.ok,
            epoch: v.epoch,
            last_seq: v.last_seq,
            floor_seq: v.floor_seq,
            live: v.live.into(),
            archive: v.archive.into(),
            seq_violations: v.seq_violations,
            first_seq_violation: v.first_seq_violation,
            detail: match v.detail {
                VerifyDetail::File(f) => PyVerifyDetail::File(PyFileVerify {
                    kind: "file".to_owned(),
                    chat: f.chat.into(),
                    archive: f.archive.into(),
                    receipt: f.receipt.as_str().to_owned(),
                }),
                VerifyDetail::Postgres { rows_past_last_seq } => {
                    PyVerifyDetail::Postgres(PyPostgresVerify {
                        kind: "postgres".to_owned(),
                        rows_past_last_seq,
                    })
                }
                VerifyDetail::Log => PyVerifyDetail::Other(no_detail("log")),
            },
        }
    }
}

impl From<core::RecoveryReport> for PyRecoveryReport {
    fn from(r: core::RecoveryReport) -> Self {
        PyRecoveryReport {
            changed: r.changed,
            epoch: r.epoch,
            detail: match r.detail {
                RecoveryDetail::File(f) => PyRecoveryDetail::File(PyFileRecovery {
                    kind: "file".to_owned(),
                    chat_torn_bytes: f.chat_torn_bytes,
                    archive_torn_bytes: f.archive_torn_bytes,
                    moved_to: f
                        .moved_to
                        .iter()
                        .map(|p| p.to_string_lossy().into_owned())
                        .collect(),
                    rotation_rolled_back_bytes: f.rotation_rolled_back_bytes,
                    damage: f.damage,
                }),
                RecoveryDetail::Postgres => PyRecoveryDetail::Other(no_detail("postgres")),
                RecoveryDetail::Log => PyRecoveryDetail::Other(no_detail("log")),
            },
        }
    }
}

/// Registers the state and health classes.
pub(crate) fn add(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyNoDetail>()?;
    m.add_class::<PyFileState>()?;
    m.add_class::<PyStoreState>()?;
    m.add_class::<PyRowCounts>()?;
    m.add_class::<PyFileVerify>()?;
    m.add_class::<PyPostgresVerify>()?;
    m.add_class::<PyVerifyReport>()?;
    m.add_class::<PyFileRecovery>()?;
    m.add_class::<PyRecoveryReport>()?;
    Ok(())
}
