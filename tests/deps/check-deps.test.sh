#!/bin/bash
# Tests scripts/check-deps: its scanner on small sources with the constructs it
# must understand (and the look-alikes it must not take for commands), then the
# check itself: the real scripts/install-deps passes, and a copy of it without
# one package fails, naming that package and what needs it.
#   tests/deps/check-deps.test.sh      (after scripts/install-deps; no root needed)
set -euo pipefail
cd "$(dirname "$0")/../.."
WORK=$(mktemp -d /tmp/check-deps-test.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
FAILS=0
pass() { echo "ok   $1"; }
fail() {
    echo "FAIL $1"
    FAILS=$((FAILS + 1))
}

# --- the scanner: expected "name kind file:line" lines, in any order ----------------
cat >"$WORK/fixture.sh" <<'FIXTURE'
#!/bin/bash
# a comment naming notcmd1
set -euo pipefail
X=$(dirname "$0")
FOO=bar env -i BAZ=1 printenv HOME
if grep -q x /dev/null; then sed -n 1p /dev/null; fi
arr=(notcmd2 notcmd3)
case "${1:-}" in
pat1) head -n 1 /dev/null ;;
-h | --help) tail /dev/null ;;
esac
cat <<'EOF'
notcmd4 in a heredoc
EOF
echo "$(uname -r) and `nproc`"
runner() {
    local a=$1
    shift
    "$@"
}
runner arg1 sha256sum /dev/null
(( X = 2 )) && timeout 5 sleep 1
command -v notcmd5 >/dev/null || true
exec 3<>/dev/null
awk '{ print notcmd6; x = 1; }' /dev/null
[[ $X == 1 ]] || mkdir -p "$WORK" \
    && ln -s a b
need_tools "jq-package" jq
FIXTURE
cat >"$WORK/fixture.mjs" <<'FIXTURE'
import { spawn, spawnSync } from 'node:child_process';
spawnSync('ip', ['link']);
spawn('openssl', ['version']);
await d.exec(sb.id, ['kill', '-9', '1']);
await d.mustExec(sb.id, ['sh', '-c', 'ps -e | wc -l']);
await d.sh(sb.id, `curl -s ${url}; echo done`);
for (const cmd of ['unshare -U true', 'mount -t tmpfs none /tmp']) {
  await d.sh(sb.id, `${cmd} 2>&1`);
}
await d.exec(sb.id, ['python3', '-m', 'venv', '/x']);
const m = /x/.exec('notcmd7'); db.run('notcmd8');
FIXTURE
cat >"$WORK/fixture.c" <<'FIXTURE'
static void f(void)
{
    const char *argv[] = {"mkfs.ext4", "-q", NULL};
    execvp(argv[0], (char *const *)argv);
    static const char *const names[] = {"notcmd9", "other", NULL};
    const char *sh[] = {"sh", "-c", "stat \"$1\" && "
                        "exec \"$1/bin/x\" -m pip list", "sh", NULL};
    struct spec rs = {.argv = sh};
}
FIXTURE
mkdir "$WORK/mk"
printf '%s\n' 'CC ?= cc' 'TOOL := clang' 'all:' \
    $'\t@$(CC) -o x $(shell pkg-config --libs foo)' $'\t$(TOOL) -c y' $'\t$(MAKE) other' \
    >"$WORK/mk/Makefile"
sort >"$WORK/want" <<'WANT'
dirname	cmd	fixture.sh:4
env	cmd	fixture.sh:5
printenv	cmd	fixture.sh:5
grep	cmd	fixture.sh:6
sed	cmd	fixture.sh:6
head	cmd	fixture.sh:9
tail	cmd	fixture.sh:10
cat	cmd	fixture.sh:12
uname	cmd	fixture.sh:15
nproc	cmd	fixture.sh:15
sha256sum	cmd	fixture.sh:21
timeout	cmd	fixture.sh:22
sleep	cmd	fixture.sh:22
awk	cmd	fixture.sh:25
mkdir	cmd	fixture.sh:26
ln	cmd	fixture.sh:27
jq	cmd	fixture.sh:28
ip	cmd	fixture.mjs:2
openssl	cmd	fixture.mjs:3
kill	cmd	fixture.mjs:4
sh	cmd	fixture.mjs:5
ps	cmd	fixture.mjs:5
wc	cmd	fixture.mjs:5
curl	cmd	fixture.mjs:6
unshare	cmd	fixture.mjs:7
mount	cmd	fixture.mjs:7
python3	cmd	fixture.mjs:10
venv	pymod	fixture.mjs:10
mkfs.ext4	cmd	fixture.c:3
sh	cmd	fixture.c:6
stat	cmd	fixture.c:6
cc	cmd	Makefile:4
pkg-config	cmd	Makefile:4
clang	cmd	Makefile:5
make	cmd	Makefile:6
WANT
# need_tools is a TOOL_CHECKERS function: the fixture stands in for bench/lib.sh.
if ! scripts/check-deps --scan "$WORK/fixture.sh" "$WORK/fixture.mjs" "$WORK/fixture.c" \
    "$WORK/mk/Makefile" >"$WORK/got.raw" 2>"$WORK/err"; then
    fail "check-deps --scan ran: $(cat "$WORK/err")"
fi
sort -u "$WORK/got.raw" >"$WORK/got"
if diff -u "$WORK/want" "$WORK/got" >"$WORK/diff"; then
    pass "the scanner finds the commands in shell, JavaScript, C and Makefile fixtures, and nothing else"
