/* Where a request body ends, byte-exactly, without holding it: the proxy
 * forwards each piece as it arrives and must stop exactly where the server
 * will, or the rest of the body would be read as a request nobody checked.
 * Chunked framing is a byte-at-a-time state machine (data in bulk), with the
 * same strictness as the head: CRLF only, sizes of bounded hex. */
#include <string.h>

#include "http_impl.h"

enum state {
    B_DONE,
    B_LENGTH,
    C_SIZE,    /* hex digits of a chunk size */
    C_SIZE_WS, /* SP/HTAB after the size: only before ';' */
    C_EXT,     /* after ';' up to CR */
    C_SIZE_LF, /* CR seen at the end of a chunk-size line */
    C_DATA,    /* left bytes of chunk data */
    C_DATA_CR, /* the CRLF after chunk data */
    C_DATA_LF,
    C_TR_START, /* the start of a trailer line, or the final CRLF */
    C_TR_NAME,
    C_TR_VALUE,
    C_TR_LF,
    C_END_LF,
};

#define CHUNK_DIGITS_MAX 16

void http_body_init(struct http_body *b, const struct http_request *req)
{
    memset(b, 0, sizeof *b);
    b->framing = req->framing;
    if (req->framing == HTTP_BODY_CHUNKED) {
        b->state = C_SIZE;
    } else if (req->framing == HTTP_BODY_LENGTH && req->content_length > 0) {
        b->state = B_LENGTH;
        b->left = req->content_length;
    } else {
        b->state = B_DONE;
    }
}

static const char *size_byte(struct http_body *b, unsigned char c)
{
    if (++b->line > HTTP_CHUNK_LINE_MAX) return "chunk line too long";
    int h = http_hex(c);
    if (h != HTTP_NOT_HEX && b->state == C_SIZE) {
        if (++b->digits > CHUNK_DIGITS_MAX) return "chunk too large";
        b->size = b->size * 16 + (uint64_t)h;
        return b->size > HTTP_CHUNK_MAX ? "chunk too large" : NULL;
    }
    if (c == '\n') return "bare LF";
    if (b->state == C_SIZE && b->digits == 0) return "bad chunk size";
    if (b->state == C_EXT) {
        if (c == '\r') b->state = C_SIZE_LF;
        return c == '\r' || sniff_field_char(c) ? NULL : "bad chunk extension";
    }
    if (c == ' ' || c == '\t') {
        b->state = C_SIZE_WS;
        return NULL;
    }
    if (c == ';') {
        b->state = C_EXT;
        return NULL;
    }
    if (c == '\r' && b->state == C_SIZE) {
        b->state = C_SIZE_LF;
        return NULL;
    }
    return b->state == C_SIZE ? "bad chunk size" : "bad chunk extension";
}

static const char *trailer_byte(struct http_body *b, unsigned char c)
{
    if (++b->trailers > HTTP_TRAILERS_MAX) return "trailers too large";
    if (c == '\n') return "bare LF";
    switch (b->state) {
    case C_TR_START:
        if (c == '\r')
            b->state = C_END_LF;
        else if (c == ' ' || c == '\t')
            return "obs-fold";
        else if (sniff_tchar(c))
            b->state = C_TR_NAME;
        else
            return "bad trailer";
        return NULL;
    case C_TR_NAME:
        if (c == ':')
            b->state = C_TR_VALUE;
        else if (!sniff_tchar(c))
            return "bad trailer";
        return NULL;
    default: /* C_TR_VALUE */
        if (c == '\r')
            b->state = C_TR_LF;
        else if (!sniff_field_char(c))
            return "bad trailer";
        return NULL;
    }
}

/* One byte in any state but B_LENGTH and C_DATA. */
static const char *chunk_byte(struct http_body *b, unsigned char c)
{
    switch (b->state) {
    case C_SIZE:
    case C_SIZE_WS:
    case C_EXT:
        return size_byte(b, c);
    case C_SIZE_LF:
        if (c != '\n') return "bare CR";
        b->state = b->size ? C_DATA : C_TR_START;
        b->left = b->size;
        return NULL;
    case C_DATA_CR:
    case C_DATA_LF:
        if (c != (b->state == C_DATA_CR ? '\r' : '\n')) return "missing CRLF after chunk data";
        if (b->state == C_DATA_LF) {
            b->size = b->digits = 0;
            b->line = 0;
        }
        b->state = b->state == C_DATA_CR ? C_DATA_LF : C_SIZE;
        return NULL;
    case C_TR_LF:
    case C_END_LF:
        if (++b->trailers > HTTP_TRAILERS_MAX) return "trailers too large";
        if (c != '\n') return "bare CR";
        b->state = b->state == C_TR_LF ? C_TR_START : B_DONE;
        return NULL;
    default:
        return trailer_byte(b, c);
    }
}

enum http_result http_body_feed(struct http_body *b, const char *buf, size_t len, size_t *used,
                                const char **why)
{
    const unsigned char *p = (const unsigned char *)buf;
    const char *ignored;
    if (!why) why = &ignored;
    *why = NULL;
    size_t i = 0;
    enum http_result r = HTTP_MORE;
    while (r == HTTP_MORE && i < len) {
        if (b->state == B_LENGTH || b->state == C_DATA) {
            size_t take = b->left < len - i ? (size_t)b->left : len - i;
            b->left -= take;
            i += take;
            if (b->left == 0) b->state = b->state == B_LENGTH ? B_DONE : C_DATA_CR;
        } else if (b->state != B_DONE) {
            *why = chunk_byte(b, p[i]);
            if (*why)
                r = HTTP_BAD;
            else
                i++;
        }
        if (b->state == B_DONE) r = HTTP_OK;
    }
    if (b->state == B_DONE) r = HTTP_OK;
    *used = i;
    return r;
}

uint64_t http_body_data_left(const struct http_body *b)
{
    return b->state == B_LENGTH || b->state == C_DATA ? b->left : 0;
}

void http_body_take_data(struct http_body *b, uint64_t n)
{
    if (n > http_body_data_left(b)) n = http_body_data_left(b);
    b->left -= n;
    if (b->left == 0 && b->state == B_LENGTH) b->state = B_DONE;
    if (b->left == 0 && b->state == C_DATA) b->state = C_DATA_CR;
}

bool http_body_in_trailers(const struct http_body *b)
{
    return b->state >= C_TR_START && b->state <= C_END_LF;
}

bool http_body_done(const struct http_body *b)
{
    return b->state == B_DONE;
}
