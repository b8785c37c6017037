"""Client (one server) and Sandbox (one sandbox in it)."""

from __future__ import annotations

import contextvars
import decimal
import itertools
import json
import os
import threading
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Sequence

if TYPE_CHECKING:
    import ssl

from ._errors import CANCELED, TIMEOUT, UNAUTHORIZED, NoSuchSandbox, ProtocolError, SandboxDead, SandboxError, ServerClosed
from ._transport import SocketTransport, StdioTransport, Transport, tls_context

#: The protocol version of `rlm-sandbox serve` this client speaks.
PROTOCOL = 1

# How long a failed write waits for the reader to see why the server closed.
_LAST_WORD_WAIT = 2.0

# Messages up to this size are written by the calling thread; larger ones,
# from the main thread, by a thread of their own (see Client._send_data).
_DIRECT_WRITE = 4096

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
    __slots__ = ("done", "response", "late")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.response: dict | None = None
        # Called on the reader thread with the response of a request whose
        # caller is gone (a create interrupted by Ctrl-C).
        self.late: Callable[[dict], None] | None = None


class _Route:
    """What the client does with a sandbox's bridge requests and output."""

    __slots__ = ("llm_query", "rlm_query", "on_stdout", "on_stderr", "contexts")

    def __init__(self, llm_query, rlm_query, on_stdout, on_stderr):
        self.llm_query, self.rlm_query = llm_query, rlm_query
        self.on_stdout, self.on_stderr = on_stdout, on_stderr
        # The contextvars of the threads whose executes the server has
        # not answered yet, by request id, in the order they were sent:
        # the server runs one sandbox's requests in that order, so the
        # first is the running one, and its bridge callbacks run in a
        # copy of it (dspy.context(lm=...) and the like reach them,
        # although they run on other threads).
        self.contexts: dict[int, contextvars.Context] = {}


# Set on the threads that run a sandbox's bridge callbacks: which sandbox.
_bridge_thread = threading.local()


class _Undecodable(Exception):
    """A line from the server that is not JSON the client can read."""


def _big_int(text: str) -> int:
    # json.loads parses integers with int(), which refuses more than
    # sys.get_int_max_str_digits() digits; decimal has no such limit.
    return int(decimal.Decimal(text))


def _loads(line: bytes) -> Any:
    try:
        return json.loads(line)
    except ValueError as e:
        if "digits" not in str(e):
            raise _Undecodable(str(e)) from e
    try:  # an integer past int()'s digit limit (the server sends ints exactly)
        return json.loads(line, parse_int=lambda t: int(t) if len(t) < 4000 else _big_int(t))
    except ValueError as e:
        raise _Undecodable(str(e)) from e


def _int_text(n: int) -> str:
    try:
        return str(n)
    except ValueError:  # past the digit limit of int -> str
        return str(decimal.Decimal(n))


def _dumps_exact(value: Any, ensure_ascii: bool) -> str:
    """json.dumps for what it refuses: integers past the digit limit."""
    parts: list[str] = []

    def enc(v: Any) -> None:
        if isinstance(v, bool) or v is None or isinstance(v, (str, float)):
            parts.append(json.dumps(v, ensure_ascii=ensure_ascii, allow_nan=False))
        elif isinstance(v, int):
            parts.append(_int_text(v))
        elif isinstance(v, dict):
            parts.append("{")
            for i, (k, x) in enumerate(v.items()):
                if not isinstance(k, str):
                    if isinstance(k, bool) or k is None or isinstance(k, float):
                        k = json.dumps(k, allow_nan=False)
                    elif isinstance(k, int):
                        k = _int_text(k)
                    else:
                        raise TypeError("keys must be str, int, float, bool or None, not %s" % type(k).__name__)
                parts.append(("," if i else "") + json.dumps(k, ensure_ascii=ensure_ascii) + ":")
                enc(x)
            parts.append("}")
        elif isinstance(v, (list, tuple)):
            parts.append("[")
            for i, x in enumerate(v):
                if i:
                    parts.append(",")
                enc(x)
            parts.append("]")
        else:
            raise TypeError("Object of type %s is not JSON serializable" % type(v).__name__)

    enc(value)
    return "".join(parts)


