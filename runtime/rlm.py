"""The RLM surface of rlm-sandbox.

Every sandbox binds these names in __main__ before each execution:

    llm_query(prompt) -> str
    llm_query_batched(prompts, return_exceptions=False) -> list
    rlm_query(task, ctx=<this sandbox's context>) -> str
    rlm_query_batched(tasks, ctx=<this sandbox's context>, return_exceptions=False) -> list
    chunk_text(text, size=10000, overlap=500) -> list[str]
    search_context(pattern, window=200, max_results=100) -> list[dict]
    BridgeError

`context` holds the input the host gave the sandbox.
"""

import sys as _sys
from marshal import loads as _loads
from os import read as _read, write as _write

_rlm = _sys.modules["_rlm"]

__all__ = [
    "BridgeError",
    "llm_query",
    "llm_query_batched",
    "rlm_query",
    "rlm_query_batched",
    "chunk_text",
    "search_context",
]


class BridgeError(Exception):
    """The host could not answer llm_query or rlm_query.

    Its message is the host's error, or says that the host set no callback
    for the call. In a batched call made with return_exceptions=True, the
    failed items are BridgeError instances whose `index` attribute is the
    item's position.
    """

    index = None


def _need_str(func, what, v):
    if not isinstance(v, str):
        raise TypeError(
            "%s() %s must be str, not %s" % (func, what, type(v).__name__)
        )


def _need_list(func, what, v, single):
    # A str is iterable, but as a list of prompts it would ask one per
    # character: the likely slip is the single call.
    if isinstance(v, (str, bytes, bytearray)):
        raise TypeError(
            "%s() %s must be a list of str, not %s (for one, call %s)"
            % (func, what, type(v).__name__, single)
        )


def _results(reply, return_exceptions):
    answered, replies = reply
    if answered:
        return replies
    out = []
    for i, r in enumerate(replies):
        if r[0] == 0:
            out.append(r[1])
            continue
        e = BridgeError(r[1])
        e.index = i
        if not return_exceptions:
            raise e
        out.append(e)
    return out


_bridge = _rlm.bridge


def _one(reply):
    answered, replies = reply
    if answered:
        return replies[0]
    raise BridgeError(replies[0][1])


def llm_query(prompt):
    """Ask the host's language model and return its answer.

    prompt is the complete prompt (a str). The call blocks until the host
    answers; the time spent waiting does not count against the
    execution's timeout. Raises BridgeError when the host's callback fails
    or the host set none.
    """
    if type(prompt) is not str or not prompt:
        # An empty write would not reach the device: "" takes the bridge.
        _need_str("llm_query", "prompt", prompt)
        return _one(_bridge("llm_query", [(prompt,)]))
    # The short path (runtime/bridge.go, llmDevice): the prompt's bytes
    # out, a status byte and the answer's bytes back.
    _write(_llm_fd, prompt.encode("utf-8", "surrogatepass"))
    r = _read(_llm_fd, 65536)
    if r[0] == 48:
        return r[1:].decode()
    return _llm_reply(r)


_llm_fd = _rlm.llm_fd


def _llm_reply(r):
    if r[0] == 76:  # 'L': a long reply, its length, then itself
        r = _rlm.framed(_llm_fd, r, 1)
    s = r[0]
    if s == 48:
        return str(r[1:], "utf-8")
    if s == 49:
        raise BridgeError(str(r[1:], "utf-8"))
    if s == 50:
        raise KeyboardInterrupt
    return _loads(memoryview(r)[1:])


def llm_query_batched(prompts, return_exceptions=False):
    """Ask the host's language model several prompts at once.

    The host answers them concurrently (up to its configured limit) and
    the answers come back in the order of prompts. When a prompt fails,
    BridgeError is raised for the first failed one, unless
    return_exceptions is true: then the list holds a BridgeError in place
    of each failed answer.
    """
    _need_list("llm_query_batched", "prompts", prompts, "llm_query(prompt)")
    prompts = list(prompts)
    for p in prompts:
        if not isinstance(p, str):
            _need_str("llm_query_batched", "prompts", p)
    if not prompts:
        return []
    # A str stands for the arguments (p,) (runtime/bridge.go).
    return _results(_rlm.bridge("llm_query", prompts), return_exceptions)


class _SandboxContext:
    # The default of rlm_query's ctx, so that an explicit None is a
    # context like any other value.
    __slots__ = ()

    def __repr__(self):
        return "<this sandbox's context>"


_SANDBOX_CONTEXT = _SandboxContext()


