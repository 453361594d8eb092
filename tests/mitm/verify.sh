#!/bin/bash
# Real TLS clients trust a leaf that src/mitm minted, for the name they asked
# for, and refuse it for any other name or under another CA: OpenSSL (verify
# and s_client), curl, and Node (https with `ca`, https and fetch with
# NODE_EXTRA_CA_CERTS as a sandbox has it). Servers are openssl s_server on
# loopback only. Python is not installed on these machines, so it is not
# checked here.
#   tests/mitm/verify.sh        (RUNTIME_BUILD=dir to build the helper elsewhere)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${RUNTIME_BUILD:-$ROOT/build}
WORK=$(mktemp -d /tmp/runtime-mitm-verify.XXXXXX)
SERVERS=()
FAILS=0

cleanup() {
    for pid in "${SERVERS[@]}"; do
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    rm -rf "$WORK"
}
trap cleanup EXIT

# expect ok|fail DESCRIPTION COMMAND...: runs the command and checks its outcome;
# a failure counts only if it is about the certificate, not e.g. a refused connection.
expect() {
    local want=$1 desc=$2 got=ok
    shift 2
    "$@" </dev/null >"$WORK/out" 2>&1 || got=fail
    if [ "$got" = fail ] && ! grep -Eqi 'certif|verif|issuer' "$WORK/out"; then
        got="fail (not a certificate error)"
    fi
    if [ "$got" = "$want" ]; then
        echo "ok   $desc"
    else
        echo "FAIL $desc (wanted $want)"
        tail -n 5 "$WORK/out" | sed 's/^/     /'
        FAILS=$((FAILS + 1))
    fi
}

