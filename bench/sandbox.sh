#!/usr/bin/env bash
# Sandbox lifecycle benchmark: starts its own runtimed (root, temp state dir,
# loopback port, temp socket) and measures in one run
#   1. `runtime sandbox run -- /bin/echo ready` against a comparable bwrap run
#      (hyperfine medians, ratio), and the split into create / exec / rm;
#   2. 100 sandboxes alive at once: create, list, exec `true` in each, remove;
#   3. the daemon's memory (keeper + server) per live sandbox, and the
#      sandbox init processes' own memory.
# Figures and how to read them: docs/benchmarks.md, "Sandbox lifecycle".
#
# Usage: sudo bench/sandbox.sh [--smoke]   (after `make`; needs bwrap, hyperfine, jq)
#        --smoke (or BENCH_SMOKE=1): the short mode of `make bench-smoke` (every step,
#        tiny counts, figures not meaningful; fails when a step fails or measures nothing).
# Knobs (environment): RUNS=50 ROUNDS=5 WARMUP=5 STEPS=30 ALIVE=100 BUDGET=280 (s)
# (--smoke: 4 2 1 3 5 60);
# BUILD=DIR takes runtimed and runtime from DIR (default build/); BENCH_DATA=DIR
# keeps the raw measurements (hyperfine JSON, per-call ms) in DIR.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")
# shellcheck source=lib.sh
. "$HERE/lib.sh"

bench_args "" "$@"
RUNS=${RUNS:-$(bench_pick 4 50)}
ROUNDS=${ROUNDS:-$(bench_pick 2 5)}
WARMUP=${WARMUP:-$(bench_pick 1 5)}
STEPS=${STEPS:-$(bench_pick 3 30)}
ALIVE=${ALIVE:-$(bench_pick 5 100)}
BUDGET=${BUDGET:-$(bench_pick 60 280)}
TARGET_RATIO=2.0
TARGET_KIB=256

BUILD=${BUILD:-$ROOT/build}
RUNTIMED=$BUILD/runtimed
RT=$BUILD/runtime
BWRAP="${BENCH_BWRAP_ROOT[*]} /bin/echo ready"
RUN="$RT sandbox run -- /bin/echo ready"

((RUNS / ROUNDS >= 2)) || bench_die "RUNS must be at least 2 x ROUNDS"
[[ $(id -u) == 0 ]] || bench_die "run as root (runtimed makes namespaces and cgroups): sudo $0"
need_build
need_tools "bubblewrap hyperfine jq" bwrap hyperfine jq

bench_init
KEEP="json ms"   # what BENCH_DATA keeps
CLEANUP_RM_S=120 # ALIVE sandboxes may be left to remove

# --- daemon helpers ----------------------------------------------------------------

# Sandbox inits: children of the keeper that are pid 1 of their namespace.
sandbox_inits() {
    local c
    for c in $(bench_children "$KPID"); do
        [[ $(bench_inner_pid "$c") == 1 ]] && echo "$c"
    done
    return 0
}

mem_available() { awk '/^MemAvailable:/ { print $2 }' /proc/meminfo; }

# Runs "$@" (a client command) and appends its wall time in ms to file $OUT.
timed() {
    local t0 t1
    bench_now_us t0
    "$@" >"$WORK/out" || bench_die "failed: $*"
    bench_now_us t1
    echo "$(((t1 - t0) / 1000)).$(printf '%03d' $(((t1 - t0) % 1000)))" >>"$OUT"
}

# --- setup -----------------------------------------------------------------------

bench_workdir ""
[[ $($BWRAP 2>&1) == ready ]] ||
    bench_die "the bwrap reference does not run here: $($BWRAP 2>&1 | head -n 3)"
# shellcheck disable=SC2119 # no extra daemon arguments
start_daemon
start_watchdog
MACHINE=$(bench_machine)
bench_log "$MACHINE"
IDLE_START=$(bench_cpu_idle)
if ((IDLE_START < 80)); then
    bench_log "warning: the machine is busy (CPU ${IDLE_START}% idle); figures will be noisy"
