/* `runtime mcp fingerprint` and `runtime mcp review`: offline checks of an MCP server's tool
 * list, no daemon involved. The fingerprint is what a user pins; the review is what they
 * read before pinning a new one. */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../fingerprint/fingerprint.h"
#include "../review/review.h"

#define MAX_TOOLS_JSON (64u << 20) /* far beyond any server's tools/list */

enum { O_JSON };

static const struct opt_spec json_opts[] = {{"json", false, O_JSON}, {NULL, false, 0}};
static const struct opt_spec no_opts[] = {{NULL, false, 0}};

/* Reads FILE, or stdin for "-". */
static int read_input(const char *path, char **buf, size_t *len)
{
    bool std_in = strcmp(path, "-") == 0;
    int fd = std_in ? 0 : open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0) return cli_error("cannot open %s: %s", path, strerror(errno));
    int r = fstat(fd, &st) < 0 ? -errno : 0;
    if (r == 0 && S_ISDIR(st.st_mode)) r = -EISDIR;
    if (r == 0) r = read_fd_all(fd, MAX_TOOLS_JSON, buf, len);
    if (!std_in) close(fd);
    const char *name = std_in ? "standard input" : path;
    if (r == -EISDIR) return cli_error("%s is a directory; give the file of a tools list", name);
    if (r == -EFBIG) return cli_error("%s is over 64 MiB, too big for a tools list", name);
    if (r < 0) return cli_error("cannot read %s: %s", name, strerror(-r));
    if (!*buf) *buf = strdup(""); /* empty input: the parser says what is missing */
    return *buf ? EXIT_OK : cli_error("out of memory");
}

/* ---- fingerprint ---- */

static int print_fingerprint(const char *path, const char *text, size_t len, bool json)
{
    struct fp_doc *doc = NULL;
    err_t err = {0};
    char hex[65];
    size_t ntools = 0;
    int r = fp_parse(text, len, &doc, &err);
    if (!r) r = fingerprint_doc(fp_doc_root(doc), NULL, NULL, hex, &ntools, &err);
    fp_doc_free(doc);
    if (r) return cli_error("%s: %s", strcmp(path, "-") ? path : "standard input", err.msg);
    if (!json) {
        printf("%.*s\n", FINGERPRINT_SHORT, hex);
        return EXIT_OK;
    }
    json_t *o = json_pack("{s:s%,s:s,s:I}", "fingerprint", hex, (size_t)FINGERPRINT_SHORT, "sha256",
                          hex, "tools", (json_int_t)ntools);
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!s) return cli_error("out of memory");
    puts(s);
    free(s);
    return EXIT_OK;
}

static int cmd_fingerprint(int argc, char **argv)
{
    struct args a;
    const char *path = NULL;
    bool json = false;
    int id;
    args_init(&a, argc, argv, "mcp fingerprint", json_opts);
    while ((id = args_next(&a)) != ARG_END) {
        if (id == ARG_HELP) return usage_print(a.cmd, stdout), EXIT_OK;
        if (id == ARG_BAD) return EXIT_USAGE;
        if (id == O_JSON) {
            json = true;
            continue;
        }
        if (id != ARG_POS || path || !*a.val)
            return cli_usage_error(a.cmd, "unexpected argument '%s'", a.argv[a.i - 1]);
        path = a.val;
    }
    if (!path && isatty(0))
        return cli_usage_error(a.cmd, "give the FILE of a tools list, or pipe it in");
    if (!path) path = "-";
    char *text = NULL;
    size_t len = 0;
    int r = read_input(path, &text, &len);
    if (r == EXIT_OK) r = print_fingerprint(path, text, len, json);
    free(text);
    return r;
}

/* ---- review ---- */

static void print_list(const char *what, const struct review_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        printf("%s: %s\n", what, l->v[i]);
}

static const char *tools_word(size_t n)
{
    return n == 1 ? "tool" : "tools";
}

