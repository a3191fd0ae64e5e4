//! The tools a request offers its program: names, descriptions and JSON Schemas, checked when
//! the request is read, compiled where the guest's calls are checked.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::limits::ToolLimits;

/// Tools a request may offer.
pub const MAX_TOOLS: usize = 256;
/// The longest tool name.
pub const MAX_NAME_CHARS: usize = 128;
/// The longest description.
pub const MAX_DESCRIPTION_BYTES: usize = 16 << 10;
/// The largest `parameters` schema, as JSON.
pub const MAX_SCHEMA_BYTES: usize = 64 << 10;

/// Names the guest's `tools` namespace holds itself: a tool mapped to one gets a `_` after.
const RESERVED: [&str; 3] = ["aio", "ToolError", "names"];

/// Python's keywords (a tool mapped to one gets a `_` after: `tools.class_`).
const KEYWORDS: [&str; 35] = [
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue",
    "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import",
    "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while",
    "with", "yield",
];

/// One tool, in the shape MCP and agent frameworks use.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolSpec {
    /// The tool's name as the caller knows it; in the guest, `tools.<python name>` (see
    /// [`python_name`]).
    pub name: String,
    /// Its docstring in the guest.
    #[serde(default)]
    pub description: String,
    /// A JSON Schema of an object: its properties are the function's keyword arguments.
    #[serde(default = "empty_object_schema")]
    #[schema(value_type = Object)]
    pub parameters: Value,
}

fn empty_object_schema() -> Value {
    serde_json::json!({"type": "object"})
}

/// The tools a program may call and the limits on its calls: part of the program, so it
/// crosses to the worker as data and is kept with a suspended execution.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Toolbox {
    /// The tools, in the order the request gave them.
    pub tools: Vec<ToolSpec>,
    /// The limits on their calls.
    pub limits: ToolLimits,
}

/// Why a request's tools cannot be offered (a 400 naming the field).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolboxError {
    /// More tools than [`MAX_TOOLS`].
    #[error("at most {MAX_TOOLS} tools")]
    TooMany,
    /// A name that is empty or too long.
    #[error("tools[{0}].name must be 1 to {MAX_NAME_CHARS} characters")]
    BadName(usize),
    /// Two tools with the same Python name.
    #[error("tools[{index}].name {name:?} maps to tools.{python}, as an earlier tool's does")]
    Collision {
        /// The later tool.
        index: usize,
        /// Its name.
        name: String,
        /// The Python name both map to.
        python: String,
    },
    /// A description over [`MAX_DESCRIPTION_BYTES`].
    #[error("tools[{0}].description is longer than {MAX_DESCRIPTION_BYTES} bytes")]
    LongDescription(usize),
    /// A schema over [`MAX_SCHEMA_BYTES`], not an object schema, or not a valid schema.
    #[error("tools[{index}].parameters: {message}")]
    BadSchema {
        /// The tool.
        index: usize,
        /// Why.
        message: String,
    },
}

/// The Python name of tool `name`: every character that cannot be in an identifier becomes
/// `_`, a leading digit gets a `_` before it, and a keyword or a name the namespace keeps
/// (`aio`, `ToolError`, `names`) a `_` after. `get-weather` → `get_weather`,
/// `2fa.check` → `_2fa_check`, `class` → `class_`.
pub fn python_name(name: &str) -> String {
    let mut out: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if out.is_empty() || out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, '_');
    }
    if KEYWORDS.contains(&out.as_str()) || RESERVED.contains(&out.as_str()) {
        out.push('_');
    }
    out
}

/// What is wrong with a call's arguments: the exception the guest raises for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ArgumentErrorKind {
    /// A missing or unexpected argument, or one of the wrong type.
    TypeError,
    /// An argument of the right type with a value the schema refuses.
    ValueError,
}

/// A call refused before it left, with the guest's exception.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgumentError {
    /// Which exception.
    pub kind: ArgumentErrorKind,
    /// Its message.
    pub message: String,
}

impl Toolbox {
    /// Checks the tools as a request gives them: count, names (their Python names unique),
    /// sizes, and that each `parameters` is an object schema that compiles.
    pub fn check(&self) -> Result<(), ToolboxError> {
        if self.tools.len() > MAX_TOOLS {
            return Err(ToolboxError::TooMany);
        }
        let mut seen: HashMap<String, ()> = HashMap::new();
        for (index, t) in self.tools.iter().enumerate() {
            if t.name.is_empty() || t.name.chars().count() > MAX_NAME_CHARS {
                return Err(ToolboxError::BadName(index));
            }
            let python = python_name(&t.name);
            if seen.insert(python.clone(), ()).is_some() {
                return Err(ToolboxError::Collision {
                    index,
                    name: t.name.clone(),
                    python,
                });
            }
            if t.description.len() > MAX_DESCRIPTION_BYTES {
                return Err(ToolboxError::LongDescription(index));
            }
            compile(index, &t.parameters)?;
        }
        Ok(())
    }

    /// The specs as the guest's `vivarium_tools.install` reads them: a JSON list of
    /// `{name, python, description, parameters}`.
    pub fn guest_json(&self) -> String {
        let specs: Vec<Value> = self
            .tools
            .iter()
            .map(|t| {
                serde_json::json!({
                    "name": t.name,
                    "python": python_name(&t.name),
                    "description": t.description,
                    "parameters": t.parameters,
                })
            })
            .collect();
        Value::Array(specs).to_string()
    }

