package emscripten

import (
	"fmt"

	"github.com/tetratelabs/wazero/api"
)

// impl is one import implemented in Go. sig lists the parameter types then,
// after a '>', the results: i = i32, j = i64, d = f64, e = externref.
type impl struct {
	module, name, sig string
	fn                func(h *Host) api.GoModuleFunc
}

const (
	env  = "env"
	wasi = "wasi_snapshot_preview1"
)

// registry is every import with a real implementation. Imports of the module
// not listed here are the JavaScript interop and other features the sandbox
// refuses: they trap with an UnsupportedError (see unsupported.go).
var registry = []impl{
	// file system (fs.go)
	{env, "__syscall_openat", "iiii>i", func(h *Host) api.GoModuleFunc { return h.openat }},
	{env, "__syscall_stat64", "ii>i", func(h *Host) api.GoModuleFunc { return h.stat64 }},
	{env, "__syscall_lstat64", "ii>i", func(h *Host) api.GoModuleFunc { return h.lstat64 }},
	{env, "__syscall_fstat64", "ii>i", func(h *Host) api.GoModuleFunc { return h.fstat64 }},
	{env, "__syscall_newfstatat", "iiii>i", func(h *Host) api.GoModuleFunc { return h.newfstatat }},
	{env, "__syscall_faccessat", "iiii>i", func(h *Host) api.GoModuleFunc { return h.faccessat }},
	{env, "__syscall_chdir", "i>i", func(h *Host) api.GoModuleFunc { return h.chdir }},
	{env, "__syscall_fchdir", "i>i", func(h *Host) api.GoModuleFunc { return h.fchdir }},
	{env, "__syscall_getcwd", "ii>i", func(h *Host) api.GoModuleFunc { return h.getcwd }},
	{env, "__syscall_chmod", "ii>i", func(h *Host) api.GoModuleFunc { return h.chmod }},
	{env, "__syscall_fchmod", "ii>i", func(h *Host) api.GoModuleFunc { return h.fchmod }},
	{env, "__syscall_fchmodat2", "iiii>i", func(h *Host) api.GoModuleFunc { return h.fchmodat2 }},
	{env, "__syscall_fchownat", "iiiii>i", func(h *Host) api.GoModuleFunc { return h.fchownat }},
	{env, "__syscall_fchown32", "iii>i", func(h *Host) api.GoModuleFunc { return h.fchown32 }},
	{env, "__syscall_mkdirat", "iii>i", func(h *Host) api.GoModuleFunc { return h.mkdirat }},
	{env, "__syscall_mknodat", "iiii>i", func(h *Host) api.GoModuleFunc { return h.mknodat }},
	{env, "__syscall_readlinkat", "iiii>i", func(h *Host) api.GoModuleFunc { return h.readlinkat }},
	{env, "__syscall_unlinkat", "iii>i", func(h *Host) api.GoModuleFunc { return h.unlinkat }},
	{env, "__syscall_rmdir", "i>i", func(h *Host) api.GoModuleFunc { return h.rmdir }},
	{env, "__syscall_renameat", "iiii>i", func(h *Host) api.GoModuleFunc { return h.renameat }},
	{env, "__syscall_symlinkat", "iii>i", func(h *Host) api.GoModuleFunc { return h.symlinkat }},
	{env, "__syscall_truncate64", "ij>i", func(h *Host) api.GoModuleFunc { return h.truncate64 }},
	{env, "__syscall_ftruncate64", "ij>i", func(h *Host) api.GoModuleFunc { return h.ftruncate64 }},
	{env, "__syscall_utimensat", "iiii>i", func(h *Host) api.GoModuleFunc { return h.utimensat }},
	{env, "__syscall_getdents64", "iii>i", func(h *Host) api.GoModuleFunc { return h.getdents64 }},
	{env, "__syscall_statfs64", "iii>i", func(h *Host) api.GoModuleFunc { return h.statfs64 }},
	{env, "__syscall_fstatfs64", "iii>i", func(h *Host) api.GoModuleFunc { return h.fstatfs64 }},

	// descriptors (fdops.go, pipe.go)
	{wasi, "fd_close", "i>i", func(h *Host) api.GoModuleFunc { return h.fdClose }},
	{wasi, "fd_read", "iiii>i", func(h *Host) api.GoModuleFunc { return h.fdRead }},
	{wasi, "fd_write", "iiii>i", func(h *Host) api.GoModuleFunc { return h.fdWrite }},
	{wasi, "fd_pread", "iiiji>i", func(h *Host) api.GoModuleFunc { return h.fdPread }},
	{wasi, "fd_pwrite", "iiiji>i", func(h *Host) api.GoModuleFunc { return h.fdPwrite }},
	{wasi, "fd_seek", "ijii>i", func(h *Host) api.GoModuleFunc { return h.fdSeek }},
	{wasi, "fd_fdstat_get", "ii>i", func(h *Host) api.GoModuleFunc { return h.fdFdstatGet }},
	{wasi, "fd_sync", "i>i", func(h *Host) api.GoModuleFunc { return h.fdSync }},
	{env, "__syscall_fdatasync", "i>i", func(h *Host) api.GoModuleFunc { return h.fdatasync }},
	{env, "__syscall_dup", "i>i", func(h *Host) api.GoModuleFunc { return h.dup }},
	{env, "__syscall_dup3", "iii>i", func(h *Host) api.GoModuleFunc { return h.dup3 }},
	{env, "__syscall_fcntl64", "iii>i", func(h *Host) api.GoModuleFunc { return h.fcntl64 }},
	{env, "__syscall_ioctl", "iii>i", func(h *Host) api.GoModuleFunc { return h.ioctl }},
	{env, "__syscall_fadvise64", "ijji>i", func(h *Host) api.GoModuleFunc { return h.fadvise64 }},
	{env, "__syscall_fallocate", "iijj>i", func(h *Host) api.GoModuleFunc { return h.fallocate }},
	{env, "__syscall_pipe", "i>i", func(h *Host) api.GoModuleFunc { return h.pipe }},
	{env, "__syscall_poll", "iii>i", func(h *Host) api.GoModuleFunc { return h.poll }},
	{env, "__syscall_umask_js", "i>i", func(h *Host) api.GoModuleFunc { return h.umaskCall }},
	{env, "__syscall_getuid32_js", ">i", func(h *Host) api.GoModuleFunc { return h.getuid }},

	// sockets: an in-memory loopback only (socket.go)
	{env, "__syscall_socket", "iiiiii>i", func(h *Host) api.GoModuleFunc { return h.socketCall }},
	{env, "__syscall_bind", "iiiiii>i", func(h *Host) api.GoModuleFunc { return h.bind }},
	{env, "__syscall_listen", "iiiiii>i", func(h *Host) api.GoModuleFunc { return h.listen }},
	{env, "__syscall_connect", "iiiiii>i", func(h *Host) api.GoModuleFunc { return h.connect }},
	{env, "__syscall_accept4", "iiiiii>i", func(h *Host) api.GoModuleFunc { return h.accept4 }},
	{env, "__syscall_getsockname", "iiiiii>i", func(h *Host) api.GoModuleFunc { return h.getsockname }},
	{env, "__syscall_getpeername", "iiiiii>i", func(h *Host) api.GoModuleFunc { return h.getpeername }},
	{env, "__syscall_getsockopt", "iiiiii>i", func(h *Host) api.GoModuleFunc { return h.getsockopt }},
	{env, "__syscall_sendto", "iiiiii>i", func(h *Host) api.GoModuleFunc { return h.sendto }},
	{env, "__syscall_recvfrom", "iiiiii>i", func(h *Host) api.GoModuleFunc { return h.recvfrom }},
	{env, "__syscall_sendmsg", "iiiiii>i", func(h *Host) api.GoModuleFunc { return h.sendmsg }},
	{env, "__syscall_recvmsg", "iiiiii>i", func(h *Host) api.GoModuleFunc { return h.recvmsg }},
	{env, "_try_shutdown", "iii>i", func(h *Host) api.GoModuleFunc { return h.tryShutdown }},
	{env, "_try_fcntl64", "iiii>i", func(h *Host) api.GoModuleFunc { return h.tryFcntl }},
	{env, "_maybe_connect_async", "iii>e", func(h *Host) api.GoModuleFunc { return zero }},
	{env, "_maybe_poll_async", "iii>e", func(h *Host) api.GoModuleFunc { return zero }},
	{env, "_maybe_recvfrom_async", "iii>e", func(h *Host) api.GoModuleFunc { return zero }},
	{env, "_maybe_sendto_async", "iii>e", func(h *Host) api.GoModuleFunc { return zero }},
	{env, "getaddrinfo", "iiii>i", func(h *Host) api.GoModuleFunc { return h.getaddrinfo }},
	{env, "getnameinfo", "iiiiiii>i", func(h *Host) api.GoModuleFunc { return h.getnameinfo }},
	{env, "getprotobyname", "i>i", func(h *Host) api.GoModuleFunc { return h.getprotobyname }},
	{env, "_emscripten_lookup_name", "i>i", func(h *Host) api.GoModuleFunc { return h.lookupName }},

	// time (time.go)
	{wasi, "clock_time_get", "iji>i", func(h *Host) api.GoModuleFunc { return h.clockTimeGet }},
	{wasi, "clock_res_get", "ii>i", func(h *Host) api.GoModuleFunc { return h.clockResGet }},
	{env, "emscripten_date_now", ">d", func(h *Host) api.GoModuleFunc { return h.dateNow }},
	{env, "emscripten_get_now", ">d", func(h *Host) api.GoModuleFunc { return h.getNow }},
	{env, "_tzset_js", "iiii>", func(h *Host) api.GoModuleFunc { return h.tzset }},
	{env, "_localtime_js", "ji>", func(h *Host) api.GoModuleFunc { return h.localtime }},
	{env, "_gmtime_js", "ji>", func(h *Host) api.GoModuleFunc { return h.gmtime }},
	{env, "_mktime_js", "i>j", func(h *Host) api.GoModuleFunc { return h.mktime }},
	{env, "_timegm_js", "i>j", func(h *Host) api.GoModuleFunc { return h.timegm }},

	// process (proc.go)
	{wasi, "environ_sizes_get", "ii>i", func(h *Host) api.GoModuleFunc { return h.environSizesGet }},
	{wasi, "environ_get", "ii>i", func(h *Host) api.GoModuleFunc { return h.environGet }},
	{wasi, "random_get", "ii>i", func(h *Host) api.GoModuleFunc { return h.randomGet }},
	{wasi, "proc_exit", "i>", func(h *Host) api.GoModuleFunc { return h.procExit }},
	{env, "exit", "i>", func(h *Host) api.GoModuleFunc { return h.procExit }},
	{env, "_abort_js", ">", func(h *Host) api.GoModuleFunc { return h.abort }},
	{env, "__assert_fail", "iiii>", func(h *Host) api.GoModuleFunc { return h.assertFail }},
	{env, "_emscripten_system", "i>i", func(h *Host) api.GoModuleFunc { return h.system }},
	{env, "_emscripten_get_progname", "ii>", func(h *Host) api.GoModuleFunc { return h.getProgname }},
	{env, "_Py_emscripten_runtime", ">i", func(h *Host) api.GoModuleFunc { return h.pyEmscriptenRuntime }},
	{env, "_emscripten_log_formatted", "ii>", func(h *Host) api.GoModuleFunc { return h.logFormatted }},
	{env, "emscripten_log_impl_js", "i>", func(h *Host) api.GoModuleFunc { return h.logImpl }},
	{env, "emscripten_runtime_keepalive_push", ">", func(h *Host) api.GoModuleFunc { return nop }},
	{env, "emscripten_runtime_keepalive_pop", ">", func(h *Host) api.GoModuleFunc { return nop }},
	{env, "_emscripten_runtime_keepalive_clear", ">", func(h *Host) api.GoModuleFunc { return nop }},
	{env, "emscripten_debugger", ">", func(h *Host) api.GoModuleFunc { return nop }},
	{env, "__hiwire_deduplicate_new", ">e", func(h *Host) api.GoModuleFunc { return zero }},

	// memory (memory.go)
	{env, "emscripten_resize_heap", "i>i", func(h *Host) api.GoModuleFunc { return h.resizeHeap }},
	{env, "emscripten_get_heap_max", ">i", func(h *Host) api.GoModuleFunc { return h.getHeapMax }},
	{env, "_mmap_js", "iiiijii>i", func(h *Host) api.GoModuleFunc { return h.mmapJS }},
	{env, "_munmap_js", "iiiiij>i", func(h *Host) api.GoModuleFunc { return h.munmapJS }},
	{env, "_msync_js", "iiiiij>i", func(h *Host) api.GoModuleFunc { return h.msyncJS }},

	// signals (signal.go)
	{env, "_Py_CheckEmscriptenSignals_Helper", ">i", func(h *Host) api.GoModuleFunc { return h.checkSignals }},
	{env, "_setitimer_js", "id>i", func(h *Host) api.GoModuleFunc { return h.setitimer }},
	{env, "__call_sighandler", "ii>", func(h *Host) api.GoModuleFunc { return h.callSighandler }},

	// dynamic loading fails as dlerror(), which Python reports as OSError.
	{env, "_dlopen_js", "i>i", func(h *Host) api.GoModuleFunc { return h.dlopenJS }},
	{env, "_dlsym_js", "iii>i", func(h *Host) api.GoModuleFunc { return h.dlsymJS }},
}

