//! Function tools as the model sees them: the `functions` namespace of TypeScript type
//! declarations that OpenAI's published harmony format renders from JSON schemas (the
//! format of its open-weight models, and the public reference for how its API models
//! see tools; SPEC §1, Request counting).
//!
//! ```
//! use ctxbudget::tokens::typescript::{functions_namespace, FunctionTool};
//! use serde_json::json;
//!
//! let params = json!({"type": "object", "properties": {
//!     "path": {"type": "string", "description": "File to read."}}, "required": ["path"]});
//! let tool = FunctionTool { name: "read_file", description: "Reads a file.", parameters: Some(&params) };
//! assert_eq!(
//!     functions_namespace(&[tool]),
//!     "## functions\n\nnamespace functions {\n\n// Reads a file.\n\
//!      type read_file = (_: {\n// File to read.\npath: string,\n}) => any;\n\n\
//!      } // namespace functions"
//! );
//! ```
//!
//! Schemas are rendered as that format renders them: objects with their properties in
//! order (`?` marks the optional ones), titles, descriptions, examples and defaults as
//! comments, string enums as unions of literals, `integer` as `number`, arrays as `T[]`,
//! a list of types or `oneOf` as a union, `nullable` as `| null`; anything else is `any`.

use std::fmt::Write as _;

use serde_json::Value;

/// One function tool: its name, description and JSON-schema parameters.
#[derive(Clone, Copy, Debug)]
pub struct FunctionTool<'a> {
    /// The function's name.
    pub name: &'a str,
    /// What it does (each line becomes a comment).
    pub description: &'a str,
    /// Its parameters' schema; `None` renders `() => any`.
    pub parameters: Option<&'a Value>,
}

/// The `## functions` section: every tool as a type in `namespace functions`.
pub fn functions_namespace(tools: &[FunctionTool<'_>]) -> String {
    let mut lines: Vec<String> = vec!["## functions\n".to_owned()];
    if !tools.is_empty() {
        lines.push("namespace functions {\n".to_owned());
        for tool in tools {
            lines.extend(tool.description.lines().map(|l| format!("// {l}")));
            match tool.parameters {
                Some(params) => lines.push(format!(
                    "type {} = (_: {}) => any;\n",
                    tool.name,
                    schema_type(params, "")
                )),
                None => lines.push(format!("type {} = () => any;\n", tool.name)),
            }
        }
        lines.push("} // namespace functions".to_owned());
    }
    lines.join("\n")
}

/// The `# Tools` section holding the `functions` namespace (what a developer message
/// carries after its instructions).
pub fn tools_section(tools: &[FunctionTool<'_>]) -> String {
    format!("# Tools\n\n{}", functions_namespace(tools))
}

fn has_enum(schema: &Value) -> bool {
    schema
        .get("enum")
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty())
}

fn is_nullable(schema: &Value) -> bool {
    schema.get("nullable").and_then(Value::as_bool) == Some(true)
}

/// `default: …` as the format writes it: a string quoted unless the schema is an enum.
fn default_comment(schema: &Value) -> Option<String> {
    let default = schema.get("default")?;
    Some(match default.as_str() {
        Some(s) if !has_enum(schema) => format!("default: \"{s}\""),
        Some(s) => format!("default: {s}"),
        None => format!("default: {default}"),
    })
}

/// `ty` with `| null` added for a nullable schema that does not already say null.
fn with_null(schema: &Value, ty: String) -> String {
    if is_nullable(schema) && !ty.contains("null") {
        ty + " | null"
    } else {
        ty
    }
}

/// The TypeScript type of `schema`, its nested lines indented by `indent`.
pub fn schema_type(schema: &Value, indent: &str) -> String {
    if let Some(variants) = schema.get("oneOf").and_then(Value::as_array) {
        return one_of_type(variants, indent);
    }
    if let Some(types) = schema.get("type").and_then(Value::as_array) {
        let names: Vec<&str> = types
            .iter()
            .filter_map(Value::as_str)
            .map(|t| if t == "integer" { "number" } else { t })
            .collect();
        if !names.is_empty() {
            return names.join(" | ");
        }
    }
    match schema.get("type").and_then(Value::as_str) {
        Some("object") => object_type(schema, indent),
        Some("string") => string_type(schema),
        Some("number" | "integer") => "number".to_owned(),
        Some("boolean") => "boolean".to_owned(),
        Some("array") => match schema.get("items") {
            Some(items) => format!("{}[]", schema_type(items, indent)),
            None => "Array<any>".to_owned(),
        },
        _ => "any".to_owned(),
    }
}

fn string_type(schema: &Value) -> String {
    let literals: Vec<String> = schema
        .get("enum")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(|s| format!("\"{s}\""))
                .collect()
        })
        .unwrap_or_default();
    if literals.is_empty() {
        "string".to_owned()
    } else {
        literals.join(" | ")
    }
}

/// A top-level `oneOf`: each variant on its own ` | ` line, with its comments after it.
fn one_of_type(variants: &[Value], indent: &str) -> String {
    let mut out = String::new();
    let inner = format!("{indent}   ");
    for variant in variants {
        let _ = write!(out, "\n{indent} | ");
        out.push_str(&with_null(variant, schema_type(variant, &inner)));
        // Here an enum's string default is written as JSON, quotes and all.
        let default = variant.get("default").map(|d| match d.as_str() {
            Some(s) if !has_enum(variant) => format!("default: \"{s}\""),
            _ => format!("default: {d}"),
        });
        let comments: Vec<String> = variant
            .get("description")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .into_iter()
            .chain(default)
            .collect();
        if !comments.is_empty() {
            let _ = write!(out, " // {}", comments.join(" "));
        }
    }
    out
}

