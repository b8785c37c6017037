# Bootstrap of an rlm-sandbox interpreter. It runs once, right after
# Py_InitializeEx, and installs the module _rlm through which the Go host
# runs code, reads and sets globals. Requests and replies are marshal data
# exchanged over the device /dev/rlm (a Go buffer).
def _rlm_boot():
    import sys, os, marshal, builtins, time
    # Bound once too: code that breaks their import (sys.modules['traceback']
    # = None) must not break the reports of its exceptions.
    import traceback, linecache

    # Bound once: code that rebinds os.read or marshal.dumps must not
    # break the channel to the host.
    read, write, readv = os.read, os.write, os.readv
    loads, dumps = marshal.loads, marshal.dumps

    mod = type(sys)("_rlm")
    sys.modules["_rlm"] = mod
    ch = os.open("/dev/rlm", os.O_RDWR)
    bch = os.open("/dev/rlm-bridge", os.O_RDWR)
    mod.llm_fd = os.open("/dev/rlm-llm", os.O_RDWR)
    main = sys.modules["__main__"]
    g = main.__dict__
    sources = {}
    # helpers: the RLM names bound again before each execution (one dict,
    # updated in place: the host's fast path holds its address);
    # context: the value the host last set (what search_context searches).
    state = {"helpers": {}, "context": None, "context_text": None}

    # The host interrupts code with one SIGINT. asyncio.run (its Runner),
    # when it finds Python's default handler, replaces it for the run with
    # one that makes the first SIGINT a cancel of the main task, which code
    # busy between awaits never sees: the host then kills the worker. A
    # handler of the sandbox's own, raising KeyboardInterrupt as the
    # default does, keeps Runner's out.
    import signal

    def interrupted(signum, frame):
        "The sandbox's SIGINT handler: raises KeyboardInterrupt."
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, interrupted)

    def readn(fd, n):
        # Reads exactly n bytes, allocating no more than they need, so a
        # nearly full heap can still be served.
        data = read(fd, n)
        if len(data) < n:
            parts = [data]
            got = len(data)
            while got < n:
                b = read(fd, n - got)
                if not b:
                    break
                parts.append(b)
                got += len(b)
            data = b"".join(parts)
        return data

    def framed(fd, r, at):
        # r is the first read of a message that holds, from offset at, an
        # 8-byte length and that many bytes: returns those bytes, reading
        # what r lacks into one buffer (a device's read ends where its
        # message does: a short one comes whole).
        n = int.from_bytes(r[at:at + 8], "little")
        at += 8
        got = len(r) - at
        if got >= n:
            return memoryview(r)[at:at + n]
        buf = bytearray(n)
        buf[:got] = memoryview(r)[at:]
        view = memoryview(buf)
        while got < n:
            k = readv(fd, [view[got:]])
            if not k:
                raise EOFError("a message from the host ended early")
            got += k
        return buf

    mod.framed = framed

    def recv():
        # A request of up to 65536 bytes comes whole in the first read, as
        # it is; a longer one starts with a 0 byte (no marshal type code)
        # and its 8-byte length (runtime/channel.go).
        r = read(ch, 65536)
        if r[0]:
            return loads(r)
        return loads(framed(ch, r, 1))

    ok = (0,)
    okb = dumps(ok)
    # The reply of a cell whose MemoryError left no memory to report it
    # (made now: sending it needs none).
    oom = (1, "MemoryError", "", "MemoryError\n")
    oomb = dumps(oom)

    def send(obj):
        if obj is ok:
            write(ch, okb)
            return
        if obj is oom:
            write(ch, oomb)
            return
        data = memoryview(dumped(obj))
        while data:
            data = data[write(ch, data):]

    def dumped(obj):
        # What goes to the host, marshalled. marshal refuses str
        # subclasses (an enum.StrEnum member: as an exception's __str__, a
        # __repr__, a prompt): such a value goes as plain values (the
        # cell's error read as an interrupt).
        try:
            return dumps(obj)
        except ValueError:
            return dumps(plain(obj, 0, set()))

    def bridge(method, calls):
        # Runs host calls (a list of argument tuples, or of str for calls
        # of one str argument) and returns (answered, results): when every
        # call was answered, True and their values in order; else False
        # and each result, (0, value) or (1, error message).
        data = dumped((method, calls))
        data = memoryview(len(data).to_bytes(8, "little") + data)
        while data:
            data = data[write(bch, data):]
        r = loads(framed(bch, read(bch, 65536), 0))
        if r[0] == 2:
            raise KeyboardInterrupt
        return r[0] == 3, r[1]

    mod.bridge = bridge

    # The host's streams write through to it on every write
    # (PYTHONUNBUFFERED): they need a flush only once code replaced or
    # reconfigured them. Their files cannot be closed: a wrapper that code
    # makes of one (io.TextIOWrapper(sys.stdout.buffer, ...) or of
    # sys.stdout.detach(), to change the encoding) closes it when it is
    # collected, which would silence every later cell. A stream that code
    # detached or closed is made again at the cell's end, and a closed
    # descriptor 1 or 2 the host opens again after each request.
    import io

    class HostFile(io.FileIO):
        def close(self):
            self.flush()

    def host_stream(fd):
        raw = HostFile(fd, "w" if fd else "r", closefd=False)
        raw.name = ("<stdin>", "<stdout>", "<stderr>")[fd]
        # As CPython's under the sandbox's C.UTF-8 locale: a lone surrogate
        # (os.fsdecode makes them of bytes that are not UTF-8) goes out as
        # its byte on stdout (in a host's JSON, a U+FFFD), as \udcff on
        # stderr; print() of one raised UnicodeEncodeError.
        errors = "backslashreplace" if fd == 2 else "surrogateescape"
        return io.TextIOWrapper(raw, encoding="utf-8", errors=errors, write_through=fd > 0)

    sys.stdout = sys.__stdout__ = out0 = host_stream(1)
    sys.stderr = sys.__stderr__ = err0 = host_stream(2)
    # Standard input is always at its end; exit() and quit() close it, and
    # input() in a later cell would then raise ValueError, not EOFError.
    sys.stdin = sys.__stdin__ = host_stream(0)

    def usable(f):
        try:
            return not f.closed
        except Exception:
            return False  # detached (sys.stdout.detach())

    def flush():
        # At each cell's end. A cell that replaced sys.stdout or sys.stderr
        # and did not put it back (a capture whose restore an exception
        # skipped) would silence every later cell: the host's streams come
        # back, as the helpers are bound again before each cell.
        nonlocal out0, err0
        own = [out0, err0]
        for i, name in enumerate(("stdout", "stderr")):
            f = getattr(sys, name, None)
            if f is own[i] and usable(f) and f.write_through:
                continue
            try:
                f.flush()
            except BaseException:
                pass
            if not usable(own[i]):
                own[i] = host_stream(i + 1)
                setattr(sys, "__%s__" % name, own[i])
            if f is not own[i]:
                setattr(sys, name, own[i])
        out0, err0 = own

    def message(e):
        try:
            return str(e)
        except KeyboardInterrupt:
            # The execution's interrupt (its time limit, a cancel) reached
            # a __str__ that takes that long: the cell ends interrupted,
            # rather than formatting the exception again and being killed.
            raise
        except BaseException:
            return "<exception str() failed>"

    def linked(x, members):
        # x and what is chained to it (__cause__, __context__) or in it
        # (members(x), a group's), and theirs, each once: chains can loop.
        seen, todo = set(), [x]
        while todo:
            x = todo.pop()
            if x is None or id(x) in seen:
                continue
            seen.add(id(x))
            yield x
            todo += (x.__cause__, x.__context__, *members(x))

    summaries = []

    def collapsed(stack):
        # traceback's StackSummary.format formats every frame, then drops
        # those of a run of one line past its cutoff: in a deep recursion
        # thousands, each costing a parse of its line (for the carets),
        # 0.2 ms here. This summary formats only the frames it shows, and
        # writes the same text (the format below is CPython 3.14's, whose
        # format_frame_summary never returns None).
        if not summaries:
            cutoff = traceback._RECURSIVE_CUTOFF
            # The frames (and runs) shown in full, at most: the default
            # recursion limit's tracebacks are all shown.
            shown_most = 1200

            def repeated(count):
                count -= cutoff
                return f'  [Previous line repeated {count} more time{"s" if count > 1 else ""}]\n'

            class Collapsed(traceback.StackSummary):
                def format(self, **kwargs):
                    colorize = kwargs.get("colorize", False)
                    # What CPython shows: a frame, or a run's count.
                    shown = []
                    last = None
                    count = 0
                    for f in self:
                        key = (f.filename, f.lineno, f.name)
                        if last is None or None in last or key != last:
                            if count > cutoff:
                                shown.append(count)
                            last = key
                            count = 0
                        count += 1
                        if count <= cutoff:
                            shown.append(f)
                    if count > cutoff:
                        shown.append(count)
                    if len(shown) > shown_most:
                        # A recursion through more than one function (it
                        # is not collapsed) thousands of frames deep: 0.1
                        # ms a frame, seconds in all, for text that is
                        # cut to its first and last characters (at most
                        # 1 MiB here, 50,000 by default in the host).
                        # Its first and last frames, then, around a count.
                        half = shown_most // 2
                        left = sum(1 if type(x) is not int else x - cutoff for x in shown[half:-half])
                        shown[half:-half] = [f"  [... {left} frame{'s' if left > 1 else ''} omitted ...]\n"]
                    result = []
                    for x in shown:
                        if type(x) is int:
                            result.append(repeated(x))
                        elif type(x) is str:
                            result.append(x)
                        else:
                            result.append(self.format_frame_summary(x, colorize=colorize))
                    return result

            summaries.append(Collapsed)
        c = summaries[0]()
        c.extend(stack)
        return c

    # An exception's class name and traceback read as CPython's own
    # traceback code reads them: past a metaclass's __name__, and past the
    # exception's own __getattribute__ or a __traceback__ property (either
    # could raise, or lie).
    class_name = type.__dict__["__name__"].__get__
    traceback_of = BaseException.__dict__["__traceback__"].__get__

    def type_name(e):
        # Never empty: the host takes an empty type for a cell without an
        # error (a class named "" made a failed cell a success).
        try:
            name = class_name(type(e))
        except Exception:
            name = ""
        return name or "<unnamed exception class>"

    def tb_text(e):
        tb = traceback_of(e)
        skip = {run.__code__, execute.__code__, run_interactive.__code__, run_code.__code__}
        try:
            skip.add(sys.modules["ast"].parse.__code__)
        except Exception:
            pass  # not imported (or not the ast module any more)
        while tb is not None and tb.tb_frame.f_code in skip:
            tb = tb.tb_next
        if tb is not None and tb.tb_frame.f_code is awaited.__code__:
            # A cell that awaits: asyncio's frames, down to the cell's (all
            # of them when the cell was not running: an interrupt that
            # found the loop waiting).
            while tb is not None and tb.tb_frame.f_code.co_filename not in sources:
                tb = tb.tb_next
        try:
            # The helpers' own frames (llm_query raising BridgeError, say)
            # and the bootstrap's (its time.sleep, its import refusals)
            # are noise to the code's author: the error points at the call.
            # They go before the frames are summarised, which costs per
            # frame: a traceback of the frames kept (all, if none would be).
            # (A frame's line is read when it is formatted, lookup_lines
            # False: Collapsed below formats only those it shows.)
            own = ("<rlm>", "<rlm-boot>")
            kept, n, t = [], 0, tb
            while t is not None:
                n += 1
                if t.tb_frame.f_code.co_filename not in own:
                    kept.append(t)
                t = t.tb_next
            te = None
            if kept and len(kept) < n:
                try:
                    t2 = None
                    for t in reversed(kept):
                        t2 = type(t)(t2, t.tb_frame, t.tb_lasti, t.tb_lineno)
                    te = traceback.TracebackException(type(e), e, t2, lookup_lines=False)
                except Exception:
                    te = None  # a frame without a line number: as below
            if te is None:
                te = traceback.TracebackException(type(e), e, tb, lookup_lines=False)
            # The summaries left with such frames (the above could not go
            # without them, or exceptions chained to it or in it, a group)
            # lose them once made: the tracebacks are left as they are.
            for x in linked(te, lambda x: x.exceptions or ()):
                frames = [f for f in x.stack if f.filename not in own]
                if frames and len(frames) < len(x.stack):
                    x.stack = traceback.StackSummary.from_list(frames)
                if len(x.stack) > 8:
                    x.stack = collapsed(x.stack)
            return "".join(te.format())
        except KeyboardInterrupt:
            raise  # as in message
        except BaseException:
            return "%s: %s\n" % (type_name(e), message(e))

    def execute(src, interactive, name):
        # The host names the cell: it runs most cells itself, through the
        # C API (runtime/fastexec.go), and this function only the others.
        sources[name] = src
        g.update(state["helpers"])
        g.setdefault("__builtins__", builtins)  # as the host's fast path does
        try:
            if interactive:
                run_interactive(src, name)
            else:
                run_code(compile(src, name, "exec", top_level_await, dont_inherit=True))
        except BaseException as e:
            spent(e)
            try:
                return raised(e)
            except MemoryError:
                return oom
        flush()
        return ok

    def run_interactive(src, name):
        # The way the interactive prompt runs code: the value of a last
        # expression statement goes to sys.displayhook.
        import ast
        tree = ast.parse(src, name, "exec")
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Interactive(body=[tree.body.pop()])
        parts = [compile(tree, name, "exec", top_level_await, dont_inherit=True)]
        if last is not None:
            parts.append(compile(last, name, "single", top_level_await, dont_inherit=True))
        run_code(*parts)

    # Cells may await at their top level, as in IPython and in Pyodide's
    # runPythonAsync (ast.PyCF_ALLOW_TOP_LEVEL_AWAIT; the host's fast path
    # compiles with it too). A cell that does compiles to a coroutine
    # function's code: running it returns the coroutine, which awaited()
    # runs. Code that does not await compiles as without the flag.
    top_level_await = 0x2000

    def run_code(*parts):
        # The code objects of a cell, in __main__. When one awaits, all of
        # them run in one event loop (the tasks the first part of an
        # interactive cell starts are the second's to await).
        if not any(p.co_flags & 0x80 for p in parts):  # inspect.CO_COROUTINE
            for p in parts:
                exec(p, g)
            return

        async def cell():
            for p in parts:
                coro = eval(p, g)
                if coro is not None:
                    await coro

        awaited(cell())

    def awaited(coro):
        # As asyncio.run does: in an event loop of its own, closed after,
        # the tasks the cell left behind cancelled (none outlives its
        # cell, so an interrupted cell cannot resume in a later one); an
        # interrupt raises KeyboardInterrupt where the code is (see the
        # SIGINT handler above). The cell's task runs in a copy of the
        # context, as every task does; what it changed there (decimal's
        # context, a ContextVar) is copied back, as a cell without await
        # would have kept it. The host's fast path calls it with a cell's
        # coroutine itself.
        import asyncio
        import contextvars
        loop = asyncio.new_event_loop()
        ctx = contextvars.copy_context()
        task = loop.create_task(coro, context=ctx)
        try:
            return loop.run_until_complete(task)
        except BaseException as e:
            if not task.done():
                # An interrupt while the loop waited: the traceback is the
                # loop's. Where the cell was is in its suspended frames:
                # the coroutines it awaits, down to the last in a cell.
                frames, c = [], coro
                while c is not None and getattr(c, "cr_frame", None) is not None:
                    frames.append(c.cr_frame)
                    c = getattr(c, "cr_await", None)
                while frames and frames[-1].f_code.co_filename not in sources:
                    frames.pop()
                tb = None
                for f in reversed(frames):
                    tb = type(e.__traceback__)(tb, f, f.f_lasti, f.f_lineno)
                if tb is not None:
                    e.__traceback__ = tb
            raise
        finally:
            try:
                left = asyncio.all_tasks(loop)
                for t in left:
                    t.cancel()
                if left:
                    loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))
                loop.run_until_complete(loop.shutdown_asyncgens())
            finally:
                loop.close()
                for var, value in ctx.items():
                    if var.get(ctx) is not value:
                        var.set(value)

    # An exception's message and traceback go to the host at most this
    # many characters long, their middle cut as the host cuts output (a
    # KeyError on a 100 MB key must not make a reply too large to send).
    text_cap = 1 << 20

    def capped(s):
        if len(s) <= text_cap:
            return s
        h = text_cap // 2
        return "%s\n[... %d characters omitted ...]\n%s" % (s[:h], len(s) - text_cap, s[h - text_cap:])

    third_party = "the rlm-sandbox has Python's standard library only: no third-party packages, and none can be installed"

    not_built = ("%r is in CPython's standard library but not in Pyodide's build of it, which the rlm-sandbox runs "
                 "(Pyodide leaves out what needs a terminal, the host's users or its system libraries)")

    no_tzdata = ("the rlm-sandbox has no time zone database (pyodide.loadPackage is not available here): "
                 "only fixed offsets work, datetime.timezone(timedelta(hours=...))")

    def note(e, text):
        try:
            if text not in getattr(e, "__notes__", ()):
                e.add_note(text)
        except Exception:
            pass

    def raised(e):
        # The reply of a cell that raised e. An exception whose own code
        # fails when it is described (a __getattribute__ that raises) is
        # still reported as the error it is, not as the sandbox's failure.
        flush()
        name = type_name(e)
        try:
            if issubclass(type(e), ModuleNotFoundError) and isinstance(e.name, str):
                if e.name.partition(".")[0] not in sys.stdlib_module_names:
                    note(e, third_party)
                elif e.name in sys.stdlib_module_names:
                    note(e, not_built % e.name)  # pwd, resource, curses, dbm
            elif name == "ZoneInfoNotFoundError":
                note(e, no_tzdata)
            elif issubclass(type(e), SyntaxError) and e.text is None and isinstance(e.lineno, int):
                # The compiler's errors ('return' outside function) carry
                # no line: CPython reads it from the script's file.
                e.text = linecache.getline(e.filename, e.lineno) or None
        except Exception:
            pass
        try:
            r = (1, name, printable(capped(message(e))), printable(capped(tb_text(e))))
            return r + (exit_of(e),) if issubclass(type(e), SystemExit) else r
        except (KeyboardInterrupt, MemoryError):
            raise  # as in message; a MemoryError: the caller's oom reply
        except Exception as e2:
            return (1, name, "<the exception could not be described: %s>" % type_name(e2), "")

    def exit_of(e):
        # What CPython's top level does with a SystemExit (or a subclass;
        # _Py_HandleSystemExit): its code None exits 0, an int exits with
        # its low 8 bits (255 when it does not fit a C long), and anything
        # else is written on stderr, with a newline, and exits 1. The reply
        # is (status, what to write).
        try:
            code = e.code
        except Exception:
            code = e  # CPython writes the exception itself then
        if code is None:
            return (0, "")
        if isinstance(code, int):
            v = int.__int__(code)  # its value, whatever a subclass overrides
            return (v & 0xFF if -(1 << 63) <= v < 1 << 63 else 255, "")
        return (1, printable(capped(message(code))) + "\n")

    def printable(s):
        # A lone surrogate (os.fsdecode makes them) as Python's stderr
        # writes it, \udcff: the host's text stays UTF-8.
        if s.isascii():
            return s
        try:
            s.encode("utf-8")
            return s
        except UnicodeEncodeError:
            return s.encode("utf-8", "backslashreplace").decode("utf-8")

    # A megabyte held back for code that fills the memory MemoryLimit
    # allows: let go of on its MemoryError, so that the reply, and a next
    # cell that lets go of what filled it (del), can still be made (without
    # it, every later cell failed with MemoryError, even del); taken again
    # once a cell runs without error (the host asks: rearm).
    state["reserve"] = bytearray(1 << 20)

    def spent(e):
        if issubclass(type(e), MemoryError):  # not isinstance: e.__class__ could raise
            state["reserve"] = None

    def rearm():
        # Only with room to spare: taking back the last free megabyte
        # would leave the next cell (the del that frees memory) none.
        if state["reserve"] is None:
            try:
                room = bytearray(2 << 20)
            except MemoryError:
                return False
            del room
            state["reserve"] = bytearray(1 << 20)
        return True

    def fail(e):
        # The host ran a cell itself and it raised e: reply as execute
        # does, or as run does when that fails (a MemoryError, say).
        spent(e)
        try:
            r = raised(e)
        except MemoryError:
            r = oom
        except BaseException as e2:
            r = (2, type_name(e2), capped(message(e2)))
        send(r)

    def plain(v, depth, seen):
        t = type(v)
        if v is None or t is bool or t is int or t is float or t is str or t is bytes or t is complex:
            return v
        if isinstance(v, bool):
            return bool(v)
        if depth > 200:
            return repr(v)
        if isinstance(v, (list, tuple, dict, set, frozenset)):
            i = id(v)
            if i in seen:
                return repr(v)
            seen.add(i)
            try:
                if isinstance(v, dict):
                    return {plain(k, depth + 1, seen): plain(x, depth + 1, seen) for k, x in v.items()}
                items = [plain(x, depth + 1, seen) for x in v]
                if isinstance(v, (set, frozenset)):
                    try:
                        return frozenset(items)
                    except TypeError:
                        return items
                if isinstance(v, tuple):
                    return tuple(items)
                return items
            finally:
                seen.discard(i)
        if isinstance(v, int):
            return int(v)
        if isinstance(v, float):
            return float(v)
        if isinstance(v, str):
            return str.__add__("", v)
        if isinstance(v, (bytearray, memoryview)):
            return bytes(v)
        if isinstance(v, bytes):
            return bytes(v)
        try:
            return repr(v)
        except KeyboardInterrupt:
            raise  # the host stopped the request (a repr that runs too long)
        except BaseException as e:
            return "<%s object; repr() raised %s>" % (class_name(t), type_name(e))

    def ident(name):
        # The name as code spells it: Python's parser takes identifiers in
        # NFKC form ("ｘ" in code is x), so a variable set or read by the
        # host as "ｘ" is x too (it was a global no code could reach).
        if name.isascii():
            return name
        import unicodedata
        return unicodedata.normalize("NFKC", name)

    def get(name):
        name = ident(name)
        if name not in g:
            return (0,)
        v = plain(g[name], 0, set())
        try:
            dumps(v)
        except ValueError:
            v = repr(g[name])
        return (1, v)

    def run():
        try:
            r = serve(recv())
        except BaseException as e:
            spent(e)  # a request that ran out of memory: room for the next
            flush()
            r = (2, type_name(e), capped(message(e)))
        send(r)

    def set_context(v):
        g["context"] = v
        state["context"] = v
        state["context_text"] = None

    def context_text():
        # The text search_context searches: the context itself, or the
        # JSON text of a context that is not a str (computed once).
        v = state["context"]
        if isinstance(v, str):
            return v
        if state["context_text"] is None:
            import json
            state["context_text"] = "" if v is None else json.dumps(v, ensure_ascii=False, default=repr)
        return state["context_text"]

    mod.context_text = context_text
    mod.context = lambda: state["context"]
    mod.plain = lambda v: plain(v, 0, set())

    def complete(src):
        # codeop.compile_command's last compile drops its flags, and would
        # take a block that awaits for a syntax error, so complete.
        import codeop
        cc = codeop.CommandCompiler()
        cc.compiler.flags |= top_level_await
        try:
            return cc(src, "<input>", "single") is not None
        except (SyntaxError, ValueError, OverflowError):
            return True

    def install(src):
        rlm = type(sys)("rlm")
        rlm.__file__ = "<rlm>"
        sources["<rlm>"] = src
        sys.modules["rlm"] = rlm
        exec(compile(src, "<rlm>", "exec", dont_inherit=True), rlm.__dict__)
        helpers = state["helpers"]
        helpers.clear()
        helpers.update({k: getattr(rlm, k) for k in rlm.__all__})
        g.update(helpers)

    def take(name, value):
        # The host built a large str in place (runtime/text.go) and binds it.
        if name:
            g[ident(name)] = value
        else:
            set_context(value)

    mod.take = take

    def text(n):
        return readn(ch, n).decode("utf-8", "replace")

    def serve(req):
        op = req[0]
        if op == "exec":
            r = execute(req[1], req[2], req[3])
        elif op == "get":
            r = get(req[1])
        elif op == "set":
            g[ident(req[1])] = req[2]
            r = (0,)
        elif op == "set-text":
            g[ident(req[1])] = text(req[2])
            r = (0,)
        elif op == "ctx":
            set_context(req[2])
            r = (0,)
        elif op == "ctx-text":
            set_context(text(req[2]))
            r = (0,)
        elif op == "complete":
            r = (complete(req[1]),)
        elif op == "rlm":
            install(req[1])
            r = (0,)
        elif op == "touch":
            r = touch()
        elif op == "untouch":
            r = untouch()
        elif op == "forget":
            for name in req[1:]:
                sources.pop(name, None)
                linecache.cache.pop(name, None)
            r = (0,)
        elif op == "fast":
            r = fast
        elif op == "rearm":
            r = (rearm(),)
        elif op == "spend":
            state["reserve"] = None
            r = (0,)
        elif op == "version":
            r = ("%d.%d.%d" % sys.version_info[:3],)
        elif op == "del":
            r = (1 if g.pop(req[1], mod) is not mod else 0,)
        else:
            r = (2, "ValueError", "unknown request %r" % (op,))
        return r

    mod.run = run

    # What the host's fast path of execution needs (runtime/fastexec.go),
    # as addresses. The host takes a reference to each when it asks for
    # them; until then state keeps the ones nothing else does.
    state["fast"] = objs = (
        g, state["helpers"], sources, out0, err0, fail, flush,
        sys.intern("write_through"), True, sys.intern("__builtins__"), builtins, None,
        run_interactive, sys.intern("closed"), False, awaited)
    fast = tuple(id(x) for x in objs)

    def touch():
        # A process that maps the boot snapshot has none of its pages yet:
        # the first exception and the first interrupt of its code would
        # fault in about 150 of them (~0.5 ms) while the caller waits. Take
        # both paths now, then forget the cells.
        # (The host runs the same cells itself when it has a fast path,
        # then asks for untouch: runtime/interp.go, touchErrorPaths.)
        try:
            execute("1/0\n", False, "<touch>")
            execute("__import__('_signal').raise_signal(2)\nwhile True: pass\n", False, "<touch>")
        finally:
            untouch()
        return (0,)

    def untouch():
        sources.pop("<touch>", None)
        linecache.cache.pop("<touch>", None)
        return (0,)

    # The first exception (or interrupt) of a sandbox would otherwise pay
    # for importing and warming the traceback machinery (~50 ms): do it now.
    def warm():
        for src in ("1/0\n", "raise KeyboardInterrupt\n", "x.y\n"):
            sources["<warm>"] = src
            try:
                exec(compile(src, "<warm>", "exec", dont_inherit=True), {"x": 0})
            except BaseException as e:
                tb_text(e)
        del sources["<warm>"]
        linecache.cache.pop("<warm>", None)
        # Modules RLM code imports first thing (re is already in).
        import json, collections

    # The cells' lines are in linecache as soon as something asks for
    # them, as a file's are: tracebacks (the sandbox's and the code's own,
    # traceback.format_exc, logging, warnings) show them, and
    # inspect.getsource finds a function defined in an earlier cell. An
    # entry is made from sources when first looked up, not per cell.
    class Lines(dict):
        __slots__ = ()

        def __contains__(self, name):
            if dict.__contains__(self, name):
                return True
            src = sources.get(name) if type(name) is str else None
            if src is None:
                return False
            self[name] = (len(src), None, src.splitlines(True), name)
            return True

        def __missing__(self, name):
            if self.__contains__(name):
                return dict.__getitem__(self, name)
            raise KeyError(name)

        def get(self, name, default=None):
            return self[name] if self.__contains__(name) else default

    linecache.cache = Lines(linecache.cache)

    warm()

    # time.sleep busy-waits in Emscripten's libc: route it through poll(),
    # which the host implements as a real sleep that an interrupt cuts short.
    import select
    _poll = select.poll
    _sleep = time.sleep
    _monotonic = time.monotonic

    def sleep(secs):
        if not isinstance(secs, (int, float)):
            return _sleep(secs)  # let the original raise its TypeError
        if secs != secs or secs < 0:
            return _sleep(secs)
        deadline = _monotonic() + secs
        p = _poll()
        while True:
            left = deadline - _monotonic()
            if left <= 0:
                return None
            p.poll(min(left * 1000.0, 2147483647.0))

    sleep.__doc__ = _sleep.__doc__
    sleep.__name__ = "sleep"
    sleep.__qualname__ = "sleep"
    sleep.__module__ = "time"
    time.sleep = sleep

    # Imports the sandbox cannot satisfy fail with a message that says why.
    unsupported = {
        "js": "there is no JavaScript engine in the rlm-sandbox",
        "pyodide_js": "there is no JavaScript engine in the rlm-sandbox",
        "_pyodide_core": "there is no JavaScript engine in the rlm-sandbox",
        "pyodide": "the pyodide package needs a JavaScript engine, which the rlm-sandbox does not have",
        "_ctypes": "ctypes (calling C through libffi and dlopen) is not supported in the rlm-sandbox",
        "micropip": "installing packages is not supported in the rlm-sandbox (no network)",
        "_multiprocessing": "there are no other processes in the rlm-sandbox; to run llm_query calls "
        "concurrently use llm_query_batched(prompts)",
    }
    # CPython's own C API test modules let code corrupt the interpreter's
    # memory at will: of no use to an agent, and a crash a line away.
    for m in sys.builtin_module_names:
        if m.startswith("_test"):
            unsupported[m] = "CPython's C API test modules are not available in the rlm-sandbox"

    # ProcessPoolExecutor turns the refusal of _multiprocessing into an
    # error about named semaphores: once imported, its module says why.
    no_processes = unsupported["_multiprocessing"]

    class Refuse:
        @staticmethod
        def find_spec(name, path=None, target=None):
            root = name.partition(".")[0]
            if root in unsupported:
                raise ImportError("cannot import %s: %s" % (name, unsupported[root]), name=name)
            if name != "concurrent.futures.process":
                return None
            for finder in sys.meta_path:
                if finder is Refuse or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(name, path, target)
                if spec is not None and spec.loader is not None:
                    break
            else:
                return None
            real = spec.loader

            class Loader:
                def __getattr__(self, attr):  # get_source, for tracebacks
                    return getattr(real, attr)

                def create_module(self, spec):
                    return real.create_module(spec)

                def exec_module(self, module):
                    real.exec_module(module)
                    module._system_limits_checked = True
                    module._system_limited = no_processes

            spec.loader = Loader()
            return spec

    sys.meta_path.insert(0, Refuse)
    # Nor are they listed as built in: pydoc's help("modules") imports
    # every module so listed, and printed only the first refusal.
    sys.builtin_module_names = tuple(m for m in sys.builtin_module_names if m not in unsupported)

    # There are no threads (Pyodide's CPython is built without them): the
    # error says so, and what to use for concurrent llm_query calls.
    import _thread

    def no_threads(start):
        def wrapper(*args, **kwargs):
            try:
                return start(*args, **kwargs)
            except RuntimeError as e:
                why = e
            # Raised here, out of the except clause: the error's context is
            # what the caller was handling, if anything, as it would be had
            # start raised it (raising from None hid that too).
            raise RuntimeError(
                "%s: the rlm-sandbox runs Python without threads; to run llm_query calls "
                "concurrently use llm_query_batched(prompts) (rlm_query_batched for rlm_query)" % why
            )

        wrapper.__name__ = start.__name__
        wrapper.__qualname__ = start.__qualname__
        wrapper.__doc__ = start.__doc__
        wrapper.__module__ = "_thread"
        return wrapper

    for name in ("start_new_thread", "start_new", "start_joinable_thread"):
        if hasattr(_thread, name):
            setattr(_thread, name, no_threads(getattr(_thread, name)))
    if "threading" in sys.modules:
        sys.modules["threading"]._start_joinable_thread = _thread.start_joinable_thread

    # Emscripten's raise() looks a signal's handler up without checking
    # the number: os.kill(os.getpid(), 65) called through a slot past the
    # table of handlers, and the interpreter died ("indirect call type
    # mismatch"). A number the kernel would refuse is refused here, as it
    # would: OSError EINVAL.
    def checked_kill(kill):
        import errno, functools, operator

        @functools.wraps(kill)
        def wrapper(pid, signal, /):
            if not 0 <= operator.index(signal) < 65:
                raise OSError(errno.EINVAL, os.strerror(errno.EINVAL))
            return kill(pid, signal)

        return wrapper

    os.kill = checked_kill(os.kill)

    # musl's strftime, which Emscripten builds CPython with, writes nothing
    # at all for a directive it does not know (glibc's %k %l %P, or one
    # that glibc copies as it is: %Q, a lone % at the end), and
    # time.strftime returns "" then, silently: datetime.strftime and
    # logging's datefmt too, which call it. It also ignores flags (^ #)
    # and widths (%10A). Such formats are written here a directive at a
    # time, as glibc writes them; the others, as musl did.
    def glibc_strftime(strftime):
        import functools, re
        known = frozenset("aAbBcCdDeFgGhHIjmMnprRsStTuUVwWxXyYzZ")
        numeric = frozenset("CdGgHIjmMSsUuVWwYykle")
        special = re.compile(r"%[-_0]*[\^#1-9]").search  # flags or a width, which musl ignores
        directive = re.compile(r"%([-_0^#]*)([0-9]*)[EO]?(.|$)", re.S)

        def one(flags, width, conv, t):
            # One directive as glibc writes it; None: glibc copies it.
            if conv in "kl":  # the hour (24 or 12), padded with spaces
                s = str(t.tm_hour if conv == "k" else t.tm_hour % 12 or 12)
                width = width or "2"
            elif conv == "P":
                s = strftime("%p", t).lower()
            elif conv in known:
                pad = "".join(f for f in flags if f in "-_0")[-1:]
                s = strftime("%" + pad + (width if conv in "CFGY" else "") + conv, t)
            else:
                return None
            if width and len(s) < int(width) and "-" not in flags:
                zero = "0" in flags or (conv in numeric and conv not in "ekl" and "_" not in flags)
                s = s.rjust(int(width), "0" if zero else " ")
            if "^" in flags:
                s = s.upper()
            elif "#" in flags:
                s = s.lower() if conv in "pZ" else s.upper()
            return s

        @functools.wraps(strftime)
        def wrapper(format, *t):
            s = strftime(format, *t)
            if not isinstance(format, str) or "%" not in format or (s and not special(format)):
                return s
            tt = time.localtime() if not t else t[0] if isinstance(t[0], time.struct_time) else time.struct_time(t[0])
            out, pos = [], 0
            for m in directive.finditer(format):
                out.append(format[pos:m.start()])
                pos = m.end()
                flags, width, conv = m.groups()
                if conv in ("", "%"):
                    out.append(conv or "%")  # a lone % at the end stays
                    continue
                d = one(flags, width, conv, tt)
                out.append(m.group(0) if d is None else d)
            out.append(format[pos:])
            return "".join(out)

        return wrapper

    time.strftime = glibc_strftime(time.strftime)

    # Modules the code writes to its working directory can be imported,
    # as under `python -c` and at the interactive prompt ("" first on
    # sys.path: the working directory at the time of the import).
    if "" not in sys.path:
        sys.path.insert(0, "")

    # breakpoint() does nothing, as with PYTHONBREAKPOINT=0: there is no
    # console for a debugger (pdb would read end of file and exit).
    os.environ["PYTHONBREAKPOINT"] = "0"

    # The host's output streams are not terminals.
    os.environ.pop("PYTHONSTARTUP", None)


# The bootstrap's functions look builtins up in a copy taken now: code that
# rebinds a builtin (builtins.len = None) breaks its own code, not the
# sandbox's channel to the host. Their code is named "<rlm-boot>" (not
# PyRun_SimpleString's "<string>", which exec'd user code has too), so that
# tracebacks can leave their frames out.
import builtins as _builtins


def _rlm_named(code):
    consts = tuple(_rlm_named(c) if isinstance(c, type(code)) else c for c in code.co_consts)
    return code.replace(co_filename="<rlm-boot>", co_consts=consts)


type(_rlm_boot)(_rlm_named(_rlm_boot.__code__), {"__builtins__": dict(_builtins.__dict__), "__name__": "_rlm"})()
del _rlm_boot, _rlm_named, _builtins
