"""Host memory for one large returned file (issue #26, item 7): against a release `vivarium
serve` on 127.0.0.1 with its defaults (one worker process, scratch on /dev/shm, leakage
`redact`), a run writes a FILE_MIB file in 32 MiB writes and returns it; then a session writes
the same file and it is downloaded. For each, the peak resident set of the supervisor and its
worker (VmHWM, reset just before the request) less what they held before, the file's SHA-256
checked as the body streams in.

    python benches/held_file.py target/release/vivarium [benches/results/held_file.json]

The file itself sits in the sandbox's tmpfs either way (charged to the memory budget as the
guest writes it, and while the response streams); what is measured is what serving it adds.
"""

import base64
import hashlib
import http.client
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from http_load import stop, wait_ready

FILE_MIB = int(os.environ.get("FILE_MIB", "1024"))
CHUNK = 32 << 20
FILE = FILE_MIB << 20


def writer(name: str, chunks: int) -> str:
    return (
        f"block = bytearray(bytes(range(256)) * ({CHUNK} // 256))\n"
        f"with open('{name}', 'wb') as f:\n"
        f"    for i in range({chunks}):\n"
        f"        block[:8] = i.to_bytes(8, 'little')\n"
        f"        f.write(block)\n"
    )


def expected() -> str:
    block = bytearray(bytes(range(256)) * (CHUNK // 256))
    h = hashlib.sha256()
    for i in range(FILE // CHUNK):
        block[:8] = i.to_bytes(8, "little")
        h.update(block)
    return h.hexdigest()


def family(pid: int) -> list:
    out = [pid]
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                stat = open(f"/proc/{d}/stat").read()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(d))
    return out


def status_kb(pid: int, field: str) -> int:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(field):
            return int(line.split()[1])
    raise KeyError(field)


def reset(pids) -> int:
    total = 0
    for p in pids:
        with open(f"/proc/{p}/clear_refs", "w") as f:
            f.write("5")
        total += status_kb(p, "VmRSS:") << 10
    return total


def peak(pids) -> int:
    return sum(status_kb(p, "VmHWM:") << 10 for p in pids)


def request(port, method, path, body=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    data = json.dumps(body).encode() if body is not None else None
    conn.request(method, path, body=data, headers={"content-type": "application/json"})
    return conn, conn.getresponse()


class B64Sink:
    """Hashes the base64 content of the one large file in a JSON body, as it streams."""

    def __init__(self, marker: bytes):
        self.marker = marker
        self.head = b""
        self.inside = False
        self.done = False
        self.pending = b""
        self.hash = hashlib.sha256()
        self.size = 0

    def feed(self, data: bytes):
        if self.done:
            return
        if not self.inside:
            self.head += data
            at = self.head.find(self.marker)
            if at < 0:
                self.head = self.head[-len(self.marker):]
                return
            self.inside = True
            data = self.head[at + len(self.marker):]
            self.head = b""
        end = data.find(b'"')
        if end >= 0:
            data, self.done = data[:end], True
        data = self.pending + data
        cut = len(data) - len(data) % 4 if not self.done else len(data)
        raw = base64.b64decode(data[:cut])
        self.pending = data[cut:]
        self.hash.update(raw)
        self.size += len(raw)


def measure(pids, port, method, path, body, sink):
    before = reset(pids)
    t0 = time.monotonic()
    conn, resp = request(port, method, path, body)
    status = resp.status
    while True:
        piece = resp.read(1 << 20)
        if not piece:
            break
        sink(piece)
    conn.close()
    secs = time.monotonic() - t0
    return status, peak(pids) - before, secs


def main():
    exe = sys.argv[1]
    out = sys.argv[2] if len(sys.argv) > 2 else None
    want = expected()
    scratch = tempfile.mkdtemp(prefix="vivarium-held-bench-")
    port = 18000 + os.getpid() % 1000
    env = dict(os.environ, VIVARIUM_AUDIT_LOG=os.path.join(scratch, "audit.jsonl"),
               VIVARIUM_SNAPSHOT_DIR=os.path.join(scratch, "snaps"))
    server = subprocess.Popen(
        [exe, "serve", "--listen", f"127.0.0.1:{port}", "--workers", "1"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_ready("127.0.0.1", port)
        pids = family(server.pid)
        limits = {"disk_bytes": FILE + (16 << 20), "memory_bytes": 512 << 20}
        run = {"code": writer("big.bin", FILE // CHUNK), "template": "python", "limits": limits}
        warm = dict(run, code=writer("small.bin", 1))
        conn, resp = request(port, "POST", "/v1/execute", warm)
        resp.read()
        conn.close()

        sink = B64Sink(f'"path":"big.bin","size":{FILE},"content":"'.encode())
        st, grew, secs = measure(pids, port, "POST", "/v1/execute", run, sink.feed)
        assert st == 200, st
        assert sink.size == FILE and sink.hash.hexdigest() == want, "the file arrived damaged"
        results = {"file_bytes": FILE, "execute": {"grew_bytes": grew, "ratio": grew / FILE,
                                                    "seconds": round(secs, 2)}}

        conn, resp = request(port, "POST", "/v1/sessions", {"template": "python", "limits": limits})
        sid = json.loads(resp.read())["id"]
        conn.close()
        conn, resp = request(port, "POST", f"/v1/sessions/{sid}/execute", {"code": run["code"]})
        assert resp.status == 200, resp.read()
        resp.read()
        conn.close()
        h = hashlib.sha256()
        n = [0]

        def raw(piece):
            h.update(piece)
            n[0] += len(piece)

        st, grew, secs = measure(pids, port, "GET", f"/v1/sessions/{sid}/files/big.bin", None, raw)
        assert st == 200, st
        assert n[0] == FILE and h.hexdigest() == want, "the download arrived damaged"
        results["download"] = {"grew_bytes": grew, "ratio": grew / FILE, "seconds": round(secs, 2)}
        print(json.dumps(results, indent=2))
        if out:
            with open(out, "w") as f:
                json.dump(results, f, indent=2)
    finally:
        stop(server)
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