build_helper() {
    mkdir -p "$BUILD/mitm"
    # the Makefile's warnings
    ${CC:-cc} -std=gnu17 -O1 -g -Wall -Wextra -Werror -Wshadow -Wformat=2 -Wvla \
        -Wno-unused-parameter -Wno-format-truncation -D_GNU_SOURCE -I"$ROOT/src" \
        -o "$BUILD/mitm/mkcerts" "$ROOT/tests/mitm/mkcerts.c" "$ROOT"/src/mitm/*.c \
        "$ROOT/src/common/common.c" "$ROOT/src/dns/dns.c" $(pkg-config --libs openssl libevent) # libevent: the signer's client
}

# start_server NAME ADDR: serves WORK/NAME.pem on ADDR with an OS-chosen port,
# which it stores in PORT once s_server reports that it listens.
start_server() {
    local log="$WORK/server-$1.log"
    : >"$log" # made here, not by the background job's redirection, which may come after the first read
    openssl s_server -cert "$WORK/$1.pem" -key "$WORK/leaf.key" -alpn http/1.1 \
        -accept "$2:0" -www >>"$log" 2>&1 </dev/null &
    SERVERS+=($!)
    local deadline=$((SECONDS + 10))
    PORT=
    while [ -z "$PORT" ] && [ $SECONDS -lt $deadline ]; do
        PORT=$(sed -n 's/^ACCEPT .*:\([0-9]\+\)$/\1/p' "$log" | head -n 1)
        [ -n "$PORT" ] || sleep 0.05
    done
    [ -n "$PORT" ] || { echo "s_server for $1 did not start:"; cat "$log"; exit 1; }
}

s_client() { # CAFILE ADDR PORT VERIFY-ARGS...
    local ca=$1 addr=$2 port=$3 out
    shift 3
    # the whole output first: grep -q in a pipe would end it early (SIGPIPE)
    out=$(openssl s_client -brief -verify_return_error -CAfile "$ca" -connect "$addr:$port" \
        "$@" </dev/null 2>&1) || true
    echo "$out"
    grep -q '^Verification: OK' <<<"$out"
}

curl_get() { # CAFILE URL [curl args...]
    local ca=$1 url=$2
    shift 2
    curl -sS -g --fail --noproxy '*' --max-time 10 --cacert "$ca" -o /dev/null "$@" "$url"
}

node_get() { NODE_EXTRA_CA_CERTS=${EXTRA:-} node "$ROOT/tests/mitm/get.mjs" "$@"; }

check_name() { # a DNS name: the leaf is served on 127.0.0.1
    local n=$1 ca=$WORK/ca.pem other=$WORK/other/ca.pem
    start_server "$n" 127.0.0.1
    expect ok "openssl s_client $n" s_client "$ca" 127.0.0.1 "$PORT" -servername "$n" \
        -verify_hostname "$n"
    expect fail "openssl s_client, wrong name" s_client "$ca" 127.0.0.1 "$PORT" \
        -servername "x.$n" -verify_hostname "x.$n"
    expect fail "openssl s_client, other CA" s_client "$other" 127.0.0.1 "$PORT" \
        -servername "$n" -verify_hostname "$n"
    expect ok "curl $n" curl_get "$ca" "https://$n:$PORT/" --resolve "$n:$PORT:127.0.0.1"
    expect fail "curl, wrong name" curl_get "$ca" "https://x.$n:$PORT/" \
        --resolve "x.$n:$PORT:127.0.0.1"
    expect fail "curl, other CA" curl_get "$other" "https://$n:$PORT/" \
        --resolve "$n:$PORT:127.0.0.1"
    expect ok "curl $n, system bundle plus CA" curl_get "$WORK/bundle.pem" "https://$n:$PORT/" \
        --resolve "$n:$PORT:127.0.0.1"
    expect ok "node https.get {ca} $n" node_get https "$n" "$PORT" "$ca"
    expect fail "node https.get, wrong name" node_get https "x.$n" "$PORT" "$ca"
    expect fail "node https.get, other CA" node_get https "$n" "$PORT" "$other"
    EXTRA=$ca expect ok "node https.get NODE_EXTRA_CA_CERTS $n" node_get https "$n" "$PORT"
    expect fail "node https.get, no CA" node_get https "$n" "$PORT"
}

check_ip() { # ADDR URLHOST: the leaf for an IP literal, served on that address
    local ip=$1 urlhost=$2 ca=$WORK/ca.pem other=$WORK/other/ca.pem
    start_server "$ip" "$urlhost"
    expect ok "openssl s_client $ip" s_client "$ca" "$urlhost" "$PORT" -verify_ip "$ip"
    expect fail "openssl s_client, wrong IP" s_client "$ca" "$urlhost" "$PORT" -verify_ip 10.9.9.9
    expect ok "curl https://$urlhost" curl_get "$ca" "https://$urlhost:$PORT/"
    expect fail "curl $ip, other CA" curl_get "$other" "https://$urlhost:$PORT/"
    expect ok "node https.get {ca} $ip" node_get https "$ip" "$PORT" "$ca"
    EXTRA=$ca expect ok "node fetch NODE_EXTRA_CA_CERTS $ip" node_get fetch "$ip" "$PORT"
    expect fail "node fetch $ip, no CA" node_get fetch "$ip" "$PORT"
}

build_helper
"$BUILD/mitm/mkcerts" "$WORK" api.example.test localhost 127.0.0.1 ::1 2>/dev/null
mkdir "$WORK/other"
"$BUILD/mitm/mkcerts" "$WORK/other" api.example.test 2>/dev/null
cat /etc/ssl/certs/ca-certificates.crt "$WORK/ca.pem" >"$WORK/bundle.pem"

for n in api.example.test 127.0.0.1 ::1; do
    expect ok "openssl verify -x509_strict -purpose sslserver $n" \
        openssl verify -x509_strict -purpose sslserver -CAfile "$WORK/ca.pem" "$WORK/$n.pem"
done
expect fail "openssl verify under another CA" \
    openssl verify -CAfile "$WORK/other/ca.pem" "$WORK/api.example.test.pem"

check_name api.example.test
check_ip 127.0.0.1 127.0.0.1
if ip -6 addr show dev lo 2>/dev/null | grep -q 'inet6 ::1/128'; then
    check_ip ::1 '[::1]'
else
    echo "skip ::1 (no IPv6 loopback)"
fi
start_server localhost 127.0.0.1 # fetch resolves the name itself; localhost is loopback
EXTRA=$WORK/ca.pem expect ok "node fetch NODE_EXTRA_CA_CERTS localhost" node_get fetch localhost "$PORT"

if [ "$FAILS" -ne 0 ]; then
    echo "mitm verify: $FAILS failed"
    exit 1
fi
echo "mitm verify: all passed"
