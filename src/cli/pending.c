/* Commands of SPEC.md that this version of the client does not have yet. Each one
 * only prints its usage on --help; otherwise it says so and exits 2. To add one,
 * write its cmd_* function, dispatch to it, and delete its row here. */
#include "cli.h"

#include <stdio.h>
#include <string.h>

struct pending {
    const char *cmd;
    const char *usage;
};

static const struct pending pending[] = {
    {"usage", "Usage: runtime usage [--json]\n"},
};

static const struct pending *find(const char *cmd)
{
    for (size_t i = 0; i < ARRAY_LEN(pending); i++)
        if (strcmp(pending[i].cmd, cmd) == 0) return &pending[i];
    return NULL;
}

const char *pending_usage(const char *cmd)
{
    const struct pending *p = find(cmd);
    return p ? p->usage : NULL;
}

int cmd_pending(const char *cmd, int argc, char **argv)
{
    const struct pending *p = find(cmd);
    for (int i = 0; i < argc && strcmp(argv[i], "--") != 0; i++) {
        if (p && (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)) {
            fputs(p->usage, stdout);
            puts("\n(not available in this version of runtime)");
            return EXIT_OK;
        }
    }
    fprintf(stderr,
            "runtime: '%s' is not available in this version; see 'runtime --help' for the "
            "commands it has\n",
            cmd);
    return EXIT_USAGE;
}
