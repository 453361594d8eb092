/* common: the helpers that turn what a program printed into a message. */
#include <string.h>

#include "common/common.h"
#include "unit.h"

TEST(text_escape_shows_control_bytes_and_cuts)
{
    char out[300];
    const char in[] = "Starting \"server\"\tv1\r\n\x01\xc3\xa9\\";
    text_escape(in, sizeof in - 1, 200, out, sizeof out);
    CHECK_STR(out, "Starting \\\"server\\\"\\tv1\\r\\n\\x01\\xc3\\xa9\\\\");
    /* Cut at max bytes of the input: "..." says there was more. */
    text_escape("abcdefgh", 8, 3, out, sizeof out);
    CHECK_STR(out, "abc...");
    /* Cut by the room in out: never a half escape, always terminated. */
    char small[8];
    text_escape("\x01\x02\x03", 3, 200, small, sizeof small);
    CHECK_STR(small, "\\x01...");
    text_escape("ab", 2, 200, small, sizeof small);
    CHECK_STR(small, "ab");
}
