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

# Median in milliseconds of hyperfine benchmark $2 (its -n name) in JSON file $1.
bench_hf_median_ms() {
    jq -r --arg n "$2" '.results[] | select(.command == $n) | .median * 1000' "$1"
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
