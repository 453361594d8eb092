#!/usr/bin/env bash
# Sandbox lifecycle benchmark: starts its own runtimed (root, temp state dir,
# loopback port, temp socket) and measures in one run
#   1. `runtime sandbox run -- /bin/echo ready` against a comparable bwrap run
#      (hyperfine medians, ratio), and the split into create / exec / rm;
#   2. 100 sandboxes alive at once: create, list, exec `true` in each, remove;
#   3. the daemon's memory (keeper + server) per live sandbox, and the
#      sandbox init processes' own memory;
#   4. (issue 26) the gvisor driver: `runtime sandbox run --isolation gvisor --
#      /bin/echo ready` in the same rounds as 1, beside a bare `runsc run` of the
#      same bundle (the driver's own config.json and runsc flags, read off a gvisor
#      sandbox of this run: its root, /usr, /tmp, /run and /workspace, uid maps,
#      seccomp; process /bin/echo ready), run from the host's namespaces in a fresh
#      network namespace (the spec's, which runsc makes in place of the driver's
#      pinned one; `unshare -n` when the spec names none) and, for information, with
#      --network=none; the split into create / exec / rm; then the idle memory of
#      one ns sandbox, one gvisor sandbox and one bare runsc (`runsc create` and
#      `start`, the driver's init), side by side (cgroup charge, Pss, Rss).
#      Skipped, saying why, when runsc is not installed at /opt/runtime/bin/runsc.
# The daemon's default driver is ns (--driver ns); gvisor sandboxes ask for it.
# Figures and how to read them: docs/benchmarks.md, "Sandbox lifecycle" and
# "gVisor driver (issue 26)".
#
# Usage: sudo bench/sandbox.sh [--smoke]   (after `make`; needs bwrap, hyperfine, jq;
#        util-linux's unshare and /opt/runtime/bin/runsc for part 4)
#        --smoke (or BENCH_SMOKE=1): the short mode of `make bench-smoke` (every step,
#        tiny counts, figures not meaningful; fails when a step fails or measures nothing).
# Knobs (environment): RUNS=50 ROUNDS=5 WARMUP=5 STEPS=30 ALIVE=100 IDLE_S=5 (s idle
# before the memory of part 4) BUDGET=400 (s) (--smoke: 4 2 1 3 5 1 90); GVISOR=0 skips
# part 4, RUNSC=PATH (default /opt/runtime/bin/runsc: the daemon's) for the bare runs;
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
IDLE_S=${IDLE_S:-$(bench_pick 1 5)}
BUDGET=${BUDGET:-$(bench_pick 90 400)}
TARGET_RATIO=2.0
TARGET_KIB=256
TARGET_GV_RATIO=1.5 # gvisor sandbox run / bare runsc run of the same bundle
TARGET_GV_MIB=25    # an idle gvisor sandbox's memory

BUILD=${BUILD:-$ROOT/build}
RUNTIMED=$BUILD/runtimed
RT=$BUILD/runtime
BWRAP="${BENCH_BWRAP_ROOT[*]} /bin/echo ready"
RUN="$RT sandbox run -- /bin/echo ready"

((RUNS / ROUNDS >= 2)) || bench_die "RUNS must be at least 2 x ROUNDS"
[[ $(id -u) == 0 ]] || bench_die "run as root (runtimed makes namespaces and cgroups): sudo $0"
need_build
need_tools "bubblewrap hyperfine jq" bwrap hyperfine jq
bench_gvisor_check
GV=0
[[ -z $GVISOR_SKIP ]] && GV=1
((GV)) && need_tools util-linux unshare

bench_init
KEEP="json ms txt" # what BENCH_DATA keeps
CLEANUP_RM_S=120   # ALIVE sandboxes may be left to remove
BARE_CG=''         # the bare runsc's memory cgroup (part 4)

