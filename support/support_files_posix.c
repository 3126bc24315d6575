/* SPDX-License-Identifier: MIT */
/* Directories and temporary directories on POSIX, where a path in UTF-8 is passed as it is. */
#define _XOPEN_SOURCE 700 /* mkdtemp, nftw */
#if defined(__APPLE__)
/* and macOS's own extensions, which _XOPEN_SOURCE alone would hide */
#  define _DARWIN_C_SOURCE
#endif

#include "support.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dirent.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

bool support_is_directory(const char *path)
{
    struct stat status;
    return stat(path, &status) == 0 && S_ISDIR(status.st_mode);
}

bool support_file_modified(const char *path, int64_t *seconds)
{
    struct stat status;
    bool ok = stat(path, &status) == 0;
    *seconds = ok ? (int64_t)status.st_mtime : 0;
    return ok;
}

bool support_directory_list(const char *path, void (*visit)(const char *name, void *user),
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

/* ---- temporary directories ---- */

bool support_temp_directory_create(const char *prefix, char *path, size_t size)
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

void support_remove_tree(const char *path) { nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS); }
