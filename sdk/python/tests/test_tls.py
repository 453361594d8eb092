"""The SDK against a daemon serving TLS (--tls-cert/--tls-key) with a certificate
from a test CA made here with openssl: Runtime(ca=...) works, keep-alive reuses
the TLS connection, and a client that does not trust the CA is refused with a
ConnectionError that says what to do."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from withruntime import ConnectionError, Runtime

from conftest import Daemon, _need_daemon


def _openssl(*args: str) -> None:
    r = subprocess.run(["openssl", *args], capture_output=True, text=True, check=False)
    assert r.returncode == 0, f"openssl {' '.join(args)}: {r.stderr}"


def make_pki(d: Path) -> tuple[Path, Path, Path]:
    """A test CA, and a certificate for 127.0.0.1 and localhost from it: (ca, cert, key)."""
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    ca, ca_key = d / "ca.crt", d / "ca.key"
    cert, key, csr, ext = d / "server.crt", d / "server.key", d / "server.csr", d / "server.ext"
    _openssl("req", "-x509", *ec, "-keyout", str(ca_key), "-out", str(ca), "-days", "2",
             "-subj", "/CN=runtime python test CA")
    _openssl("req", *ec, "-keyout", str(key), "-out", str(csr), "-subj", "/CN=localhost")
    ext.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n")
    _openssl("x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key),
             "-set_serial", "0x6006", "-days", "1", "-extfile", str(ext), "-out", str(cert))
    key.chmod(0o600)
    return ca, cert, key


@pytest.fixture(scope="module")
def tls_daemon() -> Iterator[Daemon]:
    _need_daemon()
    d = Daemon(prefix="runtime-py-tls-")
    d.ca, cert, key = make_pki(d.dir)
    d.extra_args = ["--tls-cert", str(cert), "--tls-key", str(key)]
    try:
        yield d.start()
    finally:
        d.close()


def test_https_with_the_test_ca(tls_daemon: Daemon) -> None:
    assert tls_daemon.url.startswith("https://")
    with Runtime(api_url=tls_daemon.url, api_key=tls_daemon.key, ca=tls_daemon.ca) as rt:
        with rt.sandboxes.create(memory_mib=256) as sbx:
            result = sbx.exec(["echo", "over tls"], check=True)
            assert result["stdout"] == "over tls\n"
            assert sbx.id in [s.id for s in rt.sandboxes.list()]
        # Keep-alive: the calls above went over one pooled TLS connection.
        idle = rt.transport._idle  # type: ignore[attr-defined]
        assert len(idle) == 1 and idle[0].sock is not None
        assert idle[0].sock.version() in ("TLSv1.2", "TLSv1.3")


def test_the_ca_from_the_environment(tls_daemon: Daemon, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RUNTIME_CA_FILE", str(tls_daemon.ca))
    with Runtime(api_url=tls_daemon.url, api_key=tls_daemon.key) as rt:
        assert isinstance(rt.sandboxes.list(), list)


def test_a_client_without_the_ca_is_refused(tls_daemon: Daemon) -> None:
    with Runtime(api_url=tls_daemon.url, api_key=tls_daemon.key, max_retries=0) as rt:
        with pytest.raises(ConnectionError) as e:
            rt.sandboxes.list()
    assert "TLS certificate is not trusted by the system's CA certificates" in str(e.value)
    assert "Runtime(ca=FILE)" in str(e.value)


def test_ca_is_for_https_only(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="for an https:// api_url"):
        Runtime(api_url="http://127.0.0.1:1", api_key="k", ca=tmp_path / "ca.crt")
