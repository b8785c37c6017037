package tests

import (
	"debug/buildinfo"
	"path/filepath"
	"testing"
)

// `make build` builds the binaries with wazero patched by patches/wazero/
// (see its README). This test catches a build that fell back to stock
// wazero.

const wazeroPath = "github.com/tetratelabs/wazero"

// TestBinariesUsePatchedWazero reads the build information of the binaries:
// wazero must be replaced by the patched copy scripts/patch-wazero.sh
// writes.
func TestBinariesUsePatchedWazero(t *testing.T) {
	for _, name := range []string{"rlm-worker", "rlm-sandbox"} {
		bin, err := filepath.Abs("../bin/" + name)
		if err != nil {
			t.Fatal(err)
		}
		info, err := buildinfo.ReadFile(bin)
		if err != nil {
			t.Fatalf("%v (run `make build`)", err)
		}
		found := false
		for _, dep := range info.Deps {
			if dep.Path != wazeroPath {
				continue
			}
			found = true
			want := "./build/wazero-" + dep.Version + "-rlm"
			if dep.Replace == nil || dep.Replace.Path != want {
				t.Errorf("bin/%s uses %s %s replaced by %+v, want %s: build it with `make build`",
					name, dep.Path, dep.Version, dep.Replace, want)
			}
		}
		if !found {
			t.Errorf("bin/%s does not depend on %s", name, wazeroPath)
		}
	}
}
