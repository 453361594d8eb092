#!/usr/bin/env bash
# Secrets benchmark: HTTPS requests from a sandbox whose placeholder the egress
# proxy swaps for the secret's value (TLS interception, src/egress/intercept.c),
# against the same client sending the value straight to the same upstream.
# Starts its own runtimed (root, temp state dir, loopback port, temp socket),
# an HTTPS upstream (a small C server with OpenSSL, compiled from the end of
# this file) in a network namespace behind a veth pair, a test CA and the
# upstream's certificate (openssl CLI), and a fake DNS server on 127.0.0.1 that
# answers every *.bench.test and *.plain.test with the upstream. Measures in one
# run, three ways interleaved: intercepted (sandbox -> api.bench.test, which the
# secret names), direct (host -> upstream), spliced (sandbox -> api.plain.test,
# which no secret names: the proxy passes TLS through undecrypted):
#   1. keep-alive: sequential requests on one connection (median, p99);
#   2. a new connection per request to the same name (median, p99, phases);
#   3. a new connection per request to a new name each time (through the
#      interception, a new leaf certificate per name);
#   4. requests per second, 16 keep-alive connections at once;
#   5. downloads of a large JSON answer on a keep-alive connection, intercepted
#      with the value swapped in (its answers are scanned for the value:
#      reflection redaction) and without (nothing to look for), spliced, direct;
# checks that the upstream received the value, never the placeholder, from
# intercepted requests; then profiles the daemon during more new-name runs
# (perf record, strace -c). Figures: docs/benchmarks.md, "Secrets (TLS interception)".
#
# Usage: sudo bench/secrets.sh [--smoke]   (after `make`; needs cc, libssl-dev, node,
#                                      openssl, ip, jq; perf and strace optional)
#        --smoke (or BENCH_SMOKE=1): the short mode of `make bench-smoke` (every case and
#        the profiles, tiny counts, figures not meaningful; fails when a case fails or
#        measures nothing).
# Knobs (environment): ROUNDS=2 KA_N=1000 NEW_N=300 NAMES_N=300 CONC=16 RPS_S=5
# DL_N=20 DL_SIZE=4194304 (downloads per side per round, and their size in bytes)
# CPUS=2 (the sandbox's CPU limit) BUDGET=280 (seconds, measuring) IDLE_WAIT=900
# (seconds to wait for a quiet machine: no fuzzers, load below 2; 0 = don't)
# PROFILE=1 (0 = skip the profiling pass) BUILD=DIR (default build/)
# BENCH_DATA=DIR (keep raw data and profiles). --smoke: ROUNDS=1 KA_N=20 NEW_N=10
# NAMES_N=10 CONC=4 RPS_S=1 BUDGET=60.
# shellcheck disable=SC2317 # the trap handlers and the sources after exit look unreachable
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$HERE/lib.sh"

bench_args "" "$@"
ROUNDS=${ROUNDS:-$(bench_pick 1 2)}
KA_N=${KA_N:-$(bench_pick 20 1000)}
NEW_N=${NEW_N:-$(bench_pick 10 300)}
NAMES_N=${NAMES_N:-$(bench_pick 10 300)}
CONC=${CONC:-$(bench_pick 4 16)}
RPS_S=${RPS_S:-$(bench_pick 1 5)}
DL_N=${DL_N:-$(bench_pick 2 20)}
DL_SIZE=${DL_SIZE:-4194304}
CPUS=${CPUS:-2}
BUDGET=${BUDGET:-$(bench_pick 60 280)}
IDLE_WAIT=${IDLE_WAIT:-900}
PROFILE=${PROFILE:-1}
TARGET_KA_MS=1
TARGET_NAME_MS=3
MAX_LOAD=2

BUILD=${BUILD:-$ROOT/build}
RUNTIMED=$BUILD/runtimed
RT=$BUILD/runtime
NS=rts-up     # the upstream's network namespace
VH=rts-h      # veth, host end
VU=rts-u      # veth, upstream end
NET=198.51.100
UP_IP=$NET.30 # the upstream
NAME=api.bench.test   # a secret goes here: intercepted
PLAIN=api.plain.test  # no secret names it: spliced undecrypted
SECRET=BENCH_KEY

[[ $(id -u) == 0 ]] || bench_die "run as root (runtimed and the namespace need it): sudo $0"
need_build
need_tools "gcc libssl-dev iproute2 jq nodejs openssl" cc ip jq node openssl
NODE=$(command -v node)

bench_init
UPID=
DPID=
PERF_PID=

# --- cleanup ---------------------------------------------------------------------

# Before and after the daemon (bench_cleanup): the profiler; the upstream and the fake DNS server.
cleanup_first() { [[ -z $PERF_PID ]] || stop_pid "$PERF_PID"; }
cleanup_last() {
    local p
    for p in "$UPID" "$DPID"; do [[ -z $p ]] || stop_pid "$p"; done
}

# --- wait for a quiet machine --------------------------------------------------------

# Fuzzers of other work on this machine take every CPU; figures taken beside
# them say little. Wait for them (bounded), then measure anyway, and say so.
wait_for_quiet

# --- the upstream: a namespace behind a veth pair ------------------------------------

has_addr() { # some interface here (or in namespace $2) has IPv4 address $1
    ip ${2:+-n "$2"} -4 -o addr show 2>/dev/null | grep -q " inet $1/"
}
used_anywhere() { # $1 is an address of this host or of any named namespace
    local n
    has_addr "$1" && return 0
    for n in $(ip netns list | awk '{ print $1 }'); do has_addr "$1" "$n" && return 0; done
    return 1
}

