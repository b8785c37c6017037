# Runs the CPU benchmark's rows in native CPython (the python3 that runs
# this script), as issue 15's table has a column of, so that `make bench`
# can say how this machine compares with the one the issues were measured
# on (tests/cpu_bench_test.go starts it).
#
#   python3 scripts/native-cpu-bench.py CONTEXT_FILE SPEC_FILE
#
# SPEC_FILE is the JSON node-cpu-bench.mjs reads; only "rows" and "runs"
# count. Each row's setup runs once, its op once to warm up and then N
# times, each timed with time.perf_counter. Prints one JSON object:
# {"rows": {name: [ms, ...]}, "version": "3.11.7"}.
import json
import platform
import sys
import time


def main():
    if len(sys.argv) != 3:
        print("usage: native-cpu-bench.py CONTEXT_FILE SPEC_FILE", file=sys.stderr)
        sys.exit(2)
    with open(sys.argv[1], encoding="utf-8") as f:
        context = f.read()
    with open(sys.argv[2], encoding="utf-8") as f:
        spec = json.load(f)
    out = {"rows": {}, "version": platform.python_version()}
    for row in spec.get("rows") or []:
        g = {"context": context}
        if row["setup"]:
            exec(row["setup"], g)
        op = compile(row["op"], "<" + row["name"] + ">", "exec")
        exec(op, g)
        times = []
        for _ in range(spec["runs"]):
            t = time.perf_counter()
            exec(op, g)
            times.append((time.perf_counter() - t) * 1000)
        out["rows"][row["name"]] = times
    print(json.dumps(out))


main()
