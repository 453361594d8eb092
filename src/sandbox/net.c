/* The sandbox's network namespace: loopback, a source address and a default
 * route that lead nowhere but into nft rules redirecting every TCP connection
 * to the daemon's proxy socket and every DNS query to its stub, both listening
 * on 127.0.0.1 inside the namespace. Everything else, IPv6 included, is
 * dropped. The namespace is owned by the host's user namespace, so nothing in
 * the sandbox can change any of this; if the daemon is down, the redirected
 * connections find no listener and nothing leaves.
 *
 * A gvisor sandbox has two: gVisor's own network stack (runsc --network=sandbox)
 * sends frames down a veth from an inner namespace, whose other end is in the
 * holder's namespace; there the same redirect sits in prerouting, on that veth, and
 * everything not redirected is dropped. The host kernel's TCP/IP code never holds
 * the sandbox's sockets, and nothing leaves without the proxy's verdict. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <libmnl/libmnl.h>
#include <linux/if_addr.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
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

/* addr/prefix on interface index, of that scope (host for the ns driver's loopback source). */
static int add_address(struct mnl_socket *nl, unsigned index, const char *addr, unsigned prefix,
                       unsigned char scope)
{
    char buf[8192];
    struct in_addr a;
    inet_pton(AF_INET, addr, &a);
    struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
    nlh->nlmsg_type = RTM_NEWADDR;
    nlh->nlmsg_flags = NLM_F_CREATE | NLM_F_EXCL;
    struct ifaddrmsg *ifa = mnl_nlmsg_put_extra_header(nlh, sizeof *ifa);
    *ifa = (struct ifaddrmsg){.ifa_family = AF_INET,
                              .ifa_prefixlen = (unsigned char)prefix,
                              .ifa_scope = scope,
                              .ifa_index = index};
    mnl_attr_put_u32(nlh, IFA_LOCAL, a.s_addr);
    mnl_attr_put_u32(nlh, IFA_ADDRESS, a.s_addr);
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
    int r = add_address(nl, lo, SANDBOX_SRC_ADDR, 32, RT_SCOPE_HOST);
    if (r == 0) r = add_default_route(nl, lo, src);
    mnl_socket_close(nl);
    return r < 0 ? err_set(err, r, "cannot set up the sandbox's route: %s", strerror(-r)) : 0;
}

static int nft_run(const char *rules, err_t *err)
{
    struct nft_ctx *nft = nft_ctx_new(NFT_CTX_DEFAULT);
    if (!nft) return err_set(err, -ENOMEM, "cannot start libnftables");
    nft_ctx_buffer_error(nft);
    int r = nft_run_cmd_from_buffer(nft, rules);
    if (r != 0)
        err_set(
            err, -EIO,
            "cannot install the sandbox's nft rules: %s (is nf_tables available in the kernel?)",
            nft_ctx_get_error_buffer(nft));
    nft_ctx_free(nft);
    return r != 0 ? -EIO : 0;
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
    return nft_run(rules, err);
}

/* A function run inside a sandbox's network namespace (run_in_netns). */
typedef int (*netns_fn)(void *arg, err_t *err);

struct in_netns {
    int pidfd; /* a process of the sandbox, or a network namespace's own fd */
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
    return sb->gvisor ? gvisor_net_setup(sb, err)
                      : run_in_netns(sb->init_pidfd, setup_namespace, NULL, err);
}

/* ---- the gvisor driver's two namespaces ---- */

static int link_up(struct mnl_socket *nl, unsigned index)
{
    char buf[8192];
    struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
    nlh->nlmsg_type = RTM_NEWLINK;
    struct ifinfomsg *ifi = mnl_nlmsg_put_extra_header(nlh, sizeof *ifi);
    *ifi = (struct ifinfomsg){.ifi_family = AF_UNSPEC,
                              .ifi_index = (int)index,
                              .ifi_flags = IFF_UP,
                              .ifi_change = IFF_UP};
    return nl_request(nl, nlh);
}

