/* proto: the typed messages between the unprivileged server and the root keeper.
 *
 * One SOCK_SEQPACKET socketpair; every record is one message: a header, a fixed
 * payload per type (exact size checked), optional trailing NUL-separated strings,
 * and file descriptors passed with SCM_RIGHTS only where a type says so. The
 * keeper treats every byte from the server as hostile (OpenBSD imsg, OpenSSH
 * monitor): a malformed or unknown message ends the connection. */
#ifndef RUNTIME_PROTO_H
#define RUNTIME_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "../common/common.h"

#define PROTO_VERSION 2
#define PROTO_MAX_MSG 65536
#define PROTO_MAX_FDS 5
#define PROTO_MAX_STRINGS 4096 /* argv entries of an exec, and env entries */
#define PROTO_ID_LEN 32        /* sandbox ids: [a-z0-9-], NUL-terminated */
#define PROTO_PATH_LEN 1024

/* Every request the server may send, in one table (OpenSSH's mon_table, relayd's
 * imsg types): the enum, the names, the payload checks, the keeper's dispatch
 * (a handler per row: keeper.c does not build without one) and the fuzzers'
 * expectations all follow from it. Adding a message is one row and one handler.
 *   X(TYPE, name, payload struct, strings follow, fds in a success answer, needs)
 * needs: PROTO_NEEDS_NOTHING (only before HELLO), PROTO_NEEDS_HELLO, or
 * PROTO_NEEDS_SANDBOX (after HELLO, and the payload starts with the id of a
 * sandbox the keeper holds; an unknown id is answered -ENOENT).
 * Answers, all PROTO_RESULT:
 *   HELLO        -
 *   CREATE       fd readable once the sandbox died (when the driver has one)
 *   ADOPT        the same (restart); values[0]=1 adopted, 2 recreated, 3 adopted
 *                hibernated (no fd: nothing runs); with PROTO_ADOPT_ONLY, -ENOENT
 *                instead of recreated
 *   SWEEP        - ; removes the leftovers of all sandboxes not listed
 *   DESTROY      - ; a failure keeps the sandbox, so that it can be retried
 *   STOP         values[0]: the OOM kills its cgroup counted; ends every process
 *                and frees what it holds but its workspace (its directory stays):
 *                ADOPT builds it again on it
 *   FORGET       - ; removes the files of a sandbox the keeper does not hold
 *                (a stopped one); -EBUSY when it holds it
 *   EXEC         fds stdin, stdout, stderr, status
 *   OPEN_FILE    fd
 *   FREEZE       - ; flag 1 freeze, 0 thaw
 *   HIBERNATE    flag 1: its memory to an image (gvisor) or swap (ns), values[0] the
 *                bytes (0 when gvisor ended it without an image: msg says why); flag 0:
 *                back from it, fd readable once it died (as CREATE's), values[0] an
 *                enum proto_from (cold: msg says why); -ENOTSUP where it cannot
 *   STATS        values: cpu_ns, mem_bytes, pids, frozen, disk_bytes
 *   NET_SOCKETS  fds proxy, dns udp, dns tcp
 *   RENAME_FILE  - ; a file written whole under a temporary name takes its place
 *                (or, with no destination, is removed): how an upload is atomic
 *   TLS_FILES    fds certificate, key: sealed memfds holding the bytes of the
 *                --tls-cert and --tls-key files as the keeper read them now
 *                (it never parses them); -ENOENT when no TLS was given
 *   TEMPLATE     save 1: checkpoints the running sandbox as template key (its one program
 *                is MCP server `server`; it goes on running), values[0] the image's
 *                bytes; save 0: the template's image and install replace the idle
 *                sandbox's: values[0] 1, fds the program's stdin, stdout, stderr and
 *                status and the new sentry's death fd (CREATE's); values[0] 0 when the
 *                image failed and the sandbox was started again as it was (msg says
 *                why), with that death fd only; -ENOENT: no such template, -EBUSY:
 *                programs run in it, -ENOTSUP: not the gvisor driver (docs/templates.md)
 *   FILE_OP      fd: a socket on which the operation's own PROTO_RESULT arrives
 *                once a helper has carried it out in the sandbox (a recursive
 *                remove or a walk of a large tree must not hold up the keeper);
 *                that result carries, for STAT and LIST, one sealed memfd of
 *                struct proto_file_entry records (below)
 * Leaf certificates are not the keeper's: the signer process mints them
 * (mitm/mitm.h), so the keeper never parses a key the server sends. */
