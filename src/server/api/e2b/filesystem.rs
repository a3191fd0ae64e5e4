//! envd's `filesystem.Filesystem` service (Stat, ListDir, MakeDir, Move, Remove), each a
//! small program of ours run in the sandbox's session: the guest's own view of its files
//! (folders, sizes, times), and no file operation the host does itself beyond reading and
//! writing a file (`envd.rs`). Watching a folder is not served (`unimplemented`).
//!
//! Paths are the guest's: `/home/user/x` is the sandbox's `/home/user/x`, and a relative
//! path is relative to `/home/user`, as envd resolves one.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Extension, Path, State};
use axum::http::HeaderMap;
use serde_json::{Value, json};

use super::connect::{Code, ConnectError, Unary};
use super::{DoorState, HOME, py_str, sandbox_of, turn};
use crate::server::request_context::RequestContext;

/// The operations, one program; its answer is one JSON line on stdout: the response
/// message, or `{"error": {"code", "message"}}`.
const PROGRAM: &str = r#"
def _vivarium_e2b_fs(op, a):
    import os, json, stat, shutil, datetime
    home = HOME
    def full(p):
        p = p or home
        return os.path.normpath(p if p.startswith('/') else os.path.join(home, p))
    def info(p):
        st = os.lstat(p)
        m = st.st_mode
        kind = 'FILE_TYPE_DIRECTORY' if stat.S_ISDIR(m) else 'FILE_TYPE_SYMLINK' if stat.S_ISLNK(m) else 'FILE_TYPE_FILE'
        e = {'name': os.path.basename(p) or '/', 'type': kind, 'path': p, 'size': str(st.st_size),
             'mode': stat.S_IMODE(m) | (0x80000000 if stat.S_ISDIR(m) else 0),
             'permissions': stat.filemode(m), 'owner': 'user', 'group': 'user',
             'modifiedTime': datetime.datetime.fromtimestamp(st.st_mtime, datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%S.%fZ')}
        if stat.S_ISLNK(m):
            e['symlinkTarget'] = os.readlink(p)
        return e
    try:
        if op == 'Stat':
            r = {'entry': info(full(a.get('path')))}
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
            r = {'entries': out}
        elif op == 'MakeDir':
            p = full(a.get('path'))
            if os.path.exists(p):
                raise FileExistsError('already exists: ' + p)
            os.makedirs(p)
            r = {'entry': info(p)}
        elif op == 'Move':
            s, d = full(a.get('source')), full(a.get('destination'))
            os.makedirs(os.path.dirname(d), exist_ok=True)
            os.rename(s, d)
            r = {'entry': info(d)}
        elif op == 'Remove':
            p = full(a.get('path'))
            if os.path.isdir(p) and not os.path.islink(p):
                shutil.rmtree(p)
            else:
                os.remove(p)
            r = {}
    except FileNotFoundError as e:
        r = {'error': {'code': 'not_found', 'message': str(e)}}
    except FileExistsError as e:
        r = {'error': {'code': 'already_exists', 'message': str(e)}}
    except (NotADirectoryError, IsADirectoryError) as e:
        r = {'error': {'code': 'invalid_argument', 'message': str(e)}}
    except PermissionError as e:
        r = {'error': {'code': 'permission_denied', 'message': str(e)}}
    except OSError as e:
        r = {'error': {'code': 'internal', 'message': str(e)}}
    print(json.dumps(r))
"#;

/// The operations served, as envd names them.
const OPERATIONS: [&str; 5] = ["Stat", "ListDir", "MakeDir", "Move", "Remove"];

/// `POST /filesystem.Filesystem/{method}`.
pub async fn call(
    State(door): State<DoorState>,
    Extension(ctx): Extension<RequestContext>,
    headers: HeaderMap,
    Path(method): Path<String>,
    body: Bytes,
) -> Unary {
    let Some(op) = OPERATIONS.iter().find(|o| **o == method) else {
        return Err(ConnectError::new(
            Code::Unimplemented,
            format!(
                "filesystem.Filesystem/{method} is not served by Vivarium (watching a folder \
                 is not offered; Stat, ListDir, MakeDir, Move and Remove are)"
            ),
        ));
    };
    let request: Value = if body.iter().all(u8::is_ascii_whitespace) {
        json!({})
    } else {
        serde_json::from_slice(&body).map_err(|e| {
            ConnectError::new(Code::InvalidArgument, format!("the request message: {e}"))
        })?
    };
    if !request.is_object() {
        return Err(ConnectError::new(
            Code::InvalidArgument,
            "the request message is not an object",
        ));
    }
    let id = sandbox_of(&headers).map_err(ConnectError::from)?;
    let code = format!(
        "{}_vivarium_e2b_fs({}, __import__('json').loads({}))\ndel _vivarium_e2b_fs\n",
        PROGRAM.replace("HOME", &py_str(HOME)),
        py_str(op),
        py_str(&request.to_string()),
    );
    let done = turn(&door, &ctx, &id, code, None)
        .await
        .map_err(ConnectError::from)?;
    let line = done
        .report
        .stdout
        .lines()
        .last()
        .unwrap_or_default()
        .to_string();
    let answer: Value = serde_json::from_str(&line).map_err(|_| {
        ConnectError::new(
            Code::Internal,
            format!(
                "the file operation did not finish ({}): {}",
                done.report.status.as_str(),
                done.report.error.map(|e| e.message).unwrap_or_default()
            ),
        )
    })?;
    match answer.get("error") {
        Some(e) => Err(ConnectError::new(
            Code::named(e["code"].as_str().unwrap_or("internal")),
            e["message"].as_str().unwrap_or_default(),
        )),
        None => Ok(Json(answer)),
    }
}

/// The working-directory path of an envd path (for the host's file reads and writes).
pub fn relative(path: &str) -> Result<String, ConnectError> {
    let bad = |why: String| ConnectError::new(Code::InvalidArgument, why);
    let full = if path.starts_with('/') {
        path.to_string()
    } else {
        format!("{HOME}/{path}")
    };
    let mut parts: Vec<&str> = Vec::new();
    for part in full.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    if parts.is_empty() {
        return Err(bad(format!("{path:?} names no file")));
    }
    let rel = parts.join("/");
    crate::sandbox::workdir::validate_relative_path(&rel).map_err(|e| bad(e.to_string()))?;
    Ok(rel)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_the_guests() {
        assert_eq!(relative("/home/user/a.txt").unwrap(), "home/user/a.txt");
        assert_eq!(relative("a.txt").unwrap(), "home/user/a.txt");
        assert_eq!(relative("sub/../b.txt").unwrap(), "home/user/b.txt");
        assert_eq!(relative("/tmp/x").unwrap(), "tmp/x");
        assert_eq!(relative("/../../etc/passwd").unwrap(), "etc/passwd");
        assert!(relative("/").is_err());
    }
}
