"""What a mounted volume costs, on one build (`vivarium serve` on 127.0.0.1, its own volume
folder), the two sides of each comparison interleaved round by round so that drift in the
machine's load falls on both alike:

- mount: a fresh hello world (`POST /v1/execute`, default template, `policy: off`) with no
  volume, with a 100 MB volume mounted read-only, and mounted read-write (its room lent and
  given back), at concurrency 1 and 2. Timed by the client; warm-up excluded. Goal: a mount
  adds at most 0.2 ms.
- read: one sandbox reads a 100 MB file in 1 MiB chunks from the mounted volume and the same
  bytes from its own directory (copied there first, untimed), both timed inside the guest by
  `time.perf_counter`, alternating which goes first. Goal: the volume within 1.5x.

    python benches/volumes.py BINARY benches/results/volumes.json

Bounded: ROUNDS rounds of REQUESTS requests per setting (env VOL_ROUNDS, VOL_REQUESTS),
READS reads per side (VOL_READS)."""

import http.client
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time

from ab_http import start
from http_load import stop

ROUNDS = int(os.environ.get("VOL_ROUNDS", "5"))
REQUESTS = int(os.environ.get("VOL_REQUESTS", "300"))
READS = int(os.environ.get("VOL_READS", "5"))
WARMUP = 20
BIG = 100_000_000

MOUNTS = {
    "none": [],
    "read_only": [{"name": "bench", "path": "/data", "read_only": True}],
    "read_write": [{"name": "bench", "path": "/data"}],
}


def post(conn: http.client.HTTPConnection, path: str, body: dict) -> tuple[int, dict]:
    conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    r = conn.getresponse()
    return r.status, json.loads(r.read() or b"{}")


def upload(host: str, port: int) -> None:
    """Volume `bench` with `big.bin`, 100 MB, streamed up in chunks."""
    conn = http.client.HTTPConnection(host, port, timeout=600)
    status, v = post(conn, "/v1/volumes", {"name": "bench"})
    assert status == 201, v
    chunk = bytes(range(256)) * 4096

    def body():
        sent = 0
        while sent < BIG:
            part = chunk[: min(len(chunk), BIG - sent)]
            sent += len(part)
            yield part

    conn.request("PUT", "/v1/volumes/bench/files/big.bin", body(),
                 {"Content-Length": str(BIG)})
    r = conn.getresponse()
    assert r.status == 201, r.read()
    r.read()


def client(host, port, volumes, count, out, errors, warm) -> None:
    conn = http.client.HTTPConnection(host, port, timeout=60)
    body = {"code": "print('hello world')", "policy": "off", "volumes": volumes}
    for i in range(WARMUP + count):
        if i == WARMUP:
            warm.wait()
        t = time.perf_counter()
        status, r = post(conn, "/v1/execute", body)
        dt = (time.perf_counter() - t) * 1000
        if status != 200 or r.get("status") != "ok":
            errors.append((status, r))
            warm.abort()
            return
        if i >= WARMUP:
            out.append(dt)


def burst(host, port, volumes, conc) -> list[float]:
    out, errors = [], []
    warm = threading.Barrier(conc)
    threads = [threading.Thread(target=client,
                                args=(host, port, volumes, REQUESTS // conc, out, errors, warm))
               for _ in range(conc)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:3]
    return out


READ_CODE = """
import json, shutil, time
shutil.copyfile('/data/big.bin', '/tmp/big.bin')
def read(p):
    t = time.perf_counter()
    with open(p, 'rb') as f:
        while f.read(1 << 20):
            pass
    return (time.perf_counter() - t) * 1000
out = {'volume': [], 'own': []}
for i in range(%d):
    sides = [('volume', '/data/big.bin'), ('own', '/tmp/big.bin')]
    for name, p in (sides if i %% 2 == 0 else sides[::-1]):
        out[name].append(read(p))
print(json.dumps(out))
""" % READS


def main() -> None:
    binary, out_path = sys.argv[1], sys.argv[2]
    folder = tempfile.mkdtemp(prefix="vivarium-bench-volumes-")
    server, host, port = start(binary, "--volume-dir", os.path.join(folder, "volumes"))
    try:
        upload(host, port)
        load = os.getloadavg()
        mount = {}
        for conc in (1, 2):
            samples = {k: [] for k in MOUNTS}
            rounds = {k: [] for k in MOUNTS}
            for _ in range(ROUNDS):
                for kind, volumes in MOUNTS.items():
                    got = burst(host, port, volumes, conc)
                    samples[kind] += got
                    rounds[kind].append(statistics.median(got))
            med = {k: statistics.median(v) for k, v in samples.items()}
            mount[f"c{conc}"] = {
                "median_ms": med,
                "round_medians_ms": rounds,
                "added_ms": {k: med[k] - med["none"] for k in MOUNTS if k != "none"},
                "ratio": {k: med[k] / med["none"] for k in MOUNTS if k != "none"},
            }
        conn = http.client.HTTPConnection(host, port, timeout=600)
        status, r = post(conn, "/v1/execute", {
            "code": READ_CODE, "policy": "off", "template": "python",
            "volumes": MOUNTS["read_only"],
            "limits": {"disk_bytes": 256 << 20, "timeout_ms": 300_000},
        })
        assert status == 200 and r.get("status") == "ok", r
        reads = json.loads(r["stdout"])
        read = {
            "median_ms": {k: statistics.median(v) for k, v in reads.items()},
            "samples_ms": reads,
        }
        read["ratio"] = read["median_ms"]["volume"] / read["median_ms"]["own"]
        result = {
            "rounds": ROUNDS, "requests": REQUESTS, "reads": READS, "bytes": BIG,
            "load_before": load, "load_after": os.getloadavg(),
            "mount": mount, "read": read,
        }
        with open(out_path, "w") as f:
            json.dump(result, f, indent=1)
        for conc, m in mount.items():
            print(conc, {k: round(v, 3) for k, v in m["median_ms"].items()},
                  "added", {k: round(v, 3) for k, v in m["added_ms"].items()})
        print("read 100 MB", {k: round(v, 1) for k, v in read["median_ms"].items()},
              "ratio", round(read["ratio"], 3))
    finally:
        stop(server)
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
