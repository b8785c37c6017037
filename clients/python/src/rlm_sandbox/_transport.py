"""Transports: how the client reaches an `rlm-sandbox serve`.

A transport moves lines of JSON, as UTF-8 bytes: `send` writes one
message line, `lines` yields the lines the server writes, `close` ends
the connection (for a server the transport started, it also waits for it
to exit), `kill` ends it at once without waiting. Everything
above it (request ids, bridge requests, notifications) is the same for
every transport, so a new way of reaching a server is one small class.
"""

from __future__ import annotations

import collections
import errno
import os
import select
import shutil
import socket
import subprocess
import threading
import weakref
from typing import Iterator, Sequence

try:
    import ssl
except ImportError:  # a Python built without OpenSSL: no TLS, the rest works
    ssl = None  # type: ignore[assignment]

from ._errors import SandboxError

#: The environment variable naming the `rlm-sandbox` binary.
BINARY_ENV = "RLM_SANDBOX"


def find_binary(binary: str | os.PathLike | None = None) -> str:
    """Return the `rlm-sandbox` binary to run: `binary` if given, else
    `$RLM_SANDBOX`, else `rlm-sandbox` on `$PATH`."""
    if binary is not None:
        return os.fspath(binary)
    env = os.environ.get(BINARY_ENV)
    if env:
        return env
    found = shutil.which("rlm-sandbox")
    if found:
        return found
    raise FileNotFoundError(
        "rlm-sandbox binary not found: pass binary=..., set $%s, or put rlm-sandbox on $PATH "
        "(in the repository, `make` builds bin/rlm-sandbox)" % BINARY_ENV
    )


class Transport:
    """One connection to a server: newline-delimited JSON both ways."""

    def send(self, line: bytes) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def lines(self) -> Iterator[bytes]:  # pragma: no cover - interface
        raise NotImplementedError

    def close(self, timeout: float) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def kill(self) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def describe_exit(self) -> str:
        """A few words on why the connection ended (for error messages)."""
        return ""


# The servers this process started, for _after_fork.
_servers: "weakref.WeakSet[StdioTransport]" = weakref.WeakSet()


def _after_fork() -> None:
    """In a forked child (os.fork, multiprocessing's fork start method):
    its copy of each server's standard input goes to /dev/null. While the
    child held it open, the server never saw its end, and the parent's
    close() waited out its timeout. Not closed: the file object would close
    the number again later, whatever it then is."""
    for t in list(_servers):
        try:
            fd = t.proc.stdin.fileno()
        except (AttributeError, OSError, ValueError):
            continue
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, fd)
        except OSError:
            pass
        finally:
            os.close(null)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


class StdioTransport(Transport):
    """Starts `rlm-sandbox serve --stdio` and talks over its stdin/stdout.

    The server's stderr (warnings) is kept, last lines only, so that an
    error about a server that went away can say why.
    """

    def __init__(self, binary: str | None = None, args: Sequence[str] = (), env: dict | None = None):
        command = [find_binary(binary), "serve", "--stdio", *args]
        try:
            self.proc = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                start_new_session=True,  # a Ctrl-C meant for Python is not also the server's
            )
        except OSError as e:
            raise SandboxError(None, "start_failed", "could not start %s: %s" % (command[0], e)) from e
        self.pid = self.proc.pid
        _servers.add(self)
        self._stderr_tail: collections.deque[str] = collections.deque(maxlen=20)
        self._stderr_thread = threading.Thread(target=self._drain_stderr, name="rlm-sandbox-stderr", daemon=True)
        self._stderr_thread.start()

    def _drain_stderr(self) -> None:
        for line in self.proc.stderr:
            self._stderr_tail.append(line.decode("utf-8", "replace").rstrip("\n"))

    def send(self, line: bytes) -> None:
        self.proc.stdin.write(line)
        self.proc.stdin.flush()

    def lines(self) -> Iterator[bytes]:
        return iter(self.proc.stdout)

    def close(self, timeout: float) -> None:
        # Closing stdin asks the server to destroy its sandboxes and exit.
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            # SIGTERM also destroys every sandbox; SIGKILL is the last resort.
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._stderr_thread.join(timeout)
        self.proc.stdout.close()
        self.proc.stderr.close()

    def kill(self) -> None:
        """Ends the server at once (used by the garbage-collection finalizer)."""
        if self.proc.poll() is None:
            self.proc.terminate()

    def describe_exit(self) -> str:
        code = self.proc.poll()
        tail = "\n".join(self._stderr_tail)
        what = "rlm-sandbox serve exited" if code is None else "rlm-sandbox serve exited with status %d" % code
        return what + (": " + tail if tail else "")


def parse_address(address: str) -> tuple[int, object]:
    """`unix:PATH` (or a path with a slash) → AF_UNIX; `HOST:PORT` → TCP."""
    if address.startswith("unix:"):
        return socket.AF_UNIX, address[len("unix:"):]
    if "/" in address:
        return socket.AF_UNIX, address
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError("address %r is neither unix:PATH nor HOST:PORT" % address)
    return socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET, (host.strip("[]") or "127.0.0.1", int(port))


