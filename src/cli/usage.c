/* Usage texts, one per command, printed by --help and `runtime help`. */
#include "cli.h"

#include <stdio.h>
#include <string.h>

static const char top_usage[] =
    "Usage: runtime [--api-url URL | --socket PATH] [--state-dir DIR] COMMAND ...\n"
    "\n"
    "The command line client of runtimed: sandboxes, their MCP servers, secrets,\n"
    "accounts.\n"
    "\n"
    "Sandboxes (ID is a sandbox id or name):\n"
    "  sandbox create [OPTIONS]                create a sandbox, print its id\n"
    "  sandbox run [--keep] [OPTIONS] -- CMD [ARG...]\n"
    "                                          create a sandbox, run CMD, delete it\n"
    "  sandbox exec ID [OPTIONS] -- CMD [ARG...]\n"
    "                                          run CMD in it, exit with its status\n"
    "  sandbox list [--label K=V] [--json]     list sandboxes\n"
    "  sandbox get ID [--json]                 show a sandbox\n"
    "  sandbox rm ID [ID...]                   delete sandboxes\n"
    "  sandbox pause ID | wake ID              freeze or thaw a sandbox\n"
    "  sandbox hibernate ID                    its memory to disk (gvisor: an image, its\n"
    "                                          processes ended; ns: swap); the next\n"
    "                                          request restores them\n"
    "  sandbox stop ID | start ID              end its processes, keeping its files;\n"
    "                                          build it again on them\n"
    "  sandbox network ID [--internet on|off] [--allow HOST]... [--deny HOST]... [--clear]\n"
    "                     [--json]\n"
    "                                          show or change where it may connect\n"
    "  sandbox cp LOCAL ID:PATH | ID:PATH LOCAL\n"
    "                                          copy a file in or out\n"
    "  sandbox events ID [--follow] [--json]   show its events (egress, secrets, MCP)\n"
    "  sandbox mcp catalog [--json]\n"
    "  sandbox mcp ID start SERVER... [--secret SERVER.ENV=SECRET]...\n"
    "                 [--fingerprint SERVER=HASH]... [--wait SECONDS]\n"
    "  sandbox mcp ID [--json]\n"
    "  sandbox mcp ID stop SERVER\n"
    "  sandbox mcp ID logs SERVER [--follow]   what an MCP server wrote on stderr\n"
    "\n"
    "Secrets (API keys that never enter a sandbox):\n"
    "  secret set NAME --host HOST... [--method M]... [--path P]... [--header H] [--from-env VAR]\n"
    "                                          save a secret; the value on stdin\n"
    "  secret list [--json]                    list secrets (never their values)\n"
    "  secret rm NAME                          delete a secret\n"
    "\n"
    "MCP review, usage:\n"
    "  mcp fingerprint [FILE|-] [--json]       fingerprint of a tool list, to pin it\n"
    "  mcp review OLD NEW                      what changed, and suspicious text\n"
    "  usage [--json]                          what each sandbox used and what it cost\n"
    "  usage --estimate [OPTIONS]              a month's cost of a fleet of sandboxes\n"
    "\n"
    "Accounts (admin key only; each account has its own API key and sees only its own):\n"
    "  account create NAME [--max-sandboxes N] [--max-memory MiB] [--json]\n"
    "                                          create an account, print its API key once\n"
    "  account list [--json]                   list accounts, what they hold, their limits\n"
    "  account key NAME [--json]               a new API key for it (rotation)\n"
    "  account rm NAME                         remove it with its sandboxes and secrets\n"
    "\n"
    "This machine's own key, approved in a browser (docs/login.md):\n"
    "  login [--no-browser] [--wait] [--agent-name NAME]\n"
    "                                          connect it; the key is saved for later\n"
    "  logout                                  revoke it and remove the saved file\n"
    "\n"
    "Global options:\n"
    "  --api-url URL    the daemon's HTTP API, e.g. http://127.0.0.1:7070\n"
    "                   (default: $RUNTIME_API_URL, else the unix socket)\n"
    "  --socket PATH    the daemon's unix socket\n"
    "                   (default: $RUNTIME_SOCKET, else /run/runtime/api.sock)\n"
    "  --state-dir DIR  read the API key from DIR/admin.key\n"
    "  -h, --help       show this help (each command has its own --help)\n"
    "  --version        show the version\n"
    "\n"
    "The API key is $RUNTIME_API_KEY, else the key `runtime login` saved for\n"
    "$RUNTIME_API_URL, else STATE/admin.key where STATE is\n"
    "--state-dir, $RUNTIME_STATE_DIR or /var/lib/runtime. A daemon serving TLS\n"
    "with a private CA's certificate: set $RUNTIME_CA_FILE to the CA's PEM file.\n";

