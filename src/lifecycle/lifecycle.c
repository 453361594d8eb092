/* The table of a sandbox's moves (lifecycle.h). Adding a state (hibernated, say)
 * is a name here and its rows: nothing else decides what may follow what. */
#include "lifecycle.h"

#include <stddef.h>
#include <string.h>

struct move {
    enum sbx_state from;
    enum sbx_event event;
    enum sbx_state to;
    const char *kind; /* the event recorded, or NULL */
};

/* Every move there is. An init that dies while the keeper pauses or wakes its
 * sandbox moves it to stopping: the keeper's answer to the change then finds it
 * stopping and fails, and the stop runs after it (the keeper answers in order).
 * One that dies while its sandbox is being built is stopped once it is built
 * (the server keeps a flag): a build is not cut short. */
static const struct move moves[] = {
    {SBX_CREATING, SBX_BUILT, SBX_RUNNING, NULL},
    {SBX_CREATING, SBX_BUILD_FAILED, SBX_FAILED, NULL},

    {SBX_RUNNING, SBX_PAUSE, SBX_PAUSING, NULL},
    {SBX_RUNNING, SBX_STOP, SBX_STOPPING, NULL},
    {SBX_RUNNING, SBX_DIED, SBX_STOPPING, "sandbox.exited"},
    {SBX_RUNNING, SBX_REMOVE, SBX_REMOVING, NULL},

    {SBX_PAUSING, SBX_FROZEN, SBX_PAUSED, "sandbox.paused"},
    {SBX_PAUSING, SBX_CHANGE_FAILED, SBX_RUNNING, NULL},
    {SBX_PAUSING, SBX_DIED, SBX_STOPPING, "sandbox.exited"},

    {SBX_PAUSED, SBX_WAKE, SBX_WAKING, NULL},
    {SBX_PAUSED, SBX_STOP, SBX_STOPPING, NULL},
    {SBX_PAUSED, SBX_DIED, SBX_STOPPING, "sandbox.exited"},
    {SBX_PAUSED, SBX_REMOVE, SBX_REMOVING, NULL},
    {SBX_PAUSED, SBX_HIBERNATE, SBX_HIBERNATING, NULL},

    /* The sentry ends after a checkpoint: its death is not DIED here. */
    {SBX_HIBERNATING, SBX_CHECKPOINTED, SBX_HIBERNATED, "sandbox.hibernated"},
    {SBX_HIBERNATING, SBX_CHANGE_FAILED, SBX_PAUSED, NULL},

    {SBX_HIBERNATED, SBX_WAKE, SBX_RESTORING, NULL},
    {SBX_HIBERNATED, SBX_STOP, SBX_STOPPING, NULL},
    {SBX_HIBERNATED, SBX_DIED, SBX_STOPPING, "sandbox.exited"},
    {SBX_HIBERNATED, SBX_REMOVE, SBX_REMOVING, NULL},

    {SBX_RESTORING, SBX_THAWED, SBX_RUNNING, "sandbox.resumed"},
    {SBX_RESTORING, SBX_CHANGE_FAILED, SBX_HIBERNATED, NULL},
    {SBX_RESTORING, SBX_DIED, SBX_STOPPING, "sandbox.exited"},

    {SBX_WAKING, SBX_THAWED, SBX_RUNNING, "sandbox.resumed"},
    {SBX_WAKING, SBX_CHANGE_FAILED, SBX_PAUSED, NULL},
    {SBX_WAKING, SBX_DIED, SBX_STOPPING, "sandbox.exited"},

    {SBX_STOPPING, SBX_HALTED, SBX_STOPPED, "sandbox.stopped"},
    {SBX_STOPPING, SBX_HALT_FAILED, SBX_FAILED, NULL},

    {SBX_STOPPED, SBX_START, SBX_STARTING, NULL},
    {SBX_STOPPED, SBX_REMOVE, SBX_REMOVING, NULL},

    {SBX_STARTING, SBX_BUILT, SBX_RUNNING, "sandbox.started"},
    {SBX_STARTING, SBX_BUILD_FAILED, SBX_STOPPED, NULL}, /* its workspace is still there */

    {SBX_REMOVING, SBX_REMOVE_FAILED, SBX_FAILED, NULL},

    {SBX_FAILED, SBX_START, SBX_STARTING, NULL}, /* built again on its workspace */
    {SBX_FAILED, SBX_REMOVE, SBX_REMOVING, NULL},
};

static const struct move *find(enum sbx_state from, enum sbx_event event)
{
    for (size_t i = 0; i < sizeof moves / sizeof moves[0]; i++)
        if (moves[i].from == from && moves[i].event == event) return &moves[i];
    return NULL;
}

