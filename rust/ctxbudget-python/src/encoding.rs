//! Token counting (`ctxbudget.Encoding` wraps `_ctxbudget.Encoding`): the GIL is
//! released around every count; inside an awaited `AsyncSession` call, encoding loads
//! and long counts run on the I/O pool (`offload.rs`).

use std::borrow::Cow;

use ctxbudget::tokens::{self, Encoding};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyList, PyString, PyTuple};

use crate::errors::{no_panic, token_error};
use crate::offload::offload_count;

/// Text of a Python `str`; lone surrogates become U+FFFD exactly as tiktoken does it
/// (through UTF-16 with `surrogatepass`, which also joins a split surrogate pair).
fn text_of<'a>(obj: &'a Bound<'_, PyAny>, what: &str) -> PyResult<Cow<'a, str>> {
    let Ok(s) = obj.cast::<PyString>() else {
        let kind = obj
            .get_type()
            .name()
            .map(|n| n.to_string())
            .unwrap_or_default();
        let hint = if kind == "bytes" || kind == "bytearray" {
            "; decode it first, e.g. data.decode(\"utf-8\")"
        } else {
            ""
        };
        return Err(PyTypeError::new_err(format!(
            "{what} expects str, got {kind}{hint}"
        )));
    };
    match s.to_str() {
        Ok(text) => Ok(Cow::Borrowed(text)),
        Err(_) => {
            let fixed = s
                .call_method1("encode", ("utf-16", "surrogatepass"))?
                .call_method1("decode", ("utf-16", "replace"))?;
            Ok(Cow::Owned(fixed.cast::<PyString>()?.to_str()?.to_owned()))
        }
    }
}

/// The request profile named `name`.
fn profile(name: &str) -> PyResult<tokens::profile::Profile> {
    tokens::profile::Profile::parse(name).ok_or_else(|| {
        let known: Vec<&str> = tokens::profile::Profile::ALL
            .iter()
            .map(|p| p.name())
            .collect();
        PyValueError::new_err(format!(
            "profile must be one of {}, got {name:?}",
            known.join(", ")
        ))
    })
}

/// Each item of `items` as a JSON value (as `json.dumps` would write it), and the bytes
/// of JSON they took; a `TypeError` naming what cannot be.
pub(crate) fn json_values(
    items: &Bound<'_, PyList>,
    what: &str,
) -> PyResult<(Vec<serde_json::Value>, usize)> {
    let mut bytes = 0;
    let values = items
        .iter()
        .enumerate()
        .map(|(index, item)| {
            crate::pyjson::encode_value(&item)
                .and_then(|json| {
                    bytes += json.len();
                    serde_json::from_slice(&json).ok()
                })
                .ok_or_else(|| {
                    PyTypeError::new_err(format!(
                        "{what} at index {index} cannot be sent as JSON (a value json.dumps \
                         refuses, or nesting too deep)"
                    ))
                })
        })
        .collect::<PyResult<Vec<_>>>()?;
    Ok((values, bytes))
}

/// Runs a count of about `bytes` of input: on the I/O pool inside a bridged call when it
/// is long (so a long count never holds an event loop), else here without the GIL.
fn run_count(
    py: Python<'_>,
    what: &str,
    bytes: usize,
    job: impl FnOnce() -> Result<usize, tokens::TokenError> + Send + 'static,
) -> PyResult<usize> {
    let counted = if offload_count(bytes) {
        no_panic(py, what, || crate::offload::blocking(py, job))??
    } else {
        no_panic(py, what, || py.detach(job))?
    };
    counted.map_err(|e| token_error(py, e))
}

/// A tokenizer for one encoding (see the typed wrapper `ctxbudget.Encoding`).
#[pyclass(module = "ctxbudget._ctxbudget", name = "Encoding", frozen)]
pub(crate) struct PyEncoding {
    inner: Encoding,
}

