/* Private to the server folder. */
#ifndef RUNTIME_SERVER_IMPL_H
#define RUNTIME_SERVER_IMPL_H

#include "../store/store.h"
#include "server.h"

#define DEFAULT_PIDS_MAX 1024
#define EVENTS_FLUSH_MS 200
#define EVENTS_PENDING_MAX 512

struct pending_event {
    char sandbox[PROTO_ID_LEN];
    struct store_event ev; /* kind and fields_json owned */
};

struct server {
    struct server_config cfg;
    struct event_base *base;
    struct evhttp *http;
    struct store *store;
    struct egress *egress;
    int keeper;
    uint32_t next_req;
    struct sbx *sandboxes; /* newest first */
    size_t count;
    struct pending_event pending[EVENTS_PENDING_MAX];
    size_t n_pending;
    struct event *flush_timer;
};

/* events.c */
int events_start(struct server *srv);
void events_flush(struct server *srv);
void events_stop(struct server *srv);

#endif