else
    fail "the scanner (- wanted, + found):"
    sed 's/^/     /' "$WORK/diff"
fi

# --- the check against the real list -------------------------------------------
if scripts/check-deps >"$WORK/real.out" 2>&1; then
    pass "scripts/install-deps lists every package used ($(tail -n 1 "$WORK/real.out" | grep -o '[0-9]* uses'))"
else
    fail "scripts/check-deps fails on the real scripts/install-deps:"
    sed 's/^/     /' "$WORK/real.out"
fi

# --- copies missing one package: each must fail, naming it and a use ------------
# without PACKAGE EXPECTED-PACKAGE-IN-MESSAGE A-USE-IN-MESSAGE
without() {
    local pkg=$1 named=$2 use=$3 copy=$WORK/install-deps-without-$1
    sed -E "/^(runtime|test)_pkgs=\(/,/\)/ s/(^|[( ])$pkg([ )]|$)/\1\2/" scripts/install-deps >"$copy"
    if grep -Eq "(^|[( ])$pkg([ )]|$)" "$copy"; then
        fail "could not remove $pkg from the copy"
        return
    fi
    if scripts/check-deps --install-deps "$copy" >"$WORK/out" 2>&1; then
        fail "without $pkg: check-deps passed"
    elif grep -q "FAIL package $named is not in runtime_pkgs or test_pkgs" "$WORK/out" && grep -qF "$use" "$WORK/out"; then
        pass "without $pkg: fails naming $named and $use"
    else
        fail "without $pkg: the failure does not name $named and $use:"
        sed 's/^/     /' "$WORK/out"
    fi
}
without libmnl-dev libmnl-dev 'pkg-config module libmnl: Makefile:'
without libnftables-dev libnftables-dev 'pkg-config module libnftables: Makefile:'
without python3-venv python3.11-venv 'add python3-venv, which brings it'
without chromium chromium 'chromium (/usr/bin/chromium): SANDBOX_NEEDS'
without openssl openssl 'openssl (/usr/bin/openssl): bench/'
without procps procps 'ps (/usr/bin/ps): tests/'
without curl curl 'curl (/usr/bin/curl):'
without build-essential gcc 'cc (/usr/bin/cc): Makefile:'

# --- copies with a package moved from runtime_pkgs to test_pkgs: what runtimed, its
# sandboxes or scripts/demo use must fail (install-deps --runtime would miss it)
moved() {
    local pkg=$1 use=$2 copy=$WORK/install-deps-moved-$1
    sed -E "/^runtime_pkgs=\(/,/\)/ s/(^|[( ])$pkg([ )]|$)/\1\2/; s/^test_pkgs=\(/test_pkgs=($pkg /" \
        scripts/install-deps >"$copy"
    if scripts/check-deps --install-deps "$copy" >"$WORK/out" 2>&1; then
        fail "$pkg only in test_pkgs: check-deps passed"
    elif grep -q "FAIL package $pkg is not in runtime_pkgs (what install-deps --runtime installs)" "$WORK/out" &&
        grep -qF "$use" "$WORK/out" && ! grep -q "is not in runtime_pkgs or test_pkgs" "$WORK/out"; then
        pass "$pkg only in test_pkgs: fails naming it for the runtime and $use"
    else
        fail "$pkg only in test_pkgs: the failure does not name it for the runtime and $use:"
        sed 's/^/     /' "$WORK/out"
    fi
}
moved chromium 'chromium (/usr/bin/chromium): SANDBOX_NEEDS'
moved git 'git (/usr/bin/git): SANDBOX_NEEDS'
moved libmnl-dev 'pkg-config module libmnl: Makefile:'

# --- pip requirements: a copy that does not install the real file; a file not pinned
req=tests/cloud/requirements-mcp.txt
grep -vF "$req" scripts/install-deps >"$WORK/install-deps-without-req"
if scripts/check-deps --install-deps "$WORK/install-deps-without-req" >"$WORK/out" 2>&1; then
    fail "without installing $req: check-deps passed"
elif grep -qF "FAIL $req is not installed by" "$WORK/out"; then
    pass "without installing $req: fails naming it"
else
    fail "without installing $req: the failure does not name it:"
    sed 's/^/     /' "$WORK/out"
fi
printf '%s\n' '# a comment' 'mcp==2.3.0 --hash=sha256:dd0c44c089d16453e8ae31a3877a0054d7a2314caaa81f5e0541b9b1734b2377' \
    'anyio>=4' 'httpx==0.28.1' >"$WORK/requirements-loose.txt"
if scripts/check-deps --requirements "$WORK/requirements-loose.txt" >"$WORK/out" 2>&1; then
    fail "requirements without exact versions and hashes: check-deps passed"
elif grep -qF 'requirements-loose.txt:3: "anyio>=4" is not NAME==VERSION' "$WORK/out" &&
    grep -qF 'requirements-loose.txt:4: "httpx==0.28.1" is not NAME==VERSION' "$WORK/out" &&
    ! grep -qF 'requirements-loose.txt:2:' "$WORK/out"; then
    pass "requirements without an exact version or a hash fail, naming each line"
else
    fail "requirements without exact versions and hashes: the failure does not name lines 3 and 4 (only):"
    sed 's/^/     /' "$WORK/out"
fi

if [ "$FAILS" -ne 0 ]; then
    echo "check-deps tests: $FAILS failed"
    exit 1
fi
echo "check-deps tests: all passed"
