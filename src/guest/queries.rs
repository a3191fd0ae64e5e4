//! What the host asks a session's interpreter between turns, for a notebook's editor: the
//! completions at a cursor (`rlcompleter` over the session's globals), what an object at a
//! cursor is (`inspect`: its type, signature and documentation), and whether some code is a
//! whole statement yet (`codeop`). Each is Python for a hidden turn that answers as JSON
//! through the door's result channel ([`RESULT_TAG`]); the caller parses that answer as the
//! guest's, that is as hostile, and bounds it.
//!
//! The code and the cursor go in as JSON literals, which Python reads as the same string
//! and number. Every name the query makes is deleted again, so the session sees none.

use super::RESULT_TAG;

/// At most this many completions are returned.
pub const MAX_COMPLETIONS: usize = 200;

/// The query's shared head: `__vq_code`, `__vq_pos` (a cursor in code points, as the
/// Jupyter protocol counts since 5.2), and `__vq_answer(obj)`, which sends `obj` as JSON.
fn head(code: &str, cursor: usize) -> String {
    let code = serde_json::to_string(code).expect("a string serialises");
    let tag = RESULT_TAG
        .iter()
        .map(|b| format!("\\x{b:02x}"))
        .collect::<String>();
    format!(
        "def __vq_answer(obj):\n    import json, _host\n    _host.call(b'{tag}' + json.dumps(obj).encode('utf-8', 'replace'))\n\
         __vq_code = {code}\n__vq_pos = max(0, min({cursor}, len(__vq_code)))\n"
    )
}

const TAIL: &str = "del __vq_answer, __vq_code, __vq_pos, __vq_run\n";

/// `complete_request`: `{"matches": [...], "cursor_start": n, "cursor_end": n}`.
pub fn complete(code: &str, cursor: usize) -> String {
    format!(
        "{}def __vq_run():
    import re, rlcompleter, __main__
    before = __vq_code[:__vq_pos]
    text = re.search(r'[A-Za-z_][\\w.]*$|$', before).group(0)
    found = []
    if text:
        completer = rlcompleter.Completer(__main__.__dict__)
        for i in range({MAX_COMPLETIONS} * 2):
            try:
                m = completer.complete(text, i)
            except Exception:
                break
            if m is None:
                break
            m = m.removesuffix('()').rstrip('(')
            if m not in found and not m.rsplit('.', 1)[-1].startswith('__vq_'):
                found.append(m)
            if len(found) >= {MAX_COMPLETIONS}:
                break
    __vq_answer({{'matches': found, 'cursor_start': __vq_pos - len(text), 'cursor_end': __vq_pos}})
try:
    __vq_run()
finally:
    {TAIL}",
        head(code, cursor)
    )
}

/// `inspect_request`: `{"found": bool, "text": "..."}`; `detail` 1 adds the source.
pub fn inspect(code: &str, cursor: usize, detail: u8) -> String {
    format!(
        "{}def __vq_run():
    import builtins, inspect, re, __main__
    before, after = __vq_code[:__vq_pos], __vq_code[__vq_pos:]
    name = re.search(r'[A-Za-z_][\\w.]*$|$', before).group(0) + re.match(r'\\w*', after).group(0)
    if not name:
        call = re.search(r'([A-Za-z_][\\w.]*)\\s*\\([^()]*$', before)
        name = call.group(1) if call else ''
    parts = name.split('.') if name else []
    ns = __main__.__dict__
    if not parts or parts[0].startswith('__vq_') or (parts[0] not in ns and not hasattr(builtins, parts[0])):
        return __vq_answer({{'found': False, 'text': ''}})
    try:
        obj = ns[parts[0]] if parts[0] in ns else getattr(builtins, parts[0])
        for p in parts[1:]:
            obj = getattr(obj, p)
    except Exception:
        return __vq_answer({{'found': False, 'text': ''}})
    lines = [name + ': ' + type(obj).__name__]
    if callable(obj):
        try:
            lines.append('Signature: ' + name.rsplit('.', 1)[-1] + str(inspect.signature(obj)))
        except (TypeError, ValueError):
            pass
    else:
        try:
            lines.append('Value: ' + repr(obj)[:2000])
        except Exception:
            pass
    doc = inspect.getdoc(obj)
    if doc:
        lines.append('Docstring:\\n' + doc[:20000])
    if {detail}:
        try:
            lines.append('Source:\\n' + inspect.getsource(obj)[:50000])
        except Exception:
            pass
    __vq_answer({{'found': True, 'text': '\\n'.join(lines)}})
try:
    __vq_run()
finally:
    {TAIL}",
        head(code, cursor),
        detail = u8::from(detail > 0)
    )
}

/// `is_complete_request`: `{"status": "complete" | "incomplete" | "invalid", "indent": "..."}`.
pub fn is_complete(code: &str) -> String {
    format!(
        "{}def __vq_run():
    import codeop, warnings
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        try:
            compiled = codeop.compile_command(__vq_code, '<cell>', 'exec')
        except (SyntaxError, OverflowError, ValueError):
            return __vq_answer({{'status': 'invalid', 'indent': ''}})
    if compiled is not None:
        return __vq_answer({{'status': 'complete', 'indent': ''}})
    last = __vq_code.rstrip('\\n').rsplit('\\n', 1)[-1]
    indent = last[:len(last) - len(last.lstrip())]
    if last.rstrip().endswith(':'):
        indent += '    '
    __vq_answer({{'status': 'incomplete', 'indent': indent}})
try:
    __vq_run()
finally:
    {TAIL}",
        head(code, 0)
    )
}