impl PyEncoding {
    /// The template, messages, tools and extra variables of a chat call, as JSON.
    #[allow(clippy::type_complexity)]
    fn chat_inputs(
        &self,
        messages: &Bound<'_, PyList>,
        tools: Option<&Bound<'_, PyList>>,
        extra: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<(
        &'static tokens::template::ChatTemplate,
        serde_json::Value,
        Option<serde_json::Value>,
        Option<serde_json::Value>,
    )> {
        let template = self.inner.chat_template().ok_or_else(|| {
            PyValueError::new_err(format!(
                "the tokenizer {:?} came without a chat template; open its model directory \
                 with Encoding.from_dir()",
                self.inner.name()
            ))
        })?;
        let (messages, _) = json_values(messages, "a message")?;
        let tools = tools
            .map(|t| json_values(t, "a tool definition"))
            .transpose()?
            .map(|(values, _)| serde_json::Value::Array(values));
        let extra = extra
            .map(|e| {
                crate::pyjson::encode_value(e)
                    .and_then(|json| serde_json::from_slice(&json).ok())
                    .ok_or_else(|| PyTypeError::new_err("template variables must be JSON-able"))
            })
            .transpose()?;
        Ok((template, serde_json::Value::Array(messages), tools, extra))
    }
}

#[pymethods]
impl PyEncoding {
    /// `chunk_bytes` sets a chunk bound (cuts at exact boundaries only); it exists for
    /// tests that chunking never changes a count.
    #[new]
    #[pyo3(signature = (name, *, cache_size = tokens::DEFAULT_CACHE_CAPACITY, chunk_bytes = None))]
    fn new(
        py: Python<'_>,
        name: &str,
        cache_size: usize,
        chunk_bytes: Option<usize>,
    ) -> PyResult<Self> {
        let name = name.to_owned();
        let inner = no_panic(py, "loading the encoding", || {
            crate::offload::blocking(py, move || Encoding::new(&name))
        })??
        .map_err(|e| token_error(py, e))?;
        let inner = match chunk_bytes {
            Some(bytes) => inner.with_chunk_bytes(bytes),
            None => inner,
        };
        Ok(PyEncoding {
            inner: inner.with_cache_capacity(cache_size),
        })
    }

    /// The encoding that counts for `model` (an estimate for some families).
    #[staticmethod]
    #[pyo3(signature = (model, *, cache_size = tokens::DEFAULT_CACHE_CAPACITY))]
    fn for_model(py: Python<'_>, model: &str, cache_size: usize) -> PyResult<Self> {
        let model = model.to_owned();
        let inner = no_panic(py, "loading the encoding", || {
            crate::offload::blocking(py, move || Encoding::for_model(&model))
        })??
        .map_err(|e| token_error(py, e))?;
        Ok(PyEncoding {
            inner: inner.with_cache_capacity(cache_size),
        })
    }

    /// The tokenizer in a `tokenizer.json`, `tekken*.json` or SentencePiece `.model` file.
    #[staticmethod]
    #[pyo3(signature = (path, *, cache_size = tokens::DEFAULT_CACHE_CAPACITY))]
    fn from_file(py: Python<'_>, path: std::path::PathBuf, cache_size: usize) -> PyResult<Self> {
        let inner = no_panic(py, "loading the tokenizer", || {
            crate::offload::blocking(py, move || Encoding::from_file(&path))
        })??
        .map_err(|e| token_error(py, e))?;
        Ok(PyEncoding {
            inner: inner.with_cache_capacity(cache_size),
        })
    }

    /// The tokenizer (and chat template) of a model directory.
    #[staticmethod]
    #[pyo3(signature = (dir, *, cache_size = tokens::DEFAULT_CACHE_CAPACITY))]
    fn from_dir(py: Python<'_>, dir: std::path::PathBuf, cache_size: usize) -> PyResult<Self> {
        let inner = no_panic(py, "loading the tokenizer", || {
            crate::offload::blocking(py, move || Encoding::from_dir(&dir))
        })??
        .map_err(|e| token_error(py, e))?;
        Ok(PyEncoding {
            inner: inner.with_cache_capacity(cache_size),
        })
    }

