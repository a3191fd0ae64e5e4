//! Jupyter's messaging protocol (5.3), in the JSON form a kernel WebSocket carries: one
//! object a frame, `channel` beside the header, no signature (the HMAC of the ZeroMQ wire
//! form signs frames between a kernel and its server; over the WebSocket, the token
//! authenticates the connection, as in Jupyter Server).
//!
//! A frame is hostile and may be as large as [`MAX_FRAME_BYTES`], so what the kernel keeps of
//! it is bounded by construction: the header as sent (at most [`MAX_HEADER_BYTES`], echoed
//! as the parent of every answer), and the content's fields it reads, typed, per message
//! type ([`Request`]). Everything else (`metadata`, `buffers`, unknown fields, the content of
//! types whose content is not read) is skipped as it is parsed, never held as a JSON tree:
//! what a request waiting in the shell queue costs is about the size of its `code`
//! ([`Incoming::held_bytes`]).

use std::sync::Arc;

use serde::{Deserialize, Serialize, Serializer};
use serde_json::value::RawValue;
use serde_json::{Value, json};

/// The protocol version this kernel speaks.
pub const PROTOCOL_VERSION: &str = "5.3";

/// The largest frame read; a bigger one closes the socket with a reason.
pub const MAX_FRAME_BYTES: usize = 16 << 20;

/// The largest header taken (it is kept and echoed whole); a bigger one is not a message.
pub const MAX_HEADER_BYTES: usize = 16 << 10;

/// What a request costs beyond its header and strings (the structs around them).
const REQUEST_OVERHEAD_BYTES: usize = 256;

/// The channels of a kernel connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Channel {
    Shell,
    Iopub,
    Stdin,
    Control,
}

/// A request's header: what the kernel reads of it, and the header as the client sent it
/// (clients differ: jupyter_client's session sends `date` as a number), echoed unchanged as
/// the `parent_header` of what answers it.
#[derive(Debug, Clone)]
pub struct Header {
    pub msg_id: String,
    pub msg_type: String,
    /// The JSON text as sent, at most [`MAX_HEADER_BYTES`].
    raw: Arc<str>,
}

/// The fields read of a header (the rest is skipped, and kept only as its text).
#[derive(Deserialize)]
struct HeaderFields {
    msg_id: String,
    msg_type: String,
}

/// A frame as parsed first: the parts kept as the frame's own text until the message type
/// says how to read the content; the rest skipped.
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow)]
    header: &'a RawValue,
    #[serde(borrow, default)]
    parent_header: Option<&'a RawValue>,
    #[serde(borrow, default)]
    content: Option<&'a RawValue>,
    /// Missing means `shell`, as Jupyter Server reads it (jupyter_server's own gateway
    /// client sends none).
    #[serde(default = "shell")]
    channel: Channel,
    /// The HMAC of the ZeroMQ wire form, should a client copy it into a frame. No key is
    /// shared over the gateway (the token authenticates the connection), so, as the
    /// protocol has it for an empty key, the only valid signature is none: a frame with
    /// another is refused ([`FrameError::Signed`]).
    #[serde(borrow, default)]
    signature: Option<&'a RawValue>,
    // `metadata`, `buffers`, the top-level `msg_id`/`msg_type` and anything else: skipped.
}

fn shell() -> Channel {
    Channel::Shell
}

/// `execute_request`'s content, as read.
#[derive(Debug, Default, Deserialize)]
pub struct Execute {
    #[serde(default)]
    pub code: String,
    /// Whether the client can answer `input_request` (nbclient, for one, cannot).
    #[serde(default)]
    pub allow_stdin: Option<bool>,
}

/// `complete_request`'s and `inspect_request`'s content, as read.
#[derive(Debug, Default, Deserialize)]
pub struct AtCursor {
    #[serde(default)]
    pub code: String,
    /// In code points; missing: the end of `code`.
    #[serde(default)]
    pub cursor_pos: Option<usize>,
    /// `inspect_request`'s: 0, or 1 for the source too.
    #[serde(default)]
    pub detail_level: Option<u8>,
}

impl AtCursor {
    /// The cursor, in code points.
    pub fn cursor(&self) -> usize {
        self.cursor_pos.unwrap_or_else(|| self.code.chars().count())
    }
}

/// `is_complete_request`'s content, as read.
#[derive(Debug, Default, Deserialize)]
pub struct Code {
    #[serde(default)]
    pub code: String,
}

/// `shutdown_request`'s content, as read.
#[derive(Debug, Default, Deserialize)]
struct Shutdown {
    #[serde(default)]
    restart: Option<bool>,
}

/// `input_reply`'s content, as read.
#[derive(Debug, Default, Deserialize)]
struct InputReply {
    #[serde(default)]
    value: String,
}

/// The parent header's field an `input_reply` is matched by.
#[derive(Deserialize)]
struct ParentRef {
    #[serde(default)]
    msg_id: Option<String>,
}

