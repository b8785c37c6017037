package tests

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"math/rand/v2"
	"os"
	osexec "os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rlm-sandbox/rlm-sandbox/internal/benchmode"
	"github.com/rlm-sandbox/rlm-sandbox/runtime"
	"github.com/rlm-sandbox/rlm-sandbox/supervisor"
)

// cpuRows are the string and interpreter work of issue 15's table (an RLM
// agent's code over a 10 MB context), plus compiling a statement, the
// fixed cost of every request.
var cpuRows = []struct{ name, setup, op string }{
	{"count", "", "context.count('needle')"},
	{"find", "", "context.find('zzzzqqq')"},
	{"findall_literal", "import re", "re.findall('needle', context)"},
	{"findall_needle_digits", "import re", `re.findall(r'needle-\d+', context)`},
	{"findall_words_2MB", "import re", `re.findall(r'\w+', context[:2_000_000])`},
	{"split", "", "context.split()"},
	{"lower", "", "context.lower()"},
	{"set_of_slices", "", "{context[i:i+8] for i in range(0, 2_000_000, 3)}"},
	{"sum_squares_3M", "", "sum(i*i for i in range(3_000_000))"},
	{"json_200k", "import json\ndata = [{'id': i, 'name': f'item{i}', 'tags': ['a', 'b'], 'v': i / 7} for i in range(200_000)]",
		"json.loads(json.dumps(data))"},
	{"compile_1000", "", `for _ in range(1000): compile("x = x + 1", "<c>", "exec")`},
}

// cpuContext is a 10 MB ASCII text of generated words and numbers in lines
// of 12-24 tokens (about 86k lines), with "needle-<n>" tokens here and there.
func cpuContext() string {
	r := rand.New(rand.NewPCG(1, 2))
	word := func() string {
		b := make([]byte, 2+r.IntN(8))
		for i := range b {
			b[i] = byte('a' + r.IntN(26))
		}
		return string(b)
	}
	words := make([]string, 5000)
	for i := range words {
		words[i] = word()
	}
	var sb strings.Builder
	for sb.Len() < 10_000_000 {
		n := 12 + r.IntN(13)
		for i := 0; i < n; i++ {
			if i > 0 {
				sb.WriteByte(' ')
			}
			switch x := r.Float64(); {
			case x < 0.15:
				sb.WriteString(strconv.Itoa(r.IntN(100000)))
			case x < 0.16:
				sb.WriteString("needle-" + strconv.Itoa(r.IntN(1000)))
			default:
				sb.WriteString(words[r.IntN(len(words))])
			}
		}
		sb.WriteByte('\n')
	}
	return sb.String()[:10_000_000]
}

// BenchmarkCPU runs each row in a worker sandbox (as agents do) and reports
// the guest's own time per operation (guest-ms/op), measured in Python with
// time.perf_counter, so that the request path does not count. Workers run
// the guest without bounds checks (RATIONALE.md); RLM_SANDBOX_BOUNDS_CHECKS=1
// in the environment keeps them, for comparison. Next to it: Node +
// Pyodide's mean of five (node-ms/op, x-node), run right after the row in
// one Node interpreter kept for the benchmark, and native CPython's best of
// five (native-ms/op), run once per process; both on the same context.
func BenchmarkCPU(b *testing.B) {
	text := cpuContext()
	ctx := context.Background()
	sb, err := supervisor.New(ctx, supervisor.Config{UseWorker: supervisor.WorkerAlways})
	if err != nil {
		b.Fatal(err)
	}
	defer sb.Destroy()
	if err := sb.Initialize(ctx, text); err != nil {
		b.Fatal(err)
	}
	node := startNode(b, text)
	defer node.close()
	for _, row := range cpuRows {
		b.Run(row.name, func(b *testing.B) {
			if row.setup != "" {
				benchExec(b, sb, row.setup)
			}
			benchExec(b, sb, "import time\n"+row.op) // warm
			code := "_t = time.perf_counter()\n" + row.op + "\nprint(time.perf_counter() - _t)"
			var guest time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				out := benchExec(b, sb, code)
				s, err := strconv.ParseFloat(strings.TrimSpace(out), 64)
				if err != nil {
					b.Fatalf("output %q: %v", out, err)
				}
				guest += time.Duration(s * float64(time.Second))
			}
			b.StopTimer() // the Node side runs now, outside the timing
			ms := float64(guest) / float64(time.Millisecond) / float64(b.N)
			b.ReportMetric(ms, "guest-ms/op")
			if f := node.run(b, nodeSpec{Rows: []nodeRow{{row.name, row.setup, row.op}}, Runs: 5}); f != nil {
				n := mean(f.Rows[row.name])
				b.ReportMetric(n, "node-ms/op")
				b.ReportMetric(ms/n, "x-node")
			}
			if native := nativeBench(b, text); native != nil {
				b.ReportMetric(slices.Min(native.Rows[row.name]), "native-ms/op")
			}
		})
	}
}