def _rlm_args(func, task, ctx):
    _need_str(func, "task", task)
    if ctx is _SANDBOX_CONTEXT:
        return (task,)  # the host sends the sandbox's context
    return (task, _rlm.plain(ctx))


def rlm_query(task, ctx=_SANDBOX_CONTEXT):
    """Hand a sub-task to a recursive RLM agent run by the host.

    task says what to do; ctx is the input the sub-agent works on (any
    str, list, dict or number, or None). When ctx is omitted the sub-agent
    gets this sandbox's context: the value the host set, even if `context`
    was rebound since. Returns the sub-agent's answer (a str). Raises
    BridgeError when the host's callback fails or the host set none.
    """
    return _one(_bridge("rlm_query", [_rlm_args("rlm_query", task, ctx)]))


def rlm_query_batched(tasks, ctx=_SANDBOX_CONTEXT, return_exceptions=False):
    """Run several rlm_query calls concurrently; answers in order.

    Each item of tasks is a task (str), which gets ctx (or this sandbox's
    context when ctx is omitted), or a (task, ctx) pair. Failures are
    handled as in llm_query_batched.
    """
    _need_list("rlm_query_batched", "tasks", tasks, "rlm_query(task, ctx)")
    calls = []
    for t in tasks:
        if isinstance(t, tuple) and len(t) == 2:
            calls.append(_rlm_args("rlm_query_batched", t[0], t[1]))
        else:
            calls.append(_rlm_args("rlm_query_batched", t, ctx))
    if not calls:
        return []
    return _results(_rlm.bridge("rlm_query", calls), return_exceptions)


def chunk_text(text, size=10000, overlap=None):
    """Split text into chunks of at most size characters.

    Each chunk starts size - overlap characters after the previous one, so
    consecutive chunks share overlap characters; the last chunk ends at the
    end of text. overlap defaults to 500, or to a tenth of size when size
    is 500 or less. An empty text gives an empty list. Raises ValueError
    when size <= 0, overlap < 0 or overlap >= size.
    """
    _need_str("chunk_text", "text", text)
    if overlap is None and isinstance(size, int) and not isinstance(size, bool):
        overlap = 500 if size > 500 else max(size, 0) // 10
    for name, v in (("size", size), ("overlap", overlap)):
        if not isinstance(v, int) or isinstance(v, bool):
            raise TypeError("chunk_text() %s must be int, not %s" % (name, type(v).__name__))
    if size <= 0:
        raise ValueError("chunk_text() size must be positive, got %d" % size)
    if overlap < 0:
        raise ValueError("chunk_text() overlap must not be negative, got %d" % overlap)
    if overlap >= size:
        raise ValueError(
            "chunk_text() overlap (%d) must be smaller than size (%d)" % (overlap, size)
        )
    chunks = []
    step = size - overlap
    start = 0
    while start < len(text):
        chunks.append(text[start : start + size])
        if start + size >= len(text):
            break
        start += step
    return chunks


MAX_PATTERN_LENGTH = 1000


def search_context(pattern, window=200, max_results=100):
    """Search the context for a regular expression, case-insensitively.

    Returns up to max_results matches, in order, each a dict with `match`
    (the matched text), `start` and `end` (its offsets in the context) and
    `context` (the match with up to window characters either side). The
    context searched is the value the host set (a context that is not a
    str is searched as its JSON text). Patterns longer than 1,000
    characters are rejected with ValueError; a pattern that takes too long
    is stopped by the execution's timeout like any other code.
    """
    import re

    _need_str("search_context", "pattern", pattern)
    if len(pattern) > MAX_PATTERN_LENGTH:
        raise ValueError(
            "search_context() pattern is %d characters long; the limit is %d"
            % (len(pattern), MAX_PATTERN_LENGTH)
        )
    for name, v in (("window", window), ("max_results", max_results)):
        if not isinstance(v, int) or isinstance(v, bool):
            raise TypeError("search_context() %s must be int, not %s" % (name, type(v).__name__))
        if v < 0:
            raise ValueError("search_context() %s must not be negative, got %d" % (name, v))
    text = _rlm.context_text()
    out = []
    if max_results == 0:
        return out
    for m in re.finditer(pattern, text, re.IGNORECASE):
        s, e = m.span()
        out.append(
            {
                "match": m.group(0),
                "start": s,
                "end": e,
                "context": text[max(0, s - window) : e + window],
            }
        )
        if len(out) >= max_results:
            break
    return out
