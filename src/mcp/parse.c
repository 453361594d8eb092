/* The parser thread: what MCP servers write, parsed off the loop.
 *
 * jansson parses about 90 MB a second here, so a 16 KiB line costs the loop 0.2 ms
 * and a server that writes them by the hundred a second (resource updates nobody
 * reads, a tool's large result) would hold every other sandbox's requests behind its
 * own. A batch of lines longer than MCP_PARSE_INLINE goes to this thread instead;
 * the loop gets it back, parsed, when the eventfd says so, and routes it there (the
 * gateway's state is the loop's alone). One thread for the process: it parses, it
 * never waits on anything but its queue, and batches come back in the order given. */
#include <errno.h>
#include <event2/event.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>

#include "mcp_impl.h"

static struct parser {
    bool started;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    struct mcp_batch *queued, **queued_tail; /* the thread's */
    struct mcp_batch *done, **done_tail;     /* the loop's, once parsed */
    int done_fd;                             /* eventfd: readable when done is not empty */
    struct event *done_ev;
} parser = {.done_fd = -1};

void mcp_batch_parse(struct mcp_batch *b)
{
    for (size_t i = 0; i < b->n; i++) {
        json_error_t jerr;
        b->lines[i].msg = json_loadb(b->lines[i].text, b->lines[i].len, 0, &jerr);
    }
    b->parsed = true;
}

void mcp_batch_free(struct mcp_batch *b)
{
    if (!b) return;
    for (size_t i = 0; i < b->n; i++) {
        free(b->lines[i].text);
        json_decref(b->lines[i].msg);
    }
    free(b->lines);
    free(b);
}

static struct mcp_batch *take(struct mcp_batch **head, struct mcp_batch ***tail)
{
    struct mcp_batch *all = *head;
    *head = NULL;
    *tail = head;
    return all;
}

static void *parser_main(void *arg)
{
    /* The lowest priority: a tenant's flood of output waits for everyone's requests
     * (the loop's, the sandboxes' own), never the other way round. */
    if (setpriority(PRIO_PROCESS, (id_t)gettid(), 19) < 0)
        log_warn("cannot lower the MCP parser thread's priority: %s", strerror(errno));
    pthread_mutex_lock(&parser.lock);
    for (;;) {
        while (!parser.queued)
            pthread_cond_wait(&parser.wake, &parser.lock);
        struct mcp_batch *b = take(&parser.queued, &parser.queued_tail);
        pthread_mutex_unlock(&parser.lock);
        for (struct mcp_batch *x = b; x; x = x->next)
            mcp_batch_parse(x);
        pthread_mutex_lock(&parser.lock);
        bool was_empty = !parser.done;
        *parser.done_tail = b;
        while (b->next)
            b = b->next;
        parser.done_tail = &b->next;
        uint64_t one = 1;
        if (was_empty && write(parser.done_fd, &one, sizeof one) < 0)
            log_warn("cannot wake the loop for parsed MCP messages: %s", strerror(errno));
    }
    return NULL;
}

/* The loop: every parsed batch, in order, to its callback. */
static void on_parsed(evutil_socket_t fd, short what, void *arg)
{
    uint64_t n;
    if (read(fd, &n, sizeof n) < 0 && errno != EAGAIN) return;
    pthread_mutex_lock(&parser.lock);
    struct mcp_batch *b = take(&parser.done, &parser.done_tail);
    pthread_mutex_unlock(&parser.lock);
    while (b) {
        struct mcp_batch *next = b->next;
        b->next = NULL;
        b->done(b);
        b = next;
    }
}

static int parser_start(struct event_base *base)
{
    parser.done_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (parser.done_fd < 0) return -errno;
    parser.done_ev = event_new(base, parser.done_fd, EV_READ | EV_PERSIST, on_parsed, NULL);
    if (!parser.done_ev || event_add(parser.done_ev, NULL) < 0) {
        if (parser.done_ev) event_free(parser.done_ev);
        close(parser.done_fd);
        parser.done_fd = -1;
        return -ENOMEM;
    }
    parser.queued_tail = &parser.queued;
    parser.done_tail = &parser.done;
    pthread_mutex_init(&parser.lock, NULL);
    pthread_cond_init(&parser.wake, NULL);
    int e = pthread_create(&parser.thread, NULL, parser_main, NULL);
    if (e) {
        event_free(parser.done_ev);
        close(parser.done_fd);
        parser.done_fd = -1;
        return -e;
    }
    pthread_detach(parser.thread); /* it lives as long as the process */
    parser.started = true;
    return 0;
}

int mcp_parser_submit(struct event_base *base, struct mcp_batch *b)
{
    static int failed; /* once the thread could not start, every batch is parsed inline */
    if (failed) return failed;
    if (!parser.started) {
        int r = parser_start(base);
        if (r < 0) {
            log_warn("cannot start the MCP parser thread (%s): servers' messages are parsed "
                     "on the loop",
                     strerror(-r));
            return failed = r;
        }
    }
    b->next = NULL;
    pthread_mutex_lock(&parser.lock);
    *parser.queued_tail = b;
    parser.queued_tail = &b->next;
    pthread_cond_signal(&parser.wake);
    pthread_mutex_unlock(&parser.lock);
    return 0;
}