// Arity is the import of the generated trampoline module (trampoline.go).
var ArityImport = impl{"rlm", "arity", "i>i", func(h *Host) api.GoModuleFunc { return h.arity }}

func sigTypes(s string) (params, results []api.ValueType) {
	out := &params
	for _, c := range s {
		var t api.ValueType
		switch c {
		case '>':
			out = &results
			continue
		case 'i':
			t = api.ValueTypeI32
		case 'j':
			t = api.ValueTypeI64
		case 'd':
			t = api.ValueTypeF64
		case 'f':
			t = api.ValueTypeF32
		case 'e':
			t = api.ValueTypeExternref
		}
		*out = append(*out, t)
	}
	return
}

func sameTypes(a, b []api.ValueType) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Func is one host function to register: its import name, signature and
// implementation bound to a Host.
type Func struct {
	Module, Name    string
	Params, Results []api.ValueType
	Fn              api.GoModuleFunc
}

// Import is a function import of the module: where it comes from and its
// signature.
type Import struct {
	Module, Name    string
	Params, Results []api.ValueType
}

// Resolve returns, for each function import of the module (as module, name,
// params, results), the implementation to register: the registry's when it
// has one (its signature must match), otherwise a trap naming the feature.
func (h *Host) Resolve(imports []Import) ([]Func, error) {
	byName := make(map[string]impl, len(registry)+1)
	for _, r := range append(registry, ArityImport) {
		byName[r.module+"."+r.name] = r
	}
	out := make([]Func, 0, len(imports))
	for _, def := range imports {
		mod, name := def.Module, def.Name
		f := Func{Module: mod, Name: name, Params: def.Params, Results: def.Results}
		if r, ok := byName[mod+"."+name]; ok {
			p, res := sigTypes(r.sig)
			if !sameTypes(p, f.Params) || !sameTypes(res, f.Results) {
				return nil, fmt.Errorf("emscripten: import %s.%s has a signature this runtime does not implement (a different Pyodide build?)", mod, name)
			}
			f.Fn = r.fn(h)
		} else {
			f.Fn = trap(mod, name, whatIs(name))
		}
		out = append(out, f)
	}
	return out, nil
}

// ArityFunc is the host function the generated trampoline imports.
func (h *Host) ArityFunc() Func {
	p, r := sigTypes(ArityImport.sig)
	return Func{Module: ArityImport.module, Name: ArityImport.name, Params: p, Results: r, Fn: h.arity}
}
