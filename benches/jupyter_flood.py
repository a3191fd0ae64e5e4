"""Kernel WebSocket flood: the supervisor's resident memory while one key queues FRAMES
`execute_request` frames of 16 MiB on one kernel socket and reads nothing (issue #26's goal:
RSS growth <= 1.2x the bytes the kernel may hold, and the frames past its bound refused),
against a `vivarium serve` on 127.0.0.1 with an API key and default settings. The first cell
sleeps, so every later one waits; then BUFFER_FRAMES frames of the shape that cost ~17x
their size as JSON trees (a `buffers` array of small numbers) follow.

    python benches/jupyter_flood.py target/release/vivarium benches/results/jupyter_flood.json

`tests/server/jupyter_bounded.rs` runs a scaled version (24 frames) on every CI run. Bounded: at
most FRAMES frames (JUPYTER_FLOOD_FRAMES, 64) and BUFFER_FRAMES (JUPYTER_FLOOD_BUFFER_FRAMES,
4); the WebSocket client is this file's own (stdlib only)."""

import base64
import http.client
import json
import os
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from http_load import rss_kib, stop, wait_ready  # noqa: E402

FRAMES = int(os.environ.get("JUPYTER_FLOOD_FRAMES", "64"))
BUFFER_FRAMES = int(os.environ.get("JUPYTER_FLOOD_BUFFER_FRAMES", "4"))
KEY = "key-alice-0123456789"
MAX_FRAME = 16 << 20
# What the kernel may hold (channels.rs): its shell queue's bytes, and the frame being read
# and parsed (the frame, serde_json's scratch for a string with escapes, and the code taken
# from it).
HELD = 2 * MAX_FRAME + 3 * MAX_FRAME


def ws_connect(host: str, port: int, path: str) -> socket.socket:
    s = socket.create_connection((host, port))
    key = base64.b64encode(os.urandom(16)).decode()
    s.sendall((f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
               f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
               "Sec-WebSocket-Version: 13\r\n\r\n").encode())
    head = b""
    while b"\r\n\r\n" not in head:
        head += s.recv(1)
    if b" 101 " not in head.split(b"\r\n")[0]:
        raise RuntimeError(head.decode(errors="replace"))
    return s


def ws_send(s: socket.socket, text: str) -> None:
    """One masked text frame (the mask is zero: XOR with it leaves the payload as it is)."""
    data = text.encode()
    n = len(data)
    if n < 126:
        head = struct.pack("!BB", 0x81, 0x80 | n)
    elif n < 1 << 16:
        head = struct.pack("!BBH", 0x81, 0x80 | 126, n)
    else:
        head = struct.pack("!BBQ", 0x81, 0x80 | 127, n)
    s.sendall(head + b"\0\0\0\0" + data)


def ws_recv(s: socket.socket) -> str | None:
    def exactly(n: int) -> bytes:
        b = b""
        while len(b) < n:
            chunk = s.recv(n - len(b))
            if not chunk:
                raise EOFError
            b += chunk
        return b
    b0, b1 = exactly(2)
    n = b1 & 0x7F
    if n == 126:
        n = struct.unpack("!H", exactly(2))[0]
    elif n == 127:
        n = struct.unpack("!Q", exactly(8))[0]
    payload = exactly(n)
    return payload.decode() if b0 & 0x0F == 1 else None


def request(code: str, buffers: str = "[]") -> tuple[str, str]:
    msg_id = os.urandom(16).hex()
    header = {"msg_id": msg_id, "session": "bench", "username": "bench", "date": "",
              "msg_type": "execute_request", "version": "5.3"}
    text = json.dumps({"header": header, "parent_header": {}, "metadata": {},
                       "content": {"code": code}, "buffers": [], "channel": "shell"})
    return msg_id, text.replace('"buffers": []', f'"buffers": {buffers}')


def main() -> None:
    binary, out_path = sys.argv[1], sys.argv[2]
    with tempfile.NamedTemporaryFile("w", suffix=".keys", delete=False) as f:
        f.write(f"alice:{KEY}\n")
        keys = f.name
    server = subprocess.Popen(
        [binary, "serve", "--listen", "127.0.0.1:0", "--api-keys-file", keys,
         "--audit-log", "/dev/null"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )
    try:
        addr = server.stdout.readline().split()[-1].replace("http://", "")
        host, port = addr.rsplit(":", 1)
        wait_ready(host, port)
        conn = http.client.HTTPConnection(host, int(port), timeout=60)
        conn.request("POST", "/api/kernels", body=json.dumps({"name": "vivarium-python"}),
                     headers={"Authorization": f"Bearer {KEY}",
                              "Content-Type": "application/json"})
        kernel = json.loads(conn.getresponse().read())["id"]
        ws = ws_connect(host, int(port), f"/api/kernels/{kernel}/channels?token={KEY}")
        ws_send(ws, request("import time\ntime.sleep(600)")[1])
        time.sleep(2)
        idle = rss_kib(server.pid)
        peak = [idle]
        sampling = [True]

        def sample() -> None:
            while sampling[0]:
                peak[0] = max(peak[0], rss_kib(server.pid))
                time.sleep(0.01)
        sampler = threading.Thread(target=sample)
        sampler.start()
        started = time.time()
        padding = "x" * (MAX_FRAME - 4096)
        big, sent = set(), 0
        for _ in range(FRAMES):
            msg_id, text = request(f"pass\n#{padding}")
            ws_send(ws, text)
            big.add(msg_id)
            sent += len(text)
        buffers = "[" + "1," * (MAX_FRAME // 2 - 4096) + "1]"
        for _ in range(BUFFER_FRAMES):
            text = request("pass", buffers)[1]
            ws_send(ws, text)
            sent += len(text)
        seconds = time.time() - started
        time.sleep(3)
        sampling[0] = False
        sampler.join()
        after = rss_kib(server.pid)
        refused = 0
        ws.settimeout(30)
        try:
            while refused < FRAMES:
                text = ws_recv(ws)
                m = json.loads(text) if text else {}
                if m.get("msg_type") == "execute_reply" and m["parent_header"].get("msg_id") in big \
                        and m["content"].get("ename") == "VivariumQueueFull":
                    refused += 1
        except (socket.timeout, EOFError):
            pass
        growth = (peak[0] - idle) * 1024
        result = dict(binary=binary, frames=FRAMES, buffer_frames=BUFFER_FRAMES,
                      sent_mib=round(sent / 2**20), seconds=round(seconds, 1),
                      idle_rss_mib=round(idle / 1024, 1), peak_rss_mib=round(peak[0] / 1024, 1),
                      after_rss_mib=round(after / 1024, 1), growth_mib=round(growth / 2**20, 1),
                      held_bound_mib=HELD >> 20, growth_over_bound=round(growth / HELD, 2),
                      refused=refused)
        print(f"{result['sent_mib']} MiB sent in {result['seconds']} s on one kernel socket: "
              f"supervisor RSS {result['idle_rss_mib']} -> peak {result['peak_rss_mib']} MiB "
              f"(+{result['growth_mib']}, {result['growth_over_bound']}x the {HELD >> 20} MiB "
              f"the kernel may hold); {refused} of {FRAMES} large frames refused", flush=True)
        os.makedirs(os.path.dirname(out_path) or ".", exist_ok=True)
        with open(out_path, "w") as f:
            json.dump(result, f, indent=2)
    finally:
        stop(server)
        os.unlink(keys)


if __name__ == "__main__":
    main()
