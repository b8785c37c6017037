package main

import (
	"strings"
	"testing"
)

const sample = `goos: linux
pkg: github.com/rlm-sandbox/rlm-sandbox/supervisor
BenchmarkExecuteStatement/worker-2 	      20	    186373 ns/op	       188.5 µs-median
BenchmarkLLMQueryBatched/worker-2               	      20	   1051366 ns/op	       999 µs-median
BenchmarkOutputThroughput/worker-2              	      20	 450651651 ns/op	 232.68 MB/s
BenchmarkFreshSandbox/first-exception/worker-2  	      20	    851184 ns/op	       2100 µs-median
    bench_test.go:12: BenchmarkNotAResult 3 x
pkg: github.com/rlm-sandbox/rlm-sandbox/tests
BenchmarkCPU/count-2                   	      20	  12000000 ns/op	        12.00 guest-ms/op	        8.55 native-ms/op	        11.78 node-ms/op	         1.019 x-node
BenchmarkCPU/find-2                    	      20	   9600000 ns/op	         9.58 guest-ms/op	         9.46 node-ms/op	         1.013 x-node
BenchmarkCPU/compile_1000-2            	      20	  53000000 ns/op	        52.9 guest-ms/op	        18.0 native-ms/op	        51.8 node-ms/op	         1.021 x-node
BenchmarkCPU/findall_literal-2         	      20	  14513804 ns/op	        13.90 guest-ms/op	        10.29 node-ms/op	         1.351 x-node
BenchmarkCPU/split-2                   	      20	 209538133 ns/op	       208.9 guest-ms/op
BenchmarkRLMIteration/worker-2         	      20	 285995133 ns/op	       286.5 ms-total	       297.1 node-ms-total
BenchmarkExecuteStatement/worker-2         	    2000	    185905 ns/op	       95.5 µs-median	       280.2 µs-p99
`

func TestParse(t *testing.T) {
	r, err := parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	// The later run of a benchmark counts; units it did not report stay.
	if v, _ := r.get("ExecuteStatement/worker", "µs-median"); v != 95.5 {
		t.Errorf("ExecuteStatement/worker median = %v, want the last run's 95.5", v)
	}
	if v, _ := r.get("ExecuteStatement/worker", "µs-p99"); v != 280.2 {
		t.Errorf("p99 = %v, want 280.2", v)
	}
	if v, _ := r.get("FreshSandbox/first-exception/worker", "µs-median"); v != 2100 {
		t.Errorf("a name with slashes and dashes: %v, want 2100", v)
	}
	if _, ok := r["NotAResult"]; ok {
		t.Error("a log line was read as a result")
	}
}

func TestWrite(t *testing.T) {
	r, err := parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	write(&b, r)
	out := b.String()
	for _, want := range []string{
		"| Execute one-line statement, worker, median | 408 µs | 95.5 µs | ≤ 100 µs | yes |",
		"| Execute one-line statement, worker, p99 | — | 280 µs | ≤ 300 µs | yes |",
		"| llm_query_batched of 100, worker, median | — | 999 µs | ≤ 1000 µs | yes |",
		"| first exception, fresh sandbox, worker | 57 ms | 2.10 ms | ≤ 2 ms | **no** |",
		// 100 MiB at 232.68 MB/s.
		"| 100 MiB printed in 1 KiB lines, worker | 1.2 s | 0.451 s | ≤ 0.5 s | yes |",
		"| Execute one-line statement, direct, median | 291 µs | not run (ExecuteStatement/direct) | ≤ 40 µs | — |",
		"| re.findall('needle', context) | 20.5 / 6.9 ms = 3.0× | 13.9 | 10.3 | 1.35 | ≤ 1.2× | **no** |",
		"| context.split() | 136 / 99 ms = 1.4× | 209 | no Node run | | ≤ 1.5× | — |",
		"| RLM iteration, worker (sum of step medians) | 221 / 117 ms = 1.9× | 286 | 297 | 0.964 | ≤ 1× Node | yes |",
		"286 ms here is over it",
		// 8.55/5.7, 11.78/7.6; no native run for find (9.46/6.0); findall 10.29/6.9.
		"| context.count('needle') | 5.7 | 8.55 | 1.50 | 7.6 | 11.8 | 1.55 |",
		"| context.find('zzzzqqq') | — | — | — | 6 | 9.46 | 1.58 |",
		// 18.0/5.0; the issue has no Node figure for it.
		"| compile(\"x = x + 1\") 1,000 times | 5 | 18.0 | 3.60 | — | — | — |",
		"took native CPython 1.50–3.60× and Node 1.49–1.58× as long here as there",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the table lacks %q; it is:\n%s", want, out)
		}
	}
}