    /// The tokenizer of `model` from the model directories under `root`.
    #[staticmethod]
    #[pyo3(signature = (root, model, *, cache_size = tokens::DEFAULT_CACHE_CAPACITY))]
    fn for_model_in(
        py: Python<'_>,
        root: std::path::PathBuf,
        model: String,
        cache_size: usize,
    ) -> PyResult<Self> {
        let inner = no_panic(py, "loading the tokenizer", || {
            crate::offload::blocking(py, move || Encoding::for_model_in(&root, &model))
        })??
        .map_err(|e| token_error(py, e))?;
        Ok(PyEncoding {
            inner: inner.with_cache_capacity(cache_size),
        })
    }

    #[getter]
    fn has_chat_template(&self) -> bool {
        self.inner.chat_template().is_some()
    }

    /// The text the model's chat template renders for `messages` and `tools`.
    #[pyo3(signature = (messages, tools, add_generation_prompt, extra))]
    fn render_chat(
        &self,
        py: Python<'_>,
        messages: &Bound<'_, PyList>,
        tools: Option<&Bound<'_, PyList>>,
        add_generation_prompt: bool,
        extra: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<String> {
        let (template, messages, tools, extra) = self.chat_inputs(messages, tools, extra)?;
        no_panic(py, "rendering the chat template", || {
            py.detach(|| {
                template.render(
                    &messages,
                    tools.as_ref(),
                    add_generation_prompt,
                    extra.as_ref(),
                )
            })
        })?
        .map_err(|e| token_error(py, e))
    }

    /// Tokens of a request as the model's chat template renders it, with the prompt for
    /// the reply.
    #[pyo3(signature = (messages, tools, extra))]
    fn count_chat(
        &self,
        py: Python<'_>,
        messages: &Bound<'_, PyList>,
        tools: Option<&Bound<'_, PyList>>,
        extra: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<usize> {
        let (template, messages, tools, extra) = self.chat_inputs(messages, tools, extra)?;
        let bytes = messages.to_string().len();
        let enc = self.inner.clone();
        let job = move || {
            tokens::template::chat_template_tokens(
                &enc,
                template,
                &messages,
                tools.as_ref(),
                extra.as_ref(),
            )
        };
        run_count(py, "counting a chat", bytes, job)
    }

    #[getter]
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    #[getter]
    fn estimate_scale_bp(&self) -> Option<u32> {
        self.inner.estimate_scale_bp()
    }

    fn count(&self, py: Python<'_>, text: &Bound<'_, PyAny>) -> PyResult<usize> {
        let text = text_of(text, "count()")?;
        if offload_count(text.len()) {
            let (enc, text) = (self.inner.clone(), text.into_owned());
            return no_panic(py, "count()", || {
                crate::offload::blocking(py, move || enc.count(&text))
            })?;
        }
        no_panic(py, "count()", || py.detach(|| self.inner.count(&text)))
    }

    /// `(tokens, exact)`.
    fn count_detail(&self, py: Python<'_>, text: &Bound<'_, PyAny>) -> PyResult<(usize, bool)> {
        let text = text_of(text, "count_detail()")?;
        let c = if offload_count(text.len()) {
            let (enc, text) = (self.inner.clone(), text.into_owned());
            no_panic(py, "count_detail()", || {
                crate::offload::blocking(py, move || enc.count_detail(&text))
            })??
        } else {
            no_panic(py, "count_detail()", || {
                py.detach(|| self.inner.count_detail(&text))
            })?
        };
        Ok((c.tokens, c.exact))
    }

    fn count_many(&self, py: Python<'_>, texts: &Bound<'_, PyAny>) -> PyResult<Vec<usize>> {
        let items: Vec<Bound<'_, PyAny>> = if let Ok(list) = texts.cast::<PyList>() {
            list.iter().collect()
        } else if let Ok(tuple) = texts.cast::<PyTuple>() {
            tuple.iter().collect()
        } else {
            return Err(PyTypeError::new_err(
                "count_many() expects a list or tuple of str",
            ));
        };
        let mut owned = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            owned.push(text_of(item, &format!("count_many() item {i}"))?);
        }
        if offload_count(owned.iter().map(|t| t.len()).sum()) {
            let enc = self.inner.clone();
            let owned: Vec<String> = owned.into_iter().map(Cow::into_owned).collect();
            return no_panic(py, "count_many()", || {
                crate::offload::blocking(py, move || enc.count_many(&owned))
            })?;
        }
        no_panic(py, "count_many()", || {
            py.detach(|| self.inner.count_many(&owned))
        })
    }

