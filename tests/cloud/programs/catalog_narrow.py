"""The catalog lookup and network narrowing: find the GitHub server's entry, and in
a throwaway sandbox (`with`: deleted when the block ends, also when it raises)
allow only the hosts that entry needs; another host is then refused.

    python3 catalog_narrow.py [--raise]     (--raise: fail inside the block on purpose)
"""

import sys

from withruntime import Runtime

runtime = Runtime()
entry = next((e for e in runtime.mcp.catalog() if e["id"] == "github"), None)
if entry is None:
    raise SystemExit("the catalog has no github entry")
print(f"catalog {entry['id']} {entry['package']}@{entry['version']} egress={','.join(entry['egress'])}")

with runtime.sandboxes.create(memory_mib=512) as tmp:
    print("sandbox", tmp.id, flush=True)

    tmp.network.set(internet=False, allow=entry["egress"])
    policy = tmp.network.get()
    print(f"network internet={str(policy['internet']).lower()} allow={','.join(policy['allow'])}")
    if policy["allow"] != entry["egress"]:  # internet=False with allow reads back internet=True
        raise RuntimeError(f"policy not in force: {policy}")

    # A host the entry does not name: the sandbox's resolver does not even give it an address.
    other = tmp.exec(["curl", "-sS", "-m", "5", "https://example.com/"])
    print(f"curl example.com exit={other.exit_code} {other.stderr.strip()}", flush=True)
    if other.exit_code == 0:
        raise RuntimeError("example.com was reachable")

    if "--raise" in sys.argv:
        raise RuntimeError("raised on purpose inside the block")
print("block left")
