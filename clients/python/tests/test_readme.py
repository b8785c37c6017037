"""The README's sandbox session runs and prints what its comments say."""

import contextlib
import io
import os
import re
import unittest

from support import HERE, binary

README = os.path.join(HERE, "..", "README.md")


class ReadmeTest(unittest.TestCase):
    def test_sandbox_session(self):
        with open(README) as f:
            blocks = re.findall(r"```python\n(.*?)```", f.read(), re.S)
        session = next(b for b in blocks if "from rlm_sandbox import Sandbox" in b)
        expected = [m.group(1) for m in re.finditer(r"^\s*print\(.*\)\s+# (.*)$", session, re.M)]
        self.assertEqual(len(expected), 4)
        out = io.StringIO()
        old = os.environ.get("RLM_SANDBOX")
        os.environ["RLM_SANDBOX"] = binary()
        try:
            with contextlib.redirect_stdout(out):
                exec(compile(session, README, "exec"), {"__name__": "readme"})
        finally:
            if old is None:
                del os.environ["RLM_SANDBOX"]
            else:
                os.environ["RLM_SANDBOX"] = old
        self.assertEqual(out.getvalue().splitlines(), expected)


if __name__ == "__main__":
    unittest.main()
