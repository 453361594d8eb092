#!/usr/bin/env bash
# Template start benchmark (issue 27, item 4; docs/templates.md): how long a new gvisor
# sandbox takes to have the catalog's memory server ready (installed or restored,
# initialized, its tools listed and gated), started from a template, against the same
# start with an install from npm and a boot: the reference, in the same run.
#   1. the reference: runtimed --templates off; N sandboxes one after another, each
#      created and given the memory server (POST .../mcp {"id":"memory"}): the time from
#      the create's request to the server's ready status, install and boot included.
#   2. runtimed --templates on: the first sandbox installs and saves the template (its
#      time reported apart), then N sandboxes are timed the same way: each restores it.
# Both daemons resolve names for real: the installs reach the npm registry, as a user's.
# Target: a start from the template takes at most a third of an install-and-boot start
# (p50). Figures: docs/benchmarks.md, "Starting from a template".
#
# Usage: sudo bench/template.sh [--smoke]   (after `make` and scripts/install-runsc; needs
#        curl, jq and the npm registry)
#        --smoke (or BENCH_SMOKE=1): the short mode of `make bench-smoke`.
# Knobs (environment): N=8 BUDGET=1800 (seconds) IDLE_WAIT=900 (seconds to wait for a quiet
# machine; 0 = don't) BUILD=DIR (default build/) BENCH_DATA=DIR (keep the raw figures).
# --smoke: N=1 BUDGET=600.
# shellcheck disable=SC2317 # the trap handlers look unreachable
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$HERE/lib.sh"

bench_args "" "$@"
N=${N:-$(bench_pick 1 8)}
BUDGET=${BUDGET:-$(bench_pick 600 1800)}
IDLE_WAIT=${IDLE_WAIT:-900}
MAX_LOAD=2
TARGET_RATIO=0.333
BUILD=${BUILD:-$ROOT/build}
RUNTIMED=$BUILD/runtimed
RT=$BUILD/runtime
RUNSC=/opt/runtime/bin/runsc

[[ $(id -u) == 0 ]] || bench_die "run as root (runtimed needs it): sudo $0"
need_build
[[ -x $RUNSC ]] || bench_die "$RUNSC is missing (scripts/install-runsc)"
need_tools "curl jq" curl jq

bench_init
KEEP="txt log"
wait_for_quiet
bench_workdir -template
start_watchdog
export BENCH_DRIVER=gvisor
SPEC='{"isolation":"gvisor","memoryMiB":512}'
SERVER='{"servers":[{"id":"memory"}]}'

# One sandbox with the memory server: prints the milliseconds from the create's request to
# the server's ready status.
start_one() {
    local t0 t1 id
    bench_now_us t0
    id=$(api POST /v1/sandboxes "$SPEC" | jq -r .id)
    start_server "$id" memory "$SERVER"
    bench_now_us t1
    awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f\n", (b - a) / 1000 }'
    echo "$id" >>"$WORK/ids.txt"
}

# Stops sandbox $1's memory server and starts it again: prints the milliseconds from the
# start's request to ready (a boot of the installed server, no install).
boot_again() {
    local t0 t1
    api DELETE "/v1/sandboxes/$1/mcp/memory" >/dev/null
    bench_now_us t0
    start_server "$1" memory "$SERVER"
    bench_now_us t1
    awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f\n", (b - a) / 1000 }'
}

# kind $1 happened in sandbox $2's events: 0 or 1.
happened() {
    api GET "/v1/sandboxes/$2/events" | jq --arg k "$1" '[.[] | select(.kind == $k)] | length | if . > 0 then 1 else 0 end'
}

# run NAME FLAGS...: a daemon with FLAGS; N timed starts into NAME.txt (after one untimed
# start with --templates on: the install that saves the template, into NAME-first.txt).
run() {
    local name=$1 i id
    shift
    start_daemon "$@"
    : >"$WORK/ids.txt"
    : >"$WORK/$name.txt"
    : >"$WORK/boot.txt"
    if [[ $name == template ]]; then
        start_one >"$WORK/$name-first.txt"
        id=$(tail -n 1 "$WORK/ids.txt")
        [[ $(happened mcp.template_saved "$id") == 1 ]] || bench_die "no template was saved: $(api GET "/v1/sandboxes/$id/events" | jq -c '[.[] | .kind]')"
        api GET "/v1/sandboxes/$id/events" | jq '[.[] | select(.kind == "mcp.template_saved")] | last | .imageBytes' >"$WORK/image.txt"
    fi
    for ((i = 0; i < N; i++)); do
        start_one >>"$WORK/$name.txt"
        id=$(tail -n 1 "$WORK/ids.txt")
        [[ $(happened mcp.template_restored "$id") == $([[ $name == template ]] && echo 1 || echo 0) ]] ||
            bench_die "sandbox $id of the $name run: $(api GET "/v1/sandboxes/$id/events" | jq -c '[.[] | .kind]')"
        [[ $name == install ]] && boot_again "$id" >>"$WORK/boot.txt"
    done
    CLEANUP_RM_S=120 remove_sandboxes
    stop_daemon
    rm -rf "$WORK/state"
    [[ $name == install ]] && mv "$WORK/boot.txt" "$WORK/install-boot.txt"
    return 0
}

MACHINE="$(bench_machine), CPU idle $(bench_cpu_idle)% over 1 s"
bench_log "$MACHINE; $QUIET"
run install --templates off
run template --templates on
INSTALL_P50=$(bench_median <"$WORK/install.txt")
TEMPLATE_P50=$(bench_median <"$WORK/template.txt")
BOOT_P50=$(bench_median <"$WORK/install-boot.txt")
INSTALL_MAX=$(sort -n "$WORK/install.txt" | tail -n 1)
TEMPLATE_MAX=$(sort -n "$WORK/template.txt" | tail -n 1)
FIRST_MS=$(cat "$WORK/template-first.txt")
IMAGE_MB=$(awk '{ printf "%.1f", $1 / 1e6 }' "$WORK/image.txt")
RATIO=$(bench_ratio "$TEMPLATE_P50" "$INSTALL_P50" 3)

{
    echo "Starting from a template (bench/template.sh), $(date -u +%FT%TZ)"
    echo "machine: $MACHINE; $QUIET"
    echo "a new gvisor sandbox with the catalog's memory server, from the create's request to ready; $N each"
    printf '   %-48s %8s ms p50  %8s ms max\n' "install from npm and boot (reference)" "$INSTALL_P50" "$INSTALL_MAX"
    printf '   %-48s %8s ms p50\n' "  of which a boot (the installed server again)" "$BOOT_P50"
    printf '   %-48s %8s ms p50  %8s ms max\n' "restored from the template" "$TEMPLATE_P50" "$TEMPLATE_MAX"
    printf '   %-48s %8s   target %s  %s\n' "template / install (p50)" "$RATIO" "$TARGET_RATIO" "$(bench_verdict "$RATIO" "$TARGET_RATIO")"
    printf '   %-48s %8s ms (image %s MB)\n' "the first start: install, boot, save the template" "$FIRST_MS" "$IMAGE_MB"
} | tee "$WORK/report.txt"

bench_smoke_figures "boot=$BOOT_P50" "install=$INSTALL_P50" "template=$TEMPLATE_P50" "ratio=$RATIO" "first=$FIRST_MS"
