/* keeper_uid_block_claim: one uid block per state directory on a host, kept across
 * restarts, stale entries taken over, copies and exhaustion refused with a reason. Each
 * test has its own register and state directories under a temp dir. */
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "keeper/keeper.h"
#include "unit.h"

struct world {
    char root[64];
    char reg[128];
};

static void world_make(struct world *w)
{
    snprintf(w->root, sizeof w->root, "/tmp/runtime-unit-uidblock.XXXXXX");
    if (!mkdtemp(w->root)) abort();
    snprintf(w->reg, sizeof w->reg, "%s/register", w->root);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    return remove(path);
}

static void rm_rf(const char *path)
{
    nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void world_free(struct world *w)
{
    rm_rf(w->root);
}

/* A state directory NAME under the world's root, into out (its real path). */
static void state_dir(struct world *w, const char *name, char *out, size_t n)
{
    snprintf(out, n, "%s/%s", w->root, name);
    mkdir(out, 0711);
}

static int claim(struct world *w, const char *state, err_t *err)
{
    uint32_t b = 999;
    int r = keeper_uid_block_claim(w->reg, state, &b, err);
    return r < 0 ? r : (int)b;
}

static void read_text(const char *dir, const char *name, char *out, size_t n)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (read_file_small(path, out, n) < 0) out[0] = '\0';
}

TEST(uidblock_first_claims_take_the_lowest_free_blocks_and_record_them)
{
    struct world w;
    world_make(&w);
    char a[PATH_MAX], b[PATH_MAX], text[512];
    state_dir(&w, "a", a, sizeof a);
    state_dir(&w, "b", b, sizeof b);
    err_t err = {0};
    CHECK(claim(&w, a, &err) == 0);
    CHECK(claim(&w, b, &err) == 1);
    read_text(a, "uid-block", text, sizeof text);
    CHECK(strncmp(text,
                  "0\n# runtimed's uid block: sandbox host uids 1000000000..1067108863, "
                  "server 999999999, signer 999999998\n",
                  sizeof text) == 0);
    read_text(b, "uid-block", text, sizeof text);
    CHECK(strncmp(text, "1\n", 2) == 0);
    CHECK(strstr(text, "uids 1067174400..1134283263, server 1067174399, signer 1067174398"));
    /* The register names each directory at its block. */
    read_text(w.reg, "1", text, sizeof text);
    char want[PATH_MAX + 1];
    snprintf(want, sizeof want, "%s\n", b);
    CHECK_STR(text, want);
    world_free(&w);
}

TEST(uidblock_a_restarted_daemon_keeps_its_block)
{
    struct world w;
    world_make(&w);
    char a[PATH_MAX], b[PATH_MAX];
    state_dir(&w, "a", a, sizeof a);
    state_dir(&w, "b", b, sizeof b);
    err_t err = {0};
    CHECK(claim(&w, a, &err) == 0);
    CHECK(claim(&w, b, &err) == 1);
    /* Block 0 freed (a's directory gone), b restarts: b stays at 1, it does not move down. */
    rm_rf(a);
    CHECK(claim(&w, b, &err) == 1);
    CHECK(claim(&w, b, &err) == 1);
    /* And a register lost (a new /var/lib, say) is rebuilt from the records. */
    rm_rf(w.reg);
    CHECK(claim(&w, b, &err) == 1);
    char c[PATH_MAX];
    state_dir(&w, "c", c, sizeof c);
    CHECK(claim(&w, c, &err) == 0);
    world_free(&w);
}

TEST(uidblock_stale_entries_are_taken_over)
{
    struct world w;
    world_make(&w);
    char a[PATH_MAX], b[PATH_MAX], c[PATH_MAX], d[PATH_MAX], text[PATH_MAX + 1];
    state_dir(&w, "a", a, sizeof a);
    state_dir(&w, "b", b, sizeof b);
    state_dir(&w, "c", c, sizeof c);
    state_dir(&w, "d", d, sizeof d);
    err_t err = {0};
    CHECK(claim(&w, a, &err) == 0);
    CHECK(claim(&w, b, &err) == 1);
    CHECK(claim(&w, c, &err) == 2);
    /* b's directory is gone: its block is free. */
    rm_rf(b);
    CHECK(claim(&w, d, &err) == 1);
    read_text(w.reg, "1", text, sizeof text);
    CHECK(strncmp(text, d, strlen(d)) == 0);
    /* c's record names another block now (hand-edited): entry 2 no longer holds. */
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/uid-block", c);
    CHECK(write_file(path, "5\n") == 0);
    char e[PATH_MAX];
    state_dir(&w, "e", e, sizeof e);
    CHECK(claim(&w, e, &err) == 2);
    /* An entry that is not a path at all is stale too. */
    snprintf(path, sizeof path, "%s/3", w.reg);
    CHECK(write_file(path, "garbage\n") == 0);
    char f[PATH_MAX];
    state_dir(&w, "f", f, sizeof f);
    CHECK(claim(&w, f, &err) == 3);
    world_free(&w);
}