need_no_veth
used_anywhere "$UP_IP" && bench_die "$UP_IP is already in use here (ip -4 addr, ip netns); free it first"
# The whole /24 when nobody uses it; else one free address of it as a /32 and a
# /32 route to the upstream (more specific than another interface's /24).
if [[ -z $(ip -4 -o addr show | awk -v p=" $NET." 'index($0, " inet" p)') && -z $(ip -4 route show "$NET.0/24") ]]; then
    HOST_IP=$NET.254
    HOST_PLEN=24
else
    HOST_IP=
    for i in $(seq 253 -1 200); do
        used_anywhere "$NET.$i" || {
            HOST_IP=$NET.$i
            break
        }
    done
    [[ -n $HOST_IP ]] || bench_die "no free address in $NET.200-253 for the host end of the veth"
    HOST_PLEN=32
fi

bench_workdir -secrets # (the server reads the CA file there too)

# The sources at the end of this file.
bench_extract SECB_C >"$WORK/secb-up.c"
bench_extract SECB_JS >"$WORK/secb.js"
bench_extract SECB_DNS >"$WORK/secb-dns.js"
cc -O2 -Wall -pthread -o "$WORK/secb-up" "$WORK/secb-up.c" -lssl -lcrypto 2>"$WORK/cc.log" ||
    bench_die "compiling the upstream server failed (libssl-dev?): $(head -n 5 "$WORK/cc.log")"
chmod 644 "$WORK/secb.js"

# Test CA and the upstream's certificate (P-256, like the proxy's leaves).
openssl_quiet() { openssl "$@" >>"$WORK/openssl.log" 2>&1 || bench_die "openssl $1 failed: $(tail -n 3 "$WORK/openssl.log")"; }
openssl_quiet req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
    -keyout "$WORK/ca.key" -out "$WORK/ca.crt" -subj "/CN=runtime bench secrets test CA" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
openssl_quiet req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
    -keyout "$WORK/up.key" -out "$WORK/up.csr" -subj "/CN=$NAME"
printf '%s\n' "subjectAltName=DNS:$NAME,DNS:*.bench.test,DNS:$PLAIN,DNS:*.plain.test" "basicConstraints=CA:FALSE" \
    "keyUsage=critical,digitalSignature" "extendedKeyUsage=serverAuth" >"$WORK/up.ext"
openssl_quiet x509 -req -in "$WORK/up.csr" -CA "$WORK/ca.crt" -CAkey "$WORK/ca.key" \
    -set_serial "0x$(openssl rand -hex 8)" -days 2 -extfile "$WORK/up.ext" -out "$WORK/up.crt"
chmod 644 "$WORK/ca.crt"

# The secret's value: as long as a placeholder (RUNTIME_PH_ + 32 hex), so that
# proxied and direct requests carry the same bytes.
VALUE="bk_$(openssl rand -hex 20)"
printf '%s' "$VALUE" >"$WORK/value"

make_veth "$HOST_IP/$HOST_PLEN" "$UP_IP"
((HOST_PLEN == 32)) && ip route add "$UP_IP/32" dev "$VH" src "$HOST_IP"

ip netns exec "$NS" "$WORK/secb-up" 443 "$WORK/up.crt" "$WORK/up.key" "$WORK/value" \
    >"$WORK/upstream.log" 2>&1 &
UPID=$!
"$NODE" "$WORK/secb-dns.js" "$UP_IP" >"$WORK/dns.log" 2>&1 &
DPID=$!
deadline=$((SECONDS + 10))
while { ! grep -q ready "$WORK/upstream.log" || ! grep -q ready "$WORK/dns.log"; } &&
    alive "$UPID" && alive "$DPID" && ((SECONDS < deadline)); do sleep 0.02; done
grep -q ready "$WORK/upstream.log" || bench_die "the upstream did not start: $(head -n 3 "$WORK/upstream.log")"
grep -q ready "$WORK/dns.log" || bench_die "the fake DNS server did not start: $(head -n 3 "$WORK/dns.log")"
DNS_PORT=$(awk '/ready/ { print $2 }' "$WORK/dns.log")

# The client: on the host it dials the upstream's address itself (no DNS) and
# trusts the test CA; in the sandbox it resolves through the stub and trusts
# runtime's CA (NODE_EXTRA_CA_CERTS).
direct() { BENCH_KEY=$VALUE BENCH_CONNECT=$UP_IP BENCH_CA=$WORK/ca.crt "$NODE" "$WORK/secb.js" "$@"; }
stats() { direct stats "$NAME" | grep -v '^#'; } # real=N placeholder=N other=N conns=N
# The veth needs a moment after "up" (DAD, carrier): poll until a request works.
deadline=$((SECONDS + 10))
until stats >/dev/null 2>&1 || ((SECONDS >= deadline)); do sleep 0.1; done
stats >/dev/null || bench_die "cannot reach the upstream https://$UP_IP directly: $(direct stats "$NAME" 2>&1 | tail -n 2)"

# --- the daemon, the secret and the sandbox ----------------------------------------------

start_daemon --upstream-ca "$WORK/ca.crt" --nameserver "127.0.0.1:$DNS_PORT" \
    --resolve "$NAME:443:$UP_IP" --resolve "$PLAIN:443:$UP_IP"
start_watchdog

"$RT" secret set "$SECRET" --host "$NAME" --host '*.bench.test' <"$WORK/value" >/dev/null ||
    bench_die "secret set failed"
