/* The sandbox state machine: every pair of state and event, the allowed ones
 * against a list written here from the words (not copied from the
 * table), and every other refused. */
#include "lifecycle/lifecycle.h"
#include "unit.h"

struct allowed {
    enum sbx_state from;
    enum sbx_event event;
    enum sbx_state to;
};

static const struct allowed allowed[] = {
    /* creation */
    {SBX_CREATING, SBX_BUILT, SBX_RUNNING},
    {SBX_CREATING, SBX_BUILD_FAILED, SBX_FAILED},
    /* pause and wake, and a keeper that could not */
    {SBX_RUNNING, SBX_PAUSE, SBX_PAUSING},
    {SBX_PAUSING, SBX_FROZEN, SBX_PAUSED},
    {SBX_PAUSING, SBX_CHANGE_FAILED, SBX_RUNNING},
    {SBX_PAUSED, SBX_WAKE, SBX_WAKING},
    {SBX_WAKING, SBX_THAWED, SBX_RUNNING},
    {SBX_WAKING, SBX_CHANGE_FAILED, SBX_PAUSED},
    /* hibernation: a paused one's memory to an image and back; a checkpoint or a
     * restore the keeper could not do leaves it where it was */
    {SBX_PAUSED, SBX_HIBERNATE, SBX_HIBERNATING},
    {SBX_HIBERNATING, SBX_CHECKPOINTED, SBX_HIBERNATED},
    {SBX_HIBERNATING, SBX_CHANGE_FAILED, SBX_PAUSED},
    {SBX_HIBERNATED, SBX_WAKE, SBX_RESTORING},
    {SBX_RESTORING, SBX_THAWED, SBX_RUNNING},
    {SBX_RESTORING, SBX_CHANGE_FAILED, SBX_HIBERNATED},
    {SBX_HIBERNATED, SBX_STOP, SBX_STOPPING},
    /* stop and start */
    {SBX_RUNNING, SBX_STOP, SBX_STOPPING},
    {SBX_PAUSED, SBX_STOP, SBX_STOPPING},
    {SBX_STOPPING, SBX_HALTED, SBX_STOPPED},
    {SBX_STOPPING, SBX_HALT_FAILED, SBX_FAILED},
    {SBX_STOPPED, SBX_START, SBX_STARTING},
    {SBX_FAILED, SBX_START, SBX_STARTING},
    {SBX_STARTING, SBX_BUILT, SBX_RUNNING},
    {SBX_STARTING, SBX_BUILD_FAILED, SBX_STOPPED},
    /* an init that dies is a stop nobody asked for, from wherever it ran (one
     * being built is stopped once it is built) */
    {SBX_RUNNING, SBX_DIED, SBX_STOPPING},
    {SBX_PAUSING, SBX_DIED, SBX_STOPPING},
    {SBX_PAUSED, SBX_DIED, SBX_STOPPING},
    {SBX_WAKING, SBX_DIED, SBX_STOPPING},
    {SBX_HIBERNATED, SBX_DIED, SBX_STOPPING},
    {SBX_RESTORING, SBX_DIED, SBX_STOPPING},
    /* removal, from any state at rest but creating */
    {SBX_RUNNING, SBX_REMOVE, SBX_REMOVING},
    {SBX_PAUSED, SBX_REMOVE, SBX_REMOVING},
    {SBX_STOPPED, SBX_REMOVE, SBX_REMOVING},
    {SBX_FAILED, SBX_REMOVE, SBX_REMOVING},
    {SBX_HIBERNATED, SBX_REMOVE, SBX_REMOVING},
    {SBX_REMOVING, SBX_REMOVE_FAILED, SBX_FAILED},
};
#define N_ALLOWED (sizeof allowed / sizeof allowed[0])

static int expected(enum sbx_state from, enum sbx_event event)
{
    for (size_t i = 0; i < N_ALLOWED; i++)
        if (allowed[i].from == from && allowed[i].event == event) return (int)allowed[i].to;
    return -1;
}

