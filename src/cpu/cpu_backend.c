/* SPDX-License-Identifier: MIT */
/* The native CPU backend: device description, contexts (kernel variant, thread pool, scratch),
 * host-memory buffers and the copy yardstick. The operations are in cpu_rope.c and
 * cpu_sinusoidal.c, the vector kernels in cpu_kernels_*.c (one per instruction set).
 *
 * Kernel variant: the best one the CPU and OS support (cpu_variant.c: AVX-512 with BF16,
 * AVX-512, AVX2+FMA+F16C on x86-64, NEON on aarch64, portable C elsewhere), chosen when a
 * context is created. The environment variable POSENC_CPU_VARIANT=portable|avx2|avx512|
 * avx512bf16|neon forces one (read at each context creation, also under
 * POSENC_CONTEXT_IGNORE_ENV, which concerns only the device choice); creating a CPU context
 * then fails with POSENC_UNSUPPORTED if this machine cannot run it (POSENC_INVALID_ARGUMENT for
 * an unknown name), with a message that starts "POSENC_CPU_VARIANT=<value>: ". The device's
 * driver line names the variant contexts run, as the variable stood when the CPU device was
 * listed (once per process).
 *
 * Threads: posenc_context_desc.num_threads (default: the cores the process may use), the
 * calling thread being one of them; the workers start with the context and are reused by every
 * call. Jobs smaller than a few hundred KiB (a decode step) run on the calling thread alone.
 */
#include "backend.h"
#include "core/platform.h"
#include "cpu/cpu_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* The variant CPU contexts run: the one POSENC_CPU_VARIANT forces, or the best. When it cannot
 * be honoured, the status and, in `why`, the reason, naming the variable and its value first
 * (the setting at fault, not the device). */
static posenc_status resolve_variant(posenc_cpu_variant *variant, bool *forced, char *why,
                                     size_t why_size)
{
    const char *name = posenc__env_get("POSENC_CPU_VARIANT");
    posenc_cpu_variant best = posenc_cpu_best_variant();
    *variant = best;
    *forced = name && *name;
    if (!*forced)
        return POSENC_OK;
    if (!posenc_cpu_variant_parse(name, variant)) {
        *variant = best;
        snprintf(why, why_size,
                 "POSENC_CPU_VARIANT=%s: unknown variant (expected portable, avx2, avx512, "
                 "avx512bf16 or neon)",
                 name);
        return POSENC_INVALID_ARGUMENT;
    }
    if (!posenc_cpu_kernels_for(*variant)) {
        bool compiled = posenc_cpu_variant_compiled(*variant);
        *variant = best;
        snprintf(why, why_size, "POSENC_CPU_VARIANT=%s: %s (the best this machine runs is %s)",
                 name, compiled ? "not supported by this CPU" : "not compiled into this build",
                 posenc_cpu_variant_name(best));
        return POSENC_UNSUPPORTED;
    }
    return POSENC_OK;
}

static posenc_status cpu_enumerate(posenc__device_list *list, const char **reason)
{
    posenc__device device = {0};
    posenc_device_info *info = &device.info;
    /* What a context would run, so that the description holds under POSENC_CPU_VARIANT. */
    posenc_cpu_variant variant;
    bool forced;
    char why[256];
    bool runs = resolve_variant(&variant, &forced, why, sizeof why) == POSENC_OK;
    info->type = POSENC_DEVICE_CPU;
    info->native_cpu = true;
    posenc__cpu_field("model name", "CPU", info->name, sizeof info->name);
    posenc__cpu_field("vendor_id", "unknown", info->vendor, sizeof info->vendor);
    if (runs)
        snprintf(info->driver, sizeof info->driver, "posenc native CPU path (%s%s)",
                 posenc_cpu_variant_name(variant), forced ? ", from POSENC_CPU_VARIANT" : "");
    else
        snprintf(info->driver, sizeof info->driver,
                 "posenc native CPU path (none: POSENC_CPU_VARIANT=%.40s cannot run here)",
                 posenc__env_get("POSENC_CPU_VARIANT"));
    info->memory_bytes = posenc__physical_memory();
    info->unified_memory = true;
    info->host_memory_import = true;
    info->fp16_storage = variant != POSENC_CPU_PORTABLE; /* F16C / NEON conversions */
    info->bf16 = variant == POSENC_CPU_AVX512BF16;
    info->fp64 = true;
    info->compute_units = posenc__cpu_count();
    info->max_workgroup_size = 1;
    /* The largest buffer is the machine's memory (unknown: no limit short of the address
     * space). */
    info->max_buffer_bytes = info->memory_bytes ? info->memory_bytes : (uint64_t)PTRDIFF_MAX;
    info->max_binding_bytes = info->max_buffer_bytes;
    if (posenc__device_list_append(list, &device) != POSENC_OK) {
        *reason = "out of host memory";
        return POSENC_OUT_OF_MEMORY;
    }
    return POSENC_OK;
}