static int add_route_via(struct mnl_socket *nl, const char *gateway)
{
    char buf[8192];
    struct in_addr gw;
    inet_pton(AF_INET, gateway, &gw);
    struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
    nlh->nlmsg_type = RTM_NEWROUTE;
    nlh->nlmsg_flags = NLM_F_CREATE | NLM_F_EXCL;
    struct rtmsg *rtm = mnl_nlmsg_put_extra_header(nlh, sizeof *rtm);
    *rtm = (struct rtmsg){.rtm_family = AF_INET,
                          .rtm_table = RT_TABLE_MAIN,
                          .rtm_protocol = RTPROT_STATIC,
                          .rtm_scope = RT_SCOPE_UNIVERSE,
                          .rtm_type = RTN_UNICAST};
    mnl_attr_put_u32(nlh, RTA_GATEWAY, gw.s_addr);
    return nl_request(nl, nlh);
}

/* A veth pair: GVISOR_VETH_OUTER here, its peer GVISOR_VETH_INNER in netns_fd. */
static int add_veth(struct mnl_socket *nl, int netns_fd)
{
    char buf[8192];
    struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
    nlh->nlmsg_type = RTM_NEWLINK;
    nlh->nlmsg_flags = NLM_F_CREATE | NLM_F_EXCL;
    struct ifinfomsg *ifi = mnl_nlmsg_put_extra_header(nlh, sizeof *ifi);
    ifi->ifi_family = AF_UNSPEC;
    mnl_attr_put_strz(nlh, IFLA_IFNAME, GVISOR_VETH_OUTER);
    struct nlattr *info = mnl_attr_nest_start(nlh, IFLA_LINKINFO);
    mnl_attr_put_strz(nlh, IFLA_INFO_KIND, "veth");
    struct nlattr *data = mnl_attr_nest_start(nlh, IFLA_INFO_DATA);
    struct nlattr *peer = mnl_attr_nest_start(nlh, VETH_INFO_PEER);
    struct ifinfomsg *pifi = mnl_nlmsg_put_extra_header(nlh, sizeof *pifi);
    pifi->ifi_family = AF_UNSPEC;
    mnl_attr_put_strz(nlh, IFLA_IFNAME, GVISOR_VETH_INNER);
    mnl_attr_put_u32(nlh, IFLA_NET_NS_FD, (uint32_t)netns_fd);
    mnl_attr_nest_end(nlh, peer);
    mnl_attr_nest_end(nlh, data);
    mnl_attr_nest_end(nlh, info);
    return nl_request(nl, nlh);
}

static int with_netlink(int (*fn)(struct mnl_socket *nl, void *arg), void *arg, const char *what,
                        err_t *err)
{
    struct mnl_socket *nl = mnl_socket_open(NETLINK_ROUTE);
    if (!nl || mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0) {
        if (nl) mnl_socket_close(nl);
        return err_set(err, errno, "cannot open netlink: %s", strerror(errno));
    }
    int r = fn(nl, arg);
    mnl_socket_close(nl);
    return r < 0 ? err_set(err, r, "cannot set up %s: %s", what, strerror(-r)) : 0;
}

static int outer_links(struct mnl_socket *nl, void *arg)
{
    int r = add_veth(nl, *(int *)arg);
    unsigned outer = if_nametoindex(GVISOR_VETH_OUTER);
    if (r == 0) r = add_address(nl, outer, GVISOR_OUTER_ADDR, 30, RT_SCOPE_UNIVERSE);
    if (r == 0) r = link_up(nl, outer);
    return r;
}

/* The holder's namespace: what arrives on the veth goes to the proxy or the DNS stub,
 * or nowhere (nothing is forwarded; nothing else is delivered). A query sent to the
 * nameserver itself is redirected onto the same address and port, which conntrack
 * does not count as a NAT: port 53 is let in by name. */
static int setup_outer(void *arg, err_t *err)
{
    char rules[1024];
    snprintf(rules, sizeof rules,
             "table inet runtime {\n"
             " chain nat_pre { type nat hook prerouting priority -100; policy accept;\n"
             "  iifname \"%s\" meta l4proto { tcp, udp } th dport 53 redirect to :%d\n"
             "  iifname \"%s\" meta l4proto tcp redirect to :%d\n"
             " }\n"
             " chain filter_in { type filter hook input priority 0; policy drop;\n"
             "  iif \"lo\" accept\n"
             "  iifname \"%s\" ct status dnat accept\n"
             "  iifname \"%s\" meta l4proto { tcp, udp } th dport 53 accept\n"
             " }\n"
             " chain filter_fwd { type filter hook forward priority 0; policy drop; }\n"
             "}\n",
             GVISOR_VETH_OUTER, SANDBOX_DNS_PORT, GVISOR_VETH_OUTER, SANDBOX_PROXY_PORT,
             GVISOR_VETH_OUTER, GVISOR_VETH_OUTER);
    int r = loopback_up(err);
    if (r == 0) r = with_netlink(outer_links, arg, "the sandbox's veth", err);
    return r < 0 ? r : nft_run(rules, err);
}

