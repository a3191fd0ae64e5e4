"""Vivarium's package resolver, run by the host (never in a sandbox) with the host's python3.

It resolves requirement specifiers to pure-Python wheels with pip's own resolver, treating
the guest's built-in distributions as installed at their versions, and downloads the wheels
it chose, checked against the index's SHA-256. It never builds anything: pip runs with
`--only-binary=:all:`, so no package's code runs on the host.

Input: one JSON object on stdin (see `src/packages/resolve.rs`). Output: one JSON object on
stdout, `{"ok": true, "wheels": [...]}` or `{"ok": false, "code": ..., "package": ...,
"message": ...}`. Progress goes to stderr.
"""

import base64
import hashlib
import json
import os
import re
import ssl
import subprocess
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request
import zipfile

# The tags pip may accept: pure Python for CPython 3.15 (`py3-none-any`, `py315-none-any`...).
TAGS = ["--python-version", "3.15", "--implementation", "py", "--abi", "none", "--platform", "any"]


def normalize(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def fail(code, package, message):
    json.dump({"ok": False, "code": code, "package": package, "message": message}, sys.stdout)
    sys.exit(0)


def placeholders(builtins, folder):
    """One empty wheel per built-in distribution: pip resolves a built-in to it (its version
    pinned by a constraint), so a requirement on a built-in is met and one on another
    version of it is a conflict."""
    os.makedirs(folder, exist_ok=True)
    for b in builtins:
        dist = re.sub(r"[-_.]+", "_", b["name"])
        path = os.path.join(folder, f"{dist}-{b['version']}-py3-none-any.whl")
        if os.path.exists(path):
            continue
        info = f"{dist}-{b['version']}.dist-info"
        # A name of its own: resolutions of other sets write the same folder at once, and
        # each renames a whole file into place (the same bytes whoever wins).
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".part-")
        try:
            with os.fdopen(fd, "wb") as f, zipfile.ZipFile(f, "w") as z:
                z.writestr(f"{info}/METADATA",
                           f"Metadata-Version: 2.1\nName: {b['name']}\nVersion: {b['version']}\n")
                z.writestr(f"{info}/WHEEL",
                           "Wheel-Version: 1.0\nGenerator: vivarium\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
                z.writestr(f"{info}/RECORD", "")
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)


# A wheel's file name as PEP 427 spells it: name-version(-build)?-python-abi-platform.whl, of
# plain characters only (no separator, no `%`, never `.` or `..`).
WHEEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+!]*(-[A-Za-z0-9_.+!]+){4,5}\.whl")


def pip_env(req):
    """pip's environment: the index is given there, not on its command line (which every
    local user can read in /proc)."""
    env = dict(os.environ)
    if req.get("index_url"):
        env["PIP_INDEX_URL"] = req["index_url"]
    return env


def split_auth(url):
    """`url` without its userinfo, and the `Authorization` value the userinfo stood for."""
    parts = urllib.parse.urlsplit(url)
    userinfo, at, host = parts.netloc.rpartition("@")
    if not at:
        return url, None
    user, _, password = userinfo.partition(":")
    token = f"{urllib.parse.unquote(user)}:{urllib.parse.unquote(password)}"
    bare = urllib.parse.urlunsplit(parts._replace(netloc=host))
    return bare, "Basic " + base64.b64encode(token.encode()).decode()


def shown(url):
    """`url` as a message may show it: the host and path, never userinfo or a query (where
    index credentials and signed-URL tokens live)."""
    parts = urllib.parse.urlsplit(url)
    userinfo, at, host = parts.netloc.rpartition("@")
    netloc = ("***@" if at else "") + host
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "***" if parts.query else "", ""))


_CONFIGURED = []


def configured_index(req):
    if req.get("index_url"):
        return req["index_url"]
    if not _CONFIGURED:
        _CONFIGURED.append(pip_configured_index())
    return _CONFIGURED[0]


def pip_configured_index():
    env = os.environ.get("PIP_INDEX_URL")
    if env:
        return env
    out = subprocess.run([sys.executable, "-m", "pip", "config", "list"],
                         capture_output=True, text=True).stdout
    for line in out.splitlines():
        key, _, value = line.partition("=")
        if key.endswith("index-url"):
            return value.strip().strip("'\"")
    return "https://pypi.org/simple"


