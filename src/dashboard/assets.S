/* The dashboard's files, built from ui/ (ui/dist is committed: the daemon's build needs
 * no npm), carried in the daemon so that a binary serves the page it was built with. */
#define ASSET(sym, file)                  \
    .global sym, sym##_end;               \
    .type sym, @object;                   \
sym:                                      \
    .incbin file;                         \
sym##_end:                                \
    .byte 0;                              \
    .size sym, . - sym

    .section .rodata
    .balign 16
ASSET(dashboard_index_html, "ui/dist/index.html")
ASSET(dashboard_app_js, "ui/dist/app.js")
ASSET(dashboard_app_css, "ui/dist/app.css")
    .section .note.GNU-stack,"",@progbits