SB=$("$RT" sandbox create --cpus "$CPUS" --allow "$NAME" --allow '*.bench.test' \
    --allow "$PLAIN" --allow '*.plain.test') ||
    bench_die "sandbox create failed"
"$RT" sandbox cp "$WORK/secb.js" "$SB:/workspace/secb.js" || bench_die "sandbox cp failed"
"$RT" sandbox cp "$WORK/ca.crt" "$SB:/workspace/ca.crt" || bench_die "sandbox cp failed"
proxied() { "$RT" sandbox exec "$SB" --timeout 120 -- /usr/bin/node /workspace/secb.js "$@"; }
# Spliced: to plain.test names, which no secret names; the sandbox trusts the test CA for them.
spliced() { "$RT" sandbox exec "$SB" --timeout 120 --env BENCH_CA=/workspace/ca.crt -- /usr/bin/node /workspace/secb.js "$@"; }
host_of() { if [[ $1 == spliced ]]; then echo "$PLAIN"; else echo "$NAME"; fi; }
# shellcheck disable=SC2016 # expanded in the sandbox
PH=$("$RT" sandbox exec "$SB" -- /bin/sh -c 'printf %s "$BENCH_KEY"') || bench_die "exec in the sandbox failed"
[[ $PH == RUNTIME_PH_* ]] || bench_die "the sandbox's \$$SECRET is '$PH', not a placeholder"
proxied ka "$NAME" 1 0 >/dev/null || bench_die "the sandbox cannot reach https://$NAME through the proxy"
spliced ka "$PLAIN" 1 0 >/dev/null || bench_die "the sandbox cannot reach https://$PLAIN through the proxy"

MACHINE="$(bench_machine), CPU idle $(bench_cpu_idle)% over 1 s"
bench_log "$MACHINE; $QUIET"
bench_log "runtimed keeper $KPID, server $SPID; upstream https://$UP_IP in netns $NS (pid $UPID); fake DNS 127.0.0.1:$DNS_PORT"

# --- measuring -----------------------------------------------------------------------------

HZ=$(getconf CLK_TCK)
daemon_cpu() { echo $(($(pid_cpu "$SPID") + $(pid_cpu "$KPID"))); }
stat_field() { tr ' ' '\n' <<<"$1" | awk -F= -v k="$2" '$1 == k { print $2 }'; }
sent_of() { awk -F= '/^# sent=/ { print $2 }' "$1"; }

declare -A SENT REAL PHS CPU_TICKS ERRS
# Runs one client invocation on side $2 for case $1 and appends its samples to
# $WORK/$1-$2.txt, and to $WORK/$1-$2.cpu.txt the CPUs busy meanwhile: the
# machine, the daemon (server+keeper), the upstream. Sides: direct (host ->
# upstream), proxied (sandbox -> proxy, intercepted: the name has a secret),
# spliced (sandbox -> proxy -> upstream undecrypted: no secret names it). Runs
# through the proxy are bracketed by the upstream's counters (what it received).
run_case() {
    local case=$1 side=$2 out=$WORK/$1-$2.run s0 s1 c0 c1 b0 b1 u0 u1 t0 t1 k=$1-$2
    shift 2
    [[ $side == direct ]] || s0=$(stats) || bench_die "the upstream's counters: no answer"
    b0=$(cpu_busy) c0=$(daemon_cpu) u0=$(pid_cpu "$UPID")
    bench_now_us t0
    "$side" "$@" >"$out" || bench_die "$side $case failed: $(tail -n 3 "$out")"
    bench_now_us t1
    b1=$(cpu_busy) c1=$(daemon_cpu) u1=$(pid_cpu "$UPID")
    cpu_shares $((t1 - t0)) $((b1 - b0)) $((c1 - c0)) $((u1 - u0)) >>"$WORK/$k.cpu.txt"
    if [[ $side != direct ]]; then
        s1=$(stats) || bench_die "the upstream's counters: no answer"
        SENT[$k]=$((${SENT[$k]:-0} + $(sent_of "$out")))
        REAL[$k]=$((${REAL[$k]:-0} + $(stat_field "$s1" real) - $(stat_field "$s0" real)))
        PHS[$k]=$((${PHS[$k]:-0} + $(stat_field "$s1" placeholder) - $(stat_field "$s0" placeholder)))
        CPU_TICKS[$k]=$((${CPU_TICKS[$k]:-0} + c1 - c0))
    fi
    ERRS[$k]=$((${ERRS[$k]:-0} + $(awk -F'[=:]' '/^# errors=/ { print $2 }' "$out" | grep . || echo 0)))
    grep -h '^# errors=' "$out" | sed "s/^# /[$k] /" >>"$WORK/errors.txt" || true
    grep -v '^#' "$out" >>"$WORK/$k.txt" || true # none when every request failed
}

