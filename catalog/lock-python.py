#!/usr/bin/python3
"""Writes the "lock" of every Python entry of catalog/servers.json: the exact
version and the sha256 of the wheel of every package the server needs, as pip
resolves them from binary wheels only for the Python that sandboxes run (the
host's /usr/bin/python3: the sandbox sees the host's /usr).

    catalog/lock-python.py             # print the locks
    catalog/lock-python.py --write     # and put them into catalog/servers.json

The daemon installs a Python server with `pip install --only-binary=:all:
--require-hashes -r LOCK` into a venv, so pip refuses any file whose hash is
not in the lock and any package that is not pinned in it. Hashes are of wheels
for this Python and machine (CPython 3.11 on x86_64 Linux on Debian 12): on
another Python the compiled wheels (pydantic-core, cryptography, ...) differ,
and the install fails saying so. PyPI is the only network this uses.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CATALOG = os.path.join(HERE, "servers.json")
PYTHON = "/usr/bin/python3"


def resolve(venv, package, version):
    """The packages pip would install for package==version, wheels only."""
    with tempfile.NamedTemporaryFile(suffix=".json") as report:
        subprocess.run([os.path.join(venv, "bin", "pip"), "install", "--quiet", "--dry-run",
                        "--ignore-installed", "--only-binary=:all:", "--disable-pip-version-check",
                        "--report", report.name, f"{package}=={version}"], check=True)
        items = json.load(open(report.name))["install"]
    extras = extras_asked(items)
    lock = []
    for item in items:
        meta, archive = item["metadata"], item["download_info"]["archive_info"]
        digest = archive.get("hashes", {}).get("sha256") or archive["hash"].split("=", 1)[1]
        name = canonical(meta["name"])
        wanted = f"[{','.join(sorted(extras[name]))}]" if extras.get(name) else ""
        lock.append(f"{name}{wanted}=={meta['version']} --hash=sha256:{digest}")
    return sorted(lock)


def extras_asked(items):
    """The extras the resolved packages ask of each other ("httpx[socks]>=0.27").
    The lock must name them: under --require-hashes pip reads "httpx[socks]" as
    a requirement of its own, and refuses it unless a lock line pins it."""
    asked = {}
    for item in items:
        for req in item["metadata"].get("requires_dist") or []:
            spec, _, marker = req.partition(";")
            if "extra" in marker:
                continue  # only wanted when this package's own extra is asked for
            m = re.match(r"\s*([A-Za-z0-9._-]+)\s*\[([^\]]+)\]", spec)
            if m:
                extras = {canonical(x.strip()) for x in m.group(2).split(",")}
                asked.setdefault(canonical(m.group(1)), set()).update(extras)
    return asked


def canonical(name):
    return re.sub(r"[-_.]+", "-", name).lower()  # PEP 503


def write(locks):
    """Puts each lock before the entry's "fingerprint" line, in the file's own layout."""
    text = open(CATALOG).read()
    for ident, lock in locks.items():
        start = text.index(f'"id": "{ident}"')
        end = text.index('"fingerprint"', start)
        head, body = text[:start], text[start:end]
        body = re.sub(r'\s*"lock": \[[^\]]*\],', "", body)
        lines = ",\n".join(f'      "{line}"' for line in lock)
        body = body.rstrip() + f'\n    "lock": [\n{lines}\n    ],\n    '
        text = head + body + text[end:]
    json.loads(text)  # still valid
    open(CATALOG, "w").write(text)


def main():
    entries = [e for e in json.load(open(CATALOG)) if e["runtime"] == "python"]
    locks = {}
    with tempfile.TemporaryDirectory() as tmp:
        venv = os.path.join(tmp, "venv")
        subprocess.run([PYTHON, "-m", "venv", venv], check=True)
        for e in entries:
            locks[e["id"]] = resolve(venv, e["package"], e["version"])
            print(f"{e['id']}: {len(locks[e['id']])} packages")
            for line in locks[e["id"]]:
                print(f"  {line}")
    if "--write" in sys.argv:
        write(locks)
        print(f"written to {CATALOG}")


if __name__ == "__main__":
    main()
