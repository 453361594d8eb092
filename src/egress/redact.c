/* An intercepted connection's answers on their way to the sandbox, through the
 * reflection scan (src/secrets/reflect.c): the values swapped into the
 * connection are overwritten wherever the upstream echoes them, heads and
 * bodies alike. The scan sees each answer's content as one stream: chunk
 * framing is taken off and written again by the proxy (chunks of what the scan
 * has settled), and the few bytes a scan does not settle at the end of a read
 * (a match that may go on in the next TLS record or chunk) wait for it. A
 * match becomes the same number of bytes, so Content-Length and chunk sizes
 * hold whatever is found. */
#include <errno.h>
#include <event2/buffer.h>
#include <stdlib.h>
#include <string.h>

#include "egress_impl.h"

#define SCAN_PIECE (64 * 1024) /* content scanned at a time */

void redactor_init(struct redactor *rd, struct egress *eg, redactor_report_fn *report, void *arg)
{
    memset(rd, 0, sizeof *rd);
    rd->eg = eg;
    rd->report = report;
    rd->arg = arg;
}

void redactor_fini(struct redactor *rd)
{
    reflect_free(rd->reflect);
    if (rd->held) explicit_bzero(rd->held, rd->held_cap);
    free(rd->held);
    rd->reflect = NULL;
    rd->held = NULL;
    rd->held_len = rd->held_cap = 0;
}

int redactor_add(struct redactor *rd, const char *value, size_t len, const char *placeholder)
{
    if (!rd->reflect && !(rd->reflect = reflect_new())) return -ENOMEM;
    int r = reflect_add(rd->reflect, value, len, placeholder);
    return r < 0 ? r : 0;
}

void redactor_answer_start(struct redactor *rd)
{
    memset(rd->said, 0, sizeof rd->said);
}

/* One report per value and encoding per answer: an answer that echoes a value
 * a thousand times says so once. */
static void on_hit(void *arg, const struct reflect_hit *h)
{
    struct redactor *rd = arg;
    uint16_t bit = (uint16_t)(1u << h->encoding);
    if (h->value >= REFLECT_VALUES_MAX || (rd->said[h->value] & bit)) return;
    rd->said[h->value] |= bit;
    rd->report(rd->arg, h->placeholder, reflect_encoding_name(h->encoding));
}

void redactor_head(struct redactor *rd, char *head, size_t len)
{
    reflect_scan(rd->reflect, (unsigned char *)head, len, true, on_hit, rd);
}

static int reserve(unsigned char **p, size_t *cap, size_t need)
{
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 256;
    while (c < need)
        c *= 2;
    unsigned char *np = malloc(c);
    if (!np) return -ENOMEM;
    if (*p) {
        memcpy(np, *p, *cap);
        explicit_bzero(*p, *cap);
    }
    free(*p);
    *p = np;
    *cap = c;
    return 0;
}

static void emit(struct evbuffer *out, const unsigned char *b, size_t n, bool chunked)
{
    if (n == 0) return;
    if (chunked) evbuffer_add_printf(out, "%zx\r\n", n);
    evbuffer_add(out, b, n);
    if (chunked) evbuffer_add(out, "\r\n", 2);
}

/* Scans held bytes and n more from in (removed from it) in the egress's
 * scratch buffer; writes what is settled, keeps the rest. */
static int scan_piece(struct redactor *rd, struct evbuffer *in, size_t n, struct evbuffer *out,
                      bool chunked, bool final)
{
    struct egress *eg = rd->eg;
    size_t have = rd->held_len + n;
    if (reserve(&eg->scratch, &eg->scratch_cap, have) < 0) return -ENOMEM;
    if (rd->held_len) memcpy(eg->scratch, rd->held, rd->held_len);
    if (n) evbuffer_remove(in, eg->scratch + rd->held_len, n);
    size_t settled = reflect_scan(rd->reflect, eg->scratch, have, final, on_hit, rd);
    emit(out, eg->scratch, settled, chunked);
    if (reserve(&rd->held, &rd->held_cap, have - settled) < 0) return -ENOMEM;
    if (have > settled) memcpy(rd->held, eg->scratch + settled, have - settled);
    rd->held_len = have - settled;
    return 0;
}

int redactor_content(struct redactor *rd, struct evbuffer *in, size_t n, struct evbuffer *out,
                     bool chunked)
{
    if (reflect_empty(rd->reflect) && rd->held_len == 0) { /* nothing to look for */
        if (chunked && n) evbuffer_add_printf(out, "%zx\r\n", n);
        evbuffer_remove_buffer(in, out, n);
        if (chunked && n) evbuffer_add(out, "\r\n", 2);
        return 0;
    }
    while (n > 0) {
        size_t piece = n < SCAN_PIECE ? n : SCAN_PIECE;
        int r = scan_piece(rd, in, piece, out, chunked, false);
        if (r < 0) return r;
        n -= piece;
    }
    return 0;
}

int redactor_flush(struct redactor *rd, struct evbuffer *out, bool chunked)
{
    if (rd->held_len == 0) return 0;
    return scan_piece(rd, NULL, 0, out, chunked, true);
}
