#!/usr/bin/env bash
# Egress benchmark: the proxy between a sandbox and an upstream in a network
# namespace this script makes, against the same client talking to the same
# upstream directly. Starts its own runtimed (root, temp state dir, loopback
# port, temp socket) and measures in one run
#   1. bulk throughput, download and upload, proxied vs direct (MB/s, ratio), and
#      a minimal splice relay on the host as a second reference (the cost of a hop);
#   2. connection setup: connect + 1-byte echo, proxied vs direct (median, p99);
#   3. 2000 connections at once from the sandbox, the daemon's memory, and a
#      download alone vs while the 2000 are open.
# Figures and how to read them: docs/benchmarks.md, "Egress".
#
# runtimed runs with its per-sandbox connection limits raised past this load (--rate
# connections=CONN_RATE, --sandbox-connections OPEN_CONNS): they are not what is measured.
#
# Usage: sudo bench/egress.sh [--smoke]   (after `make`; needs cc, ip, jq)
#        --smoke (or BENCH_SMOKE=1): the short mode of `make bench-smoke` (every phase,
#        tiny counts, figures not meaningful; fails when a phase fails or measures nothing).
# Knobs (environment): RUNS=5 BYTES=2147483648 RTT_N=1000 HOLD_N=2000 HOLD_MS=1000
# LOADED_BYTES=536870912 (the download timed alone and with HOLD_N connections open)
# (--smoke: 1 16777216 300 300 200 16777216)
# CONN_RATE=100000 OPEN_CONNS=HOLD_N+64 (runtimed's --rate connections and
# --sandbox-connections)
# RELAY_PIPE=65536 (the reference relay's pipe size, as the proxy's)
# CPUS=$(nproc) (the sandbox's CPU limit: all of them, so no quota is measured)
# BUDGET=280 (seconds of measuring; --smoke: 60) IDLE_WAIT=1200 (seconds to wait first for
# fuzzers to end; 0 = don't) SUBNET="198.51.100 203.0.113" (the first free /24 is
# used) BUILD=DIR (default build/) BENCH_DATA=DIR (keep the raw figures there)
# PERF=DIR (after the figures, perf record -a -g one run of each kind into DIR; --smoke
# does it into the work dir when perf is installed).
# shellcheck disable=SC2317 # the trap handlers and the C source after exit look unreachable
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$HERE/lib.sh"

bench_args "" "$@"
RUNS=${RUNS:-$(bench_pick 1 5)}
BYTES=${BYTES:-$(bench_pick 16777216 2147483648)}
RTT_N=${RTT_N:-$(bench_pick 300 1000)}
HOLD_N=${HOLD_N:-$(bench_pick 300 2000)}
HOLD_MS=${HOLD_MS:-$(bench_pick 200 1000)}
CPUS=${CPUS:-$(nproc)}
RELAY_PIPE=${RELAY_PIPE:-65536}
LOADED_BYTES=${LOADED_BYTES:-$(bench_pick 16777216 536870912)}
BUDGET=${BUDGET:-$(bench_pick 60 280)}
IDLE_WAIT=${IDLE_WAIT:-1200}
SUBNET=${SUBNET:-198.51.100 203.0.113}
TARGET_RATIO=0.90
TARGET_ADDED_MS=0.3

BUILD=${BUILD:-$ROOT/build}
RUNTIMED=$BUILD/runtimed
RT=$BUILD/runtime
NS=rtb-up     # the fake upstream's network namespace
VH=rtb-h      # veth, host end
VU=rtb-u      # veth, upstream end
PORT=5201     # the upstream's port, inside NS (not a web port: see docs/egress.md)
NAME=bench.test
# The per-sandbox connection limits, raised past what is measured here (connection setup
# opens RTT_N connections back to back, thousands a second; the crowd holds HOLD_N at once):
# at runtimed's defaults (100 new a second, bursts of 200; 256 open) the setup phase stopped
# at connection 183 and the crowd could not open. The limits are not what this measures.
CONN_RATE=${CONN_RATE:-100000}
OPEN_CONNS=${OPEN_CONNS:-$((HOLD_N + 64))}

[[ $(id -u) == 0 ]] || bench_die "run as root (runtimed and the namespace need it): sudo $0"
need_build
need_tools "gcc iproute2 jq" cc ip jq

bench_init
UPID=
RPID=

# --- cleanup ---------------------------------------------------------------------

# After the daemon (bench_cleanup): the upstream server and the reference relay.
cleanup_last() {
    local p
    for p in "$UPID" "$RPID"; do [[ -z $p ]] || stop_pid "$p"; done
}

# --- wait for a quiet machine --------------------------------------------------------

# Fuzzers of other work on this machine take every CPU; figures taken beside
# them say little. Wait for them (bounded), then measure anyway.
# (Fuzzers only: unlike wait_for_quiet in lib.sh, the load is not waited for.)
wait_for_fuzzers() {
    local end=$((SECONDS + IDLE_WAIT)) said=
    while (($(fuzzers))) && ((SECONDS < end)); do
        [[ -n $said ]] || bench_log "fuzzers are running ($(fuzzers)); waiting up to $IDLE_WAIT s for them to end"
        said=1
        sleep 10
    done
    if (($(fuzzers))); then
        FUZZERS="fuzzers still running: $(fuzzers) processes"
        bench_log "warning: $FUZZERS; measuring anyway"
    else
        FUZZERS="no fuzzers running"
    fi
}
FUZZERS="not checked"
((IDLE_WAIT > 0)) && wait_for_fuzzers
START=$SECONDS