SIDES="direct proxied spliced"
for ((r = 1; r <= ROUNDS; r++)); do
    bench_log "round $r/$ROUNDS: keep-alive ($KA_N), new connections ($NEW_N), new names ($NAMES_N), $CONC at once (${RPS_S} s)"
    for side in $SIDES; do run_case ka "$side" ka "$(host_of "$side")" "$KA_N" 100; done
    for side in $SIDES; do run_case new "$side" new "$(host_of "$side")" "$NEW_N" 20; done
    # New names in every run, r<round><side>n<i>.<domain>: the proxy has seen none.
    for side in $SIDES; do
        run_case names "$side" names "r$r${side:0:1}n%.$(host_of "$side" | cut -d. -f2-)" "$NAMES_N" 10
    done
    for side in $SIDES; do run_case rps "$side" rps "$(host_of "$side")" "$CONC" "$RPS_S"; done
    # Downloads: the value swapped in (answers scanned for it), none swapped (nothing to scan for).
    run_case dlv proxied dl "$NAME" "$DL_N" "$DL_SIZE" value
    run_case dl0 proxied dl "$NAME" "$DL_N" "$DL_SIZE" none
    run_case dls spliced dl "$PLAIN" "$DL_N" "$DL_SIZE" none
    run_case dld direct dl "$NAME" "$DL_N" "$DL_SIZE" value
done
MEASURED=$((SECONDS - START))

# --- profile: one more new-name run under perf, then under strace -c ---------------------

PERF_TOP="(not run)"
STRACE_TOP="(not run)"
if ((PROFILE)); then
    if command -v perf >/dev/null; then
        bench_log "profile: $NAMES_N new names with perf record (DWARF call graphs) on the server and the keeper"
        perf record -F 999 --call-graph dwarf,16384 --no-inherit -p "$SPID,$KPID" -o "$WORK/perf.data" >"$WORK/perf-record.log" 2>&1 &
        PERF_PID=$!
        deadline=$((SECONDS + 10))
        until grep -q "Recording\|recording" "$WORK/perf-record.log" 2>/dev/null || [[ -s $WORK/perf.data ]] ||
            ! alive "$PERF_PID" || ((SECONDS >= deadline)); do sleep 0.05; done
        proxied names "pn%.bench.test" "$NAMES_N" 0 >"$WORK/names-perf.run" || bench_log "the profiled run failed"
        kill -INT "$PERF_PID" 2>/dev/null
        wait "$PERF_PID" 2>/dev/null || true
        PERF_PID=
        perf report -i "$WORK/perf.data" --stdio --no-children -n --sort pid,dso -g none --percent-limit 2 \
            2>/dev/null | grep -v '^#' | sed '/^$/d' >"$WORK/perf-dso.txt" || true
        perf report -i "$WORK/perf.data" --stdio --children --sort sym -g none --percent-limit 3 \
            2>/dev/null | grep -v '^#' | sed '/^$/d' >"$WORK/perf-sym.txt" || true
        PERF_TOP="median $(bench_fmt "$(awk '!/^#/ { print $1 }' "$WORK/names-perf.run" | bench_median)" 0) us under perf"
    fi
    if command -v strace >/dev/null; then
        bench_log "profile: $NAMES_N new names with strace -c -w (wall time in syscalls) on the server"
        strace -c -w -f -p "$SPID" -o "$WORK/strace.txt" >/dev/null 2>&1 &
        PERF_PID=$!
        deadline=$((SECONDS + 10))
        until grep -q "TracerPid:[[:space:]]*[1-9]" "/proc/$SPID/status" 2>/dev/null || ((SECONDS >= deadline)); do sleep 0.05; done
        proxied names "sn%.bench.test" "$NAMES_N" 0 >"$WORK/names-strace.run" || bench_log "the traced run failed"
        stop_pid "$PERF_PID"
        PERF_PID=
        STRACE_TOP="median $(bench_fmt "$(awk '!/^#/ { print $1 }' "$WORK/names-strace.run" | bench_median)" 0) us under strace"
    fi
fi

# --- summary ---------------------------------------------------------------------------------

col() { { grep -v '^#' "$WORK/$1.txt" || true; } | cut -d' ' -f"$2"; }
med() { bench_fmt "$(col "$1" "${2:-1}" | bench_median)" 0; }
p99() { col "$1" "${2:-1}" | sort -g | awk '{ a[NR] = $1 } END { if (NR) printf "%.0f\n", a[int(0.99 * (NR - 1) + 1.5)]; else print "n/a" }'; }
count() { col "$1" 1 | wc -l; }
added_ms() { awk -v p="$1" -v d="$2" 'BEGIN { printf "%.2f\n", (p - d) / 1000 }'; }
rps() { grep -ho 'rps=[0-9.]*' "$WORK/rps-$1.txt" | cut -d= -f2 | awk '{ s += $1; n++ } END { printf "%.0f\n", n ? s / n : 0 }'; }
cpu_us() { awk -v t="${CPU_TICKS[$1]:-0}" -v hz="$HZ" -v n="${SENT[$1]:-0}" 'BEGIN { printf "%.0f\n", n ? t * 1e6 / hz / n : 0 }'; }
row() { printf '%-42s %10s %10s %10s %11s  %s\n' "$@"; }

RPS_D=$(rps direct)
RPS_P=$(rps proxied)
RPS_S=$(rps spliced)
SUMS() { # total sent, value, placeholder over the cases of side $1
    local c s=0 v=0 p=0
    for c in ka new names rps; do
        s=$((s + ${SENT[$c-$1]:-0}))
        v=$((v + ${REAL[$c-$1]:-0}))
        p=$((p + ${PHS[$c-$1]:-0}))
    done
    echo "$s $v $p"
}
read -r P_SENT P_REAL P_PH <<<"$(SUMS proxied)"
read -r S_SENT S_REAL S_PH <<<"$(SUMS spliced)"
# Intercepted: every request arrived with the value. Spliced: the placeholder
# went through untouched (no secret names that host), which is the point.
SWAP_OK=$([[ $P_PH == 0 && $P_REAL == "$P_SENT" && $S_REAL == 0 && $S_PH == "$S_SENT" ]] && echo ok || echo FAILED)
FAILS() { # failed requests over the cases of side $1
    local c f=0
    for c in ka new names rps; do f=$((f + ${ERRS[$c-$1]:-0})); done
    echo "$f"
}
F_P=$(FAILS proxied)
F_D=$(FAILS direct)
F_S=$(FAILS spliced)
EVENTS=$("$RT" sandbox events "$SB" --json 2>/dev/null |
    jq -s -r '[.[] | .kind] | group_by(.) | map("\(.[0])=\(length)") | join(" ")' 2>/dev/null || echo "?")