/* The variant POSENC_CPU_VARIANT asks for, or the best one. */
static posenc_status choose_variant(posenc_context *ctx, posenc_cpu_variant *variant)
{
    bool forced;
    char why[256];
    posenc_status status = resolve_variant(variant, &forced, why, sizeof why);
    if (status != POSENC_OK)
        return posenc__fail(ctx, status, "%s", why);
    return POSENC_OK;
}

static void free_state(posenc_cpu_context *state)
{
    posenc_cpu_pool_destroy(state->pool);
    if (state->scratch) {
        for (uint32_t i = 0; i < state->parts; i++)
            posenc__aligned_free(state->scratch[i]);
        free(state->scratch);
    }
    posenc__aligned_free(state->steps);
    posenc__aligned_free(state->kept);
    free(state->fracs);
    free(state->int_turns);
    free(state);
}

static posenc_status cpu_context_init(posenc_context *ctx, const posenc__device *device)
{
    (void)device;
    uint32_t threads = ctx->num_threads ? ctx->num_threads : 1;
    if (threads > POSENC_CPU_MAX_THREADS)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                            "num_threads: %u is more than the %u the CPU backend supports",
                            threads, POSENC_CPU_MAX_THREADS);
    posenc_cpu_variant variant;
    posenc_status status = choose_variant(ctx, &variant);
    if (status != POSENC_OK)
        return status;
    posenc_cpu_context *state = calloc(1, sizeof *state);
    if (!state)
        return posenc__fail(ctx, POSENC_OUT_OF_MEMORY, "context: out of host memory");
    state->variant = variant;
    state->kernels = posenc_cpu_kernels_for(variant);

    status = posenc_cpu_pool_create(threads - 1, &state->pool);
    if (status != POSENC_OK) {
        free(state);
        return posenc__fail(ctx, status, "num_threads: cannot start %u worker threads",
                            threads - 1);
    }
    state->parts = posenc_cpu_pool_size(state->pool);
    state->scratch = calloc(state->parts, sizeof *state->scratch);
    if (!state->scratch) {
        free_state(state);
        return posenc__fail(ctx, POSENC_OUT_OF_MEMORY, "context: out of host memory");
    }
    ctx->backend_state = state;
    posenc__log(ctx, POSENC_LOG_DEBUG, "cpu: %s kernels, %u threads",
                posenc_cpu_variant_name(variant), state->parts);
    return POSENC_OK;
}

static void cpu_context_fini(posenc_context *ctx)
{
    if (ctx->backend_state)
        free_state(ctx->backend_state);
    ctx->backend_state = NULL;
}

const char *posenc_cpu_context_variant(const posenc_context *ctx)
{
    if (!ctx || ctx->backend->kind != POSENC_BACKEND_CPU || !ctx->backend_state)
        return NULL;
    const posenc_cpu_context *state = ctx->backend_state;
    return posenc_cpu_variant_name(state->variant);
}

posenc_status posenc_cpu_reserve_scratch(posenc_context *ctx, size_t floats)
{
    posenc_cpu_context *state = ctx->backend_state;
    if (floats <= state->scratch_floats)
        return POSENC_OK;
    floats = (floats + 15) & ~(size_t)15;
    size_t bytes = floats * sizeof(float);
    /* All or nothing: the old blocks stay valid until every new one exists. */
    float *grown[64];
    float **blocks = state->parts <= 64 ? grown : calloc(state->parts, sizeof *blocks);
    if (!blocks)
        return posenc__fail(ctx, POSENC_OUT_OF_MEMORY, "scratch: out of host memory");
    for (uint32_t i = 0; i < state->parts; i++) {
        blocks[i] = posenc__aligned_alloc(64, bytes);
        if (!blocks[i]) {
            for (uint32_t j = 0; j < i; j++)
                posenc__aligned_free(blocks[j]);
            if (blocks != grown)
                free(blocks);
            return posenc__fail(ctx, POSENC_OUT_OF_MEMORY,
                                "scratch: cannot allocate %zu bytes per thread", bytes);
        }
    }
    for (uint32_t i = 0; i < state->parts; i++) {
        posenc__aligned_free(state->scratch[i]);
        state->scratch[i] = blocks[i];
    }
    if (blocks != grown)
        free(blocks);
    state->scratch_floats = floats;
    return POSENC_OK;
}