#define PROTO_REQUESTS(X)                                                                          \
    X(HELLO, hello, struct proto_hello, false, 0, PROTO_NEEDS_NOTHING)                             \
    X(CREATE, create, struct proto_sandbox, false, 1, PROTO_NEEDS_HELLO)                           \
    X(ADOPT, adopt, struct proto_sandbox, false, 1, PROTO_NEEDS_HELLO)                             \
    X(SWEEP, sweep, struct proto_sweep, true, 0, PROTO_NEEDS_HELLO)                                \
    X(DESTROY, destroy, struct proto_ref, false, 0, PROTO_NEEDS_SANDBOX)                           \
    X(EXEC, exec, struct proto_exec, true, 4, PROTO_NEEDS_SANDBOX)                                 \
    X(OPEN_FILE, open_file, struct proto_file, false, 1, PROTO_NEEDS_SANDBOX)                      \
    X(FREEZE, freeze, struct proto_ref, false, 0, PROTO_NEEDS_SANDBOX)                             \
    X(HIBERNATE, hibernate, struct proto_ref, false, 1, PROTO_NEEDS_SANDBOX)                       \
    X(STATS, stats, struct proto_ref, false, 0, PROTO_NEEDS_SANDBOX)                               \
    X(NET_SOCKETS, net_sockets, struct proto_ref, false, 3, PROTO_NEEDS_SANDBOX)                   \
    X(TLS_FILES, tls_files, struct proto_tls, false, 2, PROTO_NEEDS_HELLO)                         \
    X(RENAME_FILE, rename_file, struct proto_rename, false, 0, PROTO_NEEDS_SANDBOX)                \
    X(STOP, stop, struct proto_ref, false, 0, PROTO_NEEDS_SANDBOX)                                 \
    X(FORGET, forget, struct proto_ref, false, 0, PROTO_NEEDS_HELLO)                               \
    X(FILE_OP, file_op, struct proto_file_op, false, 1, PROTO_NEEDS_SANDBOX)                       \
    X(TEMPLATE, template, struct proto_template, false, 5, PROTO_NEEDS_SANDBOX)

enum proto_needs { PROTO_NEEDS_NOTHING, PROTO_NEEDS_HELLO, PROTO_NEEDS_SANDBOX };

#define PROTO_ENUM_(T, name, payload, strings, fds, needs) PROTO_##T,
enum proto_type {
    PROTO_NONE,
    PROTO_REQUESTS(PROTO_ENUM_) /* from 1: HELLO, CREATE, ... (the numbers are the wire's) */
    PROTO_RESULT,               /* k->s: proto_result */
    PROTO_TYPE_END,
};
#undef PROTO_ENUM_

/* Where a hibernated sandbox came back from (HIBERNATE's answer, values[0]). */
enum proto_from { PROTO_FROM_IMAGE, PROTO_FROM_COLD, PROTO_FROM_SWAP };

/* A request type's row, for the receiving side's generic checks. */
struct proto_request_info {
    const char *name;
    size_t payload; /* exact size, or the minimum when strings follow */
    bool strings;
    unsigned fds; /* at most, in a success answer */
    enum proto_needs needs;
};
/* The row of a request type; NULL for anything else (RESULT, unknown). */
const struct proto_request_info *proto_request(uint16_t type);

struct proto_hdr {
    uint16_t type;
    uint16_t version;
    uint32_t len;  /* payload bytes after this header */
    uint32_t id;   /* request id, echoed in the RESULT */
    uint32_t nfds; /* descriptors attached */
};

struct proto_hello {
    uint32_t version;
};

/* Everything the keeper needs to build or re-adopt a sandbox. */
struct proto_sandbox {
    char id[PROTO_ID_LEN];
    uint32_t slot; /* picks the host uid range; unique among live sandboxes */
    uint32_t memory_mib;
    uint32_t cpu_milli; /* 1000 = one CPU */
    uint32_t disk_mib;
    uint32_t pids_max;
    uint32_t driver; /* enum proto_driver: the isolation driver that builds and runs it */
    uint32_t flags;  /* PROTO_ADOPT_* */
};
/* ADOPT of a hibernated one: when its processes are gone (the host restarted), answer
 * -ENOENT rather than build it again: it is built when a request needs it. */
