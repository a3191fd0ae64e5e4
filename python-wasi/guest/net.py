"""Host-mediated HTTP egress in the guest, loaded as `vivarium_net`.

There are no sockets in the sandbox and no `ssl`. A run granted network gets `install()` in
a hidden set-up turn; then `http.client`, `urllib.request` and `urllib3` (so `requests`, even
imported later) connect through a `DoorSocket`: it keeps what the client writes and, at the
first read, sends it through the host door as one raw HTTP/1.1 request (`EGRESS_TAG`, a JSON
line naming the scheme, host and port connected to, then the bytes). The host resolves, checks
its policy, speaks TLS (and verifies the server) for https, and answers with a whole raw
response (Content-Length, Connection: close: one request per connection) for the client to
read, or with a refusal, raised as a `NetworkError`. HTTPS connections here ignore TLS options.

Nothing here is trusted by the host: a program may call the door itself, and every request is
checked there. Only what the host answers is trusted here, and only to be an HTTP response or
a refusal.
"""

import io
import json
import sys

import _host

# Every template loads this module at build time; it imports nothing the templates do not
# already have (`http.client` would cost every sandbox its modules). `install()` patches the
# clients that are imported, and the rest as they are.

# The prefix of an HTTP request sent through the door (src/guest/mod.rs, EGRESS_TAG).
EGRESS_TAG = b"\0vivarium-http\0"
# The prefix of the door's refusal, then JSON {"reason", "message"} (src/guest/mod.rs, REFUSED_TAG).
_REFUSED = b"\0refused\0"
_TIMEOUTS = ("request_timeout", "total_time")
_NO_TUNNEL = "proxies and tunnels are not available here: the host makes every connection"
# The keywords urllib3's HTTPConnection takes; its HTTPS pools pass TLS ones besides.
_URLLIB3_KEPT = ("timeout", "source_address", "blocksize", "socket_options", "proxy",
                 "proxy_config")


class NetworkError(OSError):
    """A request the host did not carry out; `.reason` says why (e.g. "host_not_allowed")."""

    def __init__(self, reason, message=""):
        super().__init__(f"network request refused ({reason}): {message}")
        self.reason = reason
        self.message = message


class NetworkRefused(NetworkError, PermissionError):
    """A request the host refused, or could not complete."""


class NetworkTimeout(NetworkError, TimeoutError):
    """A request that ran out of time at the host."""


def _exchange(scheme, host, port, request):
    """Sends one raw HTTP request to (scheme, host, port) through the door; the raw reply."""
    meta = json.dumps({"scheme": scheme, "host": host, "port": port})
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    try:
        reply = _host.call(EGRESS_TAG + meta.encode() + b"\n" + request)
    except ConnectionRefusedError:
        raise NetworkRefused("network_off", "network access is off for this run") from None
    if reply.startswith(b"HTTP/1.1 "):
        return reply
    if not reply.startswith(_REFUSED):
        raise NetworkRefused("bad_reply", "the host answered out of shape")
    try:
        info = json.loads(reply[len(_REFUSED):])
        reason, message = str(info["reason"]), str(info.get("message", ""))
    except Exception:
        reason, message = "bad_reply", "the host's refusal was out of shape"
    raise (NetworkTimeout if reason in _TIMEOUTS else NetworkRefused)(reason, message)


