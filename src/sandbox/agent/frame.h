/* The gvisor driver's exec channel: how programs start in a gVisor sandbox without a
 * `runsc exec` each (docs/gvisor.md, "Programs: the agent and the shim").
 *
 * Inside gVisor the container's pid 1 is runtime-agent (agent.c): it starts every
 * program as its own child, so a checkpoint keeps them (runsc restore kills what
 * `runsc exec` started). A container's stdio are the only host descriptors gVisor can
 * give back at a restore, so every program's stdio travels over the agent's one pair as
 * frames; an MCP server, whose stdio carries every call, gets a container of its own
 * instead (src/sandbox/serve.c), with a supervisor that speaks these frames on its
 * stderr. Outside, runtime-shim (shim.c), in the holder's namespaces and the sandbox's
 * cgroup, holds the other ends, listens on STATE/sandboxes/<id>/shim.sock for the
 * keeper's exec requests, and answers each with the four pipes the keeper's exec call
 * has always returned (stdin, stdout, stderr, status).
 *
 * Shared by agent.c, shim.c (static programs of their own) and gvisor.c. */
#ifndef RUNTIME_SANDBOX_AGENT_FRAME_H
#define RUNTIME_SANDBOX_AGENT_FRAME_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct frame_hdr {
    uint32_t len; /* payload bytes after the header */
    uint32_t id;  /* the program's, chosen by the shim */
    uint8_t type; /* enum frame_type */
    uint8_t stream;
    uint8_t pad[2];
};

enum frame_type {
    /* shim -> agent */
    FRAME_SPAWN = 1, /* payload: struct frame_spawn, then cwd, argv, envp as NUL-ended strings */
    FRAME_STDIN,     /* bytes for the program's stdin; none: close it */
    FRAME_SIGNAL,    /* payload: int32 signal, for the program's process group and itself */
    /* either way: stop / go on sending data frames of this id (the reader is behind) */
    FRAME_PAUSE,
    FRAME_RESUME,
    /* agent -> shim */
    FRAME_STARTED, /* payload: int32 errno, 0 when the program runs */
    FRAME_OUT,     /* stream 1 or 2: bytes it wrote; none: that stream ended */
    FRAME_EXIT,    /* payload: int32 wait status, as waitpid gives it */
};

struct frame_spawn {
    uint32_t timeout_ms; /* the shim's to enforce; 0: none */
    uint32_t argc;
    uint32_t envc;
};

/* What the keeper asks the shim, in the first uint32 of a request. */
enum shim_request {
    SHIM_EXEC = 1,   /* then a FRAME_SPAWN payload: answers the program's four pipes */
    SHIM_AGENT_ENDS, /* answers the agent's ends of its stdin and stdout, for a restore */
    SHIM_HIBERNATE,  /* the sentry ends for a checkpoint: its programs have not ended */
    SHIM_WATCH,      /* with a pidfd (SCM_RIGHTS): the sentry a restore started */
    /* Templates (docs/templates.md): */
    SHIM_ONLY_PROGRAM, /* answers the id of the one program running, 0 when none, -EBUSY
                        * when more than one */
    SHIM_ADOPT,        /* then a uint32 id: a program a template's image brought, whose
                        * agent runs it already; answers its four pipes, as SHIM_EXEC */
    /* MCP servers in containers of their own (agent.c, serve; serve.c, gvisor_serve): */
    SHIM_SERVE,       /* then the container's name, with four descriptors: its supervisor's
                       * frames (read end) and the container's stdin, stdout and stderr (its
                       * own ends); answers the server's stderr and status pipes */
    SHIM_SERVER_ENDS, /* then a running server's container name: answers its container's
                       * stdin, stdout and stderr again, for its restore */
};
#define SHIM_NAME_MAX 64 /* a served container's name, with its NUL */

/* A frame's payload at most: an exec request (PROTO_MAX_MSG) fits, with room. */
#define FRAME_MAX (128u << 10)
/* Data frames carry at most this much. */
#define FRAME_DATA_MAX (64u << 10)
/* What one side holds for a program before it asks the other to pause it, and the level
 * below which it lets it go on. */
#define FRAME_PAUSE_AT (1u << 20)
#define FRAME_RESUME_AT (256u << 10)

/* The agent's first words on its stdout, before any frame. */
#define AGENT_READY "ok"

/* A byte queue: what one side could not write yet. */
struct queue {
    char *buf;
    size_t head, len, cap;
};

static inline size_t queue_size(const struct queue *q)
{
    return q->len - q->head;
}

static inline int queue_push(struct queue *q, const void *data, size_t n)
{
    if (q->head && q->head == q->len) q->head = q->len = 0;
    if (q->len + n > q->cap) {
        if (q->head) { /* move what is left to the front before growing */
            memmove(q->buf, q->buf + q->head, q->len - q->head);
            q->len -= q->head;
            q->head = 0;
        }
        size_t cap = q->cap ? q->cap : 4096;
        while (cap < q->len + n)
            cap *= 2;
        if (cap != q->cap) {
            char *b = realloc(q->buf, cap);
            if (!b) return -ENOMEM;
            q->buf = b;
            q->cap = cap;
        }
    }
    memcpy(q->buf + q->len, data, n);
    q->len += n;
    return 0;
}

/* Writes what it can of q to a non-blocking fd: 0, or -errno other than EAGAIN. */
static inline int queue_flush(struct queue *q, int fd)
{
    while (queue_size(q) > 0) {
        ssize_t n = write(fd, q->buf + q->head, queue_size(q));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return errno == EAGAIN ? 0 : -errno;
        q->head += (size_t)n;
    }
    q->head = q->len = 0;
    if (q->cap > (1u << 20)) { /* a burst's buffer is not kept */
        free(q->buf);
        q->buf = NULL;
        q->cap = 0;
    }
    return 0;
}

static inline void queue_free(struct queue *q)
{
    free(q->buf);
    *q = (struct queue){0};
}

static inline int queue_frame(struct queue *q, uint8_t type, uint32_t id, uint8_t stream,
                              const void *payload, uint32_t len)
{
    struct frame_hdr h = {.len = len, .id = id, .type = type, .stream = stream};
    int r = queue_push(q, &h, sizeof h);
    return r == 0 && len ? queue_push(q, payload, len) : r;
}

/* Reads at most max bytes from fd onto the end of q: read's answer (0 at EOF). */
static inline ssize_t queue_read(struct queue *q, int fd, size_t max)
{
    char chunk[FRAME_DATA_MAX];
    ssize_t n = read(fd, chunk, max < sizeof chunk ? max : sizeof chunk);
    if (n > 0 && queue_push(q, chunk, (size_t)n) < 0) return -1;
    return n;
}

/* Takes the next whole frame off the front of q (bytes read but not parsed): 1 with *h
 * and *payload (valid until q changes), 0 when it is not all there, -EPROTO when its
 * length is out of bounds. */
static inline int queue_next_frame(struct queue *q, struct frame_hdr *h, const char **payload)
{
    if (queue_size(q) < sizeof *h) return 0;
    memcpy(h, q->buf + q->head, sizeof *h);
    if (h->len > FRAME_MAX) return -EPROTO;
    if (queue_size(q) < sizeof *h + h->len) return 0;
    *payload = q->buf + q->head + sizeof *h;
    q->head += sizeof *h + h->len;
    return 1;
}

#endif
