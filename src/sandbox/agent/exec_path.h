/* execve of a program looked up as a shell would, in the PATH of the environment it gets
 * (not in ours): shared by the ns driver's exec (src/sandbox/exec.c) and the gvisor
 * driver's agent (agent.c), which are different programs. */
#ifndef RUNTIME_SANDBOX_AGENT_EXEC_PATH_H
#define RUNTIME_SANDBOX_AGENT_EXEC_PATH_H

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* envp's value of name, or NULL. */
static inline const char *exec_env_get(char *const *envp, const char *name)
{
    size_t n = strlen(name);
    for (; envp && *envp; envp++)
        if (strncmp(*envp, name, n) == 0 && (*envp)[n] == '=') return *envp + n + 1;
    return NULL;
}

/* argv[0] as is when it has a '/', else each directory of envp's PATH (default
 * /usr/local/bin:/usr/bin:/bin) in turn. Returns only when no execve worked: the errno
 * to report (EACCES when one was found but not executable). */
static inline int exec_in_path(char *const *argv, char *const *envp)
{
    if (strchr(argv[0], '/')) {
        execve(argv[0], argv, envp);
        return errno;
    }
    const char *path = exec_env_get(envp, "PATH");
    if (!path) path = "/usr/local/bin:/usr/bin:/bin";
    int saved = ENOENT;
    char cand[4096];
    while (*path) {
        size_t len = strcspn(path, ":");
        snprintf(cand, sizeof cand, "%.*s/%s", (int)len, path, argv[0]);
        execve(cand, argv, envp);
        if (errno == EACCES)
            saved = EACCES;
        else if (errno != ENOENT && errno != ENOTDIR)
            return errno;
        path += len + (path[len] == ':');
    }
    return saved;
}

#endif