def tls_context(tls: object) -> "ssl.SSLContext | None":
    """The `ssl.SSLContext` for `Client(tls=...)`: None or False, no TLS;
    True, the system's CA store; a path (str or os.PathLike), that CA
    file (PEM) instead; an `ssl.SSLContext`, itself (a client certificate
    for `serve --client-ca`, a CA directory, ...)."""
    if tls is None or tls is False:
        return None
    if ssl is None:
        raise RuntimeError("tls=... needs Python's ssl module, which this Python is built without")
    if isinstance(tls, ssl.SSLContext):
        return tls
    if tls is True:
        return ssl.create_default_context()
    if isinstance(tls, (str, os.PathLike)):
        path = os.fspath(tls)
        try:
            return ssl.create_default_context(cafile=path)
        except OSError as e:  # ssl.SSLError is one
            raise ValueError("tls=%r: not a readable CA certificate file (PEM): %s" % (path, e)) from e
    raise TypeError("tls must be True, a CA file path or an ssl.SSLContext, not %s" % type(tls).__name__)


class SocketTransport(Transport):
    """Connects to a `rlm-sandbox serve --listen` server (unix:PATH or
    HOST:PORT), newline-delimited JSON both ways, over TLS when given an
    `ssl.SSLContext` (see `tls_context`).

    The bearer token (if any) is sent by the client as its first request,
    `authenticate` (see `Client`); this class only moves lines.
    """

    def __init__(self, address: str, connect_timeout: float = 10.0, tls: "ssl.SSLContext | None" = None):
        family, target = parse_address(address)
        self.address = address
        self._received = False  # any byte from the server yet
        self._tls: _TLSStream | None = None
        server_hostname = None
        if tls is not None:
            if family != socket.AF_UNIX:
                server_hostname = target[0]  # checked against the certificate (a name or an IP address)
            elif tls.check_hostname:
                raise ValueError(
                    "TLS over a unix socket has no host name to check the server's certificate against: "
                    "pass an ssl.SSLContext with check_hostname = False (its chain is still verified)"
                )
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.settimeout(connect_timeout)
        try:
            sock.connect(target)
        except OSError as e:
            sock.close()
            raise SandboxError(None, "connect_failed", "could not connect to %s: %s" % (address, e)) from e
        if tls is not None:
            try:
                # The handshake, within connect_timeout too.
                sock = tls.wrap_socket(sock, server_hostname=server_hostname)
            except (OSError, ValueError) as e:
                sock.close()
                raise _tls_failed(address, e) from e
            self._tls = _TLSStream(sock)
        else:
            sock.settimeout(None)
            self._r = sock.makefile("rb")
        self.sock = sock

    def send(self, line: bytes) -> None:
        if self._tls is not None:
            self._tls.send(line)
        else:
            self.sock.sendall(line)

    def lines(self) -> Iterator[bytes]:
        return self._tls.lines() if self._tls is not None else self._plain_lines()

    def _plain_lines(self) -> Iterator[bytes]:
        for line in self._r:
            self._received = True
            yield line

    def close(self, timeout: float) -> None:
        self.kill()
        if self._tls is not None:
            with self._tls.lock:  # not in the middle of an SSL call of the reader's
                self.sock.close()
            return
        try:
            self._r.close()
        except OSError:
            pass
        self.sock.close()

    def kill(self) -> None:
        # The socket's own shutdown, not SSLSocket.shutdown, which would
        # also drop the TLS layer under the reader's feet; the reader then
        # sees the end of the stream. No lock: this runs from garbage
        # collection too, on any thread.
        try:
            socket.socket.shutdown(self.sock, socket.SHUT_RDWR)
        except OSError:
            pass

    def describe_exit(self) -> str:
        what = "the connection to %s closed" % self.address
        if self._tls is not None:
            if self._tls.error is not None:
                what += ": " + _tls_error_text(self._tls.error)
        elif not self._received:
            # A TLS server closes at once, without a word, a connection
            # that does not start with a TLS handshake; a plain server
            # always answers first (even to refuse).
            what += (
                " before the server sent anything (does it serve TLS? serve --tls-cert: "
                "connect with tls=True, tls='ca.pem' or tls=<ssl.SSLContext>)"
            )
        return what


# How a TLS stream waits for its socket: at most this long at a time, then
# it tries again (see _TLSStream).
_TLS_WAIT = 1.0
# The most a TLS stream hands OpenSSL in one write, and reads in one.
_TLS_CHUNK = 256 << 10
_TLS_READ = 64 << 10


