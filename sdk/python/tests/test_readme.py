"""Runs the README's python blocks, in order, in one namespace, against the daemon,
and checks what they print against the `# ...` comments beside the prints."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import withruntime

from conftest import SDK, Daemon

BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
# print(...)   # expected output   -> the expected lines, in order
EXPECTED = re.compile(r"^\s*print\(.*?\)\s+#\s*(.+)$", re.M)


def blocks() -> list[str]:
    return BLOCK.findall((SDK / "README.md").read_text())


def test_readme_has_examples() -> None:
    assert len(blocks()) >= 5


def test_readme_examples_run(daemon: Daemon, monkeypatch: pytest.MonkeyPatch,
                             capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    monkeypatch.setenv("RUNTIME_API_URL", daemon.url)
    monkeypatch.setenv("RUNTIME_API_KEY", daemon.key)
    monkeypatch.setattr(withruntime.client, "_default", None)
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "readme"}
    try:
        for i, code in enumerate(blocks()):
            exec(compile(code, f"README.md python block {i + 1}", "exec"), namespace)
    finally:
        withruntime.default_runtime().close()
        with daemon.runtime() as rt:
            for sbx in rt.sandboxes.list(labels={"role": "docs"}):
                sbx.__exit__(None, None, None)
    printed = capsys.readouterr().out
    for expected in [e for code in blocks() for e in EXPECTED.findall(code)]:
        assert expected.strip() in printed, f"README promises {expected!r}; printed:\n{printed}"
