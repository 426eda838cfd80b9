//! How a request is rendered and counted (`ctxbudget.tokens.render_tools`, the request
//! profiles, PDF pages),
//! from the core's `tokens::request` and `tokens::typescript`.

use ctxbudget::tokens::{pdf, request, typescript};
use pyo3::prelude::*;
use pyo3::types::PyList;
use pyo3::IntoPyObjectExt;

/// The `# Tools` section the model reads for the function tools among `tools` (tool
/// definitions in any shape `count_messages` takes; other tools are left out).
#[pyfunction]
pub(crate) fn render_tools(tools: &Bound<'_, PyList>) -> PyResult<String> {
    let (values, _) = crate::encoding::json_values(tools, "a tool definition")?;
    let functions: Vec<_> = values.iter().filter_map(request::function_tool).collect();
    Ok(typescript::tools_section(&functions))
}

/// The name of the request profile a model's requests are counted with.
#[pyfunction]
pub(crate) fn profile_for_model(model: &str) -> &'static str {
    ctxbudget::tokens::profile::Profile::for_model(model).name()
}

/// Pages of a PDF given as bytes, or as base64 text or a `data:` URL (`str`); a `str`
/// message when they cannot be read (the wrapper raises `MediaError` with it).
#[pyfunction]
pub(crate) fn pdf_page_count<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    use pyo3::types::{PyByteArray, PyBytes, PyString};
    let pages = if let Ok(text) = data.cast::<PyString>() {
        let text = text.to_str()?.to_owned();
        py.detach(|| pdf::page_count_from_base64(&text))
    } else if let Ok(bytes) = data.cast::<PyBytes>() {
        let bytes = bytes.as_bytes();
        py.detach(|| pdf::page_count(bytes))
    } else if let Ok(array) = data.cast::<PyByteArray>() {
        let bytes = array.to_vec();
        py.detach(|| pdf::page_count(&bytes))
    } else {
        let kind = data.get_type().name()?.to_string();
        return Err(pyo3::exceptions::PyTypeError::new_err(format!(
            "pdf_page_count() takes the PDF's bytes, or base64 text or a data: URL (str), got {kind}"
        )));
    };
    match pages {
        Ok(n) => n.into_bound_py_any(py),
        Err(e) => e.to_string().into_bound_py_any(py),
    }
}

/// Tokens of a PDF of `pages` pages by the rule of the profile named `profile`.
#[pyfunction]
pub(crate) fn pdf_tokens(pages: usize, profile: &str) -> PyResult<usize> {
    let rule = ctxbudget::tokens::profile::Profile::parse(profile)
        .ok_or_else(|| {
            pyo3::exceptions::PyValueError::new_err(format!("unknown profile {profile:?}"))
        })?
        .pdf_rule();
    Ok(pdf::pdf_tokens(pages, rule))
}

/// Registers the functions and the profile names.
pub(crate) fn add(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(render_tools, m)?)?;
    m.add_function(wrap_pyfunction!(profile_for_model, m)?)?;
    m.add_function(wrap_pyfunction!(pdf_page_count, m)?)?;
    m.add_function(wrap_pyfunction!(pdf_tokens, m)?)?;
    let names: Vec<&str> = ctxbudget::tokens::profile::Profile::ALL
        .iter()
        .map(|p| p.name())
        .collect();
    m.add("PROFILES", names)?;
    m.add("PDF_MAX_PAGES", pdf::PDF_MAX_PAGES)?;
    m.add("PDF_PAGE_TEXT_TOKENS", pdf::PDF_PAGE_TEXT_TOKENS)?;
    Ok(())
}
