"""rlm-sandbox as the code interpreter of DSPy's `dspy.RLM`.

`RLMSandboxInterpreter` satisfies DSPy's `CodeInterpreter` protocol
(`dspy/primitives/code_interpreter.py`) as DSPy 3.4.1 defines it, the
version this module follows, and is used the way `dspy.RLM` uses its
default `PythonInterpreter`:

    import dspy
    from rlm_sandbox.dspy import RLMSandboxInterpreter

    rlm = dspy.RLM("context, query -> answer", interpreter_factory=RLMSandboxInterpreter)

DSPy is imported only when an interpreter first needs DSPy's own types
(`FinalOutput`, `CodeExecutionError`, `CodeInterpreterError`); without DSPy
installed, stand-ins with the same names are used, so this module imports
and runs without it.

How the pieces of the protocol map onto rlm-sandbox:

- `tools`: a mutable dict of host callables, which `dspy.RLM` updates
  (with `llm_query`, `llm_query_batched`, the user's tools and the
  `dspy` facade's `__dspy_construct__`/`__dspy_call__`) and then marks
  for re-registration (`_tools_registered = False`). The sandbox's own
  `llm_query`/`llm_query_batched` are answered by `tools["llm_query"]`
  (the batched form concurrently, one thread per prompt). A tool named
  `chunk_text`, `search_context` or `rlm_query_batched` (built-ins of the
  sandbox, bound again before each execution) is refused with
  `CodeInterpreterError`. Every other
  tool becomes a function of that name in the sandbox whose calls travel
  to the host over the `rlm_query` bridge (JSON arguments, JSON result);
  a tool's exception is raised in the sandbox as `RuntimeError`, as
  DSPy's default interpreter does.
- `output_fields`: `SUBMIT(...)` takes these fields (or one `output`
  argument without them) and ends the execution; `execute` then returns
  `FinalOutput({...})`.
- `execute(code, variables)`: the variables are bound as globals before
  the code runs (every call, as DSPy re-injects them); returns the
  printed output (stdout, then stderr) as a str, with the value of a
  trailing expression shown as the Python prompt would; raises
  `SyntaxError` for code that does not compile, `CodeExecutionError` for
  an exception in the code (its message: the output printed before it
  and the traceback), for the time limit and for `cancel()`, and
  `CodeInterpreterError` when the sandbox itself fails (which ends the
  session, as the protocol asks).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import keyword
import threading
from typing import Any, Callable

from ._client import Client, Result, Sandbox
from ._errors import InvalidParams, SandboxError

#: The DSPy release whose CodeInterpreter protocol and dspy.RLM call sequence this follows.
DSPY_VERSION = "3.4.1"

# Tool calls travel over rlm_query with a task that starts with this marker.
_TOOL_MARKER = "\x00rlm_sandbox.tool:"
# The sandbox's own RLM helpers (rebound before each execution): tools of
# these names are answered natively, never wrapped.
_NATIVE = frozenset({"llm_query", "llm_query_batched", "rlm_query", "rlm_query_batched", "chunk_text", "search_context"})
# Built-ins of the sandbox no tool can replace: they are bound again before
# each execution. (A tool named rlm_query answers the sandbox's own.)
_TAKEN = frozenset({"chunk_text", "search_context", "rlm_query_batched"})
_FINAL_VAR = "_rlm_sandbox_final"
_JSON_VAR = "_rlm_sandbox_value"
# Large str variables the sandbox keeps, so that re-binding them (DSPy
# does before every execution) does not send them again.
_KEEP_VAR = "_rlm_sandbox_kept"
_KEEP_MIN = 64 << 10
_FINAL_EXC = "_RLMSandboxFinal"

_SETUP = '''
import json as _rlm_sandbox_json
import rlm as _rlm_sandbox_rlm

%(keep)s = globals().get(%(keep)r, {})

class _RLMSandboxFinal(BaseException):
    """Raised by SUBMIT: ends the execution with the final answer."""

def _rlm_sandbox_tool(_name, _args, _kwargs):
    try:
        _r = _rlm_sandbox_rlm.rlm_query(%(marker)r + _name, {"args": list(_args), "kwargs": dict(_kwargs)})
    except _rlm_sandbox_rlm.BridgeError as _e:
        raise RuntimeError(str(_e)) from None
    return _rlm_sandbox_json.loads(_r)

def _rlm_sandbox_make_tool(_name, _doc):
    def _tool(*args, **kwargs):
        return _rlm_sandbox_tool(_name, args, kwargs)
    _tool.__name__ = _tool.__qualname__ = _name
    _tool.__doc__ = _doc
    return _tool
'''


def _dspy_types():
    """DSPy's FinalOutput, CodeExecutionError and CodeInterpreterError, or
    stand-ins with the same names when DSPy is not installed."""
    global _TYPES
    if _TYPES is None:
        try:
            from dspy.primitives.code_interpreter import CodeExecutionError, CodeInterpreterError, FinalOutput
        except ImportError:
            CodeExecutionError, CodeInterpreterError, FinalOutput = _StandInExecutionError, _StandInInterpreterError, _StandInFinalOutput
        _TYPES = (FinalOutput, CodeExecutionError, CodeInterpreterError)
    return _TYPES


_TYPES = None


class _StandInInterpreterError(RuntimeError):
    pass


_StandInInterpreterError.__name__ = _StandInInterpreterError.__qualname__ = "CodeInterpreterError"


class _StandInExecutionError(_StandInInterpreterError):
    pass


_StandInExecutionError.__name__ = _StandInExecutionError.__qualname__ = "CodeExecutionError"


class _StandInFinalOutput:
    def __init__(self, output: Any):
        self.output = output

    def __repr__(self) -> str:
        return "FinalOutput(%r)" % (self.output,)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _StandInFinalOutput) and other.output == self.output


_StandInFinalOutput.__name__ = _StandInFinalOutput.__qualname__ = "FinalOutput"


def _jsonable(value: Any) -> Any:
    """A JSON-ready copy of value, as DSPy's default interpreter converts
    variables: pydantic models dumped, tuples and sets as lists."""
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if hasattr(value, "model_dump") and callable(value.model_dump):
        return _jsonable(value.model_dump(mode="json"))
    if isinstance(value, dict):
        return {str(k) if not isinstance(k, str) else k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (set, frozenset)):
        items = [_jsonable(v) for v in value]
        try:
            return sorted(items)
        except TypeError:
            return items
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "replace")
    return str(value)


def _call_tool(fn: Callable, args: list, kwargs: dict) -> Any:
    """Call a DSPy tool with what the sandbox passed. DSPy's tools take
    keyword arguments (RLM's wrappers are `invoke(**kwargs)` carrying the
    real signature), so positional arguments are bound to their names."""
    if args:
        sig = inspect.signature(fn)
        bound = sig.bind(*args, **kwargs)
        kinds = {p.name: p.kind for p in sig.parameters.values()}
        if inspect.Parameter.VAR_POSITIONAL in (kinds.get(n) for n in bound.arguments):
            result = fn(*bound.args, **bound.kwargs)
        else:
            flat: dict[str, Any] = {}
            for name, value in bound.arguments.items():
                if kinds.get(name) == inspect.Parameter.VAR_KEYWORD:
                    flat.update(value)
                else:
                    flat[name] = value
            result = fn(**flat)
    else:
        result = fn(**kwargs)
    if inspect.isawaitable(result):
        result = asyncio.run(_await(result))
    return result


async def _await(awaitable: Any) -> Any:
    return await awaitable


class _CanceledBeforeSent(Exception):
    """cancel() came before execute sent the code: it is not sent."""


class RLMSandboxInterpreter:
    """A DSPy `CodeInterpreter` backed by an rlm-sandbox sandbox.

    Pass the class (a zero-argument factory) as `dspy.RLM`'s
    `interpreter_factory`, or `RLMSandboxInterpreter.factory(timeout=60)`
    to set options. One instance is one sandbox (its own
    worker process; by default in a private `rlm-sandbox serve`, or in
    `client=` to share one server).

    Args:
        tools: host callables callable by name from the sandbox's code
            (DSPy's convention: keyword arguments; JSON-like results).
        output_fields: the `SUBMIT` signature, `[{"name": ..., "type": ...}]`.
        timeout: seconds of Python time one execute may take (server
            default 30).
        memory_limit: bytes the interpreter may use.
        binary: the rlm-sandbox binary (else `$RLM_SANDBOX`, else `$PATH`).
        client: a `Client` to create the sandbox in (shared server).
        **sandbox_options: other `Sandbox` options (`max_output`,
            `wall_timeout`, `on_stdout`, `index_url`, …).
    """

    execution_instructions = (
        "Python (CPython 3.14) runs in Pyodide/WebAssembly inside an rlm-sandbox worker process. "
        "State persists across executions. The standard library is available (re, json, collections, math, ...); "
        "there is no network, no subprocess and no host filesystem. Each execution has a time limit; "
        "code past it is interrupted with KeyboardInterrupt."
    )

    def __init__(
        self,
        tools: dict[str, Callable[..., Any]] | None = None,
        output_fields: list[dict] | None = None,
        *,
        timeout: float | None = None,
        memory_limit: int | None = None,
        binary: str | None = None,
        client: Client | None = None,
        **sandbox_options: Any,
    ):
        self.tools: dict[str, Callable[..., Any]] = dict(tools) if tools else {}
        self.output_fields = output_fields
        self._tools_registered = False
        self._registered: tuple | None = None
        self._options = dict(sandbox_options, timeout=timeout, memory_limit=memory_limit, binary=binary, client=client)
        self._sandbox: Sandbox | None = None
        self._sent: dict[str, str] = {}  # large str variables the sandbox keeps, by name
        self._ended = False
        self._lock = threading.Lock()
        # cancel() during an execute: before its code is sent (while tools
        # and variables are set up) it is remembered and the code never
        # runs; after, it goes to the sandbox, ordered after the code.
        self._executing = False  # an execute is under way
        self._code_sent = False  # its code is (being) written to the server
        self._cancel_asked = False  # a cancel came before the code was sent

    @classmethod
    def factory(cls, **options: Any) -> Callable[[], "RLMSandboxInterpreter"]:
        """A zero-argument factory for `dspy.RLM(interpreter_factory=...)`
        that makes interpreters with these options, and carries
        `execution_instructions` (which RLM puts in its prompt; a
        `functools.partial` would lose it)."""

        def make() -> "RLMSandboxInterpreter":
            return cls(**options)

        make.execution_instructions = cls.execution_instructions  # type: ignore[attr-defined]
        return make

    # -- the CodeInterpreter protocol ---------------------------------------

    def start(self) -> None:
        """Start the sandbox (idempotent). After shutdown, or after the
        sandbox failed, raises CodeInterpreterError: its state is gone."""
        _, _, CodeInterpreterError = _dspy_types()
        with self._lock:
            if self._ended:
                raise CodeInterpreterError(
                    "RLMSandboxInterpreter session has ended; create a new interpreter for a fresh session."
                )
            if self._sandbox is not None:
                return
            try:
                self._sandbox = Sandbox(llm_query=self._answer_llm_query, rlm_query=self._answer_rlm_query, **self._options)
            except (SandboxError, OSError) as e:
                self._ended = True
                raise CodeInterpreterError("could not start an rlm-sandbox sandbox: %s" % e) from e

    def execute(self, code: str, variables: dict[str, Any] | None = None) -> Any:
        """Run code with variables bound; see the module's doc for what it
        returns and raises."""
        FinalOutput, CodeExecutionError, CodeInterpreterError = _dspy_types()
        variables = variables or {}
        for name in variables:
            if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
                raise CodeInterpreterError("Invalid variable name: %r" % (name,))
        self.start()
        sb = self._sandbox
        with self._lock:
            self._executing, self._code_sent, self._cancel_asked = True, False, False
        try:
            self._register(sb)
            try:
                self._bind_all(sb, variables)
            except RecursionError:
                raise CodeInterpreterError(
                    "a variable is nested too deeply to pass to the sandbox (past what Python's recursion limit allows)"
                ) from None
            r = sb.execute(code, interactive=True, _sending=self._sending_code)
            if r.error_type == _FINAL_EXC:
                return FinalOutput(sb.get_variable(_FINAL_VAR))
        except _CanceledBeforeSent:
            raise CodeExecutionError("KeyboardInterrupt: the execution was canceled") from None
        except SandboxError as e:
            self._end()
            raise CodeInterpreterError("rlm-sandbox: %s" % e) from e
        finally:
            with self._lock:
                self._executing = self._code_sent = False
        if r.error is None:
            return r.stdout + r.stderr
        if r.error_type in ("SyntaxError", "IndentationError", "TabError"):
            raise SyntaxError("Invalid Python syntax. message: %s" % (r.traceback or r.error).strip())
        raise CodeExecutionError(self._describe_failure(r))

    def shutdown(self) -> None:
        """End the sandbox (and its private server). Idempotent."""
        self._end()

    # DSPy's default interpreter is also a context manager and a callable.
    def __enter__(self) -> "RLMSandboxInterpreter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.shutdown()

    def __call__(self, code: str, variables: dict[str, Any] | None = None) -> Any:
        return self.execute(code, variables)

    # -- beyond the protocol ------------------------------------------------

    @property
    def sandbox(self) -> Sandbox | None:
        """The sandbox behind this interpreter (None before start)."""
        return self._sandbox

    def cancel(self) -> None:
        """Interrupt the running execute from another thread (its state
        stays); execute then raises CodeExecutionError. A cancel that comes
        while execute still binds the variables and tools keeps the code
        from running; with no execute under way, it does nothing."""
        with self._lock:
            sb = self._sandbox
            if not self._executing or sb is None:
                return
            if not self._code_sent:
                self._cancel_asked = True
                return
        # Written after the code (see _sending_code): the server cancels
        # the executes it has received before the cancel.
        try:
            sb.cancel()
        except SandboxError:
            pass  # the sandbox or its server is gone: nothing runs

    def _sending_code(self) -> None:
        """Called just before the code's execute is written (under the
        client's write lock, so a cancel written after this is read after
        it)."""
        with self._lock:
            if self._cancel_asked:
                raise _CanceledBeforeSent()
            self._code_sent = True

    # -- internals ------------------------------------------------------------

    def _end(self) -> None:
        with self._lock:
            self._ended = True
            sb, self._sandbox = self._sandbox, None
        if sb is not None:
            try:
                sb.close()
            except SandboxError:
                pass  # the session is over either way; shutdown() does not fail

    def _describe_failure(self, r: Result) -> str:
        if r.timed_out:
            detail = "TimeoutError: the code ran past its time limit and was interrupted"
        elif r.canceled:
            detail = "KeyboardInterrupt: the execution was canceled"
        else:
            detail = (r.traceback or r.error or "").strip()
        printed = (r.stdout + r.stderr).rstrip("\n")
        return (printed + "\n" + detail) if printed else detail

    def _bind_all(self, sb: Sandbox, variables: dict[str, Any]) -> None:
        """Bind the variables, as DSPy re-injects them before every
        execution. A large str sent before with the same text is not sent
        again: the sandbox kept it (a str cannot change), and it is bound
        from there, so a 10 MB context costs one small execute per step,
        not a transfer."""
        kept, sent = [], []
        for name, value in variables.items():
            v = _jsonable(value)
            last = self._sent.get(name)
            if isinstance(v, str) and len(v) >= _KEEP_MIN:
                if last is not None and (last is v or last == v):
                    kept.append(name)
                    continue
                self._sent[name] = v
                sent.append(name)
            else:
                self._sent.pop(name, None)
            self._bind(sb, name, v)
        if not kept and not sent:
            return
        code = [_KEEP_VAR + ".update({%s})" % ", ".join("%r: %s" % (n, n) for n in sent)] if sent else []
        code += ["%s = %s[%r]" % (n, _KEEP_VAR, n) for n in kept]
        r = sb.execute("\n".join(code))
        if r.error is not None:  # the code took the kept values away: send them again
            for n in kept:
                self._bind(sb, n, _jsonable(variables[n]))
            self._sent.clear()

    def _bind(self, sb: Sandbox, name: str, value: Any) -> None:
        try:
            sb.set_variable(name, value)
        except (ValueError, InvalidParams):
            # NaN or infinity, which JSON has no numbers for (and DSPy's
            # interpreter passes on), or a value nested deeper than the
            # server takes (200 levels): sent as JSON text, which Python's
            # json reads back (float('nan') and float('inf') included).
            try:
                text = json.dumps(value, ensure_ascii=False)
            except ValueError as e:  # an int past Python's 4,300 digits, say
                _, _, CodeInterpreterError = _dspy_types()
                raise CodeInterpreterError("variable %s cannot be passed to the sandbox: %s" % (name, e)) from None
            sb.set_variable(_JSON_VAR, text)
            r = sb.execute("%s = _rlm_sandbox_json.loads(%s)\ndel %s" % (name, _JSON_VAR, _JSON_VAR))
            if r.error is not None:
                raise SandboxError(None, "setup", "binding variable %s failed: %s" % (name, r.error))

    def _register(self, sb: Sandbox) -> None:
        """Define the tool functions and SUBMIT in the sandbox when the
        tools or output fields changed (or RLM asked, through
        `_tools_registered = False`)."""
        wrapped = tuple(sorted(n for n in self.tools if n not in _NATIVE))
        fields = tuple((f["name"], f.get("type")) for f in (self.output_fields or []))
        key = (wrapped, fields)
        if self._tools_registered and self._registered == key:
            return
        taken = sorted(n for n in self.tools if n in _TAKEN)
        if taken:
            raise _dspy_types()[2](
                "Tool name %s conflicts with an rlm-sandbox built-in of the same name "
                "(bound again before each execution); rename the tool" % ", ".join(map(repr, taken))
            )
        lines = [_SETUP % {"marker": _TOOL_MARKER, "keep": _KEEP_VAR}]
        for name in wrapped:
            if not name.isidentifier() or keyword.iskeyword(name):
                raise _dspy_types()[2]("Invalid tool name: %r" % (name,))
            doc = inspect.getdoc(self.tools[name]) or ""
            lines.append("%s = _rlm_sandbox_make_tool(%r, %r)" % (name, name, doc))
        names = [n for n, _ in fields] or ["output"]
        for n in names:
            if not n.isidentifier() or keyword.iskeyword(n):
                raise _dspy_types()[2]("Invalid output field name: %r" % (n,))
        lines.append(
            "def SUBMIT(%s):\n    global %s\n    %s = {%s}\n    raise %s()"
            % (
                ", ".join(names),
                _FINAL_VAR,
                _FINAL_VAR,
                ", ".join("%r: %s" % (n, n) for n in names),
                _FINAL_EXC,
            )
        )
        r = sb.execute("\n".join(lines))
        if r.error is not None:
            raise SandboxError(None, "setup", "defining the tools in the sandbox failed: %s" % r.error)
        self._registered = key
        self._tools_registered = True

    def _answer_llm_query(self, prompt: str) -> str:
        fn = self.tools.get("llm_query")
        if fn is None:
            raise LookupError("llm_query is not available: no llm_query tool was given")
        answer = fn(prompt)
        return answer if isinstance(answer, str) else str(answer)

    def _answer_rlm_query(self, task: str, context: Any) -> str:
        if task.startswith(_TOOL_MARKER):
            name = task[len(_TOOL_MARKER):]
            fn = self.tools.get(name)
            if fn is None:
                raise LookupError("Unknown tool: %s" % name)
            ctx = context if isinstance(context, dict) else {}
            result = _call_tool(fn, list(ctx.get("args") or []), dict(ctx.get("kwargs") or {}))
            # DSPy's default interpreter hands a None result back as "".
            return json.dumps("" if result is None else _jsonable(result), ensure_ascii=False)
        fn = self.tools.get("rlm_query")
        if fn is None:
            raise LookupError("rlm_query is not available here; build a sub-agent with dspy.RLM(...) instead")
        answer = fn(task, context)
        return answer if isinstance(answer, str) else str(answer)