static const char sandbox_usage[] =
    "Usage: runtime sandbox COMMAND ...\n"
    "\n"
    "Commands (ID is a sandbox id or name):\n"
    "  create [OPTIONS]                        create a sandbox, print its id\n"
    "  run [--keep] [OPTIONS] -- CMD [ARG...]  create a sandbox, run CMD, delete it\n"
    "  exec ID [OPTIONS] -- CMD [ARG...]       run CMD in it, exit with its status\n"
    "  list [--label K=V] [--json]             list sandboxes\n"
    "  get ID [--json]                         show a sandbox\n"
    "  rm ID [ID...]                           delete sandboxes\n"
    "  pause ID | wake ID                      freeze or thaw a sandbox\n"
    "  hibernate ID                            its memory to disk (gvisor: an image, its\n"
    "                                          processes ended; ns: swap); the next\n"
    "                                          request restores them\n"
    "  stop ID | start ID                      end its processes, keeping its files;\n"
    "                                          build it again on them\n"
    "  network ID [--internet on|off] [--allow HOST]... [--clear] [--json]\n"
    "                                          show or change where it may connect\n"
    "  cp LOCAL ID:PATH | ID:PATH LOCAL        copy a file in or out\n"
    "  events ID [--follow] [--json]           show its events (egress, secrets, MCP)\n"
    "  mcp ...                                 MCP servers in a sandbox\n"
    "\n"
    "Run 'runtime sandbox COMMAND --help' for a command's options.\n";

#define CREATE_OPTIONS                                                                             \
    "  --name N              a unique name, usable in place of the id\n"                           \
    "  --memory MiB          memory limit (default 1024)\n"                                        \
    "  --cpus N              CPU limit, fractions allowed, e.g. 0.5 (default 1; at most the\n"     \
    "                        host's online CPUs)\n"                                                \
    "  --disk MiB            size limit of /workspace (default 2048)\n"                            \
    "  --idle-pause SECONDS  pause after this long without traffic (default 300)\n"                \
    "  --hibernate-after SECONDS\n"                                                                \
    "                        hibernate once paused this long (ns: where the host has swap;\n"      \
    "                        default: the daemon's --hibernate-after, 300; 0 never)\n"             \
    "  --label K=V           a label to find the sandbox by; repeatable\n"                         \
    "  --env K=V             an environment variable; repeatable\n"                                \
    "  --allow HOST          a host the sandbox may reach; repeatable\n"                           \
    "  --no-internet         turn internet access off (network.internet = false)\n"                \
    "  --isolation DRIVER    ns (namespaces, seccomp and cgroups on the host's kernel) or\n"       \
    "                        gvisor (gVisor's runsc: a kernel of its own); fixed once\n"           \
    "                        created (default: the daemon's --driver)\n"

static const char create_usage[] = "Usage: runtime sandbox create [OPTIONS]\n"
                                   "\n"
                                   "Creates a sandbox and prints its id.\n"
                                   "\n"
                                   "Options:\n" CREATE_OPTIONS;

static const char run_usage[] =
    "Usage: runtime sandbox run [--keep] [OPTIONS] -- CMD [ARG...]\n"
    "\n"
    "Creates a sandbox, runs CMD in /workspace, prints its output and deletes the\n"
    "sandbox (also when the command fails or on Ctrl-C). Exits with CMD's status,\n"
    "124 when it timed out. Standard input, unless a terminal, is passed to CMD.\n"
    "\n"
    "Options:\n"
    "  --keep                keep the sandbox and print its id on stderr\n"
    "  --cwd DIR             working directory of CMD (default /workspace)\n"
    "  --timeout SECONDS     stop CMD after this long (default 60)\n" CREATE_OPTIONS;