    /// The validators of every tool, by name (on the worker, once per execution that has tools).
    pub fn compile(&self) -> Result<Validators, ToolboxError> {
        let mut by_name = HashMap::new();
        for (index, t) in self.tools.iter().enumerate() {
            by_name.insert(t.name.clone(), compile(index, &t.parameters)?);
        }
        Ok(Validators(by_name))
    }
}

fn compile(index: usize, schema: &Value) -> Result<jsonschema::Validator, ToolboxError> {
    let bad = |message: String| ToolboxError::BadSchema { index, message };
    let size = serde_json::to_vec(schema).map(|v| v.len()).unwrap_or(0);
    if size > MAX_SCHEMA_BYTES {
        return Err(bad(format!("longer than {MAX_SCHEMA_BYTES} bytes")));
    }
    let Some(obj) = schema.as_object() else {
        return Err(bad("must be a JSON Schema object".into()));
    };
    match obj.get("type") {
        None => {}
        Some(Value::String(t)) if t == "object" => {}
        Some(_) => {
            return Err(bad(
                "must describe an object (\"type\": \"object\"): its properties are the \
                 function's keyword arguments"
                    .into(),
            ));
        }
    }
    // No resolver is compiled in: a `$ref` to anything outside the schema fails here,
    // never a fetch.
    jsonschema::validator_for(schema).map_err(|e| bad(e.to_string()))
}

/// The compiled schemas of a [`Toolbox`].
pub struct Validators(HashMap<String, jsonschema::Validator>);

impl Validators {
    /// Checks `arguments` of a call to `name`; the exception the guest raises when they do
    /// not fit (`TypeError` for missing, unexpected and mistyped arguments, `ValueError` for
    /// a value the schema refuses), or for a tool that does not exist.
    pub fn check(&self, name: &str, arguments: &Value) -> Result<(), ArgumentError> {
        let Some(v) = self.0.get(name) else {
            return Err(ArgumentError {
                kind: ArgumentErrorKind::TypeError,
                message: format!("no tool named {name:?}"),
            });
        };
        if !arguments.is_object() {
            return Err(ArgumentError {
                kind: ArgumentErrorKind::TypeError,
                message: format!("{name}(): arguments must be keyword arguments"),
            });
        }
        let Err(e) = v.validate(arguments) else {
            return Ok(());
        };
        use jsonschema::error::ValidationErrorKind as K;
        let kind = match e.kind() {
            K::Type { .. } | K::Required { .. } | K::AdditionalProperties { .. } => {
                ArgumentErrorKind::TypeError
            }
            _ => ArgumentErrorKind::ValueError,
        };
        let at = e.instance_path().to_string();
        let place = if at.is_empty() {
            String::new()
        } else {
            format!(" at {at}")
        };
        let mut message = format!("{name}(){place}: {e}");
        if message.len() > 1024 {
            let mut cut = 1024;
            while !message.is_char_boundary(cut) {
                cut -= 1;
            }
            message.truncate(cut);
            message.push('…');
        }
        Err(ArgumentError { kind, message })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn weather() -> Toolbox {
        Toolbox {
            tools: vec![ToolSpec {
                name: "get-weather".into(),
                description: "The weather.".into(),
                parameters: json!({
                    "type": "object",
                    "properties": {
                        "city": {"type": "string"},
                        "days": {"type": "integer", "minimum": 1, "maximum": 7}
                    },
                    "required": ["city"],
                    "additionalProperties": false
                }),
            }],
            limits: ToolLimits::DEFAULT,
        }
    }

    #[test]
    fn names_map_to_identifiers_by_one_rule() {
        assert_eq!(python_name("get-weather"), "get_weather");
        assert_eq!(python_name("2fa.check"), "_2fa_check");
        assert_eq!(python_name("class"), "class_");
        assert_eq!(python_name("aio"), "aio_");
        assert_eq!(python_name("ünï"), "_n_");
    }

    #[test]
    fn a_bad_toolbox_names_its_field() {
        let mut b = weather();
        b.tools.push(ToolSpec {
            name: "get.weather".into(),
            ..b.tools[0].clone()
        });
        assert!(matches!(
            b.check(),
            Err(ToolboxError::Collision { index: 1, .. })
        ));
        let mut b = weather();
        b.tools[0].parameters = json!({"type": "string"});
        assert!(matches!(
            b.check(),
            Err(ToolboxError::BadSchema { index: 0, .. })
        ));
        b.tools[0].parameters = json!({"$ref": "https://example.com/schema.json"});
        assert!(matches!(
            b.check(),
            Err(ToolboxError::BadSchema { index: 0, .. })
        ));
        assert!(weather().check().is_ok());
    }

    #[test]
    fn arguments_are_checked_against_the_schema() {
        let v = weather().compile().unwrap();
        assert!(v.check("get-weather", &json!({"city": "Paris"})).is_ok());
        let kind = |a: Value| v.check("get-weather", &a).unwrap_err().kind;
        assert_eq!(kind(json!({})), ArgumentErrorKind::TypeError);
        assert_eq!(kind(json!({"city": 3})), ArgumentErrorKind::TypeError);
        assert_eq!(
            kind(json!({"city": "x", "extra": 1})),
            ArgumentErrorKind::TypeError
        );
        assert_eq!(
            kind(json!({"city": "x", "days": 9})),
            ArgumentErrorKind::ValueError
        );
        assert_eq!(
            v.check("nope", &json!({})).unwrap_err().kind,
            ArgumentErrorKind::TypeError
        );
    }
}
