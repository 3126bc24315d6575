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

#include "core/platform.h"
#include <posenc/posenc.h>

#define POSENC__KERNEL_CACHE_PATH_MAX 4096

/* FNV-1a 64 of `size` bytes, continuing from `hash` (start with POSENC__KERNEL_CACHE_HASH_SEED). */
#define POSENC__KERNEL_CACHE_HASH_SEED UINT64_C(0xcbf29ce484222325)
uint64_t posenc__kernel_cache_hash(uint64_t hash, const void *data, size_t size);

/* One entry as a backend's build uses it, its outcomes logged as "<backend>: <label>: ...": a
 * cache that cannot be read or written never fails a build, which then compiles from source. */
typedef struct posenc__kernel_cache_entry {
    const char *backend; /* "opencl": names the entry's file and starts the logs */
    const char *label;   /* the program, in logs */
    char key[2048];      /* everything that makes a binary valid for this build */
    char dir[POSENC__KERNEL_CACHE_PATH_MAX];
    char path[POSENC__KERNEL_CACHE_PATH_MAX];
} posenc__kernel_cache_entry;

/* Names the entry of the key `format` writes in ctx's cache directory: its cache_dir when set
 * and non-empty, else $XDG_CACHE_HOME/posenc, else ~/.cache/posenc (%LOCALAPPDATA%\posenc on
 * Windows, ~/Library/Caches/posenc on macOS). False, logged, when there is none (no home
 * directory) or the key or a path is too long. */
bool posenc__kernel_cache_open(posenc_context *ctx, posenc__kernel_cache_entry *entry,
                               const char *format, ...) POSENC__PRINTF_LIKE(3, 4);

/* Reads the entry: true on a hit, `*binary` (malloc'ed, the caller frees) and `*size` holding
 * the bytes; otherwise false, with what was wrong logged (a corrupt, truncated or foreign
 * file is then rebuilt and replaced). */
bool posenc__kernel_cache_read(posenc_context *ctx, const posenc__kernel_cache_entry *entry,
                               unsigned char **binary, size_t *size);

/* Writes the entry atomically, creating its directory (and parents) if needed; the outcome
 * logged. */
void posenc__kernel_cache_write(posenc_context *ctx, const posenc__kernel_cache_entry *entry,
                                const unsigned char *binary, size_t size);

/* Writes the file at `path` whole from `count` pieces, beside it first and then renamed over it
 * (core/platform.h), so that a reader never sees half a file and a failed write leaves the old
 * file as it was. Entries and a runtime's own caches (a VkPipelineCache's data) alike. False
 * with errno set on failure. */
bool posenc__kernel_cache_save(const char *path, const void *const *pieces, const size_t *sizes,
                               int count);

#endif