static const char exec_usage[] =
    "Usage: runtime sandbox exec ID [OPTIONS] -- CMD [ARG...]\n"
    "\n"
    "Runs CMD in the sandbox ID, prints its output (stdout to stdout, stderr to\n"
    "stderr) and exits with its status, 124 when it timed out. Standard input,\n"
    "unless a terminal, is read to its end and passed to CMD.\n"
    "\n"
    "Options:\n"
    "  --env K=V             an environment variable; repeatable\n"
    "  --cwd DIR             working directory (default /workspace)\n"
    "  --timeout SECONDS     stop CMD after this long (default 60)\n";

static const char list_usage[] =
    "Usage: runtime sandbox list [--label K=V]... [--json]\n"
    "\n"
    "Lists sandboxes: ID NAME STATUS CREATED MEMORY CPUS ISOLATION LABELS.\n"
    "\n"
    "Options:\n"
    "  --label K=V   only sandboxes with this label\n"
    "  --json        print them as a JSON array (every page)\n";

static const char get_usage[] = "Usage: runtime sandbox get ID [--json]\n"
                                "\n"
                                "Shows a sandbox.\n"
                                "\n"
                                "Options:\n"
                                "  --json        print the API's JSON\n";

static const char rm_usage[] =
    "Usage: runtime sandbox rm ID [ID...]\n"
    "\n"
    "Deletes sandboxes and everything in them; prints each one deleted.\n";

static const char pause_usage[] =
    "Usage: runtime sandbox pause ID [--json]\n"
    "\n"
    "Freezes a sandbox's processes; it keeps its memory and files, and while paused\n"
    "only the files it stores are billed. Prints: sandbox NAME (ID) paused\n"
    "\n"
    "Options:\n"
    "  --json        print the API's JSON of the sandbox\n";

static const char hibernate_usage[] =
    "Usage: runtime sandbox hibernate ID [--json]\n"
    "\n"
    "Writes a sandbox's memory to an image on disk and ends its processes (a running\n"
    "one is paused first); it then costs storage only. The next request (an MCP call,\n"
    "an exec, a file, `sandbox wake`) restores it, its processes and their memory\n"
    "with it. gvisor sandboxes only. Prints: sandbox NAME (ID) hibernated\n"
    "\n"
    "Options:\n"
    "  --json        print the API's JSON of the sandbox\n";

static const char wake_usage[] = "Usage: runtime sandbox wake ID [--json]\n"
                                 "\n"
                                 "Thaws a paused sandbox, or restores a hibernated one. Prints:\n"
                                 "sandbox NAME (ID) woken\n"
                                 "(`sandbox resume ID` is the same.)\n"
                                 "\n"
                                 "Options:\n"
                                 "  --json        print the API's JSON of the sandbox\n";

static const char stop_usage[] =
    "Usage: runtime sandbox stop ID [--json]\n"
    "\n"
    "Ends every process of a sandbox, its MCP servers too. It keeps its /workspace,\n"
    "settings, name, and its MCP servers' URL and token; while stopped only the files\n"
    "it stores are billed. `runtime sandbox start ID` builds it again on them.\n"
    "Prints: sandbox NAME (ID) stopped\n"
    "\n"
    "Options:\n"
    "  --json        print the API's JSON of the sandbox\n";

static const char start_usage[] =
    "Usage: runtime sandbox start ID [--json]\n"
    "\n"
    "Builds a stopped (or failed) sandbox again on its /workspace and starts its MCP\n"
    "servers, at the URL and with the token they had. Prints: sandbox NAME (ID) started\n"
    "\n"
    "Options:\n"
    "  --json        print the API's JSON of the sandbox\n";

static const char cp_usage[] =
    "Usage: runtime sandbox cp LOCAL ID:PATH\n"
    "       runtime sandbox cp ID:PATH LOCAL\n"
    "\n"
    "Copies one file into or out of a sandbox. LOCAL - is stdin or stdout. A\n"
    "relative PATH is relative to /workspace; a PATH ending in / or a LOCAL that\n"
    "is a directory takes the other side's file name. The copy keeps the file's\n"
    "permission bits, as docker cp does (a file from stdin gets 0644). Write a\n"
    "local path that contains ':' as ./NAME.\n";

