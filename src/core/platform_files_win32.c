/* SPDX-License-Identifier: MIT */
/* Files, directories and temporary directories on Windows, every path in UTF-8 converted for
 * the wide-character calls (the narrow ones would read it in the ANSI code page). */
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

/* errno for the Win32 errors the calls here meet. */
static int errno_from_win32(DWORD error)
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

bool posenc__is_directory(const char *path)
{
    wchar_t *wide = posenc__utf8_to_wide(path);
    DWORD attributes = wide ? GetFileAttributesW(wide) : INVALID_FILE_ATTRIBUTES;
    free(wide);
    return attributes != INVALID_FILE_ATTRIBUTES && (attributes & FILE_ATTRIBUTE_DIRECTORY);
}

bool posenc__file_modified(const char *path, int64_t *seconds)
{
    wchar_t *wide = posenc__utf8_to_wide(path);
    struct _stat64 status;
    bool ok = wide && _wstat64(wide, &status) == 0;
    free(wide);
    *seconds = ok ? (int64_t)status.st_mtime : 0;
    return ok;
}

bool posenc__directory_list(const char *path, void (*visit)(const char *name, void *user),
                            void *user)
{
    size_t length = strlen(path);
    char *pattern = malloc(length + 3);
    if (!pattern)
        return false;
    memcpy(pattern, path, length);
    memcpy(pattern + length, "\\*", 3);
    wchar_t *wide = posenc__utf8_to_wide(pattern);
    free(pattern);
    if (!wide)
        return false;
    WIN32_FIND_DATAW entry;
    HANDLE find = FindFirstFileW(wide, &entry);
    free(wide);
    if (find == INVALID_HANDLE_VALUE)
        return false;
    do {
        if (wcscmp(entry.cFileName, L".") == 0 || wcscmp(entry.cFileName, L"..") == 0)
            continue;
        char *name = posenc__wide_to_utf8(entry.cFileName);
        if (name)
            visit(name, user);
        free(name);
    } while (FindNextFileW(find, &entry));
    FindClose(find);
    return true;
}

bool posenc__user_cache_directory(char *out, size_t size)
{
    return posenc__env_get_path("LOCALAPPDATA", out, size);
}

/* ---- temporary directories ---- */

bool posenc__temp_directory_create(const char *prefix, char *path, size_t size)
{
    wchar_t base[MAX_PATH + 1];
    DWORD n = GetTempPathW(MAX_PATH + 1, base);
    if (n == 0 || n > MAX_PATH) {
        errno = ENOENT;
        return false;
    }
    char *base_utf8 = posenc__wide_to_utf8(base); /* ends in a backslash */
    if (!base_utf8)
        return false;
    /* CreateDirectoryW refuses an existing name, so a clash is retried, never shared. */
    static volatile LONG counter;
    bool made = false;
    for (int attempt = 0; attempt < 64 && !made; attempt++) {
        int written = snprintf(path, size, "%s%s-%lu-%ld", base_utf8, prefix,
                               (unsigned long)GetCurrentProcessId(),
                               (long)InterlockedIncrement(&counter));
        if (written <= 0 || (size_t)written >= size) {
            errno = ENAMETOOLONG;
            break;
        }
        wchar_t *wide = posenc__utf8_to_wide(path);
        if (!wide)
            break;
        made = CreateDirectoryW(wide, NULL) != 0;
        DWORD error = made ? 0 : GetLastError();
        free(wide);
        if (!made && error != ERROR_ALREADY_EXISTS) {
            errno = errno_from_win32(error);
            break;
        }
    }
    free(base_utf8);
    return made;
}

/* Depth first; a link (reparse point) is removed, never followed. */
static void remove_tree_wide(const wchar_t *path)
{
    DWORD attributes = GetFileAttributesW(path);
    if (attributes == INVALID_FILE_ATTRIBUTES)
        return;
    if (!(attributes & FILE_ATTRIBUTE_DIRECTORY)) {
        if (attributes & FILE_ATTRIBUTE_READONLY)
            SetFileAttributesW(path, attributes & ~(DWORD)FILE_ATTRIBUTE_READONLY);
        DeleteFileW(path);
        return;
    }
    if (!(attributes & FILE_ATTRIBUTE_REPARSE_POINT)) {
        size_t length = wcslen(path);
        wchar_t *pattern = malloc((length + 3) * sizeof *pattern);
        if (!pattern)
            return;
        memcpy(pattern, path, length * sizeof *pattern);
        memcpy(pattern + length, L"\\*", 3 * sizeof *pattern);
        WIN32_FIND_DATAW entry;
        HANDLE find = FindFirstFileW(pattern, &entry);
        if (find != INVALID_HANDLE_VALUE) {
            do {
                if (wcscmp(entry.cFileName, L".") == 0 || wcscmp(entry.cFileName, L"..") == 0)
                    continue;
                size_t name = wcslen(entry.cFileName);
                wchar_t *child = malloc((length + name + 2) * sizeof *child);
                if (!child)
                    continue;
                memcpy(child, path, length * sizeof *child);
                child[length] = L'\\';
                memcpy(child + length + 1, entry.cFileName, (name + 1) * sizeof *child);
                remove_tree_wide(child);
                free(child);
            } while (FindNextFileW(find, &entry));
            FindClose(find);
        }
        free(pattern);
    }
    RemoveDirectoryW(path);
}

void posenc__remove_tree(const char *path)
{
    wchar_t *wide = posenc__utf8_to_wide(path);
    if (wide)
        remove_tree_wide(wide);
    free(wide);
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
        errno = errno_from_win32(GetLastError());
    int saved = errno;
    free(wide_from);
    free(wide_to);
    errno = saved;
    return ok;
}