# --- the fake upstream: a namespace behind a veth pair -------------------------------

# A /24 is free when no host interface has an address in it and nothing routes it.
subnet_free() {
    [[ -z $(ip -4 -o addr show | awk -v p=" $1." 'index($0, " inet" p)') ]] &&
        [[ -z $(ip -4 route show "$1.0/24") ]]
}

NET=
for s in $SUBNET; do
    if subnet_free "$s"; then
        NET=$s
        break
    fi
done
[[ -n $NET ]] || bench_die "none of the subnets '$SUBNET' is free on this host (see ip -4 addr); set SUBNET"
HOST_IP=$NET.254
UP_IP=$NET.10
need_no_veth

bench_workdir -egress
bench_extract EGB_C >"$WORK/egb.c"
cc -O2 -Wall -pthread -o "$WORK/egb" "$WORK/egb.c" 2>"$WORK/cc.log" ||
    bench_die "compiling the benchmark client failed: $(head -n 5 "$WORK/cc.log")"
chmod 755 "$WORK/egb"
EGB=$WORK/egb

make_veth "$HOST_IP/24" "$UP_IP"

ip netns exec "$NS" "$EGB" serve "$PORT" >"$WORK/upstream.log" 2>&1 &
UPID=$!
deadline=$((SECONDS + 10))
while alive "$UPID" && ! grep -q ready "$WORK/upstream.log" && ((SECONDS < deadline)); do sleep 0.02; done
grep -q ready "$WORK/upstream.log" || bench_die "the upstream server did not start: $(head -n 3 "$WORK/upstream.log")"
# The veth needs a moment after "up" (DAD, carrier): poll until a connection works.
deadline=$((SECONDS + 10))
until "$EGB" rtt "$UP_IP" "$PORT" 1 >/dev/null 2>&1 || ((SECONDS >= deadline)); do sleep 0.05; done
"$EGB" rtt "$UP_IP" "$PORT" 1 >/dev/null || bench_die "cannot reach the upstream $UP_IP:$PORT directly"

# The best-case relay (reference for what a second TCP hop costs): on the host,
# 127.0.0.1:RPORT -> the upstream, blocking splice, a thread per direction.
"$EGB" relay "$UP_IP" "$PORT" "$RELAY_PIPE" >"$WORK/relay.log" 2>&1 &
RPID=$!
deadline=$((SECONDS + 10))
while alive "$RPID" && ! grep -q ready "$WORK/relay.log" && ((SECONDS < deadline)); do sleep 0.02; done
RPORT=$(awk '/^ready/ { print $2 }' "$WORK/relay.log")
[[ -n $RPORT ]] || bench_die "the relay did not start: $(head -n 3 "$WORK/relay.log")"

# --- the daemon and the sandbox ---------------------------------------------------------

# --nameserver: a dead loopback port, so nothing is ever resolved outside;
# the pin is the only name the proxy can dial.
start_daemon --resolve "$NAME:0:$UP_IP" --nameserver 127.0.0.1:9 \
    --rate "connections=$CONN_RATE" --sandbox-connections "$OPEN_CONNS"
start_watchdog

SB=$("$RT" sandbox create --cpus "$CPUS" --allow "$NAME") || bench_die "sandbox create failed"
"$RT" sandbox cp "$EGB" "$SB:/workspace/egb" || bench_die "sandbox cp failed"
# In the sandbox: `sx egb ...` runs /workspace/egb there and prints its stdout.
sx() {
    local tool=$1
    shift
    "$RT" sandbox exec "$SB" --timeout 120 -- "/workspace/$tool" "$@"
}
"$RT" sandbox exec "$SB" -- /bin/chmod 755 /workspace/egb >/dev/null || bench_die "chmod in the sandbox failed"
sx egb rtt "$NAME" "$PORT" 1 >/dev/null || bench_die "the sandbox cannot reach $NAME:$PORT through the proxy"

MACHINE=$(bench_machine)
bench_log "$MACHINE; $FUZZERS"
bench_log "runtimed keeper $KPID, server $SPID; upstream $UP_IP:$PORT in netns $NS (pid $UPID)"

# --- 1. throughput ----------------------------------------------------------------------

HZ=$(getconf CLK_TCK)

# Appends one MB/s figure to $WORK/$1.txt, and to $WORK/$1.cpu.txt the CPUs in use
# meanwhile: the whole machine, the relaying process ($2: runtimed's server, the
# reference relay, or 0 for none) and the upstream server. The rest is the client.
sample() {
    local out=$WORK/$1 relay=$2 v t0 t1 b0 b1 p0=0 p1=0 u0 u1
    shift 2
    b0=$(cpu_busy) u0=$(pid_cpu "$UPID")
    ((relay)) && p0=$(pid_cpu "$relay")
    bench_now_us t0
    v=$("$@") || bench_die "failed: $*"
    bench_now_us t1
    b1=$(cpu_busy) u1=$(pid_cpu "$UPID")
    ((relay)) && p1=$(pid_cpu "$relay")
    echo "$v" >>"$out.txt"
    cpu_shares $((t1 - t0)) $((b1 - b0)) $((p1 - p0)) $((u1 - u0)) >>"$out.cpu.txt"
}

