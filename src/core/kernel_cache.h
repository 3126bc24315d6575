/* SPDX-License-Identifier: MIT */
/* The on-disk cache of kernel binaries (OpenCL program binaries; any backend's compiled
 * kernels): where it lives, and reading and writing one entry. Independent of every GPU API: an
 * entry is a key text and the bytes it maps to.
 *
 * File "<backend>-<hash of key>.bin" in the cache directory ("opencl-..."):
 *   0   8 bytes  magic "POSENCCL"
 *   8   u32      format version
 *   12  u32      key length in bytes
 *   16  u64      binary length in bytes
 *   24  u64      FNV-1a 64 checksum of the key bytes followed by the binary bytes
 *   32           the key, then the binary
 * Host byte order (a cache belongs to one machine). A file that does not match its header
 * exactly (size, checksum, key) is ignored and replaced. Entries are written to a temporary
 * file in the same directory and renamed into place, so a reader sees a whole entry or none,
 * and two processes writing the same entry at once leave one of the two whole.
 */
#ifndef POSENC_CORE_KERNEL_CACHE_H
#define POSENC_CORE_KERNEL_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define POSENC__KERNEL_CACHE_PATH_MAX 4096

/* FNV-1a 64 of `size` bytes, continuing from `hash` (start with POSENC__KERNEL_CACHE_HASH_SEED). */
#define POSENC__KERNEL_CACHE_HASH_SEED UINT64_C(0xcbf29ce484222325)
uint64_t posenc__kernel_cache_hash(uint64_t hash, const void *data, size_t size);

/* The cache directory: `configured` when set and non-empty, else $XDG_CACHE_HOME/posenc, else
 * ~/.cache/posenc (%LOCALAPPDATA%\posenc on Windows, ~/Library/Caches/posenc on macOS). False
 * when there is none (no home directory) or the path is too long. */
bool posenc__kernel_cache_dir(const char *configured, char *out, size_t size);

/* The entry's file path for `key` in `dir`, named after `backend` ("opencl"); false when too
 * long. */
bool posenc__kernel_cache_path(const char *dir, const char *backend, const char *key, char *out,
                               size_t size);

typedef enum posenc__kernel_cache_result {
    POSENC__KERNEL_CACHE_HIT,
    POSENC__KERNEL_CACHE_MISSING,   /* no file */
    POSENC__KERNEL_CACHE_INVALID,   /* a file, but corrupt, truncated or for another key */
    POSENC__KERNEL_CACHE_NO_MEMORY,
} posenc__kernel_cache_result;

/* Reads the entry at `path` for `key`. On a hit, `*binary` (malloc'ed, the caller frees) and
 * `*size` hold the bytes; otherwise `*why` says what was wrong (a static string). */
posenc__kernel_cache_result posenc__kernel_cache_read(const char *path, const char *key,
                                            unsigned char **binary, size_t *size,
                                            const char **why);

/* Writes the entry atomically, creating `dir` (and its parents) if needed. False on failure,
 * with the reason in `why`. */
bool posenc__kernel_cache_write(const char *dir, const char *path, const char *key,
                           const unsigned char *binary, size_t size, char *why, size_t why_size);

/* Writes the file at `path` whole from `count` pieces, beside it first and then renamed over it
 * (core/platform.h), so that a reader never sees half a file and a failed write leaves the old
 * file as it was. Entries and a runtime's own caches (a VkPipelineCache's data) alike. False
 * with errno set on failure. */
bool posenc__kernel_cache_save(const char *path, const void *const *pieces, const size_t *sizes,
                               int count);

#endif