# The bare runsc: its processes and memory cgroup, its state and runsc's null-netns mount.
cleanup_last() {
    [[ -n $BARE_CG ]] && bench_memcg_drop "$BARE_CG"
    [[ -n $WORK ]] && bench_umount_under "$WORK"
    return 0
}

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
start_daemon
start_watchdog
MACHINE=$(bench_machine)
bench_log "$MACHINE"
IDLE_START=$(bench_cpu_idle)
if ((IDLE_START < 80)); then
    bench_log "warning: the machine is busy (CPU ${IDLE_START}% idle); figures will be noisy"
fi
bench_log "runtimed keeper $KPID, server $SPID, API $RUNTIME_API_URL"

# --- the gvisor driver's bundle and flags, and the bare runsc references (part 4) ----

# A gvisor sandbox of this daemon (GV_SB) tells how the driver runs runsc: its bundle's
# config.json and the global flags of its runsc-sandbox process. The bare runs copy both.
GV_RUN="$RT sandbox run --isolation gvisor -- /bin/echo ready"
if ((GV)); then
    GV_SB=$("$RT" sandbox create --isolation gvisor 2>"$WORK/out") ||
        bench_die "a gvisor sandbox cannot be created (runsc is at $RUNSC): $(head -c 400 "$WORK/out")"
    cp "$WORK/state/sandboxes/$GV_SB/bundle/config.json" "$WORK/driver-bundle.json" ||
        bench_die "no bundle of gvisor sandbox $GV_SB under $WORK/state/sandboxes"
    pid=$(bench_memcg_find "$(bench_sandbox_memcg "$GV_SB")" runsc-sandbox) ||
        bench_die "no runsc-sandbox process in gvisor sandbox $GV_SB's cgroup"
    bench_runsc_flags "$pid" >"$WORK/runsc-flags.txt"
    mapfile -t GV_FLAGS <"$WORK/runsc-flags.txt"
    NONET_FLAGS=()
    for f in "${GV_FLAGS[@]}"; do [[ $f == --network=* ]] || NONET_FLAGS+=("$f"); done
    NONET_FLAGS+=(--network=none)
    bench_bare_bundle "$WORK/driver-bundle.json" "$WORK/bare-start" \
        '{"args":["/bin/echo","ready"],"cwd":"/workspace","user":{"uid":1000,"gid":1000}}'
    # From the host's pid and mount namespaces (runsc run makes its own), in a network
    # namespace of its own: the spec's, made by runsc, or one from unshare -n when the
    # driver's spec names none (its --network=host ran in the holder's).
    NETWRAP=$(bench_bare_netwrap "$WORK/bare-start/config.json")
    NETNOTE="a fresh netns from ${NETWRAP:-runsc, as the spec asks}"
    RUNSC_BARE="${NETWRAP:+$NETWRAP }$RUNSC --root=$WORK/runsc ${GV_FLAGS[*]} run --bundle $WORK/bare-start bare-start"
    RUNSC_NONET="$RUNSC --root=$WORK/runsc ${NONET_FLAGS[*]} run --bundle $WORK/bare-start bare-nonet"
    # The driver's steps without runtime: `runsc run --detach` of the bundle with the
    # driver's init as its process, then `runsc exec` of /bin/echo ready (a process spec like
    # the driver's); the teardown (`runsc delete --force`) runs untimed before the next run.
    bench_bare_bundle "$WORK/driver-bundle.json" "$WORK/bare-init" '{}'
    init=$(jq -r '.process.args[0]' "$WORK/bare-init/config.json")
    install -m 755 "$BUILD/runtime-init" "$WORK/bare-init/rootfs$init" ||
        bench_die "cannot copy $BUILD/runtime-init to the bare bundle's $init"
    jq -c '.process + {args: ["/bin/echo", "ready"], cwd: "/workspace", user: {uid: 1000, gid: 1000}}' \
        "$WORK/bare-start/config.json" >"$WORK/echo-process.json"
    BARE_RSC=("$RUNSC" --root="$WORK/runsc" "${GV_FLAGS[@]}")
    {
        echo '#!/bin/sh'
        echo 'set -e'
        # The init says "ok" once it has set gVisor's pids limit (the driver reads it).
        echo "${NETWRAP:+$NETWRAP }${BARE_RSC[*]} run --detach --bundle $WORK/bare-init steps >/dev/null"
        echo "${BARE_RSC[*]} exec --process $WORK/echo-process.json steps"
    } >"$WORK/runsc-steps.sh"
    chmod 755 "$WORK/runsc-steps.sh"
    RUNSC_STEPS="$WORK/runsc-steps.sh"
    RUNSC_UNDO="${BARE_RSC[*]} delete --force steps"
    # The start alone, beside each gvisor create of the breakdown: `runsc run --detach` of
    # the bundle with the driver's init, returning once the sandbox runs.
    read -ra RUNSC_START <<<"${NETWRAP:+$NETWRAP }${BARE_RSC[*]} run --detach --bundle $WORK/bare-init start"
    RUNSC_START_UNDO="${BARE_RSC[*]} delete --force start"
    for c in "$RUNSC_BARE" "$RUNSC_NONET" "$GV_RUN" "$RUNSC_STEPS"; do
        # shellcheck disable=SC2086 # the command's words
        out=$(timeout 60 $c 2>&1) || true
        [[ $out == ready ]] || bench_die "this does not print 'ready' here: $c: $(head -c 400 <<<"$out")"
    done
    # shellcheck disable=SC2086
    timeout 20 $RUNSC_UNDO >/dev/null 2>&1 || true
    bench_log "gvisor: the driver's runsc flags: ${GV_FLAGS[*]}; bare bundle $WORK/bare-start"