{
    echo
    echo "Secrets (TLS interception), $(date -u +%Y-%m-%dT%H:%MZ), source tree at $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?'), build $BUILD"
    echo "$MACHINE; $QUIET"
    echo "upstream: C + OpenSSL $(openssl version | awk '{ print $2 }'), thread per connection, https://$UP_IP:443 in netns $NS (veth $VH $HOST_IP/$HOST_PLEN)"
    echo "client: node $("$NODE" --version) (secb.js); direct: on the host, dials $UP_IP (no DNS);"
    echo "intercepted: in a sandbox (--cpus $CPUS) to $NAME (secret $SECRET, placeholder swapped);"
    echo "spliced: same sandbox to $PLAIN (no secret: proxied undecrypted), for comparison"
    echo "$ROUNDS rounds, the three interleaved; latencies in us, pooled over the rounds; added = intercepted - direct"
    echo
    row "case" "intercept" "direct" "spliced" "added (ms)" "target"
    for c in ka new names; do
        case $c in
        ka) label="keep-alive, one connection (n=$(count ka-proxied))" ;;
        new) label="new connection, same name (n=$(count new-proxied))" ;;
        names) label="new connection, new name (n=$(count names-proxied))" ;;
        esac
        a=$(added_ms "$(med "$c-proxied")" "$(med "$c-direct")")
        t=""
        [[ $c == ka ]] && t="<= $TARGET_KA_MS ms $(bench_verdict "$a" "$TARGET_KA_MS")"
        [[ $c == names ]] && t="<= $TARGET_NAME_MS ms $(bench_verdict "$a" "$TARGET_NAME_MS")"
        row "$label, median" "$(med "$c-proxied")" "$(med "$c-direct")" "$(med "$c-spliced")" "$a" "$t"
        row "  p99" "$(p99 "$c-proxied")" "$(p99 "$c-direct")" "$(p99 "$c-spliced")" \
            "$(added_ms "$(p99 "$c-proxied")" "$(p99 "$c-direct")")" ""
        if [[ $c != ka ]]; then
            row "  phases (medians): DNS lookup" "$(med "$c-proxied" 2)" "$(med "$c-direct" 2)" "$(med "$c-spliced" 2)" "" "direct: none"
            row "    TCP connect" "$(med "$c-proxied" 3)" "$(med "$c-direct" 3)" "$(med "$c-spliced" 3)" "" "via proxy: local"
            row "    TLS handshake" "$(med "$c-proxied" 4)" "$(med "$c-direct" 4)" "$(med "$c-spliced" 4)" "" ""
            row "    request -> response head" "$(med "$c-proxied" 5)" "$(med "$c-direct" 5)" "$(med "$c-spliced" 5)" "" ""
        fi
        row "  daemon CPU (server+keeper), us/request" "$(cpu_us "$c-proxied")" "" "$(cpu_us "$c-spliced")" "" ""
    done
    row "requests/s, $CONC keep-alive connections" "$RPS_P" "$RPS_D" "$RPS_S" "" "intercept/direct $(bench_ratio "$RPS_P" "$RPS_D")"
    row "  daemon CPU (server+keeper), us/request" "$(cpu_us rps-proxied)" "" "$(cpu_us rps-spliced)" "" ""
    row "  CPUs busy: machine/daemon/upstream" "" "" "" "" "intercept $(cpus rps-proxied), direct $(cpus rps-direct), spliced $(cpus rps-spliced)"
    echo
    MIB=$(awk -v b="$DL_SIZE" 'BEGIN { printf "%.1f", b / 1048576 }')
    echo "downloads of $MIB MiB of JSON, keep-alive (n=$(count dlv-proxied) each), us:"
    row "case" "median" "p99" "MB/s" "daemon us/MiB" ""
    for k in dlv-proxied dl0-proxied dls-spliced dld-direct; do
        case $k in
        dlv-proxied) label="intercepted, value swapped: scanned" ;;
        dl0-proxied) label="intercepted, nothing swapped: not scanned" ;;
        dls-spliced) label="spliced" ;;
        dld-direct) label="direct" ;;
        esac
        mbs=$(awk -v b="$DL_SIZE" -v us="$(med "$k")" 'BEGIN { printf "%.0f", us ? b / us : 0 }')
        cpu=$([[ $k == dld-direct ]] || awk -v c="$(cpu_us "$k")" -v b="$DL_SIZE" 'BEGIN { printf "%.0f", c * 1048576 / b }')
        row "$label" "$(med "$k")" "$(p99 "$k")" "$mbs" "$cpu" ""
    done
    echo "  scanned / not scanned: median $(bench_ratio "$(med dlv-proxied)" "$(med dl0-proxied)"), daemon CPU $(bench_ratio "$(cpu_us dlv-proxied)" "$(cpu_us dl0-proxied)")"
    echo
    echo "upstream received: intercepted $P_SENT requests, value in $P_REAL, placeholder in $P_PH;"
    echo "  spliced $S_SENT requests, value in $S_REAL, placeholder in $S_PH: $SWAP_OK"
    echo "failed requests (not in the figures): intercepted $F_P, direct $F_D, spliced $F_S"
    [[ -s $WORK/errors.txt ]] && sed 's/^/  /' "$WORK/errors.txt"
    echo "sandbox events (the last 10000 are kept): $EVENTS"
    echo "took $MEASURED s of measuring (+ $((SECONDS - START - MEASURED)) s profiling)"
    if ((PROFILE)); then
        echo
        echo "profile of $NAMES_N more new names, intercepted: perf ($PERF_TOP), by process and object:"
        head -n 14 "$WORK/perf-dso.txt" 2>/dev/null
        echo "top symbols:"
        head -n 25 "$WORK/perf-sym.txt" 2>/dev/null
        echo "server syscalls, wall time ($STRACE_TOP):"
        head -n 14 "$WORK/strace.txt" 2>/dev/null
    fi
}
[[ $SWAP_OK == ok && $F_P == 0 && $F_D == 0 && $F_S == 0 ]] || exit 1
if ((SMOKE)); then
    figs=("rps_d=$RPS_D" "rps_p=$RPS_P" "rps_s=$RPS_S")
    for c in ka new names; do
        for side in $SIDES; do figs+=("$c-$side=$(med "$c-$side")"); done
    done
    ((PROFILE)) && command -v perf >/dev/null && figs+=("perf_lines=$(grep -c . "$WORK/perf-sym.txt")")
    ((PROFILE)) && command -v strace >/dev/null && figs+=("strace_lines=$(grep -c . "$WORK/strace.txt")")
    bench_smoke_figures "${figs[@]}"
