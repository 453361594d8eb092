/* The egress registry: per-sandbox listeners and policy, host addresses for the
 * guard, events. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "egress_impl.h"

/* The host's own addresses: a sandbox must not reach services bound to them. */
static void load_host_addrs(struct egress *eg)
{
    struct ifaddrs *ifa = NULL;
    free(eg->host_addrs);
    eg->host_addrs = NULL;
    eg->n_host_addrs = 0;
    if (getifaddrs(&ifa) < 0) return;
    size_t n = 0;
    for (struct ifaddrs *i = ifa; i; i = i->ifa_next)
        n++;
    eg->host_addrs = calloc(n ? n : 1, sizeof *eg->host_addrs);
    for (struct ifaddrs *i = ifa; i && eg->host_addrs; i = i->ifa_next) {
        if (!i->ifa_addr) continue;
        struct policy_addr *a = &eg->host_addrs[eg->n_host_addrs];
        if (i->ifa_addr->sa_family == AF_INET) {
            a->family = AF_INET;
            a->v4 = ((struct sockaddr_in *)i->ifa_addr)->sin_addr;
        } else if (i->ifa_addr->sa_family == AF_INET6) {
            a->family = AF_INET6;
            a->v6 = ((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr;
        } else {
            continue;
        }
        eg->n_host_addrs++;
    }
    freeifaddrs(ifa);
}

/* Subscribes to address changes: the kernel queues the notice before the
 * address can be used, so checking the queue before each dial is exact. */
static void watch_host_addrs(struct egress *eg)
{
    eg->nl_fd = socket(AF_NETLINK, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, NETLINK_ROUTE);
    struct sockaddr_nl sa = {.nl_family = AF_NETLINK,
                             .nl_groups = RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR};
    if (eg->nl_fd >= 0 && bind(eg->nl_fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        close(eg->nl_fd);
        eg->nl_fd = -1;
    }
}

const struct policy_addr *egress_host_addrs(struct egress *eg, size_t *n)
{
    char buf[8192];
    bool changed = eg->nl_fd < 0; /* without notices, look every time */
    for (;;) {
        ssize_t r = recv(eg->nl_fd, buf, sizeof buf, MSG_DONTWAIT);
        if (r > 0 || (r < 0 && errno == ENOBUFS))
            changed = true;
        else
            break;
    }
    if (changed) load_host_addrs(eg);
    *n = eg->n_host_addrs;
    return eg->host_addrs;
}

int egress_new(struct event_base *base, const struct egress_config *cfg, struct egress **out,
               err_t *err)
{
    struct egress *eg = calloc(1, sizeof *eg);
    if (!eg) return err_set(err, -ENOMEM, "out of memory");
    eg->base = base;
    struct rlimit nofile;
    rlim_t fds = getrlimit(RLIMIT_NOFILE, &nofile) == 0 ? nofile.rlim_cur : 1024;
    eg->max_conns =
        fds > 2 * EGRESS_FD_RESERVE ? (size_t)(fds - EGRESS_FD_RESERVE) / 6 : (size_t)fds / 12;
    eg->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    eg->on_event = cfg->on_event;
    eg->inspect_allowed_tls = cfg->inspect_allowed_tls;
    const struct egress_rates *want = &cfg->rates;
    eg->rates =
        (struct egress_rates){want->dns_queries ? want->dns_queries : EGRESS_DNS_PER_S,
                              want->dns_names ? want->dns_names : EGRESS_NAMES_PER_S,
                              want->connections ? want->connections : EGRESS_CONNS_PER_S,
                              want->open_connections ? want->open_connections : EGRESS_MAX_CONNS};
    eg->on_name = cfg->on_name;
    eg->secrets = cfg->sign ? cfg->secrets : NULL; /* no leaves, no interception */
    eg->secrets_arg = cfg->secrets_arg;
    eg->sign = cfg->sign;
    eg->event_arg = cfg->event_arg;
    if (cfg->n_pins) {
        eg->pins = calloc(cfg->n_pins, sizeof *eg->pins);
        if (!eg->pins) {
            free(eg);
            return err_set(err, -ENOMEM, "out of memory");
        }
        memcpy(eg->pins, cfg->pins, cfg->n_pins * sizeof *eg->pins);
        eg->n_pins = cfg->n_pins;
    }
    /* Resolution failures are answers too; a missing resolv.conf is not fatal. */
    if (cfg->nameserver && *cfg->nameserver) {
        eg->dns = evdns_base_new(base, EVDNS_BASE_DISABLE_WHEN_INACTIVE);
        if (eg->dns && evdns_base_nameserver_ip_add(eg->dns, cfg->nameserver) != 0) {
            evdns_base_free(eg->dns, 0);
            free(eg->pins);
            free(eg);
            return err_set(err, -EINVAL, "--nameserver %s: not an ADDR[:PORT]", cfg->nameserver);
        }
    } else {
        eg->dns = evdns_base_new(base, EVDNS_BASE_INITIALIZE_NAMESERVERS |
                                           EVDNS_BASE_DISABLE_WHEN_INACTIVE);
    }
    if (!eg->dns) eg->dns = evdns_base_new(base, 0);
    watch_host_addrs(eg);
    load_host_addrs(eg);
    int r = intercept_init(eg, cfg->upstream_ca, err);
    if (r < 0) {
        egress_free(eg);
        return r;
    }
    *out = eg;
    return 0;
}

void egress_free(struct egress *eg)
{
    if (!eg) return;
    while (eg->sandboxes)
        egress_sandbox_remove(eg->sandboxes);
    if (eg->dns) evdns_base_free(eg->dns, 0);
    if (eg->nl_fd >= 0) close(eg->nl_fd);
    intercept_fini(eg);
    if (eg->spare_fd >= 0) close(eg->spare_fd);
    free(eg->host_addrs);
    free(eg->pins);
    free(eg);
}

int egress_sandbox_add(struct egress *eg, const char *id, int fds[3], struct policy *pol,
                       struct egress_sandbox **out, err_t *err)
{
    struct egress_sandbox *es = calloc(1, sizeof *es);
    if (!es) return err_set(err, -ENOMEM, "out of memory");
    es->eg = eg;
    snprintf(es->id, sizeof es->id, "%s", id);
    es->conn_rate = RATE_LIMIT(eg->rates.connections, 2 * eg->rates.connections);
    es->dns_rate = RATE_LIMIT(eg->rates.dns_queries, 2 * eg->rates.dns_queries);
    es->name_rate = RATE_LIMIT(eg->rates.dns_names, 2 * eg->rates.dns_names);
    es->pol = *pol;
    memset(pol, 0, sizeof *pol);
    for (int i = 0; i < 3; i++) {
        es->fds[i] = fds[i];
        evutil_make_socket_nonblocking(fds[i]);
    }
    es->proxy_ev = event_new(eg->base, fds[0], EV_READ | EV_PERSIST, proxy_on_accept, es);
    es->udp_ev = event_new(eg->base, fds[1], EV_READ | EV_PERSIST, dnsstub_on_udp, es);
    es->tcp_ev = event_new(eg->base, fds[2], EV_READ | EV_PERSIST, dnsstub_on_tcp_accept, es);
    event_add(es->proxy_ev, NULL);
    event_add(es->udp_ev, NULL);
    event_add(es->tcp_ev, NULL);
    es->udp_resume = evtimer_new(eg->base, dnsstub_udp_resume, es);
    es->accept_resume = evtimer_new(eg->base, proxy_accept_resume, es);
    es->next = eg->sandboxes;
    if (eg->sandboxes) eg->sandboxes->prev = es;
    eg->sandboxes = es;
    if (out) *out = es;
    return 0;
}

void egress_sandbox_restore_name(struct egress_sandbox *es, uint32_t slot, uint64_t seq,
                                 const char *name)
{
    names_restore(&es->names, slot, seq, name);
}

void egress_sandbox_set_policy(struct egress_sandbox *es, struct policy *pol)
{
    policy_clear(&es->pol);
    es->pol = *pol;
    memset(pol, 0, sizeof *pol);
    for (struct conn *c = es->conns, *next; c; c = next) {
        next = c->next; /* conn_recheck may free c */
        conn_recheck(c);
    }
}

void egress_sandbox_close_all(struct egress_sandbox *es)
{
    while (es->conns)
        conn_close(es->conns);
    while (es->dns_conns)
        dnsstub_tcp_close(es->dns_conns);
}

void egress_sandbox_remove(struct egress_sandbox *es)
{
    while (es->conns)
        conn_close(es->conns);
    while (es->dns_conns)
        dnsstub_tcp_close(es->dns_conns);
    dnsstub_drop_waits(es);
    event_free(es->proxy_ev);
    event_free(es->udp_ev);
    event_free(es->tcp_ev);
    event_free(es->udp_resume);
    event_free(es->accept_resume);
    for (int i = 0; i < 3; i++)
        close(es->fds[i]);
    names_clear(&es->names);
    policy_clear(&es->pol);
    if (es->prev)
        es->prev->next = es->next;
    else
        es->eg->sandboxes = es->next;
    if (es->next) es->next->prev = es->prev;
    free(es);
}

void egress_sandbox_stats(const struct egress_sandbox *es, struct egress_stats *st)
{
    *st = es->stats;
    st->open = es->n_conns;
}

void egress_refused(struct egress_sandbox *es, const char *host, uint16_t port, const char *reason,
                    const char *stage)
{
    es->stats.refused++;
    if (!es->eg->on_event) return;
    json_t *f = json_pack("{s:s,s:i,s:s,s:s}", "host", host, "port", port, "reason", reason,
                          "stage", stage);
    if (f) es->eg->on_event(es->eg->event_arg, es->id, "egress.refused", f);
    json_decref(f);
}

void egress_truncated(struct egress_sandbox *es, const char *host, uint16_t port,
                      const char *reason, bool close_notify)
{
    if (!es->eg->on_event) return;
    json_t *f = json_pack("{s:s,s:i,s:s,s:b}", "host", host, "port", port, "reason", reason,
                          "closeNotify", close_notify);
    if (f) es->eg->on_event(es->eg->event_arg, es->id, "egress.truncated", f);
    json_decref(f);
}

static const char *const limit_names[LIMIT_COUNT] = {
    [LIMIT_CONNS] = "connections",
    [LIMIT_CONN_RATE] = "connections_per_second",
    [LIMIT_DNS_TCP] = "dns_tcp_connections",
    [LIMIT_DNS_RATE] = "dns_queries_per_second",
    [LIMIT_NAME_RATE] = "new_names_per_second",
    [LIMIT_DAEMON_CONNS] = "daemon_connections",
};

static unsigned limit_value(const struct egress *eg, enum egress_limit which)
{
    switch (which) {
    case LIMIT_CONNS:
        return eg->rates.open_connections;
    case LIMIT_CONN_RATE:
        return eg->rates.connections;
    case LIMIT_DNS_TCP:
        return EGRESS_MAX_DNS_TCP;
    case LIMIT_DNS_RATE:
        return eg->rates.dns_queries;
    case LIMIT_NAME_RATE:
        return eg->rates.dns_names;
    case LIMIT_DAEMON_CONNS:
        return (unsigned)eg->max_conns;
    case LIMIT_COUNT:
        break;
    }
    return 0;
}

void egress_limited(struct egress_sandbox *es, enum egress_limit which)
{
    es->stats.limited++;
    uint64_t now = now_ms();
    if (es->limit_said_ms[which] && now - es->limit_said_ms[which] < 1000) return;
    es->limit_said_ms[which] = now;
    if (!es->eg->on_event) return;
    json_t *f =
        json_pack("{s:s,s:i}", "resource", limit_names[which], "limit", limit_value(es->eg, which));
    if (f) es->eg->on_event(es->eg->event_arg, es->id, "limit.reached", f);
    json_decref(f);
}

bool egress_conn_allowed(struct egress_sandbox *es, enum egress_limit kind, size_t open)
{
    size_t max = kind == LIMIT_CONNS ? es->eg->rates.open_connections : EGRESS_MAX_DNS_TCP;
    enum egress_limit which = open >= max                             ? kind
                              : !rate_allow(&es->conn_rate, now_ms()) ? LIMIT_CONN_RATE
                              : es->eg->n_conns >= es->eg->max_conns  ? LIMIT_DAEMON_CONNS
                                                                      : LIMIT_COUNT;
    if (which == LIMIT_COUNT) return true;
    egress_limited(es, which);
    return false;
}

int egress_accept(struct egress *eg, int lfd)
{
    int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) return fd;
    int e = errno; /* close, accept4 and open below may change it */
    if ((e != EMFILE && e != ENFILE) || eg->spare_fd < 0) return -e;
    close(eg->spare_fd);
    fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    if (fd >= 0) close(fd);
    eg->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    log_warn("egress: out of descriptors; a connection was refused");
    return -e;
}

void egress_allowed(struct egress_sandbox *es, const char *host, uint16_t port,
                    const struct policy_addr *addr)
{
    es->stats.allowed++;
    if (!es->eg->on_event) return;
    char text[64];
    policy_addr_str(addr, text, sizeof text);
    json_t *f = json_pack("{s:s,s:i,s:s}", "host", host, "port", port, "address", text);
    if (f) es->eg->on_event(es->eg->event_arg, es->id, "egress.allowed", f);
    json_decref(f);
}

int egress_parse_pin(const char *text, struct egress_pin *out, err_t *err)
{
    char buf[400];
    if (str_copy(buf, sizeof buf, text) < 0) return err_set(err, -EINVAL, "--resolve is too long");
    char *c1 = strchr(buf, ':');
    char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
    if (!c1 || !c2)
        return err_set(err, -EINVAL,
                       "--resolve %s: want HOST:PORT:ADDR, e.g. "
                       "api.github.com:443:198.51.100.7",
                       text);
    *c1 = *c2 = '\0';
    char *end;
    long port = strtol(c1 + 1, &end, 10);
    memset(out, 0, sizeof *out);
    if (*end || port < 0 || port > 65535)
        return err_set(err, -EINVAL, "--resolve %s: bad port", text);
    out->port = (uint16_t)port;
    int r = policy_canon_name(buf, out->host, err);
    if (r < 0) return err_wrap(err, "--resolve %s", text);
    if (policy_parse_ip(c2 + 1, &out->addr) < 0)
        return err_set(err, -EINVAL, "--resolve %s: %s is not an IP address", text, c2 + 1);
    return 0;
}