fi

# --- 1. create + exec + delete against bwrap ---------------------------------------

# In ROUNDS alternating rounds, so that load that comes and goes on a shared
# machine falls on both sides; the medians are over the runs of all rounds.
GV_CMDS=()
((GV)) && GV_CMDS=(-n gvisor "$GV_RUN" -n runsc "$RUNSC_BARE" -n runsc-nonet "$RUNSC_NONET")
bench_log "1/4 sandbox run vs bwrap$( ((GV)) && echo ", gvisor vs bare runsc"): $WARMUP warmup + $RUNS runs each, in $ROUNDS rounds"
for ((r = 1; r <= ROUNDS; r++)); do
    hyperfine -N --style basic --warmup $((r == 1 ? WARMUP : 1)) --runs $((RUNS / ROUNDS)) \
        --export-json "$WORK/lifecycle-$r.json" -n bwrap "$BWRAP" -n run "$RUN" "${GV_CMDS[@]}" >&2
    if ((GV)); then
        hyperfine -N --style basic --warmup $((r == 1 ? WARMUP : 1)) --runs $((RUNS / ROUNDS)) \
            --export-json "$WORK/steps-$r.json" --prepare "timeout 20 $RUNSC_UNDO" -n runsc-steps "$RUNSC_STEPS" >&2
        # shellcheck disable=SC2086
        timeout 20 $RUNSC_UNDO >/dev/null 2>&1 || true
    fi
done
BWRAP_MS=$(bench_hf_median_ms bwrap "$WORK"/lifecycle-*.json)
RUN_MS=$(bench_hf_median_ms run "$WORK"/lifecycle-*.json)
GV_RUN_MS=$(bench_hf_median_ms gvisor "$WORK"/lifecycle-*.json)
RUNSC_MS=$(bench_hf_median_ms runsc "$WORK"/lifecycle-*.json)
RUNSC_NONET_MS=$(bench_hf_median_ms runsc-nonet "$WORK"/lifecycle-*.json)
RUNSC_STEPS_MS=nan
((GV)) && RUNSC_STEPS_MS=$(bench_hf_median_ms runsc-steps "$WORK"/steps-*.json)

bench_log "1/4 breakdown: client start, API round trip and exec on one sandbox"
"$RT" sandbox create >"$WORK/out" || bench_die "sandbox create failed"
read -r SB <"$WORK/out"
hyperfine -N --style basic --warmup "$WARMUP" --runs "$RUNS" \
    --export-json "$WORK/parts.json" -n version "$RT --version" \
    -n get "$RT sandbox get $SB --json" -n exec "$RT sandbox exec $SB -- /bin/echo ready" >&2