TEST(uidblock_a_copied_state_dir_is_refused_while_the_original_holds_the_block)
{
    struct world w;
    world_make(&w);
    char a[PATH_MAX], copy[PATH_MAX], text[512];
    state_dir(&w, "a", a, sizeof a);
    state_dir(&w, "copy", copy, sizeof copy);
    err_t err = {0};
    CHECK(claim(&w, a, &err) == 0);
    read_text(a, "uid-block", text, sizeof text);
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/uid-block", copy);
    CHECK(write_file(path, text) == 0);
    CHECK(claim(&w, copy, &err) == -EBUSY);
    CHECK(strstr(err.msg, "uid block 0 of ") && strstr(err.msg, "is held by ") &&
          strstr(err.msg, "a copy of the other"));
    /* The original is unaffected. */
    CHECK(claim(&w, a, &err) == 0);
    world_free(&w);
}

TEST(uidblock_when_every_block_is_held_the_error_names_the_holders)
{
    struct world w;
    world_make(&w);
    err_t err = {0};
    char dir[PATH_MAX];
    for (uint32_t i = 0; i < SANDBOX_UID_BLOCKS; i++) {
        char name[16];
        snprintf(name, sizeof name, "s%u", i);
        state_dir(&w, name, dir, sizeof dir);
        CHECK(claim(&w, dir, &err) == (int)i);
    }
    state_dir(&w, "one-too-many", dir, sizeof dir);
    CHECK(claim(&w, dir, &err) == -ENOSPC);
    CHECK(strstr(err.msg, "every uid block of this host (17) is held: remove the state "
                          "directory of a daemon no longer used"));
    CHECK(strstr(err.msg, "/register names them: 0: ") && strstr(err.msg, "/s0, 1: "));
    /* Nothing was recorded for the one that failed. */
    char text[64];
    read_text(dir, "uid-block", text, sizeof text);
    CHECK_STR(text, "");
    world_free(&w);
}

TEST(uidblock_a_state_dir_from_before_blocks_takes_block_0_or_fails)
{
    struct world w;
    world_make(&w);
    char old[PATH_MAX], other[PATH_MAX], path[PATH_MAX + 32];
    state_dir(&w, "old", old, sizeof old);
    snprintf(path, sizeof path, "%s/db", old);
    mkdir(path, 0700);
    snprintf(path, sizeof path, "%s/db/runtime.db", old);
    CHECK(write_file(path, "") == 0);
    err_t err = {0};
    CHECK(claim(&w, old, &err) == 0);
    /* The same, with block 0 taken by another daemon first. */
    struct world w2;
    world_make(&w2);
    state_dir(&w2, "other", other, sizeof other);
    CHECK(claim(&w2, other, &err) == 0);
    char old2[PATH_MAX];
    state_dir(&w2, "old", old2, sizeof old2);
    snprintf(path, sizeof path, "%s/db", old2);
    mkdir(path, 0700);
    snprintf(path, sizeof path, "%s/db/runtime.db", old2);
    CHECK(write_file(path, "") == 0);
    CHECK(claim(&w2, old2, &err) == -EBUSY);
    CHECK(strstr(err.msg, "from before uid blocks") && strstr(err.msg, other));
    world_free(&w);
    world_free(&w2);
}

TEST(uidblock_a_record_that_names_no_block_is_an_error)
{
    struct world w;
    world_make(&w);
    char a[PATH_MAX], path[PATH_MAX + 16];
    state_dir(&w, "a", a, sizeof a);
    snprintf(path, sizeof path, "%s/uid-block", a);
    CHECK(write_file(path, "17\n") == 0);
    err_t err = {0};
    CHECK(claim(&w, a, &err) == -EINVAL);
    CHECK(strstr(err.msg, "does not name a uid block from 0 to 16"));
    world_free(&w);
}

TEST(uidblock_daemons_claiming_at_once_take_different_blocks)
{
    struct world w;
    world_make(&w);
    enum { N = 6 };
    char dirs[N][PATH_MAX];
    pid_t pids[N];
    for (int i = 0; i < N; i++) {
        char name[16];
        snprintf(name, sizeof name, "p%d", i);
        state_dir(&w, name, dirs[i], sizeof dirs[i]);
    }
    for (int i = 0; i < N; i++) {
        pids[i] = fork();
        if (pids[i] == 0) {
            err_t err = {0};
            _exit(claim(&w, dirs[i], &err) < 0 ? 100 : claim(&w, dirs[i], &err));
        }
    }
    unsigned seen = 0;
    for (int i = 0; i < N; i++) {
        int st = 0;
        waitpid(pids[i], &st, 0);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) < N);
        seen |= 1u << WEXITSTATUS(st);
    }
    CHECK(seen == (1u << N) - 1); /* blocks 0..N-1, each once */
    world_free(&w);
}