def fetch(req, url, timeout):
    """GETs `url`, with the credentials of its own userinfo or, as pip does, those of the
    index when it is on the index's host; never sent on to where a redirect points."""
    ctx = ssl.create_default_context(cafile=os.environ.get("PIP_CERT") or None)
    url, auth = split_auth(url)
    index, index_auth = split_auth(configured_index(req))
    if auth is None and urllib.parse.urlsplit(url).netloc == urllib.parse.urlsplit(index).netloc:
        auth = index_auth
    r = urllib.request.Request(url, headers={
        "Accept": "application/vnd.pypi.simple.v1+json, text/html;q=0.1"})
    if auth:
        r.add_unredirected_header("Authorization", auth)
    return urllib.request.urlopen(r, timeout=timeout, context=ctx)


def files_of(req, name):
    """The file names the index lists for `name`, or None when it has no such project."""
    base = configured_index(req).rstrip("/")
    url = f"{base}/{normalize(name)}/"
    try:
        with fetch(req, url, req["timeout_secs"]) as resp:
            body = resp.read(8 << 20).decode("utf-8", "replace")
            kind = resp.headers.get("Content-Type", "")
    except urllib.error.HTTPError as e:
        if e.code == 404:
            return None
        fail("package_index_unreachable", name, f"the package index answered {e.code} for {shown(url)}")
    except (urllib.error.URLError, OSError) as e:
        fail("package_index_unreachable", name,
             f"the package index at {shown(base)} is unreachable: {e}")
    if "json" in kind:
        return [f["filename"] for f in json.loads(body).get("files", [])]
    return [urllib.parse.unquote(h.split("/")[-1].split("#")[0])
            for h in re.findall(r'href="([^"]+)"', body)]


def pure(filename):
    if not filename.endswith(".whl"):
        return False
    parts = filename[:-4].split("-")
    return len(parts) >= 5 and parts[-1] == "any" and parts[-2] == "none"


def explain_missing(req, name, spec):
    files = files_of(req, name)
    if files is None or not files:
        fail("package_not_found", name, f"the package index has no package named {name!r}")
    wheels = [f for f in files if f.endswith(".whl")]
    if not wheels:
        fail("package_has_no_wheel", name,
             f"{name!r} is published only as source, and source is never built here "
             "(building would run its code on the host)")
    if not any(pure(w) for w in wheels):
        fail("package_has_native_code", name,
             f"every wheel of {name!r} holds native code, which the guest cannot load "
             "(it has no dynamic linking)")
    fail("package_not_found", name,
         f"no pure-Python wheel of {name!r} matches {spec!r} for CPython 3.15")


