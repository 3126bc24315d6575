/* SPDX-License-Identifier: MIT */
/* The OpenCL program binary cache, in a temporary cache_dir on the first OpenCL device:
 * - a cold start builds from source and writes an entry; a warm start loads it and leaves the
 *   file as it was;
 * - an entry full of garbage, with flipped bytes, truncated, empty, or written for another key
 *   is ignored and rebuilt (and the op still gives the right answer);
 * - a changed kernel source or changed build options never reuse an old binary;
 * - a cache directory that cannot be created never fails an op;
 * - $XDG_CACHE_HOME/posenc is the default directory;
 * - two processes building the same entry at once leave one whole, loadable entry.
 * Observed through the library's log messages and the files themselves. Where no OpenCL device
 * is present the test is skipped, unless POSENC_TEST_REQUIRE_DEVICES names opencl (the Linux
 * presets, which CI runs with PoCL): then it fails.
 */
#include "required_devices.h"
#include "test_common.h"

#include "core/kernels.h"
#include "opencl/cl_internal.h"
#include "reference.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The variable whose folder holds the default cache directory (core/kernel_cache.c). */
#if defined(_WIN32)
#  define CACHE_HOME "LOCALAPPDATA"
#else
#  define CACHE_HOME "XDG_CACHE_HOME"
#endif

/* ---------------------------------------------------------------------------------------------
 * Log capture
 */
typedef struct log_capture {
    unsigned built;    /* "built from source" */
    unsigned loaded;   /* "loaded from the binary cache" */
    unsigned ignored;  /* "ignoring the cache entry" */
    unsigned unwritten;/* "binary cache not written" */
    char last_ignored[512];
} log_capture;

static void capture(posenc_log_level level, const char *message, void *user_data)
{
    (void)level;
    log_capture *log = user_data;
    if (strstr(message, "built from source"))
        log->built++;
    if (strstr(message, "loaded from the binary cache"))
        log->loaded++;
    if (strstr(message, "ignoring the cache entry")) {
        log->ignored++;
        snprintf(log->last_ignored, sizeof log->last_ignored, "%s", message);
    }
    if (strstr(message, "binary cache not written"))
        log->unwritten++;
    if (posenc__env_get("POSENC_TEST_VERBOSE"))
        printf("      log: %s\n", message);
}

/* ---------------------------------------------------------------------------------------------
 * Files
 */
static char root[512];        /* this run's temporary directory */
static uint32_t device_index; /* the OpenCL device under test, in posenc_device_get order */
static uint32_t backend_index;

typedef struct entry_count {
    const char *dir;
    unsigned n;
    char *last;
    size_t size;
} entry_count;

static void count_entry(const char *name, void *user)
{
    entry_count *count = user;
    size_t length = strlen(name);
    if (strncmp(name, "opencl-", 7) == 0 && length > 4 && strcmp(name + length - 4, ".bin") == 0) {
        count->n++;
        if (count->last)
            snprintf(count->last, count->size, "%s/%s", count->dir, name);
    }
}

static unsigned count_entries(const char *dir, char *last, size_t size)
{
    entry_count count = {.dir = dir, .last = last, .size = size};
    support_directory_list(dir, count_entry, &count);
    return count.n;
}

static void fail_on_temporary(const char *name, void *user)
{
    (void)user;
    if (strstr(name, ".tmp")) {
        test_failures++;
        fprintf(stderr, "temporary file left in the cache: %s\n", name);
    }
}

/* Fails the test when a temporary file is left behind. */
static void check_no_temporaries(const char *dir)
{
    support_directory_list(dir, fail_on_temporary, NULL);
}

