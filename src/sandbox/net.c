/* The sandbox's network namespace: loopback, a source address and a default
 * route that lead nowhere but into nft rules redirecting every TCP connection
 * to the daemon's proxy socket and every DNS query to its stub, both listening
 * on 127.0.0.1 inside the namespace. Everything else, IPv6 included, is
 * dropped. The namespace is owned by the host's user namespace, so nothing in
 * the sandbox can change any of this; if the daemon is down, the redirected
 * connections find no listener and nothing leaves. */
#include <arpa/inet.h>
#include <errno.h>
#include <libmnl/libmnl.h>
#include <linux/if_addr.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <nftables/libnftables.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../proto/proto.h"
#include "ns_impl.h"

#define SANDBOX_SRC_ADDR "10.200.0.2"

/* Sends one netlink request and waits for its acknowledgement. */
static int nl_request(struct mnl_socket *nl, struct nlmsghdr *nlh)
{
    char buf[8192];
    nlh->nlmsg_flags |= NLM_F_REQUEST | NLM_F_ACK;
    nlh->nlmsg_seq = 1;
    if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0) return -errno;
    ssize_t n = mnl_socket_recvfrom(nl, buf, sizeof buf);
    if (n < 0) return -errno;
    int r = mnl_cb_run(buf, (size_t)n, 1, mnl_socket_get_portid(nl), NULL, NULL);
    return r < 0 ? -errno : 0;
}

static int add_source_address(struct mnl_socket *nl, unsigned lo, struct in_addr src)
{
    char buf[8192];
    struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
    nlh->nlmsg_type = RTM_NEWADDR;
    nlh->nlmsg_flags = NLM_F_CREATE | NLM_F_EXCL;
    struct ifaddrmsg *ifa = mnl_nlmsg_put_extra_header(nlh, sizeof *ifa);
    *ifa = (struct ifaddrmsg){
        .ifa_family = AF_INET, .ifa_prefixlen = 32, .ifa_scope = RT_SCOPE_HOST, .ifa_index = lo};
    mnl_attr_put_u32(nlh, IFA_LOCAL, src.s_addr);
    mnl_attr_put_u32(nlh, IFA_ADDRESS, src.s_addr);
    return nl_request(nl, nlh);
}

/* default dev lo src 10.200.0.2: without the source, connections leave from
 * 0.0.0.0 and hang. */
static int add_default_route(struct mnl_socket *nl, unsigned lo, struct in_addr src)
{
    char buf[8192];
    struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
    nlh->nlmsg_type = RTM_NEWROUTE;
    nlh->nlmsg_flags = NLM_F_CREATE | NLM_F_EXCL;
    struct rtmsg *rtm = mnl_nlmsg_put_extra_header(nlh, sizeof *rtm);
    *rtm = (struct rtmsg){.rtm_family = AF_INET,
                          .rtm_table = RT_TABLE_MAIN,
                          .rtm_protocol = RTPROT_STATIC,
                          .rtm_scope = RT_SCOPE_LINK,
                          .rtm_type = RTN_UNICAST};
    mnl_attr_put_u32(nlh, RTA_OIF, lo);
    mnl_attr_put_u32(nlh, RTA_PREFSRC, src.s_addr);
    return nl_request(nl, nlh);
}

static int routes(err_t *err)
{
    struct in_addr src;
    inet_pton(AF_INET, SANDBOX_SRC_ADDR, &src);
    unsigned lo = if_nametoindex("lo");
    struct mnl_socket *nl = mnl_socket_open(NETLINK_ROUTE);
    if (!nl || mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0) {
        if (nl) mnl_socket_close(nl);
        return err_set(err, errno, "cannot open netlink: %s", strerror(errno));
    }
    int r = add_source_address(nl, lo, src);
    if (r == 0) r = add_default_route(nl, lo, src);
    mnl_socket_close(nl);
    return r < 0 ? err_set(err, r, "cannot set up the sandbox's route: %s", strerror(-r)) : 0;
}