static void print_review(const struct review *r)
{
    printf("old: %.*s (%zu %s)\n", FINGERPRINT_SHORT, r->old_sha256, r->old_tools,
           tools_word(r->old_tools));
    printf("new: %.*s (%zu %s)\n", FINGERPRINT_SHORT, r->new_sha256, r->new_tools,
           tools_word(r->new_tools));
    puts(r->changed ? "changed" : "unchanged");
    print_list("added tool", &r->tools_added);
    print_list("removed tool", &r->tools_removed);
    print_list("added parameter", &r->params_added);
    print_list("removed parameter", &r->params_removed);
    for (size_t i = 0; i < r->n_descs; i++) {
        const struct review_desc *d = &r->descs[i];
        printf("changed description: %s\n", d->tool);
        if (d->old_text)
            printf("  old: \"%s\"\n", d->old_text);
        else
            puts("  old: (none)");
        if (d->new_text)
            printf("  new: \"%s\"\n", d->new_text);
        else
            puts("  new: (none)");
    }
    print_list("changed field", &r->fields_changed);
    size_t in_old = 0;
    for (size_t i = 0; i < r->n_findings; i++) {
        const struct review_finding *f = &r->findings[i];
        printf("%s: %s: \"%s\"%s\n", f->path, review_kind_text(f->kind), f->excerpt,
               f->in_old ? " (in OLD too)" : "");
        in_old += f->in_old;
    }
    if (!r->n_findings)
        puts("no findings");
    else
        printf("%zu finding%s (%zu new since OLD)\n", r->n_findings, r->n_findings == 1 ? "" : "s",
               r->n_findings - in_old);
}

static int cmd_review(int argc, char **argv)
{
    struct args a;
    const char *paths[2] = {NULL, NULL};
    int n = 0, id;
    args_init(&a, argc, argv, "mcp review", no_opts);
    while ((id = args_next(&a)) != ARG_END) {
        if (id == ARG_HELP) return usage_print(a.cmd, stdout), EXIT_OK;
        if (id == ARG_BAD) return EXIT_USAGE;
        if (id != ARG_POS || n == 2 || !*a.val)
            return cli_usage_error(a.cmd, "unexpected argument '%s'", a.argv[a.i - 1]);
        paths[n++] = a.val;
    }
    if (n < 2) return cli_usage_error(a.cmd, "give two files: OLD (reviewed) and NEW");
    if (strcmp(paths[0], "-") == 0 && strcmp(paths[1], "-") == 0)
        return cli_usage_error(a.cmd, "only one of OLD and NEW can be standard input");
    char *text[2] = {NULL, NULL};
    size_t len[2] = {0, 0};
    struct review rv = {0};
    err_t err = {0};
    int r = read_input(paths[0], &text[0], &len[0]);
    if (r == EXIT_OK) r = read_input(paths[1], &text[1], &len[1]);
    if (r == EXIT_OK && review_tools(text[0], len[0], text[1], len[1], &rv, &err) < 0)
        r = cli_error("%s (OLD is %s, NEW is %s)", err.msg, paths[0], paths[1]);
    if (r == EXIT_OK) {
        print_review(&rv);
        r = review_clean(&rv) ? EXIT_OK : EXIT_FAIL;
    }
    review_free(&rv);
    free(text[0]);
    free(text[1]);
    return r;
}

int cmd_mcp(struct cli *c, int argc, char **argv)
{
    (void)c; /* both commands work offline */
    if (argc == 0) {
        usage_print("mcp", stderr);
        return EXIT_USAGE;
    }
    if (strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0 ||
        strcmp(argv[0], "help") == 0)
        return usage_print("mcp", stdout), EXIT_OK;
    if (strcmp(argv[0], "fingerprint") == 0) return cmd_fingerprint(argc - 1, argv + 1);
    if (strcmp(argv[0], "review") == 0) return cmd_review(argc - 1, argv + 1);
    return cli_usage_error("mcp", "unknown command 'mcp %s'", argv[0]);
}
