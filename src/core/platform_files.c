/* SPDX-License-Identifier: MIT */
/* Files replaced in one step, the same on every system over the per-system calls of
 * platform_files_posix.c and platform_files_win32.c. */
#include "core/platform.h"

#include <errno.h>
#include <stdio.h>

FILE *posenc__temp_file_create(const char *destination, char *temp_path, size_t temp_path_size)
{
    /* A name no other writer uses: the process id and a per-thread address and counter. The
     * exclusive creation refuses an existing file, so a clash is retried, never shared. */
    static POSENC__THREAD_LOCAL unsigned counter;
    unsigned long process = (unsigned long)posenc__process_id();
    for (int attempt = 0; attempt < 64; attempt++) {
        int n = snprintf(temp_path, temp_path_size, "%s.%lu-%llx-%u.tmp", destination, process,
                         (unsigned long long)(uintptr_t)&counter, counter++);
        if (n <= 0 || (size_t)n >= temp_path_size) {
            errno = ENAMETOOLONG;
            return NULL;
        }
        FILE *file = posenc__file_create_new(temp_path);
        if (!file && errno == EEXIST)
            continue;
        return file;
    }
    errno = EEXIST;
    return NULL;
}

bool posenc__file_commit(FILE *file)
{
    bool ok = posenc__file_sync(file);
    int saved = errno;
    if (fclose(file) != 0 && ok) {
        ok = false;
        saved = errno;
    }
    errno = saved;
    return ok;
}