static unsigned char *read_file(const char *path, size_t *size)
{
    FILE *f = posenc__file_open(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long length = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *data = malloc(length > 0 ? (size_t)length : 1);
    if (data && length > 0 && fread(data, 1, (size_t)length, f) != (size_t)length) {
        free(data);
        data = NULL;
    }
    fclose(f);
    *size = length > 0 ? (size_t)length : 0;
    return data;
}

static bool write_file(const char *path, const void *data, size_t size)
{
    FILE *f = posenc__file_open(path, "wb");
    if (!f)
        return false;
    bool ok = fwrite(data, 1, size, f) == size;
    return fclose(f) == 0 && ok;
}

/* ---------------------------------------------------------------------------------------------
 * The operation: a small f32 RoPE on host memory, checked against the float64 reference.
 */
enum { TOKENS = 5, HEADS = 3, HEAD_DIM = 16 };

static posenc_context *open_context(const char *cache_dir, log_capture *log)
{
    char selector[16];
    snprintf(selector, sizeof selector, "%u", backend_index);
    posenc_context_desc desc = {
        .backend = POSENC_BACKEND_OPENCL,
        .device = selector,
        .flags = POSENC_CONTEXT_NO_FALLBACK | POSENC_CONTEXT_IGNORE_ENV,
        .cache_dir = cache_dir,
        .log = capture,
        .log_user_data = log,
    };
    posenc_context *ctx = NULL;
    posenc_status status = posenc_context_create(&desc, &ctx);
    if (status != POSENC_OK) {
        test_failures++;
        fprintf(stderr, "context on opencl:%u failed: %s: %s\n", backend_index,
                posenc_status_name(status), posenc_thread_last_error());
        return NULL;
    }
    return ctx;
}

/* Runs the RoPE on a fresh context with `cache_dir`, checks its output, and returns what the
 * log said (all zero when the context could not be created). */
static log_capture run_rope(const char *cache_dir, double *milliseconds)
{
    log_capture log = {0};
    posenc_context *ctx = open_context(cache_dir, &log);
    if (!ctx)
        return log;
    static float q[TOKENS][HEADS][HEAD_DIM];
    static float input[TOKENS][HEADS][HEAD_DIM];
    test_rng rng = {99};
    for (int t = 0; t < TOKENS; t++)
        for (int h = 0; h < HEADS; h++)
            for (int d = 0; d < HEAD_DIM; d++)
                q[t][h][d] = input[t][h][d] = (float)test_rng_uniform(&rng, -2.0, 2.0);
    const int64_t shape[3] = {TOKENS, HEADS, HEAD_DIM};
    posenc_rope_desc rope = {
        .q = posenc_tensor_of_host(q, POSENC_DTYPE_F32, 3, shape),
        .position_offset = 1000,
    };
    double start = posenc__seconds_now();
    posenc_status status = posenc_rope(ctx, &rope);
    if (milliseconds)
        *milliseconds = (posenc__seconds_now() - start) * 1e3;
    CHECK_OK(status);
    if (status != POSENC_OK)
        fprintf(stderr, "  rope: %s\n", posenc_context_last_error(ctx));

    double inv_freq[HEAD_DIM / 2];
    double af = ref_rope_frequencies(&rope, HEAD_DIM, inv_freq);
    ref_stats stats = {0};
    bool ok = true;
    for (int t = 0; t < TOKENS; t++) {
        for (int h = 0; h < HEADS; h++) {
            double x[HEAD_DIM], expect[HEAD_DIM];
            for (int d = 0; d < HEAD_DIM; d++)
                x[d] = input[t][h][d];
            ref_rope_head(x, expect, HEAD_DIM, HEAD_DIM, POSENC_ROPE_NEOX, inv_freq, 1000 + t,
                          af, false);
            for (int j = 0; j < HEAD_DIM / 2; j++) {
                double pair = hypot(x[j], x[j + HEAD_DIM / 2]);
                ok &= ref_check(&stats, POSENC_DTYPE_F32, q[t][h][j], expect[j], pair, 0);
                ok &= ref_check(&stats, POSENC_DTYPE_F32, q[t][h][j + HEAD_DIM / 2],
                                expect[j + HEAD_DIM / 2], pair, 0);
            }
        }
    }
    CHECK(ok);
    posenc_context_destroy(ctx);
    return log;
}

/* ---------------------------------------------------------------------------------------------
 * The checks
 */
static char entry[1024]; /* the rope_f32 entry of the main cache directory */

static void test_cold_and_warm(const char *dir)
{
    double cold_ms = 0, warm_ms = 0;
    log_capture cold = run_rope(dir, &cold_ms);
    CHECK(cold.built == 1 && cold.loaded == 0);
    CHECK(count_entries(dir, entry, sizeof entry) == 1);
    check_no_temporaries(dir);
    int64_t before = 0;
    CHECK(support_file_modified(entry, &before));
    size_t size_before = 0;
    unsigned char *bytes_before = read_file(entry, &size_before);
    CHECK(bytes_before != NULL && size_before > 32);

    posenc__sleep_seconds(1.1); /* a rewrite would show in the modification time */
    log_capture warm = run_rope(dir, &warm_ms);
    CHECK(warm.loaded == 1 && warm.built == 0 && warm.ignored == 0);
    CHECK(count_entries(dir, NULL, 0) == 1);
    int64_t after = 0;
    CHECK(support_file_modified(entry, &after));
    CHECK(after == before);
    size_t size_after = 0;
    unsigned char *bytes_after = read_file(entry, &size_after);
    CHECK(bytes_after && size_after == size_before &&
          memcmp(bytes_before, bytes_after, size_before) == 0);
    free(bytes_before);
    free(bytes_after);
    printf("  first RoPE f32 call on a new context: cold cache %.1f ms, warm cache %.1f ms\n",
           cold_ms, warm_ms);
}

/* Damages the entry with `damage`, then expects one ignored entry, a rebuild, a rewritten valid
 * entry (the next start loads it), and a right answer. */
static void expect_rebuilt(const char *dir, const char *what)
{
    log_capture log = run_rope(dir, NULL);
    if (!(log.ignored == 1 && log.built == 1 && log.loaded == 0)) {
        test_failures++;
        fprintf(stderr, "%s entry: ignored %u, built %u, loaded %u (expected 1, 1, 0)\n", what,
                log.ignored, log.built, log.loaded);
    } else {
        printf("  %-20s %s\n", what, strstr(log.last_ignored, "rope_f32"));
    }
    check_no_temporaries(dir);
    log_capture again = run_rope(dir, NULL);
    CHECK(again.loaded == 1 && again.built == 0);
}

static void test_damaged_entries(const char *dir)
{
    size_t size = 0;
    unsigned char *good = read_file(entry, &size);
    CHECK(good != NULL);
    if (!good)
        return;
    unsigned char *bad = malloc(size);
    if (!bad) {
        free(good);
        return;
    }

    test_rng rng = {4242};
    for (size_t i = 0; i < size; i++)
        bad[i] = (unsigned char)test_rng_u32(&rng);
    CHECK(write_file(entry, bad, size));
    expect_rebuilt(dir, "garbage");

    memcpy(bad, good, size); /* a valid header; bytes flipped in the binary */
    for (size_t i = size / 2; i < size / 2 + 16 && i < size; i++)
        bad[i] ^= 0x5a;
    CHECK(write_file(entry, bad, size));
    expect_rebuilt(dir, "flipped bytes");

    CHECK(write_file(entry, good, size / 2));
    expect_rebuilt(dir, "truncated");

    CHECK(write_file(entry, good, 20)); /* inside the header */
    expect_rebuilt(dir, "truncated header");

    CHECK(write_file(entry, good, 0));
    expect_rebuilt(dir, "empty");

    CHECK(write_file(entry, good, size)); /* one byte more than the header says */
    FILE *f = posenc__file_open(entry, "ab");
    CHECK(f && fputc(0, f) == 0);
    if (f)
        fclose(f);
    expect_rebuilt(dir, "trailing bytes");

    free(bad);
    free(good);
}

/* A changed source or changed options get a new key, a new file, and a build from source. */
typedef struct other_entry {
    const char *dir;
    char *path;
    size_t size;
} other_entry;

/* An entry of the directory other than `entry`, into found->path. */
static void find_other_entry(const char *name, void *user)
{
    other_entry *found = user;
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", found->dir, name);
    if (strncmp(name, "opencl-", 7) == 0 && strcmp(path, entry) != 0)
        snprintf(found->path, found->size, "%s", path);
}

/* `device_type`: the device's; its RoPE of run_rope (contiguous, 8 pairs) ran rope_contiguous.cl
 * on a CPU-type device and rope.cl elsewhere (cl_rope.c), and that program is in the cache. */
static void test_changed_source(const char *dir, posenc_device_type device_type)
{
    _Static_assert(HEAD_DIM / 2 % 8 == 0, "run_rope's pairs: whole blocks of rope_contiguous.cl");
    const posenc__cl_kernel *variant = posenc__cl_kernel_get(
        device_type == POSENC_DEVICE_CPU ? POSENC__CL_ROPE_CONTIGUOUS_F32 : POSENC__CL_ROPE_F32);
    CHECK(variant != NULL);
    if (!variant)
        return;
    size_t length = strlen(variant->source);
    char *changed = malloc(length + 64);
    if (!changed)
        return;
    snprintf(changed, length + 64, "%s\n/* a changed kernel source */\n", variant->source);
    char options[256];
    snprintf(options, sizeof options, "%s -DPOSENC_CACHE_TEST_OPTION=1", variant->options);

    struct {
        const char *what, *source, *options;
        unsigned built, loaded;
    } steps[] = {
        {"changed source", changed, variant->options, 1, 0},
        {"changed source again", changed, variant->options, 0, 1},
        {"changed options", variant->source, options, 1, 0},
        {"original", variant->source, variant->options, 0, 1},
    };
    unsigned entries = count_entries(dir, NULL, 0);
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        log_capture log = {0};
        posenc_context *ctx = open_context(dir, &log);
        if (!ctx)
            break;
        cl_program program = NULL;
        CHECK_OK(posenc_cl_program_build(ctx, "cache test", steps[i].source, steps[i].options,
                                         &program));
        if (program)
            posenc_cl_api_get()->ReleaseProgram(program);
        posenc_context_destroy(ctx);
        if (log.built != steps[i].built || log.loaded != steps[i].loaded || log.ignored) {
            test_failures++;
            fprintf(stderr, "%s: built %u, loaded %u, ignored %u (expected %u, %u, 0)\n",
                    steps[i].what, log.built, log.loaded, log.ignored, steps[i].built,
                    steps[i].loaded);
        }
        entries += steps[i].built;
        CHECK(count_entries(dir, NULL, 0) == entries);
    }
    printf("  changed source and options: rebuilt, each under its own key\n");
    free(changed);

    /* A source that does not compile: KERNEL_BUILD_FAILED with the build log, nothing cached. */
    log_capture log = {0};
    posenc_context *ctx = open_context(dir, &log);
    if (ctx) {
        cl_program program = NULL;
        CHECK_STATUS(posenc_cl_program_build(ctx, "broken", "kernel void f(global int *x) { x[0] = "
                                             "undeclared_name; }\n", "", &program),
                     POSENC_KERNEL_BUILD_FAILED);
        CHECK(program == NULL);
        const char *message = posenc_context_last_error(ctx);
        CHECK(strstr(message, "broken") && strstr(message, "clBuildProgram"));
        printf("  a source that does not build: %.120s\n", message);
        posenc_context_destroy(ctx);
        CHECK(count_entries(dir, NULL, 0) == entries);
    }

    /* An entry copied over another key's file is refused for the key it does not carry. */
    char other[1024] = "";
    other_entry found = {.dir = dir, .path = other, .size = sizeof other};
    support_directory_list(dir, find_other_entry, &found);
    size_t size = 0;
    unsigned char *foreign = other[0] ? read_file(other, &size) : NULL;
    CHECK(foreign != NULL);
    if (foreign) {
        CHECK(write_file(entry, foreign, size));
        expect_rebuilt(dir, "another key's entry");
        free(foreign);
    }
}