bench_log "1/3 throughput: $RUNS x $BYTES bytes each way; direct, proxied and relay, interleaved"
for ((i = 1; i <= RUNS; i++)); do
    for dir in down up; do
        sample "$dir-direct" 0 "$EGB" "$dir" "$UP_IP" "$PORT" "$BYTES"
        sample "$dir-proxied" "$SPID" sx egb "$dir" "$NAME" "$PORT" "$BYTES"
        sample "$dir-relay" "$RPID" "$EGB" "$dir" 127.0.0.1 "$RPORT" "$BYTES"
    done
    last() { tail -n1 "$WORK/$1.txt"; }
    bench_log "  run $i: down $(last down-direct) / $(last down-proxied) / $(last down-relay)," \
        "up $(last up-direct) / $(last up-proxied) / $(last up-relay) MB/s (direct / proxied / relay)"
done
med() { bench_median <"$WORK/$1.txt"; }

# --- 2. connection setup ------------------------------------------------------------------

# "n=.. median_us=.. p99_us=.. ..." -> the value of key $2 in file $1
field() { tr ' ' '\n' <"$WORK/$1.txt" | awk -F= -v k="$2" '$1 == k { print $2 }'; }

bench_log "2/3 connection setup: $RTT_N x (connect, 1-byte echo, close), direct then proxied, twice"
for r in 1 2; do
    "$EGB" rtt "$UP_IP" "$PORT" "$RTT_N" >"$WORK/rtt-direct-$r.txt" || bench_die "direct rtt failed"
    sx egb rtt "$NAME" "$PORT" "$RTT_N" >"$WORK/rtt-proxied-$r.txt" || bench_die "proxied rtt failed"
    bench_log "  round $r: direct $(cat "$WORK/rtt-direct-$r.txt"); proxied $(cat "$WORK/rtt-proxied-$r.txt")"
done
# The round with the lower proxied median is not picked: both rounds are reported
# and the figure is the mean of the two rounds' medians.
mean2() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", (a + b) / 2 }'; }
RTT_D=$(mean2 "$(field rtt-direct-1 median_us)" "$(field rtt-direct-2 median_us)")
RTT_P=$(mean2 "$(field rtt-proxied-1 median_us)" "$(field rtt-proxied-2 median_us)")
P99_D=$(mean2 "$(field rtt-direct-1 p99_us)" "$(field rtt-direct-2 p99_us)")
P99_P=$(mean2 "$(field rtt-proxied-1 p99_us)" "$(field rtt-proxied-2 p99_us)")
CON_D=$(mean2 "$(field rtt-direct-1 connect_median_us)" "$(field rtt-direct-2 connect_median_us)")
CON_P=$(mean2 "$(field rtt-proxied-1 connect_median_us)" "$(field rtt-proxied-2 connect_median_us)")
ADDED_MS=$(awk -v p="$RTT_P" -v d="$RTT_D" 'BEGIN { printf "%.3f", (p - d) / 1000 }')

# --- optional: profiles (PERF=DIR), after the figures so they cannot disturb them ------------

# The short mode profiles too, into the work dir, when perf is there (so the path runs in CI).
((SMOKE)) && [[ -z ${PERF:-} ]] && command -v perf >/dev/null && PERF=$WORK/perf

if [[ -n ${PERF:-} ]]; then
    command -v perf >/dev/null || bench_die "PERF is set but perf is missing; apt-get install -y linux-perf"
    mkdir -p "$PERF"
    bench_log "profiles: perf record -a -g of one transfer each way, both paths, and of rtt, into $PERF"
    SX=("$RT" sandbox exec "$SB" --timeout 120 -- /workspace/egb) # sx is a function: perf needs a program
    prof() { # prof NAME CLIENT...: a system-wide profile while the client runs
        local name=$1
        shift
        perf record -q -a -g -o "$PERF/$name.data" -- "$@" >"$PERF/$name.out" 2>"$PERF/$name.err" ||
            bench_log "perf record $name failed: $(tail -n 2 "$PERF/$name.err")"
    }
    for dir in down up; do
        prof "$dir-direct" "$EGB" "$dir" "$UP_IP" "$PORT" "$BYTES"
        prof "$dir-proxied" "${SX[@]}" "$dir" "$NAME" "$PORT" "$BYTES"
        prof "$dir-relay" "$EGB" "$dir" 127.0.0.1 "$RPORT" "$BYTES"
    done
    prof rtt-direct "$EGB" rtt "$UP_IP" "$PORT" "$RTT_N"
    prof rtt-proxied "${SX[@]}" rtt "$NAME" "$PORT" "$RTT_N"
    echo "server pid $SPID, upstream pid $UPID, relay pid $RPID" >"$PERF/pids.txt"
fi

# --- 3. many connections at once ----------------------------------------------------------