static const char network_usage[] =
    "Usage: runtime sandbox network ID [--internet on|off] [--allow HOST]... [--deny HOST]...\n"
    "                               [--clear] [--json]\n"
    "\n"
    "Shows or changes where the sandbox ID may connect. The change takes effect at\n"
    "once, also on open connections. Without options, shows the current policy:\n"
    "\n"
    "  internet: on\n"
    "  allow: api.github.com, *.example.com\n"
    "  deny: tracker.example.com\n"
    "\n"
    "With no allow list the sandbox reaches any public host; with an empty one (the\n"
    "API's \"allow\": []) or with internet off, none. A denied host is refused\n"
    "whatever else says. The hosts of the sandbox's catalog MCP servers stay\n"
    "reachable in every case. Private, loopback and metadata addresses are always\n"
    "refused.\n"
    "\n"
    "Options:\n"
    "  --internet on|off     turn internet access on or off (off empties an allow list:\n"
    "                        the API reads internet off with hosts listed as those\n"
    "                        hosts; on again, add the hosts back with --allow)\n"
    "  --allow HOST          add a host to the allow list (e.g. api.github.com,\n"
    "                        *.example.com); repeatable\n"
    "  --deny HOST           add a host, *.domain, address or CIDR never to reach\n"
    "                        (HOST:PORT: that port only); repeatable\n"
    "  --clear               drop the allow and deny lists first (then add any --allow\n"
    "                        and --deny); with no --allow any public host again\n"
    "  --json                print the API's JSON of the network policy\n";

static const char events_usage[] =
    "Usage: runtime sandbox events ID [--follow] [--json]\n"
    "\n"
    "Prints the sandbox's events, oldest first, one a line:\n"
    "\n"
    "  TIME KIND KEY=VALUE...\n"
    "\n"
    "e.g. 2026-11-29T18:46:33.962Z egress.refused host=local.test port=80 ...\n"
    "Kinds: egress.refused, egress.allowed, secret.used, secret.misdirected,\n"
    "mcp.refused, mcp.exited, ... A VALUE with spaces or quotes, and any value\n"
    "that is not text, is written as JSON.\n"
    "\n"
    "Options:\n"
    "  --follow              keep printing new events until Ctrl-C (exit 0) or\n"
    "                        until the sandbox is deleted (exit 1)\n"
    "  --json                print each event as the API's JSON, one a line\n";

static const char secret_usage[] =
    "Usage: runtime secret COMMAND ...\n"
    "\n"
    "Secrets are API keys that never enter a sandbox. Inside every sandbox the\n"
    "variable NAME holds a placeholder (RUNTIME_PH_...); the egress proxy puts the\n"
    "value in its place only in HTTPS requests to the secret's hosts (and methods\n"
    "and paths, when given).\n"
    "\n"
    "Commands:\n"
    "  set NAME --host HOST... [--method M]... [--path GLOB]... [--from-env VAR]\n"
    "                                          save a secret; the value on stdin\n"
    "  list [--json]                           list secrets (never their values)\n"
    "  rm NAME                                 delete a secret\n"
    "\n"
    "Run 'runtime secret COMMAND --help' for a command's options.\n";

static const char secret_set_usage[] =
    "Usage: runtime secret set NAME --host HOST... [--method M]... [--path P]...\n"
    "                          [--header H [--format F]] [--env VAR] [--from-env VAR]\n"
    "\n"
    "Saves the secret NAME, or replaces the one of that name (PUT\n"
    "/v1/egress-secrets/NAME). Inside every sandbox $NAME (or $VAR, --env) holds a\n"
    "placeholder that the egress proxy swaps for the value only in HTTPS requests to\n"
    "HOST (and with method M and a path P, when given). Replacing a secret keeps\n"
    "its placeholder; replacing it without --method or --path clears them.\n"
    "\n"
    "The value is read from standard input to its end, with one trailing newline\n"
    "removed; on a terminal it is asked for without echo. Give it as\n"
    "  printf '%s' \"$KEY\" | runtime secret set NAME --host api.example.com\n"
    "  runtime secret set NAME --host api.example.com < key.txt\n"
    "or with --from-env. It is never printed and never on a command line. It is\n"
    "at most 8 KiB of visible ASCII (spaces allowed).\n"
    "\n"
    "Options:\n"
    "  --host HOST       a host the value may be sent to, e.g. api.github.com or\n"
    "                    *.example.com; required, repeatable (at most 16)\n"
    "  --method M        only in requests with this method (GET, POST, ...);\n"
    "                    repeatable (default: any)\n"
    "  --path P          only in requests to this path: exact, or a prefix ending\n"
    "                    in /*, e.g. /repos/acme/*; repeatable (default: any).\n"
    "                    The methods and paths are one rule; the API takes up to 16\n"
    "  --header H        set the field H on every request to the hosts (that the\n"
    "                    rule allows), replacing the sandbox's, e.g. Authorization\n"
    "  --format F        the field's text, {value} where the value goes, e.g.\n"
    "                    'token {value}' (default: the value alone)\n"
    "  --env VAR         the variable sandboxes see the placeholder in (default NAME)\n"
    "  --from-env VAR    take the value from the environment variable VAR\n"
    "\n"
    "Prints: secret NAME saved (hosts: H, ...; rules: any|M,... P,... | ...)\n";