uint32_t posenc_cpu_parts_for(const posenc_cpu_context *state, uint64_t bytes, uint64_t units)
{
    uint64_t parts = bytes / POSENC_CPU_MIN_BYTES_PER_PART;
    if (parts > state->parts)
        parts = state->parts;
    if (parts > units)
        parts = units;
    return parts ? (uint32_t)parts : 1;
}

static posenc_status cpu_buffer_init(posenc_context *ctx, posenc_buffer *buf)
{
    if (buf->host_memory) {
        buf->backend_state = buf->host_memory; /* used in place, never freed */
        return POSENC_OK;
    }
    if (buf->size > SIZE_MAX - 63)
        return posenc__fail(ctx, POSENC_OUT_OF_MEMORY, "size: %llu bytes cannot be allocated",
                            (unsigned long long)buf->size);
    void *memory = posenc__aligned_alloc(64, ((size_t)buf->size + 63) & ~(size_t)63);
    if (!memory)
        return posenc__fail(ctx, POSENC_OUT_OF_MEMORY, "size: cannot allocate %llu bytes",
                            (unsigned long long)buf->size);
    buf->backend_state = memory;
    buf->host_address = memory;
    return POSENC_OK;
}

static void cpu_buffer_fini(posenc_context *ctx, posenc_buffer *buf)
{
    (void)ctx;
    if (!buf->host_memory)
        posenc__aligned_free(buf->backend_state);
    buf->backend_state = NULL;
    buf->host_address = NULL;
}

static posenc_status cpu_buffer_upload(posenc_context *ctx, posenc_buffer *buf, uint64_t offset,
                                       const void *data, uint64_t size)
{
    (void)ctx;
    memmove((uint8_t *)buf->backend_state + offset, data, (size_t)size);
    return POSENC_OK;
}

static posenc_status cpu_buffer_download(posenc_context *ctx, posenc_buffer *buf,
                                         uint64_t offset, void *data, uint64_t size)
{
    (void)ctx;
    memmove(data, (const uint8_t *)buf->backend_state + offset, (size_t)size);
    return POSENC_OK;
}

static void *cpu_buffer_host_address(posenc_context *ctx, posenc_buffer *buf)
{
    (void)ctx;
    return buf->backend_state;
}

/* Buffers are host memory, and every operation has returned before the next call starts. */
static posenc_status cpu_buffer_map(posenc_context *ctx, posenc_buffer *buf, void **data)
{
    (void)ctx;
    *data = buf->backend_state;
    return POSENC_OK;
}

typedef struct copy_job {
    const posenc_cpu_kernels *kernels;
    float *data;
    size_t count;
    bool write_only;
} copy_job;

static void copy_part(void *arg, uint32_t part, uint32_t parts)
{
    const copy_job *job = arg;
    /* Whole 64-byte lines per part, so no two threads share one. */
    uint64_t first, end;
    posenc_cpu_part_range((job->count + 15) / 16, part, parts, &first, &end);
    size_t begin = (size_t)first * 16, stop = (size_t)end * 16;
    if (stop > job->count)
        stop = job->count;
    if (begin >= stop)
        return;
    if (job->write_only)
        job->kernels->fill(job->data + begin, stop - begin, 1.0f);
    else
        job->kernels->copy_in_place(job->data + begin, stop - begin);
}

/* The yardstick of `posenc bench`: the same threads, vector width and access pattern as the
 * operations (ordinary stores in place or write-only, no non-temporal stores, which glibc's
 * memcpy would switch to for large sizes and the operations never use). */
static posenc_status cpu_roofline(posenc_context *ctx, posenc_buffer *buf, uint64_t offset,
                                  uint64_t bytes, bool write_only)
{
    posenc_cpu_context *state = ctx->backend_state;
    copy_job job = {
        .kernels = state->kernels,
        .data = (float *)((uint8_t *)buf->backend_state + offset),
        .count = (size_t)(bytes / sizeof(float)),
        .write_only = write_only,
    };
    uint64_t traffic = write_only ? bytes : 2 * bytes;
    uint32_t parts = posenc_cpu_parts_for(state, traffic, bytes / 64 + 1);
    posenc_cpu_pool_run(state->pool, parts, traffic, copy_part, &job);
    return POSENC_OK;
}