/* A cache directory that cannot be created (below a regular file): the op works, and says why
 * nothing was cached. */
static void test_unwritable(void)
{
    char file[600], dir[700];
    snprintf(file, sizeof file, "%s/not-a-directory", root);
    snprintf(dir, sizeof dir, "%s/cache", file);
    CHECK(write_file(file, "x", 1));
    log_capture log = run_rope(dir, NULL);
    CHECK(log.built == 1 && log.unwritten == 1 && log.loaded == 0);
    printf("  unwritable cache directory: op ok, cache skipped\n");
}

/* cache_dir unset: $XDG_CACHE_HOME/posenc (%LOCALAPPDATA%\\posenc on Windows). */
static void test_default_directory(void)
{
    char xdg[600], dir[700];
    snprintf(xdg, sizeof xdg, "%s/xdg", root);
    snprintf(dir, sizeof dir, "%s/posenc", xdg);
    char saved[1024];
    bool was_set = posenc__env_get_path(CACHE_HOME, saved, sizeof saved);
    support_env_set(CACHE_HOME, xdg);
    log_capture log = run_rope(NULL, NULL);
    log_capture again = run_rope(NULL, NULL);
    if (was_set)
        support_env_set(CACHE_HOME, saved);
    else
        support_env_unset(CACHE_HOME);
    CHECK(log.built + log.loaded == 1);
    CHECK(again.loaded == 1 && again.built == 0);
    CHECK(count_entries(dir, NULL, 0) == 1);
    printf("  default directory: $" CACHE_HOME "/posenc\n");
}