func benchExec(b *testing.B, sb supervisor.Sandbox, code string) string {
	b.Helper()
	ce, err := sb.Execute(context.Background(), code)
	if err != nil {
		b.Fatal(err)
	}
	if ce.Error != "" {
		b.Fatalf("%s: %s", code, ce.Error)
	}
	return ce.Stdout
}

// rlmSteps is one iteration of an RLM agent over a 10 MB context, as issue
// 15 describes a typical one ("peek, split('\n'), regex hits, windows, 40
// llm_query calls answered at once, word counts, a caught error, the
// answer"); the code of each step is ours, written the way an agent's
// code does these things (the word counts are over the lines with a hit,
// about a sixth of them). Each step is one Execute, in order: later steps
// use the variables of earlier ones.
var rlmSteps = []struct{ name, code string }{
	{"peek", "print(context[:2000])"},
	{"split_lines", "lines = context.split('\\n')\nprint(len(lines))"},
	{"regex", "import re\nhits = re.findall(r'needle-\\d+', context)\n" +
		"ids = sorted({int(h.split('-')[1]) for h in hits})\nprint(len(hits), len(ids), ids[:10])"},
	{"windows", "import itertools\n" +
		"windows = [context[max(0, m.start() - 500):m.end() + 500] for m in itertools.islice(re.finditer(r'needle-\\d+', context), 200)]\n" +
		"print(len(windows), sum(map(len, windows)))"},
	{"llm_query_40", "answers = llm_query_batched([f'What does this passage say about needles?\\n{w}' for w in windows[:40]])\n" +
		"print(len(answers), answers[0])"},
	{"word_counts", "from collections import Counter\nrelevant = [line for line in lines if 'needle' in line]\n" +
		"counts = Counter(w for line in relevant for w in line.split())\nprint(len(relevant), len(counts), counts.most_common(5))"},
	{"caught_error", "try:\n    n = int(lines[0].split()[0] + 'x')\nexcept ValueError as e:\n    n = None\n    print('not a number:', e)"},
	{"answer", "print(f'FINAL: {len(hits)} hits of {len(ids)} needles; top words {counts.most_common(3)}; {len(answers)} answers')"},
}

