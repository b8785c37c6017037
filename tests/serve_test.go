package tests

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	osexec "os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// rpcClient drives `rlm-sandbox serve --stdio` as a client does.
type rpcClient struct {
	t      *testing.T
	cmd    *osexec.Cmd
	stdin  io.WriteCloser
	stdout io.ReadCloser
	lines  chan string // lines the server wrote, in order
	stderr *watchedBuffer
	done   chan struct{}
	err    error
}

func startServer(t *testing.T) *rpcClient {
	t.Helper()
	return startServerEnv(t, nil)
}

// startServerEnv starts `serve --stdio` with extra environment variables
// and flags.
func startServerEnv(t *testing.T, env []string, flags ...string) *rpcClient {
	t.Helper()
	c := &rpcClient{t: t, cmd: osexec.Command(cliBin(t), append([]string{"serve", "--stdio"}, flags...)...),
		lines: make(chan string, 1000), stderr: newWatchedBuffer(), done: make(chan struct{})}
	c.cmd.Env = append(os.Environ(), env...)
	c.cmd.Stderr = c.stderr
	var err error
	if c.stdin, err = c.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if c.stdout, err = c.cmd.StdoutPipe(); err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		defer close(c.lines)
		sc := bufio.NewScanner(c.stdout)
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
	}()
	go func() {
		<-readerDone // Wait closes the pipe: only once the reader is done with it
		c.err = c.cmd.Wait()
		close(c.done)
	}()
	t.Cleanup(func() {
		select {
		case <-c.done:
		default:
			c.cmd.Process.Kill()
			<-c.done
		}
	})
	return c
}

func (c *rpcClient) send(line string) {
	c.t.Helper()
	if _, err := io.WriteString(c.stdin, line+"\n"); err != nil {
		c.t.Fatalf("write to the server: %v; stderr:\n%s", err, c.stderr)
	}
}

// call sends a request built from method and params.
func (c *rpcClient) call(id any, method string, params any) {
	c.t.Helper()
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if err != nil {
		c.t.Fatal(err)
	}
	c.send(string(b))
}

// next returns the next message the server writes, an object.
func (c *rpcClient) next(within time.Duration) (string, map[string]any) {
	c.t.Helper()
	line := c.nextLine(within)
	var m map[string]any
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		c.t.Fatalf("the server wrote %q: %v", line, err)
	}
	return line, m
}

// nextLine returns the next line the server writes.
func (c *rpcClient) nextLine(within time.Duration) string {
	c.t.Helper()
	select {
	case line, ok := <-c.lines:
		if !ok {
			c.t.Fatalf("the server closed its output; stderr:\n%s", c.stderr)
		}
		return line
	case <-time.After(within):
		c.t.Fatalf("no message from the server within %v; stderr:\n%s", within, c.stderr)
	}
	return ""
}

// response returns the response to request id, passing over the output
// notifications; any other message fails the test.
func (c *rpcClient) response(id any, within time.Duration) map[string]any {
	c.t.Helper()
	want, _ := json.Marshal(id)
	for {
		line, m := c.next(within)
		if m["method"] == "output" {
			continue
		}
		got, _ := json.Marshal(m["id"])
		if string(got) != string(want) {
			c.t.Fatalf("waiting for the response to %s, got %s", want, line)
		}
		return m
	}
}

// rpcError returns the error of response m (code, data.kind, message),
// failing the test when m is not an error.
func rpcError(t *testing.T, m map[string]any) (code int, kind, message string) {
	t.Helper()
	e, ok := m["error"].(map[string]any)
	if !ok {
		t.Fatalf("not an error: %v", m)
	}
	data, _ := e["data"].(map[string]any)
	kind, _ = data["kind"].(string)
	message, _ = e["message"].(string)
	return int(e["code"].(float64)), kind, message
}

// wait closes stdin and waits for the server to exit; it returns the exit
// status.
func (c *rpcClient) wait(within time.Duration) int {
	c.t.Helper()
	c.stdin.Close()
	for range c.lines {
	}
	select {
	case <-c.done:
	case <-time.After(within):
		c.t.Fatalf("the server still runs %v after its input ended; stderr:\n%s", within, c.stderr)
	}
	return exitStatus(c.t, c.err)
}