static int nft_rules(err_t *err)
{
    char rules[1024];
    snprintf(rules, sizeof rules,
             "table inet runtime {\n"
             " chain nat_out { type nat hook output priority -100; policy accept;\n"
             "  meta l4proto { tcp, udp } th dport 53 redirect to :%d\n"
             "  ip daddr 127.0.0.0/8 return\n"
             "  meta l4proto tcp redirect to :%d\n"
             " }\n"
             " chain filter_out { type filter hook output priority 0; policy drop;\n"
             "  ct status dnat accept\n"
             "  ip daddr 127.0.0.0/8 accept\n"
             "  ip6 daddr ::1 accept\n"
             " }\n"
             "}\n",
             SANDBOX_DNS_PORT, SANDBOX_PROXY_PORT);
    struct nft_ctx *nft = nft_ctx_new(NFT_CTX_DEFAULT);
    if (!nft) return err_set(err, -ENOMEM, "cannot start libnftables");
    nft_ctx_buffer_error(nft);
    int r = nft_run_cmd_from_buffer(nft, rules);
    if (r != 0)
        err_set(err, -EIO,
                "cannot install the sandbox's nft rules: %s (is nf_tables "
                "available in the kernel?)",
                nft_ctx_get_error_buffer(nft));
    nft_ctx_free(nft);
    return r != 0 ? -EIO : 0;
}

/* A function run inside a sandbox's network namespace (run_in_netns). */
typedef int (*netns_fn)(void *arg, err_t *err);

struct in_netns {
    int pidfd; /* a process of the sandbox */
    netns_fn fn;
    void *arg;
    err_t err;
    int result;
};

static void *in_netns_thread(void *p)
{
    struct in_netns *t = p;
    if (setns(t->pidfd, CLONE_NEWNET) < 0)
        t->result = err_set(&t->err, errno, "cannot enter the sandbox's network namespace: %s",
                            strerror(errno));
    else
        t->result = t->fn(t->arg, &t->err);
    return NULL;
}

/* Runs fn(arg) on a thread of the keeper that has entered the network namespace of
 * pidfd's process. setns moves that thread only, so the keeper's own namespace never
 * changes, and what fn uses stays loaded and warm in the keeper: done in a fresh
 * fork at each create, libnftables alone cost 1.9 ms of CPU. */
static int run_in_netns(int pidfd, netns_fn fn, void *arg, err_t *err)
{
    struct in_netns t = {.pidfd = pidfd, .fn = fn, .arg = arg};
    pthread_t thread;
    int e = pthread_create(&thread, NULL, in_netns_thread, &t);
    if (e != 0) return err_set(err, -e, "cannot start a thread: %s", strerror(e));
    pthread_join(thread, NULL);
    if (t.result < 0) *err = t.err;
    return t.result;
}

static int loopback_up(err_t *err)
{
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0) return err_set(err, errno, "cannot open a socket: %s", strerror(errno));
    struct ifreq ifr = {0};
    str_copy(ifr.ifr_name, sizeof ifr.ifr_name, "lo");
    int r = 0;
    if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0) r = -errno;
    ifr.ifr_flags |= IFF_UP;
    if (r == 0 && ioctl(s, SIOCSIFFLAGS, &ifr) < 0) r = -errno;
    close(s);
    return r < 0 ? err_set(err, r, "cannot bring up loopback: %s", strerror(-r)) : 0;
}

static int setup_namespace(void *arg, err_t *err)
{
    int r = loopback_up(err);
    if (r == 0) r = routes(err);
    return r < 0 ? r : nft_rules(err);
}

int ns_net_setup(struct sandbox *sb, err_t *err)
{
    return run_in_netns(sb->init_pidfd, setup_namespace, NULL, err);
}

static int listen_on(int type, uint16_t port)
{
    int fd = socket(AF_INET, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return -errno;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in sa = {
        .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 ||
        (type == SOCK_STREAM && listen(fd, 4096) < 0)) {
        int e = -errno;
        close(fd);
        return e;
    }
    return fd;
}

/* Sockets belong to the namespace they are made in, whichever thread holds them. */
static int make_sockets(void *arg, err_t *err)
{
    int *fds = arg;
    fds[0] = listen_on(SOCK_STREAM, SANDBOX_PROXY_PORT);
    fds[1] = listen_on(SOCK_DGRAM, SANDBOX_DNS_PORT);
    fds[2] = listen_on(SOCK_STREAM, SANDBOX_DNS_PORT);
    for (int i = 0; i < 3; i++) {
        if (fds[i] >= 0) continue;
        int r = fds[i];
        for (int j = 0; j < 3; j++)
            if (fds[j] >= 0) close(fds[j]);
        return err_set(err, r, "cannot open the egress sockets in the sandbox: %s", strerror(-r));
    }
    return 0;
}

int ns_net_sockets(struct sandbox *sb, int fds[3], err_t *err)
{
    return run_in_netns(sb->init_pidfd, make_sockets, fds, err);
}