"$RT" sandbox rm "$SB" >/dev/null
VERSION_MS=$(bench_hf_median_ms version "$WORK/parts.json")
GET_MS=$(bench_hf_median_ms get "$WORK/parts.json")
EXEC_MS=$(bench_hf_median_ms exec "$WORK/parts.json")

bench_log "1/4 breakdown: $STEPS creates, then $STEPS removals, one at a time"
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

GV_EXEC_MS=nan GV_CREATE_MS=nan GV_RM_MS=nan RUNSC_START_MS=nan
if ((GV)); then
    bench_log "1/4 breakdown, gvisor: exec on one sandbox, $STEPS creates, then $STEPS removals"
    hyperfine -N --style basic --warmup "$WARMUP" --runs "$RUNS" --export-json "$WORK/gv-parts.json" \
        -n gv-exec "$RT sandbox exec $GV_SB -- /bin/echo ready" >&2
    GV_EXEC_MS=$(bench_hf_median_ms gv-exec "$WORK/gv-parts.json")
    "$RT" sandbox rm "$GV_SB" >/dev/null || bench_die "removing gvisor sandbox $GV_SB failed"
    ids=()
    for ((i = 0; i < STEPS; i++)); do
        OUT=$WORK/gv-create.ms
        timed "$RT" sandbox create --isolation gvisor
        read -r id <"$WORK/out"
        ids+=("$id")
        OUT=$WORK/runsc-start.ms
        timed "${RUNSC_START[@]}"
        # shellcheck disable=SC2086 # the command's words
        timeout 20 $RUNSC_START_UNDO >/dev/null 2>&1 || bench_die "$RUNSC_START_UNDO failed"
    done
    OUT=$WORK/gv-rm.ms
    for id in "${ids[@]}"; do timed "$RT" sandbox rm "$id"; done
    GV_CREATE_MS=$(bench_median <"$WORK/gv-create.ms")
    RUNSC_START_MS=$(bench_median <"$WORK/runsc-start.ms")
    GV_RM_MS=$(bench_median <"$WORK/gv-rm.ms")
fi

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

bench_log "2/4 $ALIVE sandboxes alive at once"
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

# --- 4. idle memory: one ns sandbox, one gvisor sandbox, one bare runsc ---------------

# mem_of CGROUP_DIR: "CHARGE ANON PSS RSS NPROCS" (KiB) of the processes in that cgroup.
mem_of() {
    local pids
    mapfile -t pids < <(bench_memcg_pids "$1")
    echo "$(bench_memcg_kib "$1") $(sum_kib pss "${pids[@]}") $(sum_kib rss "${pids[@]}") ${#pids[@]}"
}
MEM_NS="nan nan nan nan nan" MEM_GV=$MEM_NS MEM_BARE=$MEM_NS
if ((GV)); then
    bench_log "4/4 idle memory: one ns sandbox, one gvisor sandbox, one bare runsc, idle $IDLE_S s"
    SB_NS=$("$RT" sandbox create --isolation ns) || bench_die "sandbox create --isolation ns failed"
    SB_GV=$("$RT" sandbox create --isolation gvisor) || bench_die "sandbox create --isolation gvisor failed"
    # The bare runsc runs the driver's own init (the bundle's process unchanged), created and
    # started as the driver does (`runsc create`, `runsc start`: no runsc client stays), from a
    # memory cgroup of this script's; with --ignore-cgroups its sandbox and gofer stay in it.
    BARE_CG=$(bench_memcg "runtime-bench-bare-$$")
    mkdir "$BARE_CG" || bench_die "cannot make the memory cgroup $BARE_CG"
    (
        echo "$BASHPID" >"$BARE_CG/cgroup.procs"
        # shellcheck disable=SC2086 # NETWRAP: the words of a command, or none
        timeout 60 $NETWRAP "${BARE_RSC[@]}" create --bundle "$WORK/bare-init" bare-idle &&
            timeout 60 "${BARE_RSC[@]}" start bare-idle
    ) </dev/null >/dev/null 2>"$WORK/bare-idle.err" ||
        bench_die "the bare idle runsc did not start: $(tail -c 400 "$WORK/bare-idle.err")"
    [[ $("${BARE_RSC[@]}" state bare-idle 2>/dev/null | jq -r .status 2>/dev/null) == running ]] ||
        bench_die "the bare idle runsc is not running: $("${BARE_RSC[@]}" state bare-idle 2>&1 | head -c 400)"
    sleep "$IDLE_S"
    MEM_NS=$(mem_of "$(bench_sandbox_memcg "$SB_NS")")
    MEM_GV=$(mem_of "$(bench_sandbox_memcg "$SB_GV")")
    MEM_BARE=$(mem_of "$BARE_CG")
    bench_log "idle memory (charge anon pss rss KiB, processes): ns $MEM_NS; gvisor $MEM_GV; bare runsc $MEM_BARE"
    "$RT" sandbox rm "$SB_NS" "$SB_GV" >/dev/null || bench_die "removing the idle sandboxes failed"
    timeout 20 "${BARE_RSC[@]}" delete --force bare-idle >/dev/null 2>&1 || true
    bench_memcg_drop "$BARE_CG"
    BARE_CG=''