/* Child mode: one op with the given cache directory; exit 0 when it worked. */
static int child_main(const char *dir)
{
    run_rope(dir, NULL);
    return test_failures ? 1 : 0;
}

/* Two processes build the same entry at once, twice over: one whole entry results. */
static void test_two_writers(const char *self)
{
    for (int round = 0; round < 2; round++) {
        char dir[600];
        snprintf(dir, sizeof dir, "%s/race%d", root, round);
        support_process children[2];
        bool started[2] = {false, false};
        for (int i = 0; i < 2; i++) {
            const char *argv[] = {self, "--child", dir, NULL};
            started[i] = support_process_start(&children[i], argv);
            if (!started[i]) {
                test_failures++;
                fprintf(stderr, "starting %s failed\n", self);
            }
        }
        for (int i = 0; i < 2; i++)
            if (started[i])
                CHECK(support_process_wait(&children[i]) == 0);
        CHECK(count_entries(dir, NULL, 0) == 1);
        check_no_temporaries(dir);
        log_capture log = run_rope(dir, NULL);
        CHECK(log.loaded == 1 && log.built == 0 && log.ignored == 0);
    }
    printf("  two processes writing at once: one whole entry\n");
}

int main(int argc, char **argv)
{
    argv = support_utf8_arguments(argc, argv); /* the child's directory argument */
    uint32_t count = 0;
    bool found = false;
    CHECK_OK(posenc_device_count(&count));
    for (uint32_t i = 0; i < count && !found; i++) {
        posenc_device_info info;
        if (posenc_device_get(i, &info) == POSENC_OK && info.backend == POSENC_BACKEND_OPENCL) {
            device_index = i;
            backend_index = info.backend_index;
            found = true;
        }
    }
    if (argc == 3 && strcmp(argv[1], "--child") == 0)
        return found ? child_main(argv[2]) : 1;
    if (!found) {
        const char *reason = "";
        posenc_backend_status(POSENC_BACKEND_OPENCL, &reason);
        return test_device_absent("test_opencl_cache", "opencl", reason);
    }

    posenc_device_info info;
    CHECK_OK(posenc_device_get(device_index, &info));
    printf("OpenCL device %u: %s (%s)\n", backend_index, info.name, info.driver);

    /* A name outside any ANSI code page, as a user profile on Windows may have: every path the
     * cache takes goes through the UTF-8 platform calls. */
    static const char prefix[] = "posenc-cl-cache-\xc3\xa9t\xc3\xa9-\xe6\x97\xa5\xe6\x9c\xac";
    if (!support_temp_directory_create(prefix, root, sizeof root)) {
        fprintf(stderr, "cannot create a temporary directory\n");
        return EXIT_FAILURE;
    }
    char dir[600];
    snprintf(dir, sizeof dir, "%s/cache", root);

    test_cold_and_warm(dir);
    if (entry[0]) {
        test_damaged_entries(dir);
        test_changed_source(dir, info.type);
    }
    test_unwritable();
    test_default_directory();
    test_two_writers(argv[0]);

    if (!test_failures)
        support_remove_tree(root);
    else
        printf("cache files kept in %s\n", root);
    return test_finish("test_opencl_cache");
}
