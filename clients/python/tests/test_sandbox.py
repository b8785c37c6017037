"""The Sandbox and Client API end to end, against the real rlm-sandbox binary."""

import contextvars
import os
import threading
import sys
import unittest

import rlm_sandbox
from rlm_sandbox import Client, InvalidParams, NoSuchSandbox, Sandbox, SandboxDead, SandboxError

from support import binary, process_gone, wait_gone

BIN = binary()


class SandboxTest(unittest.TestCase):
    def test_context_str(self):
        with Sandbox("a long document", binary=BIN) as sb:
            r = sb.execute("print(type(context).__name__, context.upper())")
        self.assertEqual(r.stdout, "str A LONG DOCUMENT\n")
        self.assertIsNone(r.error)
        self.assertTrue(r.ok)

    def test_context_json_like(self):
        value = {"numbers": [3, 1, 2], "big": 2**70, "ratio": 1.5, "flag": True, "none": None, "nested": {"k": ["v"]}}
        with Sandbox(value, binary=BIN) as sb:
            r = sb.execute(
                "print(sorted(context['numbers']), context['big'] + 1, type(context['ratio']).__name__,\n"
                "      context['flag'] is True, context['none'] is None, context['nested']['k'][0])"
            )
            self.assertEqual(r.stdout, "[1, 2, 3] %d float True True v\n" % (2**70 + 1))
            self.assertEqual(sb.execute("print(list(context))").stdout, repr(list(value)) + "\n")  # in order
            self.assertEqual(list(sb.get_variable("context")), list(value))  # and back, in order
            self.assertEqual(sb.get_variable("context"), value)
        for ctx in ([1, "two", 3.0], 42, None):
            with self.subTest(context=ctx), Sandbox(ctx, binary=BIN) as sb:
                self.assertEqual(sb.execute("print(repr(context))").stdout, repr(ctx) + "\n")

    def test_output_and_streaming(self):
        out, err = [], []
        with Sandbox(binary=BIN, on_stdout=out.append, on_stderr=err.append) as sb:
            r = sb.execute("import sys\nprint('one')\nprint('two', file=sys.stderr)\nprint('three')")
        self.assertEqual(r.stdout, "one\nthree\n")
        self.assertEqual(r.stderr, "two\n")
        # The output of an execute arrives before its response.
        self.assertEqual(out, ["one", "three"])
        self.assertEqual(err, ["two"])

    def test_interactive_shows_trailing_expression(self):
        with Sandbox(binary=BIN) as sb:
            self.assertEqual(sb.execute("x = 6\nx * 7", interactive=True).stdout, "42\n")
            self.assertEqual(sb.execute("x * 7").stdout, "")

    def test_exception_is_a_result(self):
        with Sandbox(binary=BIN) as sb:
            r = sb.execute("print('before')\nd = {}\nd['missing']")
            self.assertEqual(r.stdout, "before\n")
            self.assertEqual(r.error_type, "KeyError")
            self.assertEqual(r.error, "KeyError: 'missing'")
            self.assertIn("line 3", r.traceback)
            self.assertFalse(r.ok)
            # The sandbox goes on, with its state.
            self.assertEqual(sb.execute("print(d)").stdout, "{}\n")

    def test_variables(self):
        with Sandbox(binary=BIN) as sb:
            sb.set_variable("limits", {"max": 2, "names": ["a", "b"]})
            r = sb.execute("limits['max'] += 1\nlimits['names'].append('c')\ntotal = sum(range(limits['max']))")
            self.assertTrue(r.ok, r.error)
            self.assertEqual(sb.get_variable("limits"), {"max": 3, "names": ["a", "b", "c"]})
            self.assertEqual(sb.get_variable("total"), 3)
            self.assertIsNone(sb.get_variable("nope"))
            self.assertEqual(sb.get_variable("nope", default="d"), "d")
            sb.execute("t = (1, 2)\ns = {'x'}")
            self.assertEqual(sb.get_variable("t"), [1, 2])
            self.assertEqual(sb.get_variable("s"), ["x"])

    def test_timeout(self):
        with Sandbox(binary=BIN, timeout=0.5) as sb:
            r = sb.execute("print('spinning')\nwhile True: pass")
            self.assertTrue(r.timed_out)
            self.assertFalse(r.canceled)
            self.assertEqual(r.error_type, "KeyboardInterrupt")
            self.assertEqual(r.stdout, "spinning\n")
            self.assertEqual(sb.execute("print('after')").stdout, "after\n")

    def test_a_time_limit_under_a_millisecond_is_a_limit(self):
        # timeout_ms 0 means no limit to the server: a positive limit
        # under half a millisecond must not round down to it.
        spin = "import time\nt = time.time()\nwhile time.time() - t < 3: pass"
        with Sandbox(binary=BIN, timeout=0.0004) as sb:
            self.assertTrue(sb.execute(spin).timed_out)
        with Sandbox(binary=BIN, wall_timeout=0.0004) as sb:
            self.assertTrue(sb.execute(spin).timed_out)
        # 0, and an infinite limit, are no limit; NaN is refused.
        for none in (0, float("inf")):
            with Sandbox(binary=BIN, timeout=none, wall_timeout=none) as sb:
                self.assertFalse(sb.execute("x = 1").timed_out)
        with self.assertRaises(ValueError):
            Sandbox(binary=BIN, timeout=float("nan"))

    def test_code_that_ignores_the_interrupt_kills_the_sandbox(self):
        with Sandbox(binary=BIN, timeout=0.3) as sb:
            sb.execute("x = 1")
            old_pid = sb.pid
            with self.assertRaises(SandboxDead) as cm:
                sb.execute("while True:\n    try:\n        while True: pass\n    except BaseException: pass")
            self.assertEqual(cm.exception.code, -32001)
            self.assertIn("dead", cm.exception.message)
            self.assertTrue(process_gone(old_pid))
            with self.assertRaises(SandboxDead):
                sb.execute("print(1)")
            sb.restart()
            self.assertNotEqual(sb.pid, old_pid)
            self.assertEqual(sb.info["pid"], sb.pid)
            self.assertEqual(sb.execute("print('x' in globals())").stdout, "False\n")

    def test_cancel_from_another_thread_during_llm_query(self):
        entered, release = threading.Event(), threading.Event()

        def llm(prompt):
            entered.set()
            release.wait(60)
            return "late answer"

        with Sandbox(binary=BIN, llm_query=llm) as sb:
            canceller = threading.Thread(target=lambda: (entered.wait(60), sb.cancel()))
            canceller.start()
            try:
                r = sb.execute("print('asking')\nanswer = llm_query('slow question')\nprint('got', answer)")
            finally:
                release.set()
                canceller.join(60)
            self.assertTrue(entered.is_set())
            self.assertTrue(r.canceled)
            self.assertFalse(r.timed_out)
            self.assertEqual(r.error_type, "KeyboardInterrupt")
            self.assertEqual(r.stdout, "asking\n")
            self.assertIsNone(sb.get_variable("answer"))
            # The late answer is dropped and the sandbox goes on.
            self.assertEqual(sb.execute("print(1 + 1)").stdout, "2\n")
            # A cancel for a call answered already (a race) is not kept.
            sb.client._dispatch({"jsonrpc": "2.0", "method": "cancel_request", "params": {"id": "answered"}})
            self.assertEqual((sb.client._answering, sb.client._canceled_bridge), (set(), set()))

    def test_cancel_from_an_output_callback(self):
        # Output callbacks run on the client's reader thread: cancel() works
        # there (sent without waiting for its answer); another call raises
        # instead of waiting forever for an answer only that thread reads.
        seen = []

        def on_stdout(line):
            seen.append(line)
            if line == "STOP":
                try:
                    sb.get_variable("x")
                except SandboxError as e:
                    seen.append(e.kind)
                sb.cancel()

        with Sandbox(binary=BIN, timeout=0, on_stdout=on_stdout) as sb:
            r = sb.execute("x = 1\nprint('STOP')\nwhile True: pass")
            self.assertTrue(r.canceled)
            self.assertEqual(r.error_type, "KeyboardInterrupt")
            self.assertEqual(seen, ["STOP", "deadlock"])
            self.assertEqual(sb.execute("print(x)").stdout, "1\n")
            self.assertEqual(sb.client.call("version")["protocol"], 1)

    def test_close_from_an_output_callback_is_refused(self):
        # close() would wait for the reader thread the callback runs on:
        # refused as the other calls are, for a private server's sandbox
        # (whose close ends the server) as for a shared one's.
        seen = []

        def closer(box):
            def on_stdout(line):
                try:
                    box[0].close()
                except SandboxError as e:
                    seen.append(e.kind)

            return on_stdout

        private, shared = [], []
        private.append(Sandbox(binary=BIN, on_stdout=closer(private)))
        with Client(BIN) as client:
            shared.append(client.create(on_stdout=closer(shared)))
            for sb in (private[0], shared[0]):
                with sb:
                    self.assertEqual(sb.execute("print('x')").stdout, "x\n")
                    self.assertEqual(sb.execute("print(1)").stdout, "1\n")  # not closed
        self.assertEqual(seen, ["deadlock"] * 4)

    def test_cancel_when_idle_is_a_no_op(self):
        with Sandbox(binary=BIN) as sb:
            sb.cancel()
            self.assertEqual(sb.execute("print('fine')").stdout, "fine\n")

    def test_batched_calls_are_answered_concurrently(self):
        # Each callback waits at a barrier for all four: only concurrent
        # callbacks get through it (a serial client breaks it, and the
        # prompts fail as BridgeError).
        barrier = threading.Barrier(4, timeout=60)
        threads = set()

        def llm(prompt):
            threads.add(threading.get_ident())
            barrier.wait()
            return prompt.upper()

        with Sandbox(binary=BIN, llm_query=llm) as sb:
            r = sb.execute("print(llm_query_batched(['a', 'b', 'c', 'd']))")
        self.assertTrue(r.ok, r.traceback)
        self.assertEqual(r.stdout, "['A', 'B', 'C', 'D']\n")
        self.assertEqual(r.bridge_calls, 4)
        self.assertEqual(len(threads), 4)

    def test_stats_while_code_runs(self):
        # stats() is answered at once, even while the sandbox's code waits
        # for the very callback that asks (it used to be refused there as
        # a deadlock, and from another thread to wait for the code).
        seen = []
        started = threading.Event()

        def llm(prompt):
            seen.append(sb.stats())
            return "ok"

        def on_stdout(line):
            if line == "spin":
                started.set()

        with Sandbox(binary=BIN, llm_query=llm, timeout=0, on_stdout=on_stdout) as sb:
            r = sb.execute("print(llm_query('x'))")
            self.assertTrue(r.ok, r.traceback)
            self.assertEqual(r.stdout, "ok\n")
            self.assertEqual(seen[0]["executions"], 0)  # the running one is not counted yet
            self.assertGreater(seen[0]["linear_memory_bytes"], 0)
            worker = threading.Thread(target=lambda: seen.append(sb.execute("print('spin', flush=True)\nwhile True: pass")))
            worker.start()
            self.assertTrue(started.wait(60))
            self.assertEqual(sb.stats()["executions"], 1)  # while the loop spins
            sb.cancel()
            worker.join(60)
            self.assertTrue(seen[-1].canceled)

    def test_get_variable_whose_repr_is_killed_is_sandbox_dead(self):
        # A value's own code that ignores the interrupt of cancel() is
        # killed with the sandbox: SandboxDead, as for an execute (it was
        # a plain SandboxError, and a framework's `except SandboxDead:
        # restart()` missed it).
        with Sandbox(binary=BIN) as sb:
            sb.execute(
                "class S:\n    def __repr__(self):\n        while True:\n            try:\n                while True: pass\n"
                "            except BaseException: pass\ns = S()"
            )
            done = threading.Event()

            def cancel_until_done():
                # cancel() does nothing until the __repr__ runs: again,
                # until get_variable returns.
                while not done.wait(0.1):
                    sb.cancel()

            canceller = threading.Thread(target=cancel_until_done)
            canceller.start()
            try:
                with self.assertRaises(SandboxDead) as cm:
                    sb.get_variable("s")
            finally:
                done.set()
                canceller.join()
            self.assertEqual(cm.exception.code, -32002)
            sb.restart()
            self.assertEqual(sb.execute("print(1)").stdout, "1\n")

    @unittest.skipUnless(hasattr(os, "fork"), "no fork here")
    def test_close_after_a_fork(self):
        # A child forked while the client lives (os.fork, multiprocessing's
        # fork start method) held the server's standard input open, so the
        # server never saw its end and close() waited out close_timeout
        # (then SIGTERM). The child's copy goes to /dev/null now.
        client = Client(BIN, close_timeout=600)
        sb = client.create("x")
        self.assertEqual(sb.execute("print(context)").stdout, "x\n")
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: wait until the parent is done, then go
            try:
                os.close(w)
                os.read(r, 1)
            finally:
                os._exit(0)
        os.close(r)
        try:
            closer = threading.Thread(target=client.close)
            closer.start()
            closer.join(120)
            self.assertFalse(closer.is_alive(), "close() waits for the forked child")
        finally:
            os.close(w)
            os.waitpid(pid, 0)
            closer.join()

    def test_callbacks_see_the_callers_contextvars(self):
        var = contextvars.ContextVar("var", default="unset")

        with Sandbox(binary=BIN, llm_query=lambda p: var.get()) as sb:
            token = var.set("from execute's thread")
            try:
                r = sb.execute("print(llm_query_batched(['a', 'b']))")
            finally:
                var.reset(token)
        self.assertEqual(r.stdout, repr(["from execute's thread"] * 2) + "\n")

    def test_rlm_query(self):
        calls = []

        def rlm(task, ctx):
            calls.append((task, ctx))
            return "%s over %r" % (task, ctx)

        with Sandbox({"doc": "text"}, binary=BIN, rlm_query=rlm) as sb:
            r = sb.execute("print(rlm_query('summarize'))\nprint(rlm_query('count', [1, 2]))")
        self.assertTrue(r.ok, r.traceback)
        self.assertEqual(calls, [("summarize", {"doc": "text"}), ("count", [1, 2])])
        self.assertEqual(r.stdout, "summarize over {'doc': 'text'}\ncount over [1, 2]\n")

    def test_callback_error_raises_bridge_error(self):
        def llm(prompt):
            raise ValueError("model unavailable")

        with Sandbox(binary=BIN, llm_query=llm) as sb:
            r = sb.execute(
                "try:\n    llm_query('x')\nexcept BridgeError as e:\n    print('caught', e)\n"
                "print(rlm_query('t'))"
            )
        self.assertIn("caught ValueError: model unavailable\n", r.stdout)
        # rlm_query was not given: calling it raises BridgeError too.
        self.assertEqual(r.error_type, "BridgeError")

    def test_callback_error_whose_str_fails(self):
        # Its description failed on the thread answering the sandbox,
        # which died: the sandbox waited for ever.
        class Weird(Exception):
            def __str__(self):
                raise RuntimeError("no str")

        def llm(prompt):
            raise Weird()

        with Sandbox(binary=BIN, llm_query=llm, wall_timeout=10) as sb:
            r = sb.execute("try:\n    llm_query('x')\nexcept BridgeError as e:\n    print('caught', e)")
        self.assertTrue(r.ok, r.traceback)
        self.assertEqual(r.stdout, "caught Weird: <str() of the exception failed>\n")

    def test_system_exit_in_an_output_callback(self):
        # It ended the thread reading the server: every call then waited
        # for ever (hence the thread, which a hang leaves behind).
        def on_stdout(line):
            sys.exit(1)

        results = []

        def run():
            with Sandbox(binary=BIN, on_stdout=on_stdout) as sb:
                results.append(sb.execute("print('x')"))
                results.append(sb.execute("print(6 * 7)"))

        t = threading.Thread(target=run, daemon=True)
        t.start()
        t.join(60)
        self.assertFalse(t.is_alive(), "the calls after the callback's SystemExit hung")
        self.assertEqual([r.stdout for r in results], ["x\n", "42\n"])

    def test_value_nested_too_deep_for_json(self):
        deep = []
        for _ in range(5000):
            deep = [deep]
        with Sandbox(binary=BIN) as sb:
            with self.assertRaises(ValueError) as cm:
                sb.set_variable("v", deep)
            self.assertIn("nested too deeply", str(cm.exception))
            self.assertEqual(sb.execute("print(1)").stdout, "1\n")

    def test_server_errors_are_exceptions_with_code(self):
        with Client(BIN) as client:
            with self.assertRaises(InvalidParams) as cm:
                client.call("create", no_such_option=1)
            self.assertEqual(cm.exception.code, -32602)
            self.assertEqual(cm.exception.kind, "invalid_params")
            self.assertIn("no_such_option", cm.exception.message)
            sb = client.create("x")
            sb.close()
            with self.assertRaises(NoSuchSandbox) as cm:
                sb.execute("print(1)")
            self.assertEqual(cm.exception.code, -32003)
            self.assertIsInstance(cm.exception, SandboxError)

    def test_memory_limit(self):
        with Sandbox(binary=BIN, memory_limit=256 << 20) as sb:
            r = sb.execute("x = bytearray(512 << 20)")
            self.assertEqual(r.error_type, "MemoryError")
            self.assertEqual(sb.execute("print('alive')").stdout, "alive\n")

    def test_client_with_many_sandboxes(self):
        with Client(BIN) as client:
            self.assertEqual(client.version()["protocol"], rlm_sandbox.PROTOCOL)
            a = client.create("A", llm_query=lambda p: "a:" + p)
            b = client.create("B", llm_query=lambda p: "b:" + p)
            self.assertNotEqual(a.id, b.id)
            results = {}
            threads = [
                threading.Thread(target=lambda s=s: results.__setitem__(s.id, s.execute("print(llm_query(context))")))
                for s in (a, b)
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
            self.assertEqual(results[a.id].stdout, "a:A\n")
            self.assertEqual(results[b.id].stdout, "b:B\n")
            a.close()
            self.assertEqual(b.execute("print('b lives')").stdout, "b lives\n")

    def test_close_leaves_no_process(self):
        sb = Sandbox(binary=BIN)
        server, worker = sb.client.pid, sb.pid
        self.assertIsNotNone(worker)
        self.assertFalse(process_gone(server))
        self.assertFalse(process_gone(worker))
        sb.execute("x = 1")
        sb.close()
        sb.close()  # idempotent
        self.assertTrue(process_gone(server), "server %d still runs" % server)
        self.assertTrue(process_gone(worker), "worker %d still runs" % worker)
        with self.assertRaises(rlm_sandbox.ServerClosed):
            sb.execute("print(1)")

    def test_values_json_cannot_carry(self):
        with Sandbox(binary=BIN) as sb:
            for bad in (float("nan"), {"a": [float("inf")]}):
                with self.subTest(value=bad), self.assertRaises(ValueError):
                    sb.set_variable("x", bad)
            with self.assertRaises(TypeError):
                sb.set_variable("x", b"bytes")
            with self.assertRaises(ValueError):
                Sandbox(float("-inf"), binary=BIN)
            # Nothing was sent: the connection goes on.
            self.assertEqual(sb.execute("print('still here')").stdout, "still here\n")

    def test_integers_past_the_digit_limit(self):
        big = 7 * 10**5000 + 1
        with Sandbox({"n": -big}, binary=BIN) as sb:
            self.assertEqual(sb.execute("print(context['n'] == -(7 * 10**5000 + 1))").stdout, "True\n")
            sb.execute("x = 10**6000 + 3")
            self.assertEqual(sb.get_variable("x"), 10**6000 + 3)
            sb.set_variable("y", [big])
            self.assertEqual(sb.execute("print(y[0] % 10**6)").stdout, "1\n")

    def test_lone_surrogates_arrive_replaced(self):
        # Not valid Unicode (os.fsdecode makes them): the server reads each
        # as U+FFFD, as it does for any client's JSON.
        with Sandbox("file\udcff.txt", binary=BIN, llm_query=lambda p: "bad\ud800") as sb:
            r = sb.execute("print(ascii(context), ascii(llm_query('q')))\nprint('\udcff')")
            self.assertIsNone(r.error, r.error)
            self.assertEqual(r.stdout, "'file\\ufffd.txt' 'bad\\ufffd'\n\ufffd\n")

    def test_error_without_id_fails_the_client(self):
        client = Client(BIN)
        try:
            client._transport.send(b"{not json\n")  # what a cut line would look like
            with self.assertRaises(SandboxError) as cm:
                for _ in range(1000):  # the server's answer is on its way
                    client.call("version")
            self.assertEqual(cm.exception.code, rlm_sandbox._errors.PARSE_ERROR)
        finally:
            client.close()

    def test_interrupt_during_a_large_write(self):
        # A KeyboardInterrupt while a 100 MB request is being written must
        # not cut it (the server would then read garbage and the client
        # wait forever): the write completes, the caller gets the
        # interrupt (and cancels the execution), and the client goes on.
        import signal

        with Sandbox(binary=BIN) as sb:
            timer = threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT))
            timer.start()
            try:  # wherever the interrupt lands: in the write, the wait, or after
                try:
                    sb.execute("s = '" + "y" * 100_000_000 + "'\ndel s")
                finally:
                    timer.join()
                    signal.getsignal(signal.SIGINT)  # a bytecode boundary for a pending handler
            except KeyboardInterrupt:
                pass
            self.assertEqual(sb.execute("print('next')").stdout, "next\n")

    def test_interrupted_create_leaves_no_sandbox(self):
        # Ctrl-C while a shared Client writes a large create: the write
        # completes (the request is whole), the caller gets the interrupt,
        # and the sandbox the server creates anyway is destroyed as soon as
        # its id comes back, rather than left running with no handle.
        import _thread
        import time

        client = Client(binary=BIN)
        try:
            sending = threading.Event()
            send = client._transport.send

            def send_and_tell(data):
                sending.set()
                send(data)

            client._transport.send = send_and_tell
            interrupter = threading.Thread(target=lambda: (sending.wait(), _thread.interrupt_main()))
            interrupter.start()
            with self.assertRaises(KeyboardInterrupt):
                try:
                    client.create("z" * (20 << 20))
                finally:
                    interrupter.join()
            client._transport.send = send
            deadline = time.monotonic() + 30
            while True:  # the destroy is sent when the create's answer arrives
                try:
                    client.call("stats", sandbox="s1")
                except rlm_sandbox.NoSuchSandbox:
                    break
                self.assertLess(time.monotonic(), deadline, "the interrupted create's sandbox was not destroyed")
                time.sleep(0.01)
            self.assertEqual(client.create("ok").id, "s2")
        finally:
            client.close()

    def test_callback_using_its_own_sandbox_is_refused(self):
        def ask(prompt):
            return str(sb.get_variable("context"))

        with Sandbox("ctx", binary=BIN, llm_query=ask) as sb:
            r = sb.execute("print(llm_query('q'))")
        self.assertEqual(r.error_type, "BridgeError")
        self.assertIn("same sandbox", r.error)

    def test_callbacks_see_the_contextvars_of_their_own_execute(self):
        # B's execute is sent while A's runs (it waits behind A in the
        # server): A's callback must still see A's context, not B's.
        import time

        who = contextvars.ContextVar("who")
        results = {}

        def answer(prompt):
            if prompt == "first":
                while len(sb.client._pending) < 2:  # until B's execute is on its way
                    time.sleep(0.001)
            return who.get()

        def run(name, prompt):
            who.set(name)
            results[name] = sb.execute("print(llm_query(%r))" % prompt).stdout

        with Sandbox(binary=BIN, llm_query=answer) as sb:
            a = threading.Thread(target=run, args=("A", "first"))
            a.start()
            while not sb.client._pending:  # A's execute is on its way
                time.sleep(0.001)
            b = threading.Thread(target=run, args=("B", "second"))
            b.start()
            a.join(60)
            b.join(60)
        self.assertEqual(results, {"A": "A\n", "B": "B\n"})

    def test_dropped_objects_end_their_processes(self):
        import gc

        sb = Sandbox(binary=BIN)
        server, worker = sb.client.pid, sb.pid
        sb.execute("x = 1")
        del sb
        gc.collect()
        self.assertTrue(wait_gone(server), "server %d of a dropped Sandbox still runs" % server)
        self.assertTrue(wait_gone(worker), "worker %d of a dropped Sandbox still runs" % worker)
        with Client(BIN) as client:
            shared = client.create("x")
            worker = shared.pid
            del shared
            gc.collect()
            self.assertTrue(wait_gone(worker), "worker %d of a dropped shared Sandbox still runs" % worker)
            self.assertEqual(client.create("y").execute("print(context)").stdout, "y\n")

    def test_close_ends_a_running_execute(self):
        started = threading.Event()
        with Sandbox(binary=BIN, timeout=0, on_stdout=lambda line: started.set()) as sb:
            # Without the destroy close() sends first, closing the server's
            # stdin would wait for this code (it never ends), then for
            # close_timeout: long enough here to fail the test.
            sb.client._close_timeout = 3600
            outcome = []

            def run():
                try:
                    sb.execute("print('running', flush=True)\nwhile True: pass")
                except SandboxError as e:
                    outcome.append(type(e).__name__)

            t = threading.Thread(target=run)
            t.start()
            started.wait(60)
            closer = threading.Thread(target=sb.close, daemon=True)
            closer.start()
            closer.join(120)  # a guard against the hang, not a measure
            self.assertFalse(closer.is_alive(), "close() waits for the running code")
            t.join(60)
        # Destroyed (NoSuchSandbox), or ended by the server's shutdown,
        # which may come first (ServerClosed): either way, not waited for.
        self.assertEqual(len(outcome), 1)
        self.assertIn(outcome[0], ("NoSuchSandbox", "ServerClosed"))

    def test_binary_from_environment(self):
        old = os.environ.get("RLM_SANDBOX")
        os.environ["RLM_SANDBOX"] = BIN
        try:
            with Sandbox() as sb:
                self.assertEqual(sb.execute("print('env')").stdout, "env\n")
            # Without $RLM_SANDBOX: the one on $PATH.
            del os.environ["RLM_SANDBOX"]
            old_path = os.environ.get("PATH", "")
            os.environ["PATH"] = os.path.dirname(BIN) + os.pathsep + old_path
            try:
                self.assertEqual(rlm_sandbox.find_binary(), os.path.join(os.path.dirname(BIN), "rlm-sandbox"))
                with Sandbox() as sb:
                    self.assertEqual(sb.execute("print('path')").stdout, "path\n")
            finally:
                os.environ["PATH"] = old_path
            os.environ["RLM_SANDBOX"] = os.path.join(os.path.dirname(BIN), "no-such-binary")
            with self.assertRaises(SandboxError):
                Sandbox()
        finally:
            if old is None:
                del os.environ["RLM_SANDBOX"]
            else:
                os.environ["RLM_SANDBOX"] = old


if __name__ == "__main__":
    unittest.main()
