"""Client(address=..., tls=...) against a real `serve --listen --tls-cert`.

The certificates are made for the test by the `openssl` command (a CA,
a server certificate for `localhost` signed by it, and a second CA with
a client certificate for `--client-ca`); without `openssl` the tests
are skipped.
"""

import os
import re
import shutil
import ssl
import subprocess
import tempfile
import threading
import time
import unittest

from rlm_sandbox import Client, SandboxError, ServerClosed

from support import binary, wait_gone

BIN = binary()
OPENSSL = shutil.which("openssl")
TOKEN = "s3cret-token"


def _openssl(*args, cwd):
    subprocess.run([OPENSSL, *args], cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def make_ca(d, name):
    """A self-signed CA: NAME.pem, NAME.key."""
    with open(os.path.join(d, name + ".ext"), "w") as f:
        f.write("basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\n"
                "subjectKeyIdentifier=hash\n")
    _openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", name + ".key", cwd=d)
    _openssl("req", "-new", "-key", name + ".key", "-subj", "/CN=rlm-sandbox test " + name, "-out", name + ".csr", cwd=d)
    _openssl("x509", "-req", "-in", name + ".csr", "-signkey", name + ".key", "-days", "2",
             "-extfile", name + ".ext", "-out", name + ".pem", cwd=d)


def make_cert(d, name, ca, extensions):
    """A certificate NAME.pem (key NAME.key) signed by CA."""
    with open(os.path.join(d, name + ".ext"), "w") as f:
        f.write("basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n"
                "subjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n" + extensions)
    _openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", name + ".key", cwd=d)
    _openssl("req", "-new", "-key", name + ".key", "-subj", "/CN=" + name, "-out", name + ".csr", cwd=d)
    _openssl("x509", "-req", "-in", name + ".csr", "-CA", ca + ".pem", "-CAkey", ca + ".key", "-set_serial",
             str(int(time.time() * 1000)), "-days", "2", "-extfile", name + ".ext", "-out", name + ".pem", cwd=d)


def context(cafile, cert=None):
    """A client SSLContext trusting cafile (strict checks, as Python 3.13's
    default is), with a client certificate if cert names one."""
    ctx = ssl.create_default_context(cafile=cafile)
    if hasattr(ssl, "VERIFY_X509_STRICT"):
        ctx.verify_flags |= ssl.VERIFY_X509_STRICT
    if cert is not None:
        ctx.load_cert_chain(cert + ".pem", cert + ".key")
    return ctx


class Server:
    """A `serve --listen` with the given flags; `address` is where it listens."""

    def __init__(self, d, name, listen, *flags):
        self.log = os.path.join(d, name + ".log")
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen([BIN, "serve", "--listen", listen, *flags], stdout=subprocess.DEVNULL, stderr=log)
        deadline = time.monotonic() + 60
        while True:
            with open(self.log) as f:
                m = re.search(r"msg=listening addr=(\S+)", f.read())
            if m:
                self.address = m.group(1)
                break
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                with open(self.log) as f:
                    raise RuntimeError("serve --listen did not start: " + f.read())
            time.sleep(0.01)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()  # SIGTERM drains, then exits 0
            self.proc.wait(60)
        return self.proc.returncode


@unittest.skipIf(OPENSSL is None, "no openssl command to make the test certificates with")
class TLSTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        d = cls.dir = cls.tmp.name
        try:
            make_ca(d, "ca")
            make_cert(d, "localhost", "ca", "extendedKeyUsage=serverAuth\nsubjectAltName=DNS:localhost\n")
            make_ca(d, "clientca")
            make_cert(d, "client", "clientca", "extendedKeyUsage=clientAuth\n")
        except subprocess.CalledProcessError as e:
            cls.tmp.cleanup()
            raise unittest.SkipTest("openssl could not make the test certificates: %s" % e.stderr.decode(errors="replace"))
        with open(os.path.join(d, "token"), "w") as f:
            f.write(TOKEN + "\n")
        cls.ca = os.path.join(d, "ca.pem")
        cls.server = Server(d, "tls", "127.0.0.1:0", "--token-file", os.path.join(d, "token"),
                            "--tls-cert", os.path.join(d, "localhost.pem"), "--tls-key", os.path.join(d, "localhost.key"))
        cls.port = cls.server.address.rsplit(":", 1)[1]
        # The certificate names localhost, not 127.0.0.1.
        cls.address = "localhost:" + cls.port

    @classmethod
    def tearDownClass(cls):
        code = cls.server.stop()
        cls.tmp.cleanup()
        assert code == 0, "serve --listen exited with %s" % code

    def test_execute(self):
        # A CA file as tls=, and llm_query answered over TLS.
        with Client(address=self.address, token=TOKEN, tls=self.ca) as client:
            sb = client.create("abc", llm_query=lambda p: p.upper())
            worker = sb.pid
            r = sb.execute("print(llm_query(context))")
            self.assertEqual(r.stdout, "ABC\n")
        self.assertTrue(wait_gone(worker))

    def test_concurrent_traffic(self):
        # Writes from several threads (bridge answers, a large message from
        # the main thread's writer thread) while the reader decrypts what
        # the server sends: every message arrives whole, in both directions.
        big = "x" * (3 << 20)
        with Client(address=self.address, token=TOKEN, tls=context(self.ca)) as client:
            sb = client.create("", llm_query=lambda p: p * 20000, on_stdout=lambda line: None)
            sb.set_variable("big", big)
            r = sb.execute(
                "answers = llm_query_batched([str(i % 10) for i in range(64)])\n"
                "for i in range(200): print(i, 'y' * 1000)\n"
                "print(len(big), [len(a) for a in answers] == [20000] * 64, answers[13][:3])"
            )
            self.assertTrue(r.ok, r.error)
            self.assertEqual(r.stdout.splitlines()[-1], "%d True 333" % len(big))
            self.assertEqual(sb.get_variable("big"), big)
            # Several threads with requests in flight at once.
            sandboxes = [client.create(i) for i in range(4)]
            results = {}

            def run(i, s):
                results[i] = [s.execute("print(context * %d)" % k).stdout for k in range(20)]

            threads = [threading.Thread(target=run, args=(i, s)) for i, s in enumerate(sandboxes)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(120)
            self.assertEqual(results, {i: ["%d\n" % (i * k) for k in range(20)] for i in range(4)})

    def test_unknown_ca(self):
        # tls=True: the system's CA store, which does not hold the test CA.
        with self.assertRaises(SandboxError) as cm:
            Client(address=self.address, token=TOKEN, tls=True)
        self.assertEqual(cm.exception.kind, "tls_failed")
        self.assertIn("certificate of %s was not accepted" % self.address, str(cm.exception))
        self.assertIn("tls='ca.pem'", str(cm.exception))
        self.assertIsInstance(cm.exception.__cause__, ssl.SSLCertVerificationError)

    def test_wrong_host_name(self):
        with self.assertRaises(SandboxError) as cm:
            Client(address="127.0.0.1:" + self.port, token=TOKEN, tls=self.ca)
        self.assertEqual(cm.exception.kind, "tls_failed")
        self.assertIn("IP address mismatch", str(cm.exception))

    def test_plain_client(self):
        # Without tls=, the TLS server closes the connection at once.
        start = time.monotonic()
        with self.assertRaises(ServerClosed) as cm:
            Client(address=self.address, token=TOKEN)
        self.assertLess(time.monotonic() - start, 5)
        self.assertIn("does it serve TLS? serve --tls-cert: connect with tls=True", str(cm.exception))

    def test_wrong_token(self):
        with self.assertRaises(SandboxError) as cm:
            Client(address=self.address, token="wrong", tls=self.ca)
        self.assertIn("unauthorized", str(cm.exception))

    def test_arguments(self):
        with self.assertRaises(ValueError):
            Client(tls=True)  # a server the client starts: no TLS
        with self.assertRaises(TypeError):
            Client(address=self.address, tls=42)
        with self.assertRaises(ValueError) as cm:
            Client(address=self.address, tls=os.path.join(self.dir, "missing.pem"))
        self.assertIn("missing.pem", str(cm.exception))

    def test_client_certificate(self):
        # serve --client-ca: the certificate is the credential (no token).
        server = Server(self.dir, "mtls", "127.0.0.1:0", "--client-ca", os.path.join(self.dir, "clientca.pem"),
                        "--tls-cert", os.path.join(self.dir, "localhost.pem"),
                        "--tls-key", os.path.join(self.dir, "localhost.key"))
        try:
            address = "localhost:" + server.address.rsplit(":", 1)[1]
            with Client(address=address, tls=context(self.ca, os.path.join(self.dir, "client"))) as client:
                sb = client.create("abc", llm_query=lambda p: p.upper())
                self.assertEqual(sb.execute("print(llm_query(context))").stdout, "ABC\n")
            # Without one, the server refuses: with TLS 1.3 right after the
            # handshake (the first request fails), with TLS 1.2 during it.
            with self.assertRaises(ServerClosed) as cm:
                with Client(address=address, tls=self.ca) as client:
                    client.create("abc")
            self.assertIn("alert certificate required", str(cm.exception))
            self.assertIn("or wants one: serve --client-ca", str(cm.exception))
            tls12 = context(self.ca)
            tls12.maximum_version = ssl.TLSVersion.TLSv1_2
            with self.assertRaises(SandboxError) as cm:
                Client(address=address, tls=tls12)
            self.assertEqual(cm.exception.kind, "tls_failed")
            self.assertIn("or wants one: serve --client-ca", str(cm.exception))
            # A certificate from another CA.
            with self.assertRaises(ServerClosed) as cm:
                with Client(address=address, tls=context(self.ca, os.path.join(self.dir, "localhost"))) as client:
                    client.create("abc")
            self.assertIn("refused this client's certificate", str(cm.exception))
        finally:
            self.assertEqual(server.stop(), 0)

    def test_unix_socket(self):
        # TLS over a unix socket: no host name to check, the chain is checked.
        path = os.path.join(self.dir, "tls.sock")
        server = Server(self.dir, "unix", "unix:" + path, "--token-file", os.path.join(self.dir, "token"),
                        "--tls-cert", os.path.join(self.dir, "localhost.pem"),
                        "--tls-key", os.path.join(self.dir, "localhost.key"))
        try:
            with self.assertRaises(ValueError) as cm:
                Client(address="unix:" + path, token=TOKEN, tls=self.ca)
            self.assertIn("check_hostname", str(cm.exception))
            ctx = context(self.ca)
            ctx.check_hostname = False
            with Client(address="unix:" + path, token=TOKEN, tls=ctx) as client:
                self.assertEqual(client.create(7).execute("print(context * 6)").stdout, "42\n")
            with self.assertRaises(SandboxError) as cm:
                other = ssl.create_default_context()  # the system's CAs
                other.check_hostname = False
                Client(address="unix:" + path, token=TOKEN, tls=other)
            self.assertEqual(cm.exception.kind, "tls_failed")
        finally:
            self.assertEqual(server.stop(), 0)

    def test_tls_client_plain_server(self):
        # A TLS client at a server without TLS: a clear failure, not a hang.
        server = Server(self.dir, "plain", "127.0.0.1:0", "--token-file", os.path.join(self.dir, "token"))
        try:
            start = time.monotonic()
            with self.assertRaises(SandboxError) as cm:
                Client(address="localhost:" + server.address.rsplit(":", 1)[1], token=TOKEN, tls=self.ca)
            self.assertLess(time.monotonic() - start, 30)
            self.assertEqual(cm.exception.kind, "tls_failed")
            self.assertIn("does it serve TLS?", str(cm.exception))
        finally:
            self.assertEqual(server.stop(), 0)


if __name__ == "__main__":
    unittest.main()
