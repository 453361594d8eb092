/* The catalog's JSON text, built into the daemon so that a binary always serves the
 * versions and fingerprints it was reviewed with. NUL-terminated. */
    .section .rodata
    .global catalog_json_text
    .type catalog_json_text, @object
catalog_json_text:
    .incbin "catalog/servers.json"
    .byte 0
    .size catalog_json_text, . - catalog_json_text
    .section .note.GNU-stack,"",@progbits