class _TLSStream:
    """An `ssl.SSLSocket` read by one thread while others write to it.

    OpenSSL does not allow SSL_read and SSL_write on one connection from
    two threads at once, and CPython's ssl module does not serialize
    them: a blocking `recv` sits in SSL_read with the GIL released, and a
    `sendall` from another thread enters SSL_write meanwhile (CPython
    3.13.6 did hold a per-socket lock through a blocking read, and so a
    write waited for the next message to arrive: python/cpython#137583;
    3.13.7 went back). So the socket is non-blocking, and every call into
    it is made under one lock that is never held while waiting: a call
    that cannot go on (SSLWantReadError, SSLWantWriteError) releases the
    lock and waits for the socket with poll/select, outside it, then
    tries again. The reader holds the lock only to decrypt what already
    arrived, so a write never waits for the server to speak.
    """

    def __init__(self, sock: "ssl.SSLSocket"):
        sock.setblocking(False)
        self.sock = sock
        self.lock = threading.Lock()
        self.error: BaseException | None = None  # what ended the reading

    def _wait(self, writing: bool) -> None:
        # A bounded wait: should the bytes the reader waits for be taken
        # by a write (OpenSSL reads during a renegotiation, which the
        # server does not do), or the descriptor be closed meanwhile, the
        # next try finds out.
        fd = self.sock.fileno()
        if fd < 0:
            raise OSError(errno.EBADF, "the connection is closed")
        if hasattr(select, "poll"):
            p = select.poll()
            p.register(fd, select.POLLOUT if writing else select.POLLIN)
            p.poll(int(_TLS_WAIT * 1000))
        else:  # Windows
            select.select([] if writing else [fd], [fd] if writing else [], [], _TLS_WAIT)

    def send(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            # After a want-write, OpenSSL must be given the same bytes again.
            chunk = view[:_TLS_CHUNK]
            while True:
                with self.lock:
                    try:
                        n = self.sock.send(chunk)
                        break
                    except ssl.SSLWantWriteError:
                        writing = True
                    except ssl.SSLWantReadError:
                        writing = False
                    except (OSError, ValueError) as e:
                        if self.error is None:
                            raise
                        # The reader met the cause first (an alert from
                        # the server, say): that is the one to tell.
                        raise OSError(_tls_error_text(self.error)) from e
                self._wait(writing)
            view = view[n:]

    def lines(self) -> Iterator[bytes]:
        buf = bytearray()
        block = memoryview(bytearray(_TLS_READ))
        try:
            while True:
                with self.lock:
                    try:
                        n = self.sock.recv_into(block)
                    except ssl.SSLWantReadError:
                        n = -1
                    except ssl.SSLWantWriteError:  # OpenSSL must send first (a key update's answer)
                        n = -2
                    except (OSError, ValueError) as e:  # an SSLError too: an alert from the server, ...
                        self.error = e  # under the lock: a write failing after this sees it
                        break
                if n < 0:
                    self._wait(writing=n == -2)
                    continue
                if n == 0:  # the end (close_notify, or the connection closed)
                    break
                pos, start = len(buf), 0  # the new bytes are the first that may hold a newline
                buf += block[:n]
                while True:
                    i = buf.find(b"\n", pos)
                    if i < 0:
                        break
                    yield bytes(buf[start : i + 1])
                    start = pos = i + 1
                del buf[:start]
        except (OSError, ValueError) as e:  # from _wait: the socket was closed
            self.error = e
        if buf:
            yield bytes(buf)


def _tls_failed(address: str, e: BaseException) -> SandboxError:
    """The error for a TLS handshake that failed."""
    if ssl is not None and isinstance(e, ssl.SSLCertVerificationError):
        reason = e.verify_message or e.reason or str(e)
        message = "TLS: the certificate of %s was not accepted: %s" % (address, reason)
        if e.verify_code in (18, 19, 20):  # self-signed, self-signed in the chain, unknown issuer
            message += " (for a server with its own CA, pass tls='ca.pem' or an ssl.SSLContext that trusts it)"
    elif isinstance(e, socket.timeout):
        message = "TLS: the handshake with %s timed out (does it serve TLS? serve --tls-cert)" % address
    else:
        message = "TLS: the handshake with %s failed: %s" % (address, _tls_error_text(e))
        if "ALERT" not in (getattr(e, "reason", None) or ""):
            # No TLS alert: something else than a TLS server answered.
            message += " (does it serve TLS? serve --tls-cert)"
    return SandboxError(None, "tls_failed", message)


def _tls_error_text(e: BaseException) -> str:
    """str(e), with a hint when a TLS alert from the server says that it
    refused the client's certificate or the lack of one."""
    text = str(e) or type(e).__name__
    reason = getattr(e, "reason", None) or ""
    if "ALERT" in reason and any(
        word in reason
        for word in ("CERTIFICATE", "UNKNOWN_CA", "HANDSHAKE_FAILURE")  # TLS 1.2 refuses a missing one so
    ):
        text += (
            " (the server refused this client's certificate, or wants one: serve --client-ca; "
            "load one it trusts into an ssl.SSLContext with load_cert_chain and pass it as tls=)"
        )
    return text
