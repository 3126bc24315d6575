/* SPDX-License-Identifier: MIT */
/* The replay driver: runs a fuzz target's LLVMFuzzerTestOneInput on a few built-in edge inputs
 * and on every file of the corpus directories (or files) given, without libFuzzer, so any
 * compiler runs the corpus as an ordinary test. Usage: fuzz_replay_TARGET PATH...
 * Listing a directory is the one OS-specific thing here; the library has no use for it, so it
 * stays in this driver rather than in the platform layer (src/core/platform.h; the .npy and
 * flag targets do not link the library at all). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(_WIN32)
#  include <windows.h>
#else
#  include <dirent.h>
#  include <sys/stat.h>
#endif

#include "fuzz_common.h"

typedef struct name_list {
    char **names;
    size_t count, capacity;
} name_list;

static void fail_out_of_memory(void)
{
    fputs("fuzz replay: out of memory\n", stderr);
    exit(1);
}

/* Adds DIRECTORY/NAME, or NAME alone when `directory` is NULL. */
static void list_add(name_list *list, const char *directory, const char *name)
{
    if (list->count == list->capacity) {
        size_t capacity = list->capacity ? 2 * list->capacity : 64;
        char **grown = realloc(list->names, capacity * sizeof *grown);
        if (!grown)
            fail_out_of_memory();
        list->names = grown;
        list->capacity = capacity;
    }
    size_t size = (directory ? strlen(directory) + 1 : 0) + strlen(name) + 1;
    char *path = malloc(size);
    if (!path)
        fail_out_of_memory();
    snprintf(path, size, "%s%s%s", directory ? directory : "", directory ? "/" : "", name);
    list->names[list->count++] = path;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The files directly inside `path` (names starting with '.' left out), or `path` itself when
 * it is a file. Returns -1 when it is neither. */
static int list_inputs(const char *path, name_list *list)
{
#if defined(_WIN32)
    DWORD attributes = GetFileAttributesA(path);
    if (attributes == INVALID_FILE_ATTRIBUTES)
        return -1;
    if (!(attributes & FILE_ATTRIBUTE_DIRECTORY)) {
        list_add(list, NULL, path);
        return 0;
    }
    char pattern[4096];
    snprintf(pattern, sizeof pattern, "%s\\*", path);
    WIN32_FIND_DATAA found;
    HANDLE handle = FindFirstFileA(pattern, &found);
    if (handle == INVALID_HANDLE_VALUE)
        return 0;
    do {
        if (found.cFileName[0] != '.' && !(found.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY))
            list_add(list, path, found.cFileName);
    } while (FindNextFileA(handle, &found));
    FindClose(handle);
    return 0;
#else
    struct stat st;
    if (stat(path, &st) != 0)
        return -1;
    if (!S_ISDIR(st.st_mode)) {
        list_add(list, NULL, path);
        return 0;
    }
    DIR *dir = opendir(path);
    if (!dir)
        return -1;
    struct dirent *entry;
    while ((entry = readdir(dir)) != NULL) {
        if (entry->d_name[0] == '.')
            continue;
        list_add(list, path, entry->d_name);
        struct stat entry_st;
        if (stat(list->names[list->count - 1], &entry_st) != 0 || !S_ISREG(entry_st.st_mode))
            free(list->names[--list->count]);
    }
    closedir(dir);
    return 0;
#endif
}

static unsigned char *read_file(const char *path, size_t *size)
{
    FILE *file = fopen(path, "rb");
    if (!file)
        return NULL;
    size_t capacity = 4096, used = 0;
    unsigned char *bytes = malloc(capacity);
    while (bytes) {
        used += fread(bytes + used, 1, capacity - used, file);
        if (used < capacity)
            break;
        capacity *= 2;
        unsigned char *grown = realloc(bytes, capacity);
        if (!grown)
            free(bytes);
        bytes = grown;
    }
    if (bytes && ferror(file)) {
        free(bytes);
        bytes = NULL;
    }
    fclose(file);
    *size = used;
    return bytes;
}

/* Inputs every target meets: nothing, one byte, and runs of the extreme byte values. Each is
 * copied into an allocation of its exact size so that reading past the end is seen. */
static void run_built_in_inputs(void)
{
    static const struct {
        unsigned char byte;
        size_t size;
    } inputs[] = {{0, 0}, {0x00, 1}, {0xFF, 1}, {'\n', 1}, {0x00, 64}, {0xFF, 64},
                  {0x7F, 300}, {0xFF, 4096}};
    for (size_t i = 0; i < sizeof inputs / sizeof inputs[0]; i++) {
        unsigned char *bytes = malloc(inputs[i].size ? inputs[i].size : 1);
        if (!bytes)
            fail_out_of_memory();
        memset(bytes, inputs[i].byte, inputs[i].size);
        LLVMFuzzerTestOneInput(bytes, inputs[i].size);
        free(bytes);
    }
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s CORPUS_DIRECTORY_OR_FILE...\n", argv[0]);
        return 2;
    }
    run_built_in_inputs();
    size_t total = 0;
    for (int a = 1; a < argc; a++) {
        name_list list = {NULL, 0, 0};
        if (list_inputs(argv[a], &list) != 0) {
            fprintf(stderr, "fuzz replay: cannot read %s\n", argv[a]);
            return 1;
        }
        qsort(list.names, list.count, sizeof list.names[0], by_name);
        for (size_t i = 0; i < list.count; i++) {
            size_t size = 0;
            unsigned char *bytes = read_file(list.names[i], &size);
            if (!bytes) {
                fprintf(stderr, "fuzz replay: cannot read %s\n", list.names[i]);
                return 1;
            }
            /* Named first, so that a crash inside says which input it was. */
            fprintf(stderr, "fuzz replay: %s (%zu bytes)\n", list.names[i], size);
            unsigned char *exact = malloc(size ? size : 1);
            if (!exact)
                fail_out_of_memory();
            memcpy(exact, bytes, size);
            free(bytes);
            LLVMFuzzerTestOneInput(exact, size);
            free(exact);
            free(list.names[i]);
        }
        total += list.count;
        free(list.names);
    }
    printf("fuzz replay: %zu inputs and the built-in edge inputs passed\n", total);
    return 0;
}
