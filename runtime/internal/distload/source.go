package distload

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// source is one parsed entry: a local directory (a path or a file:// URL)
// or an http(s):// base URL.
type source struct {
	dir  string // local directory, or ""
	base string // http(s) URL ending in "/", or ""
}

func parseEntry(entry string) (source, error) {
	if entry == "" {
		return source{}, errors.New("empty index URL")
	}
	u, err := url.Parse(entry)
	if err != nil || u.Scheme == "" || len(u.Scheme) == 1 { // a path (or a Windows drive letter)
		return source{dir: entry}, nil
	}
	switch u.Scheme {
	case "file":
		if u.Host != "" && u.Host != "localhost" {
			return source{}, fmt.Errorf("file URL with a host (%q) is not supported", u.Host)
		}
		if u.Path == "" {
			return source{}, errors.New("file URL without a path")
		}
		return source{dir: filepath.FromSlash(u.Path)}, nil
	case "http", "https":
		if u.Host == "" {
			return source{}, errors.New("URL without a host")
		}
		u.RawQuery, u.Fragment = "", ""
		if !strings.HasSuffix(u.Path, "/") {
			u.Path += "/"
			u.RawPath = ""
		}
		return source{base: u.String()}, nil
	}
	return source{}, fmt.Errorf("unsupported URL scheme %q (want a directory, file://, http:// or https://)", u.Scheme)
}

func (s source) local() bool { return s.dir != "" }

func (s source) url(name string) string {
	if s.local() {
		return filepath.Join(s.dir, name)
	}
	return s.base + url.PathEscape(name)
}

func (s source) read(name string) ([]byte, error) {
	f, err := os.Open(filepath.Join(s.dir, name))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("no %s in %s", name, s.dir)
		}
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
		if st.Size() > maxFileSize {
			return nil, fmt.Errorf("%s: %d bytes, more than the %d accepted", name, st.Size(), maxFileSize)
		}
		// One allocation of the right size, not io.ReadAll's doublings.
		b := make([]byte, st.Size())
		if _, err := io.ReadFull(f, b); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		return b, nil
	}
	return readCapped(f, name)
}

func (s source) fetch(ctx context.Context, c *http.Client, name string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url(name), nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: HTTP %s", name, resp.Status)
	}
	if resp.ContentLength > maxFileSize {
		return nil, fmt.Errorf("%s: %d bytes, more than the %d accepted", name, resp.ContentLength, maxFileSize)
	}
	b, err := readCapped(resp.Body, name)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return b, nil
}

func readCapped(r io.Reader, name string) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxFileSize {
		return nil, fmt.Errorf("%s: more than the %d bytes accepted", name, maxFileSize)
	}
	return b, nil
}

var defaultClient = &http.Client{Transport: &http.Transport{
	Proxy:                 http.ProxyFromEnvironment,
	DialContext:           (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
	ForceAttemptHTTP2:     true,
	TLSHandshakeTimeout:   10 * time.Second,
	ResponseHeaderTimeout: 30 * time.Second,
	IdleConnTimeout:       30 * time.Second,
}}