nfds() { local f=(/proc/"$1"/fd/*); echo "${#f[@]}"; }

bench_log "3/3 $HOLD_N connections at once from the sandbox, held $HOLD_MS ms"
SRV_RSS0=$(bench_rss_kib "$SPID")
RSS0=$(daemon_rss)
FDS0=$(nfds "$SPID")
sx egb hold "$NAME" "$PORT" "$HOLD_N" "$HOLD_MS" >"$WORK/hold.txt" 2>"$WORK/hold.err" &
HPID=$!
SRV_RSS1=$SRV_RSS0
RSS1=$RSS0
FDS1=$FDS0
# Sample while the client runs: the peak is the daemon with all connections open.
while alive "$HPID"; do
    v=$(bench_rss_kib "$SPID")
    ((v > SRV_RSS1)) && SRV_RSS1=$v
    v=$(daemon_rss)
    ((v > RSS1)) && RSS1=$v
    v=$(nfds "$SPID")
    ((v > FDS1)) && FDS1=$v
    sleep 0.05
done
HOLD_RC=0
wait "$HPID" || HOLD_RC=$?
HOLD=$(cat "$WORK/hold.txt")
((HOLD_RC == 0)) || bench_log "the $HOLD_N-connection client failed ($HOLD_RC): $HOLD $(head -c 300 "$WORK/hold.err")"
# Connections close asynchronously: wait (bounded) for the proxy to let go of them.
deadline=$((SECONDS + 10))
while (($(nfds "$SPID") > FDS0 + 10)) && ((SECONDS < deadline)); do sleep 0.05; done
SRV_RSS2=$(bench_rss_kib "$SPID")
RSS2=$(daemon_rss)
FDS2=$(nfds "$SPID")

# A download alone, then the same while HOLD_N connections are open (idle): the
# proxy's per-connection pipes count against the kernel's per-user pipe budget
# (fs.pipe-user-pages-soft), so an open crowd could slow a new transfer.
# Each round: one download alone, then one while HOLD_N idle connections are open.
bench_log "3/3 a download of $LOADED_BYTES bytes alone, then with $HOLD_N connections open; 3 rounds"
for i in 1 2 3; do
    sample alone "$SPID" sx egb down "$NAME" "$PORT" "$LOADED_BYTES"
    "$RT" sandbox exec "$SB" -- /bin/rm -f /workspace/stop >/dev/null || bench_die "rm in the sandbox failed"
    sx egb hold "$NAME" "$PORT" "$HOLD_N" 60000 /workspace/stop >"$WORK/hold2.txt" 2>"$WORK/hold2.err" &
    HPID=$!
    deadline=$((SECONDS + 30)) # each open connection: 2 sockets and 2 pipes in the server
    while alive "$HPID" && (($(nfds "$SPID") < FDS0 + 6 * HOLD_N)) && ((SECONDS < deadline)); do sleep 0.05; done
    (($(nfds "$SPID") >= FDS0 + 6 * HOLD_N)) ||
        bench_die "the $HOLD_N connections did not all open: $(cat "$WORK/hold2.txt" "$WORK/hold2.err")"
    sample loaded "$SPID" sx egb down "$NAME" "$PORT" "$LOADED_BYTES"
    alive "$HPID" || bench_log "warning: the held connections ended before the download did"
    : | "$RT" sandbox cp - "$SB:/workspace/stop" || bench_die "could not end the hold (sandbox cp)"
    wait "$HPID" || bench_die "the held connections failed: $(cat "$WORK/hold2.txt" "$WORK/hold2.err")"
    deadline=$((SECONDS + 10))
    while (($(nfds "$SPID") > FDS0 + 10)) && ((SECONDS < deadline)); do sleep 0.05; done
done
ALONE=$(med alone)
LOADED=$(med loaded)
REFUSED=$("$RT" sandbox events "$SB" --json 2>/dev/null | jq -s '[.[] | select(.kind == "egress.refused")] | length' 2>/dev/null || echo "?")

# --- summary ---------------------------------------------------------------------

ratio() { bench_ratio "$1" "$2" 2; }
below() { awk -v v="$1" -v t="$2" 'BEGIN { print (v != "n/a" && v + 0 < t + 0) ? "ok" : "MISSED" }'; }
row() { printf '%-40s %14s  %-36s %s\n' "$@"; }
trow() { printf '%-10s %9s %9s %9s  %-8s %-13s  %7s  %7s\n' "$@"; }
tput_rows() { # $1: down or up
    local d p r
    d=$(med "$1-direct") p=$(med "$1-proxied") r=$(med "$1-relay")
    trow "$1" "$(bench_fmt "$d")" "$(bench_fmt "$p")" "$(bench_fmt "$r")" "$(ratio "$p" "$d")" \
        ">= $TARGET_RATIO $(bench_at_least "$(ratio "$p" "$d")" "$TARGET_RATIO")" "$(ratio "$r" "$d")" "$(ratio "$p" "$r")"
    printf '  runs     direct %s | proxied %s | relay %s\n' "$(paste -sd' ' "$WORK/$1-direct.txt")" \
        "$(paste -sd' ' "$WORK/$1-proxied.txt")" "$(paste -sd' ' "$WORK/$1-relay.txt")"
    printf '  CPUs busy, machine/relaying process/upstream: direct %s, proxied %s, relay %s\n' \
        "$(cpus "$1-direct")" "$(cpus "$1-proxied")" "$(cpus "$1-relay")"
}
{
    echo
    echo "Egress, $(date -u +%Y-%m-%dT%H:%MZ), $MACHINE; $FUZZERS"
    echo "upstream $UP_IP:$PORT in netns $NS (veth $VH $HOST_IP); sandbox --cpus $CPUS --allow $NAME"
    echo "runtimed --rate connections=$CONN_RATE --sandbox-connections $OPEN_CONNS (the per-sandbox"
    echo "connection limits, raised past this load; defaults 100 a second and 256 open)"
    echo
    echo "Throughput, MB/s (10^6 bytes/s), medians of $RUNS runs of $BYTES bytes. direct: host"
    echo "namespace -> veth -> upstream; proxied: sandbox -> runtimed -> veth -> upstream;"
    echo "relay: host -> 127.0.0.1 -> splice relay ($RELAY_PIPE-byte pipes) -> veth -> upstream."
    trow "" direct proxied relay "p/d" "target" "r/d" "p/r"
    tput_rows down
    tput_rows up
    echo
    echo "Connection setup: connect + 1-byte echo + close, mean of 2 rounds' medians (p99s)"
    echo "of $RTT_N connections each; direct: host -> $UP_IP, proxied: sandbox -> $NAME."
    echo
    row "figure" "proxied" "direct" "target"
    row "connect + 1-byte echo, median" "$RTT_P us" "$RTT_D us" ""
    row "  added by the proxy (median)" "$ADDED_MS ms" "" "< $TARGET_ADDED_MS ms $(below "$ADDED_MS" "$TARGET_ADDED_MS")"
    row "  p99" "$P99_P us" "$P99_D us" ""
    row "  connect() alone, median (info)" "$CON_P us" "$CON_D us" ""
    echo
    echo "$HOLD_N connections at once from the sandbox, each echoing 12 bytes, held $HOLD_MS ms,"
    echo "then echoing again: $([[ $HOLD_RC == 0 ]] && echo "all succeeded" || echo FAILED)"
    echo "  $HOLD"
    echo "  daemon Rss (keeper + server), KiB: $RSS0 before, $RSS1 peak, $RSS2 after"
    echo "  server Rss (the process that runs the proxy), KiB: $SRV_RSS0 before, $SRV_RSS1 peak, $SRV_RSS2 after"
    echo "  server open fds: $FDS0 before, $FDS1 peak, $FDS2 after"
    echo "  proxied download of $LOADED_BYTES bytes, median of 3: $(bench_fmt "$ALONE") MB/s alone," \
        "$(bench_fmt "$LOADED") MB/s with the $HOLD_N open, ratio $(ratio "$LOADED" "$ALONE")"
    echo "    runs: alone $(paste -sd' ' "$WORK/alone.txt"), with $HOLD_N open $(paste -sd' ' "$WORK/loaded.txt")"
    echo "  egress.refused events of the sandbox over the whole run: $REFUSED (expect 0)"
    echo
    echo "took $((SECONDS - START)) s of measuring"
}
((HOLD_RC == 0)) || exit 1
bench_smoke_figures "down_direct=$(med down-direct)" "down_proxied=$(med down-proxied)" \
    "down_relay=$(med down-relay)" "up_direct=$(med up-direct)" "up_proxied=$(med up-proxied)" \
    "up_relay=$(med up-relay)" "rtt_direct=$RTT_D" "rtt_proxied=$RTT_P" "p99_proxied=$P99_P" \
    "alone=$ALONE" "loaded=$LOADED" "rss_peak=$RSS1" "refused=$REFUSED"
exit 0

# The client and upstream server, compiled by the script into its temp dir.
: <<'EGB_C'
/* egb: the egress benchmark's server and client (bench/egress.sh compiles it).
 *   egb serve PORT              epoll server; the first byte of a connection picks
 *                               'd'+u64: send that many bytes, 'u'+u64: read that
 *                               many and answer the count, 'e': echo until EOF,
 *                               'o': echo that byte and close
 *   egb down HOST PORT BYTES    one download, prints MB/s (10^6 bytes/s)
 *   egb up HOST PORT BYTES      one upload (ends when the server confirms the count)
 *   egb rtt HOST PORT N         N x (connect, send 1 byte, read its echo, close), in us
 *   egb hold HOST PORT N MS [STOP]  N connections at once, echo, hold MS ms (or until
 *                               the file STOP exists), echo again
 *   egb relay HOST PORT PIPE    a splice relay to HOST:PORT on a free loopback port
 * First bytes are lowercase on purpose: the proxy's sniffer sees neither TLS nor
 * HTTP and dials at once. Every wait has a deadline. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BUF (256 * 1024)
static char buf[BUF];

static void die(const char *what)
{
    fprintf(stderr, "egb: %s: %s\n", what, strerror(errno));
    exit(1);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void put64(unsigned char *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--, v >>= 8) p[i] = (unsigned char)v;
}

static uint64_t get64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = v << 8 | p[i];
    return v;
}

static void nodelay(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static void raise_nofile(rlim_t want)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0) die("getrlimit");
    if (rl.rlim_cur >= want) return;
    rl.rlim_cur = want < rl.rlim_max ? want : rl.rlim_max;
    if (rl.rlim_cur < want && geteuid() == 0) rl.rlim_cur = rl.rlim_max = want;
    setrlimit(RLIMIT_NOFILE, &rl);
}

/* ---- server ---- */

struct sconn {
    int fd;
    char mode; /* 0 until the first byte, then d, u or e */
    unsigned char hdr[9];
    size_t hlen;
    uint64_t left; /* d: bytes to send; u: bytes to read */
    uint64_t got;
    unsigned char pend[4096]; /* e: echo not yet written */
    size_t plen;
    int finishing; /* d: all sent, waiting for EOF */
    uint32_t events; /* what epoll waits for now */
};

static void sclose(int ep, struct sconn *c)
{
    epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    free(c);
}

static void swant(int ep, struct sconn *c, uint32_t ev)
{
    if (c->events == ev) return;
    c->events = ev;
    struct epoll_event e = {.events = ev, .data.ptr = c};
    epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &e);
}

/* Returns -1 when the connection is over. */
static int serve_send(int ep, struct sconn *c)
{
    while (c->left > 0) {
        size_t n = c->left < BUF ? (size_t)c->left : BUF;
        ssize_t w = send(c->fd, buf, n, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EAGAIN) {
                swant(ep, c, EPOLLOUT);
                return 0;
            }
            return -1;
        }
        c->left -= (uint64_t)w;
    }
    shutdown(c->fd, SHUT_WR);
    c->finishing = 1;
    swant(ep, c, EPOLLIN);
    return 0;
}

