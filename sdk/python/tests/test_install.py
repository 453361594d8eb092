"""`pip install ./sdk/python` into an empty venv of Debian's python3, offline: the
build backend (setuptools, wheel) comes from Debian's own wheels in
/usr/share/python-wheels (python3-setuptools-whl, python3-wheel-whl), so the
test never reaches for PyPI; a user's plain `pip install` fetches it from there."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import SDK

PYTHON = "/usr/bin/python3"
WHEELS = Path("/usr/share/python-wheels")


def run(*argv: str, **kw: object) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "PYTHON"))}
    return subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env,
                          check=False, **kw)  # type: ignore[call-overload]


def test_pip_install_into_an_empty_venv(tmp_path: Path) -> None:
    if not Path(PYTHON).exists():
        pytest.skip(f"{PYTHON} is not here")
    for wheel in ("setuptools", "wheel"):
        if not list(WHEELS.glob(f"{wheel}-*.whl")):
            pytest.fail(f"no {wheel} wheel in {WHEELS}: apt-get install python3-{wheel}-whl")
    # A copy, so that the in-tree build leaves nothing (build/, *.egg-info) in sdk/python.
    src = tmp_path / "src"
    shutil.copytree(SDK, src, ignore=shutil.ignore_patterns(
        "build", "*.egg-info", "__pycache__", ".pytest_cache", "tests"))
    venv = tmp_path / "venv"
    r = run(PYTHON, "-m", "venv", str(venv))
    assert r.returncode == 0, r.stderr
    pip = run(str(venv / "bin" / "pip"), "install", "--no-index", "--find-links", str(WHEELS),
              "--disable-pip-version-check", str(src))
    assert pip.returncode == 0, pip.stdout + pip.stderr
    check = run(str(venv / "bin" / "python"), "-c",
                "import withruntime, pathlib, sys;"
                "p = pathlib.Path(withruntime.__file__).parent;"
                "assert (p / 'py.typed').exists(), 'py.typed missing';"
                "assert str(p).startswith(sys.prefix), p;"
                "print(withruntime.__version__, withruntime.Runtime(api_url='http://127.0.0.1:9'))",
                cwd=str(tmp_path))
    assert check.returncode == 0, check.stderr
    assert check.stdout.startswith("0.1.0 Runtime(api_url='http://127.0.0.1:9')")
    assert sys.version_info >= (3, 10)