static int inner_links(struct mnl_socket *nl, void *arg)
{
    unsigned inner = if_nametoindex(GVISOR_VETH_INNER);
    int r = add_address(nl, inner, GVISOR_INNER_ADDR, 30, RT_SCOPE_UNIVERSE);
    if (r == 0) r = link_up(nl, inner);
    if (r == 0) r = add_route_via(nl, GVISOR_OUTER_ADDR);
    return r;
}

/* The namespace runsc runs gVisor's stack in: the veth's address and a default route
 * through the holder's end, which runsc hands to gVisor (and takes from the host's). */
static int setup_inner(void *arg, err_t *err)
{
    int r = loopback_up(err);
    return r < 0 ? r : with_netlink(inner_links, arg, "the sandbox's route", err);
}

/* Again before a restore: runsc took the address off the inner veth when it handed it to
 * gVisor's stack, and the restored stack takes it from there again. What is still there
 * stays. */
static int inner_links_again(struct mnl_socket *nl, void *arg)
{
    unsigned inner = if_nametoindex(GVISOR_VETH_INNER);
    int r = add_address(nl, inner, GVISOR_INNER_ADDR, 30, RT_SCOPE_UNIVERSE);
    if (r == 0 || r == -EEXIST) r = link_up(nl, inner);
    if (r == 0) r = add_route_via(nl, GVISOR_OUTER_ADDR);
    return r == -EEXIST ? 0 : r;
}

static int readdress_inner(void *arg, err_t *err)
{
    return with_netlink(inner_links_again, arg, "the sandbox's route again", err);
}

static int open_inner(const struct sandbox *sb, err_t *err)
{
    /* The holder pinned the inner namespace on dir/netns in its own mount namespace. */
    char path[800];
    snprintf(path, sizeof path, "/proc/%d/root%s/netns", (int)sb->init_pid, sb->dir);
    int inner = open(path, O_RDONLY | O_CLOEXEC);
    if (inner < 0)
        return err_set(err, errno, "cannot open the sandbox's inner network namespace: %s",
                       strerror(errno));
    return inner;
}

int gvisor_net_readdress(struct sandbox *sb, err_t *err)
{
    int inner = open_inner(sb, err);
    if (inner < 0) return inner;
    int r = run_in_netns(inner, readdress_inner, NULL, err);
    close(inner);
    return r;
}

int gvisor_net_setup(struct sandbox *sb, err_t *err)
{
    int inner = open_inner(sb, err);
    if (inner < 0) return inner;
    int r = run_in_netns(sb->init_pidfd, setup_outer, &inner, err);
    if (r == 0) r = run_in_netns(inner, setup_inner, NULL, err);
    close(inner);
    return r;
}

static int listen_on(int type, uint32_t addr, uint16_t port)
{
    int fd = socket(AF_INET, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return -errno;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in sa = {
        .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(addr)};
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 ||
        (type == SOCK_STREAM && listen(fd, 4096) < 0)) {
        int e = -errno;
        close(fd);
        return e;
    }
    return fd;
}

struct sockets {
    int *fds;
    uint32_t addr; /* host order: loopback, or any for a gvisor sandbox's redirect */
};

/* Sockets belong to the namespace they are made in, whichever thread holds them. */
static int make_sockets(void *arg, err_t *err)
{
    struct sockets *s = arg;
    int *fds = s->fds;
    fds[0] = listen_on(SOCK_STREAM, s->addr, SANDBOX_PROXY_PORT);
    fds[1] = listen_on(SOCK_DGRAM, s->addr, SANDBOX_DNS_PORT);
    fds[2] = listen_on(SOCK_STREAM, s->addr, SANDBOX_DNS_PORT);
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
    /* A redirect in prerouting sends to the veth's address, not to 127.0.0.1; the
     * holder's namespace has no other address a sandbox could reach. */
    struct sockets s = {fds, sb->gvisor ? INADDR_ANY : INADDR_LOOPBACK};
    return run_in_netns(sb->init_pidfd, make_sockets, &s, err);
}