bool posenc_cpu_position(const uint8_t *positions_base, const posenc__view *positions,
                         bool has_positions, bool per_batch, int32_t offset, int64_t batch,
                         int64_t row, int64_t *fixed)
{
    if (!has_positions) {
        *fixed = posenc__position_from_i32((int32_t)(offset + row));
        return true;
    }
    const uint8_t *p = posenc_cpu_element((uint8_t *)positions_base, positions, 0, 0,
                                          per_batch ? batch : 0, row);
    if (positions->dtype == POSENC_DTYPE_I32) {
        int32_t value;
        memcpy(&value, p, sizeof value);
        *fixed = posenc__position_from_i32(value);
        return true;
    }
    float value;
    memcpy(&value, p, sizeof value);
    return posenc__position_from_f32(value, fixed);
}

posenc_status posenc_cpu_split_freqs(posenc_context *ctx, const posenc__freq *freqs,
                                     uint32_t count, uint64_t freqs_id,
                                     posenc_cpu_freq_parts *parts)
{
    posenc_cpu_context *state = ctx->backend_state;
    if (!freqs_id || freqs_id != state->split_id || count != state->split_count) {
        if (count > state->split_capacity) {
            uint64_t *fracs = realloc(state->fracs, (size_t)count * sizeof *fracs);
            if (fracs)
                state->fracs = fracs;
            uint32_t *int_turns =
                fracs ? realloc(state->int_turns, (size_t)count * sizeof *int_turns) : NULL;
            if (!int_turns) /* realloc kept both arrays' contents: the split kept stays valid */
                return posenc__fail(ctx, POSENC_OUT_OF_MEMORY,
                                    "scratch: cannot allocate %u frequencies", count);
            state->int_turns = int_turns;
            state->split_capacity = count;
        }
        for (uint32_t j = 0; j < count; j++) {
            state->fracs[j] = freqs[j].frac;
            state->int_turns[j] = freqs[j].int_turns;
        }
        state->split_id = freqs_id;
        state->split_count = count;
    }
    *parts = (posenc_cpu_freq_parts){state->fracs, state->int_turns};
    return POSENC_OK;
}

void posenc_cpu_sincos_row(const posenc_cpu_kernels *kernels, const posenc_cpu_freq_parts *parts,
                           uint32_t count, int64_t position, bool valid, float sin_scale,
                           float cos_scale, uint32_t *turns_hi, float *sin_out, float *cos_out)
{
    if (!valid) {
        for (uint32_t j = 0; j < count; j++)
            sin_out[j] = cos_out[j] = NAN;
        return;
    }
    /* An integer position needs one multiply per frequency; a table's anchor rows spent a
     * fifth of their time on the angles with the scalar loop, and a table of float positions
     * most of it. */
    if ((position & 0xffffffff) == 0)
        kernels->turns_int((int32_t)(position / ((int64_t)1 << 32)), parts->fracs, count,
                           turns_hi);
    else
        kernels->turns_fixed(position, parts->fracs, parts->int_turns, count, turns_hi);
    kernels->sincos(turns_hi, count, sin_scale, cos_scale, sin_out, cos_out);
}

static posenc_status cpu_run(posenc_context *ctx, const posenc__op *op)
{
    return op->rope ? posenc_cpu_rope(ctx, op->rope) : posenc_cpu_sinusoidal(ctx, op->sinusoidal);
}

static const posenc__backend_diagnostics cpu_diagnostics = {
    .roofline = cpu_roofline,
    .rope_roofline = posenc_cpu_rope_roofline,
    .rope_conversion_floor = posenc_cpu_rope_conversion_floor,
    .sinusoidal_roofline = posenc_cpu_sinusoidal_roofline,
    .kernel_variant = posenc_cpu_context_variant,
};

const posenc__backend posenc_cpu_backend = {
    .kind = POSENC_BACKEND_CPU,
    .enumerate = cpu_enumerate,
    .context_init = cpu_context_init,
    .context_fini = cpu_context_fini,
    .buffer_init = cpu_buffer_init,
    .buffer_fini = cpu_buffer_fini,
    .buffer_upload = cpu_buffer_upload,
    .buffer_download = cpu_buffer_download,
    .buffer_host_address = cpu_buffer_host_address,
    .buffer_map = cpu_buffer_map,
    .run = cpu_run,
    .diagnostics = &cpu_diagnostics,
};
