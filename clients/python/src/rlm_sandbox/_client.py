"""Client (one server) and Sandbox (one sandbox in it)."""

from __future__ import annotations

import contextvars
import itertools
import json
import threading
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ._errors import CANCELED, TIMEOUT, ProtocolError, SandboxDead, SandboxError, ServerClosed
from ._transport import SocketTransport, StdioTransport, Transport

#: The protocol version of `rlm-sandbox serve` this client speaks.
PROTOCOL = 1

LLMQuery = Callable[[str], str]
RLMQuery = Callable[[str, Any], str]
OutputCallback = Callable[[str], None]


@dataclass(frozen=True)
class Result:
    """What one `execute` did.

    An exception raised by the code is not a Python exception here: it is
    `error` (`"Type: message"`), `error_type` and `traceback`, with the
    output printed before it. Code interrupted by the time limit comes
    back with `timed_out` true, code interrupted by `cancel()` with
    `canceled` true (both with `error_type` `"KeyboardInterrupt"`); the
    sandbox stays usable in every case.
    """

    stdout: str
    stderr: str
    error: str | None
    error_type: str | None
    traceback: str | None
    duration: float  # seconds, wall clock in the server
    python_duration: float  # seconds of it spent running Python
    bridge_calls: int
    timed_out: bool
    truncated: bool
    canceled: bool = False

    @property
    def ok(self) -> bool:
        """True when the code ran to its end without an exception."""
        return self.error is None

    @classmethod
    def from_json(cls, e: dict, canceled: bool = False) -> "Result":
        return cls(
            stdout=e.get("stdout", ""),
            stderr=e.get("stderr", ""),
            error=e.get("error"),
            error_type=e.get("error_type"),
            traceback=e.get("traceback"),
            duration=float(e.get("duration_ms", 0.0)) / 1000.0,
            python_duration=float(e.get("python_duration_ms", 0.0)) / 1000.0,
            bridge_calls=int(e.get("bridge_calls", 0)),
            timed_out=bool(e.get("timed_out", False)),
            truncated=bool(e.get("truncated", False)),
            canceled=canceled,
        )


class _Pending:
    __slots__ = ("done", "response")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.response: dict | None = None


class _Route:
    """What the client does with a sandbox's bridge requests and output."""

    __slots__ = ("llm_query", "rlm_query", "on_stdout", "on_stderr", "context")

    def __init__(self, llm_query, rlm_query, on_stdout, on_stderr):
        self.llm_query, self.rlm_query = llm_query, rlm_query
        self.on_stdout, self.on_stderr = on_stdout, on_stderr
        # The contextvars of the thread in the latest execute: bridge
        # callbacks run in a copy of it (dspy.context(lm=...) and the like
        # reach them, although they run on other threads).
        self.context: contextvars.Context | None = None


def _shutdown_transport(transport: Transport) -> None:
    # A Client dropped without close(): end its server (no process outlives it).
    transport.kill()