static int serve_echo(int ep, struct sconn *c)
{
    for (;;) {
        if (c->plen > 0) {
            ssize_t w = send(c->fd, c->pend, c->plen, MSG_NOSIGNAL);
            if (w < 0 && errno == EAGAIN) {
                swant(ep, c, EPOLLOUT);
                return 0;
            }
            if (w < 0) return -1;
            memmove(c->pend, c->pend + w, c->plen - (size_t)w);
            c->plen -= (size_t)w;
            continue;
        }
        swant(ep, c, EPOLLIN);
        ssize_t r = recv(c->fd, c->pend, sizeof c->pend, 0);
        if (r == 0) return -1;
        if (r < 0) return errno == EAGAIN ? 0 : -1;
        c->plen = (size_t)r;
    }
}

static int serve_io(int ep, struct sconn *c)
{
    if (c->mode == 'd') {
        if (!c->finishing) return serve_send(ep, c);
        ssize_t r = recv(c->fd, buf, sizeof buf, 0);
        return r > 0 || (r < 0 && errno == EAGAIN) ? 0 : -1;
    }
    if (c->mode == 'e') return serve_echo(ep, c);
    for (;;) { /* 'u' */
        ssize_t r = recv(c->fd, buf, sizeof buf, 0);
        if (r < 0) return errno == EAGAIN ? 0 : -1;
        if (r == 0) {
            unsigned char ack[8];
            put64(ack, c->got);
            send(c->fd, ack, sizeof ack, MSG_NOSIGNAL); /* 8 bytes fit any buffer */
            return -1;
        }
        c->got += (uint64_t)r;
    }
}