fi
bench_log "runtimed keeper $KPID, server $SPID, API $RUNTIME_API_URL"

# --- 1. create + exec + delete against bwrap ---------------------------------------

# In ROUNDS alternating rounds, so that load that comes and goes on a shared
# machine falls on both sides; the medians are over the runs of all rounds.
bench_log "1/3 sandbox run vs bwrap: $WARMUP warmup + $RUNS runs each, in $ROUNDS rounds"
for ((r = 1; r <= ROUNDS; r++)); do
    hyperfine -N --style basic --warmup $((r == 1 ? WARMUP : 1)) --runs $((RUNS / ROUNDS)) \
        --export-json "$WORK/lifecycle-$r.json" -n bwrap "$BWRAP" -n run "$RUN" >&2
done
BWRAP_MS=$(bench_hf_median_ms bwrap "$WORK"/lifecycle-*.json)
RUN_MS=$(bench_hf_median_ms run "$WORK"/lifecycle-*.json)

bench_log "1/3 breakdown: client start, API round trip and exec on one sandbox"
"$RT" sandbox create >"$WORK/out" || bench_die "sandbox create failed"
read -r SB <"$WORK/out"
hyperfine -N --style basic --warmup "$WARMUP" --runs "$RUNS" \
    --export-json "$WORK/parts.json" -n version "$RT --version" \
    -n get "$RT sandbox get $SB --json" -n exec "$RT sandbox exec $SB -- /bin/echo ready" >&2
"$RT" sandbox rm "$SB" >/dev/null
VERSION_MS=$(bench_hf_median_ms version "$WORK/parts.json")
GET_MS=$(bench_hf_median_ms get "$WORK/parts.json")
EXEC_MS=$(bench_hf_median_ms exec "$WORK/parts.json")

bench_log "1/3 breakdown: $STEPS creates, then $STEPS removals, one at a time"
ids=()
OUT=$WORK/create.ms
for ((i = 0; i < STEPS; i++)); do
    timed "$RT" sandbox create
    read -r id <"$WORK/out"
    ids+=("$id")
done
OUT=$WORK/rm.ms
for id in "${ids[@]}"; do timed "$RT" sandbox rm "$id"; done
CREATE_MS=$(bench_median <"$WORK/create.ms")
RM_MS=$(bench_median <"$WORK/rm.ms")

# --- 2 and 3. ALIVE sandboxes at once, and the daemon's memory -----------------------

# Sums a per-pid figure ($1: pss, rss or uss) over the pids that follow.
sum_kib() {
    local f=$1 s=0 p
    shift
    for p in "$@"; do s=$((s + $("bench_${f}_kib" "$p"))); done
    echo "$s"
}
# Sum of the memory.usage_in_bytes of this run's sandbox cgroups, in KiB (v1 only).
cgroup_charge_kib() {
    local s=0 f
    for f in /sys/fs/cgroup/memory/runtime/"$INSTANCE"-*/memory.usage_in_bytes; do
        [[ -r $f ]] && s=$((s + $(<"$f")))
    done
    echo $((s / 1024))
}
per() { awk -v a="$1" -v b="$2" -v n="$3" 'BEGIN { printf "%.1f", (b - a) / n }'; }

bench_log "2/3 $ALIVE sandboxes alive at once"
[[ -z $(sandbox_inits) ]] || bench_die "sandboxes are still alive before the $ALIVE-sandbox phase"
PSS0=$(sum_kib pss "$KPID" "$SPID")
RSS0=$(sum_kib rss "$KPID" "$SPID")
AVAIL0=$(mem_available)
ids=()
OUT=$WORK/alive-create.ms
bench_now_us t0
for ((i = 0; i < ALIVE; i++)); do
    timed "$RT" sandbox create
    read -r id <"$WORK/out"
    ids+=("$id")