// TestServeDocumentedSession replays the example session of
// docs/serve.md: the client's lines are sent as they are, and each run of
// server lines must be what the server writes next, in any order within
// the run, compared as JSON without the volatile fields.
func TestServeDocumentedSession(t *testing.T) {
	steps := documentedSession(t)
	c := startServer(t)
	var pids []int
	for i := 0; i < len(steps); {
		if steps[i].fromClient {
			c.send(steps[i].line)
			i++
			continue
		}
		var want []string
		for ; i < len(steps) && !steps[i].fromClient; i++ {
			want = append(want, steps[i].line)
		}
		for range len(want) {
			got, m := c.next(2 * time.Minute)
			if r, ok := m["result"].(map[string]any); ok {
				if pid, ok := r["pid"].(float64); ok && r["sandbox"] != nil {
					pids = append(pids, int(pid))
				}
			}
			k := slices.IndexFunc(want, func(w string) bool { return matchLine(w, got) == nil })
			if k < 0 {
				var why []string
				for _, w := range want {
					why = append(why, matchLine(w, got).Error())
				}
				t.Fatalf("the server wrote\n%s\nwhich is none of the lines the session shows next:\n%s", got, strings.Join(why, "\n"))
			}
			want = slices.Delete(want, k, k+1)
		}
	}
	if len(pids) != 2 {
		t.Fatalf("worker pids %v, want two", pids)
	}
	if code := c.wait(time.Minute); code != 0 {
		t.Fatalf("exit status %d; stderr:\n%s", code, c.stderr)
	}
	waitGone(t, pids, 10*time.Second)
}

type sessionStep struct {
	fromClient bool
	line       string
}

// documentedSession reads the session of docs/serve.md.
func documentedSession(t *testing.T) []sessionStep {
	t.Helper()
	b, err := os.ReadFile("../docs/serve.md")
	if err != nil {
		t.Fatal(err)
	}
	const marker = "<!-- session: replayed by tests/serve_test.go -->"
	_, rest, ok := strings.Cut(string(b), marker)
	if !ok {
		t.Fatalf("docs/serve.md has no %q", marker)
	}
	var steps []sessionStep
	for _, line := range strings.Split(rest, "\n")[2:] {
		if strings.TrimSpace(line) == "```" {
			break
		}
		switch {
		case strings.HasPrefix(line, "--> "):
			steps = append(steps, sessionStep{true, line[4:]})
		case strings.HasPrefix(line, "<-- "):
			steps = append(steps, sessionStep{false, line[4:]})
		default:
			t.Fatalf("docs/serve.md: session line %q starts with neither --> nor <--", line)
		}
	}
	if len(steps) < 10 {
		t.Fatalf("docs/serve.md: the session has %d lines", len(steps))
	}
	return steps
}

// TestServeConcurrentBridge runs two sandboxes at once: s1 waits in
// llm_query for the client, which answers only after s2 has executed, so
// the test can only pass if executions are concurrent. It also checks the
// batched and failing bridge calls, rlm_query, and the streamed output.
// TestServeFailedCreateTakesItsID: a create that fails its parameter
// check still takes the next id, so an execute sent without waiting on the
// id that create would have returned fails instead of running in the
// sandbox of the next create.
func TestServeFailedCreateTakesItsID(t *testing.T) {
	c := startServer(t)
	c.call(1, "create", map[string]any{"contxt": "typo"})
	c.call(2, "create", map[string]any{"context": "second"})
	c.call(3, "execute", map[string]any{"sandbox": "s1", "code": "print(context)"})
	c.call(4, "execute", map[string]any{"sandbox": "s2", "code": "print(context)"})
	got := map[float64]map[string]any{}
	for range 4 {
		_, m := c.next(2 * time.Minute)
		got[m["id"].(float64)] = m
	}
	if _, ok := got[1]["error"]; !ok {
		t.Fatalf("create with an unknown parameter: %v", got[1])
	}
	if r, _ := got[2]["result"].(map[string]any); r["sandbox"] != "s2" {
		t.Fatalf("the second create: %v, want sandbox s2", got[2])
	}
	if e, _ := got[3]["error"].(map[string]any); e == nil || e["code"] != float64(-32003) {
		t.Fatalf("execute on the failed create's id: %v, want -32003", got[3])
	}
	if r, _ := got[4]["result"].(map[string]any); r["stdout"] != "second\n" {
		t.Fatalf("execute on s2: %v", got[4])
	}
}

