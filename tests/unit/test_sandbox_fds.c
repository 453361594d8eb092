/* The keeper's long-lived descriptors go above SANDBOX_FD_FLOOR (ns_impl.h): with a
 * thousand sandboxes below it, libnftables' select() on its netlink socket aborted the
 * keeper (bench/density.sh found it at about 990 gvisor sandboxes). */
#include <fcntl.h>
#include <unistd.h>

#include "sandbox/ns_impl.h"
#include "unit.h"

TEST(sandbox_fd_high_moves_a_low_descriptor_above_the_floor)
{
    int p[2];
    CHECK(pipe(p) == 0);
    int low = p[0];
    int high = sandbox_fd_high(low);
    CHECK(high >= SANDBOX_FD_FLOOR);
    CHECK(fcntl(low, F_GETFD) < 0);                  /* the low one is closed */
    CHECK((fcntl(high, F_GETFD) & FD_CLOEXEC) != 0); /* and the high one is close-on-exec */
    CHECK(write(p[1], "x", 1) == 1);
    char c = 0;
    CHECK(read(high, &c, 1) == 1 && c == 'x'); /* the same pipe */
    CHECK(sandbox_fd_high(high) == high);      /* one above the floor stays */
    CHECK(sandbox_fd_high(-1) == -1);
    close(high);
    close(p[1]);
}