done
bench_now_us t1
ALIVE_CREATE_TOTAL_S=$(awk -v d=$((t1 - t0)) 'BEGIN { printf "%.2f", d / 1e6 }')
ALIVE_CREATE_MS=$(bench_median <"$WORK/alive-create.ms")
FIRST10_MS=$(head -n 10 "$WORK/alive-create.ms" | bench_median)
LAST10_MS=$(tail -n 10 "$WORK/alive-create.ms" | bench_median)

# Memory with ALIVE sandboxes, before any exec in them.
AVAIL1=$(mem_available)
PSS1=$(sum_kib pss "$KPID" "$SPID")
RSS1=$(sum_kib rss "$KPID" "$SPID")
mapfile -t INITS < <(sandbox_inits)
N=${#INITS[@]}
((N == ALIVE)) || bench_die "found $N sandbox init processes for $ALIVE sandboxes"
INIT_PSS=$(sum_kib pss "${INITS[@]}")
INIT_RSS=$(sum_kib rss "${INITS[@]}")
INIT_USS=$(sum_kib uss "${INITS[@]}")
CG_KIB=$(cgroup_charge_kib)

"$RT" sandbox list --json >"$WORK/list.json" || bench_die "sandbox list failed"
printf '%s\n' "${ids[@]}" | sort >"$WORK/ours"
jq -r '.[] | select(.status == "running") | .id' "$WORK/list.json" | sort >"$WORK/running"
RUNNING=$(comm -12 "$WORK/ours" "$WORK/running" | wc -l)
((RUNNING == ALIVE)) ||
    bench_die "only $RUNNING of $ALIVE sandboxes are running: $(jq -c . "$WORK/list.json" | head -c 600)"

OUT=$WORK/alive-exec.ms
for id in "${ids[@]}"; do timed "$RT" sandbox exec "$id" -- true; done
ALIVE_EXEC_MS=$(bench_median <"$WORK/alive-exec.ms")
RSS2=$(sum_kib rss "$KPID" "$SPID")

bench_now_us t0
"$RT" sandbox rm "${ids[@]}" >/dev/null || bench_die "removing the $ALIVE sandboxes failed"
bench_now_us t1
ALIVE_RM_TOTAL_S=$(awk -v d=$((t1 - t0)) 'BEGIN { printf "%.2f", d / 1e6 }')
LEFT=$("$RT" sandbox list --json | jq length)
((LEFT == 0)) || bench_die "$LEFT sandboxes are still listed after removing all"
RSS3=$(sum_kib rss "$KPID" "$SPID")

# The daemon's own growth is measured in Rss: the inits are forks of the keeper and
# share its pages, so the keeper's Pss *falls* as they appear (its pages' cost is
# split with them). Pss over keeper + server + inits is the whole user-space cost.
DAEMON_EACH=$(per "$RSS0" "$RSS1" "$ALIVE")
DAEMON_EXEC_EACH=$(per "$RSS0" "$RSS2" "$ALIVE")
ALL_PSS_EACH=$(per "$PSS0" $((PSS1 + INIT_PSS)) "$ALIVE")
INIT_PSS_EACH=$(per 0 "$INIT_PSS" "$N")
INIT_USS_EACH=$(per 0 "$INIT_USS" "$N")
INIT_RSS_EACH=$(per 0 "$INIT_RSS" "$N")
CG_EACH=$(per 0 "$CG_KIB" "$N")
HOST_EACH=$(per "$AVAIL1" "$AVAIL0" "$ALIVE")

# --- summary ---------------------------------------------------------------------

IDLE_END=$(bench_cpu_idle)
RATIO=$(bench_ratio "$RUN_MS" "$BWRAP_MS")
row() { printf '%-46s %12s  %-30s %s\n' "$@"; }
ms() { echo "$(bench_fmt "$1") ms"; }
{
    echo
    echo "Sandbox lifecycle, $(date -u +%Y-%m-%dT%H:%MZ), $MACHINE"
    echo "hyperfine medians of $RUNS runs after $WARMUP warmup (run vs bwrap: $ROUNDS alternating"
    echo "rounds), else medians of the loops;"
    echo "each time includes starting the client process (see the floor rows)."
    echo "CPU idle (all CPUs, over 1 s) at the start: ${IDLE_START}%, at the end: ${IDLE_END}%"
    echo
    row "figure" "value" "reference" "target"
    row "sandbox run -- /bin/echo ready" "$(ms "$RUN_MS")" \
        "bwrap $(ms "$BWRAP_MS"), ratio $RATIO" \
        "ratio <= $TARGET_RATIO $(bench_verdict "$RATIO" "$TARGET_RATIO")"
    row "  sandbox create (median of $STEPS)" "$(ms "$CREATE_MS")" \
        "$(bench_ratio "$CREATE_MS" "$BWRAP_MS") x bwrap" ""
    row "  sandbox exec ID -- /bin/echo ready" "$(ms "$EXEC_MS")" \
        "$(bench_ratio "$EXEC_MS" "$BWRAP_MS") x bwrap" ""
    row "  sandbox rm ID (median of $STEPS)" "$(ms "$RM_MS")" \
        "$(bench_ratio "$RM_MS" "$BWRAP_MS") x bwrap" ""
    row "  floor: runtime --version" "$(ms "$VERSION_MS")" "client start, no request" ""
    row "  floor: sandbox get ID" "$(ms "$GET_MS")" "API round trip, no keeper" ""
    row "$ALIVE alive: create all, one by one" "$ALIVE_CREATE_TOTAL_S s" \
        "$(ms "$ALIVE_CREATE_MS") each (median)" ""
    row "  create median, first 10 / last 10" "$(ms "$FIRST10_MS")" "$(ms "$LAST10_MS")" ""
    row "  running in sandbox list --json" "$RUNNING/$ALIVE" "" ""
    row "  exec ID -- true in each (median)" "$(ms "$ALIVE_EXEC_MS")" "" ""
    row "  rm all $ALIVE (one rm call)" "$ALIVE_RM_TOTAL_S s" "" ""
    row "daemon memory per sandbox (keeper+server)" "$DAEMON_EACH KiB" \
        "Rss $RSS0 -> $RSS1 KiB" "< $TARGET_KIB KiB $(bench_verdict "$DAEMON_EACH" "$TARGET_KIB")"
    row "  after one exec in each" "$DAEMON_EXEC_EACH KiB" "Rss $RSS0 -> $RSS2 KiB" ""
    row "  after removing all" "" "Rss $RSS3 KiB" ""
    row "  keeper+server Pss (info)" "" "$PSS0 -> $PSS1 KiB (shared)" ""
    row "sandbox init, each (info)" "$INIT_USS_EACH KiB" \
        "Uss; Pss $INIT_PSS_EACH, Rss $INIT_RSS_EACH" ""
    row "user-space Pss per sandbox, daemon+init" "$ALL_PSS_EACH KiB" "" ""
    row "sandbox cgroup memory charge, each (info)" "$CG_EACH KiB" "init + kernel objects" ""
    row "host MemAvailable drop per sandbox (info)" "$HOST_EACH KiB" "all of it; noisy" ""
    echo
    echo "took $((SECONDS - START)) s"
} | sed 's/ *$//'
bench_smoke_figures "run=$RUN_MS" "bwrap=$BWRAP_MS" "exec=$EXEC_MS" "get=$GET_MS" "version=$VERSION_MS" \
    "create=$CREATE_MS" "rm=$RM_MS" "alive_create=$ALIVE_CREATE_MS" "alive_exec=$ALIVE_EXEC_MS" \
    "daemon_each=$DAEMON_EACH" "init_uss=$INIT_USS_EACH" "cgroup_each=$CG_EACH"
