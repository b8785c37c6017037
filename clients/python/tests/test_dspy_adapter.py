"""RLMSandboxInterpreter driven through the calls dspy.RLM makes, in order.

The script below is dspy.RLM.forward of DSPy 3.4.1 (dspy/predict/rlm.py)
with the language model taken out: the interpreter is made by the factory,
RLM injects its execution tools and output fields and asks for
re-registration (_inject_execution_context), installs the sandbox dspy
facade (_setup_facade: two more tools, then an execute with a host token
variable), calls start() (_prepare_serializable_vars), then each iteration
calls execute(code, variables=dict(input_args)) and turns CodeExecutionError
and SyntaxError into "[Error] ..." strings (_execute_code), until SUBMIT's
FinalOutput; shutdown() always ends it. It runs with or without DSPy
installed (DSPy's own exception and FinalOutput types when it is).
"""

import os
import re
import subprocess
import sys
import threading
import unittest

from rlm_sandbox.dspy import DSPY_VERSION, RLMSandboxInterpreter, _dspy_types

from support import REPO, binary, process_gone

BIN = binary()
FinalOutput, CodeExecutionError, CodeInterpreterError = _dspy_types()

# A stand-in for DSPy's facade shim: like the real one, it reaches the host
# through globals()["__dspy_call__"](**kwargs).
SHIM = """
def _shim_call(_handle, **_inputs):
    return globals()["__dspy_call__"](handle=_handle, inputs=_inputs)
shim_token = __dspy_host_token
"""


def execute_code(repl, code, input_args):
    """dspy.RLM._execute_code."""
    try:
        return repl.execute(code, variables=dict(input_args))
    except (CodeExecutionError, SyntaxError) as e:
        return "[Error] %s" % e