#define PROTO_ADOPT_ONLY 0x1u

/* The isolation drivers (src/sandbox): a sandbox keeps the one it was created with. */
enum proto_driver { PROTO_DRIVER_NS, PROTO_DRIVER_GVISOR, PROTO_DRIVER_COUNT };

struct proto_sweep {
    uint32_t count; /* ids follow as count NUL-terminated strings */
};

struct proto_ref {
    char id[PROTO_ID_LEN];
    uint32_t flag;
};

struct proto_exec {
    char id[PROTO_ID_LEN];
    char cwd[PROTO_PATH_LEN];
    uint32_t timeout_ms;
    uint32_t argc; /* then argc strings, then envc "K=V" strings */
    uint32_t envc;
    uint32_t serve; /* 1: an MCP server (struct sandbox_exec's serve); else 0 */
};

#define PROTO_KEY_LEN 65 /* a template's key: 64 lowercase hex digits */
struct proto_template {
    char id[PROTO_ID_LEN];
    char key[PROTO_KEY_LEN];
    char server[64]; /* an MCP server's name: [a-z0-9][a-z0-9_-]* */
    char pad[3];
    uint32_t save;
};

/* What the status fd of an exec carries once, when the process has ended. */
struct proto_exec_status {
    int32_t exit_code; /* 128+signal when killed by a signal, -1 when it never started */
    uint32_t timed_out;
    uint64_t duration_ms;
    int32_t start_errno; /* errno of execve when exit_code is -1 */
    int32_t signal;      /* the signal that ended it, 0 when it exited */
};

struct proto_file {
    char id[PROTO_ID_LEN];
    char path[PROTO_PATH_LEN];
    uint32_t write; /* 0: read; 1: create or truncate; 2: create, failing if it exists,
                     * open for reading too (an upload hashes what it wrote) */
    uint32_t mode;  /* writing: permission bits to set (at most 0777), 0 for the default */
};

/* Renames from to to in the sandbox, as its user; to "" removes from. With
 * keep_mode, from takes the permission bits of the to it replaces. */
struct proto_rename {
    char id[PROTO_ID_LEN];
    char from[PROTO_PATH_LEN];
    char to[PROTO_PATH_LEN];
    uint32_t keep_mode;
};

/* FILE_OP: Runtime Cloud's changes of and looks at a sandbox's file tree, done by a
 * helper as the sandbox's user, inside its mount namespace. */
enum proto_file_op_kind {
    PROTO_FILE_STAT = 1, /* path: one record (symlinks not followed), path "" */
    PROTO_FILE_LIST,     /* path's entries to depth, at most limit, glob in path2 */
    PROTO_FILE_MKDIR,    /* values[0]: 1 made, 0 it existed (with PARENTS) */
    PROTO_FILE_REMOVE,   /* values[0]: 1 removed, 0 there was nothing */
    PROTO_FILE_RENAME,   /* path to path2 */
    PROTO_FILE_CHMOD,    /* path (its target when a symlink) gets mode */
    PROTO_FILE_OP_END,
};
#define PROTO_FILE_PARENTS 0x1u   /* MKDIR: make missing parents, an existing directory is fine */
#define PROTO_FILE_RECURSIVE 0x2u /* REMOVE: a directory with everything in it */
#define PROTO_FILE_OVERWRITE 0x4u /* RENAME: replace what path2 names */
#define PROTO_FILE_HIDDEN 0x8u    /* LIST: names starting with '.' too */
#define PROTO_FILE_FLAGS                                                                           \
    (PROTO_FILE_PARENTS | PROTO_FILE_RECURSIVE | PROTO_FILE_OVERWRITE | PROTO_FILE_HIDDEN)
#define PROTO_FILE_MAX_DEPTH 32    /* LIST: depth 1 is the directory's own entries */
#define PROTO_FILE_MAX_LIMIT 10000 /* LIST: entries answered */