static const char secret_list_usage[] =
    "Usage: runtime secret list [--json]\n"
    "\n"
    "Lists secrets: NAME HOSTS RULES HEADER UPDATED. Values are never shown.\n"
    "\n"
    "Options:\n"
    "  --json        print the API's JSON\n";

static const char secret_rm_usage[] =
    "Usage: runtime secret rm NAME\n"
    "\n"
    "Deletes the secret NAME. Its placeholder is no longer swapped for the value\n"
    "anywhere, and new commands in sandboxes no longer get the variable.\n";

static const char mcp_usage[] =
    "Usage: runtime mcp COMMAND ...\n"
    "\n"
    "Checks of an MCP server's tool list, made here without the daemon. A list is\n"
    "the tools array of tools/list, its result {\"tools\": [...]} or the whole\n"
    "JSON-RPC response {\"result\": {\"tools\": [...]}}, in a file or on stdin (-).\n"
    "\n"
    "Commands:\n"
    "  fingerprint [FILE|-] [--json]          the list's fingerprint, to pin it\n"
    "  review OLD NEW                         what changed since the reviewed list\n"
    "                                         OLD, and suspicious text in NEW\n"
    "\n"
    "Run 'runtime mcp COMMAND --help' for a command's options.\n";

static const char mcp_fingerprint_usage[] =
    "Usage: runtime mcp fingerprint [FILE|-] [--json]\n"
    "\n"
    "Prints the fingerprint of a tool list (FILE, or stdin): the first 16 hex digits\n"
    "of the SHA-256 of its canonical JSON, the tools sorted by name. Python's\n"
    "json.dumps(tools, sort_keys=True, separators=(\",\", \":\")) gives the same text,\n"
    "so a fingerprint taken elsewhere checks here. Pin it with\n"
    "  runtime sandbox mcp ID start SERVER --fingerprint SERVER=HASH\n"
    "\n"
    "Options:\n"
    "  --json        print {\"fingerprint\", \"sha256\" (all 64 digits), \"tools\" (how many)}\n";

static const char mcp_review_usage[] =
    "Usage: runtime mcp review OLD NEW\n"
    "\n"
    "Compares the tool list NEW with OLD, the one reviewed before (each a file, one\n"
    "of them may be - for stdin), and prints:\n"
    "\n"
    "  old: HASH (N tools) and new: HASH (N tools), then changed or unchanged\n"
    "  added tool, removed tool, added parameter, removed parameter: NAME\n"
    "  changed description: TOOL, with the old and the new text\n"
    "  changed field: TOOL.FIELD (annotations, inputSchema, title, ...)\n"
    "  PATH: KIND: \"EXCERPT\" for every suspicious string of NEW\n"
    "\n"
    "Every string the model reads is checked: names, titles, descriptions, parameter\n"
    "descriptions, enum values, defaults, examples, keys. KIND is one of: text aimed\n"
    "at the model (<IMPORTANT>, \"ignore previous\"), request to hide, secret file\n"
    "path (~/.ssh, .env, mcp.json), URL, order about when to call, invisible\n"
    "characters, direction-changing characters, hidden text in tag characters,\n"
    "non-ASCII letters in a name, two tools of this name, duplicate key. A finding\n"
    "whose text OLD had at the same place ends with (in OLD too). Invisible and\n"
    "non-ASCII characters are shown as \\uXXXX.\n"
    "\n"
    "The patterns are a tripwire for the reviewer; the hash is the guarantee.\n"
    "\n"
    "Exit status: 0 when unchanged and nothing was found, 1 when something changed\n"
    "or was found (or a list could not be read), 2 for a usage error.\n";

