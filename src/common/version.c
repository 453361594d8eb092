/* The version runtimed and runtime report: the Makefile's, from the VERSION file and the
 * commit it was built from (git describe), e.g. 0.1.0+eff1617-dirty. */
#include "common.h"

#ifndef RUNTIME_VERSION
#define RUNTIME_VERSION "unknown" /* built without the Makefile (the fuzz targets) */
#endif

const char *runtime_version(void)
{
    return RUNTIME_VERSION;
}
