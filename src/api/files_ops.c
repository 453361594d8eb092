/* PLACEHOLDER while the keeper's file operations are written (issue 25): answers
 * 501 so that the routes link. Replaced by the real list/stat/mkdir/remove/rename/chmod. */
#include "api_impl.h"

void api_files_op(struct httpd_req *req, struct server *srv, struct sbx *sb, const char *op)
{
    api_error(req, 501, "unavailable", "files %s is not served yet", op);
}