static const char usage_usage[] =
    "Usage: runtime usage [--json]\n"
    "       runtime usage --estimate [--count N] [--vcpu N] [--gib N] [--busy-hours H]\n"
    "                     [--avg-cpu V] [--stored-gb G] [--price-vcpu-hour USD]\n"
    "                     [--price-gib-hour USD] [--price-gb-month USD] [--json]\n"
    "\n"
    "What each sandbox used since it was created, and what it cost, removed ones\n"
    "included: NAME STATUS, CPU s (CPU seconds used), vCPU-h (vCPU-hours billed),\n"
    "GiB-h (memory GiB-hours), PAUSED GB-h (GB-hours stored while paused), COST $;\n"
    "then the TOTAL and the rates the daemon bills at.\n"
    "\n"
    "While running, a sandbox is billed for the CPU it used, at least 0.05 vCPU,\n"
    "and its memory limit; while paused, only for the files in its /workspace.\n"
    "\n"
    "With --estimate, prints (without asking the daemon) what COUNT sandboxes cost\n"
    "in a month of 30 days: each with VCPU vCPUs and GIB GiB of memory, running\n"
    "H hours a day at V vCPU on average, and paused the rest of the day with G GB\n"
    "stored; and what one running sandbox costs an hour.\n"
    "\n"
    "Options:\n"
    "  --json                 print the API's JSON (with --estimate: {month, rates,\n"
    "                         fleet})\n"
    "  --estimate             estimate the cost of a fleet\n"
    "  --count N              how many sandboxes (default 1)\n"
    "  --vcpu N               vCPUs each (default 1)\n"
    "  --gib N                memory of each in GiB (default 1)\n"
    "  --busy-hours H         hours a day each runs (default 24)\n"
    "  --avg-cpu V            vCPUs used on average while running (default 0.05,\n"
    "                         the least billed)\n"
    "  --stored-gb G          GB in each one's /workspace while paused (default 0)\n"
    "  --price-vcpu-hour USD  price of a vCPU-hour (default $RUNTIME_PRICE_VCPU_HOUR,\n"
    "                         else 0.025)\n"
    "  --price-gib-hour USD   price of a GiB-hour of memory (default\n"
    "                         $RUNTIME_PRICE_GIB_HOUR, else 0.0075)\n"
    "  --price-gb-month USD   price of a GB-month stored while paused (default\n"
    "                         $RUNTIME_PRICE_GB_MONTH, else 0.08)\n"
    "\n"
    "The daemon takes its prices from the same variables (or its --price-* options).\n";

static const char account_usage[] =
    "Usage: runtime account COMMAND ...\n"
    "\n"
    "Accounts, managed with the admin key (STATE/admin.key), which acts as the\n"
    "account default. Every sandbox and secret belongs to an account; an account's\n"
    "API key sees and changes only what is its own (anything else is not found).\n"
    "One account per customer, each with its own key and limits.\n"
    "\n"
    "Commands:\n"
    "  create NAME [--max-sandboxes N] [--max-memory MiB] [--json]\n"
    "                                          create an account, print its API key once\n"
    "  list [--json]                           list accounts, what they hold, their limits\n"
    "  key NAME [--json]                       a new API key for it (rotation)\n"
    "  rm NAME                                 remove it with its sandboxes and secrets\n"
    "\n"
    "Run 'runtime account COMMAND --help' for a command's options.\n";

static const char account_create_usage[] =
    "Usage: runtime account create NAME [--max-sandboxes N] [--max-memory MiB] [--json]\n"
    "\n"
    "Creates the account NAME (1-63 of a-z, 0-9, '-', '_', '.', starting with a\n"
    "letter or digit) and prints its API key on stdout, alone on its line. The key\n"
    "is shown only this once (the daemon keeps only its hash): keep it, e.g.\n"
    "  runtime account create acme > acme.key\n"
    "The account's programs give it as RUNTIME_API_KEY (the SDKs: apiKey/api_key):\n"
    "  RUNTIME_API_KEY=\"$(cat acme.key)\" runtime sandbox create --name customer-42\n"
    "A create past a limit is refused (HTTP 429) with a message naming the limit.\n"
    "\n"
    "Options:\n"
    "  --max-sandboxes N     at most N sandboxes at a time (default: no limit)\n"
    "  --max-memory MiB      at most this much memory (memoryMiB) over all its\n"
    "                        sandboxes (default: no limit)\n"
    "  --json                print the API's JSON (with apiKey) instead\n";

