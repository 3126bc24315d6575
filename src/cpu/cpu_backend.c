/* The native CPU backend: device description, contexts and host-memory buffers. The operations
 * are in cpu_rope.c and cpu_sinusoidal.c. */
#include "backend.h"
#include "core/platform.h"
#include "cpu/cpu_internal.h"

#include <math.h>
#include <stdlib.h>

static posenc_status cpu_enumerate(posenc__device_list *list, const char **reason)
{
    posenc__device device = {0};
    posenc_device_info *info = &device.info;
    info->type = POSENC_DEVICE_CPU;
    info->native_cpu = true;
    posenc__cpu_field("model name", "CPU", info->name, sizeof info->name);
    posenc__cpu_field("vendor_id", "unknown", info->vendor, sizeof info->vendor);
    posenc__copy_string(info->driver, sizeof info->driver, "posenc native CPU path");
    info->memory_bytes = posenc__physical_memory();
    info->unified_memory = true;
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

static posenc_status cpu_context_init(posenc_context *ctx, const posenc__device *device)
{
    (void)device;
    posenc_cpu_context *state = calloc(1, sizeof *state);
    if (!state)
        return posenc__fail(ctx, POSENC_OUT_OF_MEMORY, "context: out of host memory");
    ctx->backend_state = state;
    return POSENC_OK;
}

static void cpu_context_fini(posenc_context *ctx)
{
    posenc_cpu_context *state = ctx->backend_state;
    if (!state)
        return;
    free(state->sincos);
    free(state);
    ctx->backend_state = NULL;
}

float *posenc_cpu_scratch(posenc_context *ctx, size_t floats)
{
    posenc_cpu_context *state = ctx->backend_state;
    if (floats > state->sincos_capacity) {
        float *grown = realloc(state->sincos, floats * sizeof *grown);
        if (!grown) {
            posenc__fail(ctx, POSENC_OUT_OF_MEMORY, "scratch: cannot allocate %zu floats",
                         floats);
            return NULL;
        }
        state->sincos = grown;
        state->sincos_capacity = floats;
    }
    return state->sincos;
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
    return POSENC_OK;
}

static void cpu_buffer_fini(posenc_context *ctx, posenc_buffer *buf)
{
    (void)ctx;
    if (!buf->host_memory)
        posenc__aligned_free(buf->backend_state);
    buf->backend_state = NULL;
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

/* A loop with the operations' access pattern: glibc's memcpy switches to non-temporal stores
 * for large copies, which an in-place kernel never does, so it would be the wrong yardstick. */
static posenc_status cpu_roofline(posenc_context *ctx, posenc_buffer *buf, uint64_t offset,
                                  uint64_t bytes, bool write_only)
{
    (void)ctx;
    float *data = (float *)((uint8_t *)buf->backend_state + offset);
    size_t count = (size_t)(bytes / sizeof(float));
    if (write_only) {
        for (size_t i = 0; i < count; i++)
            data[i] = (float)i;
    } else {
        for (size_t i = 0; i < count; i++)
            data[i] = data[i] + 0.0f; /* not foldable away, unlike x * 1 */
    }
    return POSENC_OK;
}

bool posenc_cpu_position(posenc_context *ctx, const posenc__view *positions, bool has_positions,
                         bool per_batch, int32_t offset, int64_t batch, int64_t row,
                         int64_t *fixed)
{
    if (!has_positions) {
        *fixed = posenc__position_from_i32((int32_t)(offset + row));
        return true;
    }
    const uint8_t *p = posenc_cpu_element(posenc__view_host_base(ctx, positions), positions, 0, 0,
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

void posenc_cpu_sincos_row(const posenc__freq *freqs, uint32_t count, int64_t position,
                           bool valid, float *sincos)
{
    for (uint32_t j = 0; j < count; j++) {
        if (!valid) {
            sincos[2 * j] = sincos[2 * j + 1] = NAN;
            continue;
        }
        posenc__sincos_turns(posenc__turns(position, freqs[j]), &sincos[2 * j],
                             &sincos[2 * j + 1]);
    }
}

const posenc__backend posenc_cpu_backend = {
    .kind = POSENC_BACKEND_CPU,
    .name = "cpu",
    .enumerate = cpu_enumerate,
    .context_init = cpu_context_init,
    .context_fini = cpu_context_fini,
    .buffer_init = cpu_buffer_init,
    .buffer_fini = cpu_buffer_fini,
    .buffer_upload = cpu_buffer_upload,
    .buffer_download = cpu_buffer_download,
    .buffer_host_address = cpu_buffer_host_address,
    .rope = posenc_cpu_rope,
    .sinusoidal = posenc_cpu_sinusoidal,
    .roofline = cpu_roofline,
};