def _encode(message: dict) -> bytes:
    """One message as a line of UTF-8 JSON, or ValueError/TypeError for a
    value JSON cannot carry, before anything is written. A str with lone
    surrogates (not valid Unicode, e.g. from os.fsdecode) goes escaped,
    and the server reads each as U+FFFD."""
    for ensure_ascii in (False, True):
        try:
            text = json.dumps(message, ensure_ascii=ensure_ascii, allow_nan=False, separators=(",", ":"))
        except RecursionError:
            # Past about 1,000 levels json recurses out: the server takes
            # 200 (InvalidParams past that), but this is a value too.
            raise ValueError("cannot send %s: it is nested too deeply for JSON" % _what(message)) from None
        except ValueError as e:
            if "Out of range float" in str(e):
                raise ValueError("cannot send %s: NaN and infinity are not JSON numbers" % _what(message)) from None
            if "digits" not in str(e):
                raise
            text = _dumps_exact(message, ensure_ascii)
        try:
            return (text + "\n").encode("utf-8")
        except UnicodeEncodeError:
            continue  # lone surrogates: escape them
    raise AssertionError("unreachable: ASCII JSON always encodes")


def _milliseconds(seconds: float) -> int:
    """A time limit in whole milliseconds, as the server takes it. The
    server reads 0 as no limit: a positive limit that rounds to 0 is 1 ms,
    and an infinite one is 0."""
    if seconds != seconds:
        raise ValueError("a time limit cannot be NaN")
    if seconds == float("inf"):
        return 0
    ms = int(round(seconds * 1000))
    return 1 if ms == 0 and seconds > 0 else ms


def _what(message: dict) -> str:
    params = message.get("params")
    if isinstance(params, dict) and "name" in params:
        return "variable %r" % params["name"]
    if "method" in message:
        return "the %s request's parameters" % message["method"]
    return "the answer"


def _shutdown_transport(transport: Transport) -> None:
    # A Client dropped without close(): end its server (no process outlives it).
    transport.kill()


def _describe(e: BaseException) -> str:
    """"Type: message" of a callback's exception, whatever its __str__
    does (one that raised killed the thread answering the sandbox, which
    then waited for ever)."""
    name = getattr(type(e), "__name__", "exception")
    try:
        return "%s: %s" % (name, e)
    except BaseException:
        return "%s: <str() of the exception failed>" % name


def _read_lines(client_ref: "weakref.ref[Client]", transport: Transport) -> None:
    # The reader thread holds the client only while it handles a line, so
    # that a client dropped without close() is collected (and its
    # finalizer ends the server) while the reader waits for the next one.
    try:
        for line in transport.lines():
            client = client_ref()
            if client is None:
                return
            if not client._line(line):
                return
            del client
    except BaseException:  # OSError, ValueError; anything else ends the reading too
        pass
    client = client_ref()
    if client is not None:
        client._reader_ended()


def _destroy_dropped(client_ref: "weakref.ref[Client]", sandbox_id: str) -> None:
    # A Sandbox of a shared Client dropped without close(): destroy it in
    # the server. Garbage collection may run this on any thread, holding
    # any lock, so the work is done on a thread of its own.
    client = client_ref()
    if client is not None:
        threading.Thread(target=client._drop_sandbox, args=(sandbox_id,), name="rlm-sandbox-drop", daemon=True).start()


