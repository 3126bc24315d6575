/* SPDX-License-Identifier: MIT */
/* The services the library's platform layer implements for itself, passed on under support.h's
 * names: one implementation of each, and the one file of the programs that names posenc__
 * functions (support/CMakeLists.txt gives it the library's source folder). */
#include "support.h"

#include "core/platform.h"

double support_seconds_now(void) { return posenc__seconds_now(); }

void *support_aligned_alloc(size_t alignment, size_t size)
{
    return posenc__aligned_alloc(alignment, size);
}

void support_aligned_free(void *memory) { posenc__aligned_free(memory); }

const char *support_env_get(const char *name) { return posenc__env_get(name); }

void *support_library_open_first(const char *const *names, size_t count)
{
    return posenc__library_open_first(names, count, NULL);
}

void *support_library_symbol(void *library, const char *name)
{
    return posenc__library_symbol(library, name);
}

void support_library_close(void *library) { posenc__library_close(library); }

FILE *support_file_open(const char *path, const char *mode)
{
    return posenc__file_open(path, mode);
}

bool support_file_remove(const char *path) { return posenc__file_remove(path); }

FILE *support_temp_file_create(const char *destination, char *temp_path, size_t temp_path_size)
{
    return posenc__temp_file_create(destination, temp_path, temp_path_size);
}

bool support_file_commit(FILE *file) { return posenc__file_commit(file); }

bool support_file_replace(const char *from, const char *to)
{
    return posenc__file_replace(from, to);
}
