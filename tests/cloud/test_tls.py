"""The official SDK (withruntime 0.35.0) against runtimed serving TLS (--tls-cert,
--tls-key) with a certificate from a test CA made here with openssl: a client that
trusts the CA (SSL_CERT_FILE, as docs/runtime-cloud.md says) works; one that does not
is refused before anything is sent. Each client runs in a process of its own: the SDK
reads the trust store once per process."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import Daemon, need_daemon

CLIENT = """
import withruntime
with withruntime.Runtime(max_retries=0).sandboxes.create() as sbx:
    print(sbx.exec(["echo", "over tls"], check=True).stdout, end="")
"""


def openssl(*args: str) -> None:
    r = subprocess.run(["openssl", *args], capture_output=True, text=True, check=False)
    assert r.returncode == 0, f"openssl {' '.join(args)}: {r.stderr}"


def make_pki(d: Path) -> tuple[Path, Path, Path]:
    """A test CA, and a certificate for 127.0.0.1 and localhost from it: (ca, cert, key)."""
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    ca, ca_key = d / "ca.crt", d / "ca.key"
    cert, key, csr, ext = d / "server.crt", d / "server.key", d / "server.csr", d / "server.ext"
    openssl("req", "-x509", *ec, "-keyout", str(ca_key), "-out", str(ca), "-days", "2",
            "-subj", "/CN=runtime cloud test CA")
    openssl("req", *ec, "-keyout", str(key), "-out", str(csr), "-subj", "/CN=localhost")
    ext.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n")
    openssl("x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key),
            "-set_serial", "0x6007", "-days", "1", "-extfile", str(ext), "-out", str(cert))
    key.chmod(0o600)
    return ca, cert, key


@pytest.fixture(scope="module")
def tls_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    need_daemon()
    ca, cert, key = make_pki(tmp_path_factory.mktemp("pki"))
    d = Daemon(["--tls-cert", str(cert), "--tls-key", str(key)], ca=ca).start()
    try:
        yield d
    finally:
        d.close()


def client(d: Daemon, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", CLIENT], capture_output=True, text=True, timeout=120,
                          check=False, env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                                            "RUNTIME_API_URL": d.url, "RUNTIME_API_KEY": d.key, **env})


def sandboxes(d: Daemon) -> int:
    r = subprocess.run([sys.executable, "-c", "import withruntime; print(len(list("
                        "withruntime.Runtime().sandboxes.list())))"], capture_output=True, text=True,
                       timeout=60, check=True, env={"RUNTIME_API_URL": d.url, "RUNTIME_API_KEY": d.key,
                                                    "SSL_CERT_FILE": str(d.ca)})
    return int(r.stdout)


def test_a_client_that_trusts_the_ca(tls_daemon: Daemon) -> None:
    assert tls_daemon.url.startswith("https://")
    r = client(tls_daemon, SSL_CERT_FILE=str(tls_daemon.ca))
    assert (r.returncode, r.stdout) == (0, "over tls\n"), r.stderr


def test_a_client_without_the_ca_is_refused(tls_daemon: Daemon) -> None:
    before = sandboxes(tls_daemon)
    r = client(tls_daemon)
    assert r.returncode == 1 and "over tls" not in r.stdout
    assert "CERTIFICATE_VERIFY_FAILED" in r.stderr or "certificate" in r.stderr.lower(), r.stderr
    assert sandboxes(tls_daemon) == before, "nothing was made"
