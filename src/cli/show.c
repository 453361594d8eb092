/* Human output of sandboxes: the list table and one sandbox's details. */
#include "cli.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

enum { COLS = 8 };
static const char *const heads[COLS] = {"ID",     "NAME", "STATUS",    "CREATED",
                                        "MEMORY", "CPUS", "ISOLATION", "LABELS"};

static void num_text(json_t *v, const char *unit, char *out, size_t size)
{
    if (json_is_integer(v))
        snprintf(out, size, "%lld%s", (long long)json_integer_value(v), unit);
    else if (json_is_real(v))
        snprintf(out, size, "%g%s", json_real_value(v), unit);
    else
        snprintf(out, size, "-");
}

static void str_text(json_t *v, char *out, size_t size)
{
    const char *s = json_string_value(v);
    snprintf(out, size, "%s", s && *s ? s : "-");
}

/* "K=V<sep>K=V"; "-" when empty. */
static void map_text(json_t *obj, const char *sep, char *out, size_t size)
{
    const char *k;
    json_t *v;
    size_t n = 0;
    out[0] = '\0';
    json_object_foreach(obj, k, v)
    {
        const char *s = json_is_string(v) ? json_string_value(v) : "";
        int w = snprintf(out + n, size - n, "%s%s=%s", n ? sep : "", k, s);
        if (w < 0 || (size_t)w >= size - n) break;
        n += (size_t)w;
    }
    if (!out[0]) snprintf(out, size, "-");
}

/* "5 minutes ago" from RFC 3339 UTC text; the text itself when it is not that. */
void show_age(json_t *v, char *out, size_t size)
{
    const char *s = json_string_value(v);
    struct tm tm = {0};
    const char *end = s ? strptime(s, "%Y-%m-%dT%H:%M:%S", &tm) : NULL;
    if (end && *end == '.') end += strspn(end + 1, "0123456789") + 1;
    if (!end || strcmp(end, "Z") != 0) {
        str_text(v, out, size);
        return;
    }
    long long d = (long long)(time(NULL) - timegm(&tm));
    static const struct {
        long long secs;
        const char *unit;
    } units[] = {{86400, "day"}, {3600, "hour"}, {60, "minute"}, {1, "second"}};
    if (d < 1) {
        snprintf(out, size, "just now");
        return;
    }
    for (size_t i = 0; i < ARRAY_LEN(units); i++) {
        if (d < units[i].secs) continue;
        long long n = d / units[i].secs;
        snprintf(out, size, "%lld %s%s ago", n, units[i].unit, n == 1 ? "" : "s");
        return;
    }
}

/* Labels and names are other people's text: no terminal escapes from them. */
void show_clean(char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f) *s = '?';
}

static void cell(json_t *sb, int col, char *out, size_t size)
{
    static const char *const keys[COLS] = {"id",        "name", "status",    "createdAt",
                                           "memoryMiB", "cpus", "isolation", "labels"};
    json_t *v = json_object_get(sb, keys[col]);
    if (col == 3)
        show_age(v, out, size);
    else if (col == 4)
        num_text(v, "MiB", out, size);
    else if (col == 5)
        num_text(v, "", out, size);
    else if (col == 7)
        map_text(v, ",", out, size);
    else
        str_text(v, out, size);
    show_clean(out);
}

/* Two passes over the cells (widths, then print) rather than holding them all. */
void cli_table_print(const struct cli_table *t, json_t *list)
{
    int width[CLI_TABLE_COLS_MAX];
    char buf[2048];
    size_t i;
    json_t *row;
    for (int c = 0; c < t->cols; c++)
        width[c] = (int)strlen(t->heads[c]);
    json_array_foreach(list, i, row)
    {
        for (int c = 0; c < t->cols - 1; c++) {
            t->cell(row, c, buf, sizeof buf);
            if ((int)strlen(buf) > width[c]) width[c] = (int)strlen(buf);
        }
    }
    for (int c = 0; c < t->cols - 1; c++)
        printf("%-*s  ", width[c], t->heads[c]);
    printf("%s\n", t->heads[t->cols - 1]);
    json_array_foreach(list, i, row)
    {
        for (int c = 0; c < t->cols; c++) {
            t->cell(row, c, buf, sizeof buf);
            if (c < t->cols - 1)
                printf("%-*s  ", width[c], buf);
            else
                printf("%s\n", buf);
        }
        if (t->under) t->under(row);
    }
}

void show_table(json_t *list)
{
    cli_table_print(&(struct cli_table){heads, COLS, cell, NULL}, list);
}

static void line(const char *label, const char *text)
{
    char b[4096];
    snprintf(b, sizeof b, "%s", text);
    show_clean(b);
    printf("%-12s%s\n", label, b);
}

static void show_network(json_t *net)
{
    char buf[4096];
    size_t n = 0, i;
    json_t *h;
    json_t *internet = json_object_get(net, "internet");
    line("Internet:", json_is_boolean(internet) ? (json_is_true(internet) ? "on" : "off") : "-");
    buf[0] = '\0';
    json_array_foreach(json_object_get(net, "allow"), i, h)
    {
        int w =
            snprintf(buf + n, sizeof buf - n, "%s%s", n ? ", " : "", json_string_value(h) ?: "");
        if (w < 0 || (size_t)w >= sizeof buf - n) break;
        n += (size_t)w;
    }
    json_t *allow = json_object_get(net, "allow");
    line("Allow:", buf[0] ? buf : json_is_array(allow) ? "(no host)" : "(any public host)");
}

void show_sandbox(json_t *sb)
{
    char buf[4096], age[128];
    const char *created = json_string_value(json_object_get(sb, "createdAt"));
    str_text(json_object_get(sb, "id"), buf, sizeof buf), line("ID:", buf);
    str_text(json_object_get(sb, "name"), buf, sizeof buf), line("Name:", buf);
    str_text(json_object_get(sb, "status"), buf, sizeof buf), line("Status:", buf);
    show_age(json_object_get(sb, "createdAt"), age, sizeof age);
    snprintf(buf, sizeof buf, "%s (%s)", created ? created : "-", age);
    line("Created:", created ? buf : "-");
    num_text(json_object_get(sb, "memoryMiB"), " MiB", buf, sizeof buf), line("Memory:", buf);
    num_text(json_object_get(sb, "cpus"), "", buf, sizeof buf), line("CPUs:", buf);
    num_text(json_object_get(sb, "diskMiB"), " MiB", buf, sizeof buf), line("Disk:", buf);
    str_text(json_object_get(sb, "isolation"), buf, sizeof buf), line("Isolation:", buf);
    num_text(json_object_get(sb, "idlePauseSeconds"), " s", buf, sizeof buf);
    line("Idle pause:", buf);
    num_text(json_object_get(sb, "hibernateAfterSeconds"), " s paused", buf, sizeof buf);
    line("Hibernate:", buf);
    map_text(json_object_get(sb, "labels"), ", ", buf, sizeof buf), line("Labels:", buf);
    map_text(json_object_get(sb, "env"), ", ", buf, sizeof buf), line("Env:", buf);
    show_network(json_object_get(sb, "network"));
}