fi
exit 0

# The upstream, the client and the fake DNS server, written out by the script.
: <<'SECB_C'
/* secb-up: the secrets benchmark's HTTPS upstream (bench/secrets.sh compiles it).
 *   secb-up PORT CERT KEY VALUEFILE
 * One thread per connection, blocking OpenSSL; HTTP/1.1 keep-alive; every GET
 * gets "ok\n" (GET /big?size=N: N bytes of JSON). It counts what each request's
 * Authorization header carried:
 * "Bearer <value>" (real), a RUNTIME_PH_ placeholder, or anything else; GET
 * /__stats answers the counts (and is not counted). */
#define _GNU_SOURCE
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

static SSL_CTX *ctx;
static char *big; /* GET /big?size=N: the first N bytes of this, N <= BIG_MAX */
#define BIG_MAX (64 << 20)
static char value[256];
static size_t value_len;
static atomic_ulong n_real, n_ph, n_other, n_conns;

static void die(const char *what)
{
    fprintf(stderr, "secb-up: %s\n", what);
    ERR_print_errors_fp(stderr);
    exit(1);
}

static void count(const char *head)
{
    const char *p = strcasestr(head, "\r\nauthorization:");
    if (!p) {
        n_other++;
        return;
    }
    p += 16;
    while (*p == ' ' || *p == '\t') p++;
    size_t n = strcspn(p, "\r");
    if (n == 7 + value_len && strncasecmp(p, "Bearer ", 7) == 0 && memcmp(p + 7, value, value_len) == 0)
        n_real++;
    else if (memmem(p, n, "RUNTIME_PH_", 11))
        n_ph++;
    else
        n_other++;
}

static int answer(SSL *ssl, const char *body, int close_after)
{
    char out[512];
    int n = snprintf(out, sizeof out,
                     "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n%s\r\n%s",
                     strlen(body), close_after ? "Connection: close\r\n" : "", body);
    return SSL_write(ssl, out, n) == n ? 0 : -1;
}

/* A JSON array of items like an API's listing: text, numbers, escaped URLs and base64. */
static void make_big(void)
{
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    big = malloc(BIG_MAX + 512);
    if (!big) die("out of memory");
    size_t n = 0;
    uint32_t x = 2463534242u;
    for (unsigned i = 0; n < BIG_MAX; i++) {
        char blob[65];
        for (int k = 0; k < 64; k++) {
            x ^= x << 13, x ^= x >> 17, x ^= x << 5;
            blob[k] = b64[x & 63];
        }
        blob[64] = '\0';
        n += (size_t)sprintf(big + n, "%s{\"id\":%u,\"name\":\"item number %u of the listing\","
                             "\"url\":\"https:\\/\\/api.bench.test\\/v1\\/items\\/%u\",\"blob\":\"%s\"}",
                             i ? "," : "[", i, i, i, blob);
    }
}