static int serve_head(int ep, struct sconn *c)
{
    while (!c->mode || (c->mode != 'e' && c->mode != 'o' && c->hlen < 9)) {
        size_t want = c->hlen == 0 ? 1 : 9 - c->hlen;
        ssize_t r = recv(c->fd, c->hdr + c->hlen, want, 0);
        if (r == 0) return -1;
        if (r < 0) return errno == EAGAIN ? 0 : -1;
        c->hlen += (size_t)r;
        if (!c->mode) {
            c->mode = (char)c->hdr[0];
            if (c->mode == 0 || !strchr("dueo", c->mode)) return -1;
        }
    }
    if (c->mode == 'd') c->left = get64(c->hdr + 1);
    if (c->mode == 'e') { /* no header beyond the mode byte, which is echoed too */
        c->hlen = 9;
        c->pend[0] = 'e';
        c->plen = 1;
    }
    if (c->mode == 'o') { /* the byte back, then close first: TIME_WAIT stays here, */
        c->hlen = 9;      /* not on the client's side where it would use up ports */
        c->mode = 'd';
        c->left = 0;
        if (send(c->fd, "o", 1, MSG_NOSIGNAL) != 1) return -1; /* an empty buffer takes it */
    }
    return serve_io(ep, c);
}

static int serve(int port)
{
    raise_nofile(65536);
    signal(SIGPIPE, SIG_IGN);
    int l = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    int one = 1;
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (bind(l, (struct sockaddr *)&a, sizeof a) < 0) die("bind");
    if (listen(l, 4096) < 0) die("listen");
    int ep = epoll_create1(0);
    struct epoll_event e = {.events = EPOLLIN, .data.ptr = NULL};
    epoll_ctl(ep, EPOLL_CTL_ADD, l, &e);
    printf("ready\n");
    fflush(stdout);
    struct epoll_event evs[256];
    for (;;) {
        int n = epoll_wait(ep, evs, 256, -1);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) die("epoll_wait");
        for (int i = 0; i < n; i++) {
            struct sconn *c = evs[i].data.ptr;
            if (!c) {
                int fd;
                while ((fd = accept4(l, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
                    c = calloc(1, sizeof *c);
                    if (!c) die("calloc");
                    c->fd = fd;
                    c->events = EPOLLIN;
                    nodelay(fd);
                    struct epoll_event ce = {.events = EPOLLIN, .data.ptr = c};
                    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ce);
                }
                continue;
            }
            int r = (c->mode && (c->mode == 'e' || c->hlen == 9)) ? serve_io(ep, c)
                                                                    : serve_head(ep, c);
            if (r < 0) sclose(ep, c);
        }
    }
    return 0; /* not reached */
}

/* ---- clients ---- */

static struct sockaddr_storage target;
static socklen_t target_len;

static void resolve(const char *host, const char *port)
{
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *res;
    int r = getaddrinfo(host, port, &hints, &res);
    if (r != 0) {
        fprintf(stderr, "egb: cannot resolve %s: %s\n", host, gai_strerror(r));
        exit(1);
    }
    memcpy(&target, res->ai_addr, res->ai_addrlen);
    target_len = res->ai_addrlen;
    freeaddrinfo(res);
}

static int dial(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) die("socket");
    nodelay(fd);
    struct timeval tv = {20, 0}; /* no read or write may hang the benchmark */
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (connect(fd, (struct sockaddr *)&target, target_len) < 0) die("connect");
    return fd;
}

static void send_all(int fd, const void *p, size_t n)
{
    const char *b = p;
    while (n > 0) {
        ssize_t w = send(fd, b, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) die("send");
        b += w;
        n -= (size_t)w;
    }
}

static int down(uint64_t bytes)
{
    double t0 = now();
    int fd = dial();
    unsigned char hdr[9] = {'d'};
    put64(hdr + 1, bytes);
    send_all(fd, hdr, sizeof hdr);
    uint64_t got = 0;
    for (;;) {
        ssize_t r = recv(fd, buf, sizeof buf, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) die("recv");
        if (r == 0) break;
        got += (uint64_t)r;
    }
    double t = now() - t0;
    close(fd);
    if (got != bytes) {
        fprintf(stderr, "egb: received %llu of %llu bytes\n", (unsigned long long)got,
                (unsigned long long)bytes);
        return 1;
    }
    printf("%.1f\n", (double)bytes / t / 1e6);
    return 0;
}