class DoorSocket:
    """A connection to (scheme, host, port) through the door, socket-like enough for the HTTP
    clients. It carries one request: what was written goes out at the first read, then the
    reads get the reply, then EOF."""

    proto = 0

    @property
    def family(self):
        import socket

        return socket.AF_INET

    @property
    def type(self):
        import socket

        return socket.SOCK_STREAM

    def __init__(self, scheme, host, port, timeout=None):
        self.scheme, self.host, self.port = scheme, host, port
        self._timeout = timeout if isinstance(timeout, (int, float)) else None
        self._out = bytearray()
        self._reply = None

    def sendall(self, data, flags=0):
        if self._reply is not None:
            raise OSError("this connection has carried its request (every reply closes it); "
                          "open a new connection")
        self._out += data

    def send(self, data, flags=0):
        self.sendall(data)
        return memoryview(data).nbytes

    def _received(self):
        if self._reply is None:
            request = bytes(self._out)
            self._out.clear()
            # Spent whatever happens: a failed exchange leaves EOF, not a second request.
            self._reply = io.BytesIO()
            self._reply = io.BytesIO(_exchange(self.scheme, self.host, self.port, request))
        return self._reply

    def recv(self, bufsize, flags=0):
        return self._received().read(bufsize)

    def recv_into(self, buffer, nbytes=0, flags=0):
        view = memoryview(buffer).cast("B")
        return self._received().readinto(view[:nbytes] if nbytes else view)

    def makefile(self, mode="r", buffering=None, **_):
        if mode != "rb":
            raise ValueError(f"a door socket makes only binary read files, not {mode!r}")
        return io.BufferedReader(_Reader(self))

    def close(self, *args):
        # The reply stays readable: http.client closes a Connection: close connection before
        # its response, which reads through makefile(), is read.
        pass

    shutdown = setsockopt = close

    def settimeout(self, timeout):
        self._timeout = timeout

    def gettimeout(self):
        return self._timeout

    def setblocking(self, flag):
        self._timeout = None if flag else 0.0

    def getsockopt(self, *args):
        return 0

    def fileno(self):
        # No descriptor to select on: urllib3's liveness check is answered without one.
        return -1

    def getpeername(self):
        return (self.host, self.port)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return f"<DoorSocket {self.scheme}://{self.host}:{self.port}>"


class _Reader(io.RawIOBase):
    def __init__(self, sock):
        self._sock = sock

    def readable(self):
        return True

    def readinto(self, buffer):
        return self._sock.recv_into(buffer)


def _connect(self):
    """`http.client.HTTPConnection.connect`: a door socket instead of a TCP connection."""
    if self._tunnel_host:
        raise OSError(_NO_TUNNEL)
    sys.audit("http.client.connect", self, self.host, self.port)
    scheme = getattr(self, "_door_scheme", "http")
    self.sock = DoorSocket(scheme, self.host, self.port, self.timeout)


def _first_time(module):
    done = getattr(module, "_vivarium_net", False)
    module._vivarium_net = True
    return not done


def _patch_http_client(client):
    """http.client: door sockets, and an HTTPSConnection of ours (TLS is the host's, with or
    without ssl)."""
    if not _first_time(client):
        return

    class HTTPSConnection(client.HTTPConnection):
        """`http.client.HTTPSConnection` in the sandbox: the host speaks TLS and verifies the
        server, so `context`, `check_hostname`, `key_file` and `cert_file` are ignored."""

        default_port = client.HTTPS_PORT
        _door_scheme = "https"

        def __init__(self, host, port=None, *args, context=None, check_hostname=None,
                     key_file=None, cert_file=None, **kwargs):
            super().__init__(host, port, *args, **kwargs)

    client.HTTPConnection.connect = _connect
    client.HTTPSConnection = HTTPSConnection
    if "HTTPSConnection" not in client.__all__:
        client.__all__.append("HTTPSConnection")


def _patch_urllib(request):
    """urllib.request: https through our HTTPSConnection, refusals as URLError."""
    import http.client
    import urllib.error

    if not _first_time(request):
        return
    base = request.AbstractHTTPHandler

    class HTTPSHandler(base):
        # The stdlib's builds an ssl context in __init__; the host has the only one.
        def __init__(self, debuglevel=None, context=None, check_hostname=None):
            if debuglevel is None:
                debuglevel = http.client.HTTPSConnection.debuglevel
            super().__init__(debuglevel)

        def https_open(self, req):
            return self.do_open(http.client.HTTPSConnection, req)

        https_request = base.do_request_

    do_open = base.do_open

    def do_open_(self, http_class, req, **kwargs):
        # A refusal comes with the response, which do_open reads outside its URLError net.
        try:
            return do_open(self, http_class, req, **kwargs)
        except NetworkError as e:
            raise urllib.error.URLError(e) from e

    base.do_open = do_open_
    request.HTTPSHandler = HTTPSHandler
    if "HTTPSHandler" not in request.__all__:
        request.__all__.append("HTTPSHandler")
    request._opener = None  # the next urlopen builds an opener with our handler


