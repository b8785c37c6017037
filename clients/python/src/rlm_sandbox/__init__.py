"""Python client for rlm-sandbox.

`Sandbox` runs LLM-written Python in a sandbox (CPython in WebAssembly, in
its own worker process) served by `rlm-sandbox serve`; `Client` is one
server holding several sandboxes. `rlm_sandbox.dspy.RLMSandboxInterpreter`
makes a sandbox the code interpreter of `dspy.RLM`.
"""

from ._client import PROTOCOL, Client, Result, Sandbox
from ._errors import (
    InvalidParams,
    NoSuchSandbox,
    ProtocolError,
    SandboxDead,
    SandboxError,
    ServerClosed,
)
from ._transport import find_binary

__version__ = "0.1.0"

__all__ = [
    "PROTOCOL",
    "Client",
    "InvalidParams",
    "NoSuchSandbox",
    "ProtocolError",
    "Result",
    "Sandbox",
    "SandboxDead",
    "SandboxError",
    "ServerClosed",
    "find_binary",
]
