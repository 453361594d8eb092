"""The gateway program a user already has (issue 12), run against runtime with only
RUNTIME_API_URL and RUNTIME_API_KEY: a secret for GitHub, one named sandbox with
its own MCP servers (GitHub and Fetch from the catalog, and a stdio server of
one's own), then each server's URL and the header an agent sends.

    python3 gateway.py TICKETS_SERVER.py < token     (the GitHub token on stdin)
"""

import secrets
import sys
from pathlib import Path

from withruntime import Runtime

runtime = Runtime()
token = sys.stdin.read().strip()
runtime.secrets.set("GITHUB_TOKEN", value=token, hosts=["api.github.com"])

# One sandbox per customer; the name is new on every run.
name = f"gateway-{secrets.token_hex(6)}"
sbx = runtime.sandboxes.create(name=name, memory_mib=2048, idle_pause_seconds=900,
                               labels={"role": "mcp", "customer": name})
print("sandbox", sbx.info["name"], sbx.id, flush=True)

sbx.files.write("/workspace/tickets_server.py", Path(sys.argv[1]).read_bytes())
sbx.mcp.start([
    {"id": "github", "secrets": {"GITHUB_PERSONAL_ACCESS_TOKEN": "GITHUB_TOKEN"}},
    {"id": "fetch"},
    {"name": "tickets", "command": ["python3", "/workspace/tickets_server.py"]},
])

# The catalog servers install from the registries first: give them time.
gateway = sbx.mcp.ready(timeout=10 * 60)
for server in gateway["servers"]:
    print(server["name"], server["status"], server["url"])
for header, value in gateway["headers"].items():
    print(f"{header}: {value}")
