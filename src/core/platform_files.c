/* SPDX-License-Identifier: MIT */
/* Files, directories and temporary directories with UTF-8 paths on POSIX and Windows (where
 * every path goes through the wide-character calls), and files replaced in one step. */
#if !defined(_WIN32)
#  define _XOPEN_SOURCE 700 /* mkdtemp, nftw, O_CLOEXEC */
#  if defined(__APPLE__)
#    define _DARWIN_C_SOURCE
#  endif
#endif

#include "core/platform.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/stat.h>

#if defined(_WIN32)
#  include <windows.h>
#  include <io.h>
#  include <direct.h>
#else
#  include <dirent.h>
#  include <ftw.h>
#  include <unistd.h>
#endif

#if defined(_WIN32)
wchar_t *posenc__utf8_to_wide(const char *utf8)
{
    int n = MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, utf8, -1, NULL, 0);
    if (n <= 0) {
        errno = EILSEQ;
        return NULL;
    }
    wchar_t *wide = malloc((size_t)n * sizeof *wide);
    if (!wide) {
        errno = ENOMEM;
        return NULL;
    }
    MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, utf8, -1, wide, n);
    return wide;
}

char *posenc__wide_to_utf8(const wchar_t *wide)
{
    int n = WideCharToMultiByte(CP_UTF8, WC_ERR_INVALID_CHARS, wide, -1, NULL, 0, NULL, NULL);
    if (n <= 0) {
        errno = EILSEQ;
        return NULL;
    }
    char *utf8 = malloc((size_t)n);
    if (!utf8) {
        errno = ENOMEM;
        return NULL;
    }
    WideCharToMultiByte(CP_UTF8, WC_ERR_INVALID_CHARS, wide, -1, utf8, n, NULL, NULL);
    return utf8;
}

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
#endif

FILE *posenc__file_open(const char *path, const char *mode)
{
#if defined(_WIN32)
    wchar_t *wide_path = posenc__utf8_to_wide(path);
    wchar_t *wide_mode = posenc__utf8_to_wide(mode);
    FILE *file = wide_path && wide_mode ? _wfopen(wide_path, wide_mode) : NULL;
    int saved = errno;
    free(wide_path);
    free(wide_mode);
    errno = saved;
    return file;
#else
    return fopen(path, mode);
#endif
}

bool posenc__file_remove(const char *path)
{
#if defined(_WIN32)
    wchar_t *wide = posenc__utf8_to_wide(path);
    bool ok = wide && _wremove(wide) == 0;
    int saved = errno;
    free(wide);
    errno = saved;
    return ok;
#else
    return remove(path) == 0;
#endif
}

bool posenc__make_directory(const char *path)
{
#if defined(_WIN32)
    wchar_t *wide = posenc__utf8_to_wide(path);
    bool ok = wide && _wmkdir(wide) == 0;
    int saved = errno;
    free(wide);
    errno = saved;
    return ok;
#else
    return mkdir(path, 0700) == 0;
#endif
}

bool posenc__is_directory(const char *path)
{
#if defined(_WIN32)
    wchar_t *wide = posenc__utf8_to_wide(path);
    DWORD attributes = wide ? GetFileAttributesW(wide) : INVALID_FILE_ATTRIBUTES;
    free(wide);
    return attributes != INVALID_FILE_ATTRIBUTES && (attributes & FILE_ATTRIBUTE_DIRECTORY);
#else
    struct stat status;
    return stat(path, &status) == 0 && S_ISDIR(status.st_mode);
#endif
}

bool posenc__file_modified(const char *path, int64_t *seconds)
{
#if defined(_WIN32)
    wchar_t *wide = posenc__utf8_to_wide(path);
    struct _stat64 status;
    bool ok = wide && _wstat64(wide, &status) == 0;
    free(wide);
#else
    struct stat status;
    bool ok = stat(path, &status) == 0;
#endif
    *seconds = ok ? (int64_t)status.st_mtime : 0;
    return ok;
}