/// What a request asks, by message type, with the content's fields this kernel reads.
#[derive(Debug)]
pub enum Request {
    Execute(Execute),
    Complete(AtCursor),
    Inspect(AtCursor),
    IsComplete(Code),
    Shutdown {
        restart: bool,
    },
    /// The line for a cell's `input()`; `parent` is the `input_request` it answers, if it
    /// names one.
    InputReply {
        value: String,
        parent: Option<String>,
    },
    Interrupt,
    KernelInfo,
    CommInfo,
    History,
    /// A type this kernel does not handle (answered as such); its content is not read.
    Other,
    /// A type this kernel reads whose content is not what the protocol says (answered with
    /// an error, in order).
    Malformed(String),
}

/// One request, as a frame carried it.
#[derive(Debug)]
pub struct Incoming {
    pub header: Header,
    pub channel: Channel,
    pub request: Request,
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

/// `content` read as `T`; a missing or `null` content is `T`'s default.
fn content<T: Default + for<'de> Deserialize<'de>>(raw: Option<&RawValue>) -> Result<T, String> {
    match raw.map(RawValue::get) {
        None | Some("null") => Ok(T::default()),
        Some(text) => serde_json::from_str(text).map_err(|e| format!("malformed content: {e}")),
    }
}

impl Incoming {
    /// Parses one text frame.
    pub fn parse(text: &str) -> Result<Incoming, FrameError> {
        let e: Envelope =
            serde_json::from_str(text).map_err(|e| FrameError::Malformed(e.to_string()))?;
        if e.signature
            .is_some_and(|s| !matches!(s.get(), "null" | "\"\""))
        {
            return Err(FrameError::Signed);
        }
        let raw = e.header.get();
        if raw.len() > MAX_HEADER_BYTES {
            return Err(FrameError::Malformed(format!(
                "the header is over {MAX_HEADER_BYTES} bytes"
            )));
        }
        let fields: HeaderFields =
            serde_json::from_str(raw).map_err(|e| FrameError::Malformed(format!("header: {e}")))?;
        if fields.msg_id.is_empty() || fields.msg_type.is_empty() {
            return Err(FrameError::Malformed("empty msg_id or msg_type".into()));
        }
        let c = e.content;
        let request = match fields.msg_type.as_str() {
            "execute_request" => content(c).map(Request::Execute),
            "complete_request" => content(c).map(Request::Complete),
            "inspect_request" => content(c).map(Request::Inspect),
            "is_complete_request" => content(c).map(Request::IsComplete),
            "shutdown_request" => content::<Shutdown>(c).map(|s| Request::Shutdown {
                restart: s.restart.unwrap_or(false),
            }),
            "input_reply" => content::<InputReply>(c).map(|r| Request::InputReply {
                value: r.value,
                parent: e
                    .parent_header
                    .and_then(|p| serde_json::from_str::<ParentRef>(p.get()).ok())
                    .and_then(|p| p.msg_id),
            }),
            "interrupt_request" => Ok(Request::Interrupt),
            "kernel_info_request" => Ok(Request::KernelInfo),
            "comm_info_request" => Ok(Request::CommInfo),
            "history_request" => Ok(Request::History),
            _ => Ok(Request::Other),
        }
        .unwrap_or_else(Request::Malformed);
        Ok(Incoming {
            header: Header {
                msg_id: fields.msg_id,
                msg_type: fields.msg_type,
                raw: raw.into(),
            },
            channel: e.channel,
            request,
        })
    }

    /// The host memory this request holds while it waits: its header, the strings of its
    /// content, and a fixed overhead.
    pub fn held_bytes(&self) -> usize {
        let strings = match &self.request {
            Request::Execute(x) => x.code.len(),
            Request::Complete(x) | Request::Inspect(x) => x.code.len(),
            Request::IsComplete(x) => x.code.len(),
            Request::InputReply { value, parent } => {
                value.len() + parent.as_ref().map_or(0, String::len)
            }
            Request::Malformed(why) => why.len(),
            _ => 0,
        };
        self.header.raw.len()
            + self.header.msg_id.len()
            + self.header.msg_type.len()
            + strings
            + REQUEST_OVERHEAD_BYTES
    }
}

/// A message the kernel sends (its content is the kernel's own, never a client's tree).
#[derive(Debug, Serialize)]
pub struct Message {
    /// The header's, repeated at the top as jupyter_client's message dicts have them (its
    /// clients read them there).
    pub msg_id: String,
    pub msg_type: String,
    header: OutHeader,
    /// The request's header as sent, on a reply or broadcast; `{}` on a message that
    /// answers nothing.
    parent_header: Parent,
    metadata: Empty,
    content: Value,
    buffers: [(); 0],
    channel: Channel,
}

/// The kernel's own header.
#[derive(Debug, Serialize)]
struct OutHeader {
    msg_id: String,
    msg_type: String,
    session: String,
    username: &'static str,
    date: String,
    version: &'static str,
}

/// `{}`.
#[derive(Debug, Serialize)]
struct Empty {}

/// A parent header: the request's as it was sent, or none (`{}`).
#[derive(Debug)]
struct Parent(Option<Arc<str>>);

impl Serialize for Parent {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match &self.0 {
            // Checked JSON when it was parsed; borrowed, not copied.
            Some(raw) => serde_json::from_str::<&RawValue>(raw)
                .map_err(serde::ser::Error::custom)?
                .serialize(s),
            None => Empty {}.serialize(s),
        }
    }
}

