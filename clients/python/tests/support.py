"""Shared by the tests: the real rlm-sandbox binary, and process checks."""

import os
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))


def binary() -> str:
    """The rlm-sandbox binary under test: $RLM_SANDBOX, else the repository's
    bin/rlm-sandbox (built by `make`). Missing is a failure, not a skip: the
    tests are about the real server."""
    path = os.environ.get("RLM_SANDBOX") or os.path.join(REPO, "bin", "rlm-sandbox")
    if not os.access(path, os.X_OK):
        raise RuntimeError("no rlm-sandbox binary at %s: run `make` first, or set $RLM_SANDBOX" % path)
    return path


def wait_gone(pid: int, timeout: float = 30.0) -> bool:
    """Waits until process_gone(pid), for up to timeout seconds."""
    deadline = time.monotonic() + timeout
    while not process_gone(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def process_gone(pid: int) -> bool:
    """True when no process `pid` runs (a zombie that is not ours counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        with open("/proc/%d/stat" % pid) as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state in ("Z", "X")