static const char account_list_usage[] =
    "Usage: runtime account list [--json]\n"
    "\n"
    "Lists accounts: NAME SANDBOXES MEMORY (what its sandboxes hold now) LIMITS\n"
    "CREATED. Keys are never shown.\n"
    "\n"
    "Options:\n"
    "  --json        print the API's JSON\n";

static const char account_key_usage[] =
    "Usage: runtime account key NAME [--json]\n"
    "\n"
    "Makes a new API key for the account NAME and prints it on stdout, shown only\n"
    "this once. The key before it keeps working until the next rotation, so that\n"
    "the account's programs can move to the new one; older keys stop working.\n"
    "\n"
    "Options:\n"
    "  --json        print the API's JSON ({name, apiKey}) instead\n";

static const char account_rm_usage[] =
    "Usage: runtime account rm NAME\n"
    "\n"
    "Removes the account NAME: its sandboxes (and everything in them), its secrets\n"
    "and its usage first, then its keys. If a sandbox cannot be removed, the account\n"
    "stays (marked removing) and the error says why; run it again.\n";

static const char login_usage[] =
    "Usage: runtime login [--no-browser] [--wait] [--agent-name NAME]\n"
    "\n"
    "Connects this machine to the daemon at RUNTIME_API_URL without a key to copy:\n"
    "prints a link and a code; a person opens the link, checks the code and chooses\n"
    "Connect agent (or approves it with POST /v1/connect/requests/CODE:approve). The\n"
    "key this machine gets is its own (revoked alone by `runtime logout`), sent\n"
    "encrypted to a key pair made for this request, and saved where Runtime Cloud's\n"
    "SDKs look: ${XDG_CONFIG_HOME:-~/.config}/runtime-cloud/<hash>.json (docs/login.md).\n"
    "Every command then uses it when RUNTIME_API_KEY is not set.\n"
    "\n"
    "  --no-browser        do not open a browser (print the link only)\n"
    "  --wait              wait up to 15 minutes for the approval (the default on a\n"
    "                      terminal; otherwise 50 seconds, then exit 124)\n"
    "  --agent-name NAME   what the approving person sees (default \"My coding agent\")\n";

static const char logout_usage[] =
    "Usage: runtime logout\n"
    "\n"
    "Revokes this machine's saved connection (of `runtime login`) to the daemon at\n"
    "RUNTIME_API_URL, and removes the saved file.\n";

struct usage_entry {
    const char *cmd;
    const char *text;
};

static const struct usage_entry entries[] = {
    {"", top_usage},
    {"sandbox", sandbox_usage},
    {"sandbox create", create_usage},
    {"sandbox run", run_usage},
    {"sandbox exec", exec_usage},
    {"sandbox list", list_usage},
    {"sandbox get", get_usage},
    {"sandbox rm", rm_usage},
    {"sandbox pause", pause_usage},
    {"sandbox hibernate", hibernate_usage},
    {"sandbox wake", wake_usage},
    {"sandbox resume", wake_usage},
    {"sandbox stop", stop_usage},
    {"sandbox start", start_usage},
    {"sandbox network", network_usage},
    {"sandbox cp", cp_usage},
    {"sandbox events", events_usage},
    {"secret", secret_usage},
    {"secret set", secret_set_usage},
    {"secret list", secret_list_usage},
    {"secret rm", secret_rm_usage},
    {"mcp", mcp_usage},
    {"mcp fingerprint", mcp_fingerprint_usage},
    {"mcp review", mcp_review_usage},
    {"usage", usage_usage},
    {"account", account_usage},
    {"account create", account_create_usage},
    {"account list", account_list_usage},
    {"account key", account_key_usage},
    {"account rm", account_rm_usage},
    {"login", login_usage},
    {"logout", logout_usage},
};

bool usage_print(const char *cmd, FILE *f)
{
    for (size_t i = 0; i < ARRAY_LEN(entries); i++) {
        if (strcmp(entries[i].cmd, cmd) == 0) {
            fputs(entries[i].text, f);
            return true;
        }
    }
    /* `sandbox mcp` keeps its texts next to its code. */
    const char *p = sandbox_mcp_usage(cmd);
    if (p) fputs(p, f);
    return p != NULL;
}
