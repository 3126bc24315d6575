/* SPDX-License-Identifier: MIT */
/* Files and directories on POSIX, where a path in UTF-8 is passed as it is. */
#define _XOPEN_SOURCE 700 /* O_CLOEXEC */
#if defined(__APPLE__)
/* and macOS's own extensions, which _XOPEN_SOURCE alone would hide */
#  define _DARWIN_C_SOURCE
#endif

#include "core/platform.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/stat.h>
#include <unistd.h>

FILE *posenc__file_open(const char *path, const char *mode) { return fopen(path, mode); }

bool posenc__file_remove(const char *path) { return remove(path) == 0; }

bool posenc__make_directory(const char *path) { return mkdir(path, 0700) == 0; }

bool posenc__user_cache_directory(char *out, size_t size)
{
    if (posenc__env_get_path("XDG_CACHE_HOME", out, size) && out[0] == '/')
        return true;
    char home[4096];
    if (!posenc__env_get_path("HOME", home, sizeof home))
        return false;
#if defined(__APPLE__)
    int n = snprintf(out, size, "%s/Library/Caches", home);
#else
    int n = snprintf(out, size, "%s/.cache", home);
#endif
    return n > 0 && (size_t)n < size;
}

/* ---- the per-system steps of files replaced in one step (platform_files.c) ---- */

FILE *posenc__file_create_new(const char *path)
{
    int flags = O_WRONLY | O_CREAT | O_EXCL;
#if defined(O_CLOEXEC)
    flags |= O_CLOEXEC;
#endif
    /* 0666 less the umask, as fopen would create it. */
    int fd = open(path, flags, 0666);
    if (fd < 0)
        return NULL;
    FILE *file = fdopen(fd, "wb");
    if (!file) {
        int saved = errno;
        close(fd);
        posenc__file_remove(path);
        errno = saved;
    }
    return file;
}

bool posenc__file_sync(FILE *file) { return fflush(file) == 0 && fsync(fileno(file)) == 0; }

bool posenc__file_replace(const char *from, const char *to) { return rename(from, to) == 0; }
