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
import os
import shutil
import socket
import subprocess
import threading
from typing import Iterator, Sequence

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


class SocketTransport(Transport):
    """Connects to a `rlm-sandbox serve --listen` server (unix:PATH or
    HOST:PORT), newline-delimited JSON both ways.

    The bearer token (if any) is sent by the client as its first request,
    `authenticate` (see `Client`); this class only moves lines.
    """

    def __init__(self, address: str, connect_timeout: float = 10.0):
        family, target = parse_address(address)
        self.address = address
        self._received = False  # any byte from the server yet
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        self.sock.settimeout(connect_timeout)
        try:
            self.sock.connect(target)
        except OSError as e:
            self.sock.close()
            raise SandboxError(None, "connect_failed", "could not connect to %s: %s" % (address, e)) from e
        self.sock.settimeout(None)
        self._r = self.sock.makefile("rb")

    def send(self, line: bytes) -> None:
        self.sock.sendall(line)

    def lines(self) -> Iterator[bytes]:
        for line in self._r:
            self._received = True
            yield line

    def close(self, timeout: float) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        try:
            self._r.close()
        except OSError:
            pass
        self.sock.close()

    def kill(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def describe_exit(self) -> str:
        what = "the connection to %s closed" % self.address
        if not self._received:
            # A TLS server closes at once, without a word, a connection
            # that does not start with a TLS handshake; a plain server
            # always answers first (even to refuse).
            what += " before the server sent anything (does it serve TLS? serve --tls-cert)"
        return what