TEST(lifecycle_every_allowed_move_and_no_other)
{
    int moves = 0;
    for (int s = 0; s < SBX_STATE_COUNT; s++)
        for (int e = 0; e < SBX_EVENT_COUNT; e++) {
            int want = expected(s, e), got = lifecycle_next(s, e);
            if (got != want) {
                fprintf(stderr, "  %s --%s--> %s, want %s\n", sbx_state_name(s), sbx_event_name(e),
                        got < 0 ? "(refused)" : sbx_state_name(got),
                        want < 0 ? "(refused)" : sbx_state_name(want));
                CHECK(got == want);
            }
            moves += got >= 0;
        }
    CHECK(moves == (int)N_ALLOWED);
}

/* Out-of-range values are refused, never read past the table. */
TEST(lifecycle_refuses_unknown_states_and_events)
{
    CHECK(lifecycle_next(SBX_STATE_COUNT, SBX_BUILT) == -1);
    CHECK(lifecycle_next(SBX_RUNNING, SBX_EVENT_COUNT) == -1);
    CHECK(lifecycle_event_kind(SBX_STATE_COUNT, SBX_BUILT) == NULL);
    CHECK_STR(sbx_status_name(SBX_STATE_COUNT), "failed");
}

/* Every state is reachable from creating, and every state can end in removing. */
TEST(lifecycle_every_state_reachable_and_removable)
{
    bool seen[SBX_STATE_COUNT] = {[SBX_CREATING] = true};
    for (int round = 0; round < SBX_STATE_COUNT; round++)
        for (int s = 0; s < SBX_STATE_COUNT; s++)
            for (int e = 0; e < SBX_EVENT_COUNT && seen[s]; e++) {
                int to = lifecycle_next(s, e);
                if (to >= 0) seen[to] = true;
            }
    for (int s = 0; s < SBX_STATE_COUNT; s++) {
        if (!seen[s]) fprintf(stderr, "  %s is unreachable\n", sbx_state_name(s));
        CHECK(seen[s]);
    }
    bool ends[SBX_STATE_COUNT] = {[SBX_REMOVING] = true};
    for (int round = 0; round < SBX_STATE_COUNT; round++)
        for (int s = 0; s < SBX_STATE_COUNT; s++)
            for (int e = 0; e < SBX_EVENT_COUNT; e++) {
                int to = lifecycle_next(s, e);
                if (to >= 0 && ends[to]) ends[s] = true;
            }
    for (int s = 0; s < SBX_STATE_COUNT; s++) {
        if (!ends[s]) fprintf(stderr, "  %s can never be removed\n", sbx_state_name(s));
        CHECK(ends[s]);
    }
}

/* What the event log records: the end of each keeper job, never the start of one. */
TEST(lifecycle_events_recorded_where_a_change_lands)
{
    CHECK_STR(lifecycle_event_kind(SBX_PAUSING, SBX_FROZEN), "sandbox.paused");
    CHECK_STR(lifecycle_event_kind(SBX_WAKING, SBX_THAWED), "sandbox.resumed");
    CHECK_STR(lifecycle_event_kind(SBX_STOPPING, SBX_HALTED), "sandbox.stopped");
    CHECK_STR(lifecycle_event_kind(SBX_STARTING, SBX_BUILT), "sandbox.started");
    CHECK_STR(lifecycle_event_kind(SBX_RUNNING, SBX_DIED), "sandbox.exited");
    CHECK_STR(lifecycle_event_kind(SBX_HIBERNATING, SBX_CHECKPOINTED), "sandbox.hibernated");
    CHECK_STR(lifecycle_event_kind(SBX_RESTORING, SBX_THAWED), "sandbox.resumed");
    CHECK(lifecycle_event_kind(SBX_CREATING, SBX_BUILT) == NULL);
    for (int s = 0; s < SBX_STATE_COUNT; s++)
        for (int e = 0; e < SBX_EVENT_COUNT; e++) {
            int to = lifecycle_next(s, e);
            /* a move into a …ing state records nothing but an init's death */
            if (to >= 0 && sbx_state_transitional(to) && e != SBX_DIED)
                CHECK(lifecycle_event_kind(s, e) == NULL);
        }
}

