/* SPDX-License-Identifier: MIT */
/* Directories and temporary directories on Windows, every path in UTF-8 converted for the
 * wide-character calls (the narrow ones would read it in the ANSI code page) through the
 * library's platform layer. */
#include "support.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/stat.h>

#include <windows.h>

#include "core/platform.h"

bool support_is_directory(const char *path)
{
    wchar_t *wide = posenc__utf8_to_wide(path);
    DWORD attributes = wide ? GetFileAttributesW(wide) : INVALID_FILE_ATTRIBUTES;
    free(wide);
    return attributes != INVALID_FILE_ATTRIBUTES && (attributes & FILE_ATTRIBUTE_DIRECTORY);
}

bool support_file_modified(const char *path, int64_t *seconds)
{
    wchar_t *wide = posenc__utf8_to_wide(path);
    struct _stat64 status;
    bool ok = wide && _wstat64(wide, &status) == 0;
    free(wide);
    *seconds = ok ? (int64_t)status.st_mtime : 0;
    return ok;
}

bool support_directory_list(const char *path, void (*visit)(const char *name, void *user),
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

/* ---- temporary directories ---- */

bool support_temp_directory_create(const char *prefix, char *path, size_t size)
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
            errno = posenc__errno_from_win32(error);
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

void support_remove_tree(const char *path)
{
    wchar_t *wide = posenc__utf8_to_wide(path);
    if (wide)
        remove_tree_wide(wide);
    free(wide);
}
