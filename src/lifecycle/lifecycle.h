/* lifecycle: a sandbox's states and the only moves between them, as one table
 * (lifecycle.c). The server drives it (server/lifecycle.c): every change of a
 * sandbox's state is a move looked up here, so a move the table lacks cannot
 * happen by accident. The diagram is at the top of docs/architecture.md.
 *
 *   creating --built--> running --pause--> pausing --frozen--> paused
 *   paused --wake--> waking --thawed--> running
 *   paused --hibernate--> hibernating --checkpointed--> hibernated
 *   hibernated --wake--> restoring --thawed--> running
 *   running|paused|hibernated --stop--> stopping --halted--> stopped --start--> starting
 *   starting --built--> running; resting states --remove--> removing
 *
 * Pure: no I/O, so the unit test walks every pair of state and event. */
#ifndef RUNTIME_LIFECYCLE_H
#define RUNTIME_LIFECYCLE_H

#include <stdbool.h>

/* Transitional states (…ing) last while the keeper works; the others are where a
 * sandbox rests, and only those are written to the store. */
enum sbx_state {
    SBX_CREATING, /* its row is saved, the keeper builds it */
    SBX_RUNNING,
    SBX_PAUSING, /* being frozen */
    SBX_PAUSED,  /* frozen: processes and memory kept */
    SBX_WAKING,  /* being thawed */
    SBX_STOPPING,
    SBX_STOPPED,  /* no process; workspace, settings, name and gateway link kept */
    SBX_STARTING, /* a stopped one being built again on its workspace */
    SBX_REMOVING,
    SBX_FAILED,      /* could not be built, or a removal failed: remove it (again) */
    SBX_HIBERNATING, /* a paused one whose memory is being written to an image */
    SBX_HIBERNATED,  /* its processes are an image on disk: storage only */
    SBX_RESTORING,   /* a hibernated one being brought back from its image */
    SBX_STATE_COUNT
};

/* What moves a sandbox: a request (pause, wake, stop, start, remove) or the
 * keeper's answer to one (built, frozen, ...). */
enum sbx_event {
    SBX_BUILT,         /* the keeper built it (a create or a start) */
    SBX_BUILD_FAILED,  /* ... could not */
    SBX_PAUSE,         /* asked to pause */
    SBX_FROZEN,        /* the keeper froze it */
    SBX_WAKE,          /* asked to wake */
    SBX_THAWED,        /* the keeper thawed it */
    SBX_CHANGE_FAILED, /* a freeze or thaw failed: back where it was */
    SBX_STOP,          /* asked to stop */
    SBX_HALTED,        /* the keeper ended its processes, the workspace kept */
    SBX_HALT_FAILED,   /* ... could not end them all */
    SBX_DIED,          /* its init exited on its own (killed on the host, say) */
    SBX_START,         /* asked to start a stopped one */
    SBX_REMOVE,        /* asked to remove it */
    SBX_REMOVE_FAILED, /* the keeper could not remove everything */
    SBX_HIBERNATE,     /* asked to hibernate (a paused one) */
    SBX_CHECKPOINTED,  /* the keeper wrote its image and ended its processes */
    SBX_EVENT_COUNT
};

/* The state event moves from into, or -1 when the table has no such move. */
int lifecycle_next(enum sbx_state from, enum sbx_event event);

/* The kind of event the move records in the sandbox's event log ("sandbox.paused",
 * ...), or NULL for a move that records none: moves into a …ing state record
 * nothing, the move that ends it does. */
const char *lifecycle_event_kind(enum sbx_state from, enum sbx_event event);

const char *sbx_state_name(enum sbx_state state);
/* The state as a message says it: "sandbox X is being created", "... is paused". */
const char *sbx_state_said(enum sbx_state state);
const char *sbx_event_name(enum sbx_event event);
bool sbx_state_transitional(enum sbx_state state);

/* The status the API shows and the store keeps: one of the resting states'
 * names (creating, running, paused, stopped, failed, hibernated). A transitional
 * state shows the status it has until the keeper is done: pausing running, waking
 * paused, starting creating, hibernating paused, restoring hibernated; stopping and
 * removing show stopped. */
const char *sbx_status_name(enum sbx_state state);
/* Runtime Cloud's word for a state, the API's `state` (starting, running,
 * pausing, paused, resuming, stopping, stopped). A failed sandbox is stopped
 * there: nothing runs in it. A hibernated one is paused there (Runtime Cloud's
 * paused sandboxes cost storage only, which hibernation is). */
const char *sbx_state_word(enum sbx_state state);
/* The resting state whose status a state shows (pausing: running, ...). */
enum sbx_state sbx_state_shown(enum sbx_state state);
#define SBX_STATUS_COUNT 6
/* The i-th public status (0 <= i < SBX_STATUS_COUNT), for /metrics. */
enum sbx_state sbx_status_at(int i);
/* The resting state a stored status stands for; an unknown name reads as failed. */
enum sbx_state sbx_status_parse(const char *name);

#endif
