# shellcheck shell=bash
# Helpers shared by the bench/*.sh scripts. Source it; it defines functions only.
# Times are taken from $EPOCHREALTIME (bash 5) so that reading the clock forks nothing.

bench_log() { printf '[bench %s] %s\n' "$(date +%T)" "$*" >&2; }
bench_die() {
    bench_log "error: $*"
    exit 1
}

# Microseconds since the epoch, into the variable named $1 (no subshell, no fork).
bench_now_us() {
    local t=${EPOCHREALTIME/[.,]/}
    printf -v "$1" '%s' "$t"
}

# Median of the numbers on stdin, one per line; "nan" when there are none.
bench_median() {
    sort -g | awk '{ a[NR] = $1 }
        END { if (NR == 0) { print "nan"; exit }
              if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'
}

# Median in milliseconds of every run of hyperfine benchmark $1 (its -n name) in the
# JSON files that follow (one per round, when rounds interleave two commands).
bench_hf_median_ms() {
    local name=$1
    shift
    jq -rs --arg n "$name" '[.[].results[] | select(.command == $n) | .times[]] | sort
        | if length == 0 then "nan"
          elif length % 2 == 1 then .[(length - 1) / 2] * 1000
          else (.[length / 2 - 1] + .[length / 2]) / 2 * 1000 end' "$@"
}

# a / b with $3 decimals (default 2); "n/a" when either is missing or b is 0.
bench_ratio() {
    awk -v a="$1" -v b="$2" -v d="${3:-2}" 'BEGIN {
        if (a == "" || b == "" || a == "nan" || b == "nan" || b + 0 == 0) { print "n/a"; exit }
        printf "%.*f\n", d, a / b }'
}

# Prints $1 with $2 decimals (default 1).
bench_fmt() { awk -v v="$1" -v d="${2:-1}" 'BEGIN { if (v == "" || v == "nan") print "n/a"; else printf "%.*f\n", d, v }'; }

# "ok" when $1 <= $2 (numbers), else "MISSED".
bench_verdict() { awk -v v="$1" -v t="$2" 'BEGIN { print (v != "n/a" && v + 0 <= t + 0) ? "ok" : "MISSED" }'; }

# Proportional set size of pid $1 in KiB (shared pages split between their users).
bench_pss_kib() { awk '/^Pss:/ { print $2; exit }' "/proc/$1/smaps_rollup" 2>/dev/null || echo 0; }
bench_rss_kib() { awk '/^VmRSS:/ { print $2; exit }' "/proc/$1/status" 2>/dev/null || echo 0; }
# Unique set size of pid $1 in KiB: the pages only it maps.
bench_uss_kib() { awk '/^Private_(Clean|Dirty):/ { s += $2 } END { print s + 0 }' "/proc/$1/smaps_rollup" 2>/dev/null || echo 0; }

# The pid inside the innermost pid namespace of pid $1 (1 for a namespace's init).
bench_inner_pid() { awk '/^NSpid:/ { print $NF; exit }' "/proc/$1/status" 2>/dev/null; }

# Direct children of pid $1, one per line.
bench_children() { tr ' ' '\n' <"/proc/$1/task/$1/children" 2>/dev/null | sed '/^$/d'; }

# One line of machine facts: CPUs, memory, kernel, load.
bench_machine() {
    printf '%s CPUs, %s GiB RAM (free -g), Linux %s, load average %s\n' "$(nproc)" \
        "$(free -g | awk '/^Mem:/ { print $2 }')" "$(uname -r)" \
        "$(cut -d' ' -f1-3 /proc/loadavg)"
}

# Percent of CPU time idle on the whole machine over the next second: a noise gauge
# for shared machines, where the load average lags.
bench_cpu_idle() {
    local a b
    a=$(awk '/^cpu / { print $5 + $6, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9 }' /proc/stat)
    sleep 1
    b=$(awk '/^cpu / { print $5 + $6, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9 }' /proc/stat)
    awk -v a="$a" -v b="$b" 'BEGIN { split(a, x, " "); split(b, y, " ")
        d = y[2] - x[2]; printf "%d\n", (d > 0 ? 100 * (y[1] - x[1]) / d : 0) }'
}

# --- daemon clean-up shared by the scripts (they set INSTANCE) -------------------

alive() { # pid $1 exists and is not a zombie
    local st
    st=$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null) && [[ $st != Z ]]
}

# FNV-1a of the state dir's real path: the daemon names its cgroups "<this>-<id>".
instance_of() {
    local s h=2166136261 i c
    s=$(realpath "$1")
    for ((i = 0; i < ${#s}; i++)); do
        printf -v c '%d' "'${s:i:1}"
        h=$(((h ^ c) * 16777619 & 0xFFFFFFFF))
    done
    printf '%08x' "$h"
}

# Kills what is left in this daemon's sandbox cgroups (only reached when the
# daemon could not delete them itself) and removes the cgroups.
sweep_leftovers() {
    [[ -n $INSTANCE ]] || return 0
    local dirs=() d pid deadline
    shopt -s nullglob
    dirs=(/sys/fs/cgroup/*/runtime/"$INSTANCE"-* /sys/fs/cgroup/runtime/"$INSTANCE"-*)
    shopt -u nullglob
    ((${#dirs[@]})) || return 0
    bench_log "removing ${#dirs[@]} leftover sandbox cgroups of this run"
    for d in "${dirs[@]}"; do
        while read -r pid; do kill -KILL "$pid" 2>/dev/null || true; done <"$d/cgroup.procs"
    done
    deadline=$((SECONDS + 10))
    for d in "${dirs[@]}"; do
        while [[ -d $d ]] && ! rmdir "$d" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.05; done
    done
}

stop_pid() { # TERM, wait up to 10 s, then KILL
    local pid=$1 deadline=$((SECONDS + 10))
    kill -TERM "$pid" 2>/dev/null || true
    while alive "$pid" && ((SECONDS < deadline)); do sleep 0.05; done
    alive "$pid" && kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null || true
}