struct proto_file_op {
    char id[PROTO_ID_LEN];
    uint32_t op; /* enum proto_file_op_kind */
    char path[PROTO_PATH_LEN];
    char path2[PROTO_PATH_LEN]; /* RENAME: the destination; LIST: the glob, "" for none */
    uint32_t flags;             /* PROTO_FILE_* */
    uint32_t mode;              /* CHMOD: at most 0777 */
    uint32_t depth;             /* LIST: 1..PROTO_FILE_MAX_DEPTH, else 0 */
    uint32_t limit;             /* LIST: 1..PROTO_FILE_MAX_LIMIT, else 0 */
};

/* One entry of a STAT or LIST answer's memfd: this header, then path_len bytes of its
 * path (LIST: relative to the listed directory, "a/b"; STAT: none), then target_len
 * bytes of a symlink's target. No NUL in either; records follow each other. The helper
 * that writes them runs as the sandbox's user in the sandbox: the server reads them
 * with proto_file_entry_get only. */
enum proto_file_type { PROTO_FILE_REG, PROTO_FILE_DIR, PROTO_FILE_LNK, PROTO_FILE_OTHER };
struct proto_file_entry {
    uint32_t size;       /* the whole record */
    uint16_t path_len;   /* at most PROTO_FILE_TEXT_MAX */
    uint16_t target_len; /* at most PROTO_FILE_TEXT_MAX; 0 unless a symlink */
    uint32_t type;       /* enum proto_file_type */
    uint32_t mode;       /* permission bits, at most 07777 */
    uint32_t uid, gid;   /* as the sandbox sees them (65534 for one outside its range) */
    uint64_t bytes;
    int64_t mtime_s;
    uint32_t mtime_ns; /* below 1e9 */
    uint32_t zero;
};
#define PROTO_FILE_TEXT_MAX 4095       /* PATH_MAX less its NUL */
#define PROTO_FILE_LIST_MAX (16 << 20) /* bytes of a LIST's records, at most */
/* A record read back: the header's fields, the texts NUL-terminated. */
struct proto_file_info {
    uint32_t type, mode, uid, gid;
    uint64_t bytes;
    int64_t mtime_s;
    uint32_t mtime_ns;
    char path[PROTO_FILE_TEXT_MAX + 1];
    char target[PROTO_FILE_TEXT_MAX + 1];
};
/* Writes e's record into buf; its length, or -ENOSPC (size too small), -ENAMETOOLONG
 * or -EINVAL (a field the reader would refuse). */
int proto_file_entry_put(void *buf, size_t size, const struct proto_file_info *e);
/* Reads the record at *off of buf[0..len): 1 with *out filled and *off moved past it,
 * 0 at the end, -EPROTO when it is truncated or malformed (a size that does not add
 * up, a field out of range, a NUL in a text, a path that is absolute or has an empty,
 * "." or ".." step). */
int proto_file_entry_get(const void *buf, size_t len, size_t *off, struct proto_file_info *out);

/* The listener's certificate and key, read by root (the server cannot read
 * root-only files): at start and on every SIGHUP. */
struct proto_tls {
    uint32_t flags; /* 0; no other value is defined */
};
/* A certificate chain or a key larger than this is refused. */
#define PROTO_TLS_MAX_FILE (1 << 20)

struct proto_result {
    int32_t status; /* 0 or negative errno */
    char msg[480];  /* user-readable when status < 0; on success, a note some carry */
    uint64_t values[5];
};

/* Sends one message; fds are borrowed (the caller still closes them). */
int proto_send(int sock, uint16_t type, uint32_t id, const void *payload, size_t len,
               const int *fds, unsigned nfds);
/* Receives one message into buf (size PROTO_MAX_MSG). Returns payload length or
 * negative errno; -EPROTO for a malformed record, 0-length EOF is -ECONNRESET.
 * Received fds are owned by the caller (closed here on error). */
int proto_recv(int sock, struct proto_hdr *hdr, void *buf, size_t size, int *fds, unsigned maxfds);

/* Validation helpers for the receiving side. */
int proto_check_id(const char *id); /* terminated, [a-z0-9-], non-empty */
/* Splits n NUL-terminated strings from buf[0..len) into out (must end exactly at len). */
int proto_split_strings(const char *buf, size_t len, unsigned n, const char **out);

const char *proto_type_name(uint16_t type);

#endif