class ScriptedRLMTest(unittest.TestCase):
    def test_follows_named_dspy_version(self):
        # The Makefile installs the DSPy release the adapter follows.
        with open(os.path.join(REPO, "Makefile")) as f:
            pinned = re.search(r"^DSPY_VERSION := (\S+)$", f.read(), re.M)
        self.assertIsNotNone(pinned)
        self.assertEqual(pinned.group(1), DSPY_VERSION)
        try:
            from dspy.primitives.code_interpreter import CodeInterpreter
        except ImportError:
            self.skipTest("dspy is not installed: the protocol check needs it (make python-env installs it)")
        with RLMSandboxInterpreter(binary=BIN) as interp:
            self.assertIsInstance(interp, CodeInterpreter)

    def test_module_import_does_not_import_dspy(self):
        code = "import sys, rlm_sandbox.dspy; print('dspy' in sys.modules)"
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
        self.assertEqual(out, "False\n")

    def test_rlm_forward_sequence(self):
        llm_prompts, tool_calls, facade_calls = [], [], []
        lock = threading.Lock()

        def llm_query(prompt: str) -> str:
            with lock:
                llm_prompts.append(prompt)
            return "llm(%s)" % prompt

        def llm_query_batched(prompts: list) -> list:  # RLM gives one; the sandbox's own batches llm_query
            raise AssertionError("not used: the sandbox's llm_query_batched asks llm_query per prompt")

        def lookup(key: str, default: str = "?") -> str:
            """Look a key up in the host's table."""
            tool_calls.append((key, default))
            return {"ada": "Lovelace"}.get(key, default)

        def fail_tool() -> str:
            raise ValueError("nope")

        def construct(kind, signature, attr_name, kwargs=None):
            return attr_name

        def call(handle, inputs=None):
            facade_calls.append((handle, inputs))
            return {"a": "answer to %s" % inputs["q"]}

        # factory()
        interp = RLMSandboxInterpreter(binary=BIN)
        try:
            # _inject_execution_context
            interp.tools.update(
                {"llm_query": llm_query, "llm_query_batched": llm_query_batched, "lookup": lookup, "fail_tool": fail_tool}
            )
            self.assertTrue(hasattr(interp, "output_fields"))
            interp.output_fields = [{"name": "answer", "type": "str"}, {"name": "count", "type": "int"}]
            self.assertTrue(hasattr(interp, "_tools_registered"))
            interp._tools_registered = False
            # _setup_facade
            interp.tools.update({"__dspy_construct__": construct, "__dspy_call__": call})
            self.assertEqual(interp.execute(SHIM, variables={"__dspy_host_token": "tok"}), "")
            # _prepare_serializable_vars
            interp.start()
            interp.start()  # idempotent
            input_args = {"context": {"docs": ["ada wrote", "bob read", "ada again"]}, "query": "who wrote?"}

            def step(code):
                return execute_code(interp, code, input_args)

            self.assertEqual(step("print(type(context).__name__, len(context['docs']), query)"), "dict 3 who wrote?\n")
            self.assertEqual(
                step("hits = [d for d in context['docs'] if 'ada' in d]\nprint(lookup('ada'), lookup(key='bob', default='none'))"),
                "Lovelace none\n",
            )
            self.assertEqual(tool_calls, [("ada", "?"), ("bob", "none")])
            out = step("answers = llm_query_batched(hits)\nprint(llm_query('one'), answers)")
            self.assertEqual(out, "llm(one) ['llm(ada wrote)', 'llm(ada again)']\n")
            self.assertEqual(sorted(llm_prompts), ["ada again", "ada wrote", "one"])
            out = step("print('partial')\ncontext = 'clobbered'\nprint(missing_name)")
            self.assertTrue(out.startswith("[Error] partial\n"), out)
            self.assertIn("NameError: name 'missing_name' is not defined", out)
            # The variables are injected again before each execute, as DSPy does.
            self.assertEqual(step("print(type(context).__name__)"), "dict\n")
            out = step("def broken(:\n    pass")
            self.assertTrue(out.startswith("[Error] Invalid Python syntax"), out)
            out = step("fail_tool()")
            self.assertIn("RuntimeError: ValueError: nope", out)
            self.assertEqual(step("print(_shim_call('h1', q='x')['a'], shim_token)"), "answer to x tok\n")
            self.assertEqual(facade_calls, [("h1", {"q": "x"})])
            self.assertEqual(step("x = 20\nx + 1"), "21\n")  # a trailing expression shows, as at a prompt
            final = step("SUBMIT(answer=hits[0], count=len(hits))")
            self.assertIsInstance(final, FinalOutput)
            self.assertEqual(final.output, {"answer": "ada wrote", "count": 2})
            server, worker = interp.sandbox.client.pid, interp.sandbox.pid
        finally:
            interp.shutdown()
        self.assertTrue(process_gone(server))
        self.assertTrue(process_gone(worker))
        interp.shutdown()  # idempotent
        with self.assertRaises(CodeInterpreterError):
            interp.execute("print(1)")

    def test_submit_without_output_fields(self):
        with RLMSandboxInterpreter(binary=BIN) as interp:
            result = interp.execute("SUBMIT({'k': [1, 2]})")
            self.assertIsInstance(result, FinalOutput)
            self.assertEqual(result.output, {"output": {"k": [1, 2]}})
            # SUBMIT inside `except Exception` still ends the execution.
            result = interp.execute("try:\n    SUBMIT(3)\nexcept Exception:\n    print('swallowed')")
            self.assertEqual(result.output, {"output": 3})

    def test_timeout_and_cancel_are_recoverable(self):
        with RLMSandboxInterpreter(binary=BIN, timeout=0.5) as interp:
            interp.execute("n = 41")
            with self.assertRaises(CodeExecutionError) as cm:
                interp.execute("while True: pass")
            self.assertIn("TimeoutError", str(cm.exception))
            self.assertEqual(interp.execute("print(n + 1)"), "42\n")

        entered, release = threading.Event(), threading.Event()

        def slow(prompt):
            entered.set()
            release.wait(60)
            return "late"

        with RLMSandboxInterpreter(binary=BIN, tools={"llm_query": slow}) as interp:
            t = threading.Thread(target=lambda: (entered.wait(60), interp.cancel()))
            t.start()
            try:
                with self.assertRaises(CodeExecutionError) as cm:
                    interp.execute("llm_query('x')")
            finally:
                release.set()
                t.join(60)
            self.assertIn("canceled", str(cm.exception))
            self.assertEqual(interp.execute("print('still here')"), "still here\n")

    def test_cancel_during_the_set_up_keeps_the_code_from_running(self):
        # A cancel that lands while execute still binds the variables (a
        # large context takes a while) must neither be lost nor interrupt
        # the adapter's own set-up (which would end the session): the code
        # does not run, and execute raises CodeExecutionError.
        with RLMSandboxInterpreter(binary=BIN) as interp:
            interp.execute("ran = 0")
            real = interp.sandbox.set_variable

            def set_variable(name, value):
                real(name, value)
                interp.cancel()  # from here, as if from another thread

            interp.sandbox.set_variable = set_variable
            with self.assertRaises(CodeExecutionError) as cm:
                interp.execute("ran += 1", {"context": "z" * 100})
            self.assertIn("canceled", str(cm.exception))
            interp.sandbox.set_variable = real
            self.assertEqual(interp.execute("print(ran, len(context))", {"context": "z" * 100}), "0 100\n")
            # With no execute under way, cancel() does nothing.
            interp.cancel()
            self.assertEqual(interp.execute("ran += 1\nprint(ran)"), "1\n")

    def test_cancel_as_the_code_is_sent_is_not_lost(self):
        # A cancel right after the code's execute is written reaches the
        # server after it, so it stops that code.
        with RLMSandboxInterpreter(binary=BIN, timeout=0) as interp:
            interp.execute("pass")
            sending = interp._sending_code

            def sent():
                sending()
                threading.Thread(target=interp.cancel).start()  # waits for the write lock

            interp._sending_code = sent
            with self.assertRaises(CodeExecutionError) as cm:
                interp.execute("while True: pass")
            self.assertIn("canceled", str(cm.exception))
            interp._sending_code = sending
            self.assertEqual(interp.execute("print('still here')"), "still here\n")

    def test_shutdown_after_the_connection_broke(self):
        # A connection the server ended with an error (not ServerClosed):
        # shutdown() and close() do not raise, execute raises
        # CodeInterpreterError.
        from rlm_sandbox import Client, SandboxError

        with Client(BIN) as client:
            interp = RLMSandboxInterpreter(client=client)
            interp.execute("pass")
            sb = client.create()
            client._broken(SandboxError(-32600, "message_too_large", "simulated"))
            with self.assertRaises(CodeInterpreterError) as cm:
                interp.execute("pass")
            self.assertIn("simulated", str(cm.exception))
            interp.shutdown()
            sb.close()

    def test_variables_nested_deeper_than_the_server_takes(self):
        deep = inner = []
        for _ in range(300):
            inner.append([])
            inner = inner[0]
        with RLMSandboxInterpreter(binary=BIN) as interp:
            code = "d, n = deep, 0\nwhile d:\n    d, n = d[0], n + 1\nprint(n)"
            self.assertEqual(interp.execute(code, {"deep": deep}), "300\n")
            # Deeper than JSON goes (a RecursionError escaped, which
            # dspy.RLM does not expect of an interpreter); the session goes on.
            for _ in range(5000):
                deep = [deep]
            with self.assertRaises(CodeInterpreterError) as cm:
                interp.execute("pass", {"deep": deep})
            self.assertIn("nested too deeply", str(cm.exception))
            self.assertEqual(interp.execute("print(6 * 7)"), "42\n")
            # A value the server takes only as JSON text (a NaN) holding
            # one that text cannot carry (an int past 4,300 digits): the
            # ValueError escaped too.
            with self.assertRaises(CodeInterpreterError) as cm:
                interp.execute("pass", {"mixed": {"n": float("nan"), "big": 10**5000}})
            self.assertIn("cannot be passed", str(cm.exception))
            self.assertEqual(interp.execute("print(6 * 7)"), "42\n")

    def test_killed_sandbox_ends_the_session(self):
        with RLMSandboxInterpreter(binary=BIN, timeout=0.3) as interp:
            with self.assertRaises(CodeInterpreterError) as cm:
                interp.execute("while True:\n    try:\n        while True: pass\n    except BaseException: pass")
            self.assertNotIsInstance(cm.exception, CodeExecutionError)
            with self.assertRaises(CodeInterpreterError):
                interp.execute("print(1)")  # no silent new session

    def test_variables_of_every_json_like_kind(self):
        values = {"s": "text", "i": 2**65, "f": 0.25, "b": False, "n": None, "l": [1, (2, 3)], "d": {"k": {"x"}}}
        with RLMSandboxInterpreter(binary=BIN) as interp:
            out = interp.execute("print(s, i, f, b, n, l, d)", variables=values)
            self.assertEqual(out, "text %d 0.25 False None [1, [2, 3]] {'k': ['x']}\n" % 2**65)
            with self.assertRaises(CodeInterpreterError):
                interp.execute("pass", variables={"not valid": 1})

    def test_variables_with_nan_and_infinity(self):
        # DSPy's own interpreter passes them; JSON has no numbers for them.
        with RLMSandboxInterpreter(binary=BIN) as interp:
            out = interp.execute("print(x, y, 'v' in globals())", variables={"x": {"s": float("nan")}, "y": [float("-inf"), 1]})
            self.assertEqual(out, "{'s': nan} [-inf, 1] False\n")

    def test_large_str_variables_are_sent_once(self):
        big = "x" * 200_000 + "end"
        with RLMSandboxInterpreter(binary=BIN) as interp:
            self.assertEqual(interp.execute("print(len(context))", {"context": big, "n": 1}), "200003\n")
            sent = []
            real = interp.sandbox.set_variable
            interp.sandbox.set_variable = lambda name, value: (sent.append(name), real(name, value))[1]
            # The code rebinds it: DSPy's next injection gives it back.
            out = interp.execute("print(len(context), context[-3:], n)\ncontext = 'changed'", {"context": big, "n": 2})
            self.assertEqual(out, "200003 end 2\n")
            self.assertEqual(interp.execute("print(context[-3:])", {"context": "y" * 100_000 + "new", "n": 3}), "new\n")
            self.assertEqual(sent, ["n", "context", "n"])  # context once, when it changed

    def test_tool_named_like_a_builtin_is_refused(self):
        def search_context(term: str) -> str:
            return "db hit"

        with RLMSandboxInterpreter(tools={"search_context": search_context}, binary=BIN) as interp:
            with self.assertRaises(CodeInterpreterError) as cm:
                interp.execute("print(search_context(term='ada'))")
            self.assertIn("search_context", str(cm.exception))


if __name__ == "__main__":
    unittest.main()