func TestServeConcurrentBridge(t *testing.T) {
	c := startServer(t)
	c.call(1, "create", map[string]any{"context": "Ada", "stream": true, "bridges": []string{"llm_query", "rlm_query"}})
	c.call(2, "create", map[string]any{"context": map[string]any{"n": 41}, "direct": true})
	created := map[float64]map[string]any{}
	for range 2 {
		_, m := c.next(2 * time.Minute)
		created[m["id"].(float64)] = m["result"].(map[string]any)
	}
	if created[1]["sandbox"] != "s1" || created[2]["sandbox"] != "s2" || created[1]["worker"] != true || created[2]["worker"] != false {
		t.Fatalf("create results %v", created)
	}

	c.call(3, "execute", map[string]any{"sandbox": "s1", "code": "print('asking')\nprint(llm_query('hi ' + context))"})
	_, m := c.next(time.Minute)
	if m["method"] != "output" || m["params"].(map[string]any)["line"] != "asking" {
		t.Fatalf("want the output notification first, got %v", m)
	}
	_, bridge := c.next(time.Minute)
	if bridge["method"] != "llm_query" || bridge["params"].(map[string]any)["prompt"] != "hi Ada" {
		t.Fatalf("want an llm_query request, got %v", bridge)
	}
	c.call(4, "execute", map[string]any{"sandbox": "s2", "code": "context['n'] + 1", "interactive": true})
	_, m = c.next(time.Minute)
	if m["id"] != 4.0 || m["result"].(map[string]any)["stdout"] != "42\n" {
		t.Fatalf("s2 did not answer while s1 waited: %v", m)
	}
	c.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%q,"result":"HELLO ADA"}`, bridge["id"]))
	_, m = c.next(time.Minute)
	if m["method"] != "output" || m["params"].(map[string]any)["line"] != "HELLO ADA" {
		t.Fatalf("want the answer printed, got %v", m)
	}
	_, m = c.next(time.Minute)
	if r := m["result"].(map[string]any); m["id"] != 3.0 || r["stdout"] != "asking\nHELLO ADA\n" || r["bridge_calls"] != 1.0 {
		t.Fatalf("s1's execute: %v", m)
	}

	// Batched calls are outstanding at once; answered in reverse order,
	// each answer still reaches its prompt. An error answer raises.
	c.call(5, "execute", map[string]any{"sandbox": "s1", "code": `
r = llm_query_batched(["a", "b", "c"])
print(r)
try:
    llm_query("fail")
except BridgeError as e:
    print("error:", e)
print(rlm_query("sub", ctx=[1, 2]))
print(rlm_query("whole"))`})
	var reqs []map[string]any
	for len(reqs) < 3 {
		_, m := c.next(time.Minute)
		if m["method"] == "llm_query" {
			reqs = append(reqs, m)
		}
	}
	for i := len(reqs) - 1; i >= 0; i-- {
		p := reqs[i]["params"].(map[string]any)
		c.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%q,"result":%q}`, reqs[i]["id"], strings.ToUpper(p["prompt"].(string))))
	}
	answer := func(method string, check func(params map[string]any), reply string) {
		t.Helper()
		for {
			_, m := c.next(time.Minute)
			if m["method"] == "output" {
				continue
			}
			if m["method"] != method {
				t.Fatalf("want a %s request, got %v", method, m)
			}
			check(m["params"].(map[string]any))
			c.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%q,%s}`, m["id"], reply))
			return
		}
	}
	answer("llm_query", func(p map[string]any) {}, `"error":{"code":1,"message":"rate limited"}`)
	answer("rlm_query", func(p map[string]any) {
		if p["task"] != "sub" || fmt.Sprint(p["context"]) != "[1 2]" || p["sandbox"] != "s1" {
			t.Fatalf("rlm_query params %v", p)
		}
	}, `"result":"sub done"`)
	answer("rlm_query", func(p map[string]any) {
		if p["task"] != "whole" || p["context"] != "Ada" {
			t.Fatalf("rlm_query params %v", p)
		}
	}, `"result":"whole done"`)
	for {
		_, m := c.next(time.Minute)
		if m["method"] == "output" {
			continue
		}
		r := m["result"].(map[string]any)
		if want := "['A', 'B', 'C']\nerror: rate limited\nsub done\nwhole done\n"; m["id"] != 5.0 || r["stdout"] != want {
			t.Fatalf("got %v, want stdout %q", m, want)
		}
		break
	}

	// s2 did not list the bridges: its calls fail without asking.
	c.call(6, "execute", map[string]any{"sandbox": "s2", "code": "llm_query('x')"})
	_, m = c.next(time.Minute)
	if r := m["result"].(map[string]any); !strings.Contains(fmt.Sprint(r["error"]), `did not list it in create's "bridges"`) {
		t.Fatalf("%v", m)
	}
	if code := c.wait(time.Minute); code != 0 {
		t.Fatalf("exit status %d", code)
	}
}