// BenchmarkRLMIteration runs rlmSteps over cpuContext in a worker sandbox
// and in direct mode, timing each step's Execute from the host (request
// path included, as an agent sees it). It reports each step's median
// (ms-<step>) over b.N iterations and ms-total, the sum of the medians,
// the figure issue 15 compares with Node + Pyodide (117 ms in a worker).
// llm_query is answered by a Go callback at once, all 40 concurrently.
//
// The worker's figures are compared with Node + Pyodide's for the same
// run: a Node interpreter of its own gets the context and runs the steps
// once to warm up, as the new sandbox does, and then its iterations
// alternate with the worker's, one each in turn. The heap a step finds and
// the time it runs at move its figure: the word counts get slower over the
// iterations in both engines, and this machine's speed drifts by 10% over
// minutes, so each engine's i-th iteration runs next to the other's.
func BenchmarkRLMIteration(b *testing.B) {
	text := cpuContext()
	// A worker and direct mode, or only direct-patched (benchmode.All).
	for _, m := range benchmode.All() {
		b.Run(m.Name, func(b *testing.B) {
			ctx := context.Background()
			sb, err := supervisor.New(ctx, supervisor.Config{
				UseWorker:            m.Mode,
				MaxBridgeConcurrency: 40,
				OnLLMQuery: func(_ context.Context, prompt string) (string, error) {
					return "It mentions a needle (" + strconv.Itoa(len(prompt)) + " characters).", nil
				},
			})
			if err != nil {
				b.Fatal(err)
			}
			defer sb.Destroy()
			if err := sb.Initialize(ctx, text); err != nil {
				b.Fatal(err)
			}
			for _, s := range rlmSteps { // warm: imports, first-use paths
				benchExec(b, sb, s.code)
			}
			// Node alongside, for the worker (b.N == 1: the framework's probe).
			var node *nodeSession
			var steps []nodeStep
			nodeTimes := map[string][]float64{}
			if m.Name == "worker" && b.N >= 2 {
				b.StopTimer()
				node = startNode(b, text)
				defer node.close()
				for _, s := range rlmSteps {
					steps = append(steps, nodeStep{s.name, s.code})
				}
				node.run(b, nodeSpec{Steps: steps}) // warm, as above
				b.StartTimer()
			}
			times := make([][]time.Duration, len(rlmSteps))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for j, s := range rlmSteps {
					start := time.Now()
					out := benchExec(b, sb, s.code)
					times[j] = append(times[j], time.Since(start))
					if out == "" {
						b.Fatalf("step %s printed nothing", s.name)
					}
				}
				if node != nil {
					b.StopTimer()
					f := node.run(b, nodeSpec{Steps: steps, Iterations: 1, NoWarm: true})
					for name, ms := range f.Steps {
						nodeTimes[name] = append(nodeTimes[name], ms...)
					}
					b.StartTimer()
				}
			}
			b.StopTimer()
			var total float64
			for j, s := range rlmSteps {
				slices.Sort(times[j])
				med := float64(times[j][len(times[j])/2]) / float64(time.Millisecond)
				total += med
				b.ReportMetric(med, "ms-"+s.name)
			}
			b.ReportMetric(total, "ms-total")
			if node != nil {
				var nodeTotal float64
				for _, s := range rlmSteps {
					med := median(nodeTimes[s.name])
					nodeTotal += med
					b.ReportMetric(med, "node-ms-"+s.name)
				}
				b.ReportMetric(nodeTotal, "node-ms-total")
				b.ReportMetric(total/nodeTotal, "x-node")
			}
		})
	}
}

// nodeFigures are the same rows and steps run under Node + Pyodide (the
// system rlm-sandbox replaces) by scripts/node-cpu-bench.mjs, in ms.
type nodeFigures struct {
	Rows  map[string][]float64 `json:"rows"`
	Steps map[string][]float64 `json:"steps"`
}

var (
	nativeOnce    sync.Once
	nativeResults *nodeFigures
)

// nativeBench runs the CPU rows once per process in native CPython (the
// python3 on PATH), on the same context, and returns their figures (each
// row's best of five is what issue 15's native column compares with); nil
// (logged) when there is no python3. They are a measure of the machine:
// `make bench` sets them against the native column.
func nativeBench(b *testing.B, text string) *nodeFigures {
	nativeOnce.Do(func() {
		py, err := osexec.LookPath("python3")
		if err != nil {
			b.Logf("no native CPython figures: %v", err)
			return
		}
		spec := nodeSpec{Runs: 5}
		for _, r := range cpuRows {
			spec.Rows = append(spec.Rows, nodeRow{r.name, r.setup, r.op})
		}
		ctxFile, specFile := benchFiles(b, text, spec)
		defer os.RemoveAll(filepath.Dir(ctxFile))
		out, err := osexec.Command(py, filepath.Join("..", "scripts", "native-cpu-bench.py"), ctxFile, specFile).Output()
		if err != nil {
			b.Fatalf("native-cpu-bench.py: %v", err)
		}
		var f struct {
			nodeFigures
			Version string `json:"version"`
		}
		if err := json.Unmarshal(out, &f); err != nil {
			b.Fatalf("native-cpu-bench.py output %q: %v", out, err)
		}
		b.Logf("native figures: CPython %s (%s)", f.Version, py)
		nativeResults = &f.nodeFigures
	})
	return nativeResults
}

// nodeSpec is what scripts/node-cpu-bench.mjs runs.
type nodeSpec struct {
	Rows       []nodeRow  `json:"rows"`
	Runs       int        `json:"runs"`
	Steps      []nodeStep `json:"steps"`
	Iterations int        `json:"iterations"`
	NoWarm     bool       `json:"no_warm"`
}

type nodeRow struct {
	Name  string `json:"name"`
	Setup string `json:"setup"`
	Op    string `json:"op"`
}

type nodeStep struct {
	Name string `json:"name"`
	Code string `json:"code"`
}

var nodeMissing sync.Once

