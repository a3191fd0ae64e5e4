//! What the host asks a session's interpreter between turns: for a notebook's editor, the
//! completions at a cursor (`rlcompleter` over the session's globals), what an object at a
//! cursor is (`inspect`: its type, signature and documentation), and whether some code is a
//! whole statement yet (`codeop`); for E2B's envd, a file operation over the guest's own
//! view of its files (stat, list, make, move, remove). Each is Python for a hidden turn that answers as JSON
//! through the door's result channel ([`RESULT_TAG`]); the caller parses that answer as the
//! guest's, that is as hostile, and bounds it.
//!
//! The code and the cursor go in as JSON literals, which Python reads as the same string
//! and number. Every name the query makes is deleted again, so the session sees none.

use super::RESULT_TAG;

/// What a query does to its session: only looks at it (a notebook's completion, inspection
/// or completeness check), or changes it (a file operation, a sandbox's set-up), which a
/// later turn's rollback must then keep: only a change refreshes the session's checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum QueryEffect {
    Looks,
    Changes,
}

pub use crate::vocabulary::MAX_COMPLETIONS;

/// The query's shared head: `__vq_code`, `__vq_pos` (a cursor in code points, as the
/// Jupyter protocol counts since 5.2), and `__vq_answer(obj)`, which sends `obj` as JSON.
fn head(code: &str, cursor: usize) -> String {
    let code = serde_json::to_string(code).expect("a string serialises");
    let tag = tag_literal();
    format!(
        "def __vq_answer(obj):\n    import json, _host\n    _host.call(b'{tag}' + json.dumps(obj).encode('utf-8', 'replace'))\n\
         __vq_code = {code}\n__vq_pos = max(0, min({cursor}, len(__vq_code)))\n"
    )
}

/// [`RESULT_TAG`] as the body of a Python bytes literal.
fn tag_literal() -> String {
    RESULT_TAG.iter().map(|b| format!("\\x{b:02x}")).collect()
}

const TAIL: &str = "del __vq_answer, __vq_code, __vq_pos, __vq_run\n";

/// What a kept checker (`sandbox::Checker`) defines once: `__vivarium_checked(src,
/// notebook)` runs the same checker (`vivarium_check.verdict_json`) and the same notebook
/// translation as a sandbox's set-up turn (`setup.rs`) and answers the verdict,
/// `{"syntax": …, "findings": […]}`, through the door. Never in a caller's interpreter: the
/// caller could replace it.
pub fn checker() -> String {
    format!(
        "def __vivarium_checked(src, notebook):
    import vivarium_check, _host
    if notebook:
        try:
            src = __import__('vivarium_ipy').transform(src)
        except BaseException:
            pass
    text = vivarium_check.verdict_json(src)
    _host.call(b'{tag}' + text.encode('utf-8', 'replace'))
",
        tag = tag_literal(),
    )
}

/// A check of `code` in a kept checker that ran [`checker`]: its call alone.
pub fn check_call(code: &str) -> String {
    let notebook = if super::needs_notebook(code) {
        "True"
    } else {
        "False"
    };
    let code = serde_json::to_string(code).expect("a string serialises");
    format!("__vivarium_checked({code}, {notebook})\n")
}

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

/// A sandbox's set-up, changing its session: `cwd` made and made its working directory,
/// `HOME` set to `home`, and `env` laid over `os.environ`.
pub fn set_up<'a>(
    cwd: &str,
    home: &str,
    env: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> String {
    let text = |s: &str| serde_json::to_string(s).expect("a string serialises");
    format!(
        "import os as _o\n_o.makedirs({cwd}, exist_ok=True)\n_o.chdir({cwd})\n\
         _o.environ['HOME'] = {home}\n_o.environ.update({env})\ndel _o\n",
        cwd = text(cwd),
        home = text(home),
        env = super::env_literal(env),
    )
}