// TestServeProtocolErrors checks the JSON-RPC error responses.
func TestServeProtocolErrors(t *testing.T) {
	c := startServer(t)
	cases := []struct {
		send string
		code float64
		kind string
	}{
		{`not json`, -32700, "parse_error"},
		{`[]`, -32600, "invalid_request"},
		{`{"jsonrpc":"2.0","id":1}`, -32600, "invalid_request"},
		{`{"jsonrpc":"1.0","id":2,"method":"version"}`, -32600, "invalid_request"},
		{`{"jsonrpc":"2.0","id":3,"method":"nope"}`, -32601, "method_not_found"},
		{`{"jsonrpc":"2.0","id":4,"method":"create","params":{"timout_ms":5}}`, -32602, "invalid_params"},
		{`{"jsonrpc":"2.0","id":5,"method":"create","params":[1]}`, -32602, "invalid_params"},
		{`{"jsonrpc":"2.0","id":6,"method":"create","params":{"bridges":["web"]}}`, -32602, "invalid_params"},
		{`{"jsonrpc":"2.0","id":7,"method":"execute","params":{"code":"1"}}`, -32602, "invalid_params"},
		{`{"jsonrpc":"2.0","id":8,"method":"execute","params":{"sandbox":"s9","code":"1"}}`, -32003, "no_such_sandbox"},
		{`{"jsonrpc":"2.0","id":9,"method":"get_variable","params":{"sandbox":"s9"}}`, -32602, "invalid_params"},
		{`{"jsonrpc":"2.0","id":10,"method":"set_variable","params":{"sandbox":"s9","name":"x"}}`, -32602, "invalid_params"},
		{`{"jsonrpc":"2.0","id":11,"method":"destroy","params":{"sandbox":"s9"}}`, -32003, "no_such_sandbox"},
		// Exact names: encoding/json alone would match these ignoring case.
		{`{"jsonrpc":"2.0","id":12,"method":"create","params":{"TIMEOUT_MS":5}}`, -32602, "invalid_params"},
		{`{"jsonrpc":"2.0","id":13,"method":"create","params":{"Context":"x"}}`, -32602, "invalid_params"},
		{`{"jsonrpc":"2.0","id":14,"method":"execute","params":{"sandbox":"s9","Code":"1"}}`, -32602, "invalid_params"},
		{`{"jsonrpc":"2.0","ID":15,"method":"version"}`, -32600, "invalid_request"},
		{`{"jsonrpc":"2.0","id":16,"METHOD":"version"}`, -32600, "invalid_request"},
		{`{"JSONRPC":"2.0","id":17,"method":"version"}`, -32600, "invalid_request"},
		// Ids are strings, numbers or null; params are structured.
		{`{"jsonrpc":"2.0","id":true,"method":"version"}`, -32600, "invalid_request"},
		{`{"jsonrpc":"2.0","id":{"a":1},"method":"version"}`, -32600, "invalid_request"},
		{`{"jsonrpc":"2.0","id":18,"method":"version","params":"x"}`, -32600, "invalid_request"},
		{`{"jsonrpc":"2.0","id":19,"method":"create","params":5}`, -32600, "invalid_request"},
		{`{"jsonrpc":"2.0","id":20,"method":"create","params":true}`, -32600, "invalid_request"},
		{`{"jsonrpc":"2.0","id":21,"method":7}`, -32600, "invalid_request"},
		// Methods without parameters take none.
		{`{"jsonrpc":"2.0","id":22,"method":"version","params":{"x":1}}`, -32602, "invalid_params"},
		{`{"jsonrpc":"2.0","id":23,"method":"authenticate","params":{"tokn":"x"}}`, -32602, "invalid_params"},
		// Required parameters.
		{`{"jsonrpc":"2.0","id":24,"method":"execute","params":{"sandbox":"s9"}}`, -32602, "invalid_params"},
		{`{"jsonrpc":"2.0","id":25,"method":"cancel","params":{"sandbox":"s9","now":true}}`, -32602, "invalid_params"},
	}
	for _, tc := range cases {
		c.send(tc.send)
		line, m := c.next(time.Minute)
		e, _ := m["error"].(map[string]any)
		if e == nil || e["code"] != tc.code || e["data"].(map[string]any)["kind"] != tc.kind || e["message"] == "" {
			t.Fatalf("sent %s\ngot %s\nwant code %v kind %s", tc.send, line, tc.code, tc.kind)
		}
	}
	// A batch gets one array; notifications in it get nothing.
	c.send(`[{"jsonrpc":"2.0","id":"a","method":"version"},{"jsonrpc":"2.0","method":"version"},{"jsonrpc":"2.0","id":"b","method":"nope"}]`)
	line := c.nextLine(time.Minute)
	var batch []map[string]any
	if err := json.Unmarshal([]byte(line), &batch); err != nil || len(batch) != 2 {
		t.Fatalf("batch response %s", line)
	}
	ids := []string{fmt.Sprint(batch[0]["id"]), fmt.Sprint(batch[1]["id"])}
	slices.Sort(ids)
	if ids[0] != "a" || ids[1] != "b" {
		t.Fatalf("batch response %s", line)
	}
	// A notification gets no response: the next line answers id 99.
	c.send(`{"jsonrpc":"2.0","method":"version"}`)
	c.send(`{"jsonrpc":"2.0","id":99,"method":"version"}`)
	if _, m := c.next(time.Minute); m["id"] != 99.0 || m["result"].(map[string]any)["protocol"] != 1.0 {
		t.Fatalf("%v", m)
	}
	if code := c.wait(time.Minute); code != 0 {
		t.Fatalf("exit status %d", code)
	}
}