def _patch_urllib3(pool):
    """urllib3 2.x, and so requests: door sockets, and an HTTPS connection of ours."""
    if not _first_time(pool):
        return
    connection = sys.modules["urllib3.connection"]

    def create_connection(address, timeout=None, source_address=None, socket_options=None):
        host, port = address
        return DoorSocket("http", host.strip("[]"), port, timeout)

    class HTTPSConnection(connection.HTTPConnection):
        """urllib3's HTTPS connection: TLS options ignored, the host verifies the server."""

        default_port = 443

        def __init__(self, host, port=None, **kwargs):
            kept = {k: v for k, v in kwargs.items() if k in _URLLIB3_KEPT}
            super().__init__(host, port, **kept)

        def connect(self):
            if self._tunnel_host or self.proxy:
                raise OSError(_NO_TUNNEL)
            super().connect()
            self.sock.scheme = "https"
            self.is_verified = True

    wait_for_read = connection.wait_for_read

    def wait_for_read_(sock, timeout=None):
        # A door socket that has carried its request reads as closed, a fresh one as idle.
        if isinstance(sock, DoorSocket):
            return sock._reply is not None
        return wait_for_read(sock, timeout)

    raise_timeout = pool.HTTPConnectionPool._raise_timeout

    def raise_timeout_(self, err, url, timeout_value):
        # urllib3's own message would only give the client's timeout; ours says why.
        if isinstance(err, NetworkTimeout):
            raise pool.ReadTimeoutError(self, url, str(err)) from err
        return raise_timeout(self, err, url, timeout_value)

    sys.modules["urllib3.util.connection"].create_connection = create_connection
    connection.HTTPSConnection = connection.VerifiedHTTPSConnection = HTTPSConnection
    connection.wait_for_read = wait_for_read_
    pool.HTTPSConnection = pool.HTTPSConnectionPool.ConnectionCls = HTTPSConnection
    pool.HTTPConnectionPool._raise_timeout = raise_timeout_


# What to patch in which module, once it has run.
_PATCHES = {
    "http.client": _patch_http_client,
    "urllib.request": _patch_urllib,
    "urllib3.connectionpool": _patch_urllib3,
}


class _Watcher:
    """A `sys.meta_path` finder that finds nothing itself: a module in `_PATCHES`, found by
    the finders after it, is patched as soon as it has run."""

    def find_spec(self, name, path=None, target=None):
        patch = _PATCHES.get(name)
        if patch is None:
            return None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = None if finder is self or find is None else find(name, path, target)
            if spec is None:
                continue
            if hasattr(spec.loader, "exec_module"):
                spec.loader = _Patching(spec.loader, patch)
            return spec
        return None


class _Patching:
    """The loader a module was found with, patching the module once it has run. A wrapper,
    not a change to that loader: loaders are shared (one zipimporter per zip)."""

    def __init__(self, loader, patch):
        self._loader, self._patch = loader, patch

    def __getattr__(self, name):
        return getattr(self._loader, name)

    def exec_module(self, module):
        self._loader.exec_module(module)
        self._patch(module)


def install():
    """Sends the HTTP clients through the door: http.client, urllib.request and urllib3 (so
    requests) now if they are imported, else as soon as they are."""
    for name, patch in _PATCHES.items():
        if name in sys.modules:
            patch(sys.modules[name])
    if not any(isinstance(f, _Watcher) for f in sys.meta_path):
        sys.meta_path.insert(0, _Watcher())
