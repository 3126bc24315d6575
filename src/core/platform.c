/* SPDX-License-Identifier: MIT */
/* The parts of platform.h the same on every system: string helpers, getenv, and trying a
 * library under several names. The rest is per system: platform_posix.c or platform_win32.c,
 * platform_threads_*.c, platform_files_*.c. */
#include "core/platform.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

const char *posenc__strcasestr(const char *haystack, const char *needle)
{
    size_t n = strlen(needle);
    for (; *haystack; haystack++) {
        size_t i = 0;
        while (i < n && haystack[i] &&
               tolower((unsigned char)haystack[i]) == tolower((unsigned char)needle[i]))
            i++;
        if (i == n)
            return haystack;
    }
    return n == 0 ? haystack : NULL;
}

void posenc__copy_string(char *out, size_t size, const char *in)
{
    if (size == 0)
        return;
    size_t n = in ? strlen(in) : 0;
    if (n >= size)
        n = size - 1;
    if (n)
        memcpy(out, in, n);
    out[n] = '\0';
}

char *posenc__strdup(const char *s)
{
    if (!s)
        return NULL;
    size_t n = strlen(s) + 1;
    char *copy = malloc(n);
    if (copy)
        memcpy(copy, s, n);
    return copy;
}

const char *posenc__env_get(const char *name) { return getenv(name); }

void *posenc__library_open_first(const char *const *names, size_t count, const char **opened)
{
    for (size_t i = 0; i < count; i++) {
        void *library = posenc__library_open(names[i]);
        if (library) {
            if (opened)
                *opened = names[i];
            return library;
        }
    }
    return NULL;
}
