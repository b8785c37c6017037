package tests

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	osexec "os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// listenServer is a running `rlm-sandbox serve --listen`.
type listenServer struct {
	t       *testing.T
	cmd     *osexec.Cmd
	stderr  *watchedBuffer
	network string // "unix" or "tcp"
	addr    string
	metrics string // host:port of --metrics-listen, if given
	done    chan struct{}
	err     error
}

var (
	listeningRe = regexp.MustCompile(`msg=listening addr=(\S+)`)
	metricsRe   = regexp.MustCompile(`msg=metrics addr=(\S+)`)
)

// startListen starts the server with args after `serve` and waits until it
// listens.
func startListen(t *testing.T, args ...string) *listenServer {
	t.Helper()
	return startListenCommand(t, osexec.Command(cliBin(t), append([]string{"serve"}, args...)...), args...)
}

// startListenCommand starts the server with cmd, which runs rlm-sandbox
// serve with args (through a shell, say), and waits until it listens.
func startListenCommand(t *testing.T, cmd *osexec.Cmd, args ...string) *listenServer {
	t.Helper()
	s := &listenServer{t: t, cmd: cmd, stderr: newWatchedBuffer(), done: make(chan struct{}), network: "tcp"}
	s.cmd.Stderr = s.stderr
	for _, a := range args {
		if strings.HasPrefix(a, "unix:") {
			s.network = "unix"
		}
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		s.err = s.cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(func() {
		select {
		case <-s.done:
		default:
			s.cmd.Process.Kill()
			<-s.done
		}
	})
	s.stderr.waitFor(t, "msg=listening", time.Minute)
	s.addr = listeningRe.FindStringSubmatch(s.stderr.String())[1]
	if m := metricsRe.FindStringSubmatch(s.stderr.String()); m != nil {
		s.metrics = m[1]
	}
	return s
}

// exit waits for the server to exit and returns its status.
func (s *listenServer) exit(within time.Duration) int {
	s.t.Helper()
	select {
	case <-s.done:
	case <-time.After(within):
		s.t.Fatalf("the server still runs after %v; stderr:\n%s", within, s.stderr)
	}
	return exitStatus(s.t, s.err)
}

// netClient is one connection to a listenServer.
type netClient struct {
	t      *testing.T
	srv    *listenServer
	conn   net.Conn
	lines  chan string
	nextID int
	// answer answers llm_query bridge requests in request; default "re: "+prompt.
	answer func(prompt string) string
}

func (s *listenServer) dial(t *testing.T) *netClient {
	t.Helper()
	conn, err := net.Dial(s.network, s.addr)
	if err != nil {
		t.Fatal(err)
	}
	return newNetClient(t, s, conn)
}

func newNetClient(t *testing.T, s *listenServer, conn net.Conn) *netClient {
	c := &netClient{t: t, srv: s, conn: conn, lines: make(chan string, 1000)}
	go func() {
		defer close(c.lines)
		sc := bufio.NewScanner(conn)
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() { conn.Close() })
	return c
}

func (c *netClient) send(v any) {
	c.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		c.t.Fatal(err)
	}
	if _, err := c.conn.Write(append(b, '\n')); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// next returns the next message from the server; ok is false when the
// server closed the connection.
func (c *netClient) next(within time.Duration) (m map[string]any, ok bool) {
	c.t.Helper()
	select {
	case line, ok := <-c.lines:
		if !ok {
			return nil, false
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			c.t.Fatalf("the server wrote %q: %v", line, err)
		}
		return m, true
	case <-time.After(within):
		c.t.Fatalf("no message within %v; server stderr:\n%s", within, c.srv.stderr)
	}
	return nil, false
}

// closed waits until the server closes the connection.
func (c *netClient) closed(within time.Duration) {
	c.t.Helper()
	for {
		m, ok := c.next(within)
		if !ok {
			return
		}
		c.t.Logf("after the end: %v", m)
	}
}

// request sends a request and returns its response, answering the
// llm_query requests that come meanwhile.
func (c *netClient) request(method string, params any) map[string]any {
	c.t.Helper()
	c.nextID++
	id := float64(c.nextID)
	c.send(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	for {
		m, ok := c.next(2 * time.Minute)
		if !ok {
			c.t.Fatalf("%s: the server closed the connection; stderr:\n%s", method, c.srv.stderr)
		}
		if m["method"] == "llm_query" {
			c.answerBridge(m)
			continue
		}
		if m["id"] == id {
			return m
		}
		c.t.Fatalf("%s: unexpected message %v", method, m)
	}
}

// startSpinning creates sandbox s1 without a timeout and sends it, as
// request id, code that calls llm_query (answered) and then never ends;
// it returns the worker's pid once the call was answered.
func (c *netClient) startSpinning(t *testing.T, id int) int {
	t.Helper()
	r := resultOf(t, c.request("create", map[string]any{"bridges": []string{"llm_query"}, "timeout_ms": 0}))
	c.send(map[string]any{"jsonrpc": "2.0", "id": id, "method": "execute", "params": map[string]any{"sandbox": "s1",
		"code": "llm_query('spinning')\nwhile True: pass"}})
	m, _ := c.next(time.Minute)
	if m["method"] != "llm_query" {
		t.Fatalf("%v", m)
	}
	c.answerBridge(m)
	return int(r["pid"].(float64))
}

func (c *netClient) answerBridge(m map[string]any) {
	prompt := m["params"].(map[string]any)["prompt"].(string)
	answer := "re: " + prompt
	if c.answer != nil {
		answer = c.answer(prompt)
	}
	c.send(map[string]any{"jsonrpc": "2.0", "id": m["id"], "result": answer})
}

// resultOf returns the result of a response, failing on an error.
func resultOf(t *testing.T, m map[string]any) map[string]any {
	t.Helper()
	r, ok := m["result"].(map[string]any)
	if !ok {
		t.Fatalf("not a result: %v", m)
	}
	return r
}

// rpcErr returns the error code and data.kind of a response.
func rpcErr(t *testing.T, m map[string]any) (code int, data map[string]any) {
	t.Helper()
	e, ok := m["error"].(map[string]any)
	if !ok {
		t.Fatalf("not an error: %v", m)
	}
	data, _ = e["data"].(map[string]any)
	return int(e["code"].(float64)), data
}

const (
	codeShutdown     = -32004
	codeUnauthorized = -32005
	codeBusy         = -32006
	codeNoSuch       = -32003
)

func unixAddr(t *testing.T) string {
	return "unix:" + filepath.Join(t.TempDir(), "s.sock")
}

func TestListenTwoClients(t *testing.T) {
	srv := startListen(t, "--listen", unixAddr(t))
	fi, err := os.Stat(strings.TrimPrefix(srv.addr, "unix:"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode %v, want 0600", fi.Mode().Perm())
	}
	a, b := srv.dial(t), srv.dial(t)
	a.answer = func(p string) string { return "A says " + p }
	b.answer = func(p string) string { return "B says " + p }
	var wg sync.WaitGroup
	pids := map[string][]int{}
	var mu sync.Mutex
	for name, c := range map[string]*netClient{"a": a, "b": b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := 2
			if name == "b" {
				n = 1
			}
			for range n {
				r := resultOf(t, c.request("create", map[string]any{"bridges": []string{"llm_query"}, "context": name}))
				mu.Lock()
				pids[name] = append(pids[name], int(r["pid"].(float64)))
				mu.Unlock()
			}
			for i := range 5 {
				r := resultOf(t, c.request("execute", map[string]any{"sandbox": "s1",
					"code": fmt.Sprintf("print(llm_query(context + ' %d'))", i)}))
				want := fmt.Sprintf("%s says %s %d\n", strings.ToUpper(name), name, i)
				if r["stdout"] != want {
					t.Errorf("%s: stdout %q, want %q", name, r["stdout"], want)
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	// b's s1 is not a's s1; b has no s2.
	if slices.Contains(pids["a"], pids["b"][0]) {
		t.Fatalf("the clients share a worker: %v", pids)
	}
	resultOf(t, a.request("set_variable", map[string]any{"sandbox": "s1", "name": "secret", "value": 42}))
	if r := resultOf(t, b.request("get_variable", map[string]any{"sandbox": "s1", "name": "secret"})); r["found"] != false {
		t.Fatalf("b sees a's variable: %v", r)
	}
	for _, method := range []string{"execute", "destroy", "cancel", "stats"} {
		params := map[string]any{"sandbox": "s2"}
		if method == "execute" {
			params["code"] = "1"
		}
		code, data := rpcErr(t, b.request(method, params))
		if code != codeNoSuch || data["kind"] != "no_such_sandbox" {
			t.Fatalf("b %s on a's s2: code %d %v", method, code, data)
		}
	}
	if r := resultOf(t, a.request("execute", map[string]any{"sandbox": "s2", "code": "print(context)"})); r["stdout"] != "a\n" {
		t.Fatalf("a's s2 after b's attempts: %v", r)
	}
	// a's sandboxes end with a's connection; b's live on.
	a.conn.Close()
	waitGone(t, pids["a"], 30*time.Second)
	if !alive(pids["b"][0]) {
		t.Fatal("b's worker died with a's connection")
	}
	if r := resultOf(t, b.request("execute", map[string]any{"sandbox": "s1", "code": "print(context)"})); r["stdout"] != "b\n" {
		t.Fatalf("%v", r)
	}
}

func TestListenAuth(t *testing.T) {
	t.Run("TCP needs a token", func(t *testing.T) {
		_, stderr, code := runCLI(t, "", "serve", "--listen", "127.0.0.1:0")
		if code != 2 || !strings.Contains(stderr, "--token-file") {
			t.Fatalf("exit %d, stderr %s", code, stderr)
		}
	})
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("s3cret-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := startListen(t, "--listen", "127.0.0.1:0", "--token-file", tokenFile)
	refused := func(t *testing.T, first map[string]any) {
		c := srv.dial(t)
		c.send(first)
		c.send(map[string]any{"jsonrpc": "2.0", "id": 2, "method": "create"})
		m, ok := c.next(time.Minute)
		if !ok {
			t.Fatal("closed without an error")
		}
		if code, data := rpcErr(t, m); code != codeUnauthorized || data["kind"] != "unauthorized" {
			t.Fatalf("%v", m)
		}
		c.closed(time.Minute)
	}
	t.Run("missing", func(t *testing.T) {
		refused(t, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "create"})
	})
	t.Run("wrong", func(t *testing.T) {
		refused(t, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "authenticate", "params": map[string]any{"token": "s3cret-tokeN"}})
	})
	t.Run("empty", func(t *testing.T) {
		refused(t, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "authenticate", "params": map[string]any{}})
	})
	t.Run("long first line", func(t *testing.T) {
		// Refused once past 64 KiB, without waiting for the line to end
		// (it never does): the server does not buffer --max-message
		// bytes for a client without the token.
		c := srv.dial(t)
		go c.conn.Write(bytes.Repeat([]byte("a"), 1<<20)) // fails once the server closes
		m, ok := c.next(time.Minute)
		if !ok {
			t.Fatalf("closed without an error; stderr:\n%s", srv.stderr)
		}
		if code, data := rpcErr(t, m); code != codeUnauthorized || data["kind"] != "unauthorized" || m["id"] != nil {
			t.Fatalf("%v", m)
		}
		c.closed(time.Minute)
	})
	t.Run("wrong after right", func(t *testing.T) {
		// A wrong token later in the session closes it too: the version
		// sent after it is never answered.
		c := srv.dial(t)
		resultOf(t, c.request("authenticate", map[string]any{"token": "s3cret-token"}))
		resultOf(t, c.request("authenticate", map[string]any{"token": "s3cret-token"}))
		c.send(map[string]any{"jsonrpc": "2.0", "id": 3, "method": "authenticate", "params": map[string]any{"token": "guess"}})
		c.send(map[string]any{"jsonrpc": "2.0", "id": 4, "method": "version"})
		m, ok := c.next(time.Minute)
		if !ok {
			t.Fatal("closed without an error")
		}
		if code, data := rpcErr(t, m); code != codeUnauthorized || data["kind"] != "unauthorized" || m["id"] != 3.0 {
			t.Fatalf("%v", m)
		}
		if m, ok := c.next(time.Minute); ok {
			t.Fatalf("answered after a wrong token: %v", m)
		}
	})
	t.Run("right", func(t *testing.T) {
		c := srv.dial(t)
		resultOf(t, c.request("authenticate", map[string]any{"token": "s3cret-token"}))
		resultOf(t, c.request("create", map[string]any{}))
		if r := resultOf(t, c.request("execute", map[string]any{"sandbox": "s1", "code": "print(6*7)"})); r["stdout"] != "42\n" {
			t.Fatalf("%v", r)
		}
	})
	// The server's log is read by another goroutine: the line may come
	// after the answers.
	srv.stderr.waitFor(t, "sandbox started", time.Minute)
	if n := strings.Count(srv.stderr.String(), "sandbox started"); n != 1 {
		t.Fatalf("%d sandboxes started, want only the authenticated client's:\n%s", n, srv.stderr)
	}
}

// testPKI writes a CA, a server certificate for 127.0.0.1 and a client
// certificate, all signed by the CA, as PEM files in dir.
func testPKI(t *testing.T, dir string) (caFile, certFile, keyFile string, client tls.Certificate, roots *x509.CertPool) {
	t.Helper()
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	caKey := newKey()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	issue := func(serial int64, usage x509.ExtKeyUsage, ip bool) ([]byte, *ecdsa.PrivateKey) {
		k := newKey()
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "test"},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
		if ip {
			tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return der, k
	}
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	caFile = write("ca.pem", "CERTIFICATE", caDER)
	srvDER, srvKey := issue(2, x509.ExtKeyUsageServerAuth, true)
	certFile = write("server.pem", "CERTIFICATE", srvDER)
	keyDER, _ := x509.MarshalECPrivateKey(srvKey)
	keyFile = write("server-key.pem", "EC PRIVATE KEY", keyDER)
	cliDER, cliKey := issue(3, x509.ExtKeyUsageClientAuth, false)
	client = tls.Certificate{Certificate: [][]byte{cliDER}, PrivateKey: cliKey}
	roots = x509.NewCertPool()
	roots.AddCert(ca)
	return
}

func TestListenTLS(t *testing.T) {
	dir := t.TempDir()
	caFile, certFile, keyFile, clientCert, roots := testPKI(t, dir)
	tokenFile := filepath.Join(dir, "token")
	os.WriteFile(tokenFile, []byte("tok"), 0o600)
	t.Run("token over TLS", func(t *testing.T) {
		srv := startListen(t, "--listen", "127.0.0.1:0", "--tls-cert", certFile, "--tls-key", keyFile, "--token-file", tokenFile)
		conn, err := tls.Dial("tcp", srv.addr, &tls.Config{RootCAs: roots})
		if err != nil {
			t.Fatal(err)
		}
		c := newNetClient(t, srv, conn)
		resultOf(t, c.request("authenticate", map[string]any{"token": "tok"}))
		resultOf(t, c.request("create", map[string]any{"bridges": []string{"llm_query"}}))
		if r := resultOf(t, c.request("execute", map[string]any{"sandbox": "s1", "code": "print(llm_query('tls'))"})); r["stdout"] != "re: tls\n" {
			t.Fatalf("%v", r)
		}
		// Plain TCP to a TLS port gets no JSON-RPC.
		plain := srv.dial(t)
		plain.send(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "version"})
		if m, ok := plain.next(time.Minute); ok {
			t.Fatalf("plain TCP answered: %v", m)
		}
	})
	t.Run("mutual TLS", func(t *testing.T) {
		srv := startListen(t, "--listen", "127.0.0.1:0", "--tls-cert", certFile, "--tls-key", keyFile, "--client-ca", caFile,
			"--max-connections", "2")
		// A connection without a handshake waits to authenticate: it
		// does not take the place of one with a certificate. The
		// handshake counts a connection toward --max-connections.
		silent := srv.dial(t)
		srv.stderr.waitFor(t, "msg=connected conn=1 ", time.Minute)
		mtls := func() *netClient {
			conn, err := tls.Dial("tcp", srv.addr, &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{clientCert}})
			if err != nil {
				t.Fatal(err)
			}
			return newNetClient(t, srv, conn)
		}
		for range 2 {
			if r := resultOf(t, mtls().request("version", nil)); r["protocol"] != 1.0 {
				t.Fatalf("%v", r)
			}
		}
		c := mtls()
		if m, ok := c.next(time.Minute); !ok {
			t.Fatal("closed without an error")
		} else if code, data := rpcErr(t, m); code != codeBusy || data["limit"] != "max_connections" {
			t.Fatalf("%v", m)
		}
		c.closed(time.Minute)
		c.conn.Close()
		silent.conn.Close()
		srv.stderr.waitFor(t, "msg=disconnected conn=1 ", time.Minute)
		srv.stderr.waitFor(t, "msg=disconnected conn=4 ", time.Minute)
		// Without a client certificate, the handshake fails: nothing is answered.
		conn2, err := tls.Dial("tcp", srv.addr, &tls.Config{RootCAs: roots})
		if err == nil {
			c2 := newNetClient(t, srv, conn2)
			c2.send(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "version"})
			if m, ok := c2.next(time.Minute); ok {
				t.Fatalf("a client without a certificate was answered: %v", m)
			}
		}
	})
}

func TestListenLimits(t *testing.T) {
	srv := startListen(t, "--listen", unixAddr(t), "--max-connections", "1", "--max-sandboxes", "2", "--max-sandboxes-per-connection", "2")
	a := srv.dial(t)
	resultOf(t, a.request("version", nil)) // a is registered before b connects
	b := srv.dial(t)
	m, ok := b.next(time.Minute)
	if !ok {
		t.Fatal("the second connection was closed without an error")
	}
	if code, data := rpcErr(t, m); code != codeBusy || data["limit"] != "max_connections" || data["retry_after_ms"].(float64) <= 0 {
		t.Fatalf("%v", m)
	}
	b.closed(time.Minute)

	r1 := resultOf(t, a.request("create", map[string]any{}))
	resultOf(t, a.request("create", map[string]any{}))
	m = a.request("create", map[string]any{})
	if code, data := rpcErr(t, m); code != codeBusy || data["kind"] != "busy" || data["limit"] != "max_sandboxes" || data["retry_after_ms"].(float64) <= 0 {
		t.Fatalf("%v", m)
	}
	resultOf(t, a.request("destroy", map[string]any{"sandbox": "s1"}))
	waitGone(t, []int{int(r1["pid"].(float64))}, 30*time.Second)
	resultOf(t, a.request("create", map[string]any{}))

	// Requests in flight per connection. cancel, destroy and version are
	// answered at the limit too: they are how a client there makes room.
	t.Run("in flight", func(t *testing.T) {
		srv := startListen(t, "--listen", unixAddr(t), "--max-inflight", "1", "--metrics-listen", "127.0.0.1:0")
		c := srv.dial(t)
		resultOf(t, c.request("create", map[string]any{"bridges": []string{"llm_query"}}))
		// execute sends the request with id and returns the llm_query
		// call it makes; the connection is then at its limit.
		execute := func(id int) map[string]any {
			t.Helper()
			c.send(map[string]any{"jsonrpc": "2.0", "id": id, "method": "execute", "params": map[string]any{"sandbox": "s1", "code": "print(llm_query('x'))"}})
			bridge, _ := c.next(time.Minute)
			if bridge["method"] != "llm_query" {
				t.Fatalf("%v", bridge)
			}
			return bridge
		}
		// response reads up to the response to id, keeping the others
		// (the withdrawal of a bridge call comes before an answer).
		seen := map[float64]map[string]any{}
		response := func(id int) map[string]any {
			t.Helper()
			for seen[float64(id)] == nil {
				m, ok := c.next(time.Minute)
				if !ok {
					t.Fatalf("no response to %d", id)
				}
				if id, ok := m["id"].(float64); ok && m["method"] == nil {
					seen[id] = m
				}
			}
			return seen[float64(id)]
		}
		// atOnce sends a request that must be answered at the limit.
		atOnce := func(id int, method string, params any) {
			t.Helper()
			c.send(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
			if m := response(id); m["error"] != nil {
				t.Fatalf("%s at the limit: %v", method, m)
			}
		}
		bridge := execute(100)
		if code, data := rpcErr(t, c.request("get_variable", map[string]any{"sandbox": "s1", "name": "x"})); code != codeBusy || data["limit"] != "max_inflight" {
			t.Fatalf("code %d %v", code, data)
		}
		atOnce(200, "version", nil)
		c.answerBridge(bridge)
		if m := response(100); m["error"] != nil {
			t.Fatalf("%v", m)
		}
		resultOf(t, c.request("get_variable", map[string]any{"sandbox": "s1", "name": "x"}))

		execute(101)
		atOnce(201, "cancel", map[string]any{"sandbox": "s1"})
		if code, _ := rpcErr(t, response(101)); code != -32002 {
			t.Fatalf("the execute after cancel: code %d, want -32002 (canceled)", code)
		}
		execute(102)
		atOnce(202, "destroy", map[string]any{"sandbox": "s1"})
		if code, _ := rpcErr(t, response(102)); code != -32003 {
			t.Fatalf("the execute after destroy: code %d, want -32003 (destroyed)", code)
		}
		if m := scrape(t, srv.metrics); m[`rlm_sandbox_rejected_total{reason="max_inflight"}`] != 1 {
			t.Errorf("rejected_total for max_inflight = %v, want 1", m[`rlm_sandbox_rejected_total{reason="max_inflight"}`])
		}
	})
	t.Run("memory budget", func(t *testing.T) {
		srv := startListen(t, "--listen", unixAddr(t), "--memory-budget", "1M")
		c := srv.dial(t)
		if code, data := rpcErr(t, c.request("create", map[string]any{})); code != codeBusy || data["limit"] != "memory_budget" || data["retry_after_ms"].(float64) <= 0 {
			t.Fatalf("code %d %v", code, data)
		}
		if strings.Contains(srv.stderr.String(), "sandbox started") {
			t.Fatalf("a sandbox started over the budget:\n%s", srv.stderr)
		}
	})
	// The budget sees what code that runs for long allocates: the workers
	// are measured while it runs, not only when an execute ends.
	t.Run("memory budget while code runs", func(t *testing.T) {
		srv := startListen(t, "--listen", unixAddr(t), "--memory-budget", "250M", "--metrics-listen", "127.0.0.1:0")
		c := srv.dial(t)
		resultOf(t, c.request("create", map[string]any{"bridges": []string{"llm_query"}}))
		c.send(map[string]any{"jsonrpc": "2.0", "id": 100, "method": "execute", "params": map[string]any{"sandbox": "s1",
			"code": "x = b'1' * (300 << 20)\nprint(len(x), llm_query('hold'))"}})
		bridge, _ := c.next(time.Minute)
		if bridge["method"] != "llm_query" {
			t.Fatalf("%v", bridge)
		}
		// The execute now waits for the answer, its 300 MB allocated.
		deadline := time.Now().Add(time.Minute)
		for scrape(t, srv.metrics)["rlm_sandbox_worker_rss_bytes"] < 300<<20 {
			if time.Now().After(deadline) {
				t.Fatalf("the worker's RSS was not measured while its code ran: %v", scrape(t, srv.metrics)["rlm_sandbox_worker_rss_bytes"])
			}
			time.Sleep(50 * time.Millisecond) // polling the metrics: nothing to wait on
		}
		if code, data := rpcErr(t, c.request("create", map[string]any{})); code != codeBusy || data["limit"] != "memory_budget" {
			t.Fatalf("a create over the budget: code %d %v", code, data)
		}
		c.answerBridge(bridge)
		if m, _ := c.next(time.Minute); m["id"] != 100.0 || resultOf(t, m)["stdout"] != fmt.Sprintf("%d re: hold\n", 300<<20) {
			t.Fatalf("%v", m)
		}
	})
	t.Run("max output", func(t *testing.T) {
		// The server holds an execution's output up to max_output
		// characters a stream: --max-output-limit bounds what a create
		// may ask, no cap (negative) included.
		srv := startListen(t, "--listen", unixAddr(t), "--max-output-limit", "100000")
		c := srv.dial(t)
		for _, mo := range []int{-1, 100001} {
			if code, _ := rpcErr(t, c.request("create", map[string]any{"max_output": mo})); code != -32602 {
				t.Fatalf("max_output %d: code %d, want -32602", mo, code)
			}
		}
		resultOf(t, c.request("create", map[string]any{"max_output": 100000}))
		second, _ := resultOf(t, c.request("create", map[string]any{}))["sandbox"].(string)
		// The log line may come after the answer: wait for it.
		srv.stderr.waitFor(t, "sandbox="+second+" worker_pid=", time.Minute)
		if n := strings.Count(srv.stderr.String(), "sandbox started"); n != 2 {
			t.Fatalf("%d sandboxes started, want 2:\n%s", n, srv.stderr)
		}
	})
	// A line longer than --max-message is not held: a request gets its
	// error by its id and a bridge call's answer fails the call, and the
	// session goes on; a line with no id to answer by ends it.
	t.Run("message size", func(t *testing.T) {
		srv := startListen(t, "--listen", unixAddr(t), "--max-message", "4K", "--metrics-listen", "127.0.0.1:0")
		c := srv.dial(t)
		m := c.request("create", map[string]any{"context": strings.Repeat("x", 5000)})
		if code, data := rpcErr(t, m); code != -32600 || data["kind"] != "message_too_large" {
			t.Fatalf("%v", m)
		}
		resultOf(t, c.request("create", map[string]any{"bridges": []string{"llm_query"}}))
		c.answer = func(prompt string) string {
			if prompt == "big" {
				return strings.Repeat("y", 5000)
			}
			return "re: " + prompt
		}
		r := resultOf(t, c.request("execute", map[string]any{"sandbox": "s1",
			"code": "try:\n    llm_query('big')\nexcept BridgeError as e:\n    print(repr(e))\nprint(llm_query('small'))"}))
		if out, _ := r["stdout"].(string); !strings.Contains(out, "BridgeError(") || !strings.Contains(out, "--max-message") || !strings.HasSuffix(out, "re: small\n") {
			t.Fatalf("%v", r)
		}
		c.send(map[string]any{"jsonrpc": "2.0", "method": "set_variable", "params": map[string]any{"sandbox": "s1", "name": "v", "value": strings.Repeat("z", 5000)}})
		m, ok := c.next(time.Minute)
		if !ok {
			t.Fatal("closed without an error")
		}
		if _, data := rpcErr(t, m); data["kind"] != "message_too_large" || m["id"] != nil {
			t.Fatalf("%v", m)
		}
		c.closed(time.Minute)
		if got := scrape(t, srv.metrics)[`rlm_sandbox_rejected_total{reason="max_message"}`]; got != 3 {
			t.Errorf("rejected_total for max_message = %v, want 3", got)
		}
	})
}

// TestListenUnauthenticated: with a token, a connection counts toward
// --max-connections once it has authenticated, and the connections
// waiting to authenticate are bounded apart (as many as
// --max-connections): a silent connection does not take the place of a
// client that authenticates.
func TestListenUnauthenticated(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("tok"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := startListen(t, "--listen", unixAddr(t), "--token-file", tokenFile, "--max-connections", "2", "--metrics-listen", "127.0.0.1:0")
	auth := func(c *netClient) map[string]any { return c.request("authenticate", map[string]any{"token": "tok"}) }
	a := srv.dial(t) // conn=1
	resultOf(t, auth(a))
	silent := srv.dial(t) // conn=2
	srv.stderr.waitFor(t, "msg=connected conn=2 ", time.Minute)
	b := srv.dial(t) // conn=3: the second to authenticate, next to a silent one
	resultOf(t, auth(b))
	resultOf(t, b.request("version", nil))

	// A third client to authenticate is refused, in the answer to its authenticate.
	c := srv.dial(t) // conn=4
	if code, data := rpcErr(t, auth(c)); code != codeBusy || data["limit"] != "max_connections" {
		t.Fatalf("code %d %v", code, data)
	}
	c.closed(time.Minute)
	c.conn.Close()
	srv.stderr.waitFor(t, "msg=disconnected conn=4 ", time.Minute)

	// Two may wait to authenticate: silent and silent2; a third is refused at once.
	silent2 := srv.dial(t) // conn=5
	srv.stderr.waitFor(t, "msg=connected conn=5 ", time.Minute)
	d := srv.dial(t) // conn=6
	m, ok := d.next(time.Minute)
	if !ok {
		t.Fatal("closed without an error")
	}
	if code, data := rpcErr(t, m); code != codeBusy || data["limit"] != "max_unauthenticated" || m["id"] != nil {
		t.Fatalf("%v", m)
	}
	d.closed(time.Minute)
	met := scrape(t, srv.metrics)
	for k, v := range map[string]float64{
		"rlm_sandbox_connections":                                  2,
		"rlm_sandbox_connections_unauthenticated":                  2,
		`rlm_sandbox_rejected_total{reason="max_connections"}`:     1,
		`rlm_sandbox_rejected_total{reason="max_unauthenticated"}`: 1,
	} {
		if got, ok := met[k]; !ok || got != v {
			t.Errorf("%s = %v (present %v), want %v", k, got, ok, v)
		}
	}

	// Once a has gone, a connection that waited may take its place.
	a.conn.Close()
	srv.stderr.waitFor(t, "msg=disconnected conn=1 ", time.Minute)
	resultOf(t, auth(silent))
	resultOf(t, silent.request("version", nil))
	silent2.conn.Close()
}

// TestListenOutOfFiles: when the server runs out of file descriptors, it
// logs the failed accept and retries, and serves new clients once some
// connections have closed (it used to end, with status 0, at the first
// such failure).
func TestListenOutOfFiles(t *testing.T) {
	const nofile = 64
	args := []string{"serve", "--listen", unixAddr(t)}
	// The limit is set by a shell: both soft and hard, so that the Go
	// runtime cannot raise it.
	cmd := osexec.Command("sh", append([]string{"-c", fmt.Sprintf(`ulimit -n %d && exec "$0" "$@"`, nofile), cliBin(t)}, args...)...)
	srv := startListenCommand(t, cmd, args[1:]...)
	var idle []net.Conn
	for range nofile { // more than the server has descriptors left
		c, err := net.Dial("unix", srv.addr) // the kernel queues what the server does not accept
		if err != nil {
			t.Fatal(err)
		}
		idle = append(idle, c)
	}
	srv.stderr.waitFor(t, `msg="accept failed; retrying"`, time.Minute)
	for _, c := range idle {
		c.Close()
	}
	c := srv.dial(t)
	if r := resultOf(t, c.request("version", nil)); r["protocol"] != 1.0 {
		t.Fatalf("%v", r)
	}
	srv.cmd.Process.Signal(syscall.SIGTERM)
	if code := srv.exit(time.Minute); code != 0 {
		t.Fatalf("exit status %d; stderr:\n%s", code, srv.stderr)
	}
}

func TestListenDisconnectMidExecute(t *testing.T) {
	srv := startListen(t, "--listen", unixAddr(t))
	c := srv.dial(t)
	pid := c.startSpinning(t, 99)
	c.conn.Close()
	waitGone(t, []int{pid}, 30*time.Second)
	srv.stderr.waitFor(t, "msg=disconnected", time.Minute)
	// The server serves on.
	c2 := srv.dial(t)
	resultOf(t, c2.request("version", nil))
}

func TestListenDrain(t *testing.T) {
	t.Run("running execute finishes", func(t *testing.T) {
		srv := startListen(t, "--listen", unixAddr(t), "--drain-timeout", "2m")
		c := srv.dial(t)
		r := resultOf(t, c.request("create", map[string]any{"bridges": []string{"llm_query"}}))
		pid := int(r["pid"].(float64))
		c.send(map[string]any{"jsonrpc": "2.0", "id": 50, "method": "execute", "params": map[string]any{"sandbox": "s1",
			"code": "a = llm_query('started')\nimport time\ntime.sleep(0.2)\nprint(a, 'finished')"}})
		m, _ := c.next(time.Minute)
		if m["method"] != "llm_query" {
			t.Fatalf("%v", m)
		}
		srv.cmd.Process.Signal(syscall.SIGTERM)
		srv.stderr.waitFor(t, "msg=draining", time.Minute)
		// New work is refused while draining; what runs goes on.
		c.send(map[string]any{"jsonrpc": "2.0", "id": 51, "method": "create"})
		if m, _ := c.next(time.Minute); m["id"] != 51.0 {
			t.Fatalf("%v", m)
		} else if code, _ := rpcErr(t, m); code != codeShutdown {
			t.Fatalf("%v", m)
		}
		if _, err := net.Dial("unix", srv.addr); err == nil {
			t.Error("a new connection was accepted while draining")
		}
		c.answerBridge(m)
		m, _ = c.next(time.Minute)
		if m["id"] != 50.0 || resultOf(t, m)["stdout"] != "re: started finished\n" {
			t.Fatalf("%v", m)
		}
		c.closed(time.Minute)
		if code := srv.exit(time.Minute); code != 0 {
			t.Fatalf("exit status %d; stderr:\n%s", code, srv.stderr)
		}
		waitGone(t, []int{pid}, 30*time.Second)
	})
	t.Run("drain timeout", func(t *testing.T) {
		srv := startListen(t, "--listen", unixAddr(t), "--drain-timeout", "500ms")
		c := srv.dial(t)
		pid := c.startSpinning(t, 50)
		srv.cmd.Process.Signal(syscall.SIGTERM)
		c.closed(time.Minute)
		if code := srv.exit(time.Minute); code != 0 {
			t.Fatalf("exit status %d; stderr:\n%s", code, srv.stderr)
		}
		if !strings.Contains(srv.stderr.String(), "drain timeout") {
			t.Fatalf("stderr:\n%s", srv.stderr)
		}
		waitGone(t, []int{pid}, 30*time.Second)
	})
}

// scrape returns the metrics without labels' spaces: "name{labels}" → value.
func scrape(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	out := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err == nil {
			out[line[:i]] = v
		}
	}
	return out
}

func httpStatus(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestListenMetrics(t *testing.T) {
	srv := startListen(t, "--listen", unixAddr(t), "--metrics-listen", "127.0.0.1:0", "--max-sandboxes", "2")
	if code := httpStatus(t, "http://"+srv.metrics+"/healthz"); code != 200 {
		t.Fatalf("/healthz %d", code)
	}
	c := srv.dial(t)
	resultOf(t, c.request("create", map[string]any{"bridges": []string{"llm_query"}}))
	resultOf(t, c.request("create", map[string]any{}))
	if code, _ := rpcErr(t, c.request("create", map[string]any{})); code != codeBusy {
		t.Fatalf("third create: %d", code)
	}
	if code := httpStatus(t, "http://"+srv.metrics+"/readyz"); code != 503 {
		t.Fatalf("/readyz at --max-sandboxes: %d", code)
	}
	resultOf(t, c.request("execute", map[string]any{"sandbox": "s1", "code": "llm_query('a')"}))
	resultOf(t, c.request("execute", map[string]any{"sandbox": "s1", "code": "llm_query('b')"}))
	if r := resultOf(t, c.request("execute", map[string]any{"sandbox": "s2", "code": "1/0"})); r["error_type"] != "ZeroDivisionError" {
		t.Fatalf("%v", r)
	}
	resultOf(t, c.request("destroy", map[string]any{"sandbox": "s2"}))
	m := scrape(t, srv.metrics)
	want := map[string]float64{
		"rlm_sandbox_sandboxes_created_total":                  2,
		"rlm_sandbox_sandboxes_destroyed_total":                1,
		"rlm_sandbox_sandboxes_failed_total":                   0,
		"rlm_sandbox_sandboxes_live":                           1,
		`rlm_sandbox_executions_total{outcome="ok"}`:           2,
		`rlm_sandbox_executions_total{outcome="exception"}`:    1,
		"rlm_sandbox_execute_seconds_count":                    3,
		`rlm_sandbox_bridge_seconds_count{method="llm_query"}`: 2,
		`rlm_sandbox_rejected_total{reason="max_sandboxes"}`:   1,
		"rlm_sandbox_connections":                              1,
		"rlm_sandbox_connections_total":                        1,
	}
	for k, v := range want {
		if got, ok := m[k]; !ok || got != v {
			t.Errorf("%s = %v (present %v), want %v", k, got, ok, v)
		}
	}
	// s1's worker was measured after its create and its executes.
	if rss := m["rlm_sandbox_worker_rss_bytes"]; rss < 10<<20 || rss > 2<<30 {
		t.Errorf("rlm_sandbox_worker_rss_bytes = %v", rss)
	}
	if code := httpStatus(t, "http://"+srv.metrics+"/readyz"); code != 200 {
		t.Fatalf("/readyz below the limits: %d", code)
	}
	c.conn.Close()
	srv.stderr.waitFor(t, "msg=disconnected", time.Minute)
	m = scrape(t, srv.metrics)
	if m["rlm_sandbox_sandboxes_live"] != 0 || m["rlm_sandbox_sandboxes_destroyed_total"] != 2 || m["rlm_sandbox_connections"] != 0 {
		t.Errorf("after the disconnect: live %v destroyed %v connections %v", m["rlm_sandbox_sandboxes_live"],
			m["rlm_sandbox_sandboxes_destroyed_total"], m["rlm_sandbox_connections"])
	}
}

func TestListenWarmPool(t *testing.T) {
	srv := startListen(t, "--listen", unixAddr(t), "--metrics-listen", "127.0.0.1:0", "--pool", "2")
	// /readyz waits for the pool: poll it (nothing else says when the pool is full).
	waitFull := func() {
		t.Helper()
		for deadline := time.Now().Add(time.Minute); httpStatus(t, "http://"+srv.metrics+"/readyz") != 200; {
			if time.Now().After(deadline) {
				t.Fatalf("/readyz not 200 after a minute; stderr:\n%s", srv.stderr)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// Full, the pool keeps --pool workers, and starts no other until a
	// create takes one.
	workers := func(want int) {
		t.Helper()
		if pids := childPIDs(t, srv.cmd.Process.Pid); len(pids) != want {
			t.Fatalf("%d worker processes %v, want %d; stderr:\n%s", len(pids), pids, want, srv.stderr)
		}
	}
	waitFull()
	workers(2)
	if idle := scrape(t, srv.metrics)["rlm_sandbox_pool_idle"]; idle != 2 {
		t.Fatalf("pool_idle %v once ready", idle)
	}
	c := srv.dial(t)
	// The pooled sandbox gets this session's bridges, stream and context.
	r := resultOf(t, c.request("create", map[string]any{"bridges": []string{"llm_query"}, "context": "ctx", "stream": true}))
	if pooled := fmt.Sprintf("pool=true worker_pid=%d ", int(r["pid"].(float64))); !strings.Contains(srv.stderr.String(), pooled) {
		t.Fatalf("the sandbox (pid %v) is not one of the pool's:\n%s", r["pid"], srv.stderr)
	}
	waitFull()
	workers(3) // the one taken, and two idle
	c.nextID++
	c.send(map[string]any{"jsonrpc": "2.0", "id": c.nextID, "method": "execute", "params": map[string]any{"sandbox": "s1", "code": "print(llm_query(context))"}})
	var streamed string
	for {
		m, _ := c.next(time.Minute)
		if m["method"] == "llm_query" {
			c.answerBridge(m)
			continue
		}
		if m["method"] == "output" {
			streamed = m["params"].(map[string]any)["line"].(string)
			continue
		}
		if resultOf(t, m)["stdout"] != "re: ctx\n" {
			t.Fatalf("%v", m)
		}
		break
	}
	if streamed != "re: ctx" {
		t.Fatalf("streamed %q", streamed)
	}
}

// TestListenLoad: 8 connections × 4 sandboxes × 200 executes, each making
// an llm_query its client answers; no failure allowed. It logs the
// throughput and the latency percentiles of execute seen by the clients.
func TestListenLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("load test")
	}
	const conns, sandboxes, executes = 8, 4, 200
	srv := startListen(t, "--listen", "127.0.0.1:0", "--insecure-no-auth")
	clients := make([]*netClient, conns)
	for i := range clients {
		clients[i] = srv.dial(t)
		for range sandboxes {
			resultOf(t, clients[i].request("create", map[string]any{"bridges": []string{"llm_query"}}))
		}
	}
	var mu sync.Mutex
	var latencies []time.Duration
	var wg sync.WaitGroup
	start := time.Now()
	for ci, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lat := make([]time.Duration, 0, sandboxes*executes)
			sent := map[float64]time.Time{}
			want := map[float64]string{}
			left := map[string]int{}
			id := 0.0
			execute := func(sb string) {
				id++
				sent[id] = time.Now()
				want[id] = fmt.Sprintf("re: c%d %s %d\n", ci, sb, left[sb])
				c.send(map[string]any{"jsonrpc": "2.0", "id": id, "method": "execute", "params": map[string]any{
					"sandbox": sb, "code": fmt.Sprintf("print(llm_query('c%d %s %d'))", ci, sb, left[sb])}})
				left[sb]--
			}
			sbOf := map[float64]string{}
			for s := 1; s <= sandboxes; s++ {
				sb := fmt.Sprintf("s%d", s)
				left[sb] = executes
				execute(sb)
				sbOf[id] = sb
			}
			for done := 0; done < sandboxes*executes; {
				m, ok := c.next(2 * time.Minute)
				if !ok {
					t.Errorf("connection %d closed", ci)
					return
				}
				if m["method"] == "llm_query" {
					c.answerBridge(m)
					continue
				}
				rid := m["id"].(float64)
				r, ok := m["result"].(map[string]any)
				if !ok || r["stdout"] != want[rid] {
					t.Errorf("connection %d: %v, want stdout %q", ci, m, want[rid])
					return
				}
				lat = append(lat, time.Since(sent[rid]))
				done++
				if sb := sbOf[rid]; left[sb] > 0 {
					execute(sb)
					sbOf[id] = sb
				}
			}
			mu.Lock()
			latencies = append(latencies, lat...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if t.Failed() {
		return
	}
	if n := len(latencies); n != conns*sandboxes*executes {
		t.Fatalf("%d executes answered", n)
	}
	slices.Sort(latencies)
	pct := func(p float64) time.Duration { return latencies[int(p*float64(len(latencies)-1))] }
	t.Logf("%d executes with llm_query over %d connections × %d sandboxes in %v: %.0f executes/s; latency p50 %v p90 %v p99 %v max %v",
		len(latencies), conns, sandboxes, elapsed.Round(time.Millisecond), float64(len(latencies))/elapsed.Seconds(),
		pct(0.5).Round(time.Microsecond), pct(0.9).Round(time.Microsecond), pct(0.99).Round(time.Microsecond),
		latencies[len(latencies)-1].Round(time.Microsecond))
}

// TestListenDocumentedClient runs the Unix socket example of docs/serve.md
// and compares its output with the documented one.
func TestListenDocumentedClient(t *testing.T) {
	python, before, code := docsPython(t, "<!-- listen-client: run by tests/serve_listen_test.go -->")
	// The documented output: the lines after "$ python3 client.py" up to the next prompt.
	_, shown, ok := strings.Cut(before, "$ python3 client.py\n")
	if !ok {
		t.Fatal("docs/serve.md shows no run of client.py")
	}
	want, _, _ := strings.Cut(shown, "$ ")
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("doc-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := unixAddr(t)
	srv := startListen(t, "--listen", addr, "--token-file", tokenFile)
	cmd := osexec.Command(python, "-c", code)
	cmd.Env = append(os.Environ(), "RLM_SOCKET="+strings.TrimPrefix(addr, "unix:"), "RLM_TOKEN_FILE="+tokenFile)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || string(out) != want {
		t.Fatalf("stdout %q, want %q, %v; stderr:\n%s", out, want, err, stderr.String())
	}
	srv.stderr.waitFor(t, "msg=disconnected", time.Minute)
	srv.cmd.Process.Signal(syscall.SIGTERM)
	if code := srv.exit(time.Minute); code != 0 {
		t.Fatalf("exit status %d", code)
	}
}

// TestListenJSONLogs: with --log-format json every log line is a JSON
// object; the listening and connection events are there.
func TestListenJSONLogs(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s.sock")
	stderr := newWatchedBuffer()
	cmd := osexec.Command(cliBin(t), "serve", "--listen", "unix:"+sock, "--log-format", "json")
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	stderr.waitFor(t, `"msg":"listening"`, time.Minute)
	srv := &listenServer{t: t, stderr: stderr, network: "unix", addr: sock}
	c := srv.dial(t)
	resultOf(t, c.request("create", map[string]any{}))
	c.conn.Close()
	stderr.waitFor(t, `"msg":"disconnected"`, time.Minute)
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%v; stderr:\n%s", err, stderr)
	}
	var msgs []string
	for _, line := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("not JSON: %q", line)
		}
		msgs = append(msgs, fmt.Sprint(m["msg"]))
		if m["msg"] == "sandbox started" && (m["conn"] != 1.0 || m["sandbox"] != "s1") {
			t.Errorf("sandbox log without its connection and id: %v", m)
		}
	}
	for _, want := range []string{"listening", "connected", "sandbox started", "disconnected", "draining", "stopped"} {
		if !slices.Contains(msgs, want) {
			t.Errorf("no %q log in %q", want, msgs)
		}
	}
}

func TestListenFlags(t *testing.T) {
	for _, args := range [][]string{
		{"serve", "--stdio", "--max-sandboxes", "3"},
		{"serve", "--stdio", "--listen", "unix:/tmp/x.sock"},
		{"serve", "--listen", "127.0.0.1:0", "--tls-cert", "/nonexistent"},
		{"serve", "--listen", "unix:/tmp/x.sock", "--log-format", "xml"},
		{"serve", "--listen", "unix:/tmp/x.sock", "--max-output-limit", "1000"}, // below the default max_output
		{"serve", "--stdio", "--max-output-limit", "100000"},
	} {
		_, stderr, code := runCLI(t, "", args...)
		if code != 2 {
			t.Errorf("%q: exit %d, want 2; stderr %s", args, code, stderr)
		}
	}
	// A bad address is a usage error that names the flag and the forms it takes.
	for _, tc := range []struct{ flag, value string }{
		{"--listen", "foo"},
		{"--listen", "/tmp/x.sock"},
		{"--listen", "unix:"},
		{"--listen", "unix:@abstract"},
		{"--listen", "127.0.0.1:99999"},
		{"--metrics-listen", "foo"},
	} {
		args := []string{"serve", tc.flag, tc.value}
		if tc.flag != "--listen" {
			args = append(args, "--listen", unixAddr(t))
		}
		_, stderr, code := runCLI(t, "", args...)
		if code != 2 || !strings.Contains(stderr, tc.flag+` "`+tc.value+`"`) || !strings.Contains(stderr, "HOST:PORT") {
			t.Errorf("%s %s: exit %d, want 2 and an error naming the flag and HOST:PORT; stderr %s", tc.flag, tc.value, code, stderr)
		}
	}
}
