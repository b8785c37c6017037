"""Client(address=...) over a unix socket, to a real server.

This branch's server speaks only stdio, so the test puts a relay between
a unix socket and a real `rlm-sandbox serve --stdio`: the socket transport
is exercised end to end against the real protocol (the token handshake of
`serve --listen` is not: no server here has one).
"""

import os
import socket
import subprocess
import tempfile
import threading
import unittest

from rlm_sandbox import Client

from support import binary, process_gone

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


if __name__ == "__main__":
    unittest.main()
