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
# "ok" when $1 >= $2 (numbers), else "MISSED".
bench_at_least() { awk -v v="$1" -v t="$2" 'BEGIN { print (v != "n/a" && v + 0 >= t + 0) ? "ok" : "MISSED" }'; }

# Nearest-rank percentile $1 of the numbers on stdin, one per line; "nan" when there are none.
bench_pct() {
    sort -g | awk -v p="$1" '{ a[NR] = $1 }
        END { if (!NR) { print "nan"; exit }
              i = int(p / 100 * NR); if (i < p / 100 * NR) i++; if (i < 1) i = 1; print a[i] }'
}

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

# --- processes and cgroups (the scripts set INSTANCE) -------------------------------

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

# stop_pid PID [NAME]: TERM, wait up to 10 s, then KILL (saying so in the log when NAME is given).
stop_pid() {
    local pid=$1 deadline=$((SECONDS + 10))
    kill -TERM "$pid" 2>/dev/null || true
    while alive "$pid" && ((SECONDS < deadline)); do sleep 0.05; done
    if alive "$pid"; then
        [[ -z ${2:-} ]] || bench_log "$2 did not stop in 10 s; killing it"
        kill -KILL "$pid" 2>/dev/null
    fi
    wait "$pid" 2>/dev/null || true
}

# --- arguments, checks and the work dir ---------------------------------------------

# Prints the script's header comment (line 2 up to code or a shellcheck directive) and exits 0.
bench_help() {
    awk 'NR > 1 && (!/^#/ || /^# shellcheck/) { exit } NR > 1' "$0" | sed 's/^# \{0,1\}//'
    exit 0
}

# The short mode (`make bench-smoke`, in `make check`): BENCH_SMOKE=1 or --smoke. Tiny counts,
# one round, every phase, no wait for a quiet machine, a short time budget: so that a script
# that no longer runs to its end fails in CI. Its figures mean nothing and are not judged.
SMOKE=${BENCH_SMOKE:-0}
[[ $SMOKE =~ ^[01]$ ]] || { echo "BENCH_SMOKE is 0 or 1, not '$SMOKE'" >&2; exit 1; }
# bench_pick SMOKE FULL: prints SMOKE in the short mode, else FULL (for the knobs' defaults).
bench_pick() { if ((SMOKE)); then echo "$1"; else echo "$2"; fi; }

# bench_args FLAG ARG...: -h/--help prints the help; --smoke sets SMOKE=1; FLAG_GIVEN=1 when
# FLAG is given; dies on anything else. Call it before the knobs' defaults (bench_pick).
# shellcheck disable=SC2034 # FLAG_GIVEN is the scripts' to read
bench_args() {
    local flag=$1 a
    shift
    FLAG_GIVEN=0
    for a in "$@"; do
        case "$a" in
        -h | --help) bench_help ;;
        --smoke) SMOKE=1 ;;
        *)
            [[ -n $flag && $a == "$flag" ]] || bench_die "unexpected argument '$a'; see $0 --help"
            FLAG_GIVEN=1
            ;;
        esac
    done
    if ((SMOKE)); then
        IDLE_WAIT=${IDLE_WAIT:-0}
        bench_log "short mode (smoke): tiny counts, figures not meaningful"
    fi
    return 0
}

