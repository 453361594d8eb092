/* sysprobe: makes raw system calls by number from inside a sandbox and says how
 * each one ended, for tests/escape/syscalls.test.mjs.
 *
 *   sysprobe NAME=NR[:ARG,ARG...]...   one line per call: NAME nr=NR rc=RC errno=E (text)
 *   sysprobe x32 NR [ARG...]           the same call through the x32 ABI
 *   sysprobe i386 NR [ARG...]          the same call through int 0x80 (i386 ABI)
 *
 * An ARG is a number (decimal, 0x hex, negative), "self" (our pid) or "buf" (a
 * zeroed 4 KiB buffer). The tests pick arguments that do nothing if a call gets
 * through: zero lengths, bad fds, reads of our own state. Exit status 0 once every
 * call was made, 2 on a usage error; a call the filter kills ends the process.
 *
 * Built by the tests with `cc -O2 -Wall -o sysprobe sysprobe.c`. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef __X32_SYSCALL_BIT
#define __X32_SYSCALL_BIT 0x40000000
#endif

static _Alignas(64) unsigned char buf[4096];

static int parse_arg(const char *s, long *out)
{
    if (strcmp(s, "self") == 0) *out = (long)getpid();
    else if (strcmp(s, "buf") == 0) *out = (long)(uintptr_t)buf;
    else {
        char *end;
        errno = 0;
        *out = s[0] == '-' ? strtol(s, &end, 0) : (long)strtoull(s, &end, 0);
        if (!*s || *end || errno) return -1;
    }
    return 0;
}

/* Up to six arguments from "A,B,C" (or from argv for the ABI forms). */
static int parse_args(char *list, long a[6])
{
    memset(a, 0, 6 * sizeof a[0]);
    int n = 0;
    for (char *save = NULL, *t = list ? strtok_r(list, ",", &save) : NULL; t;
         t = strtok_r(NULL, ",", &save)) {
        if (n == 6 || parse_arg(t, &a[n++]) < 0) return -1;
    }
    return 0;
}

static void report(const char *name, long nr, long rc, int e)
{
    memset(buf, 0, sizeof buf); /* the next call sees a zeroed buffer again */
    printf("%s nr=%ld rc=%ld errno=%d (%s)\n", name, nr, rc, rc < 0 ? e : 0,
           rc < 0 ? strerror(e) : "ok");
}

static int call_named(char *spec)
{
    char *eq = strchr(spec, '=');
    if (!eq) return -1;
    *eq = '\0';
    char *colon = strchr(eq + 1, ':');
    if (colon) *colon = '\0';
    long nr, a[6];
    if (parse_arg(eq + 1, &nr) < 0 || parse_args(colon ? colon + 1 : NULL, a) < 0) return -1;
    long rc = syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
    report(spec, nr, rc, errno);
    return 0;
}

static int call_abi(const char *abi, int argc, char **argv)
{
    long nr, a[6] = {0};
    if (argc < 3 || argc > 9 || parse_arg(argv[2], &nr) < 0) return -1;
    for (int i = 3; i < argc; i++)
        if (parse_arg(argv[i], &a[i - 3]) < 0) return -1;
#ifdef __x86_64__
    long rc;
    if (strcmp(abi, "x32") == 0) {
        rc = syscall(__X32_SYSCALL_BIT | nr, a[0], a[1], a[2], a[3], a[4], a[5]);
        report("x32", nr, rc, errno);
        return 0;
    }
    if (strcmp(abi, "i386") == 0) {
        /* Only 32-bit values reach the i386 table; buf lies in the low 4 GiB only by
         * luck, so i386 calls should take numbers. */
        rc = nr;
        __asm__ volatile("int $0x80"
                         : "+a"(rc)
                         : "b"(a[0]), "c"(a[1]), "d"(a[2]), "S"(a[3]), "D"(a[4])
                         : "memory");
        report("i386", nr, rc, rc < 0 ? (int)-rc : 0);
        return 0;
    }
#endif
    return -1;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    if (argc < 2) goto usage;
    if (strcmp(argv[1], "x32") == 0 || strcmp(argv[1], "i386") == 0) {
        if (call_abi(argv[1], argc, argv) < 0) goto usage;
        return 0;
    }
    for (int i = 1; i < argc; i++)
        if (call_named(argv[i]) < 0) goto usage;
    return 0;
usage:
    fputs("usage: sysprobe NAME=NR[:ARG,...]... | x32 NR [ARG...] | i386 NR [ARG...]\n", stderr);
    return 2;
}