// TestServeVariablesAndRestart covers get_variable, set_variable, stats and
// restart, and values that have no JSON form.
func TestServeVariablesAndRestart(t *testing.T) {
	c := startServer(t)
	c.call(1, "create", map[string]any{"context": "doc", "timeout_ms": 200})
	c.next(2 * time.Minute)
	c.send(`{"jsonrpc":"2.0","id":2,"method":"set_variable","params":{"sandbox":"s1","name":"big","value":123456789012345678901234567890}}`)
	c.call(3, "execute", map[string]any{"sandbox": "s1", "code": "print(big + 1)\nodd = {1: (2, 3), 'f': float('nan'), 'b': b'hi', 's': {4}}"})
	c.call(4, "get_variable", map[string]any{"sandbox": "s1", "name": "odd"})
	c.call(5, "get_variable", map[string]any{"sandbox": "s1", "name": "missing"})
	got := map[float64]string{}
	for range 4 {
		line, m := c.next(time.Minute)
		got[m["id"].(float64)] = line
	}
	c.call(6, "stats", map[string]any{"sandbox": "s1"}) // answered at once: after the execute's answer
	got[6], _ = c.next(time.Minute)
	checks := map[float64]string{
		2: `{"jsonrpc":"2.0","id":2,"result":{}}`,
		4: `{"jsonrpc":"2.0","id":4,"result":{"found":true,"value":{"1":[2,3],"f":"nan","b":"hi","s":[4]}}}`,
		5: `{"jsonrpc":"2.0","id":5,"result":{"found":false,"value":null}}`,
	}
	for id, want := range checks {
		if err := matchLine(want, got[id]); err != nil {
			t.Fatalf("id %v: %v", id, err)
		}
	}
	if !strings.Contains(got[3], `"stdout":"123456789012345678901234567891\n"`) {
		t.Fatalf("%s", got[3])
	}
	var st struct {
		Result struct {
			Worker     bool   `json:"worker"`
			PID        int    `json:"pid"`
			RSS        uint64 `json:"rss_bytes"`
			Linear     uint64 `json:"linear_memory_bytes"`
			Executions uint64 `json:"executions"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(got[6]), &st); err != nil || !st.Result.Worker || st.Result.PID <= 0 || st.Result.RSS == 0 || st.Result.Linear == 0 || st.Result.Executions < 1 {
		t.Fatalf("stats %s", got[6])
	}
	// Code that ignores KeyboardInterrupt is killed: the sandbox is dead
	// until restart, which brings back the context.
	c.call(7, "execute", map[string]any{"sandbox": "s1", "code": "while True:\n    try:\n        while True: pass\n    except KeyboardInterrupt:\n        pass"})
	_, m := c.next(time.Minute)
	if e := m["error"].(map[string]any); e["code"] != -32001.0 {
		t.Fatalf("%v", m)
	}
	c.call(8, "execute", map[string]any{"sandbox": "s1", "code": "1"})
	_, m = c.next(time.Minute)
	if e := m["error"].(map[string]any); e["code"] != -32000.0 || !slices.Contains([]any{"dead", "worker_exited"}, e["data"].(map[string]any)["kind"]) {
		t.Fatalf("%v", m)
	}
	c.call(9, "restart", map[string]any{"sandbox": "s1"})
	_, m = c.next(time.Minute)
	if r, _ := m["result"].(map[string]any); r == nil || r["sandbox"] != "s1" || r["pid"] == float64(st.Result.PID) {
		t.Fatalf("%v", m)
	}
	c.call(10, "execute", map[string]any{"sandbox": "s1", "code": "print(context, 'big' in globals())"})
	if _, m := c.next(time.Minute); m["result"].(map[string]any)["stdout"] != "doc False\n" {
		t.Fatalf("%v", m)
	}
	if code := c.wait(time.Minute); code != 0 {
		t.Fatalf("exit status %d", code)
	}
}

// TestServeShutdown checks that every way the server ends takes its
// workers with it.
func TestServeShutdown(t *testing.T) {
	create := func(c *rpcClient, n int, params map[string]any) []int {
		for i := 1; i <= n; i++ {
			c.call(i, "create", params)
		}
		var pids []int
		for range n {
			_, m := c.next(2 * time.Minute)
			pids = append(pids, int(m["result"].(map[string]any)["pid"].(float64)))
		}
		return pids
	}
	t.Run("end of input finishes what was read", func(t *testing.T) {
		c := startServer(t)
		pids := create(c, 2, map[string]any{})
		c.call(10, "execute", map[string]any{"sandbox": "s2", "code": "import time\ntime.sleep(0.3)\nprint('done')"})
		c.stdin.Close()
		if _, m := c.next(time.Minute); m["id"] != 10.0 || m["result"].(map[string]any)["stdout"] != "done\n" {
			t.Fatalf("%v", m)
		}
		if code := c.wait(time.Minute); code != 0 {
			t.Fatalf("exit status %d", code)
		}
		waitGone(t, pids, 10*time.Second)
	})
	t.Run("pending bridge call fails at end of input", func(t *testing.T) {
		c := startServer(t)
		create(c, 1, map[string]any{"bridges": []string{"llm_query"}})
		c.call(10, "execute", map[string]any{"sandbox": "s1", "code": "try:\n    llm_query('x')\nexcept BridgeError as e:\n    print(e)"})
		if _, m := c.next(time.Minute); m["method"] != "llm_query" {
			t.Fatalf("%v", m)
		}
		c.stdin.Close()
		if _, m := c.next(time.Minute); !strings.Contains(m["result"].(map[string]any)["stdout"].(string), "closed its input") {
			t.Fatalf("%v", m)
		}
		if code := c.wait(time.Minute); code != 0 {
			t.Fatalf("exit status %d", code)
		}
	})
	t.Run("client gone", func(t *testing.T) {
		c := startServer(t)
		pids := create(c, 2, map[string]any{"timeout_ms": 0})
		c.call(10, "execute", map[string]any{"sandbox": "s1", "code": "while True: pass"})
		c.stdin.Close()
		c.stdout.Close()
		select {
		case <-c.done:
		case <-time.After(time.Minute):
			t.Fatalf("the server still runs after its client went away; stderr:\n%s", c.stderr)
		}
		waitGone(t, pids, 10*time.Second)
	})
	t.Run("SIGTERM", func(t *testing.T) {
		c := startServer(t)
		pids := create(c, 2, map[string]any{"timeout_ms": 0})
		c.call(10, "execute", map[string]any{"sandbox": "s1", "code": "while True: pass"})
		c.call(11, "stats", map[string]any{"sandbox": "s2"})
		c.call(12, "execute", map[string]any{"sandbox": "s1", "code": "print('queued')"})
		c.response(11, time.Minute) // s2 answered while s1 spins
		c.cmd.Process.Signal(syscall.SIGTERM)
		// The running execute and the one queued behind it are answered
		// before the server exits.
		answered := map[float64]bool{}
		for line := range c.lines {
			var m map[string]any
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				t.Fatalf("the server wrote %q", line)
			}
			if code, kind, _ := rpcError(t, m); code != -32004 || kind != "shutdown" || answered[m["id"].(float64)] {
				t.Fatalf("after SIGTERM: %s", line)
			}
			answered[m["id"].(float64)] = true
		}
		if !answered[10] || !answered[12] || len(answered) != 2 {
			t.Fatalf("answered %v after SIGTERM, want 10 and 12; stderr:\n%s", answered, c.stderr)
		}
		<-c.done
		if code := exitStatus(t, c.err); code != 143 {
			t.Fatalf("exit status %d, want 143", code)
		}
		waitGone(t, pids, 10*time.Second)
	})
}

// docsPython finds python3 (or skips the test) and the Python block of
// docs/serve.md that follows marker: its code, and the text before it.
func docsPython(t *testing.T, marker string) (python, before, code string) {
	t.Helper()
	python, err := osexec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	b, err := os.ReadFile("../docs/serve.md")
	if err != nil {
		t.Fatal(err)
	}
	before, rest, ok := strings.Cut(string(b), marker+"\n```python\n")
	if !ok {
		t.Fatalf("docs/serve.md has no %q", marker)
	}
	code, _, _ = strings.Cut(rest, "```")
	return python, before, code
}

// TestServePythonClient runs the Python client of docs/serve.md, with
// bin/ first on $PATH.
func TestServePythonClient(t *testing.T) {
	python, _, code := docsPython(t, "<!-- client: run by tests/serve_test.go -->")
	bin := strings.TrimSuffix(cliBin(t), "/rlm-sandbox")
	cmd := osexec.Command(python, "-c", code)
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || string(out) != "A LONG\n" {
		t.Fatalf("stdout %q, %v; stderr:\n%s", out, err, stderr.String())
	}
}

// TestServeStatsWhileRunning: stats is answered at once while the
// sandbox's code runs (it waited for the execute), and a stats sent right
// after create waits for the create instead of failing.
func TestServeStatsWhileRunning(t *testing.T) {
	c := startServer(t)
	c.call(1, "create", map[string]any{"timeout_ms": 0})
	c.call(2, "stats", map[string]any{"sandbox": "s1"})
	if r, _ := c.response(1, 2*time.Minute)["result"].(map[string]any); r == nil {
		t.Fatal("create failed")
	}
	if r, _ := c.response(2, time.Minute)["result"].(map[string]any); r == nil || r["pid"] == nil || r["pid"].(float64) <= 0 {
		t.Fatalf("stats sent with the create: %v", r)
	}
	c.call(3, "execute", map[string]any{"sandbox": "s1", "code": "while True: pass"})
	c.call(4, "stats", map[string]any{"sandbox": "s1"})
	_, m := c.next(time.Minute) // the stats, while the loop spins
	if r, _ := m["result"].(map[string]any); m["id"] != 4.0 || r == nil || r["executions"] != 0.0 {
		t.Fatalf("while an execute runs, the first answer is %v, want stats with executions 0", m)
	}
	c.call(5, "cancel", map[string]any{"sandbox": "s1"})
	c.response(5, time.Minute)
	if code, kind, _ := rpcError(t, c.response(3, time.Minute)); code != -32002 || kind != "canceled" {
		t.Fatalf("execute: %d %s", code, kind)
	}
	if code := c.wait(time.Minute); code != 0 {
		t.Fatalf("exit status %d", code)
	}
}