class Client:
    """One `rlm-sandbox serve` server; it holds any number of sandboxes.

    With no `address`, the client starts `rlm-sandbox serve --stdio` (the
    binary from `binary`, `$RLM_SANDBOX` or `$PATH`) and owns it: `close()`
    ends it and every sandbox in it. With `address` (`unix:PATH` or
    `HOST:PORT`) it connects to a `serve --listen` server instead,
    authenticating with `token`.

    `tls` connects over TLS (a server with `--tls-cert`): True checks the
    server's certificate against the system's CA store and its host name
    against `address`'s; a path (str or os.PathLike) names a CA file (PEM)
    to check it against instead; an `ssl.SSLContext` is used as it is (a
    client certificate for `--client-ca` with `load_cert_chain`, ...). A
    certificate or handshake failure raises `SandboxError` (kind
    `tls_failed`).

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
        tls: bool | str | os.PathLike | ssl.SSLContext | None = None,
        args: Sequence[str] = (),
        env: dict | None = None,
        close_timeout: float = 10.0,
    ):
        if address is None and tls not in (None, False):
            raise ValueError("tls= is for a server at an address=; the server a Client starts is reached over a pipe")
        context = tls_context(tls) if address is not None else None
        self._ids = itertools.count(1)
        self._write_lock = threading.Lock()
        self._lock = threading.Lock()
        self._pending: dict[int, _Pending] = {}
        self._routes: dict[str, _Route] = {}
        self._exec_routes: dict[int, _Route] = {}  # executes not answered yet
        self._answering: set[Any] = set()  # bridge requests being answered
        self._canceled_bridge: set[Any] = set()  # ... of which the server canceled these
        self._closed = False
        self._gone: ServerClosed | None = None
        self._close_timeout = close_timeout
        if address is not None:
            self._transport: Transport = SocketTransport(address, tls=context)
        else:
            self._transport = StdioTransport(binary, args, env)
        self._finalizer = weakref.finalize(self, _shutdown_transport, self._transport)
        self._reader = threading.Thread(
            target=_read_lines, args=(weakref.ref(self), self._transport), name="rlm-sandbox-reader", daemon=True
        )
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
        the server goes away first, `TimeoutError` when `timeout`
        (seconds) passes first, and `ValueError`/`TypeError`, before
        sending anything, for a parameter JSON cannot carry (NaN, bytes).
        """
        return self._call(method, params, timeout)

    def _call(
        self,
        method: str,
        params: dict,
        timeout: float | None = None,
        route: _Route | None = None,
        sending: Callable[[], None] | None = None,
    ) -> Any:
        """call, for a sandbox: route takes its callbacks' answers, and
        sending is called under the write lock just before the request is
        written (an exception from it leaves the request unsent), so a
        request written after it returns reaches the server after this
        one."""
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params:
            message["params"] = params
        if threading.current_thread() is self._reader:
            # An on_stdout/on_stderr callback runs on the thread that reads
            # the server's answers: waiting here for one would wait forever.
            if method == "cancel":
                # Sent as a notification: nothing to wait for (the server
                # carries out a request without an id, and answers none).
                self._send(message)
                return None
            self._not_on_reader(method)
        request_id = next(self._ids)
        message["id"] = request_id
        data = _encode(message)  # refuses what JSON cannot carry before anything is sent
        pending = _Pending()
        with self._lock:
            if self._gone is not None:
                raise self._gone
            self._pending[request_id] = pending
        before = sending
        if route is not None:
            ctx = contextvars.copy_context()

            def before() -> None:  # under the write lock: in the order the server sees
                if sending is not None:
                    sending()
                with self._lock:
                    route.contexts[request_id] = ctx
                    self._exec_routes[request_id] = route

        try:
            self._send_data(data, before)
        except KeyboardInterrupt:  # after the whole request was written
            self._abandon(method, request_id, pending)
            raise
        except BaseException:
            with self._lock:
                self._pending.pop(request_id, None)
            raise
        try:
            answered = pending.done.wait(timeout)
        except BaseException:  # Ctrl-C while waiting
            self._abandon(method, request_id, pending)
            raise
        if not answered:
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
        self._not_on_reader("close")
        with self._lock:
            if self._closed:
                return
            self._closed = True
            sandboxes = list(self._routes)
        self._finalizer.detach()
        # Ended at once, rather than after the code they run: closing
        # stdin lets the server finish what it has read first.
        for sandbox_id in sandboxes:
            self._notify_destroy(sandbox_id)
        self._transport.close(self._close_timeout)
        self._reader.join(self._close_timeout)
        self._fail_all(ServerClosed(None, "closed", "the client was closed"))

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- internals --------------------------------------------------------

    def _not_on_reader(self, method: str) -> None:
        """Refuses a call that would wait for the reader thread when made
        on it (from an on_stdout/on_stderr callback)."""
        if threading.current_thread() is self._reader:
            raise SandboxError(
                None,
                "deadlock",
                "%s called from an on_stdout/on_stderr callback, which runs on the client's reader thread, "
                "would wait forever for an answer only that thread reads; cancel() works there, "
                "anything else must be handed to another thread" % method,
            )

    def _register(self, sandbox_id: str, route: _Route) -> None:
        with self._lock:
            self._routes[sandbox_id] = route

    def _unregister(self, sandbox_id: str) -> None:
        with self._lock:
            self._routes.pop(sandbox_id, None)

    def _send(self, message: dict) -> None:
        self._send_data(_encode(message))

    def _abandon(self, method: str, request_id: int, pending: _Pending) -> None:
        """Forget a request the caller no longer waits for. The server may
        still carry it out: a sandbox it creates is destroyed as soon as
        the answer says which, rather than left without a handle."""
        with self._lock:
            if method != "create" or self._gone is not None or pending.done.is_set():
                self._pending.pop(request_id, None)
                response = pending.response if method == "create" else None
            else:
                response = None
                pending.late = self._destroy_created
        if response is not None:
            self._destroy_created(response)

    def _destroy_created(self, response: dict) -> None:
        result = response.get("result")
        if isinstance(result, dict) and isinstance(result.get("sandbox"), str):
            self._notify_destroy(result["sandbox"])

    def _send_data(self, data: bytes, before: Callable[[], None] | None = None) -> None:
        """Write one encoded message. On the main thread, a large one is
        written by a thread of its own, so that a KeyboardInterrupt
        (only the main thread gets one) cannot cut a line in two and
        leave the stream unreadable: the write completes, and the
        interrupt reaches the caller (who may then cancel)."""
        if len(data) <= _DIRECT_WRITE or threading.current_thread() is not threading.main_thread():
            self._write(data, before)
            return
        done = threading.Event()
        failure: list[BaseException] = []

        def write() -> None:
            try:
                self._write(data, before)
            except BaseException as e:  # handed to the caller
                failure.append(e)
            finally:
                done.set()

        threading.Thread(target=write, name="rlm-sandbox-writer", daemon=True).start()
        interrupted: BaseException | None = None
        while True:
            try:
                done.wait()
                break
            except BaseException as e:  # Ctrl-C: raised once the message is whole
                interrupted = e
        if failure:
            raise failure[0]
        if interrupted is not None:
            raise interrupted

    def _write(self, data: bytes, before: Callable[[], None] | None = None) -> None:
        with self._write_lock:
            if self._gone is not None:
                raise self._gone
            if before is not None:
                before()
            try:
                self._transport.send(data)
                return
            except (OSError, ValueError) as e:  # a closed pipe or file
                failure = e
        # The server may have closed the connection with a last word the
        # reader has not handled yet (a line over 64 KiB before
        # authenticate is answered unauthorized as soon as it passes that,
        # and the connection closed while the rest is being written): that
        # says why, the broken pipe does not. The reader sees the end of the
        # stream right after it; wait for it briefly (not holding the
        # write lock, which a callback on the reader thread may want).
        if not self._closed and threading.current_thread() is not self._reader:
            self._reader.join(_LAST_WORD_WAIT)
        gone = self._gone
        if gone is not None and gone.kind not in (None, "closed"):
            raise gone from failure
        # Else say what the transport knows (a socket closed before the
        # server sent anything is likely a TLS server).
        detail = self._transport.describe_exit()
        text = "cannot write to the server: %s" % failure
        raise ServerClosed(None, "closed", text + (" (%s)" % detail if detail else "")) from failure

    def _notify_destroy(self, sandbox_id: str) -> None:
        """Sends destroy without waiting for the answer."""
        message = {"jsonrpc": "2.0", "id": next(self._ids), "method": "destroy", "params": {"sandbox": sandbox_id}}
        try:
            self._write(_encode(message))
        except SandboxError:
            pass

    def _drop_sandbox(self, sandbox_id: str) -> None:
        self._unregister(sandbox_id)
        if not self._closed:
            self._notify_destroy(sandbox_id)

    def _fail_all(self, error: SandboxError) -> None:
        with self._lock:
            if self._gone is None:
                self._gone = error
            pending, self._pending = self._pending, {}
            self._exec_routes.clear()
            for route in self._routes.values():
                route.contexts.clear()
        for p in pending.values():
            p.done.set()

    def _broken(self, error: SandboxError) -> None:
        """The stream cannot be trusted any more: fail every request, now
        and later, with error, and end the connection (and the server,
        when this client started it)."""
        self._fail_all(error)
        self._finalizer.detach()
        self._transport.kill()

    def _line(self, line: bytes) -> bool:
        """Handles one line from the server; False ends the reading."""
        if not line.strip():
            return True
        try:
            message = _loads(line)
        except _Undecodable as e:
            self._broken(ProtocolError(None, "protocol", "the server sent a line that is not JSON (%s): %r" % (e, line[:200])))
            return False
        if not isinstance(message, dict):
            self._broken(ProtocolError(None, "protocol", "the server sent JSON that is not a message: %r" % line[:200]))
            return False
        if message.get("method") is None and message.get("id") is None and "error" in message:
            # An error the server could not tie to a request: a line it
            # could not read (the stream is broken), or a refused
            # connection (busy): no request can be answered any more.
            self._broken(SandboxError.from_response(message["error"]))
            return False
        try:
            self._dispatch(message)
        except BaseException:  # a malformed message, or a callback's SystemExit, must not stop the reader
            pass
        return True

    def _reader_ended(self) -> None:
        detail = self._transport.describe_exit() if not self._closed else "the client was closed"
        self._fail_all(ServerClosed(None, "closed", detail or "the server went away"))

    def _dispatch(self, message: dict) -> None:
        method = message.get("method")
        if method is None:
            with self._lock:
                pending = self._pending.pop(message.get("id"), None)
                route = self._exec_routes.pop(message.get("id"), None)
                if route is not None:
                    route.contexts.pop(message.get("id"), None)
            error = message.get("error")
            if isinstance(error, dict) and error.get("code") == UNAUTHORIZED:
                # The server closes the connection after it: every later
                # call raises the same, not ServerClosed.
                with self._lock:
                    if self._gone is None:
                        self._gone = SandboxError.from_response(error)
            if pending is not None:
                pending.response = message
                pending.done.set()
                if pending.late is not None:
                    pending.late(message)
            return
        params = message.get("params") or {}
        if "id" in message:  # a bridge request: answer it on its own thread
            with self._lock:
                self._answering.add(message["id"])
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
                except BaseException:  # a failing callback (sys.exit() too) must not stop the reader
                    pass
        elif method == "cancel_request":
            with self._lock:
                if params.get("id") in self._answering:  # else answered already
                    self._canceled_bridge.add(params.get("id"))

    def _answer(self, request_id: Any, method: str, params: dict) -> None:
        sandbox_id = params.get("sandbox")
        _bridge_thread.key = (self, sandbox_id)
        with self._lock:
            route = self._routes.get(sandbox_id)
            ctx = next(iter(route.contexts.values()), None) if route is not None else None
        try:
            if route is None:
                raise LookupError("no client-side handler for sandbox %r" % params.get("sandbox"))
            if method == "llm_query" and route.llm_query is not None:
                fn, args = route.llm_query, (params.get("prompt", ""),)
            elif method == "rlm_query" and route.rlm_query is not None:
                fn, args = route.rlm_query, (params.get("task", ""), params.get("context"))
            else:
                raise LookupError("this client does not answer %s" % method)
            answer = ctx.copy().run(fn, *args) if ctx is not None else fn(*args)
            if not isinstance(answer, str):
                raise TypeError("the %s callback returned %s, not str" % (method, type(answer).__name__))
            reply = {"jsonrpc": "2.0", "id": request_id, "result": answer}
        except BaseException as e:  # raised in the sandbox as BridgeError
            reply = {"jsonrpc": "2.0", "id": request_id, "error": {"code": 1, "message": _describe(e)}}
        with self._lock:
            self._answering.discard(request_id)
            if request_id in self._canceled_bridge:
                self._canceled_bridge.discard(request_id)
                return  # the execution that asked is gone
        try:
            self._send(reply)
        except ServerClosed:
            pass
        except (ValueError, TypeError) as e:  # never leave the sandbox waiting
            error = {"code": 1, "message": "the %s answer could not be sent: %s" % (method, e)}
            try:
                self._send({"jsonrpc": "2.0", "id": request_id, "error": error})
            except SandboxError:
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
      code runs (the full output is also in the `Result`), on the thread
      that reads the server's answers: keep them quick. `cancel()` may be
      called from them (to stop code whose output says it should stop);
      any other call of the client raises `SandboxError` (kind
      "deadlock"): hand that work to another thread.
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
            params["timeout_ms"] = _milliseconds(timeout)
        if wall_timeout is not None:
            params["wall_timeout_ms"] = _milliseconds(wall_timeout)
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
        self._take_info(info)
        self._route = route
        self.client._register(self.id, route)
        if not self._owns_client:
            # Dropped without close(): destroyed in the server (a private
            # server ends with its Client, which only this object holds).
            self._finalizer = weakref.finalize(self, _destroy_dropped, weakref.ref(self.client), self.id)
            self._finalizer.atexit = False

    @classmethod
    def create(cls, context: Any = "", **options: Any) -> "Sandbox":
        """The same as `Sandbox(context, **options)`."""
        return cls(context, **options)

    def execute(self, code: str, *, interactive: bool = False, _sending: Callable[[], None] | None = None) -> Result:
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
        self._not_from_own_callback("execute")
        try:
            return Result.from_json(self.client._call("execute", params, route=self._route, sending=_sending))
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
                dead = e.data.get("sandbox_dead")
                if dead is None:
                    # A server that does not say: no KeyboardInterrupt came
                    # back, so the code ignored it and was killed.
                    dead = execution.get("error_type") is None
                if dead:
                    raise SandboxDead(e.code, "dead", e.message, e.data) from None
                return Result.from_json(execution, canceled=e.code == CANCELED)
            raise

    def get_variable(self, name: str, default: Any = None) -> Any:
        """The value of global `name` as JSON-like data, or `default`."""
        self._not_from_own_callback("get_variable")
        r = self.client.call("get_variable", sandbox=self.id, name=name)
        return r.get("value") if r.get("found") else default

    def set_variable(self, name: str, value: Any) -> None:
        """Bind global `name` to `value` (any JSON-like value; ValueError
        for NaN or infinity, which JSON has no numbers for)."""
        self._not_from_own_callback("set_variable")
        self.client.call("set_variable", sandbox=self.id, name=name, value=value)

    def _not_from_own_callback(self, method: str) -> None:
        # The server serves one sandbox's requests in order: asked from a
        # callback of this sandbox's running code, this one would wait for
        # that code, which waits for the callback.
        if getattr(_bridge_thread, "key", None) == (self.client, self.id):
            raise SandboxError(
                None,
                "deadlock",
                "%s called from an llm_query/rlm_query callback of the same sandbox would wait forever "
                "for the execution that waits for the callback; use another sandbox" % method,
            )

    def cancel(self) -> None:
        """Interrupt the code running now (it gets KeyboardInterrupt); safe
        to call from any thread, an output callback's included, a no-op
        when nothing runs."""
        self.client.call("cancel", sandbox=self.id)

    def restart(self) -> None:
        """A fresh interpreter with the same options and `context`."""
        self._not_from_own_callback("restart")
        info = self.client.call("restart", sandbox=self.id)
        if isinstance(info, dict):
            # What create said, as the new interpreter says it.
            self._take_info({**self.info, **info})

    def _take_info(self, info: dict) -> None:
        """Keeps what create (or restart) said of the interpreter."""
        self.info: dict = info
        self.pid: int | None = info.get("pid")
        self.python_version: str | None = info.get("python_version")

    def stats(self) -> dict:
        """The server's `stats` for this sandbox (rss_bytes, executions, …),
        answered at once, even while the sandbox runs code."""
        return self.client.call("stats", sandbox=self.id)

    def close(self) -> None:
        """Destroy the sandbox (and its private server, if it has one). Idempotent."""
        if self._closed:
            return
        self.client._not_on_reader("close")
        self._closed = True
        finalizer = getattr(self, "_finalizer", None)
        if finalizer is not None:
            finalizer.detach()
        try:
            if self._owns_client:
                self.client.close()  # destroys the sandbox at once, then ends the server
            else:
                try:
                    self.client.call("destroy", sandbox=self.id)
                except (ServerClosed, NoSuchSandbox):
                    pass  # gone already
                except SandboxError:
                    if self.client._gone is None:
                        raise
                    # The connection ended (the server closed it with an
                    # error): the server destroyed its sandboxes then.
        finally:
            self.client._unregister(self.id)

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return "<Sandbox %s pid=%s%s>" % (self.id, self.pid, " closed" if self._closed else "")