int lifecycle_next(enum sbx_state from, enum sbx_event event)
{
    const struct move *m = find(from, event);
    return m ? (int)m->to : -1;
}

const char *lifecycle_event_kind(enum sbx_state from, enum sbx_event event)
{
    const struct move *m = find(from, event);
    return m ? m->kind : NULL;
}

/* Each state's name, the resting state whose status it shows, and Runtime
 * Cloud's word for it. */
static const struct {
    const char *name;
    enum sbx_state shown;
    const char *word; /* Runtime Cloud's */
    const char *said; /* in messages: "sandbox X is ..." */
} states[SBX_STATE_COUNT] = {
    [SBX_CREATING] = {"creating", SBX_CREATING, "starting", "being created"},
    [SBX_RUNNING] = {"running", SBX_RUNNING, "running", "running"},
    [SBX_PAUSING] = {"pausing", SBX_RUNNING, "pausing", "being paused"},
    [SBX_PAUSED] = {"paused", SBX_PAUSED, "paused", "paused"},
    [SBX_WAKING] = {"waking", SBX_PAUSED, "resuming", "being woken"},
    [SBX_STOPPING] = {"stopping", SBX_STOPPED, "stopping", "being stopped"},
    [SBX_STOPPED] = {"stopped", SBX_STOPPED, "stopped", "stopped"},
    [SBX_STARTING] = {"starting", SBX_CREATING, "starting", "being started"},
    [SBX_REMOVING] = {"removing", SBX_STOPPED, "stopping", "being removed"},
    [SBX_FAILED] = {"failed", SBX_FAILED, "stopped", "failed"},
    [SBX_HIBERNATING] = {"hibernating", SBX_PAUSED, "paused", "being hibernated"},
    [SBX_HIBERNATED] = {"hibernated", SBX_HIBERNATED, "paused", "hibernated"},
    [SBX_RESTORING] = {"restoring", SBX_HIBERNATED, "resuming", "being restored"},
};

static const char *const event_names[SBX_EVENT_COUNT] = {
    [SBX_BUILT] = "built",
    [SBX_BUILD_FAILED] = "build failed",
    [SBX_PAUSE] = "pause",
    [SBX_FROZEN] = "frozen",
    [SBX_WAKE] = "wake",
    [SBX_THAWED] = "thawed",
    [SBX_CHANGE_FAILED] = "change failed",
    [SBX_STOP] = "stop",
    [SBX_HALTED] = "halted",
    [SBX_HALT_FAILED] = "halt failed",
    [SBX_DIED] = "died",
    [SBX_START] = "start",
    [SBX_REMOVE] = "remove",
    [SBX_REMOVE_FAILED] = "remove failed",
    [SBX_HIBERNATE] = "hibernate",
    [SBX_CHECKPOINTED] = "checkpointed",
};

static const enum sbx_state resting[SBX_STATUS_COUNT] = {SBX_CREATING, SBX_RUNNING, SBX_PAUSED,
                                                         SBX_STOPPED,  SBX_FAILED,  SBX_HIBERNATED};

const char *sbx_state_name(enum sbx_state state)
{
    return state < SBX_STATE_COUNT ? states[state].name : "failed";
}

const char *sbx_event_name(enum sbx_event event)
{
    return event < SBX_EVENT_COUNT ? event_names[event] : "?";
}

bool sbx_state_transitional(enum sbx_state state)
{
    for (int i = 0; i < SBX_STATUS_COUNT; i++)
        if (resting[i] == state) return false;
    return true;
}

const char *sbx_state_said(enum sbx_state state)
{
    return state < SBX_STATE_COUNT ? states[state].said : "failed";
}

const char *sbx_state_word(enum sbx_state state)
{
    return state < SBX_STATE_COUNT ? states[state].word : "stopped";
}

enum sbx_state sbx_state_shown(enum sbx_state state)
{
    return state < SBX_STATE_COUNT ? states[state].shown : SBX_FAILED;
}

const char *sbx_status_name(enum sbx_state state)
{
    return states[sbx_state_shown(state)].name;
}

enum sbx_state sbx_status_at(int i)
{
    return i >= 0 && i < SBX_STATUS_COUNT ? resting[i] : SBX_FAILED;
}

enum sbx_state sbx_status_parse(const char *name)
{
    for (int i = 0; i < SBX_STATUS_COUNT; i++)
        if (name && strcmp(name, states[resting[i]].name) == 0) return resting[i];
    return SBX_FAILED;
}