/* The API and the store see six words; each stored one reads back as itself. */
TEST(lifecycle_status_words_round_trip)
{
    for (int i = 0; i < SBX_STATUS_COUNT; i++) {
        enum sbx_state s = sbx_status_at(i);
        CHECK(!sbx_state_transitional(s));
        CHECK(sbx_status_parse(sbx_status_name(s)) == s);
    }
    CHECK_STR(sbx_status_name(SBX_PAUSING), "running");
    CHECK_STR(sbx_status_name(SBX_WAKING), "paused");
    CHECK_STR(sbx_status_name(SBX_STARTING), "creating");
    CHECK(sbx_status_parse("pausing") == SBX_FAILED);
    CHECK(sbx_status_parse(NULL) == SBX_FAILED);
    CHECK(sbx_status_parse("garbage") == SBX_FAILED);
}

static int state_named(const char *name)
{
    for (int s = 0; s < SBX_STATE_COUNT; s++)
        if (strcmp(sbx_state_name(s), name) == 0) return s;
    return -1;
}

static int event_named(const char *name)
{
    for (int e = 0; e < SBX_EVENT_COUNT; e++)
        if (strcmp(sbx_event_name(e), name) == 0) return e;
    return -1;
}

/* One edge of the diagram, "    FROM --> TO: EVENT, EVENT": each of its moves
 * must be the table's; returns how many there were, or -1. */
static int diagram_edge(char *line)
{
    char from[32], to[32], events[128];
    if (sscanf(line, " %31s --> %31[^:]: %127[^\n]", from, to, events) != 3) return 0;
    if (from[0] == '[' || to[0] == '[') return 0; /* the start and the end */
    int f = state_named(from), t = state_named(to), n = 0;
    if (f < 0 || t < 0) return -1;
    char *save = NULL;
    for (char *ev = strtok_r(events, ",", &save); ev; ev = strtok_r(NULL, ",", &save)) {
        while (*ev == ' ')
            ev++;
        int e = event_named(ev);
        if (e < 0 || lifecycle_next(f, e) != t) {
            fprintf(stderr, "  the diagram's %s --%s--> %s is not the table's\n", from, ev, to);
            return -1;
        }
        n++;
    }
    return n;
}

/* docs/architecture.md's diagram is the table: every edge a move of it, every
 * move an edge. */
TEST(lifecycle_diagram_in_architecture_md_is_the_table)
{
    FILE *f = fopen("docs/architecture.md", "r");
    CHECK(f != NULL);
    if (!f) return;
    char line[256];
    bool inside = false;
    int moves = 0;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "stateDiagram-v2", 15) == 0) inside = true;
        if (!inside) continue;
        if (strncmp(line, "```", 3) == 0) break;
        int n = diagram_edge(line);
        CHECK(n >= 0);
        moves += n > 0 ? n : 0;
    }
    fclose(f);
    CHECK(inside);
    CHECK(moves == (int)N_ALLOWED);
}

/* Every state has its words: Runtime Cloud's, and a message's. */
TEST(lifecycle_every_state_has_its_words)
{
    static const char *const cloud[] = {"starting", "running",  "pausing", "paused",
                                        "resuming", "stopping", "stopped"};
    for (int s = 0; s < SBX_STATE_COUNT; s++) {
        bool known = false;
        for (size_t i = 0; i < sizeof cloud / sizeof cloud[0]; i++)
            known = known || strcmp(sbx_state_word(s), cloud[i]) == 0;
        CHECK(known);
        CHECK(sbx_state_said(s) && sbx_state_said(s)[0]);
    }
    CHECK_STR(sbx_state_said(SBX_CREATING), "being created");
    CHECK_STR(sbx_state_word(SBX_WAKING), "resuming");
}
