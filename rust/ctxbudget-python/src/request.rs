//! How a request is rendered for counting (`ctxbudget.tokens.render_tools` wraps this),
//! from the core's `tokens::request` and `tokens::typescript`.

use ctxbudget::tokens::{request, typescript};
use pyo3::prelude::*;
use pyo3::types::PyList;

/// The `# Tools` section the model reads for the function tools among `tools` (tool
/// definitions in any shape `count_messages` takes; other tools are left out).
#[pyfunction]
pub(crate) fn render_tools(tools: &Bound<'_, PyList>) -> PyResult<String> {
    let (values, _) = crate::encoding::json_values(tools, "a tool definition")?;
    let functions: Vec<_> = values.iter().filter_map(request::function_tool).collect();
    Ok(typescript::tools_section(&functions))
}

/// Registers the functions.
pub(crate) fn add(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(render_tools, m)?)?;
    Ok(())
}
