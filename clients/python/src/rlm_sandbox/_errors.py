"""Exceptions: every error the server reports, with its code and kind."""

from __future__ import annotations

from typing import Any

# JSON-RPC error codes of `rlm-sandbox serve` (docs/serve.md).
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
SANDBOX_UNAVAILABLE = -32000  # kinds: dead, worker_exited, worker_unavailable, distribution, protocol, internal, too_large
TIMEOUT = -32001
CANCELED = -32002
NO_SUCH_SANDBOX = -32003
SHUTDOWN = -32004
UNAUTHORIZED = -32005  # `serve --listen`: a wrong or missing token; the connection is closed
BUSY = -32006  # `serve --listen`: a limit is reached; data["limit"] names it, data.get("retry_after_ms") when to retry


class SandboxError(Exception):
    """An error reported by the server (or by the client about the server).

    `code` is the JSON-RPC error code (None for errors the client itself
    detects, such as a server that exited), `kind` the server's
    `data.kind` (`"dead"`, `"no_such_sandbox"`, `"invalid_params"`, …),
    `message` its message and `data` the whole `data` object.
    """

    def __init__(self, code: int | None, kind: str | None, message: str, data: dict | None = None):
        super().__init__(message)
        self.code = code
        self.kind = kind
        self.message = message
        self.data = data or {}

    def __str__(self) -> str:
        if self.code is None:
            return self.message
        return "%s (code %d, %s)" % (self.message, self.code, self.kind or "?")

    @classmethod
    def from_response(cls, error: Any) -> "SandboxError":
        if not isinstance(error, dict):
            return ProtocolError(None, "protocol", "malformed error from the server: %r" % (error,))
        data = error.get("data") if isinstance(error.get("data"), dict) else {}
        code = error.get("code")
        kind = data.get("kind")
        message = str(error.get("message", ""))
        sub = {
            NO_SUCH_SANDBOX: NoSuchSandbox,
            INVALID_PARAMS: InvalidParams,
            SHUTDOWN: ServerClosed,
        }.get(code)
        if sub is None and code == SANDBOX_UNAVAILABLE and kind in ("dead", "worker_exited"):
            sub = SandboxDead
        elif code in (TIMEOUT, CANCELED) and data.get("sandbox_dead") is True:
            sub = SandboxDead  # get_variable or set_variable: a value's code ignored the interrupt and was killed
        return (sub or cls)(code, kind, message, data)


class SandboxDead(SandboxError):
    """The sandbox's interpreter was killed or crashed: `restart()` it."""


class NoSuchSandbox(SandboxError):
    """The sandbox was destroyed (closed) or never created."""


class InvalidParams(SandboxError):
    """The server refused a request's parameters (code -32602)."""


class ServerClosed(SandboxError):
    """The server exited, the connection closed, or the client was closed."""


class ProtocolError(SandboxError):
    """The server sent something the client cannot read."""