static int answer_big(SSL *ssl, size_t size)
{
    char head[128];
    if (size > BIG_MAX) size = BIG_MAX;
    int n = snprintf(head, sizeof head, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\n\r\n", size);
    if (SSL_write(ssl, head, n) != n) return -1;
    for (size_t off = 0; off < size; off += 16384) {
        int k = (int)(size - off < 16384 ? size - off : 16384);
        if (SSL_write(ssl, big + off, k) != k) return -1;
    }
    return 0;
}

static void *serve_conn(void *arg)
{
    int fd = (int)(intptr_t)arg;
    SSL *ssl = SSL_new(ctx);
    char buf[16384];
    size_t have = 0;
    if (!ssl || SSL_set_fd(ssl, fd) != 1 || SSL_accept(ssl) != 1) goto out;
    n_conns++;
    for (;;) {
        char *end;
        while (!(end = memmem(buf, have, "\r\n\r\n", 4))) {
            if (have == sizeof buf) goto out;
            int r = SSL_read(ssl, buf + have, (int)(sizeof buf - have));
            if (r <= 0) goto out;
            have += (size_t)r;
        }
        size_t hlen = (size_t)(end + 4 - buf);
        end[2] = '\0'; /* the head, its last line's CRLF kept, as a string */
        int close_after = strcasestr(buf, "\r\nconnection: close") != NULL;
        int r;
        if (strncmp(buf, "GET /__stats ", 13) == 0) {
            char body[200];
            snprintf(body, sizeof body, "real=%lu placeholder=%lu other=%lu conns=%lu\n",
                     (unsigned long)n_real, (unsigned long)n_ph, (unsigned long)n_other,
                     (unsigned long)n_conns);
            r = answer(ssl, body, close_after);
        } else if (strncmp(buf, "GET /big?size=", 14) == 0) {
            r = answer_big(ssl, strtoull(buf + 14, NULL, 10));
        } else {
            count(buf);
            r = answer(ssl, "ok\n", close_after);
        }
        if (r < 0 || close_after) break;
        memmove(buf, buf + hlen, have - hlen); /* GETs: no bodies */
        have -= hlen;
    }
    SSL_shutdown(ssl);
out:
    SSL_free(ssl);
    close(fd);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 5) die("usage: secb-up PORT CERT KEY VALUEFILE");
    signal(SIGPIPE, SIG_IGN);
    FILE *f = fopen(argv[4], "r");
    if (!f) die("cannot open the value file");
    value_len = fread(value, 1, sizeof value - 1, f);
    fclose(f);
    make_big();
    ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx) die("SSL_CTX_new");
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    if (SSL_CTX_use_certificate_chain_file(ctx, argv[2]) != 1) die("cannot load the certificate");
    if (SSL_CTX_use_PrivateKey_file(ctx, argv[3], SSL_FILETYPE_PEM) != 1) die("cannot load the key");
    int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[1]))};
    if (bind(l, (struct sockaddr *)&a, sizeof a) < 0 || listen(l, 1024) < 0) die("bind/listen");
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    printf("ready\n");
    fflush(stdout);
    for (;;) {
        int fd = accept(l, NULL, NULL);
        if (fd < 0) continue;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        struct timeval tv = {30, 0}; /* no connection outlives a stuck client for long */
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        pthread_t t;
        if (pthread_create(&t, &attr, serve_conn, (void *)(intptr_t)fd) != 0) close(fd);
    }
}
SECB_C

: <<'SECB_JS'
'use strict';
// secb.js: the HTTPS client of bench/secrets.sh, in the sandbox and on the host.
//   node secb.js ka HOST N WARMUP       N requests one after another on one keep-alive connection
//   node secb.js new HOST N WARMUP      N requests, each on a new connection (a fresh agent)
//   node secb.js names PATTERN N WARMUP N new connections, the i-th to PATTERN with % replaced by i
//   node secb.js rps HOST CONC SECONDS  CONC keep-alive connections, requests back to back
//   node secb.js stats HOST             the upstream's counters
//   node secb.js dl HOST N SIZE AUTH    N downloads of SIZE bytes on one keep-alive connection,
//                                       with the Authorization header (AUTH value) or without (none)
// Environment: BENCH_KEY (sent as "Authorization: Bearer $BENCH_KEY"), BENCH_CONNECT=IP
// (dial IP, no DNS; SNI and Host stay the name), BENCH_CA=FILE (trust this CA; else node's
// roots and NODE_EXTRA_CA_CERTS). Prints per measured request "total lookup connect tls
// response" in us (the last four: phases of a new connection), then "# sent=K" and,
// when some failed, "# errors=K: the first error".
const https = require('https');
const fs = require('fs');

const [mode, target, arg1, arg2] = process.argv.slice(2);
const ip = process.env.BENCH_CONNECT || '';
const ca = process.env.BENCH_CA ? [fs.readFileSync(process.env.BENCH_CA)] : undefined;
const auth = 'Bearer ' + (process.env.BENCH_KEY || '');
// Asynchronous like a real lookup, so that the socket's 'lookup' event is seen.
const lookup = ip
    ? (host, opts, cb) => setImmediate(() => (opts && opts.all ? cb(null, [{ address: ip, family: 4 }]) : cb(null, ip, 4)))
    : undefined;
const now = () => process.hrtime.bigint();
const us = (a, b) => (a && b ? Number(b - a) / 1000 : 0);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
let sent = 0;

function one(agent, host, path, noAuth) {
    return new Promise((resolve, reject) => {
        const t = { start: now(), lookup: 0n, connect: 0n, secure: 0n, response: 0n };
        const opts = { host, port: 443, path: path || '/bench', agent, ca, lookup, servername: host,
                       headers: noAuth ? {} : { Authorization: auth } };
        const req = https.request(opts, (res) => {
            t.response = now();
            let body = '', got = 0;
            res.on('data', (d) => {
                got += d.length;
                if (body.length < 4096) body += d.toString('latin1');
            });
            res.on('end', () => {
                const end = now();
                if (res.statusCode !== 200)
                    return reject(new Error(`${host}: HTTP ${res.statusCode}: ${body.slice(0, 200)}`));
                const tl = t.lookup || t.start;
                resolve({ body, got, line: [us(t.start, end), us(t.start, t.lookup), us(tl, t.connect),
                                            us(t.connect, t.secure), us(t.secure, t.response)] });
            });
        });
        req.on('socket', (s) => {
            if (req.reusedSocket) return; // keep-alive: no new connection, no events
            s.once('lookup', () => (t.lookup = now()));
            s.once('connect', () => (t.connect = now()));
            s.once('secureConnect', () => (t.secure = now()));
        });
        req.setTimeout(20000, () => req.destroy(new Error(`${host}: no answer in 20 s`)));
        req.on('error', reject);
        req.end();
        sent++;
    });
}

