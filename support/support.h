/* SPDX-License-Identifier: MIT */
/* The operating-system services of the posenc programs (the command-line tool, the bench and the
 * tests), none of which the library needs: child processes, memory maps, stream redirects,
 * directories, terminals and cache sizes, implemented here per system family (support_*_posix.c,
 * support_*_win32.c). The services the library needs as well (the clock, aligned memory, the
 * environment, dynamic loading, files replaced in one step) keep their one implementation in the
 * library's platform layer; support_library.c passes them on under this header's names, so that
 * a program reaches the system through this header alone. Paths are UTF-8 on every system. */
#ifndef POSENC_SUPPORT_H
#define POSENC_SUPPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Marks a printf-like function so that GCC and Clang check its calls. MinGW-w64's "printf"
 * archetype is msvcrt's (no %zu); its C99 stdio (__USE_MINGW_ANSI_STDIO) is "gnu_printf". */
#if defined(__MINGW32__)
#  define SUPPORT_PRINTF_LIKE(format_index, first_arg) \
      __attribute__((format(gnu_printf, format_index, first_arg)))
#elif defined(__GNUC__) || defined(__clang__)
#  define SUPPORT_PRINTF_LIKE(format_index, first_arg) \
      __attribute__((format(printf, format_index, first_arg)))
#else
#  define SUPPORT_PRINTF_LIKE(format_index, first_arg)
#endif

/* ---- passed on from the library's platform layer (support_library.c) ---- */

/* Seconds on a monotonic clock with an unspecified origin: for intervals, never for dates. */
double support_seconds_now(void);

/* Memory aligned to `alignment` (a power of two); free with support_aligned_free. */
void *support_aligned_alloc(size_t alignment, size_t size);
void support_aligned_free(void *memory);

/* getenv: the value of a variable, NULL when unset (in the ANSI code page on Windows). */
const char *support_env_get(const char *name);

/* dlopen/dlsym/dlclose or their Windows equivalents, opening the first of the `count` libraries
 * `names` that opens, tried in order; NULL on failure, and always in a static binary, where
 * loading a shared library would map a second C library. */
void *support_library_open_first(const char *const *names, size_t count);
void *support_library_symbol(void *library, const char *name);
void support_library_close(void *library);

/* fopen and remove. NULL or false with errno set on failure. */
FILE *support_file_open(const char *path, const char *mode);
bool support_file_remove(const char *path);

/* Files replaced in one step: support_temp_file_create opens a new file beside `destination`
 * (its path into `temp_path`), support_file_commit flushes it to the disk and closes it (closed
 * in every case), support_file_replace renames it over the destination. Each is false or NULL
 * with errno set on failure. */
FILE *support_temp_file_create(const char *destination, char *temp_path, size_t temp_path_size);
bool support_file_commit(FILE *file);
bool support_file_replace(const char *from, const char *to);

/* ---- the program, its process and its threads (support_posix.c, support_win32.c) ---- */

/* The program's arguments in UTF-8: `argv` itself on POSIX; on Windows, where main's are in the
 * ANSI code page, a copy made from the wide-character command line (kept for the life of the
 * process; `argv` where that fails). */
char **support_utf8_arguments(int argc, char **argv);

/* Sizes in bytes of the first processor's level-1 data, level-2 and level-3 caches (Linux sysfs,
 * GetLogicalProcessorInformation, sysctl on macOS); 0 for a level the OS does not tell. */
void support_cpu_caches(uint64_t *l1d, uint64_t *l2, uint64_t *l3);

/* Zeroed read-write pages of their own (mmap, VirtualAlloc), given memory only where touched and
 * on POSIX without reserving swap for the rest (MAP_NORESERVE), so that a test can make a view
 * larger than memory. NULL on failure; unmapped with the same size. */
void *support_memory_map(size_t bytes);
void support_memory_unmap(void *memory, size_t bytes);

/* Sends what is written to `stream`'s file descriptor (stdout, stderr) to `target`'s instead,
 * until support_stream_restore; both flushed first. Returns what to restore, -1 on failure. */
int support_stream_redirect(FILE *stream, FILE *target);
void support_stream_restore(FILE *stream, int saved);

/* Whether `stream` is a terminal that understands ANSI escape sequences. */
bool support_is_terminal(FILE *stream);

/* setenv(name, value, 1) and unsetenv, `value` in UTF-8. On Windows through the C runtime
 * (_wputenv_s), so that its getenv, which the library reads, sees the change too; there an empty
 * value unsets. False with errno set on failure. */
bool support_env_set(const char *name, const char *value);
bool support_env_unset(const char *name);

/* Whether a library of that name is already loaded into the process, without loading it
 * (dlopen with RTLD_NOLOAD, GetModuleHandleW); false in a static binary. */
bool support_library_loaded(const char *name);

/* A number naming the calling thread, distinct among the threads alive at one time. */
uint64_t support_thread_id(void);

/* A child process running a program. */
typedef struct support_process {
    void *opaque[2];
} support_process;
/* Starts argv[0] (a path in UTF-8, not searched for in PATH) with the arguments argv[1..] up to a
 * NULL, in this process's environment (posix_spawn, CreateProcessW). False on failure. */
bool support_process_start(support_process *process, const char *const *argv);
/* Waits for the child to end and returns its exit code; -1 where it could not be waited for or
 * was ended by a signal. */
int support_process_wait(support_process *process);

/* Runs the executable this process runs with `args` (NULL-terminated, the arguments after the
 * program name), its standard output and error discarded, and waits for it (support_run_self.c).
 * Gives its exit code and the seconds from just before it was started to just after it exited.
 * Returns false, with a message in `error`, when it could not be started (no path to this
 * executable, or the system refused, as under a user-mode emulator without binfmt). */
bool support_run_self(const char *const *args, int *exit_code, double *seconds, char *error,
                      size_t error_size);

/* ---- directories (support_files_posix.c, support_files_win32.c) ---- */

/* Whether `path` names an existing directory. */
bool support_is_directory(const char *path);
/* The last modification time of `path` in whole seconds since an epoch. False when it cannot
 * be read. */
bool support_file_modified(const char *path, int64_t *seconds);
/* Calls visit(name, user) for each entry of directory `path` but "." and "..", in no given
 * order (names in UTF-8). False when the directory cannot be read. */
bool support_directory_list(const char *path, void (*visit)(const char *name, void *user),
                            void *user);
/* A new empty directory "<system temporary directory>/<prefix>-<unique>" (TMPDIR, else /tmp;
 * GetTempPath on Windows), its path into `path`. False with errno set on failure. */
bool support_temp_directory_create(const char *prefix, char *path, size_t size);
/* Removes `path` and everything below it, not following symbolic links; best effort. */
void support_remove_tree(const char *path);

#endif
