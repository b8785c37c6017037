"""A real dspy.RLM run on RLMSandboxInterpreter, with a stub language model.

Skipped, saying so, when DSPy is not installed (`make python-env` installs
it from PyPI; if that failed, the rest of the suite still runs).
"""

import threading
import unittest

from support import binary, process_gone

BIN = binary()

try:
    import dspy
    from dspy.utils.dummies import DummyLM
except ImportError as e:  # pragma: no cover - depends on the machine
    dspy = None
    IMPORT_ERROR = e

from rlm_sandbox.dspy import DSPY_VERSION, RLMSandboxInterpreter


class SubLM:
    """The sub-LM behind llm_query: answers each prompt with a tag."""

    def __init__(self):
        self.prompts = []
        self.lock = threading.Lock()

    def __call__(self, prompt=None, **kwargs):
        with self.lock:
            self.prompts.append(prompt)
        return ["sub:%s" % prompt]


class Recorder:
    """An interpreter factory that keeps what it made (to check shutdown)."""

    def __init__(self):
        self.made = []

    def __call__(self):
        interp = RLMSandboxInterpreter(binary=BIN)
        self.made.append(interp)
        return interp


@unittest.skipIf(dspy is None, "dspy is not installed, so no real dspy.RLM run: %s" % (globals().get("IMPORT_ERROR"),))
class RealRLMTest(unittest.TestCase):
    def setUp(self):
        if dspy.__version__ != DSPY_VERSION:
            print("note: dspy %s installed; the adapter follows %s" % (dspy.__version__, DSPY_VERSION))

    def test_rlm_with_tools_llm_query_and_submit(self):
        def lookup(key: str) -> str:
            """Look a surname up by first name."""
            return {"ada": "Lovelace"}.get(key, "?")

        lm = DummyLM(
            [
                {"reasoning": "look", "code": "```python\nprint(len(context), query)\nprint(lookup('ada'))\n```"},
                {
                    "reasoning": "ask",
                    "code": "```python\nans = llm_query('hi ' + query)\nparts = llm_query_batched(['a', 'b'])\nprint(ans, parts)\n```",
                },
                {"reasoning": "oops", "code": "```python\nprint(undefined_name)\n```"},
                {"reasoning": "done", "code": "SUBMIT(answer=ans + ' ' + lookup(key='ada'))"},
            ]
        )
        sub = SubLM()
        factory = Recorder()
        rlm = dspy.RLM(
            "context, query -> answer", max_iters=6, tools=[lookup], sub_lm=sub, interpreter_factory=factory
        )
        with dspy.context(lm=lm):
            pred = rlm(context="some text", query="who?")
        self.assertEqual(pred.answer, "sub:hi who? Lovelace")
        outputs = [step["output"] for step in pred.trajectory]
        self.assertEqual(outputs[0], "9 who?\nLovelace\n")
        self.assertEqual(outputs[1], "sub:hi who? ['sub:a', 'sub:b']\n")
        self.assertTrue(outputs[2].startswith("[Error]") and "NameError" in outputs[2], outputs[2])
        self.assertEqual(outputs[3], "FINAL: {'answer': 'sub:hi who? Lovelace'}")
        self.assertEqual(sorted(sub.prompts), ["a", "b", "hi who?"])
        # RLM shuts down every interpreter it creates.
        self.assertEqual(len(factory.made), 1)
        with self.assertRaises(Exception):
            factory.made[0].execute("print(1)")

    def test_sandbox_dspy_facade_sub_agent(self):
        # Code in the sandbox builds a dspy.Predict sub-agent; the facade
        # runs it on the host through the interpreter's tools.
        lm = DummyLM(
            [
                {"reasoning": "sub", "code": "```python\nimport dspy\np = dspy.Predict('q -> a')\nr = p(q='x')\nprint(r.a)\n```"},
                {"a": "sub-answer"},
                {"reasoning": "done", "code": "SUBMIT(answer=r.a)"},
            ]
        )
        rlm = dspy.RLM(
            "context, query -> answer",
            max_iters=3,
            interpreter_factory=RLMSandboxInterpreter.factory(binary=BIN),
        )
        with dspy.context(lm=lm):
            pred = rlm(context="text", query="q")
        self.assertEqual(pred.trajectory[0]["output"], "sub-answer\n")
        # RLM put the factory's execution instructions in the model's prompt.
        self.assertIn(RLMSandboxInterpreter.execution_instructions, lm.history[0]["messages"][0]["content"])
        self.assertEqual(pred.answer, "sub-answer")

    def test_configured_interpreter_factory(self):
        lm = DummyLM([{"reasoning": "done", "code": "SUBMIT(answer=str(sum(context)))"}])
        factory = Recorder()
        with dspy.context(lm=lm, interpreter_factory=factory):
            pred = dspy.RLM("context -> answer", max_iters=2)(context=[1, 2, 3])
        self.assertEqual(pred.answer, "6")
        self.assertTrue(factory.made[0].sandbox is None)  # shut down


if __name__ == "__main__":
    unittest.main()
