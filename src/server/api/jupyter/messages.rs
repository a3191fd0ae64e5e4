//! Jupyter's messaging protocol (5.3), in the JSON form a kernel WebSocket carries: one
//! object a frame, `channel` beside the header, no signature (the HMAC of the ZeroMQ wire
//! form signs frames between a kernel and its server; over the WebSocket, the token
//! authenticates the connection, as in Jupyter Server).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// The protocol version this kernel speaks.
pub const PROTOCOL_VERSION: &str = "5.3";

/// The largest frame read; a bigger one closes the socket with a reason.
pub const MAX_FRAME_BYTES: usize = 16 << 20;

/// The channels of a kernel connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Channel {
    Shell,
    Iopub,
    Stdin,
    Control,
}

/// A message's header: what the kernel reads of it, and the rest as the client sent it
/// (clients differ: jupyter_client's session sends `date` as a number), echoed unchanged as
/// the `parent_header` of what answers it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Header {
    pub msg_id: String,
    pub msg_type: String,
    #[serde(default)]
    pub session: String,
    #[serde(flatten)]
    pub rest: Map<String, Value>,
}

/// One message, as a frame carries it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Message {
    /// The header's, repeated at the top as jupyter_client's message dicts have them (its
    /// clients read them there).
    #[serde(default)]
    pub msg_id: String,
    #[serde(default)]
    pub msg_type: String,
    pub header: Header,
    /// The request's header on a reply or broadcast; `{}` on a request.
    #[serde(default)]
    pub parent_header: Value,
    #[serde(default)]
    pub metadata: Map<String, Value>,
    #[serde(default)]
    pub content: Value,
    #[serde(default)]
    pub buffers: Vec<Value>,
    /// Missing means `shell`, as Jupyter Server reads it (jupyter_server's own gateway
    /// client sends none).
    #[serde(default = "shell")]
    pub channel: Channel,
    /// The HMAC of the ZeroMQ wire form, should a client copy it into a frame. No key is
    /// shared over the gateway (the token authenticates the connection), so, as the
    /// protocol has it for an empty key, the only valid signature is none: a frame with
    /// another is refused ([`FrameError::Signed`]). Never sent.
    #[serde(default, skip_serializing)]
    pub signature: Option<String>,
}

fn shell() -> Channel {
    Channel::Shell
}

/// Why a frame is not a message.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("not a Jupyter message: {0}")]
    Malformed(String),
    #[error("binary frames are not taken (this kernel speaks the JSON form)")]
    Binary,
    /// No key is shared (the connection's token authenticates it), so a signature must be
    /// empty.
    #[error("a signed message: no key is shared, the signature must be empty")]
    Signed,
}

impl Message {
    /// Parses one text frame.
    pub fn parse(text: &str) -> Result<Message, FrameError> {
        let m: Message =
            serde_json::from_str(text).map_err(|e| FrameError::Malformed(e.to_string()))?;
        if m.header.msg_id.is_empty() || m.header.msg_type.is_empty() {
            return Err(FrameError::Malformed("empty msg_id or msg_type".into()));
        }
        if m.signature.as_deref().is_some_and(|s| !s.is_empty()) {
            return Err(FrameError::Signed);
        }
        Ok(m)
    }

    /// A message of `msg_type` on `channel` answering or reporting on `parent`, from the
    /// kernel session `session`.
    pub fn reply(
        parent: &Header,
        session: &str,
        channel: Channel,
        msg_type: &str,
        content: Value,
    ) -> Message {
        let parent = serde_json::to_value(parent).unwrap_or(Value::Null);
        Self::new(parent, session, channel, msg_type, content)
    }

    /// A message of `msg_type` that answers nothing (its `parent_header` is `{}`).
    pub fn unprompted(session: &str, channel: Channel, msg_type: &str, content: Value) -> Message {
        Self::new(json!({}), session, channel, msg_type, content)
    }

    fn new(
        parent_header: Value,
        session: &str,
        channel: Channel,
        msg_type: &str,
        content: Value,
    ) -> Message {
        let mut rest = Map::new();
        rest.insert("username".into(), json!("vivarium"));
        rest.insert(
            "date".into(),
            json!(crate::server::time::rfc3339(std::time::SystemTime::now())),
        );
        rest.insert("version".into(), json!(PROTOCOL_VERSION));
        let msg_id = format!("{:032x}", rand::random::<u128>());
        Message {
            msg_id: msg_id.clone(),
            msg_type: msg_type.to_string(),
            header: Header {
                msg_id,
                msg_type: msg_type.to_string(),
                session: session.to_string(),
                rest,
            },
            parent_header,
            metadata: Map::new(),
            content,
            buffers: Vec::new(),
            channel,
            signature: None,
        }
    }

    /// The frame's text.
    pub fn to_text(&self) -> String {
        serde_json::to_string(self).expect("a message serialises")
    }
}

/// `status` on iopub: `busy`, `idle` or `starting`.
pub fn status(state: &str) -> Value {
    json!({ "execution_state": state })
}

/// `kernel_info_reply`'s content.
pub fn kernel_info(python_version: &str) -> Value {
    json!({
        "status": "ok",
        "protocol_version": PROTOCOL_VERSION,
        "implementation": "vivarium",
        "implementation_version": env!("CARGO_PKG_VERSION"),
        "language_info": {
            "name": "python",
            "version": python_version,
            "mimetype": "text/x-python",
            "file_extension": ".py",
            "pygments_lexer": "ipython3",
            "codemirror_mode": {"name": "ipython", "version": 3},
            "nbconvert_exporter": "python",
        },
        "banner": format!("Python {python_version} in a Vivarium sandbox (CPython on WebAssembly; host-enforced limits; no network)"),
        "help_links": [],
        "debugger": false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_parse_and_replies_carry_their_parent() {
        let text = r#"{"header":{"msg_id":"a1","session":"s","username":"u","date":"","msg_type":"kernel_info_request","version":"5.3"},"parent_header":{},"metadata":{},"content":{},"buffers":[],"channel":"shell"}"#;
        let m = Message::parse(text).unwrap();
        assert_eq!(m.channel, Channel::Shell);
        let r = Message::reply(
            &m.header,
            "k",
            Channel::Shell,
            "kernel_info_reply",
            kernel_info("3.15.0"),
        );
        let v: Value = serde_json::from_str(&r.to_text()).unwrap();
        assert_eq!(v["parent_header"]["msg_id"], "a1");
        assert_eq!(v["header"]["version"], "5.3");
        assert_eq!(v["msg_type"], "kernel_info_reply");
        assert_eq!(v["msg_id"], v["header"]["msg_id"]);
        assert_eq!(v["channel"], "shell");
        // jupyter_client's own sessions send `date` as a number: taken, and echoed as sent.
        let numeric = text.replace(r#""date":"""#, r#""date":1796157296.5"#);
        let m = Message::parse(&numeric).unwrap();
        let r = Message::reply(&m.header, "k", Channel::Shell, "x_reply", json!({}));
        assert_eq!(
            serde_json::to_value(&r).unwrap()["parent_header"]["date"],
            1796157296.5
        );
        for bad in [
            "{}",
            "[1]",
            r#"{"header":{"msg_id":"","session":"","msg_type":"x"},"channel":"shell"}"#,
            r#"{"header":{"msg_id":"a","session":"","msg_type":"x"},"channel":"nope"}"#,
        ] {
            assert!(Message::parse(bad).is_err(), "{bad}");
        }
    }
}
