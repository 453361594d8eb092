/* The program every sandbox's pid 1 becomes (src/sandbox/init/runtime-init.c,
 * built by the Makefile as INIT_IMAGE), carried in the daemon so that it is
 * always the one built with it. */
    .section .rodata
    .global sandbox_init_image
    .type sandbox_init_image, @object
    .balign 16
sandbox_init_image:
    .incbin INIT_IMAGE
    .size sandbox_init_image, . - sandbox_init_image
    .global sandbox_init_image_end
sandbox_init_image_end:
    .section .note.GNU-stack,"",@progbits