class Client:
    """One `rlm-sandbox serve` server; it holds any number of sandboxes.

    With no `address`, the client starts `rlm-sandbox serve --stdio` (the
    binary from `binary`, `$RLM_SANDBOX` or `$PATH`) and owns it: `close()`
    ends it and every sandbox in it. With `address` (`unix:PATH` or
    `HOST:PORT`) it connects to a `serve --listen` server instead,
    authenticating with `token`.

    Thread-safe: requests from several threads are in flight at once,
    matched to their answers by id. Bridge requests (`llm_query`,
    `rlm_query`) are answered each on its own thread, so a batched call is
    answered concurrently and a callback may itself use any sandbox.
    Output callbacks run on the reader thread: keep them quick.
    """

    def __init__(
        self,
        binary: str | None = None,
        *,
        address: str | None = None,
        token: str | None = None,
        args: Sequence[str] = (),
        env: dict | None = None,
        close_timeout: float = 10.0,
    ):
        self._ids = itertools.count(1)
        self._write_lock = threading.Lock()
        self._lock = threading.Lock()
        self._pending: dict[int, _Pending] = {}
        self._routes: dict[str, _Route] = {}
        self._canceled_bridge: set[str] = set()
        self._closed = False
        self._gone: ServerClosed | None = None
        self._close_timeout = close_timeout
        if address is not None:
            self._transport: Transport = SocketTransport(address)
        else:
            self._transport = StdioTransport(binary, args, env)
        self._finalizer = weakref.finalize(self, _shutdown_transport, self._transport)
        self._reader = threading.Thread(target=self._read, name="rlm-sandbox-reader", daemon=True)
        self._reader.start()
        if address is not None and token is not None:
            # serve --listen: the first request proves the client holds the token.
            try:
                self.call("authenticate", token=token)
            except BaseException:
                self.close()  # refused: the server closes the connection too
                raise

    # -- public -----------------------------------------------------------

    @property
    def pid(self) -> int | None:
        """The server's process id (None when connected over a socket)."""
        return getattr(self._transport, "pid", None)

    def version(self) -> dict:
        """The server's `version` result (`rlm_sandbox`, `protocol`, `pyodide`, …)."""
        return self.call("version")

    def create(self, context: Any = "", **options: Any) -> "Sandbox":
        """A new sandbox in this server; see `Sandbox` for the options."""
        return Sandbox(context, client=self, **options)

    def call(self, method: str, timeout: float | None = None, **params: Any) -> Any:
        """Send one JSON-RPC request and wait for its result.

        Raises `SandboxError` (or a subclass) with the server's code and
        message when the server answers with an error, `ServerClosed` when
        the server goes away first, and `TimeoutError` when `timeout`
        (seconds) passes first.
        """
        request_id = next(self._ids)
        pending = _Pending()
        with self._lock:
            if self._gone is not None:
                raise self._gone
            self._pending[request_id] = pending
        message = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params:
            message["params"] = params
        try:
            self._send(message)
        except BaseException:
            with self._lock:
                self._pending.pop(request_id, None)
            raise
        if not pending.done.wait(timeout):
            with self._lock:
                self._pending.pop(request_id, None)
            raise TimeoutError("no answer to %s within %s s" % (method, timeout))
        response = pending.response
        if response is None:  # the reader ended
            raise self._gone or ServerClosed(None, "closed", "the server went away")
        if "error" in response:
            raise SandboxError.from_response(response["error"])
        return response.get("result")

    def close(self) -> None:
        """End the connection; a server this client started destroys every
        sandbox and exits, and close() waits for it. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._finalizer.detach()
        self._transport.close(self._close_timeout)
        self._reader.join(self._close_timeout)
        self._fail_all(ServerClosed(None, "closed", "the client was closed"))

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- internals --------------------------------------------------------

    def _register(self, sandbox_id: str, route: _Route) -> None:
        with self._lock:
            self._routes[sandbox_id] = route

    def _unregister(self, sandbox_id: str) -> None:
        with self._lock:
            self._routes.pop(sandbox_id, None)

    def _send(self, message: dict) -> None:
        line = json.dumps(message, ensure_ascii=False, separators=(",", ":")) + "\n"
        with self._write_lock:
            if self._gone is not None:
                raise self._gone
            try:
                self._transport.send(line)
            except (OSError, ValueError) as e:  # a closed pipe or file
                raise ServerClosed(None, "closed", "cannot write to the server: %s" % e) from e

    def _fail_all(self, error: ServerClosed) -> None:
        with self._lock:
            if self._gone is None:
                self._gone = error
            pending, self._pending = self._pending, {}
        for p in pending.values():
            p.done.set()

    def _read(self) -> None:
        try:
            for line in self._transport.lines():
                if not line.strip():
                    continue
                try:
                    message = json.loads(line)
                except ValueError:
                    continue  # not ours to understand; the server only writes JSON here
                if isinstance(message, dict):
                    try:
                        self._dispatch(message)
                    except Exception:  # a malformed message must not stop the reader
                        pass
        except (OSError, ValueError):
            pass
        detail = self._transport.describe_exit() if not self._closed else "the client was closed"
        self._fail_all(ServerClosed(None, "closed", detail or "the server went away"))

    def _dispatch(self, message: dict) -> None:
        method = message.get("method")
        if method is None:
            with self._lock:
                pending = self._pending.pop(message.get("id"), None)
            if pending is not None:
                pending.response = message
                pending.done.set()
            return
        params = message.get("params") or {}
        if "id" in message:  # a bridge request: answer it on its own thread
            threading.Thread(
                target=self._answer, args=(message["id"], method, params), name="rlm-sandbox-bridge", daemon=True
            ).start()
            return
        if method == "output":
            with self._lock:
                route = self._routes.get(params.get("sandbox"))
            if route is None:
                return
            callback = route.on_stderr if params.get("stream") == "stderr" else route.on_stdout
            if callback is not None:
                try:
                    callback(params.get("line", ""))
                except Exception:  # a failing callback must not stop the reader
                    pass
        elif method == "cancel_request":
            with self._lock:
                self._canceled_bridge.add(params.get("id"))

    def _answer(self, request_id: Any, method: str, params: dict) -> None:
        with self._lock:
            route = self._routes.get(params.get("sandbox"))
        try:
            if route is None:
                raise LookupError("no client-side handler for sandbox %r" % params.get("sandbox"))
            if method == "llm_query" and route.llm_query is not None:
                fn, args = route.llm_query, (params.get("prompt", ""),)
            elif method == "rlm_query" and route.rlm_query is not None:
                fn, args = route.rlm_query, (params.get("task", ""), params.get("context"))
            else:
                raise LookupError("this client does not answer %s" % method)
            ctx = route.context
            answer = ctx.copy().run(fn, *args) if ctx is not None else fn(*args)
            if not isinstance(answer, str):
                raise TypeError("the %s callback returned %s, not str" % (method, type(answer).__name__))
            reply = {"jsonrpc": "2.0", "id": request_id, "result": answer}
        except BaseException as e:  # raised in the sandbox as BridgeError
            reply = {"jsonrpc": "2.0", "id": request_id, "error": {"code": 1, "message": "%s: %s" % (type(e).__name__, e)}}
        with self._lock:
            if request_id in self._canceled_bridge:
                self._canceled_bridge.discard(request_id)
                return  # the execution that asked is gone
        try:
            self._send(reply)
        except ServerClosed:
            pass


class Sandbox:
    """One sandbox: a Python interpreter (Pyodide) in its own worker process.

    `Sandbox(...)` alone starts a private server (`Client`) for this
    sandbox and ends it on `close()`; `client.create(...)` (or
    `Sandbox(..., client=client)`) puts it in a shared server instead.

    Options (all optional):

    - `context`: the Python variable `context`: a str, or any JSON-like
      value (dict, list, number, bool, None).
    - `timeout`: seconds of Python time one `execute` may run (server
      default 30; 0: none). `wall_timeout`: the same, bridge waits included.
    - `memory_limit`: bytes the interpreter may use (server default 4 GiB).
    - `max_output`: characters of stdout/stderr an execution keeps.
    - `llm_query(prompt) -> str`, `rlm_query(task, context) -> str`:
      Python callables that answer the sandbox's `llm_query` /
      `rlm_query` (and their `_batched` forms, concurrently). A callback's
      exception is raised in the sandbox as `BridgeError`. Callbacks run
      on their own threads, in a copy of the `contextvars` context of the
      thread that called `execute` (so `dspy.context(...)` reaches them).
    - `on_stdout(line)`, `on_stderr(line)`: called with each line while the
      code runs (the full output is also in the `Result`).
    - `direct`, `index_url`: passed to `create` as they are.
    - `binary`, `client`: which server (see above).
    """

    def __init__(
        self,
        context: Any = "",
        *,
        timeout: float | None = None,
        wall_timeout: float | None = None,
        memory_limit: int | None = None,
        max_output: int | None = None,
        llm_query: LLMQuery | None = None,
        rlm_query: RLMQuery | None = None,
        on_stdout: OutputCallback | None = None,
        on_stderr: OutputCallback | None = None,
        direct: bool | None = None,
        index_url: str | list | None = None,
        binary: str | None = None,
        client: Client | None = None,
    ):
        self._owns_client = client is None
        self.client = client if client is not None else Client(binary)
        self._closed = False
        params: dict[str, Any] = {"context": context}
        if timeout is not None:
            params["timeout_ms"] = int(round(timeout * 1000))
        if wall_timeout is not None:
            params["wall_timeout_ms"] = int(round(wall_timeout * 1000))
        if memory_limit is not None:
            params["memory_limit"] = int(memory_limit)
        if max_output is not None:
            params["max_output"] = int(max_output)
        if direct is not None:
            params["direct"] = bool(direct)
        if index_url is not None:
            params["index_url"] = index_url
        bridges = [name for name, fn in (("llm_query", llm_query), ("rlm_query", rlm_query)) if fn is not None]
        if bridges:
            params["bridges"] = bridges
        if on_stdout is not None or on_stderr is not None:
            params["stream"] = True
        route = _Route(llm_query, rlm_query, on_stdout, on_stderr)
        try:
            # Bridge requests only come from an execute, sent after this
            # returns and the route is registered under the new id.
            info = self.client.call("create", **params)
        except BaseException:
            if self._owns_client:
                self.client.close()
            raise
        if not isinstance(info, dict) or "sandbox" not in info:
            raise ProtocolError(None, "protocol", "malformed create result: %r" % (info,))
        self.id: str = info["sandbox"]
        self.info: dict = info
        self.pid: int | None = info.get("pid")
        self.python_version: str | None = info.get("python_version")
        self._route = route
        self.client._register(self.id, route)

    @classmethod
    def create(cls, context: Any = "", **options: Any) -> "Sandbox":
        """The same as `Sandbox(context, **options)`."""
        return cls(context, **options)

    def execute(self, code: str, *, interactive: bool = False) -> Result:
        """Run `code`; return what it printed and raised as a `Result`.

        `interactive`: print the value of a trailing expression, as Python's
        prompt does. Raises `SandboxError` only when the sandbox cannot run
        code (dead, closed, server gone), never for the code's own errors,
        time limit or cancellation; but code that ignores the interrupt gets
        its worker killed, and that raises `SandboxDead` (`restart()` it).
        """
        params: dict[str, Any] = {"sandbox": self.id, "code": code}
        if interactive:
            params["interactive"] = True
        self._route.context = contextvars.copy_context()
        try:
            return Result.from_json(self.client.call("execute", **params))
        except KeyboardInterrupt:
            # Ctrl-C while waiting: stop the code too, not just the wait.
            try:
                self.cancel()
            except SandboxError:
                pass
            raise
        except SandboxError as e:
            execution = e.data.get("execution")
            if e.code in (TIMEOUT, CANCELED) and isinstance(execution, dict):
                if execution.get("error_type") is None:
                    # No KeyboardInterrupt came back: the code ignored it and
                    # the worker was killed, so the sandbox is dead.
                    raise SandboxDead(e.code, "dead", e.message, e.data) from None
                return Result.from_json(execution, canceled=e.code == CANCELED)
            raise

    def get_variable(self, name: str, default: Any = None) -> Any:
        """The value of global `name` as JSON-like data, or `default`."""
        r = self.client.call("get_variable", sandbox=self.id, name=name)
        return r.get("value") if r.get("found") else default

    def set_variable(self, name: str, value: Any) -> None:
        """Bind global `name` to `value` (any JSON-like value)."""
        self.client.call("set_variable", sandbox=self.id, name=name, value=value)

    def cancel(self) -> None:
        """Interrupt the code running now (it gets KeyboardInterrupt); safe
        to call from any thread, a no-op when nothing runs."""
        self.client.call("cancel", sandbox=self.id)

    def restart(self) -> None:
        """A fresh interpreter with the same options and `context`."""
        info = self.client.call("restart", sandbox=self.id)
        if isinstance(info, dict):
            self.pid = info.get("pid", self.pid)

    def stats(self) -> dict:
        """The server's `stats` for this sandbox (rss_bytes, executions, …)."""
        return self.client.call("stats", sandbox=self.id)

    def close(self) -> None:
        """Destroy the sandbox (and its private server, if it has one). Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._owns_client:
                self.client.close()  # the server destroys the sandbox on its way out
            else:
                try:
                    self.client.call("destroy", sandbox=self.id)
                except ServerClosed:
                    pass
        finally:
            self.client._unregister(self.id)

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return "<Sandbox %s pid=%s%s>" % (self.id, self.pid, " closed" if self._closed else "")