fi
read -r NS_CHARGE NS_ANON NS_PSS NS_RSS NS_PROCS <<<"$MEM_NS"
read -r GV_CHARGE GV_ANON GV_PSS GV_RSS GV_PROCS <<<"$MEM_GV"
read -r BARE_CHARGE BARE_ANON BARE_PSS BARE_RSS BARE_PROCS <<<"$MEM_BARE"
mib() { awk -v k="$1" 'BEGIN { if (k == "nan" || k == "") print "n/a"; else printf "%.1f MiB\n", k / 1024 }'; }
GV_CHARGE_MIB=$(awk -v k="$GV_CHARGE" 'BEGIN { if (k == "nan") print "n/a"; else printf "%.1f\n", k / 1024 }')

# --- summary ---------------------------------------------------------------------

IDLE_END=$(bench_cpu_idle)
RATIO=$(bench_ratio "$RUN_MS" "$BWRAP_MS")
GV_RATIO=$(bench_ratio "$GV_RUN_MS" "$RUNSC_MS")
GV_RATIO_NONET=$(bench_ratio "$GV_RUN_MS" "$RUNSC_NONET_MS")
GV_START_RATIO=$(bench_ratio "$GV_CREATE_MS" "$RUNSC_START_MS")
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
    if ((GV)); then
        echo "gvisor driver (issue 26): runsc $(head -c 60 "$RUNSC.version" 2>/dev/null || echo '?'), flags ${GV_FLAGS[*]}"
        echo "bare runsc: \`runsc run\` of the driver's bundle (its root, mounts, uid maps, seccomp) with"
        echo "process /bin/echo ready, from the host's namespaces; same rounds as the first row. The"
        echo "start: \`runsc run --detach\` of that bundle with the driver's init, returning once it runs"
        echo
        row "figure" "value" "reference" "target"
        row "start: sandbox create --isolation gvisor" "$(ms "$GV_CREATE_MS")" \
            "runsc run --detach $(ms "$RUNSC_START_MS"), ratio $GV_START_RATIO" \
            "ratio <= $TARGET_GV_RATIO $(bench_verdict "$GV_START_RATIO" "$TARGET_GV_RATIO")"
        row "sandbox run --isolation gvisor -- echo" "$(ms "$GV_RUN_MS")" \
            "bare runsc $(ms "$RUNSC_MS"), ratio $GV_RATIO" \
            "ratio <= $TARGET_GV_RATIO $(bench_verdict "$GV_RATIO" "$TARGET_GV_RATIO")"
        row "  bare runsc, the driver's flags" "$(ms "$RUNSC_MS")" "$NETNOTE" ""
        row "  bare runsc --network=none (info)" "$(ms "$RUNSC_NONET_MS")" "gvisor ratio $GV_RATIO_NONET" \
            "ratio <= $TARGET_GV_RATIO $(bench_verdict "$GV_RATIO_NONET" "$TARGET_GV_RATIO")"
        row "  bare runsc run --detach+exec (info)" "$(ms "$RUNSC_STEPS_MS")" \
            "the driver's runsc calls; gvisor $(bench_ratio "$GV_RUN_MS" "$RUNSC_STEPS_MS") x" ""
        row "  gvisor run / ns run (info)" "$(bench_ratio "$GV_RUN_MS" "$RUN_MS")" \
            "$(bench_ratio "$GV_RUN_MS" "$BWRAP_MS") x bwrap" ""
        row "  sandbox create --isolation gvisor" "$(ms "$GV_CREATE_MS")" "median of $STEPS; ns $(ms "$CREATE_MS")" ""
        row "  bare runsc run --detach, its init" "$(ms "$RUNSC_START_MS")" "median of $STEPS, one after each create" ""
        row "  sandbox exec ID -- /bin/echo ready" "$(ms "$GV_EXEC_MS")" "ns $(ms "$EXEC_MS")" ""
        row "  sandbox rm ID" "$(ms "$GV_RM_MS")" "median of $STEPS; ns $(ms "$RM_MS")" ""
        echo
        echo "idle memory after $IDLE_S s idle: the cgroup's charge (anonymous memory, the page cache it"
        echo "faulted first, kernel objects), its anonymous part, and the Pss and Rss of its processes"
        printf '%-34s %11s %11s %11s %11s %6s  %s\n' "" charge anon "Pss sum" "Rss sum" procs target
        printf '%-34s %11s %11s %11s %11s %6s  %s\n' "ns sandbox" "$(mib "$NS_CHARGE")" "$(mib "$NS_ANON")" \
            "$(mib "$NS_PSS")" "$(mib "$NS_RSS")" "$NS_PROCS" ""
        printf '%-34s %11s %11s %11s %11s %6s  %s\n' "gvisor sandbox" "$(mib "$GV_CHARGE")" "$(mib "$GV_ANON")" \
            "$(mib "$GV_PSS")" "$(mib "$GV_RSS")" "$GV_PROCS" \
            "charge <= $TARGET_GV_MIB MiB $(bench_verdict "$GV_CHARGE_MIB" "$TARGET_GV_MIB")"
        printf '%-34s %11s %11s %11s %11s %6s  %s\n' "bare runsc create+start, its init" "$(mib "$BARE_CHARGE")" \
            "$(mib "$BARE_ANON")" "$(mib "$BARE_PSS")" "$(mib "$BARE_RSS")" "$BARE_PROCS" ""
    else
        echo "gvisor driver (issue 26): skipped: $GVISOR_SKIP"
    fi
    echo
    echo "took $((SECONDS - START)) s"
} | sed 's/ *$//'
bench_smoke_figures "run=$RUN_MS" "bwrap=$BWRAP_MS" "exec=$EXEC_MS" "get=$GET_MS" "version=$VERSION_MS" \
    "create=$CREATE_MS" "rm=$RM_MS" "alive_create=$ALIVE_CREATE_MS" "alive_exec=$ALIVE_EXEC_MS" \
    "daemon_each=$DAEMON_EACH" "init_uss=$INIT_USS_EACH" "cgroup_each=$CG_EACH"
if ((GV)); then
    bench_smoke_figures "gvisor_run=$GV_RUN_MS" "runsc=$RUNSC_MS" "runsc_nonet=$RUNSC_NONET_MS" "runsc_steps=$RUNSC_STEPS_MS" \
        "gvisor_exec=$GV_EXEC_MS" "gvisor_create=$GV_CREATE_MS" "gvisor_rm=$GV_RM_MS" "runsc_start=$RUNSC_START_MS" \
        "gvisor_charge=$GV_CHARGE" "gvisor_pss=$GV_PSS" "bare_charge=$BARE_CHARGE" "ns_charge=$NS_CHARGE"
fi
