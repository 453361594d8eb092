/* The programs the drivers start in and beside sandboxes, carried in the daemon so that
 * they are always the ones built with it (the Makefile builds each and passes its path):
 * every sandbox's pid 1 (src/sandbox/init/runtime-init.c, INIT_IMAGE), and the gvisor
 * driver's agent and shim (src/sandbox/agent/, AGENT_IMAGE and SHIM_IMAGE). */
#define IMAGE(name, file)                                                                          \
    .section .rodata;                                                                              \
    .global name;                                                                                  \
    .type name, @object;                                                                           \
    .balign 16;                                                                                    \
    name:                                                                                          \
    .incbin file;                                                                                  \
    .size name, . - name;                                                                          \
    .global name##_end;                                                                            \
    name##_end:

IMAGE(sandbox_init_image, INIT_IMAGE)
IMAGE(sandbox_agent_image, AGENT_IMAGE)
IMAGE(sandbox_shim_image, SHIM_IMAGE)
    .section .note.GNU-stack,"",@progbits
