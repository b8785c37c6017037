package distload

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// The helper process: loads the synthetic distribution from $DISTLOAD_URL
// into the cache $DISTLOAD_CACHE, printing "waiting" when it has to wait
// for the other process's lock.
func TestMain(m *testing.M) {
	if os.Getenv("DISTLOAD_HELPER") == "1" {
		os.Exit(helper())
	}
	os.Exit(m.Run())
}

func helper() int {
	TestHookLockWait = func(key string) { fmt.Println("waiting", key) }
	d, err := Load(context.Background(), opts(os.Getenv("DISTLOAD_CACHE"), os.Getenv("DISTLOAD_URL")))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for _, name := range testFiles {
		if string(d.Files[name]) != string(testContent(name)) {
			fmt.Fprintln(os.Stderr, name, "differs")
			return 1
		}
	}
	fmt.Println("loaded from", d.Entry)
	return 0
}

// TestTwoProcessesFillEmptyCache starts two processes at once on an empty
// cache. The server holds the first download until the other process is
// waiting for its lock, so the two really contend; each file must be
// downloaded once and the cache must hold each file once, complete.
func TestTwoProcessesFillEmptyCache(t *testing.T) {
	cache := t.TempDir()
	waiting := make(chan struct{})
	var waitOnce sync.Once
	var first sync.Once
	files := http.StripPrefix("/dist/", http.FileServer(http.Dir(writeDist(t, nil))))
	srv := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		first.Do(func() {
			select {
			case <-waiting:
			case <-time.After(time.Minute):
				t.Error("the second process never waited for the lock")
			}
		})
		files.ServeHTTP(w, r)
	}))

	var wg sync.WaitGroup
	outs := make([]string, 2)
	for i := range outs {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "DISTLOAD_HELPER=1", "DISTLOAD_CACHE="+cache, "DISTLOAD_URL="+srv.index())
		var stderr strings.Builder
		cmd.Stderr = &stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var out strings.Builder
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				if strings.HasPrefix(sc.Text(), "waiting") {
					waitOnce.Do(func() { close(waiting) })
				}
				out.WriteString(sc.Text() + "\n")
			}
			if err := cmd.Wait(); err != nil {
				t.Errorf("process %d: %v\n%s", i, err, stderr.String())
			}
			outs[i] = out.String()
		}()
	}
	wg.Wait()
	t.Logf("process outputs: %q", outs)
	if n := srv.requests.Load(); n != int64(len(testFiles)) {
		t.Errorf("%d downloads, want %d", n, len(testFiles))
	}
	blobs, err := os.ReadDir(filepath.Join(cache, "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	if len(blobs) != 2*len(testFiles) { // each blob and its .crc
		t.Errorf("cache holds %d files, want %d: %v", len(blobs), 2*len(testFiles), blobs)
	}
	c := OpenCache(cache)
	for _, name := range testFiles {
		if _, ok := c.Get(sum(testContent(name))); !ok {
			t.Errorf("%s missing from the cache", name)
		}
	}
}
