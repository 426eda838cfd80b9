//! Python rows to the JSON bytes the store validates: what
//! `json.dumps(row, ensure_ascii=False, allow_nan=False, separators=(",", ":"))` writes,
//! read straight from the Python objects. `json.dumps` builds an encoder per call and
//! costs several microseconds for one 2 KiB row, more than the rest of an append
//! without fsync; this walk costs well under one. Failures name the row and the field
//! (`meta.when`, `parts[0].text`) as the store's own row validation does.

use std::io::Write;

use ctxbudget::store::StoreError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

/// Containers nested deeper than this are refused (a row's own object is level 1): the
/// core's limit for rows (what its readers parse, less the room a quarantine row needs to
/// keep one). It also stops self-referencing containers.
const MAX_DEPTH: usize = ctxbudget::store::MAX_ROW_NESTING;

/// One step of the path to a failing field.
enum Step {
    Key(String),
    Index(usize),
}

/// Why a value could not be written, and where (innermost step first).
struct Failure {
    reason: String,
    path: Vec<Step>,
}

impl Failure {
    fn new(reason: impl Into<String>) -> Self {
        Failure {
            reason: reason.into(),
            path: Vec::new(),
        }
    }

    fn at(mut self, step: Step) -> Self {
        self.path.push(step);
        self
    }

    fn into_error(self, row: usize) -> StoreError {
        let mut field = String::new();
        for step in self.path.iter().rev() {
            match step {
                Step::Key(k) if field.is_empty() => field.push_str(k),
                Step::Key(k) => {
                    field.push('.');
                    field.push_str(k);
                }
                Step::Index(i) => field.push_str(&format!("[{i}]")),
            }
        }
        StoreError::InvalidRow {
            index: row,
            field,
            reason: self.reason,
        }
    }
}

type Written = Result<(), Failure>;

fn type_name(value: &Bound<'_, PyAny>) -> String {
    value
        .get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "object".to_owned())
}

fn write_str(out: &mut Vec<u8>, s: &Bound<'_, PyString>) -> Written {
    let text = s.to_str().map_err(|_| {
        Failure::new(
            "contains a lone surrogate (not valid Unicode); clean the text before storing it",
        )
    })?;
    serde_json::to_writer(&mut *out, text).map_err(|e| Failure::new(e.to_string()))
}

fn write_float(out: &mut Vec<u8>, value: f64) -> Written {
    if !value.is_finite() {
        return Err(Failure::new(format!(
            "is {value}, which JSON cannot hold; store it as a string or null"
        )));
    }
    serde_json::to_writer(&mut *out, &value).map_err(|e| Failure::new(e.to_string()))
}

fn write_int(out: &mut Vec<u8>, value: &Bound<'_, PyAny>) -> Written {
    if let Ok(small) = value.extract::<i64>() {
        // Writing into a Vec cannot fail.
        let _ = write!(out, "{small}");
        return Ok(());
    }
    // Beyond 64 bits (or an int subclass): the decimal digits of int(value), as json does.
    let digits = value
        .py()
        .get_type::<PyInt>()
        .call1((value,))
        .and_then(|i| i.str())
        .map_err(|e| Failure::new(format!("is an int that cannot be written: {e}")))?;
    out.extend_from_slice(digits.to_string().as_bytes());
    Ok(())
}

/// A dict key as json writes it: strings as they are; bool, int, float and None by
/// their JSON spelling.
fn write_key(out: &mut Vec<u8>, key: &Bound<'_, PyAny>) -> Written {
    if let Ok(s) = key.cast::<PyString>() {
        return write_str(out, s);
    }
    let mut spelled = Vec::new();
    if let Ok(b) = key.cast::<PyBool>() {
        spelled.extend_from_slice(if b.is_true() { b"true" } else { b"false" });
    } else if key.is_instance_of::<PyInt>() {
        write_int(&mut spelled, key)?;
    } else if let Ok(f) = key.cast::<PyFloat>() {
        write_float(&mut spelled, f.value())?;
    } else if key.is_none() {
        spelled.extend_from_slice(b"null");
    } else {
        return Err(Failure::new(format!(
            "has a key of type {}; keys must be str, int, float, bool or None",
            type_name(key)
        )));
    }
    out.push(b'"');
    out.extend_from_slice(&spelled);
    out.push(b'"');
    Ok(())
}