def resolve(req):
    builtins = {normalize(b["name"]): b for b in req["builtins"]}
    placeholders(req["builtins"], req["placeholder_dir"])
    work = req["work_dir"]
    constraints = os.path.join(work, "constraints.txt")
    with open(constraints, "w") as f:
        for b in req["builtins"]:
            f.write(f"{b['name']}=={b['version']}\n")
    report = os.path.join(work, "report.json")
    cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--no-input", "--progress-bar", "off",
           "--disable-pip-version-check", "--ignore-installed", "--only-binary=:all:",
           "--target", os.path.join(work, "target"), *TAGS,
           "--retries", "0", "--timeout", str(req["timeout_secs"]),
           "--find-links", req["placeholder_dir"], "-c", constraints,
           "--report", report, "--", *req["requirements"]]
    if req.get("no_index"):
        cmd.insert(cmd.index("--find-links"), "--no-index")
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       env=pip_env(req))
    err = p.stdout
    if p.returncode != 0:
        sys.stderr.write(err[-4000:])
        m = re.search(r"No matching distribution found for ([A-Za-z0-9._-]+)(\S*)", err)
        if "conflicting dependencies" in err or "ResolutionImpossible" in err:
            names = sorted({normalize(n) for n in re.findall(r"\(constraint\) ([A-Za-z0-9._-]+)==", err)})
            names = [n for n in names if n in builtins]
            if names:
                pins = ", ".join(f"{builtins[n]['name']} {builtins[n]['version']}" for n in names)
                fail("package_conflicts_with_builtin", builtins[names[0]]["name"],
                     f"the requested packages need another version of what is built in ({pins}); "
                     "built-in packages cannot be replaced")
            fail("package_conflict", None, "the requested packages conflict with each other: "
                 + " ".join(err.strip().splitlines()[-6:]))
        if m:
            explain_missing(req, m.group(1), m.group(1) + m.group(2))
        if re.search(r"(Connection refused|Max retries|NewConnectionError|Could not fetch URL"
                     r"|Name or service not known|timed out|Temporary failure in name resolution)", err):
            fail("package_index_unreachable", None, "the package index is unreachable: "
                 + err.strip().splitlines()[-1][:300])
        if "Invalid requirement" in err or "InvalidRequirement" in err:
            fail("invalid_package_spec", None, err.strip().splitlines()[-1][:300])
        fail("package_resolution_failed", None, " ".join(err.strip().splitlines()[-4:])[:600])
    with open(report) as f:
        installs = json.load(f).get("install", [])
    wheels = []
    for item in installs:
        meta, info = item["metadata"], item["download_info"]
        name = normalize(meta["name"])
        if name in builtins:
            continue
        url = info["url"]
        # The index chose this name: it is shown and checked, never used as a path.
        filename = urllib.parse.unquote(urllib.parse.urlsplit(url).path.rsplit("/", 1)[-1])
        if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
            fail("package_invalid", meta["name"],
                 f"the package index linked a wheel of {meta['name']} by a "
                 f"{urllib.parse.urlsplit(url).scheme or 'relative'}: URL; only http and https "
                 "are fetched (a file: URL would read the host's own files)")
        if not WHEEL_NAME.fullmatch(filename):
            fail("package_invalid", meta["name"],
                 f"the package index named a wheel of {meta['name']} {filename[:200]!r}, which is "
                 "not a wheel's file name (a path, or characters a file name of a wheel never has)")
        if not pure(filename):
            fail("package_has_native_code", meta["name"], f"{filename} is not a pure-Python wheel")
        sha = info.get("archive_info", {}).get("hashes", {}).get("sha256")
        wheels.append({"name": meta["name"], "version": meta["version"], "url": url,
                       "filename": filename, "sha256": sha, "requested": bool(item.get("requested"))})
    json.dump({"ok": True, "wheels": wheels}, sys.stdout)


def download(req):
    """Downloads each wheel of `req["wheels"]` to the path the host chose for it (`dest`),
    at most `max_wheel_bytes` each, checked against its SHA-256 (the index's, or none when
    the index gave none: the host then records the one it computed). Each is written under
    a name of its own beside `dest` and renamed to `dest` only once its hash matched; a
    failure leaves no file."""
    out = []
    for w in req["wheels"]:
        dest = w["dest"]
        digest = hashlib.sha256()
        size = 0
        sys.stderr.write(f"downloading {w['filename']}\n")
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(dest), prefix=".part-")
        try:
            try:
                with os.fdopen(fd, "wb") as f, fetch(req, w["url"], req["timeout_secs"]) as resp:
                    while chunk := resp.read(1 << 16):
                        size += len(chunk)
                        if size > req["max_wheel_bytes"]:
                            fail("package_too_large", w["name"],
                                 f"{w['filename']} is larger than the {req['max_wheel_bytes']} "
                                 "bytes a wheel may be here")
                        digest.update(chunk)
                        f.write(chunk)
            except (urllib.error.URLError, OSError) as e:
                fail("package_index_unreachable", w["name"], f"downloading {w['filename']}: {e}")
            got = digest.hexdigest()
            if w.get("sha256") and got != w["sha256"]:
                fail("package_hash_mismatch", w["name"],
                     f"{w['filename']} has SHA-256 {got}, the index said {w['sha256']}")
            os.replace(tmp, dest)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        out.append({"name": w["name"], "version": w["version"], "filename": w["filename"],
                    "sha256": got, "size": size})
    json.dump({"ok": True, "wheels": out}, sys.stdout)


def main():
    req = json.load(sys.stdin)
    {"resolve": resolve, "download": download}[req["mode"]](req)


if __name__ == "__main__":
    main()