# In the short mode: dies unless every "NAME=VALUE" given is a number (a figure the run
# should have produced: "n/a", "nan" or "" mean a phase measured nothing). No-op otherwise.
bench_smoke_figures() {
    ((SMOKE)) || return 0
    local kv bad=()
    for kv in "$@"; do
        [[ ${kv#*=} =~ ^[+-]?[0-9]+([.][0-9]+)?$ ]] || bad+=("$kv")
    done
    ((${#bad[@]} == 0)) || bench_die "smoke: no figure for: ${bad[*]}"
    bench_log "smoke: ok (${#@} figures present)"
}

# Dies unless the build (BUILD) has runtimed and runtime.
need_build() { [[ -x $RUNTIMED && -x $RT ]] || bench_die "no $RUNTIMED or $RT; run make in $ROOT first (or set BUILD)"; }

# need_tools PACKAGES TOOL...: dies unless every TOOL is on PATH, naming the PACKAGES that bring them.
need_tools() {
    local pkgs=$1 tool
    shift
    for tool in "$@"; do command -v "$tool" >/dev/null || bench_die "$tool is missing; apt-get install -y $pkgs"; done
}

# Sets the run's state (MAIN START WORK KPID SPID WATCHDOG INSTANCE MADE_NS) and the exit traps.
bench_init() {
    MAIN=$$ START=$SECONDS WORK='' KPID='' SPID='' WATCHDOG='' INSTANCE='' MADE_NS=''
    trap bench_cleanup EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
}

# Makes WORK=/tmp/runtime-bench$1.XXXXXX, which the daemon's unprivileged server must reach (STATE/db).
bench_workdir() {
    WORK=$(mktemp -d "/tmp/runtime-bench$1.XXXXXX")
    chmod 755 "$WORK"
    unset RUNTIME_SOCKET
}

# The lines between ": <<'$1'" and "$1" in the running script (sources kept at its end).
bench_extract() { sed -n "/^: <<'$1'\$/,/^$1\$/p" "$0" | sed '1d;$d'; }

# --- wait for a quiet machine --------------------------------------------------------

# How many fuzzer processes run: other work on this machine that takes every CPU.
fuzzers() { pgrep -f 'fuzz_|diff_fuzz' | wc -l; }
# The 1-minute load average.
load1() { cut -d' ' -f1 /proc/loadavg; }
# True while fuzzers run or the 1-minute load is at or above MAX_LOAD.
busy() { pgrep -f 'fuzz_|diff_fuzz' >/dev/null || awk -v l="$(load1)" -v m="$MAX_LOAD" 'BEGIN { exit !(l >= m) }'; }

# Waits while busy, IDLE_WAIT s at most (0: no check); sets QUIET to what it found and START to now.
wait_for_quiet() {
    local end=$((SECONDS + IDLE_WAIT)) said=
    while ((IDLE_WAIT > 0)) && busy && ((SECONDS < end)); do
        [[ -n $said ]] || bench_log "machine busy (fuzzers: $(fuzzers), load $(load1)); waiting up to $IDLE_WAIT s"
        said=1
        sleep 10
    done
    if ((IDLE_WAIT <= 0)); then
        QUIET="not checked"
    elif busy; then
        QUIET="NOT quiet: fuzzers $(fuzzers), load $(load1) after waiting $IDLE_WAIT s"
        bench_log "warning: $QUIET; measuring anyway"
    else
        QUIET="quiet: no fuzzers, 1-min load $(load1) < $MAX_LOAD"
    fi
    START=$SECONDS
}

# --- the daemon: start, API, stop, clean-up (the scripts set RUNTIMED, RT, WORK) ------

# start_daemon [ARG...]: runtimed on a free loopback port with these extra arguments; sets KPID SPID INSTANCE.
# Its sandboxes' default driver is BENCH_DRIVER's (ns), not runtimed's auto: a figure must
# not change with whether runsc is installed; the gvisor parts ask for gvisor per sandbox.
start_daemon() {
    local attempt port
    for attempt in 1 2 3 4 5; do
        port=$((20000 + RANDOM % 40000))
        "$RUNTIMED" --state-dir "$WORK/state" --listen "127.0.0.1:$port" \
            --socket "$WORK/api.sock" --driver "${BENCH_DRIVER:-ns}" "$@" >"$WORK/daemon.log" 2>&1 &
        KPID=$!
        if daemon_answers "$port"; then
            INSTANCE=$(instance_of "$WORK/state")
            find_server
            return 0
        fi
        stop_daemon
        grep -q "cannot listen" "$WORK/daemon.log" || break # not a port clash: give up
        bench_log "port $port was taken (attempt $attempt); trying another"
    done
    bench_die "runtimed did not start; its log: $(tail -n 5 "$WORK/daemon.log")"
}

# Waits (10 s at most) until keeper KPID's API on port $1 answers; exports RUNTIME_API_URL and _KEY.
daemon_answers() {
    local deadline=$((SECONDS + 10))
    while alive "$KPID" && [[ ! -s $WORK/state/admin.key ]] && ((SECONDS < deadline)); do sleep 0.02; done
    export RUNTIME_API_URL="http://127.0.0.1:$1" RUNTIME_API_KEY
    RUNTIME_API_KEY=$(cat "$WORK/state/admin.key" 2>/dev/null || true)
    while alive "$KPID" && ! "$RT" sandbox list >/dev/null 2>&1 && ((SECONDS < deadline)); do sleep 0.02; done
    alive "$KPID" && "$RT" sandbox list >/dev/null 2>&1
}

# Sets SPID: the keeper's child in the host's pid namespace (sandbox inits are pid 1 of their own).
find_server() {
    local c
    for c in $(bench_children "$KPID"); do
        [[ $(bench_inner_pid "$c") != 1 ]] && SPID=$c
    done
    [[ -n $SPID ]] || bench_die "cannot find runtimed's server process (child of $KPID)"
}

# Rss of the daemon (keeper + server) in KiB.
daemon_rss() { echo $(($(bench_rss_kib "$KPID") + $(bench_rss_kib "$SPID"))); }

# api METHOD PATH [JSON]: prints the API's answer, dies unless 2xx; API_MAX_S (150) bounds each call.
api() {
    local out code
    out=$(curl -sS -X "$1" -H "Authorization: Bearer $RUNTIME_API_KEY" -H 'Content-Type: application/json' \
        ${3:+--data-binary "$3"} -w '\n%{http_code}' --max-time "${API_MAX_S:-150}" "$RUNTIME_API_URL$2") ||
        bench_die "$1 $2: curl failed"
    code=${out##*$'\n'}
    out=${out%$'\n'*}
    [[ $code == 2?? ]] || bench_die "$1 $2: HTTP $code: $out"
    printf '%s\n' "$out"
}

# start_server SANDBOX NAME JSON: starts an MCP server, waits (bounded) until it is no longer
# installing or starting, fails unless ready; sets URL and TOKEN.
start_server() {
    local sb=$1 name=$2 body=$3 st deadline=$((SECONDS + 300))
    api POST "/v1/sandboxes/$sb/mcp" "$body" >/dev/null
    while :; do
        api GET "/v1/sandboxes/$sb/mcp?wait=30" >"$WORK/mcp-$name.json"
        st=$(jq -r --arg n "$name" '.servers[] | select(.name == $n) | .status' "$WORK/mcp-$name.json")
        [[ $st == installing || $st == starting ]] && ((SECONDS < deadline)) && continue
        break
    done
    [[ $st == ready ]] || bench_die "server $name is '$st', not ready: $(jq -c '.servers' "$WORK/mcp-$name.json")"
    URL=$(jq -r --arg n "$name" '.servers[] | select(.name == $n) | .url' "$WORK/mcp-$name.json")
    TOKEN=$(jq -r '.headers.Authorization // ""' "$WORK/mcp-$name.json")
    TOKEN=${TOKEN#Bearer }
    [[ $URL == "$RUNTIME_API_URL"/mcp/* ]] || bench_die "the gateway URL '$URL' is not under $RUNTIME_API_URL"
    [[ -n $TOKEN ]] || bench_die "GET .../mcp gave no headers.Authorization"
}

# Stops the keeper (TERM, then KILL after 10 s) and then the server if it outlived it.
stop_daemon() {
    [[ -n $KPID ]] || return 0
    stop_pid "$KPID" runtimed
    [[ -n $SPID ]] && alive "$SPID" && kill -KILL "$SPID" 2>/dev/null
    KPID=
}

# Removes every sandbox of a live daemon, CLEANUP_RM_S (60) seconds at most.
remove_sandboxes() {
    { [[ -n $KPID ]] && alive "$KPID"; } || return 0
    local ids
    ids=$(timeout 20 "$RT" sandbox list --json 2>/dev/null | jq -r '.[].id' 2>/dev/null)
    # shellcheck disable=SC2086 # one argument per id
    [[ -n $ids ]] && timeout "${CLEANUP_RM_S:-60}" "$RT" sandbox rm $ids >/dev/null 2>&1
}

# Runs in the background: past START + BUDGET s it TERMs the daemon (pending calls fail) and the script.
watchdog() {
    local end=$((START + BUDGET))
    while kill -0 "$MAIN" 2>/dev/null && ((SECONDS < end)); do sleep 1; done
    kill -0 "$MAIN" 2>/dev/null || return 0
    bench_log "over the time budget of $BUDGET s; stopping"
    [[ -z $KPID ]] || kill -TERM "$KPID" 2>/dev/null || true
    kill -TERM "$MAIN" 2>/dev/null
}
# Starts the watchdog (with the KPID of now); sets WATCHDOG.
start_watchdog() {
    watchdog &
    WATCHDOG=$!
}

# Copies the work files with the extensions in KEEP (default "txt") to BENCH_DATA.
keep_data() {
    local e files=()
    for e in ${KEEP:-txt}; do files+=("$WORK"/*."$e"); done
    mkdir -p "$BENCH_DATA" && cp "${files[@]}" "$BENCH_DATA"/ 2>/dev/null
}

# EXIT trap: watchdog, cleanup_first (if defined), sandboxes, daemon, cleanup_last, netns, data, WORK.
bench_cleanup() {
    local rc=$?
    set +e
    trap - EXIT INT TERM
    [[ -n $WATCHDOG ]] && kill "$WATCHDOG" 2>/dev/null && wait "$WATCHDOG" 2>/dev/null
    declare -F cleanup_first >/dev/null && cleanup_first
    remove_sandboxes
    stop_daemon
    sweep_leftovers
    declare -F cleanup_last >/dev/null && cleanup_last
    drop_veth
    if ((rc != 0)) && [[ -n $WORK && -f $WORK/daemon.log ]]; then
        bench_log "last lines of the daemon's log:"
        tail -n 15 "$WORK/daemon.log" >&2
    fi
    [[ -n $WORK && -n ${BENCH_DATA:-} ]] && keep_data
    [[ -n $WORK ]] && rm -rf "$WORK"
    exit "$rc"
}

# --- a network namespace behind a veth pair (the scripts set NS, VH, VU) ------------

# Dies when namespace NS or interface VH is there already (left by a crashed run).
need_no_veth() {
    [[ ! -e /run/netns/$NS ]] || bench_die "network namespace $NS exists (a crashed run?); remove it: ip netns del $NS"
    ! ip link show "$VH" >/dev/null 2>&1 || bench_die "interface $VH exists (a crashed run?); remove it: ip link del $VH"
}

# make_veth HOST_ADDR/PLEN NS_ADDR: namespace NS, veth VH here with HOST_ADDR, VU in NS with NS_ADDR/24, up.
make_veth() {
    MADE_NS=1
    ip netns add "$NS"
    ip link add "$VH" type veth peer name "$VU"
    ip link set "$VU" netns "$NS"
    ip addr add "$1" dev "$VH"
    ip link set "$VH" up
    ip -n "$NS" addr add "$2/24" dev "$VU"
    ip -n "$NS" link set "$VU" up
    ip -n "$NS" link set lo up
}

# Removes the namespace that make_veth made, and with it the veth pair and its routes.
drop_veth() {
    [[ -n $MADE_NS ]] || return 0
    ip netns del "$NS" 2>/dev/null
    ip link del "$VH" 2>/dev/null
}

# --- CPU accounting ------------------------------------------------------------------

# The bwrap reference of the benchmarks: a root shaped like a sandbox's (read-only /usr, fresh
# /proc, minimal /dev, tmpfs /tmp and /workspace, every namespace), the command to run after it.
BENCH_BWRAP_ROOT=(bwrap --unshare-all --die-with-parent --ro-bind /usr /usr --symlink usr/bin /bin
    --symlink usr/lib /lib --symlink usr/lib64 /lib64 --symlink usr/sbin /sbin --proc /proc
    --dev /dev --tmpfs /tmp --tmpfs /workspace --chdir /workspace)

# Clock ticks the whole machine has been busy (not idle, not iowait).
cpu_busy() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9 }' /proc/stat; }
# Clock ticks the hypervisor took from this machine's CPUs (steal), all CPUs.
cpu_steal() { awk '/^cpu / { print $9 }' /proc/stat; }
# Clock ticks (user + system) of pid $1.
pid_cpu() { awk '{ sub(/.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"; }
# cpu_shares WALL_US MACHINE PROC UPSTREAM: tick counts as CPUs busy over WALL_US microseconds (HZ ticks/s).
cpu_shares() {
    awk -v w="$1" -v hz="$HZ" -v b="$2" -v p="$3" -v u="$4" \
        'BEGIN { s = w / 1e6 * hz; printf "%.2f %.2f %.2f\n", b / s, p / s, u / s }'
}
# Medians, column by column, of the cpu_shares lines in $WORK/$1.cpu.txt, as "a/b/c".
cpus() {
    local c meds=()
    for c in 1 2 3; do meds+=("$(bench_fmt "$(cut -d' ' -f"$c" "$WORK/$1.cpu.txt" | bench_median)" 2)"); done
    local IFS=/
    echo "${meds[*]}"
}

# --- gVisor: the gvisor driver's sandboxes and a bare runsc beside them (issue 26) ----

# The runsc the daemon runs (pinned; scripts/install-runsc). The bare references run it too.
RUNSC=${RUNSC:-/opt/runtime/bin/runsc}

# Sets GVISOR_SKIP to why the gvisor parts cannot run here, or to "" when they can.
bench_gvisor_check() {
    GVISOR_SKIP=
    if [[ ${GVISOR:-1} == 0 ]]; then
        GVISOR_SKIP="GVISOR=0"
    elif [[ ! -e $RUNSC ]]; then
        GVISOR_SKIP="runsc is not installed at $RUNSC (scripts/install-runsc installs it)"
    elif [[ ! -x $RUNSC ]]; then
        GVISOR_SKIP="$RUNSC is not executable"
    fi
    [[ -z $GVISOR_SKIP ]] || bench_log "gvisor parts skipped: $GVISOR_SKIP"
}

# The memory controller's directory of cgroup $1 (a path under the hierarchy's root): v1
# when it is mounted, else the unified hierarchy.
bench_memcg() {
    if [[ -d /sys/fs/cgroup/memory ]]; then echo "/sys/fs/cgroup/memory/$1"; else echo "/sys/fs/cgroup/$1"; fi
}
# The memory cgroup of this run's sandbox $1 (the daemon names it "<instance>-<id>").
bench_sandbox_memcg() { bench_memcg "runtime/$INSTANCE-$1"; }

# "CHARGE ANON" in KiB of the memory cgroup dir $1: what is charged to it (v1 usage_in_bytes,
# v2 memory.current: anonymous memory, page cache it faulted first, kernel objects) and the
# anonymous part of it.
bench_memcg_kib() {
    local charge anon
    if [[ -r $1/memory.usage_in_bytes ]]; then
        charge=$(<"$1/memory.usage_in_bytes")
        anon=$(awk '$1 == "total_rss" { print $2 }' "$1/memory.stat")
    else
        charge=$(<"$1/memory.current")
        anon=$(awk '$1 == "anon" { print $2 }' "$1/memory.stat")
    fi
    echo $((charge / 1024)) $((${anon:-0} / 1024))
}

# The pids in the cgroup dir $1, one a line.
bench_memcg_pids() { cat "$1/cgroup.procs" 2>/dev/null; }

# Kills every process in the cgroup dir $1 (10 s at most) and removes the cgroup.
# (cgroupfs files show size 0: their contents are read, never tested with -s.)
bench_memcg_drop() {
    local d=$1 pid pids deadline=$((SECONDS + 10))
    [[ -d $d ]] || return 0
    while pids=$(cat "$d/cgroup.procs" 2>/dev/null) && [[ -n $pids ]] && ((SECONDS < deadline)); do
        for pid in $pids; do kill -KILL "$pid" 2>/dev/null; done
        sleep 0.05
    done
    while [[ -d $d ]] && ! rmdir "$d" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.05; done
    [[ ! -d $d ]] || bench_log "warning: cannot remove the cgroup $d: $(wc -l <"$d/cgroup.procs" 2>/dev/null) processes left"
    return 0
}

# bench_wait_pid PID [SECONDS]: waits for our child PID to end, 10 s at most, then KILLs it.
bench_wait_pid() {
    local pid=$1 deadline=$((SECONDS + ${2:-10}))
    [[ -n $pid ]] || return 0
    while alive "$pid" && ((SECONDS < deadline)); do sleep 0.05; done
    alive "$pid" && kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null || true
    return 0
}

# The first pid in the cgroup dir $1 whose argv[0] is $2 (runsc names its processes
# runsc-sandbox, runsc-gofer).
bench_memcg_find() {
    local pid a0
    for pid in $(bench_memcg_pids "$1"); do
        a0=$(tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | head -n 1)
        [[ $a0 == "$2" ]] && { echo "$pid"; return 0; }
    done
    return 1
}

# The global flags a runsc-sandbox process (pid $1) was started with, one a line: its
# arguments before its "boot" command, less --root and the debug and log flags (set by
# whoever runs the driver, not part of its sandbox). The bare references run with these,
# so that they follow the driver's flags (src/sandbox/gvisor.c) as they change.
bench_runsc_flags() {
    tr '\0' '\n' <"/proc/$1/cmdline" | awk 'NR == 1 { next } $0 == "boot" { exit }
        /^--(root|debug|debug-log|debug-command|log|log-format|log-packets|strace|alsologtostderr|panic-log|profile)(=|$)/ { next }
        { print }'
}

# bench_bare_bundle SRC DIR PROCESS: an OCI bundle in DIR for a bare `runsc run`, made from
# the gvisor driver's own (SRC, a sandbox's bundle/config.json): the same spec (user
# namespace and uid/gid maps, seccomp, resources, /proc, /dev, the bind mounts and their
# options), with the root a read-only directory DIR/rootfs shaped like the driver's (the
# directories, the usr/ links, /etc's few files), /usr bound from the host's /usr as the
# driver's is, every other bind mount a fresh directory DIR/mnt/NAME owned by the uid that
# the sandbox user (1000 inside) maps to (/tmp 1777), every namespace the driver's names by
# path (its network namespace with the veth) a fresh one that runsc makes, and PROCESS
# (JSON) merged into its process (e.g. args, cwd, user). Prints nothing; dies on an error.
bench_bare_bundle() {
    local src=$1 dir=$2 process=$3 d host
    [[ -r $src ]] || bench_die "no driver bundle at $src to copy"
    host=$(jq -r '.linux.uidMappings[0].hostID // 0' "$src")
    mkdir -p "$dir/rootfs" "$dir/mnt"
    for d in usr etc proc dev tmp workspace run home etc/ssl/certs; do mkdir -p "$dir/rootfs/$d"; done
    for d in bin sbin lib lib64; do ln -sfn "usr/$d" "$dir/rootfs/$d"; done
    printf 'root:x:0:0:root:/root:/usr/sbin/nologin\nuser:x:1000:1000:user:/workspace:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n' >"$dir/rootfs/etc/passwd"
    printf 'root:x:0:\ntty:x:5:\nuser:x:1000:\nnogroup:x:65534:\n' >"$dir/rootfs/etc/group"
    printf '127.0.0.1\tlocalhost\n::1\tlocalhost\n127.0.1.1\tbare\n' >"$dir/rootfs/etc/hosts"
    printf 'bare' >"$dir/rootfs/etc/hostname"
    printf 'nameserver 127.0.0.53\n' >"$dir/rootfs/etc/resolv.conf"
    printf 'passwd: files\ngroup: files\nhosts: files dns\n' >"$dir/rootfs/etc/nsswitch.conf"
    [[ -r /etc/ld.so.cache ]] && cp /etc/ld.so.cache "$dir/rootfs/etc/"
    [[ -d /etc/alternatives ]] && cp -a /etc/alternatives "$dir/rootfs/etc/"
    [[ -r /etc/ssl/certs/ca-certificates.crt ]] && cp /etc/ssl/certs/ca-certificates.crt "$dir/rootfs/etc/ssl/certs/"
    for d in $(jq -r '.mounts[] | select(.type == "bind" and .destination != "/usr") | .destination' "$src"); do
        mkdir -p "$dir/mnt$d"
        chown "$((host + 1000)):$((host + 1000))" "$dir/mnt$d"
        chmod 755 "$dir/mnt$d"
    done
    [[ -d $dir/mnt/tmp ]] && chmod 1777 "$dir/mnt/tmp"
    jq --arg dir "$dir" --argjson p "$process" '.root.path = ($dir + "/rootfs") | .hostname = "bare"
        | .mounts |= map(if .type != "bind" then .
                         elif .destination == "/usr" then .source = "/usr"
                         else .source = ($dir + "/mnt" + .destination) end)
        | .process = (.process + $p)
        | .linux.namespaces |= map(del(.path))' "$src" >"$dir/config.json" || bench_die "cannot write $dir/config.json"
}

# What runs a bare runsc of bundle config $1 in a network namespace of its own: "unshare -n"
# when the spec asks for none (runsc would run in this one: the driver's --network=host ran
# in its holder's), else nothing (runsc makes the spec's).
bench_bare_netwrap() {
    jq -e '.linux.namespaces | any(.type == "network")' "$1" >/dev/null || echo "unshare -n"
}

# Unmounts whatever is mounted under directory $1 (runsc leaves a null-netns bind mount in
# its --root), deepest first, so that the directory can be removed.
bench_umount_under() {
    [[ -n $1 ]] || return 0
    awk -v p="$1/" 'index($2, p) == 1 { print $2 }' /proc/self/mounts | sort -r |
        while read -r m; do umount -l "$m" 2>/dev/null; done
    return 0
}
