/* The dashboard's files (assets.S), with their types and ETags. */
#include <openssl/sha.h>
#include <stdio.h>
#include <string.h>

#include "../common/common.h"
#include "dashboard.h"

extern const unsigned char dashboard_index_html[], dashboard_index_html_end[];
extern const unsigned char dashboard_app_js[], dashboard_app_js_end[];
extern const unsigned char dashboard_app_css[], dashboard_app_css_end[];

static struct dashboard_file files[] = {
    {"index.html", "text/html; charset=utf-8", dashboard_index_html, 0, ""},
    {"app.js", "text/javascript; charset=utf-8", dashboard_app_js, 0, ""},
    {"app.css", "text/css; charset=utf-8", dashboard_app_css, 0, ""},
};

/* Their lengths and ETags, worked out once: the bytes never change in a run. */
static void describe_files(void)
{
    const unsigned char *ends[] = {dashboard_index_html_end, dashboard_app_js_end,
                                   dashboard_app_css_end};
    for (size_t i = 0; i < ARRAY_LEN(files); i++) {
        files[i].len = (size_t)(ends[i] - files[i].data);
        unsigned char md[SHA256_DIGEST_LENGTH];
        SHA256(files[i].data, files[i].len, md);
        snprintf(files[i].etag, sizeof files[i].etag, "\"%02x%02x%02x%02x%02x%02x%02x%02x\"", md[0],
                 md[1], md[2], md[3], md[4], md[5], md[6], md[7]);
    }
}

const struct dashboard_file *dashboard_file(const char *name)
{
    if (!files[0].etag[0]) describe_files();
    for (size_t i = 0; i < ARRAY_LEN(files); i++)
        if (strcmp(name, files[i].name) == 0) return &files[i];
    return NULL;
}
