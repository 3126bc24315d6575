/* SPDX-License-Identifier: MIT */
/* The on-disk kernel binary cache (format in kernel_cache.h): the directory, and atomic,
 * checksummed entries. */
#include "core/kernel_cache.h"

#include "core/internal.h"
#include "core/platform.h"

#include <stdarg.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Paths are UTF-8 throughout, opened through core/platform.h (wide-character calls on
 * Windows), so a cache under a user profile with a non-ASCII name works. */
#define SEPARATOR POSENC__PATH_SEPARATOR

#define MAGIC "POSENCCL"
#define FORMAT_VERSION 1u
#define HEADER_BYTES 32
#define MAX_KEY_BYTES (UINT32_C(1) << 16)
#define MAX_BINARY_BYTES (UINT64_C(1) << 30)

uint64_t posenc__kernel_cache_hash(uint64_t hash, const void *data, size_t size)
{
    const unsigned char *bytes = data;
    for (size_t i = 0; i < size; i++) {
        hash ^= bytes[i];
        hash *= UINT64_C(0x100000001b3);
    }
    return hash;
}

static bool join(char *out, size_t size, const char *a, const char *b)
{
    int n = snprintf(out, size, "%s%c%s", a, SEPARATOR, b);
    return n > 0 && (size_t)n < size;
}

/* The cache directory: the configured one when set and non-empty, else the user's cache
 * directory's "posenc". */
static bool cache_dir(const char *configured, char *out, size_t size)
{
    if (configured && configured[0]) {
        int n = snprintf(out, size, "%s", configured);
        return n > 0 && (size_t)n < size;
    }
    char base[POSENC__KERNEL_CACHE_PATH_MAX];
    return posenc__user_cache_directory(base, sizeof base) && join(out, size, base, "posenc");
}

bool posenc__kernel_cache_open(posenc_context *ctx, posenc__kernel_cache_entry *entry,
                               const char *format, ...)
{
    va_list args;
    va_start(args, format);
    int n = vsnprintf(entry->key, sizeof entry->key, format, args);
    va_end(args);
    bool keyed = n > 0 && (size_t)n < sizeof entry->key;
    char name[64] = "";
    if (keyed)
        snprintf(name, sizeof name, "%.32s-%016llx.bin", entry->backend,
                 (unsigned long long)posenc__kernel_cache_hash(POSENC__KERNEL_CACHE_HASH_SEED,
                                                               entry->key, (size_t)n));
    if (keyed && cache_dir(ctx->cache_dir, entry->dir, sizeof entry->dir) &&
        join(entry->path, sizeof entry->path, entry->dir, name))
        return true;
    posenc__log(ctx, POSENC_LOG_DEBUG, "%s: %s: no binary cache directory", entry->backend,
                entry->label);
    return false;
}

typedef struct header {
    char magic[8];
    uint32_t version;
    uint32_t key_bytes;
    uint64_t binary_bytes;
    uint64_t checksum;
} header;
_Static_assert(sizeof(header) == HEADER_BYTES, "cache header layout");

static uint64_t checksum(const char *key, size_t key_bytes, const unsigned char *binary,
                         size_t binary_bytes)
{
    uint64_t hash = posenc__kernel_cache_hash(POSENC__KERNEL_CACHE_HASH_SEED, key, key_bytes);
    return posenc__kernel_cache_hash(hash, binary, binary_bytes);
}

bool posenc__kernel_cache_read(posenc_context *ctx, const posenc__kernel_cache_entry *entry,
                               unsigned char **binary, size_t *size)
{
    FILE *file = posenc__file_open(entry->path, "rb");
    header h;
    size_t key_bytes = strlen(entry->key);
    bool invalid = true, hit = false; /* invalid: a file, but corrupt, truncated or foreign */
    const char *why = "";
    unsigned char *data = NULL;
    char *stored_key = NULL;
    if (!file) {
        invalid = false;
        why = "no cache entry";
    } else if (fread(&h, sizeof h, 1, file) != 1) {
        why = "truncated header";
    } else if (memcmp(h.magic, MAGIC, sizeof h.magic) != 0 || h.version != FORMAT_VERSION) {
        why = "not a posenc cache entry of this format";
    } else if (h.key_bytes != key_bytes) {
        why = "written for another key";
    } else if (h.binary_bytes == 0 || h.binary_bytes > MAX_BINARY_BYTES) {
        why = "binary size in the header out of range";
    } else if (!(stored_key = malloc(key_bytes + 1)) ||
               !(data = malloc((size_t)h.binary_bytes))) {
        invalid = false;
        why = "out of host memory";
    } else if (fread(stored_key, 1, key_bytes, file) != key_bytes ||
               fread(data, 1, (size_t)h.binary_bytes, file) != (size_t)h.binary_bytes) {
        why = "truncated";
    } else if (fgetc(file) != EOF) {
        why = "longer than its header says";
    } else if (checksum(stored_key, key_bytes, data, (size_t)h.binary_bytes) != h.checksum) {
        why = "checksum mismatch (corrupt)";
    } else if (memcmp(stored_key, entry->key, key_bytes) != 0) {
        why = "written for another key";
    } else {
        hit = true;
    }
    if (file)
        fclose(file);
    free(stored_key);
    if (hit) {
        *binary = data;
        *size = (size_t)h.binary_bytes;
    } else if (invalid) {
        posenc__log(ctx, POSENC_LOG_INFO, "%s: %s: ignoring the cache entry %s: %s; rebuilding",
                    entry->backend, entry->label, entry->path, why);
    } else {
        posenc__log(ctx, POSENC_LOG_DEBUG, "%s: %s: %s in %s", entry->backend, entry->label, why,
                    entry->dir);
    }
    if (!hit)
        free(data);
    return hit;
}

