//! Images in a request (`ctxbudget.media` wraps these): an image's size from its header
//! and the providers' token rules, from the core's `tokens::media`.

use ctxbudget::tokens::media::{self, Detail};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyString};
use pyo3::IntoPyObjectExt;

/// `(format, width, height)` of an image given as bytes or as a `data:` URL; a `str`
/// message when its size cannot be read (the wrapper raises `MediaError` with it).
#[pyfunction]
pub(crate) fn image_size<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    let size = if let Ok(text) = data.cast::<PyString>() {
        media::image_size_from_data_url(text.to_str()?)
    } else if let Ok(bytes) = data.cast::<PyBytes>() {
        media::image_size(bytes.as_bytes())
    } else if let Ok(array) = data.cast::<PyByteArray>() {
        media::image_size(&array.to_vec())
    } else {
        let kind = data.get_type().name()?.to_string();
        return Err(PyTypeError::new_err(format!(
            "image_size() takes the image's bytes or a data: URL (str), got {kind}"
        )));
    };
    match size {
        Ok(s) => (s.format.name(), s.width, s.height).into_bound_py_any(py),
        Err(e) => e.to_string().into_bound_py_any(py),
    }
}

/// Tokens of one image by `provider`'s rule (`"openai"` with its `detail`, or
/// `"anthropic"`); `size` `None` means known only by URL (the rule's maximum).
#[pyfunction]
#[pyo3(signature = (size, *, provider, detail = "auto"))]
pub(crate) fn image_tokens(
    size: Option<(u32, u32)>,
    provider: &str,
    detail: &str,
) -> PyResult<usize> {
    match provider {
        "openai" => {
            let detail = Detail::parse(detail).ok_or_else(|| {
                PyValueError::new_err(format!(
                    "detail must be \"low\", \"high\" or \"auto\", got {detail:?}"
                ))
            })?;
            Ok(media::openai_image_tokens(size, detail))
        }
        "anthropic" => Ok(media::anthropic_image_tokens(size)),
        _ => Err(PyValueError::new_err(format!(
            "provider must be \"openai\" or \"anthropic\", got {provider:?}"
        ))),
    }
}

/// Registers the functions.
pub(crate) fn add(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(image_size, m)?)?;
    m.add_function(wrap_pyfunction!(image_tokens, m)?)?;
    Ok(())
}