impl Message {
    /// A message of `msg_type` on `channel` answering or reporting on `parent`, from the
    /// kernel session `session`.
    pub fn reply(
        parent: &Header,
        session: &str,
        channel: Channel,
        msg_type: &str,
        content: Value,
    ) -> Message {
        Self::new(
            Parent(Some(parent.raw.clone())),
            session,
            channel,
            msg_type,
            content,
        )
    }

    /// A message of `msg_type` that answers nothing (its `parent_header` is `{}`).
    pub fn unprompted(session: &str, channel: Channel, msg_type: &str, content: Value) -> Message {
        Self::new(Parent(None), session, channel, msg_type, content)
    }

    fn new(
        parent_header: Parent,
        session: &str,
        channel: Channel,
        msg_type: &str,
        content: Value,
    ) -> Message {
        let msg_id = format!("{:032x}", rand::random::<u128>());
        Message {
            msg_id: msg_id.clone(),
            msg_type: msg_type.to_string(),
            header: OutHeader {
                msg_id,
                msg_type: msg_type.to_string(),
                session: session.to_string(),
                username: "vivarium",
                date: crate::supervisor::time::rfc3339(std::time::SystemTime::now()),
                version: PROTOCOL_VERSION,
            },
            parent_header,
            metadata: Empty {},
            content,
            buffers: [],
            channel,
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
        "banner": format!("Python {python_version} in a Vivarium sandbox (CPython on WebAssembly; host-enforced limits; network only to the hosts the server allows)"),
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
        let m = Incoming::parse(text).unwrap();
        assert_eq!(m.channel, Channel::Shell);
        assert!(matches!(m.request, Request::KernelInfo));
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
        assert_eq!((&v["metadata"], &v["buffers"]), (&json!({}), &json!([])));
        let u = Message::unprompted("k", Channel::Iopub, "status", status("idle"));
        assert_eq!(
            serde_json::to_value(&u).unwrap()["parent_header"],
            json!({})
        );
        // jupyter_client's own sessions send `date` as a number: taken, and echoed as sent.
        let numeric = text.replace(r#""date":"""#, r#""date":1796157296.5"#);
        let m = Incoming::parse(&numeric).unwrap();
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
            assert!(Incoming::parse(bad).is_err(), "{bad}");
        }
        let big = format!(
            r#"{{"header":{{"msg_id":"a","msg_type":"x","pad":"{}"}}}}"#,
            "p".repeat(MAX_HEADER_BYTES)
        );
        assert!(Incoming::parse(&big).is_err());
        let signed = text.replace(r#""channel""#, r#""signature":"ab","channel""#);
        assert!(matches!(Incoming::parse(&signed), Err(FrameError::Signed)));
        let unsigned = text.replace(r#""channel""#, r#""signature":"","channel""#);
        assert!(Incoming::parse(&unsigned).is_ok());
    }

    #[test]
    fn only_the_fields_read_are_kept() {
        let frame = |msg_type: &str, content: &str| {
            format!(
                r#"{{"header":{{"msg_id":"a","msg_type":"{msg_type}"}},"content":{content},"metadata":{{"m":[1,2,3]}},"buffers":[{}1],"channel":"shell"}}"#,
                "1,".repeat(100_000)
            )
        };
        let m = Incoming::parse(&frame(
            "execute_request",
            r#"{"code":"x = 1","allow_stdin":true,"user_expressions":{"a":[1,2,3]},"silent":false}"#,
        ))
        .unwrap();
        let Request::Execute(e) = &m.request else {
            panic!("{m:?}")
        };
        assert_eq!((e.code.as_str(), e.allow_stdin), ("x = 1", Some(true)));
        // The buffers (200 kB) are not held: a request costs its header and code.
        assert!(m.held_bytes() < 512, "{}", m.held_bytes());
        let m = Incoming::parse(&frame(
            "inspect_request",
            r#"{"code":"len","cursor_pos":2,"detail_level":1}"#,
        ))
        .unwrap();
        let Request::Inspect(i) = &m.request else {
            panic!("{m:?}")
        };
        assert_eq!((i.cursor(), i.detail_level), (2, Some(1)));
        let m = Incoming::parse(&frame("execute_request", r#"{"code":7}"#)).unwrap();
        assert!(matches!(m.request, Request::Malformed(_)), "{m:?}");
        let m = Incoming::parse(&frame("comm_open", r#"{"data":{"big":[1,2]}}"#)).unwrap();
        assert!(matches!(m.request, Request::Other));
        let reply = r#"{"header":{"msg_id":"b","msg_type":"input_reply"},"parent_header":{"msg_id":"q1","x":[1]},"content":{"value":"yes"},"channel":"stdin"}"#;
        let m = Incoming::parse(reply).unwrap();
        assert!(
            matches!(&m.request, Request::InputReply { value, parent } if value == "yes" && parent.as_deref() == Some("q1")),
            "{m:?}"
        );
    }
}