static int up(uint64_t bytes)
{
    double t0 = now();
    int fd = dial();
    unsigned char hdr[9] = {'u'};
    put64(hdr + 1, bytes);
    send_all(fd, hdr, sizeof hdr);
    for (uint64_t left = bytes; left > 0;) {
        size_t n = left < BUF ? (size_t)left : BUF;
        send_all(fd, buf, n);
        left -= n;
    }
    shutdown(fd, SHUT_WR);
    unsigned char ack[8];
    size_t have = 0;
    while (have < sizeof ack) {
        ssize_t r = recv(fd, ack + have, sizeof ack - have, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) die("recv (the count)");
        have += (size_t)r;
    }
    double t = now() - t0;
    close(fd);
    if (get64(ack) != bytes) {
        fprintf(stderr, "egb: server counted %llu of %llu bytes\n",
                (unsigned long long)get64(ack), (unsigned long long)bytes);
        return 1;
    }
    printf("%.1f\n", (double)bytes / t / 1e6);
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double pct(const double *v, int n, double p)
{
    int i = (int)(p * (n - 1) + 0.5);
    return v[i];
}

/* connect + 1-byte echo: through the proxy, connect() returns when the proxy
 * accepts, so the echo is what includes the proxy's own upstream connect. The
 * server closes first, so thousands of runs leave no TIME_WAIT on the client's
 * (or the proxy's) side to crowd the ephemeral ports towards one destination. */
static int rtt(int n)
{
    double *all = calloc((size_t)n, sizeof *all), *con = calloc((size_t)n, sizeof *con);
    if (!all || !con) die("calloc");
    for (int i = -20; i < n; i++) { /* 20 warmup connections */
        double t0 = now();
        int fd = dial();
        double t1 = now();
        char b = 'o';
        send_all(fd, &b, 1);
        ssize_t r;
        do r = recv(fd, &b, 1, 0);
        while (r < 0 && errno == EINTR);
        if (r != 1 || b != 'o') {
            fprintf(stderr, "egb: connection %d: no echo\n", i);
            return 1;
        }
        double t2 = now();
        do r = recv(fd, &b, 1, 0); /* the server's FIN: it closes first */
        while (r < 0 && errno == EINTR);
        close(fd);
        if (i >= 0) {
            all[i] = (t2 - t0) * 1e6;
            con[i] = (t1 - t0) * 1e6;
        }
    }
    qsort(all, (size_t)n, sizeof *all, cmp_double);
    qsort(con, (size_t)n, sizeof *con, cmp_double);
    printf("n=%d median_us=%.1f p99_us=%.1f min_us=%.1f connect_median_us=%.1f\n", n,
           pct(all, n, 0.5), pct(all, n, 0.99), all[0], pct(con, n, 0.5));
    return 0;
}

/* ---- hold: many at once ---- */

struct hconn {
    int fd;
    int state; /* 0 connecting, 1 echo pending, 2 echoed, -1 failed */
    char msg[24];
    size_t sent, got;
};

static int hold_round(int ep, struct hconn *h, int n, int first, double deadline)
{
    int pending = 0;
    for (int i = 0; i < n; i++) {
        if (h[i].state < 0) continue;
        if (!first) {
            h[i].state = 1;
            h[i].sent = h[i].got = 0;
            snprintf(h[i].msg, sizeof h[i].msg, "again-%05d", i);
            struct epoll_event e = {.events = EPOLLIN | EPOLLOUT, .data.u32 = (uint32_t)i};
            epoll_ctl(ep, EPOLL_CTL_MOD, h[i].fd, &e);
        }
        pending++;
    }
    struct epoll_event evs[512];
    char in[24];
    while (pending > 0 && now() < deadline) {
        int k = epoll_wait(ep, evs, 512, 100);
        for (int j = 0; j < k; j++) {
            struct hconn *c = &h[evs[j].data.u32];
            if (c->state < 0 || c->state == 2) continue;
            if (c->state == 0) {
                int err = 0;
                socklen_t len = sizeof err;
                getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
                if (err) {
                    c->state = -1;
                    pending--;
                    continue;
                }
                c->state = 1;
            }
            size_t mlen = strlen(c->msg);
            if (c->sent < mlen) {
                ssize_t w = send(c->fd, c->msg + c->sent, mlen - c->sent, MSG_NOSIGNAL);
                if (w > 0) c->sent += (size_t)w;
                if (c->sent == mlen) {
                    struct epoll_event e = {.events = EPOLLIN, .data.u32 = evs[j].data.u32};
                    epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &e);
                }
            }
            ssize_t r = recv(c->fd, in, mlen - c->got, MSG_DONTWAIT);
            if (r > 0) {
                if (memcmp(in, c->msg + c->got, (size_t)r) != 0) r = 0;
                else c->got += (size_t)r;
            }
            if (r == 0 || (r < 0 && errno != EAGAIN)) {
                c->state = -1;
                pending--;
            } else if (c->got == mlen) {
                c->state = 2;
                pending--;
            }
        }
    }
    int ok = 0;
    for (int i = 0; i < n; i++) ok += h[i].state == 2;
    return ok;
}

