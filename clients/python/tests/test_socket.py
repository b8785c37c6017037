"""Client(address=...) over a unix socket, to a real server.

One test puts a relay between a unix socket and a real `rlm-sandbox
serve --stdio` (the socket transport on its own); the others run a real
`serve --listen` with a token: the client authenticates, and a wrong token
is refused.
"""

import os
import socket
import subprocess
import tempfile
import threading
import time
import unittest

from rlm_sandbox import Client, SandboxError, ServerClosed

from support import binary, process_gone, wait_gone

BIN = binary()


def _pump(read, write, done):
    try:
        while True:
            data = read()
            if not data:
                break
            write(data)
    except OSError:
        pass
    finally:
        done()


class SocketTransportTest(unittest.TestCase):
    def test_unix_socket(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "serve.sock")
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            listener.bind(path)
            listener.listen(1)
            server = subprocess.Popen([BIN, "serve", "--stdio"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
            accepted = {}

            def relay():
                conn, _ = listener.accept()
                accepted["conn"] = conn
                down = threading.Thread(
                    target=_pump,
                    args=(lambda: server.stdout.read(65536), conn.sendall, lambda: conn.shutdown(socket.SHUT_WR)),
                )
                down.start()
                _pump(lambda: conn.recv(65536), server.stdin.write, server.stdin.close)
                down.join(60)
                conn.close()

            t = threading.Thread(target=relay)
            t.start()
            try:
                with Client(address="unix:" + path) as client:
                    self.assertIsNone(client.pid)
                    sb = client.create({"n": [1, 2]}, llm_query=lambda p: "<%s>" % p)
                    worker = sb.pid
                    r = sb.execute("print(sum(context['n']), llm_query_batched(['a', 'b']))")
                    self.assertEqual(r.stdout, "3 ['<a>', '<b>']\n")
                # Closing the connection ends the relay, so the server sees the end of its stdin.
                self.assertEqual(server.wait(60), 0)
                self.assertTrue(process_gone(worker))
            finally:
                if server.poll() is None:
                    server.kill()
                    server.wait()
                t.join(60)
                listener.close()
                server.stdout.close()


    def test_closed_without_a_word(self):
        # As a TLS server does to a client that does not speak TLS: the
        # error says that the server sent nothing, and asks about TLS.
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "serve.sock")
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            listener.bind(path)
            listener.listen(1)

            def close_at_once():
                conn, _ = listener.accept()
                conn.close()

            t = threading.Thread(target=close_at_once)
            t.start()
            try:
                with self.assertRaises(ServerClosed) as cm:
                    Client(address="unix:" + path, token="t")
                self.assertIn("closed before the server sent anything (does it serve TLS?", str(cm.exception))
            finally:
                t.join(60)
                listener.close()


class ListenTest(unittest.TestCase):
    """A real `serve --listen unix:PATH --token-file F`."""

    server_args = ()

    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)
        self.path = os.path.join(self.dir.name, "serve.sock")
        token_file = os.path.join(self.dir.name, "token")
        with open(token_file, "w") as f:
            f.write("s3cret-token\n")
        self.server = subprocess.Popen(
            [BIN, "serve", "--listen", "unix:" + self.path, "--token-file", token_file, *self.server_args],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.addCleanup(self._stop)
        # The socket file appears once the server listens.
        deadline = time.monotonic() + 60
        while not os.path.exists(self.path):
            if self.server.poll() is not None or time.monotonic() > deadline:
                self.fail("serve --listen did not start (exit %s)" % self.server.poll())
            time.sleep(0.01)

    def _stop(self):
        if self.server.poll() is None:
            self.server.terminate()  # SIGTERM drains, then exits 0
            self.assertEqual(self.server.wait(60), 0)

    def test_token(self):
        with Client(address="unix:" + self.path, token="s3cret-token") as client:
            sb = client.create("abc", llm_query=lambda p: p.upper())
            worker = sb.pid
            r = sb.execute("print(llm_query(context))")
            self.assertEqual(r.stdout, "ABC\n")
        # The connection's end destroys its sandboxes (the server does it
        # once it sees the end).
        self.assertTrue(wait_gone(worker))

    def test_wrong_token(self):
        with self.assertRaises(SandboxError) as cm:
            with Client(address="unix:" + self.path, token="wrong") as client:
                client.create("abc")
        self.assertIn("unauthorized", str(cm.exception))
        # Every later call raises the same (the server closed the
        # connection): it was ServerClosed, as if the server had gone.
        with Client(address="unix:" + self.path) as client:
            for call in (lambda: client.create("abc"), client.version, client.version):
                with self.assertRaises(SandboxError) as cm:
                    call()
                self.assertEqual(cm.exception.kind, "unauthorized")


class MaxMessageTest(ListenTest):
    """`serve --listen ... --max-message 1M`: a longer line is refused."""

    server_args = ("--max-message", "1M")

    test_token = test_wrong_token = None  # ListenTest's, run there

    def test_a_message_over_the_limit_says_so(self):
        # The server reads the rest of the line without holding it and
        # answers the request by its id: the client reports the server's
        # reason, and the session goes on.
        for size in (2 << 20, 8 << 20):
            with self.subTest(size=size), Client(address="unix:" + self.path, token="s3cret-token") as client:
                sb = client.create()
                with self.assertRaises(SandboxError) as cm:
                    sb.set_variable("x", "a" * size)
                self.assertEqual(cm.exception.kind, "message_too_large", str(cm.exception))
                self.assertEqual(cm.exception.code, -32600)
                self.assertIn("1048576 bytes", str(cm.exception))
                self.assertEqual(sb.execute("print(6 * 7)").stdout, "42\n")

    def test_an_answer_over_the_limit_is_a_bridge_error(self):
        # A callback's answer longer than --max-message fails its llm_query
        # call in the sandbox, as an answer over 64 MiB does with --stdio.
        def answer(prompt):
            return "b" * (2 << 20) if prompt == "big" else "re: " + prompt

        with Client(address="unix:" + self.path, token="s3cret-token") as client:
            sb = client.create(llm_query=answer)
            other = client.create()
            r = sb.execute("try:\n    llm_query('big')\nexcept BridgeError as e:\n    print(type(e).__name__, e)\nprint(llm_query('small'))")
            self.assertIsNone(r.error, r)
            self.assertIn("BridgeError", r.stdout)
            self.assertIn("--max-message", r.stdout)
            self.assertTrue(r.stdout.endswith("re: small\n"), r.stdout)
            self.assertEqual(other.execute("print(1)").stdout, "1\n")


if __name__ == "__main__":
    unittest.main()
