//! A call the program makes and the answer it gets, in the one JSON shape the caller sees on
//! every door (`tool_call` events, `pending_calls`, `tool-results`, `resume`).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// One call of a tool by the program, checked against its schema before it left.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ToolCall {
    /// `call_<n>`, counted from 1 over the execution: the same call has the same id when a
    /// suspended execution is brought back.
    pub call_id: String,
    /// The tool's name as the request gave it.
    pub name: String,
    /// Its arguments, an object.
    #[schema(value_type = Object)]
    pub arguments: Value,
}

impl ToolCall {
    /// Bytes of its arguments as JSON (as `argument_bytes` bounds them on the supervisor's
    /// side, and the audit line counts them).
    pub fn argument_bytes(&self) -> u64 {
        self.arguments.to_string().len() as u64
    }
}

/// An error the caller raises in the program instead of a result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct AnswerError {
    /// A builtin exception's name (`ValueError`, `KeyError`, `TimeoutError`, …) is raised as
    /// that exception; any other name as `tools.ToolError` carrying it.
    #[serde(rename = "type")]
    pub kind: String,
    /// Its message.
    #[serde(default)]
    pub message: String,
}

/// What a call got.
#[derive(Debug, Clone, PartialEq)]
pub enum Answered {
    /// Its result, any JSON value.
    Result(Value),
    /// An error raised in the program.
    Error(AnswerError),
}

/// The answer to one call: `{"call_id", "result"}` or `{"call_id", "error": {"type",
/// "message"}}`.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// The call answered.
    pub call_id: String,
    /// With what.
    pub answered: Answered,
}

impl Answer {
    /// The answer as JSON, in the shape a caller sends it.
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("call_id".into(), Value::String(self.call_id.clone()));
        match &self.answered {
            Answered::Result(v) => m.insert("result".into(), v.clone()),
            Answered::Error(e) => m.insert(
                "error".into(),
                serde_json::to_value(e).unwrap_or(Value::Null),
            ),
        };
        Value::Object(m)
    }

    /// Reads one answer as a caller sends it; what is wrong, for a 400. `result_bytes`
    /// bounds the result (or the error's message) as JSON.
    pub fn from_value(value: Value, result_bytes: u64) -> Result<Answer, String> {
        let Value::Object(mut m) = value else {
            return Err("an answer must be an object with call_id and result or error".into());
        };
        let call_id = match m.remove("call_id") {
            Some(Value::String(s)) if !s.is_empty() && s.len() <= 64 => s,
            _ => return Err("an answer needs its call_id (a string)".into()),
        };
        let result = m.remove("result");
        let error = m.remove("error");
        if let Some(k) = m.keys().next() {
            return Err(format!("unknown field {k:?} in the answer to {call_id}"));
        }
        let answered = match (result, error) {
            (Some(v), None) => Answered::Result(v),
            (None, Some(e)) => {
                let e: AnswerError = serde_json::from_value(e).map_err(|e| {
                    format!("the error answering {call_id} must be {{\"type\", \"message\"}}: {e}")
                })?;
                let identifier = !e.kind.is_empty()
                    && e.kind.len() <= 100
                    && !e.kind.starts_with(|c: char| c.is_ascii_digit())
                    && e.kind
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_');
                if !identifier {
                    return Err(format!(
                        "the error answering {call_id} needs a type that is a Python name"
                    ));
                }
                Answered::Error(e)
            }
            _ => {
                return Err(format!(
                    "the answer to {call_id} needs exactly one of result and error"
                ));
            }
        };
        let answer = Answer { call_id, answered };
        let size = answer.bytes();
        if size > result_bytes {
            return Err(format!(
                "the answer to {} is {size} bytes, over result_bytes of {result_bytes}",
                answer.call_id
            ));
        }
        Ok(answer)
    }

    /// The answer's size as `result_bytes` and the audit line count it: its result as JSON,
    /// or its error's message.
    pub fn bytes(&self) -> u64 {
        match &self.answered {
            Answered::Result(v) => serde_json::to_vec(v).map(|b| b.len() as u64).unwrap_or(0),
            Answered::Error(e) => e.message.len() as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_answer_has_one_result_or_one_error() {
        let ok = Answer::from_value(json!({"call_id": "call_1", "result": null}), 100).unwrap();
        assert_eq!(ok.answered, Answered::Result(Value::Null));
        assert_eq!(Answer::from_value(ok.to_value(), 100).unwrap(), ok);
        let err = Answer::from_value(
            json!({"call_id": "call_2", "error": {"type": "KeyError", "message": "no"}}),
            100,
        )
        .unwrap();
        assert!(matches!(err.answered, Answered::Error(ref e) if e.kind == "KeyError"));
        for bad in [
            json!({"call_id": "c"}),
            json!({"call_id": "c", "result": 1, "error": {"type": "X"}}),
            json!({"result": 1}),
            json!({"call_id": "c", "error": {"type": "not a name"}}),
            json!({"call_id": "c", "result": 1, "extra": 2}),
            json!({"call_id": "c", "result": "x".repeat(200)}),
        ] {
            assert!(Answer::from_value(bad.clone(), 100).is_err(), "{bad}");
        }
    }
}
