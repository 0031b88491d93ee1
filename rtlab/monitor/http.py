# SPDX-License-Identifier: MIT
"""Serving the exporter over HTTP: `/metrics`, `/healthz` and a tiny index page.

One thread per request (a slow or stuck scraper holds only its own thread; the watchers
write into the `LiveState` under a lock that a scrape holds only to copy it). The
default address is 127.0.0.1:9477: this machine only, unless another address is asked
for with `--listen`.
"""

from __future__ import annotations

import errno
import gzip
import ipaddress
import re
import socket
import socketserver
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

from rtlab.errors import RtlabError, UsageError
from rtlab.monitor.exporter import ScrapeStats, make_registry
from rtlab.monitor.live import LiveState

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 9477
DEFAULT_LISTEN = f"{DEFAULT_HOST}:{DEFAULT_PORT}"
REQUEST_TIMEOUT_S = 30.0  # a client that sends nothing for this long is dropped

_LISTEN_HINT = "e.g. --listen 127.0.0.1:9477, :9477, [::1]:9477 or 9477"
_HOSTNAME = re.compile(r"^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
                       r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$")


class ListenError(RtlabError):
    """The exporter cannot listen where it was asked to."""


# --listen ---------------------------------------------------------------------------
def _bad(text: str, why: str) -> UsageError:
    return UsageError(f"invalid --listen {text!r}: {why}", hint=_LISTEN_HINT)


def _port(text: str, port: str) -> int:
    if not port.isdigit() or not 1 <= int(port) <= 65535:
        raise _bad(text, f"the port {port!r} is not a number from 1 to 65535")
    return int(port)


def _host(text: str, host: str) -> str:
    if host.startswith("["):
        inner = host[1:-1] if host.endswith("]") else ""
        try:
            return str(ipaddress.IPv6Address(inner))
        except ValueError:
            raise _bad(text, f"{host!r} is not an IPv6 address in brackets") from None
    if ":" in host or "]" in host:
        raise _bad(text, "write an IPv6 address in brackets, as in [::1]:9477")
    if re.fullmatch(r"[0-9.]+", host):
        try:
            return str(ipaddress.IPv4Address(host))
        except ValueError:
            raise _bad(text, f"{host!r} is not an IPv4 address") from None
    if not _HOSTNAME.match(host):
        raise _bad(text, f"{host!r} is not a host name or address")
    return host


def parse_listen(text: str) -> tuple[str, int]:
    """`HOST:PORT`, `[IPV6]:PORT`, `:PORT` or `PORT` (the last two on 127.0.0.1) ->
    (host, port); anything else is a `UsageError`."""
    s = text.strip()
    if s.isdigit():
        return DEFAULT_HOST, _port(text, s)
    host, sep, port = s.rpartition(":")
    if not sep:
        raise _bad(text, "expected HOST:PORT or a port number")
    if not port:
        raise _bad(text, "the port is missing after ':'")
    number = _port(text, port)
    return (DEFAULT_HOST if host == "" else _host(text, host)), number


def format_address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


# binding ----------------------------------------------------------------------------
# errno of a failed bind -> (what it means, with {host} filled in; what to do)
_BIND_ERRORS = {
    errno.EADDRINUSE: ("the address is already in use, by another rtlab monitor or "
                       "exporter perhaps", "choose another port with --listen"),
    errno.EADDRNOTAVAIL: ("{host} is not an address of this machine",
                          "give one of its addresses, as 'ip -brief address' lists them, "
                          "or 0.0.0.0 for all of them, with --listen"),
    errno.EACCES: ("permission denied (a port below 1024 needs root or "
                   "CAP_NET_BIND_SERVICE)", "choose a port from 1024 up with --listen"),
    errno.EAFNOSUPPORT: ("IPv6 is not available on this machine",
                         "give an IPv4 address with --listen"),
}


def _listen_error(host: str, port: int, exc: OSError) -> ListenError:
    where = f"cannot listen on {format_address(host, port)}"
    if isinstance(exc, socket.gaierror):
        why = f"unknown host {host!r}"
        hint = "give an IP address of this machine or a name it resolves"
    elif exc.errno in _BIND_ERRORS:
        why, hint = _BIND_ERRORS[exc.errno]
        why = why.format(host=host)
    else:
        return ListenError(f"{where}: {exc.strerror or exc}")
    return ListenError(f"{where}: {why}", hint=hint)


def _family(host: str, port: int) -> tuple[socket.AddressFamily, str]:
    """The address family and the numeric address to bind for `host`."""
    try:
        return socket.AF_INET6 if ipaddress.ip_address(host).version == 6 \
            else socket.AF_INET, host
    except ValueError:
        pass
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                               flags=socket.AI_PASSIVE)
    family, _, _, _, sockaddr = infos[0]
    return family, str(sockaddr[0])


