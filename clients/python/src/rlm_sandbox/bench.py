"""Round trips from Python: `python -m rlm_sandbox.bench [--n 200]`.

Measures, with rlm-sandbox (`Sandbox`, and `RLMSandboxInterpreter` as
dspy.RLM drives it):

- start: a new sandbox ready to run code (its server and worker started);
- execute: `execute("pass")`, Python to the sandbox and back;
- llm_query: an execute whose code makes one `llm_query` call, answered by
  a Python callable (so two round trips), and the cost of one more call
  inside an execute (100 calls in a loop);
- llm_query_batched: 8 prompts answered concurrently;
- an RLM step: `execute(code, variables={"context": 100 kB str, ...})`, what
  dspy.RLM does each iteration (the variables are sent again every time).

When DSPy and Deno are installed (`pip install dspy deno`), the same is
measured through DSPy's default interpreter, `dspy.PythonInterpreter`
(Deno + Pyodide). Its runner imports `readLines` from deno.land; with
`--deno-shim` (the default) that one import is mapped to a local
equivalent written here, for machines that cannot reach deno.land.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from typing import Callable

from ._client import Sandbox

_READLINES_SHIM = r"""
export async function* readLines(reader) {
  const decoder = new TextDecoder();
  const chunk = new Uint8Array(1 << 16);
  let buf = "";
  for (;;) {
    const n = await reader.read(chunk);
    if (n === null) break;
    buf += decoder.decode(chunk.subarray(0, n), { stream: true });
    let i;
    while ((i = buf.indexOf("\n")) >= 0) {
      let line = buf.slice(0, i);
      if (line.endsWith("\r")) line = line.slice(0, -1);
      buf = buf.slice(i + 1);
      yield line;
    }
  }
  buf += decoder.decode();
  if (buf.length > 0) yield buf;
}
"""
_DENO_STD_IO = "https://deno.land/std@0.186.0/io/mod.ts"


def _timed(fn: Callable[[], object], n: int) -> list[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def _row(name: str, samples: list[float], per: int = 1) -> str:
    ms = sorted(s * 1000 / per for s in samples)
    p90 = ms[min(len(ms) - 1, int(len(ms) * 0.9))]
    return "%-44s %10.3f %10.3f %6d" % (name, statistics.median(ms), p90, len(ms))


def _header(title: str) -> None:
    print("\n" + title)
    print("%-44s %10s %10s %6s" % ("", "median ms", "p90 ms", "n"))


def _check(ok: bool, what: str) -> None:
    if not ok:
        raise SystemExit("benchmark: unexpected result: " + what)


def _print_starts(start, stop, count: int) -> None:
    # Times start() and a first execute("pass"), count times; stop(x) ends
    # each one outside the timing.
    starts = []
    for _ in range(count):
        t = time.perf_counter()
        x = start()
        x.execute("pass")
        starts.append(time.perf_counter() - t)
        stop(x)
    print(_row("start + first execute", starts))


def bench_sandbox(n: int, binary: str | None) -> None:
    _header("rlm-sandbox: Sandbox (serve --stdio, one worker process)")
    _print_starts(lambda: Sandbox(binary=binary), lambda sb: sb.close(), max(3, n // 40))
    with Sandbox(binary=binary, llm_query=lambda p: "answer") as sb:
        sb.execute("pass")
        print(_row("execute('pass')", _timed(lambda: sb.execute("pass"), n)))
        _check(sb.execute("print(llm_query('q'))").stdout == "answer\n", "llm_query")
        print(_row("execute with 1 llm_query", _timed(lambda: sb.execute("llm_query('q')"), n)))
        loop = "for _ in range(100): llm_query('q')"
        print(_row("llm_query in a loop (per call)", _timed(lambda: sb.execute(loop), max(5, n // 20)), per=100))
        batch = "llm_query_batched(['q'] * 8)"
        print(_row("execute with llm_query_batched(8)", _timed(lambda: sb.execute(batch), max(10, n // 4))))


def _rlm_step(interp, n: int, label: str) -> None:
    variables = {"context": "x" * 100_000, "query": "what?"}
    _check(interp.execute("print(len(context))", variables=variables).strip() == "100000", "context")
    label = label + " " if label else ""
    print(_row(label + "execute('pass')", _timed(lambda: interp.execute("pass"), n)))
    print(_row(label + "RLM step (100 kB context)", _timed(lambda: interp.execute("pass", variables=variables), n)))
    _check(interp.execute("print(llm_query('q'))").strip() == "answer", "llm_query")
    print(_row(label + "execute with 1 llm_query", _timed(lambda: interp.execute("llm_query('q')"), n)))


def bench_adapter(n: int, binary: str | None) -> None:
    from .dspy import RLMSandboxInterpreter, _dspy_types

    _dspy_types()  # imports DSPy when it is installed: not part of a start
    _header("rlm-sandbox: RLMSandboxInterpreter (as dspy.RLM drives it)")
    _print_starts(lambda: RLMSandboxInterpreter(binary=binary), lambda i: i.shutdown(), 3)
    interp = RLMSandboxInterpreter(tools={"llm_query": lambda p: "answer"}, binary=binary)
    try:
        _rlm_step(interp, n, "")
    finally:
        interp.shutdown()


def _dspy_default_command(shim_dir: str) -> list[str]:
    from dspy import PythonInterpreter

    cmd = PythonInterpreter().deno_command
    with open(os.path.join(shim_dir, "readlines.js"), "w") as f:
        f.write(_READLINES_SHIM)
    with open(os.path.join(shim_dir, "importmap.json"), "w") as f:
        f.write('{"imports": {"%s": "./readlines.js"}}' % _DENO_STD_IO)
    i = cmd.index("run") + 1
    cmd = cmd[:i] + ["--import-map=" + os.path.join(shim_dir, "importmap.json")] + cmd[i:]
    return [c + "," + shim_dir if c.startswith("--allow-read=") else c for c in cmd]


def bench_dspy_default(n: int, shim: bool) -> None:
    try:
        from dspy import PythonInterpreter
    except ImportError:
        print("\nDSPy's default interpreter: not measured (dspy is not installed)")
        return
    import shutil

    try:
        from deno import find_deno_bin  # the deno PyPI package ships the binary

        deno = find_deno_bin()
    except (ImportError, FileNotFoundError):
        deno = shutil.which("deno")
    if not deno:
        print("\nDSPy's default interpreter: not measured (no Deno: `pip install deno` or put deno on $PATH)")
        return
    _header("DSPy's default interpreter: dspy.PythonInterpreter (Deno + Pyodide)%s" % (" [readLines shim]" if shim else ""))
    with tempfile.TemporaryDirectory() as shim_dir:
        kwargs = {"tools": {"llm_query": lambda prompt: "answer"}}
        if shim:
            kwargs["deno_command"] = _dspy_default_command(shim_dir)
        _print_starts(lambda: PythonInterpreter(**kwargs), lambda i: i.shutdown(), 3)
        interp = PythonInterpreter(**kwargs)
        try:
            interp.execute("pass")
            _rlm_step(interp, n, "")
        finally:
            interp.shutdown()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=200, help="repetitions per measurement")
    ap.add_argument("--binary", help="the rlm-sandbox binary (default: $RLM_SANDBOX, then $PATH)")
    ap.add_argument("--no-dspy-default", action="store_true", help="skip DSPy's default interpreter")
    ap.add_argument("--no-deno-shim", action="store_true", help="let Deno fetch readLines from deno.land")
    args = ap.parse_args(argv)
    print("python %s; %s" % (sys.version.split()[0], os.uname().machine))
    bench_sandbox(args.n, args.binary)
    bench_adapter(args.n, args.binary)
    if not args.no_dspy_default:
        bench_dspy_default(args.n, not args.no_deno_shim)


if __name__ == "__main__":
    main()