/* STOP: a file whose appearance ends the hold early (NULL: none). */
static int hold(int n, int ms, const char *stop)
{
    raise_nofile((rlim_t)n + 64);
    struct hconn *h = calloc((size_t)n, sizeof *h);
    int ep = epoll_create1(0);
    if (!h || ep < 0) die("setup");
    double t0 = now();
    for (int i = 0; i < n; i++) {
        h[i].fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        if (h[i].fd < 0) die("socket (raise the open files limit?)");
        snprintf(h[i].msg, sizeof h[i].msg, "ehello-%05d", i); /* 'e': echo mode */
        if (connect(h[i].fd, (struct sockaddr *)&target, target_len) < 0 && errno != EINPROGRESS)
            h[i].state = -1;
        struct epoll_event e = {.events = EPOLLOUT, .data.u32 = (uint32_t)i};
        epoll_ctl(ep, EPOLL_CTL_ADD, h[i].fd, &e);
    }
    int ok1 = hold_round(ep, h, n, 1, t0 + 30);
    double t1 = now();
    double until = t1 + ms / 1000.0;
    while (now() < until && !(stop && access(stop, F_OK) == 0)) { /* be open, nothing else */
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    double held = now() - t1;
    int ok2 = hold_round(ep, h, n, 0, now() + 30);
    double t2 = now();
    for (int i = 0; i < n; i++) close(h[i].fd);
    printf("n=%d first_ok=%d all_echoed_ms=%.0f held_ms=%.0f second_ok=%d second_ms=%.0f\n", n,
           ok1, (t1 - t0) * 1e3, held * 1e3, ok2, (t2 - t1 - held) * 1e3);
    return ok1 == n && ok2 == n ? 0 : 1;
}

/* ---- relay: the best case for a proxy ---- */

struct relay_dir {
    int src, dst;
    int pipe_size;
};

/* src -> pipe -> dst with blocking splice until EOF, then pass the half-close on. */
static void *relay_dir_run(void *arg)
{
    struct relay_dir *d = arg;
    int p[2];
    if (pipe(p) < 0) die("pipe");
    fcntl(p[1], F_SETPIPE_SZ, d->pipe_size);
    for (;;) {
        ssize_t n = splice(d->src, NULL, p[1], NULL, (size_t)d->pipe_size, SPLICE_F_MOVE);
        if (n <= 0) break;
        while (n > 0) {
            ssize_t m = splice(p[0], NULL, d->dst, NULL, (size_t)n, SPLICE_F_MOVE);
            if (m <= 0) goto out;
            n -= m;
        }
    }
out:
    shutdown(d->dst, SHUT_WR);
    close(p[0]);
    close(p[1]);
    return NULL;
}

struct relay_conn {
    int client, pipe_size;
};

static void *relay_conn_run(void *arg)
{
    struct relay_conn *rc = arg;
    int u = dial();
    struct relay_dir up = {rc->client, u, rc->pipe_size}, down = {u, rc->client, rc->pipe_size};
    pthread_t t;
    if (pthread_create(&t, NULL, relay_dir_run, &up) != 0) die("pthread_create");
    relay_dir_run(&down);
    pthread_join(t, NULL);
    close(u);
    close(rc->client);
    free(rc);
    return NULL;
}

/* Listens on a free port of 127.0.0.1 and prints it; each connection is relayed
 * to the target by its own threads, one per direction doing blocking
 * splice(2) through a pipe of PIPE bytes: the simplest fast relay, a reference
 * for what a second TCP hop costs on this machine. */
static int relay(int pipe_size)
{
    signal(SIGPIPE, SIG_IGN);
    int l = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(0),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (bind(l, (struct sockaddr *)&a, sizeof a) < 0) die("bind");
    if (listen(l, 128) < 0) die("listen");
    socklen_t alen = sizeof a;
    if (getsockname(l, (struct sockaddr *)&a, &alen) < 0) die("getsockname");
    printf("ready %d\n", ntohs(a.sin_port));
    fflush(stdout);
    for (;;) {
        int c = accept(l, NULL, NULL);
        if (c < 0) continue;
        struct relay_conn *rc = malloc(sizeof *rc);
        pthread_t t;
        if (!rc) die("malloc");
        *rc = (struct relay_conn){c, pipe_size};
        if (pthread_create(&t, NULL, relay_conn_run, rc) != 0) die("pthread_create");
        pthread_detach(t);
    }
    return 0; /* not reached */
}

int main(int argc, char **argv)
{
    memset(buf, 'x', sizeof buf);
    if (argc == 3 && strcmp(argv[1], "serve") == 0) return serve(atoi(argv[2]));
    if (argc >= 4) {
        signal(SIGPIPE, SIG_IGN);
        resolve(argv[2], argv[3]);
        if (argc == 5 && strcmp(argv[1], "down") == 0) return down(strtoull(argv[4], NULL, 10));
        if (argc == 5 && strcmp(argv[1], "up") == 0) return up(strtoull(argv[4], NULL, 10));
        if (argc == 5 && strcmp(argv[1], "rtt") == 0) return rtt(atoi(argv[4]));
        if ((argc == 6 || argc == 7) && strcmp(argv[1], "hold") == 0)
            return hold(atoi(argv[4]), atoi(argv[5]), argc == 7 ? argv[6] : NULL);
        if (argc == 5 && strcmp(argv[1], "relay") == 0) return relay(atoi(argv[4]));
    }
    fprintf(stderr, "usage: egb serve PORT | egb down|up HOST PORT BYTES | egb rtt HOST PORT N"
                    " | egb hold HOST PORT N MS [STOP] | egb relay HOST PORT PIPE\n");
    return 2;
}
EGB_C