// nodeScript returns the node executable and the Pyodide directory that
// scripts/node-cpu-bench.mjs runs with, or ok false (logged once) when Node
// or the Pyodide package is missing (`make bench` fetches it into build/,
// or set RLM_BENCH_NODE_PYODIDE to a directory holding it).
func nodeScript(b *testing.B) (node, dir string, ok bool) {
	dir = os.Getenv("RLM_BENCH_NODE_PYODIDE")
	if dir == "" {
		dir = filepath.Join("..", "build", "node-pyodide-"+runtime.PyodideVersion)
	}
	node, err := osexec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join(dir, "pyodide.mjs"))
	}
	if err != nil {
		nodeMissing.Do(func() {
			b.Logf("no Node + Pyodide figures (make bench fetches the package): %v", err)
		})
		return "", "", false
	}
	return node, dir, true
}

// nodeCommand is the command that runs scripts/node-cpu-bench.mjs with node
// and dir (nodeScript), then args.
func nodeCommand(node, dir string, args ...string) *osexec.Cmd {
	cmd := osexec.Command(node, append([]string{filepath.Join("..", "scripts", "node-cpu-bench.mjs"), dir}, args...)...)
	cmd.Stderr = os.Stderr
	return cmd
}

// nodeOutput decodes the figures node-cpu-bench.mjs printed.
func nodeOutput(b *testing.B, out []byte) *nodeFigures {
	var f nodeFigures
	if err := json.Unmarshal(out, &f); err != nil {
		b.Fatalf("node-cpu-bench.mjs output %q: %v", out, err)
	}
	return &f
}

// nodeSession is one Node + Pyodide interpreter, holding the context, that
// runs specs one after another (node-cpu-bench.mjs reading them from its
// standard input): BenchmarkCPU has each row run under Node right after it
// ran here, so that this machine's drift over minutes does not come
// between the two figures. A nil *nodeSession (no Node) runs nothing.
type nodeSession struct {
	cmd *osexec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
	dir string
}

// startNode starts a session on text, or returns nil when Node or the
// Pyodide package is missing.
func startNode(b *testing.B, text string) *nodeSession {
	node, dir, ok := nodeScript(b)
	if !ok {
		return nil
	}
	ctxFile, _ := benchFiles(b, text, nodeSpec{})
	s := &nodeSession{dir: filepath.Dir(ctxFile)}
	s.cmd = nodeCommand(node, dir, ctxFile, "-")
	in, err := s.cmd.StdinPipe()
	if err == nil {
		var out io.ReadCloser
		if out, err = s.cmd.StdoutPipe(); err == nil {
			s.in, s.out = in, bufio.NewReader(out)
			err = s.cmd.Start()
		}
	}
	if err != nil {
		os.RemoveAll(s.dir)
		b.Fatalf("node-cpu-bench.mjs: %v", err)
	}
	return s
}

// run runs spec in the session and returns its figures.
func (s *nodeSession) run(b *testing.B, spec nodeSpec) *nodeFigures {
	if s == nil {
		return nil
	}
	js, _ := json.Marshal(spec)
	if _, err := s.in.Write(append(js, '\n')); err != nil {
		b.Fatalf("node-cpu-bench.mjs: %v", err)
	}
	line, err := s.out.ReadBytes('\n')
	if err != nil {
		b.Fatalf("node-cpu-bench.mjs: no answer (%v)", err)
	}
	return nodeOutput(b, line)
}

// close ends the session: Node exits at the end of its input.
func (s *nodeSession) close() {
	if s == nil {
		return
	}
	s.in.Close()
	s.cmd.Wait()
	os.RemoveAll(s.dir)
}

func mean(xs []float64) float64 {
	var t float64
	for _, x := range xs {
		t += x
	}
	return t / float64(len(xs))
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// benchFiles writes text and spec into a new temporary directory, for the
// Node and native scripts, and returns their paths; the caller removes the
// directory.
func benchFiles(b *testing.B, text string, spec nodeSpec) (ctxFile, specFile string) {
	tmp, err := os.MkdirTemp("", "rlm-cpu-bench")
	if err != nil {
		b.Fatal(err)
	}
	ctxFile, specFile = filepath.Join(tmp, "context.txt"), filepath.Join(tmp, "spec.json")
	js, _ := json.Marshal(spec)
	if err := os.WriteFile(specFile, js, 0o644); err != nil {
		os.RemoveAll(tmp)
		b.Fatal(err)
	}
	if err := os.WriteFile(ctxFile, []byte(text), 0o644); err != nil {
		os.RemoveAll(tmp)
		b.Fatal(err)
	}
	return ctxFile, specFile
}
