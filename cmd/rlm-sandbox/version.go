package main

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/rlm-sandbox/rlm-sandbox/ipc"
	"github.com/rlm-sandbox/rlm-sandbox/runtime"
	"github.com/rlm-sandbox/rlm-sandbox/supervisor"
	"github.com/spf13/cobra"
)

// buildVersion is set at link time (-ldflags "-X main.buildVersion=v1.2.3");
// otherwise the module version or VCS revision the binary was built from.
var buildVersion = ""

// versionInfo is what `version` prints and serve's version method returns.
type versionInfo struct {
	RLMSandbox     string `json:"rlm_sandbox"`
	Protocol       int    `json:"protocol"`        // of serve (docs/serve.md)
	WorkerProtocol int    `json:"worker_protocol"` // between rlm-sandbox and rlm-worker
	Pyodide        string `json:"pyodide"`
	Python         string `json:"python,omitempty"`
	// The lock-down of a worker started to answer (supervisor.Info).
	Hardening        []string `json:"hardening,omitempty"`
	HardeningRefused []string `json:"hardening_refused,omitempty"`
}

func newVersionInfo() versionInfo {
	return versionInfo{
		RLMSandbox:     programVersion(),
		Protocol:       serveProtocolVersion,
		WorkerProtocol: ipc.ProtocolVersion,
		Pyodide:        runtime.PyodideVersion,
	}
}

func programVersion() string {
	if buildVersion != "" {
		return buildVersion
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	v := "devel"
	for _, s := range bi.Settings {
		switch {
		case s.Key == "vcs.revision" && len(s.Value) >= 12:
			v += " " + s.Value[:12]
		case s.Key == "vcs.modified" && s.Value == "true":
			v += "-dirty"
		}
	}
	return v
}

type versionOptions struct {
	json bool
}

func newVersionCmd(ios *iostreams, runF func(*versionOptions) error) *cobra.Command {
	o := &versionOptions{}
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the versions of rlm-sandbox, its protocols, Pyodide and Python",
		Long: `Prints the versions of rlm-sandbox, of the serve protocol and the worker
protocol, of Pyodide, and of the Python it runs (which starts an
interpreter, in an rlm-worker when one is found, so it also checks that
Pyodide is in place), and how that worker is locked down: the layers
applied, and those the kernel refused.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(o)
			}
			return runVersion(cmd.Context(), ios, o)
		},
	}
	cmd.Flags().BoolVar(&o.json, "json", false, "print a JSON object")
	return cmd
}

func runVersion(parent context.Context, ios *iostreams, o *versionOptions) error {
	ctx, stop := interruptContext(parent)
	defer stop()
	v := newVersionInfo()
	sb, err := supervisor.New(ctx, supervisor.Config{})
	if err == nil {
		info := sb.Info()
		v.Python, v.Hardening, v.HardeningRefused = info.PythonVersion, info.Hardening, info.HardeningRefused
		sb.Destroy()
	}
	if o.json {
		enc := json.NewEncoder(ios.Out)
		if e := enc.Encode(v); e != nil {
			return e
		}
	} else {
		python := v.Python
		if python == "" {
			python = "unknown (no interpreter could start)"
		}
		fmt.Fprintf(ios.Out, "rlm-sandbox %s\nprotocol    %d (serve, JSON-RPC 2.0); worker protocol %d\npyodide     %s\npython      %s\n",
			v.RLMSandbox, v.Protocol, v.WorkerProtocol, v.Pyodide, python)
		if err == nil {
			hardening := strings.Join(v.Hardening, ", ")
			if hardening == "" {
				hardening = "none"
			}
			fmt.Fprintf(ios.Out, "hardening   %s\n", hardening)
			for _, r := range v.HardeningRefused {
				fmt.Fprintf(ios.Out, "  refused   %s\n", r)
			}
		}
	}
	return orInterrupted(ctx, err)
}