fn object_type(schema: &Value, indent: &str) -> String {
    let mut out = String::new();
    if let Some(desc) = schema.get("description").and_then(Value::as_str) {
        let _ = writeln!(out, "{indent}// {desc}");
    }
    out.push_str("{\n");
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (key, prop) in props {
            let optional = if required.contains(&key.as_str()) {
                ""
            } else {
                "?"
            };
            property_comments(&mut out, prop, indent);
            match prop.get("oneOf").and_then(Value::as_array) {
                Some(variants) => one_of_property(&mut out, key, optional, prop, variants, indent),
                None => plain_property(&mut out, key, optional, prop, indent),
            }
        }
    }
    let _ = write!(out, "{indent}}}");
    out
}

/// Title, description (unless `oneOf` renders it) and examples above a property.
fn property_comments(out: &mut String, prop: &Value, indent: &str) {
    if let Some(title) = prop.get("title").and_then(Value::as_str) {
        let _ = writeln!(out, "{indent}// {title}\n{indent}//");
    }
    if prop.get("oneOf").is_none() {
        if let Some(desc) = prop.get("description").and_then(Value::as_str) {
            let _ = writeln!(out, "{indent}// {desc}");
        }
    }
    if let Some(examples) = prop.get("examples").and_then(Value::as_array) {
        if !examples.is_empty() {
            let _ = writeln!(out, "{indent}// Examples:");
            for example in examples.iter().filter_map(Value::as_str) {
                let _ = writeln!(out, "{indent}// - \"{example}\"");
            }
        }
    }
}

fn plain_property(out: &mut String, key: &str, optional: &str, prop: &Value, indent: &str) {
    let ty = with_null(prop, schema_type(prop, &format!("{indent}    ")));
    let _ = write!(out, "{indent}{key}{optional}: {ty},");
    if let Some(default) = default_comment(prop) {
        let _ = write!(out, " // {default}");
    }
    out.push('\n');
}

/// A property whose schema is a `oneOf`: its description and default above it, then each
/// variant on a ` | ` line (a variant's description only where it adds something).
fn one_of_property(
    out: &mut String,
    key: &str,
    optional: &str,
    prop: &Value,
    variants: &[Value],
    indent: &str,
) {
    let own = prop.get("description").and_then(Value::as_str);
    let first = variants
        .first()
        .and_then(|v| v.get("description"))
        .and_then(Value::as_str);
    let above = own.filter(|d| Some(*d) != first);
    if let Some(desc) = above {
        let _ = writeln!(out, "{indent}// {desc}");
    }
    if let Some(default) = default_comment(prop) {
        let _ = writeln!(out, "{indent}// {default}");
    }
    let _ = writeln!(out, "{indent}{key}{optional}:");
    let inner = format!("{indent}   ");
    for (i, variant) in variants.iter().enumerate() {
        let _ = write!(out, "{indent} | ");
        out.push_str(&with_null(variant, schema_type(variant, &inner)));
        let mut comments = Vec::new();
        if !(i == 0 && above.is_some()) {
            if let Some(desc) = variant.get("description").and_then(Value::as_str) {
                if Some(desc) != own {
                    comments.push(desc.to_owned());
                }
            }
        }
        comments.extend(default_comment(variant));
        if !comments.is_empty() {
            let _ = write!(out, " // {}", comments.join(" "));
        }
        out.push('\n');
    }
    let _ = writeln!(out, "{indent},");
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn renders_the_published_example_shapes() {
        let params = json!({"type": "object", "properties": {
            "location": {"type": "string", "description": "The city, e.g. Paris."},
            "unit": {"type": "string", "enum": ["c", "f"], "default": "c"},
            "days": {"type": "integer"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "opts": {"type": "object", "properties": {"x": {"type": "boolean"}}}
        }, "required": ["location"]});
        let tools = [
            FunctionTool {
                name: "get_weather",
                description: "Gets the weather.",
                parameters: Some(&params),
            },
            FunctionTool {
                name: "noargs",
                description: "No args.",
                parameters: None,
            },
        ];
        let expected = "# Tools\n\n## functions\n\nnamespace functions {\n\n\
            // Gets the weather.\ntype get_weather = (_: {\n// The city, e.g. Paris.\n\
            location: string,\nunit?: \"c\" | \"f\", // default: c\ndays?: number,\n\
            tags?: string[],\nopts?: {\n    x?: boolean,\n    },\n}) => any;\n\n\
            // No args.\ntype noargs = () => any;\n\n} // namespace functions";
        assert_eq!(tools_section(&tools), expected);
    }

    #[test]
    fn unions_nullables_and_unknowns() {
        assert_eq!(
            schema_type(&json!({"type": ["integer", "null"]}), ""),
            "number | null"
        );
        assert_eq!(
            schema_type(&json!({"anyOf": [{"type": "string"}]}), ""),
            "any"
        );
        assert_eq!(schema_type(&json!({"type": "array"}), ""), "Array<any>");
        assert_eq!(
            schema_type(
                &json!({"oneOf": [{"type": "string", "description": "a"}, {"type": "number", "nullable": true}]}),
                ""
            ),
            "\n | string // a\n | number | null"
        );
        assert_eq!(functions_namespace(&[]), "## functions\n");
    }
}
