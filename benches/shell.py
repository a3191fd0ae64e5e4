"""The shell's costs (issue 49) over HTTP, against Python doing the same, interleaved in one
run on one release `vivarium serve` on 127.0.0.1 (keep-alive, one connection, warm-up
excluded, medians and p90):

- a fresh sandbox: `ls | wc -l` (bash) against a Python hello world (goal: at most 2x);
- a session turn: `ls | wc -l` in bash against `print(len(os.listdir('.')))` in Python
  (goal: at most 1 ms more), the Python turn checked as by default and unchecked (a bash
  turn has no Python check to run);
- a 20-line shell script of file work in a fresh sandbox (goal: at most 20 ms).

    python3 benches/shell.py target/release/vivarium benches/results/shell.json

Bounded: ROUNDS rounds of N requests each (env SHELL_ROUNDS, SHELL_N)."""

import http.client
import json
import os
import statistics
import subprocess
import sys
import time

from http_load import stop, wait_ready

ROUNDS = int(os.environ.get("SHELL_ROUNDS", "5"))
N = int(os.environ.get("SHELL_N", "40"))
WARMUP = 10

SCRIPT = """mkdir -p work/a work/b
cd work
for i in 1 2 3 4 5; do echo "line $i" > a/f$i.txt; done
cp a/f1.txt b/
mv b/f1.txt b/g.txt
cat a/*.txt | wc -l > count.txt
grep -l 3 a/*.txt > hits.txt
sed -i 's/line/LINE/' a/f2.txt
ls a | sort -r | head -2 > last.txt
find . -name '*.txt' | wc -l
echo "total $(cat count.txt)"
tar -cf a.tar a
gzip -k a.tar
ls -1 | wc -l
rm -r b
test -d b || echo gone
awk '{print $2}' a/f3.txt
head -c 4 a/f4.txt; echo
du -s a > /dev/null
echo done
"""


def call(conn, path, body):
    t = time.perf_counter()
    conn.request("POST", path, json.dumps(body), {"content-type": "application/json"})
    r = conn.getresponse()
    data = json.loads(r.read())
    ms = (time.perf_counter() - t) * 1000
    if r.status >= 300 or data.get("status") != "ok":
        raise RuntimeError(f"{path} {body}: {r.status} {data}")
    return ms


def main():
    binary, out = sys.argv[1], sys.argv[2]
    port = 18000 + os.getpid() % 1000
    proc = subprocess.Popen([binary, "serve", "--listen", f"127.0.0.1:{port}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_ready("127.0.0.1", port)
        conn = http.client.HTTPConnection("127.0.0.1", port)
        conn.request("POST", "/v1/sessions", "{}", {"content-type": "application/json"})
        sid = json.loads(conn.getresponse().read())["id"]
        turn = f"/v1/sessions/{sid}/execute"
        cases = {
            "fresh_python_hello": ("/v1/execute", {"code": "print('hello')"}),
            "fresh_bash_ls_wc": ("/v1/execute", {"language": "bash", "code": "ls | wc -l"}),
            "turn_python_listdir": (turn, {"code": "import os\nprint(len(os.listdir('.')))"}),
            "turn_python_listdir_unchecked": (turn, {"code": "import os\nprint(len(os.listdir('.')))",
                                                     "policy": "off"}),
            "turn_bash_ls_wc": (turn, {"language": "bash", "code": "ls | wc -l"}),
            "fresh_bash_20_lines": ("/v1/execute", {"language": "bash", "code": SCRIPT}),
        }
        times = {k: [] for k in cases}
        for path, body in cases.values():
            for _ in range(WARMUP):
                call(conn, path, body)
        for _ in range(ROUNDS):
            for k, (path, body) in cases.items():
                times[k] += [call(conn, path, body) for _ in range(N)]
        res = {k: {"p50": statistics.median(v), "p90": statistics.quantiles(v, n=10)[-1]}
               for k, v in times.items()}
        res["ratio_fresh_ls_wc_over_hello"] = (res["fresh_bash_ls_wc"]["p50"]
                                              / res["fresh_python_hello"]["p50"])
        res["turn_bash_minus_python_ms"] = (res["turn_bash_ls_wc"]["p50"]
                                           - res["turn_python_listdir"]["p50"])
        res["turn_bash_minus_unchecked_python_ms"] = (res["turn_bash_ls_wc"]["p50"]
                                                     - res["turn_python_listdir_unchecked"]["p50"])
        res["load_average"] = os.getloadavg()
        for k, v in res.items():
            print(k, v)
        with open(out, "w") as f:
            json.dump(res, f, indent=1)
    finally:
        stop(proc)


if __name__ == "__main__":
    main()