bool posenc__directory_list(const char *path, void (*visit)(const char *name, void *user),
                            void *user)
{
#if defined(_WIN32)
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
#else
    DIR *directory = opendir(path);
    if (!directory)
        return false;
    struct dirent *entry;
    while ((entry = readdir(directory)) != NULL)
        if (strcmp(entry->d_name, ".") != 0 && strcmp(entry->d_name, "..") != 0)
            visit(entry->d_name, user);
    closedir(directory);
    return true;
#endif
}

bool posenc__user_cache_directory(char *out, size_t size)
{
#if defined(_WIN32)
    return posenc__env_get_path("LOCALAPPDATA", out, size);
#else
    if (posenc__env_get_path("XDG_CACHE_HOME", out, size) && out[0] == '/')
        return true;
    char home[4096];
    if (!posenc__env_get_path("HOME", home, sizeof home))
        return false;
#  if defined(__APPLE__)
    int n = snprintf(out, size, "%s/Library/Caches", home);
#  else
    int n = snprintf(out, size, "%s/.cache", home);
#  endif
    return n > 0 && (size_t)n < size;
#endif
}

/* ---- temporary directories ---- */

bool posenc__temp_directory_create(const char *prefix, char *path, size_t size)
{
#if defined(_WIN32)
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
#else
    const char *tmp = getenv("TMPDIR");
    int written = snprintf(path, size, "%s/%s-XXXXXX", tmp && *tmp ? tmp : "/tmp", prefix);
    if (written <= 0 || (size_t)written >= size) {
        errno = ENAMETOOLONG;
        return false;
    }
    return mkdtemp(path) != NULL;
#endif
}

#if defined(_WIN32)
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
#else
static int remove_entry(const char *path, const struct stat *status, int flag, struct FTW *ftw)
{
    (void)status;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}
#endif

void posenc__remove_tree(const char *path)
{
#if defined(_WIN32)
    wchar_t *wide = posenc__utf8_to_wide(path);
    if (wide)
        remove_tree_wide(wide);
    free(wide);
#else
    nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
#endif
}

/* ---- files replaced in one step ---- */

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
#if defined(_WIN32)
        wchar_t *wide = posenc__utf8_to_wide(temp_path);
        if (!wide)
            return NULL;
        int fd = _wopen(wide, _O_WRONLY | _O_CREAT | _O_EXCL | _O_BINARY | _O_NOINHERIT,
                        _S_IREAD | _S_IWRITE);
        int saved_open = errno;
        free(wide);
        errno = saved_open;
#else
        int flags = O_WRONLY | O_CREAT | O_EXCL;
#  if defined(O_CLOEXEC)
        flags |= O_CLOEXEC;
#  endif
        /* 0666 less the umask, as fopen would create it. */
        int fd = open(temp_path, flags, 0666);
#endif
        if (fd < 0) {
            if (errno == EEXIST)
                continue;
            return NULL;
        }
#if defined(_WIN32)
        FILE *file = _fdopen(fd, "wb");
#else
        FILE *file = fdopen(fd, "wb");
#endif
        if (!file) {
            int saved = errno;
#if defined(_WIN32)
            _close(fd);
#else
            close(fd);
#endif
            posenc__file_remove(temp_path);
            errno = saved;
        }
        return file;
    }
    errno = EEXIST;
    return NULL;
}

bool posenc__file_commit(FILE *file)
{
    bool ok = fflush(file) == 0;
    int saved = errno;
#if defined(_WIN32)
    ok = ok && _commit(_fileno(file)) == 0;
#else
    ok = ok && fsync(fileno(file)) == 0;
#endif
    if (!ok)
        saved = errno;
    if (fclose(file) != 0 && ok) {
        ok = false;
        saved = errno;
    }
    errno = saved;
    return ok;
}

bool posenc__file_replace(const char *from, const char *to)
{
#if defined(_WIN32)
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
#else
    return rename(from, to) == 0;
#endif
}
