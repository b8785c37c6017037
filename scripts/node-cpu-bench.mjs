// Runs the CPU benchmark's rows and the RLM iteration's steps under Node +
// Pyodide, the system rlm-sandbox replaces, on the same Pyodide build, so
// that `make bench` compares both on the same machine at the same time
// (tests/cpu_bench_test.go starts it).
//
//   node scripts/node-cpu-bench.mjs PYODIDE_DIR CONTEXT_FILE SPEC_FILE
//   node scripts/node-cpu-bench.mjs PYODIDE_DIR CONTEXT_FILE -
//
// SPEC_FILE is JSON: {"rows": [{"name", "setup", "op"}], "runs": N,
// "steps": [{"name", "code"}], "iterations": M, "no_warm": B}; rows or
// steps may be null
// (the Go benchmark runs the steps in an interpreter of their own). With
// "-", specs come from standard input, one JSON object per line, and each
// gets its answer line in turn, from the same interpreter until the input
// ends (the Go benchmark sends each CPU row right after running it). Each
// row's op runs once to warm up, then N times, each timed in Python with
// time.perf_counter as the Go benchmark does. The steps run once to warm
// up (unless no_warm: the Go benchmark sends one iteration at a time,
// alternating with its own), then M times in order, each timed around runPython (no process
// boundary: Node's figure is the lower bound of a Node worker's).
// llm_query_batched answers at once, as the Go benchmark's callback does.
// Prints one JSON object per spec, on a line: {"rows": {name: [ms, ...]},
// "steps": {name: [ms, ...]}}.
import fs from "node:fs";
import path from "node:path";
import readline from "node:readline";
import { pathToFileURL } from "node:url";

const [pyodideDir, contextFile, specFile] = process.argv.slice(2);
if (!specFile) {
  console.error("usage: node-cpu-bench.mjs PYODIDE_DIR CONTEXT_FILE SPEC_FILE");
  process.exit(2);
}
const { loadPyodide } = await import(pathToFileURL(path.join(pyodideDir, "pyodide.mjs")).href);
const py = await loadPyodide({
  indexURL: pyodideDir + path.sep,
  stdout: () => {},
  stderr: () => {},
});
py.globals.set("context", fs.readFileSync(contextFile, "utf8"));
py.runPython(`
def llm_query(prompt):
    return "It mentions a needle (%d characters)." % len(prompt)

def llm_query_batched(prompts):
    return [llm_query(p) for p in prompts]
`);

// run runs code, naming what failed (Pyodide's own message is its last
// line; the stack of the minified loader before it is noise).
function run(what, code) {
  try {
    return py.runPython(code);
  } catch (e) {
    const msg = String(e && e.message ? e.message : e).trim().split("\n").slice(-3).join("\n");
    console.error(`node-cpu-bench: ${what}: ${msg}`);
    process.exit(1);
  }
}

// runSpec runs one spec and returns its figures.
function runSpec(spec) {
  const rows = spec.rows ?? [], steps = spec.steps ?? [];
  const out = { rows: {}, steps: {} };
  for (const row of rows) {
    if (row.setup) run(row.name, row.setup);
    run(row.name, "import time\n" + row.op);
    const code = "_t = time.perf_counter()\n" + row.op + "\n_t = time.perf_counter() - _t";
    const times = [];
    for (let i = 0; i < spec.runs; i++) {
      run(row.name, code);
      times.push(py.globals.get("_t") * 1000);
    }
    out.rows[row.name] = times;
  }
  for (const s of steps) {
    if (!spec.no_warm) run(s.name, s.code);
    out.steps[s.name] = [];
  }
  for (let i = 0; i < (spec.iterations ?? 0); i++) {
    for (const s of steps) {
      const t0 = performance.now();
      run(s.name, s.code);
      out.steps[s.name].push(performance.now() - t0);
    }
  }
  return out;
}

if (specFile === "-") {
  const lines = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
  for await (const line of lines) {
    if (line.trim() === "") continue;
    process.stdout.write(JSON.stringify(runSpec(JSON.parse(line))) + "\n");
  }
} else {
  process.stdout.write(JSON.stringify(runSpec(JSON.parse(fs.readFileSync(specFile, "utf8")))) + "\n");
}