static bool make_directory(const char *path)
{
    return posenc__make_directory(path) || errno == EEXIST;
}

/* mkdir -p. */
static bool make_directories(const char *dir)
{
    char path[POSENC__KERNEL_CACHE_PATH_MAX];
    size_t length = strlen(dir);
    if (length == 0 || length >= sizeof path)
        return false;
    memcpy(path, dir, length + 1);
    for (size_t i = 1; i < length; i++) {
        if (path[i] != '/' && path[i] != SEPARATOR)
            continue;
        char saved = path[i];
        path[i] = '\0';
        bool drive = i == 2 && path[1] == ':'; /* "C:" */
        if (!drive && !make_directory(path)) {
            path[i] = saved;
            return false;
        }
        path[i] = saved;
    }
    return make_directory(path);
}

/* Writes the entry; false with the reason in `why`. */
static bool write_entry(const posenc__kernel_cache_entry *entry, const unsigned char *binary,
                        size_t size, char *why, size_t why_size)
{
    size_t key_bytes = strlen(entry->key);
    if (key_bytes > MAX_KEY_BYTES || size == 0 || size > MAX_BINARY_BYTES) {
        snprintf(why, why_size, "entry too large");
        return false;
    }
    if (!make_directories(entry->dir)) {
        snprintf(why, why_size, "cannot create directory %s: %s", entry->dir, strerror(errno));
        return false;
    }

    header h;
    memcpy(h.magic, MAGIC, sizeof h.magic);
    h.version = FORMAT_VERSION;
    h.key_bytes = (uint32_t)key_bytes;
    h.binary_bytes = size;
    h.checksum = checksum(entry->key, key_bytes, binary, size);
    const void *pieces[3] = {&h, entry->key, binary};
    const size_t sizes[3] = {sizeof h, key_bytes, size};
    if (!posenc__kernel_cache_save(entry->path, pieces, sizes, 3)) {
        snprintf(why, why_size, "cannot write %s: %s", entry->path, strerror(errno));
        return false;
    }
    return true;
}

void posenc__kernel_cache_write(posenc_context *ctx, const posenc__kernel_cache_entry *entry,
                                const unsigned char *binary, size_t size)
{
    char why[POSENC__KERNEL_CACHE_PATH_MAX + 128];
    if (write_entry(entry, binary, size, why, sizeof why))
        posenc__log(ctx, POSENC_LOG_DEBUG, "%s: %s: cached in %s", entry->backend, entry->label,
                    entry->path);
    else
        posenc__log(ctx, POSENC_LOG_INFO, "%s: %s: binary cache not written: %s", entry->backend,
                    entry->label, why);
}

bool posenc__kernel_cache_save(const char *path, const void *const *pieces, const size_t *sizes,
                               int count)
{
    char temporary[POSENC__KERNEL_CACHE_PATH_MAX + 64];
    FILE *file = posenc__temp_file_create(path, temporary, sizeof temporary);
    if (!file)
        return false;
    bool ok = true;
    for (int i = 0; i < count && ok; i++)
        ok = fwrite(pieces[i], 1, sizes[i], file) == sizes[i];
    int error = errno;
    if (!posenc__file_commit(file) && ok) {
        ok = false;
        error = errno;
    }
    if (ok && !posenc__file_replace(temporary, path)) {
        ok = false;
        error = errno;
    }
    if (!ok) {
        posenc__file_remove(temporary);
        errno = error;
    }
    return ok;
}