const fresh = () => new https.Agent({ keepAlive: false, maxCachedSessions: 0 });

// A failed request is counted and reported ("# errors=K: the first message"),
// not retried; the run goes on, so that a proxy that drops answers still gets
// its figures. Timeouts (20 s each) are different: the sixth ends the run.
let errors = 0, timeouts = 0, firstError = '';
async function attempt(agent, host, path, noAuth) {
    try {
        return await one(agent, host, path, noAuth);
    } catch (e) {
        errors++;
        if (!firstError) firstError = e.message;
        if (/no answer in/.test(e.message) && ++timeouts > 5)
            throw new Error(`${timeouts} requests timed out; ${errors} failed, the first: ${firstError}`);
        return null;
    }
}

async function main() {
    const out = [];
    const n = Number(arg1), w = Number(arg2);
    if (mode === 'ka') {
        const agent = new https.Agent({ keepAlive: true, maxSockets: 1 });
        for (let i = -w; i < n; i++) {
            const r = await attempt(agent, target);
            if (r && i >= 0) out.push(r.line[0].toFixed(1));
        }
        agent.destroy();
    } else if (mode === 'new' || mode === 'names') {
        for (let i = -w; i < n; i++) {
            const host = mode === 'new' ? target : target.replace('%', i < 0 ? 'w' + -i : i);
            const r = await attempt(fresh(), host);
            if (r && i >= 0) out.push(r.line.map((v) => v.toFixed(1)).join(' '));
        }
    } else if (mode === 'rps') {
        const agent = new https.Agent({ keepAlive: true, maxSockets: n });
        let done = 0, counting = false, stop = false;
        const worker = async () => {
            while (!stop) {
                const r = await attempt(agent, target);
                if (r && counting) done++;
            }
        };
        const workers = Array.from({ length: n }, worker);
        await sleep(1000); // warmup: connections open, JIT warm
        counting = true;
        const t0 = now();
        await sleep(w * 1000);
        const got = done, secs = us(t0, now()) / 1e6;
        stop = true;
        await Promise.all(workers);
        agent.destroy();
        out.push(`rps=${(got / secs).toFixed(0)}`);
    } else if (mode === 'dl') {
        const size = Number(arg2), noAuth = process.argv[6] === 'none';
        const agent = new https.Agent({ keepAlive: true, maxSockets: 1 });
        for (let i = -1; i < n; i++) { // one warmup
            const r = await attempt(agent, target, `/big?size=${size}`, noAuth);
            if (r && r.got !== size) {
                errors++;
                if (!firstError) firstError = `got ${r.got} of ${size} bytes`;
            } else if (r && i >= 0) out.push(r.line[0].toFixed(1));
        }
        agent.destroy();
    } else if (mode === 'stats') {
        out.push((await one(fresh(), target, '/__stats')).body.trim());
    } else {
        throw new Error('usage: secb.js ka|new|names|rps|stats ...');
    }
    out.push(`# sent=${sent}`);
    if (errors) out.push(`# errors=${errors}: ${firstError}`);
    process.stdout.write(out.join('\n') + '\n');
}
main().catch((e) => {
    console.error('secb: ' + e.message);
    process.exit(1);
});
SECB_JS

: <<'SECB_DNS'
'use strict';
// secb-dns.js ADDR: a DNS server on 127.0.0.1 (UDP, a free port, printed as "ready PORT")
// that answers A for bench.test, plain.test and every name under them with ADDR, AAAA with no
// answer, and every other name with NXDOMAIN.
const dgram = require('dgram');
const addr = process.argv[2].split('.').map(Number);
const sock = dgram.createSocket('udp4');
sock.on('message', (m, from) => {
    if (m.length < 12 || m.readUInt16BE(4) !== 1) return;
    let o = 12;
    const labels = [];
    while (o < m.length && m[o] !== 0) {
        const len = m[o];
        if (len > 63) return;
        labels.push(m.toString('latin1', o + 1, o + 1 + len));
        o += 1 + len;
    }
    o += 1;
    if (o + 4 > m.length) return;
    const qtype = m.readUInt16BE(o);
    const name = labels.join('.').toLowerCase();
    const ours = /(^|\.)(bench|plain)\.test$/.test(name);
    const a = ours && qtype === 1;
    const head = Buffer.alloc(12);
    m.copy(head, 0, 0, 2);
    head.writeUInt16BE(0x8080 | (m.readUInt16BE(2) & 0x0100) | (ours ? 0 : 3), 2); // QR RA (RD) rcode
    head.writeUInt16BE(1, 4);
    head.writeUInt16BE(a ? 1 : 0, 6);
    const answer = a ? Buffer.from([0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 30, 0, 4, ...addr]) : Buffer.alloc(0);
    sock.send(Buffer.concat([head, m.subarray(12, o + 4), answer]), from.port, from.address);
});
sock.bind(0, '127.0.0.1', () => console.log('ready ' + sock.address().port));
SECB_DNS
