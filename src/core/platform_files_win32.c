/* SPDX-License-Identifier: MIT */
/* Files and directories on Windows, every path in UTF-8 converted for the wide-character calls
 * (the narrow ones would read it in the ANSI code page). */
#include "core/platform.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/stat.h>

#include <windows.h>
#include <io.h>
#include <direct.h>

int posenc__errno_from_win32(unsigned long error)
{
    switch (error) {
    case ERROR_FILE_NOT_FOUND:
    case ERROR_PATH_NOT_FOUND: return ENOENT;
    case ERROR_ACCESS_DENIED:
    case ERROR_SHARING_VIOLATION: return EACCES;
    case ERROR_ALREADY_EXISTS:
    case ERROR_FILE_EXISTS: return EEXIST;
    case ERROR_NOT_SAME_DEVICE: return EXDEV;
    case ERROR_DISK_FULL: return ENOSPC;
    case ERROR_FILENAME_EXCED_RANGE: return ENAMETOOLONG;
    default: return EIO;
    }
}

FILE *posenc__file_open(const char *path, const char *mode)
{
    wchar_t *wide_path = posenc__utf8_to_wide(path);
    wchar_t *wide_mode = posenc__utf8_to_wide(mode);
    FILE *file = wide_path && wide_mode ? _wfopen(wide_path, wide_mode) : NULL;
    int saved = errno;
    free(wide_path);
    free(wide_mode);
    errno = saved;
    return file;
}

bool posenc__file_remove(const char *path)
{
    wchar_t *wide = posenc__utf8_to_wide(path);
    bool ok = wide && _wremove(wide) == 0;
    int saved = errno;
    free(wide);
    errno = saved;
    return ok;
}

bool posenc__make_directory(const char *path)
{
    wchar_t *wide = posenc__utf8_to_wide(path);
    bool ok = wide && _wmkdir(wide) == 0;
    int saved = errno;
    free(wide);
    errno = saved;
    return ok;
}

bool posenc__user_cache_directory(char *out, size_t size)
{
    return posenc__env_get_path("LOCALAPPDATA", out, size);
}

/* ---- the per-system steps of files replaced in one step (platform_files.c) ---- */

FILE *posenc__file_create_new(const char *path)
{
    wchar_t *wide = posenc__utf8_to_wide(path);
    if (!wide)
        return NULL;
    int fd = _wopen(wide, _O_WRONLY | _O_CREAT | _O_EXCL | _O_BINARY | _O_NOINHERIT,
                    _S_IREAD | _S_IWRITE);
    int saved_open = errno;
    free(wide);
    errno = saved_open;
    if (fd < 0)
        return NULL;
    FILE *file = _fdopen(fd, "wb");
    if (!file) {
        int saved = errno;
        _close(fd);
        posenc__file_remove(path);
        errno = saved;
    }
    return file;
}

bool posenc__file_sync(FILE *file) { return fflush(file) == 0 && _commit(_fileno(file)) == 0; }

bool posenc__file_replace(const char *from, const char *to)
{
    wchar_t *wide_from = posenc__utf8_to_wide(from);
    wchar_t *wide_to = wide_from ? posenc__utf8_to_wide(to) : NULL;
    bool ok = wide_to && MoveFileExW(wide_from, wide_to,
                                     MOVEFILE_REPLACE_EXISTING | MOVEFILE_WRITE_THROUGH);
    if (wide_to && !ok)
        errno = posenc__errno_from_win32(GetLastError());
    int saved = errno;
    free(wide_from);
    free(wide_to);
    errno = saved;
    return ok;
}
