/* SPDX-License-Identifier: MIT */
/* Files, directories and temporary directories on POSIX, where a path in UTF-8 is passed as it
 * is. */
#define _XOPEN_SOURCE 700 /* mkdtemp, nftw, O_CLOEXEC */
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

#include <dirent.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

FILE *posenc__file_open(const char *path, const char *mode) { return fopen(path, mode); }

bool posenc__file_remove(const char *path) { return remove(path) == 0; }

bool posenc__make_directory(const char *path) { return mkdir(path, 0700) == 0; }

bool posenc__is_directory(const char *path)
{
    struct stat status;
    return stat(path, &status) == 0 && S_ISDIR(status.st_mode);
}

bool posenc__file_modified(const char *path, int64_t *seconds)
{
    struct stat status;
    bool ok = stat(path, &status) == 0;
    *seconds = ok ? (int64_t)status.st_mtime : 0;
    return ok;
}

bool posenc__directory_list(const char *path, void (*visit)(const char *name, void *user),
                            void *user)
{
    DIR *directory = opendir(path);
    if (!directory)
        return false;
    struct dirent *entry;
    while ((entry = readdir(directory)) != NULL)
        if (strcmp(entry->d_name, ".") != 0 && strcmp(entry->d_name, "..") != 0)
            visit(entry->d_name, user);
    closedir(directory);
    return true;
}

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

/* ---- temporary directories ---- */

bool posenc__temp_directory_create(const char *prefix, char *path, size_t size)
{
    const char *tmp = getenv("TMPDIR");
    int written = snprintf(path, size, "%s/%s-XXXXXX", tmp && *tmp ? tmp : "/tmp", prefix);
    if (written <= 0 || (size_t)written >= size) {
        errno = ENAMETOOLONG;
        return false;
    }
    return mkdtemp(path) != NULL;
}

static int remove_entry(const char *path, const struct stat *status, int flag, struct FTW *ftw)
{
    (void)status;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

void posenc__remove_tree(const char *path) { nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS); }

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
