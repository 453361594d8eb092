/* PLACEHOLDER: replaced by the chunked uploads in this same change. */
#include "api_impl.h"

void api_uploads(struct httpd_req *req, struct server *srv, struct sbx *sb, const char *sub)
{
    api_error(req, 501, "unavailable", "uploads are not served yet");
}