    fn count_json(&self, py: Python<'_>, json_text: &Bound<'_, PyAny>) -> PyResult<usize> {
        let text = text_of(json_text, "count_json()")?;
        if offload_count(text.len()) {
            let (enc, text) = (self.inner.clone(), text.into_owned());
            return no_panic(py, "count_json()", || {
                crate::offload::blocking(py, move || enc.count_json(&text))
            })??
            .map_err(|e| token_error(py, e));
        }
        no_panic(py, "count_json()", || {
            py.detach(|| self.inner.count_json(&text))
        })?
        .map_err(|e| token_error(py, e))
    }

    /// Tokens of a request — reply priming, the system text, the advertised tools and
    /// every message — by the core's request rules (`tokens::request::request_tokens`)
    /// for the request profile named `profile`. Long requests are counted on the I/O
    /// pool inside a bridged call, like long texts.
    #[pyo3(signature = (system, messages, tools, profile))]
    fn count_request(
        &self,
        py: Python<'_>,
        system: Option<&str>,
        messages: &Bound<'_, PyList>,
        tools: &Bound<'_, PyList>,
        profile: &str,
    ) -> PyResult<usize> {
        let rule = self::profile(profile)?;
        let (messages, message_bytes) = json_values(messages, "a message")?;
        let (tools, tool_bytes) = json_values(tools, "a tool definition")?;
        let system = system.map(str::to_owned);
        let bytes = message_bytes + tool_bytes + system.as_ref().map_or(0, String::len);
        let enc = self.inner.clone();
        let job = move || {
            tokens::request::request_tokens(&enc, system.as_deref(), &messages, &tools, rule)
        };
        run_count(py, "counting a request", bytes, job)
    }

    /// Tokens of `messages` with their framing by the profile named `profile`, without
    /// the request's reply priming (nor, for harmony, its system and developer
    /// messages).
    fn count_messages(
        &self,
        py: Python<'_>,
        messages: &Bound<'_, PyList>,
        profile: &str,
    ) -> PyResult<usize> {
        let rule = self::profile(profile)?;
        let (messages, bytes) = json_values(messages, "a message")?;
        let enc = self.inner.clone();
        let job = move || tokens::request::messages_tokens(&enc, &messages, rule);
        run_count(py, "counting messages", bytes, job)
    }

    fn cache_len(&self) -> usize {
        self.inner.cache_len()
    }

    fn clear_cache(&self) {
        self.inner.clear_cache()
    }

    fn __repr__(&self) -> String {
        format!("Encoding({:?})", self.inner.name())
    }
}

/// Names of every encoding shipped.
#[pyfunction]
pub(crate) fn encoding_names() -> Vec<&'static str> {
    tokens::encoding_names().collect()
}

/// `(encoding, estimate_scale_bp)` for `model`, or `None` if nothing is known.
#[pyfunction]
pub(crate) fn model_encoding(model: &str) -> Option<(&'static str, Option<u32>)> {
    tokens::model_encoding(model).map(|m| (m.encoding, m.estimate_scale_bp))
}
