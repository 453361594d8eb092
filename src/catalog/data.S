/* The catalog's JSON text, built into the daemon so that a binary always serves the
 * versions and fingerprints it was reviewed with. NUL-terminated. */
    .section .rodata
    .global catalog_json_text
    .type catalog_json_text, @object
catalog_json_text:
    .incbin "catalog/servers.json"
    .byte 0
    .size catalog_json_text, . - catalog_json_text

/* The tool list each entry's fingerprint was made from (catalog/tools.json, written by
 * catalog/review-catalog.mjs --tools): what a person reads before a first start. */
    .global catalog_tools_text
    .type catalog_tools_text, @object
catalog_tools_text:
    .incbin "catalog/tools.json"
    .byte 0
    .size catalog_tools_text, . - catalog_tools_text
    .section .note.GNU-stack,"",@progbits