/// A file operation of E2B's envd (`Stat`, `ListDir`, `MakeDir`, `Move`, `Remove`) over the
/// session's own view of its files, `request` its JSON message: the response message, or
/// `{"error": {"code", "message"}}` with envd's code. Paths are the guest's; a relative one
/// is relative to `home`. An answer past the result channel's bound
/// ([`super::MAX_RESULT_BYTES`]: a listing of tens of thousands of entries) is the error
/// `resource_exhausted`, naming it.
pub fn file_operation(op: &str, request: &str, home: &str) -> String {
    let op = serde_json::to_string(op).expect("a string serialises");
    let home = serde_json::to_string(home).expect("a string serialises");
    let max = super::MAX_RESULT_BYTES;
    format!(
        "{}def __vq_run():
    import os, json, stat, shutil, datetime
    op, a, home = {op}, json.loads(__vq_code), {home}
    def full(p):
        p = p or home
        return os.path.normpath(p if p.startswith('/') else os.path.join(home, p))
    def info(p):
        st = os.lstat(p)
        m = st.st_mode
        kind = 'FILE_TYPE_DIRECTORY' if stat.S_ISDIR(m) else 'FILE_TYPE_SYMLINK' if stat.S_ISLNK(m) else 'FILE_TYPE_FILE'
        e = {{'name': os.path.basename(p) or '/', 'type': kind, 'path': p, 'size': str(st.st_size),
             'mode': stat.S_IMODE(m) | (0x80000000 if stat.S_ISDIR(m) else 0),
             'permissions': stat.filemode(m), 'owner': 'user', 'group': 'user',
             'modifiedTime': datetime.datetime.fromtimestamp(st.st_mtime, datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%S.%fZ')}}
        if stat.S_ISLNK(m):
            e['symlinkTarget'] = os.readlink(p)
        return e
    try:
        if op == 'Stat':
            r = {{'entry': info(full(a.get('path')))}}
        elif op == 'ListDir':
            top, depth, out = full(a.get('path')), int(a.get('depth') or 1), []
            if not os.path.isdir(top):
                raise NotADirectoryError('not a directory: ' + top)
            def walk(d, level):
                for n in sorted(os.listdir(d)):
                    p = os.path.join(d, n)
                    out.append(info(p))
                    if level < depth and os.path.isdir(p) and not os.path.islink(p):
                        walk(p, level + 1)
            walk(top, 1)
            r = {{'entries': out}}
        elif op == 'MakeDir':
            p = full(a.get('path'))
            if os.path.exists(p):
                raise FileExistsError('already exists: ' + p)
            os.makedirs(p)
            r = {{'entry': info(p)}}
        elif op == 'Move':
            s, d = full(a.get('source')), full(a.get('destination'))
            os.makedirs(os.path.dirname(d), exist_ok=True)
            os.rename(s, d)
            r = {{'entry': info(d)}}
        elif op == 'Remove':
            p = full(a.get('path'))
            if os.path.isdir(p) and not os.path.islink(p):
                shutil.rmtree(p)
            else:
                os.remove(p)
            r = {{}}
    except FileNotFoundError as e:
        r = {{'error': {{'code': 'not_found', 'message': str(e)}}}}
    except FileExistsError as e:
        r = {{'error': {{'code': 'already_exists', 'message': str(e)}}}}
    except (NotADirectoryError, IsADirectoryError) as e:
        r = {{'error': {{'code': 'invalid_argument', 'message': str(e)}}}}
    except PermissionError as e:
        r = {{'error': {{'code': 'permission_denied', 'message': str(e)}}}}
    except (OSError, ValueError, TypeError, AttributeError, RecursionError) as e:
        r = {{'error': {{'code': 'internal', 'message': str(e)}}}}
    if len(json.dumps(r)) > {max}:
        r = {{'error': {{'code': 'resource_exhausted', 'message': op + ': the answer is larger than {max} bytes (list fewer entries: a smaller depth or a deeper path)'}}}}
    __vq_answer(r)
try:
    __vq_run()
finally:
    {TAIL}",
        head(request, 0)
    )
}
