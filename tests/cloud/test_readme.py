"""The README's example for Runtime Cloud's SDK runs as written against runtimed."""

from __future__ import annotations

import contextlib
import io
import re

import pytest

from conftest import ROOT, Daemon


def test_the_readme_example(daemon: Daemon, monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    mine = [b for b in blocks if "Runtime Cloud's package" in b]
    assert len(mine) == 1, "the README shows one example of Runtime Cloud's SDK"
    monkeypatch.setenv("RUNTIME_API_URL", daemon.url)
    monkeypatch.setenv("RUNTIME_API_KEY", daemon.key)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(mine[0], "README.md", "exec"), {})
    promised = re.findall(r"# (\S+)\s*$", mine[0], re.M)[-1]
    assert out.getvalue().strip() == promised