class _Server(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True
    block_on_close = False

    def server_bind(self) -> None:
        # HTTPServer.server_bind would look the host's name up (getfqdn): skip that
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name, self.server_port = str(host), int(port)
        self.setup_environ()


class _Server6(_Server):
    address_family = socket.AF_INET6


class _QuietHandler(WSGIRequestHandler):
    timeout = REQUEST_TIMEOUT_S

    def log_message(self, format: str, *args: Any) -> None:
        pass


_INDEX = b"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>rtlab monitor</title></head>
<body><h1>rtlab monitor</h1>
<p><a href="/metrics">/metrics</a>: Prometheus metrics.
<a href="/healthz">/healthz</a>: liveness.</p></body></html>
"""

StartResponse = Callable[..., Any]
# gzip level of /metrics answers. Prometheus asks for gzip at every scrape; the client
# library compresses at level 9, which took 6.5 ms of a 64-CPU scrape (165 KiB -> 9 KiB)
# where level 1 takes 0.4 ms (-> 12 KiB).
GZIP_LEVEL = 1


def prefer_text(accept: str) -> str:
    """The Accept header to hand the client library: `text/plain` when the client
    accepts the Prometheus text format (named, or through `*/*` or `text/*`, with a
    q-value above 0), else as it came. Prometheus 2.x lists OpenMetrics first and the
    text format after it; the library would pick OpenMetrics, whose encoder took 24-35 ms
    of a 64-CPU scrape where the text encoder takes ~15 ms (bench/RESULTS.md), for
    nothing Prometheus uses here (no exemplars; `_created` only behind a feature flag)."""
    for part in accept.split(","):
        media, *params = (p.strip().lower() for p in part.split(";"))
        q = 1.0
        for param in params:
            if param.startswith("q="):
                try:
                    q = float(param[2:])
                except ValueError:
                    q = 0.0
        if q > 0 and media in ("text/plain", "text/*", "*/*"):
            return "text/plain"
    return accept


def _plain(start_response: StartResponse, status: str, body: bytes,
           ctype: str = "text/plain; charset=utf-8") -> Iterable[bytes]:
    start_response(status, [("Content-Type", ctype), ("Content-Length", str(len(body)))])
    return [body]


# the server -------------------------------------------------------------------------
class MetricsServer:
    """Serves a `LiveState` to Prometheus until `stop()`."""

    def __init__(self, live: LiveState, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT):
        self.live = live
        self.host = host
        self.port = port
        self.stats = ScrapeStats()
        self._metrics_app = self._make_metrics_app()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    def _make_metrics_app(self) -> Callable[..., Iterable[bytes]]:
        """The client library's WSGI app (format negotiation, encoding), uncompressed:
        `_metrics` compresses."""
        from prometheus_client import make_wsgi_app

        return make_wsgi_app(make_registry(self.live.view, self.stats),
                             disable_compression=True)

    def _metrics(self, environ: dict[str, Any],
                 start_response: StartResponse) -> Iterable[bytes]:
        """The library's answer, in the text format whenever the client accepts it
        (`prefer_text`), gzip-compressed at `GZIP_LEVEL` when the client accepts gzip (the
        library's own test of Accept-Encoding, and as it does: a GET's 200 answer
        only)."""
        from prometheus_client.exposition import gzip_accepted

        environ = dict(environ, HTTP_ACCEPT=prefer_text(environ.get("HTTP_ACCEPT", "")))
        if environ.get("REQUEST_METHOD") != "GET" or not gzip_accepted(
                environ.get("HTTP_ACCEPT_ENCODING", "")):
            return self._metrics_app(environ, start_response)
        answer: list[Any] = []

        def keep(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> None:
            answer[:] = [status, headers]

        body = b"".join(self._metrics_app(environ, keep))
        status, headers = answer
        if status.startswith("200 "):
            body = gzip.compress(body, compresslevel=GZIP_LEVEL)
            headers = [*headers, ("Content-Encoding", "gzip")]
        start_response(status, headers)
        return [body]

    @property
    def address(self) -> tuple[str, int]:
        """The bound (host, port): the real port when 0 was asked for."""
        if self._server is None:
            return self.host, self.port
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    @property
    def url(self) -> str:
        return f"http://{format_address(*self.address)}/metrics"

    def start(self) -> None:
        """Bind and serve in a background thread; `ListenError` when it cannot bind."""
        if self._server is not None:
            return
        try:
            family, numeric = _family(self.host, self.port)
            cls = _Server6 if family == socket.AF_INET6 else _Server
            server = cls((numeric, self.port), _QuietHandler)
        except OSError as exc:
            raise _listen_error(self.host, self.port, exc) from None
        server.set_app(self._app)
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={
            "poll_interval": 0.5}, name="rtlab-metrics", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = None
        self._thread = None

    def __enter__(self) -> MetricsServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _app(self, environ: dict[str, Any],
             start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        method = environ.get("REQUEST_METHOD", "GET")
        if path == "/metrics":
            t0 = time.perf_counter()
            body = self._metrics(environ, start_response)
            if method == "GET":
                self.stats.record(time.perf_counter() - t0)
            return body
        if path not in ("/", "/healthz"):
            return _plain(start_response, "404 Not Found",
                          b"not found: rtlab serves /metrics, /healthz and /\n")
        if method not in ("GET", "HEAD"):
            return _plain(start_response, "405 Method Not Allowed", b"use GET\n")
        if path == "/":
            return _plain(start_response, "200 OK", _INDEX, "text/html; charset=utf-8")
        return _plain(start_response, "200 OK", b"ok\n")