/// How a failing field's key is named in the error (only computed on failure).
fn key_name(key: &Bound<'_, PyAny>) -> String {
    key.str()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|_| type_name(key))
}

fn write_dict(out: &mut Vec<u8>, dict: &Bound<'_, PyDict>, depth: usize) -> Written {
    out.push(b'{');
    for (n, (key, value)) in dict.iter().enumerate() {
        if n > 0 {
            out.push(b',');
        }
        // A key that cannot be written is reported on the dict that holds it.
        write_key(out, &key)?;
        out.push(b':');
        write_value(out, &value, depth + 1).map_err(|f| f.at(Step::Key(key_name(&key))))?;
    }
    out.push(b'}');
    Ok(())
}

fn write_items<'py>(
    out: &mut Vec<u8>,
    items: impl Iterator<Item = Bound<'py, PyAny>>,
    depth: usize,
) -> Written {
    out.push(b'[');
    for (i, item) in items.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_value(out, &item, depth + 1).map_err(|f| f.at(Step::Index(i)))?;
    }
    out.push(b']');
    Ok(())
}

fn too_deep(depth: usize) -> Written {
    if depth > MAX_DEPTH {
        return Err(Failure::new(format!(
            "nests more than {MAX_DEPTH} objects and arrays deep (the row itself included) \
             or contains itself; flatten it"
        )));
    }
    Ok(())
}

fn write_value(out: &mut Vec<u8>, value: &Bound<'_, PyAny>, depth: usize) -> Written {
    // The order of json's encoder: str, None, bool, int, float, list/tuple, dict.
    if let Ok(s) = value.cast::<PyString>() {
        write_str(out, s)
    } else if value.is_none() {
        out.extend_from_slice(b"null");
        Ok(())
    } else if let Ok(b) = value.cast::<PyBool>() {
        out.extend_from_slice(if b.is_true() { b"true" } else { b"false" });
        Ok(())
    } else if value.is_instance_of::<PyInt>() {
        write_int(out, value)
    } else if let Ok(f) = value.cast::<PyFloat>() {
        write_float(out, f.value())
    } else if let Ok(list) = value.cast::<PyList>() {
        too_deep(depth)?;
        write_items(out, list.iter(), depth)
    } else if let Ok(tuple) = value.cast::<PyTuple>() {
        too_deep(depth)?;
        write_items(out, tuple.iter(), depth)
    } else if let Ok(dict) = value.cast::<PyDict>() {
        too_deep(depth)?;
        write_dict(out, dict, depth)
    } else {
        Err(Failure::new(format!(
            "is a {}, which is not JSON-serializable; convert it to a str, number, bool, \
             None, list or dict first",
            type_name(value)
        )))
    }
}

/// A row as a dict: dicts as they are, other mappings copied (as `dict(row)` would).
fn row_dict<'py>(index: usize, row: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyDict>> {
    if let Ok(dict) = row.cast::<PyDict>() {
        return Ok(dict.clone());
    }
    let py = row.py();
    let mapping = py.import("collections.abc")?.getattr("Mapping")?;
    if row.is_instance(&mapping)? {
        return Ok(py
            .get_type::<PyDict>()
            .call1((row,))?
            .cast_into::<PyDict>()?);
    }
    Err(crate::errors::store_error(
        py,
        StoreError::InvalidRow {
            index,
            field: String::new(),
            reason: format!("must be a dict, got {}", type_name(row)),
        },
    ))
}

/// Any Python value as JSON text with `json.dumps`'s meaning, or `None` for what it would
/// refuse (NaN, keys that are not JSON keys, lone surrogates, nesting deeper than
/// `MAX_DEPTH`).
pub(crate) fn encode_value(value: &Bound<'_, PyAny>) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(64);
    write_value(&mut out, value, 0).ok().map(|()| out)
}

/// `rows` as the JSON list the core's `append_json_bytes` takes.
pub(crate) fn encode_rows(rows: &Bound<'_, PyList>) -> PyResult<Vec<u8>> {
    let py = rows.py();
    let mut out = Vec::with_capacity(rows.len() * 2_300 + 2);
    out.push(b'[');
    for (index, row) in rows.iter().enumerate() {
        if index > 0 {
            out.push(b',');
        }
        let dict = row_dict(index, &row)?;
        write_dict(&mut out, &dict, 1)
            .map_err(|f| crate::errors::store_error(py, f.into_error(index)))?;
    }
    out.push(b']');
    Ok(out)
}
