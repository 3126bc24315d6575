/* SPDX-License-Identifier: MIT */
/* posenc inside an OpenCL engine, through posenc_opencl.h, on every OpenCL device present. The
 * test plays the engine: it creates the cl_context, queues and buffers itself, and checks
 * - that posenc retains the context, device, queue and wrapped cl_mem while it uses them and
 *   releases each exactly once (CL_*_REFERENCE_COUNT before and after), also on failure;
 * - the errors for handles that do not belong together, foreign buffers and bad wait lists;
 * - posenc_cl_enqueue_rope / _sinusoidal in f32, f16 and bf16 against the float64 reference,
 *   on engine buffers and sub-buffers;
 * - caller cos/sin tables enqueued: what the synchronous call writes, and a position outside
 *   them, written after the enqueue, leaving its token unwritten;
 * - the fused QK norm enqueued, weights in engine buffers: what the synchronous call writes;
 * - posenc_prepare: every program and table built before the first enqueue, which then builds
 *   nothing (posenc_context_stats), and a bad descriptor that builds nothing;
 * - the paged KV cache write (k_cache, slot_mapping, v, v_cache) enqueued after the caller's
 *   event and submitted, bit for bit what the synchronous call writes on host memory, in f32,
 *   f16 and bf16, with no byte written outside the slots' rows;
 * - that enqueued work waits for the caller's events (a user event holds it back, and the
 *   output stays untouched until it is set), and posenc's later work waits for it too;
 * - that posenc_buffer_destroy and posenc_context_destroy return only once posenc's work that
 *   a user event holds back is done;
 * - an out-of-order queue, where posenc orders its own commands, and where the caller's
 *   blocked command does not block posenc's synchronous calls (no clFinish on the queue);
 * - enqueues from 4 threads on one context, and from 2 while 2 others wrap, create and destroy
 *   buffers on it;
 * - a decode loop of 100,000 dynamic-NTK steps, each with a frequency table of its own
 *   (decode_steps.h): every step checked, device memory flat.
 * Skipped without an OpenCL device, unless POSENC_TEST_REQUIRE_DEVICES names opencl: then that
 * is a failure.
 */
#include <posenc/posenc_opencl.h>

#include "decode_steps.h"
#include "reference.h"
#include "required_devices.h"
#include "test_common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define CHECK_CL(expr)                                                                       \
    do {                                                                                     \
        cl_int check_cl_ = (expr);                                                           \
        if (check_cl_ != CL_SUCCESS) {                                                       \
            test_failures++;                                                                 \
            fprintf(stderr, "%s:%d: %s returned %d\n", __FILE__, __LINE__, #expr,            \
                    (int)check_cl_);                                                         \
        }                                                                                    \
    } while (0)

enum { HEAD_DIM = 32, HALF = HEAD_DIM / 2 };

/* ---- The engine's own objects ---------------------------------------------------------------- */

typedef struct engine {
    cl_device_id device;
    cl_context context;
    cl_command_queue queue;
} engine;

static bool engine_create(engine *e, cl_device_id device, cl_command_queue_properties properties)
{
    memset(e, 0, sizeof *e);
    e->device = device;
    cl_int err = CL_SUCCESS;
    e->context = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
    if (err != CL_SUCCESS)
        return false;
    e->queue = clCreateCommandQueue(e->context, device, properties, &err);
    if (err != CL_SUCCESS) {
        clReleaseContext(e->context);
        e->context = NULL;
        return false;
    }
    return true;
}

static void engine_destroy(engine *e)
{
    if (e->queue)
        clReleaseCommandQueue(e->queue);
    if (e->context)
        clReleaseContext(e->context);
    memset(e, 0, sizeof *e);
}

static posenc_context *context_on(const engine *e)
{
    posenc_context_desc desc = {
        .opencl = posenc_opencl_external_of(e->context, e->device, e->queue),
        .log = test_count_warnings,
    };
    posenc_context *ctx = NULL;
    posenc_status status = posenc_context_create(&desc, &ctx);
    if (status != POSENC_OK) {
        test_failures++;
        fprintf(stderr, "context on the engine's objects: %s: %s\n", posenc_status_name(status),
                posenc_thread_last_error());
    }
    return ctx;
}

static cl_mem device_buffer(const engine *e, size_t size, const void *data)
{
    cl_int err = CL_SUCCESS;
    cl_mem mem = clCreateBuffer(e->context, CL_MEM_READ_WRITE | (data ? CL_MEM_COPY_HOST_PTR : 0),
                                size, (void *)(uintptr_t)data, &err);
    CHECK_CL(err);
    return err == CL_SUCCESS ? mem : NULL;
}

/* Non-blocking, then a wait for this read alone: PoCL makes a blocking read wait for the whole
 * queue, which holds a command waiting for a user event in test_out_of_order. */
static void read_buffer(const engine *e, cl_mem mem, size_t offset, size_t size, void *out)
{
    cl_event read = NULL;
    CHECK_CL(clEnqueueReadBuffer(e->queue, mem, CL_FALSE, offset, size, out, 0, NULL, &read));
    if (read) {
        CHECK_CL(clWaitForEvents(1, &read));
        clReleaseEvent(read);
    }
}

static posenc_buffer *wrap(posenc_context *ctx, cl_mem mem)
{
    posenc_buffer *buffer = NULL;
    posenc_status status = posenc_cl_buffer_wrap(ctx, mem, &buffer);
    if (status != POSENC_OK) {
        test_failures++;
        fprintf(stderr, "posenc_cl_buffer_wrap: %s: %s\n", posenc_status_name(status),
                posenc_context_last_error(ctx));
    }
    return buffer;
}

static cl_uint context_references(cl_context context)
{
    cl_uint count = 0;
    CHECK_CL(clGetContextInfo(context, CL_CONTEXT_REFERENCE_COUNT, sizeof count, &count, NULL));
    return count;
}

static cl_uint queue_references(cl_command_queue queue)
{
    cl_uint count = 0;
    CHECK_CL(clGetCommandQueueInfo(queue, CL_QUEUE_REFERENCE_COUNT, sizeof count, &count, NULL));
    return count;
}

static cl_uint mem_references(cl_mem mem)
{
    cl_uint count = 0;
    CHECK_CL(clGetMemObjectInfo(mem, CL_MEM_REFERENCE_COUNT, sizeof count, &count, NULL));
    return count;
}

/* The runtime drops its own transient references (events of finished commands hold their
 * queue, their context and the buffers they used) from its worker threads, a moment after the
 * commands complete: a count expected to have fallen back is read until it settles at
 * `expected`, for up to a second. */
typedef enum counted { COUNTED_CONTEXT, COUNTED_QUEUE, COUNTED_MEM } counted;

static cl_uint references(counted kind, void *object)
{
    switch (kind) {
    case COUNTED_CONTEXT: return context_references(object);
    case COUNTED_QUEUE: return queue_references(object);
    case COUNTED_MEM: return mem_references(object);
    }
    return 0;
}

static cl_uint settled(counted kind, void *object, cl_uint expected)
{
    cl_uint count = references(kind, object);
    for (int i = 0; i < 200 && count != expected; i++) {
        posenc__sleep_seconds(5e-3);
        count = references(kind, object);
    }
    return count;
}

static cl_int execution_status(cl_event event)
{
    cl_int status = CL_COMPLETE;
    CHECK_CL(clGetEventInfo(event, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status,
                            NULL));
    return status;
}

static void sleep_ms(long ms) { posenc__sleep_seconds((double)ms * 1e-3); }

/* ---- Data and the float64 reference ---------------------------------------------------------- */

/* `count` values in [-2, 2] rounded to `dtype`, as floats and stored as `dtype` elements. */
static void fill(float *values, void *stored, size_t count, posenc_dtype dtype, uint64_t seed)
{
    test_rng rng = {seed};
    size_t element = posenc_dtype_size(dtype);
    for (size_t i = 0; i < count; i++) {
        values[i] = ref_round_to(dtype, (float)test_rng_uniform(&rng, -2.0, 2.0));
        if (stored)
            ref_store(dtype, (unsigned char *)stored + i * element, values[i]);
    }
}

/* Failures of a NeoX RoPE of `tokens` x `heads` x HEAD_DIM (packed) at positions[t] with
 * `theta`, judged by the accuracy promise (tests/reference.h: 8 * 2^-24 of the rotated pair,
 * plus one ulp of f16/bf16 outputs), widened by `extra_units` * 2^-24 of the pair for results
 * that went through earlier roundings (see the callers). */
static int rope_failures(const void *out, const float *in, posenc_dtype dtype, int tokens,
                         int heads, const int32_t *positions, double theta, double extra_units)
{
    posenc_rope_desc desc = {0};
    desc.theta = theta;
    double inv_freq[HALF];
    double af = ref_rope_frequencies(&desc, HEAD_DIM, inv_freq);
    ref_stats stats = {0};
    size_t element = posenc_dtype_size(dtype);
    int failures = 0;
    for (int t = 0; t < tokens; t++) {
        for (int h = 0; h < heads; h++) {
            size_t base = ((size_t)t * (size_t)heads + (size_t)h) * HEAD_DIM;
            double x[HEAD_DIM], expect[HEAD_DIM];
            for (int d = 0; d < HEAD_DIM; d++)
                x[d] = in[base + (size_t)d];
            ref_rope_head(x, expect, HEAD_DIM, HEAD_DIM, POSENC_ROPE_NEOX, inv_freq,
                          positions[t], af, false);
            for (int j = 0; j < HALF; j++) {
                double pair = hypot(x[j], x[j + HALF]);
                for (int d = j; d < HEAD_DIM; d += HALF) {
                    double got = ref_load(dtype, (const unsigned char *)out +
                                                     (base + (size_t)d) * element);
                    failures += !ref_check(&stats, dtype, got, expect[d], pair,
                                           extra_units * REF_UNIT * pair);
                }
            }
        }
    }
    if (failures)
        fprintf(stderr, "  rope %s: %d values off (worst %.3g of the tolerance)\n",
                posenc_dtype_name(dtype), failures, stats.max_ratio);
    return failures;
}

/* Failures of an interleaved sinusoidal table of `rows` x `d_model` at positions first + r. */
static int table_failures(const void *out, posenc_dtype dtype, int rows, int d_model,
                          double base, int32_t first)
{
    posenc_sinusoidal_desc desc = {0};
    desc.base = base;
    double freq[64], pe[128];
    ref_sinusoidal_frequencies(&desc, (uint32_t)d_model, freq);
    ref_stats stats = {0};
    size_t element = posenc_dtype_size(dtype);
    int failures = 0;
    for (int r = 0; r < rows; r++) {
        ref_sinusoidal_row(freq, (uint32_t)d_model, POSENC_SINUSOIDAL_INTERLEAVED,
                           (double)first + r, pe);
        for (int c = 0; c < d_model; c++) {
            double got = ref_load(dtype, (const unsigned char *)out +
                                             ((size_t)r * (size_t)d_model + (size_t)c) * element);
            failures += !ref_check(&stats, dtype, got, pe[c], 1.0, 0.0);
        }
    }
    if (failures)
        fprintf(stderr, "  sinusoidal %s: %d values off (worst %.3g of the tolerance)\n",
                posenc_dtype_name(dtype), failures, stats.max_ratio);
    return failures;
}

/* ---- Retain/release balance and the caller's device ------------------------------------------ */

static void test_references(cl_device_id device)
{
    engine e;
    if (!engine_create(&e, device, 0)) {
        CHECK(!"engine_create");
        return;
    }
    cl_mem mem = device_buffer(&e, 4096, NULL); /* it may hold the context itself */
    cl_uint mems = mem ? mem_references(mem) : 0;
    cl_uint contexts = context_references(e.context), queues = queue_references(e.queue);

    posenc_context *ctx = context_on(&e);
    if (ctx && mem) {
        CHECK(context_references(e.context) > contexts);
        CHECK(queue_references(e.queue) == queues + 1);

        posenc_device_info info;
        CHECK_OK(posenc_context_device(ctx, &info));
        char name[256] = "";
        CHECK_CL(clGetDeviceInfo(device, CL_DEVICE_NAME, sizeof name - 1, name, NULL));
        CHECK(info.backend == POSENC_BACKEND_OPENCL);
        CHECK(info.name[0] != '\0' && strstr(name, info.name) != NULL);

        posenc_buffer *buffer = wrap(ctx, mem);
        CHECK(mem_references(mem) == mems + 1);
        CHECK(posenc_buffer_size(buffer) == 4096);
        /* Work on the buffer, then its destruction: the reference goes back. */
        posenc_sinusoidal_desc table = {0};
        table.out = posenc_tensor_of_buffer(buffer, POSENC_DTYPE_F32, 2, (int64_t[]){16, 64});
        CHECK_OK(posenc_cl_enqueue_sinusoidal(ctx, &table, 0, NULL, NULL));
        posenc_buffer_destroy(buffer);
        CHECK_CL(clFinish(e.queue));
        CHECK(settled(COUNTED_MEM, mem, mems) == mems);

        /* A buffer still wrapped at context destruction is released with it. */
        buffer = wrap(ctx, mem);
        CHECK(mem_references(mem) == mems + 1);
    }
    posenc_context_destroy(ctx);
    CHECK(settled(COUNTED_CONTEXT, e.context, contexts) == contexts);
    if (mem) {
        CHECK(settled(COUNTED_MEM, mem, mems) == mems);
        /* Released before the queue is counted: the runtime may keep the event of the last
         * command that wrote a buffer (and with it the queue) while the buffer lives. */
        clReleaseMemObject(mem);
    }
    CHECK(settled(COUNTED_QUEUE, e.queue, queues) == queues);
    engine_destroy(&e);
}

/* ---- Errors ---------------------------------------------------------------------------------- */

static void expect_refused(const posenc_context_desc *desc, posenc_status expected,
                           const char *needle)
{
    posenc_context *const sentinel = (posenc_context *)(uintptr_t)0x5e5e5e50u;
    posenc_context *ctx = sentinel;
    CHECK_STATUS(posenc_context_create(desc, &ctx), expected);
    CHECK_MESSAGE(posenc_thread_last_error(), needle);
    CHECK(ctx == sentinel);
    if (ctx != sentinel)
        posenc_context_destroy(ctx);
}

static void test_mismatched_handles(cl_device_id device)
{
    engine a, b;
    if (!engine_create(&a, device, 0) || !engine_create(&b, device, 0)) {
        CHECK(!"engine_create");
        engine_destroy(&a);
        return;
    }
    cl_uint contexts = context_references(a.context), queues = queue_references(a.queue);
    cl_uint other_queues = queue_references(b.queue);

    posenc_context_desc desc = {.opencl = posenc_opencl_external_of(a.context, a.device, b.queue)};
    expect_refused(&desc, POSENC_INVALID_ARGUMENT, "opencl.queue: belongs to another cl_context");
    desc.opencl.queue = NULL;
    expect_refused(&desc, POSENC_INVALID_ARGUMENT, "opencl.queue: is NULL");
    desc.opencl = posenc_opencl_external_of(a.context, NULL, a.queue);
    expect_refused(&desc, POSENC_INVALID_ARGUMENT, "opencl.device: is NULL");
    desc.opencl = posenc_opencl_external_of(a.context, a.device, a.queue);
    desc.backend = POSENC_BACKEND_VULKAN;
    expect_refused(&desc, POSENC_INVALID_ARGUMENT, "backend");
    desc.backend = POSENC_BACKEND_AUTO;
    desc.device = "0";
    expect_refused(&desc, POSENC_INVALID_ARGUMENT, "device");

    /* A device that is not one of the context's: a sub-device, where the device can be split. */
    cl_device_partition_property split[] = {CL_DEVICE_PARTITION_EQUALLY, 1, 0};
    cl_uint parts = 0;
    if (clCreateSubDevices(device, split, 0, NULL, &parts) == CL_SUCCESS && parts > 0) {
        cl_device_id *subs = calloc(parts, sizeof *subs);
        if (subs && clCreateSubDevices(device, split, parts, subs, NULL) == CL_SUCCESS) {
            desc = (posenc_context_desc){
                .opencl = posenc_opencl_external_of(a.context, subs[0], a.queue)};
            expect_refused(&desc, POSENC_INVALID_ARGUMENT,
                           "opencl.device: is not one of the 1 device(s) of opencl.context");
            for (cl_uint i = 0; i < parts; i++)
                clReleaseDevice(subs[i]);
        }
        free(subs);
    } else {
        printf("    (the device cannot be split: a device outside the context is not checked)\n");
    }
    /* Nothing kept on failure. */
    CHECK(settled(COUNTED_CONTEXT, a.context, contexts) == contexts);
    CHECK(settled(COUNTED_QUEUE, a.queue, queues) == queues);
    CHECK(settled(COUNTED_QUEUE, b.queue, other_queues) == other_queues);

    posenc_context *ctx = context_on(&a);
    cl_mem foreign = device_buffer(&b, 256, NULL);
    if (ctx && foreign) {
        posenc_buffer *const untouched = (posenc_buffer *)(uintptr_t)0x5e5e5e50u;
        posenc_buffer *buffer = untouched;
        cl_uint mems = mem_references(foreign);
        CHECK_STATUS(posenc_cl_buffer_wrap(ctx, foreign, &buffer), POSENC_INVALID_ARGUMENT);
        CHECK_MESSAGE(posenc_context_last_error(ctx), "mem: belongs to another cl_context");
        CHECK(buffer == untouched && mem_references(foreign) == mems);
        CHECK_STATUS(posenc_cl_buffer_wrap(ctx, NULL, &buffer), POSENC_INVALID_ARGUMENT);
        CHECK_MESSAGE(posenc_context_last_error(ctx), "mem: is NULL");
        CHECK_STATUS(posenc_cl_buffer_wrap(NULL, foreign, &buffer), POSENC_INVALID_ARGUMENT);

        posenc_context_desc cpu_desc = {.backend = POSENC_BACKEND_CPU,
                                        .flags = POSENC_CONTEXT_IGNORE_ENV};
        posenc_context *cpu = NULL;
        CHECK_OK(posenc_context_create(&cpu_desc, &cpu));
        if (cpu) {
            CHECK_STATUS(posenc_cl_buffer_wrap(cpu, foreign, &buffer), POSENC_INVALID_ARGUMENT);
            CHECK_MESSAGE(posenc_context_last_error(cpu), "needs an OpenCL one");
            posenc_context_destroy(cpu);
        }
        CHECK(buffer == untouched);

        /* Enqueues refused before anything is enqueued: the event is not written, the memory
         * not touched. */
        float host[4][HEAD_DIM];
        for (int i = 0; i < 4 * HEAD_DIM; i++)
            host[i / HEAD_DIM][i % HEAD_DIM] = (float)i;
        cl_event const sentinel = (cl_event)(uintptr_t)0x5e5e5e50u;
        cl_event event = sentinel;
        posenc_rope_desc rope = {0};
        rope.q = posenc_tensor_of_host(host, POSENC_DTYPE_F32, 2, (int64_t[]){4, HEAD_DIM});
        CHECK_STATUS(posenc_cl_enqueue_rope(ctx, &rope, 0, NULL, &event),
                     POSENC_INVALID_ARGUMENT);
        CHECK_MESSAGE(posenc_context_last_error(ctx), "q.host");

        /* Host memory off CL_DEVICE_MEM_BASE_ADDR_ALIGN (at least 128 bytes by the spec) is
         * never imported, so enqueues refuse it; imported memory is test_host_import's. */
        unsigned char *spare = posenc__aligned_alloc(256, sizeof host + 256);
        CHECK(spare != NULL);
        if (spare)
            memcpy(spare + 4, host, sizeof host);
        posenc_buffer *wrapped_host = NULL;
        posenc_buffer_desc host_desc = {.size = sizeof host,
                                        .host_memory = spare ? spare + 4 : (void *)host};
        CHECK_OK(posenc_buffer_create(ctx, &host_desc, &wrapped_host));
        posenc_sinusoidal_desc table = {0};
        table.out = posenc_tensor_of_buffer(wrapped_host, POSENC_DTYPE_F32, 2,
                                            (int64_t[]){4, HEAD_DIM});
        CHECK_STATUS(posenc_cl_enqueue_sinusoidal(ctx, &table, 0, NULL, &event),
                     POSENC_UNSUPPORTED);
        CHECK_MESSAGE(posenc_context_last_error(ctx), "out.buffer: wraps host_memory");
        posenc_event *const no_event = (posenc_event *)(uintptr_t)0x5e5e5e50u;
        posenc_event *submitted = no_event;
        CHECK_STATUS(posenc_sinusoidal_submit(ctx, &table, &submitted), POSENC_UNSUPPORTED);
        CHECK_MESSAGE(posenc_context_last_error(ctx), "out.buffer: wraps host_memory");
        CHECK(submitted == no_event);
        CHECK(spare && memcmp(spare + 4, host, sizeof host) == 0);
        posenc_buffer_destroy(wrapped_host);
        posenc__aligned_free(spare);

        cl_mem mine = device_buffer(&a, sizeof host, host);
        posenc_buffer *buffer_a = mine ? wrap(ctx, mine) : NULL;
        rope.q = posenc_tensor_of_buffer(buffer_a, POSENC_DTYPE_F32, 2, (int64_t[]){4, HEAD_DIM});
        CHECK_STATUS(posenc_cl_enqueue_rope(ctx, &rope, 1, NULL, &event), POSENC_INVALID_ARGUMENT);
        CHECK_MESSAGE(posenc_context_last_error(ctx), "event_wait_list: is NULL");
        rope.rotary_dim = 3;
        CHECK_STATUS(posenc_cl_enqueue_rope(ctx, &rope, 0, NULL, &event), POSENC_INVALID_SHAPE);
        CHECK_MESSAGE(posenc_context_last_error(ctx), "rotary_dim");
        rope.rotary_dim = 0;

        /* Wait list entries that are NULL or of another context: refused by name before
         * anything is enqueued (runtimes do not all check them). */
        cl_int err = CL_SUCCESS;
        cl_event invalid[2] = {clCreateUserEvent(a.context, &err), NULL};
        CHECK_CL(err);
        CHECK_STATUS(posenc_cl_enqueue_rope(ctx, &rope, 2, invalid, &event),
                     POSENC_INVALID_ARGUMENT);
        CHECK_MESSAGE(posenc_context_last_error(ctx), "event_wait_list[1]: is not a usable");
        CHECK_MESSAGE(posenc_context_last_error(ctx), "CL_INVALID_EVENT");
        cl_event alien = clCreateUserEvent(b.context, &err);
        CHECK_CL(err);
        if (alien) {
            CHECK_STATUS(posenc_cl_enqueue_rope(ctx, &rope, 1, &alien, &event),
                         POSENC_INVALID_ARGUMENT);
            CHECK_MESSAGE(posenc_context_last_error(ctx),
                          "event_wait_list[0]: belongs to another cl_context");
            clSetUserEventStatus(alien, CL_COMPLETE);
            clReleaseEvent(alien);
        }
        if (invalid[0]) {
            clSetUserEventStatus(invalid[0], CL_COMPLETE);
            clReleaseEvent(invalid[0]);
        }
        CHECK(event == sentinel);
        float back[4][HEAD_DIM];
        if (mine) {
            read_buffer(&a, mine, 0, sizeof back, back);
            CHECK(memcmp(back, host, sizeof host) == 0);
        }
        /* The context still works. */
        CHECK_OK(posenc_cl_enqueue_rope(ctx, &rope, 0, NULL, &event));
        if (event != sentinel) {
            CHECK_CL(clWaitForEvents(1, &event));
            clReleaseEvent(event);
        }
        posenc_buffer_destroy(buffer_a);
        if (mine)
            clReleaseMemObject(mine);
    }
    if (foreign)
        clReleaseMemObject(foreign);
    posenc_context_destroy(ctx);
    engine_destroy(&b);
    engine_destroy(&a);
}

/* ---- Every dtype, on engine buffers and a sub-buffer ----------------------------------------- */

enum { TOKENS = 5, Q_HEADS = 4, K_HEADS = 2, ROWS = 9, D_MODEL = 24 };
static const int32_t positions[TOKENS] = {7, 123456, 2000000000, 0, 65535};

static void test_dtypes(cl_device_id device)
{
    engine e;
    if (!engine_create(&e, device, 0)) {
        CHECK(!"engine_create");
        return;
    }
    posenc_context *ctx = context_on(&e);
    cl_uint align_bits = 0;
    CHECK_CL(clGetDeviceInfo(device, CL_DEVICE_MEM_BASE_ADDR_ALIGN, sizeof align_bits,
                             &align_bits, NULL));
    size_t align = align_bits >= 8 ? align_bits / 8 : 128;
    const posenc_dtype dtypes[] = {POSENC_DTYPE_F32, POSENC_DTYPE_F16, POSENC_DTYPE_BF16};
    for (size_t d = 0; d < 3 && ctx; d++) {
        posenc_dtype dtype = dtypes[d];
        size_t element = posenc_dtype_size(dtype);
        size_t q_count = (size_t)TOKENS * Q_HEADS * HEAD_DIM;
        size_t k_count = (size_t)TOKENS * K_HEADS * HEAD_DIM;
        /* One engine allocation: q at 0, k in a sub-buffer at the next aligned offset. */
        size_t k_origin = (q_count * element + align - 1) / align * align;
        size_t total = k_origin + k_count * element;
        float q_in[TOKENS * Q_HEADS * HEAD_DIM], k_in[TOKENS * K_HEADS * HEAD_DIM];
        unsigned char *bytes = calloc(1, total);
        unsigned char *back = calloc(1, total);
        if (!bytes || !back) {
            CHECK(!"out of memory");
            free(bytes);
            free(back);
            break;
        }
        fill(q_in, bytes, q_count, dtype, 100 + d);
        fill(k_in, bytes + k_origin, k_count, dtype, 200 + d);
        cl_mem whole = device_buffer(&e, total, bytes);
        cl_buffer_region region = {k_origin, k_count * element};
        cl_int err = CL_SUCCESS;
        cl_mem k_sub = whole ? clCreateSubBuffer(whole, CL_MEM_READ_WRITE,
                                                 CL_BUFFER_CREATE_TYPE_REGION, &region, &err)
                             : NULL;
        CHECK_CL(err);
        cl_mem positions_mem = device_buffer(&e, sizeof positions, positions);
        size_t table_bytes = (size_t)ROWS * D_MODEL * element;
        cl_mem table_mem = device_buffer(&e, table_bytes, NULL);
        posenc_buffer *q = whole ? wrap(ctx, whole) : NULL;
        posenc_buffer *k = k_sub ? wrap(ctx, k_sub) : NULL;
        posenc_buffer *p = positions_mem ? wrap(ctx, positions_mem) : NULL;
        posenc_buffer *table = table_mem ? wrap(ctx, table_mem) : NULL;
        if (q && k && p && table) {
            posenc_rope_desc rope = {0};
            rope.q = posenc_tensor_of_buffer(q, dtype, 3, (int64_t[]){TOKENS, Q_HEADS, HEAD_DIM});
            rope.k = posenc_tensor_of_buffer(k, dtype, 3, (int64_t[]){TOKENS, K_HEADS, HEAD_DIM});
            rope.positions = posenc_tensor_of_buffer(p, POSENC_DTYPE_I32, 1,
                                                     (int64_t[]){TOKENS});
            rope.theta = 500000.0;
            cl_event rotated = NULL;
            CHECK_OK(posenc_cl_enqueue_rope(ctx, &rope, 0, NULL, &rotated));

            posenc_sinusoidal_desc sinusoidal = {0};
            sinusoidal.out = posenc_tensor_of_buffer(table, dtype, 2,
                                                     (int64_t[]){ROWS, D_MODEL});
            sinusoidal.position_offset = 1000;
            CHECK_OK(posenc_cl_enqueue_sinusoidal(ctx, &sinusoidal, 0, NULL, NULL));
            if (rotated) {
                CHECK_CL(clWaitForEvents(1, &rotated));
                CHECK(execution_status(rotated) == CL_COMPLETE);
                clReleaseEvent(rotated);
            }
            CHECK_CL(clFinish(e.queue)); /* the engine's own wait for the event it did not take */
            read_buffer(&e, whole, 0, total, back);
            CHECK(rope_failures(back, q_in, dtype, TOKENS, Q_HEADS, positions, 500000.0, 0) == 0);
            CHECK(rope_failures(back + k_origin, k_in, dtype, TOKENS, K_HEADS, positions,
                                500000.0, 0) == 0);
            read_buffer(&e, table_mem, 0, table_bytes, back);
            CHECK(table_failures(back, dtype, ROWS, D_MODEL, 10000.0, 1000) == 0);
        }
        posenc_buffer_destroy(q);
        posenc_buffer_destroy(k);
        posenc_buffer_destroy(p);
        posenc_buffer_destroy(table);
        cl_mem mems[] = {k_sub, whole, positions_mem, table_mem};
        for (int i = 0; i < 4; i++) {
            if (mems[i])
                clReleaseMemObject(mems[i]);
        }
        free(bytes);
        free(back);
    }
    posenc_context_destroy(ctx);
    engine_destroy(&e);
}

/* ---- Caller cos/sin tables ------------------------------------------------------------------- */

/* Enqueued with caller cos/sin tables: byte for byte what the synchronous call writes, but for
 * a token whose position, written by a command that runs after the enqueue (held back by a
 * user event), lies outside the tables: left unwritten, in q_out and in k rotated in place. */
static void test_tables_enqueued(cl_device_id device)
{
    enum { TABLE_ROWS = 8, OUTSIDE_TOKEN = 3 };
    engine e;
    if (!engine_create(&e, device, 0)) {
        CHECK(!"engine_create");
        return;
    }
    posenc_context *ctx = context_on(&e);
    float q_in[TOKENS * Q_HEADS * HEAD_DIM], k_in[TOKENS * K_HEADS * HEAD_DIM];
    float tables[2 * TABLE_ROWS * HALF], nan_fill[TOKENS * Q_HEADS * HEAD_DIM]; /* cos, sin */
    float want_q[TOKENS * Q_HEADS * HEAD_DIM], want_k[TOKENS * K_HEADS * HEAD_DIM];
    float got_q[TOKENS * Q_HEADS * HEAD_DIM], got_k[TOKENS * K_HEADS * HEAD_DIM];
    int32_t table_positions[TOKENS], outside = TABLE_ROWS;
    fill(q_in, q_in, sizeof q_in / 4, POSENC_DTYPE_F32, 300);
    fill(k_in, k_in, sizeof k_in / 4, POSENC_DTYPE_F32, 301);
    fill(tables, tables, 2 * TABLE_ROWS * HALF, POSENC_DTYPE_F32, 302);
    memset(nan_fill, 0xff, sizeof nan_fill);
    for (int t = 0; t < TOKENS; t++)
        table_positions[t] = t * 3 % TABLE_ROWS;
    cl_mem mems[6] = {device_buffer(&e, sizeof q_in, q_in), device_buffer(&e, sizeof q_in, NULL),
                      device_buffer(&e, sizeof k_in, k_in),
                      device_buffer(&e, sizeof table_positions, table_positions),
                      device_buffer(&e, sizeof tables / 2, tables),
                      device_buffer(&e, sizeof tables / 2, tables + TABLE_ROWS * HALF)};
    posenc_buffer *b[6] = {NULL};
    bool ready = ctx != NULL;
    for (int i = 0; i < 6 && ready; i++)
        ready = mems[i] && (b[i] = wrap(ctx, mems[i])) != NULL;
    if (ready) {
        posenc_rope_desc rope = {0};
        rope.q = posenc_tensor_of_buffer(b[0], POSENC_DTYPE_F32, 3,
                                         (int64_t[]){TOKENS, Q_HEADS, HEAD_DIM});
        rope.q_out = posenc_tensor_of_buffer(b[1], POSENC_DTYPE_F32, 3,
                                             (int64_t[]){TOKENS, Q_HEADS, HEAD_DIM});
        rope.k = posenc_tensor_of_buffer(b[2], POSENC_DTYPE_F32, 3,
                                         (int64_t[]){TOKENS, K_HEADS, HEAD_DIM});
        rope.positions = posenc_tensor_of_buffer(b[3], POSENC_DTYPE_I32, 1, (int64_t[]){TOKENS});
        rope.cos = posenc_tensor_of_buffer(b[4], POSENC_DTYPE_F32, 2,
                                           (int64_t[]){TABLE_ROWS, HALF});
        rope.sin = posenc_tensor_of_buffer(b[5], POSENC_DTYPE_F32, 2,
                                           (int64_t[]){TABLE_ROWS, HALF});
        CHECK_OK(posenc_rope(ctx, &rope));
        read_buffer(&e, mems[1], 0, sizeof want_q, want_q);
        read_buffer(&e, mems[2], 0, sizeof want_k, want_k);
        CHECK_CL(clEnqueueWriteBuffer(e.queue, mems[1], CL_TRUE, 0, sizeof nan_fill, nan_fill, 0,
                                      NULL, NULL));
        CHECK_CL(clEnqueueWriteBuffer(e.queue, mems[2], CL_TRUE, 0, sizeof k_in, k_in, 0, NULL,
                                      NULL));
        cl_int err = CL_SUCCESS;
        cl_event gate = clCreateUserEvent(e.context, &err), written = NULL, rotated = NULL;
        CHECK_CL(err);
        CHECK_CL(clEnqueueWriteBuffer(e.queue, mems[3], CL_FALSE, OUTSIDE_TOKEN * 4, 4, &outside,
                                      1, &gate, &written));
        CHECK_OK(posenc_cl_enqueue_rope(ctx, &rope, 1, &written, &rotated));
        CHECK_CL(clSetUserEventStatus(gate, CL_COMPLETE));
        CHECK_CL(clFinish(e.queue));
        read_buffer(&e, mems[1], 0, sizeof got_q, got_q);
        read_buffer(&e, mems[2], 0, sizeof got_k, got_k);
        for (int t = 0; t < TOKENS; t++) {
            size_t q_at = (size_t)t * Q_HEADS * HEAD_DIM, k_at = (size_t)t * K_HEADS * HEAD_DIM;
            bool out = t == OUTSIDE_TOKEN;
            CHECK(memcmp(got_q + q_at, (out ? nan_fill : want_q) + q_at,
                         Q_HEADS * HEAD_DIM * 4) == 0);
            CHECK(memcmp(got_k + k_at, (out ? k_in : want_k) + k_at, K_HEADS * HEAD_DIM * 4) == 0);
        }
        cl_event events[3] = {gate, written, rotated};
        for (int i = 0; i < 3; i++) {
            if (events[i])
                clReleaseEvent(events[i]);
        }
    }
    for (int i = 0; i < 6; i++) {
        posenc_buffer_destroy(b[i]);
        if (mems[i])
            clReleaseMemObject(mems[i]);
    }
    posenc_context_destroy(ctx);
    engine_destroy(&e);
}

/* ---- The fused QK norm ------------------------------------------------------------------------ */

/* Enqueued with the QK norm, q's weights per head in bf16 and k's over the token's whole k in
 * f32 (OLMo 2's form), k rotated in place: byte for byte what the synchronous call writes. */
static void test_norm_enqueued(cl_device_id device)
{
    engine e;
    if (!engine_create(&e, device, 0)) {
        CHECK(!"engine_create");
        return;
    }
    posenc_context *ctx = context_on(&e);
    float q_in[TOKENS * Q_HEADS * HEAD_DIM], k_in[TOKENS * K_HEADS * HEAD_DIM];
    float k_weights[K_HEADS * HEAD_DIM], nan_fill[TOKENS * Q_HEADS * HEAD_DIM];
    float q_weight_values[HEAD_DIM];
    uint16_t q_weights[HEAD_DIM];
    float want_q[TOKENS * Q_HEADS * HEAD_DIM], want_k[TOKENS * K_HEADS * HEAD_DIM];
    float got_q[TOKENS * Q_HEADS * HEAD_DIM], got_k[TOKENS * K_HEADS * HEAD_DIM];
    fill(q_in, q_in, sizeof q_in / 4, POSENC_DTYPE_F32, 310);
    fill(k_in, k_in, sizeof k_in / 4, POSENC_DTYPE_F32, 311);
    fill(k_weights, k_weights, K_HEADS * HEAD_DIM, POSENC_DTYPE_F32, 312);
    fill(q_weight_values, q_weights, HEAD_DIM, POSENC_DTYPE_BF16, 313);
    memset(nan_fill, 0xff, sizeof nan_fill);
    cl_mem mems[5] = {device_buffer(&e, sizeof q_in, q_in), device_buffer(&e, sizeof q_in, NULL),
                      device_buffer(&e, sizeof k_in, k_in),
                      device_buffer(&e, sizeof q_weights, q_weights),
                      device_buffer(&e, sizeof k_weights, k_weights)};
    posenc_buffer *b[5] = {NULL};
    bool ready = ctx != NULL;
    for (int i = 0; i < 5 && ready; i++)
        ready = mems[i] && (b[i] = wrap(ctx, mems[i])) != NULL;
    if (ready) {
        posenc_rope_desc rope = {0};
        rope.q = posenc_tensor_of_buffer(b[0], POSENC_DTYPE_F32, 3,
                                         (int64_t[]){TOKENS, Q_HEADS, HEAD_DIM});
        rope.q_out = posenc_tensor_of_buffer(b[1], POSENC_DTYPE_F32, 3,
                                             (int64_t[]){TOKENS, Q_HEADS, HEAD_DIM});
        rope.k = posenc_tensor_of_buffer(b[2], POSENC_DTYPE_F32, 3,
                                         (int64_t[]){TOKENS, K_HEADS, HEAD_DIM});
        rope.position_offset = 40;
        rope.q_norm_weight =
            posenc_tensor_of_buffer(b[3], POSENC_DTYPE_BF16, 1, (int64_t[]){HEAD_DIM});
        rope.k_norm_weight =
            posenc_tensor_of_buffer(b[4], POSENC_DTYPE_F32, 1, (int64_t[]){K_HEADS * HEAD_DIM});
        rope.norm_eps = 1e-5;
        CHECK_OK(posenc_rope(ctx, &rope));
        read_buffer(&e, mems[1], 0, sizeof want_q, want_q);
        read_buffer(&e, mems[2], 0, sizeof want_k, want_k);
        CHECK_CL(clEnqueueWriteBuffer(e.queue, mems[1], CL_TRUE, 0, sizeof nan_fill, nan_fill, 0,
                                      NULL, NULL));
        CHECK_CL(clEnqueueWriteBuffer(e.queue, mems[2], CL_TRUE, 0, sizeof k_in, k_in, 0, NULL,
                                      NULL));
        cl_event rotated = NULL;
        CHECK_OK(posenc_cl_enqueue_rope(ctx, &rope, 0, NULL, &rotated));
        CHECK_CL(clFinish(e.queue));
        read_buffer(&e, mems[1], 0, sizeof got_q, got_q);
        read_buffer(&e, mems[2], 0, sizeof got_k, got_k);
        CHECK(memcmp(got_q, want_q, sizeof got_q) == 0);
        CHECK(memcmp(got_k, want_k, sizeof got_k) == 0);
        CHECK(memcmp(got_k, k_in, sizeof got_k) != 0); /* normalized and rotated */
        if (rotated)
            clReleaseEvent(rotated);
    }
    for (int i = 0; i < 5; i++) {
        posenc_buffer_destroy(b[i]);
        if (mems[i])
            clReleaseMemObject(mems[i]);
    }
    posenc_context_destroy(ctx);
    engine_destroy(&e);
}

/* ---- Warm-up: posenc_prepare ----------------------------------------------------------------- */

static posenc_stats stats_of(posenc_context *ctx)
{
    posenc_stats stats;
    memset(&stats, 0, sizeof stats);
    CHECK_OK(posenc_context_stats(ctx, &stats));
    return stats;
}

/* posenc_prepare builds (or loads from the kernel cache) every program and table the enqueues
 * use: the enqueues then build and load nothing (posenc_context_stats), and their results match
 * the reference. A bad descriptor anywhere builds nothing. */
static void test_prepare(cl_device_id device)
{
    engine e;
    if (!engine_create(&e, device, 0)) {
        CHECK(!"engine_create");
        return;
    }
    posenc_context *ctx = context_on(&e);
    const posenc_dtype dtypes[2] = {POSENC_DTYPE_F32, POSENC_DTYPE_F16};
    enum { Q_COUNT = TOKENS * Q_HEADS * HEAD_DIM };
    float q_in[2][Q_COUNT];
    unsigned char stored[2][Q_COUNT * 4], back[Q_COUNT * 4];
    cl_mem mems[4] = {NULL, NULL, NULL, NULL};
    posenc_buffer *buffers[4] = {NULL, NULL, NULL, NULL};
    for (int d = 0; d < 2; d++) {
        fill(q_in[d], stored[d], Q_COUNT, dtypes[d], 400 + (uint64_t)d);
        mems[d] = device_buffer(&e, Q_COUNT * posenc_dtype_size(dtypes[d]), stored[d]);
    }
    mems[2] = device_buffer(&e, sizeof positions, positions);
    mems[3] = device_buffer(&e, (size_t)ROWS * D_MODEL * 4, NULL);
    bool ready = ctx != NULL;
    for (int i = 0; i < 4 && ready; i++)
        ready = mems[i] && (buffers[i] = wrap(ctx, mems[i])) != NULL;
    if (ready) {
        posenc_rope_desc rope[2];
        for (int d = 0; d < 2; d++) {
            rope[d] = (posenc_rope_desc){
                .q = posenc_tensor_of_buffer(buffers[d], dtypes[d], 3,
                                             (int64_t[]){TOKENS, Q_HEADS, HEAD_DIM}),
                .positions = posenc_tensor_of_buffer(buffers[2], POSENC_DTYPE_I32, 1,
                                                     (int64_t[]){TOKENS}),
                .theta = 500000.0,
            };
        }
        posenc_sinusoidal_desc sinusoidal = {
            .out = posenc_tensor_of_buffer(buffers[3], POSENC_DTYPE_F32, 2,
                                           (int64_t[]){ROWS, D_MODEL}),
            .position_offset = 1000,
        };
        posenc_prepare_desc desc = {.rope = rope, .rope_count = 2, .sinusoidal = &sinusoidal,
                                    .sinusoidal_count = 1};
        sinusoidal.position_offset = INT32_MAX;
        CHECK_STATUS(posenc_prepare(ctx, &desc), POSENC_INVALID_ARGUMENT);
        CHECK_MESSAGE(posenc_context_last_error(ctx), "sinusoidal[0].position_offset");
        sinusoidal.position_offset = 1000;
        rope[1].k = rope[0].q; /* another dtype than q's */
        CHECK_STATUS(posenc_prepare(ctx, &desc), POSENC_INVALID_DTYPE);
        CHECK_MESSAGE(posenc_context_last_error(ctx), "rope[1].k.dtype");
        rope[1].k = (posenc_tensor){0};
        posenc_stats s = stats_of(ctx);
        CHECK(s.kernels_built + s.kernels_loaded == 0 && s.freq_tables == 0);

        double start = posenc__seconds_now();
        CHECK_OK(posenc_prepare(ctx, &desc));
        double prepare_seconds = posenc__seconds_now() - start;
        posenc_stats prepared = stats_of(ctx);
        CHECK(prepared.kernels_built + prepared.kernels_loaded == 3);
        CHECK(prepared.freq_tables == 2 && prepared.rope_calls == 0);

        start = posenc__seconds_now();
        CHECK_OK(posenc_cl_enqueue_rope(ctx, &rope[0], 0, NULL, NULL));
        double first_seconds = posenc__seconds_now() - start;
        CHECK_OK(posenc_cl_enqueue_rope(ctx, &rope[1], 0, NULL, NULL));
        CHECK_OK(posenc_cl_enqueue_sinusoidal(ctx, &sinusoidal, 0, NULL, NULL));
        s = stats_of(ctx);
        CHECK(s.kernels_built == prepared.kernels_built);
        CHECK(s.kernels_loaded == prepared.kernels_loaded);
        CHECK(s.freq_tables == prepared.freq_tables && s.table_bytes == prepared.table_bytes);
        CHECK(s.rope_calls == 2 && s.sinusoidal_calls == 1);
        printf("  prepare %.3f ms, then the first enqueue %.1f us\n", prepare_seconds * 1e3,
               first_seconds * 1e6);
        CHECK_OK(posenc_context_finish(ctx));
        for (int d = 0; d < 2; d++) {
            read_buffer(&e, mems[d], 0, Q_COUNT * posenc_dtype_size(dtypes[d]), back);
            CHECK(rope_failures(back, q_in[d], dtypes[d], TOKENS, Q_HEADS, positions, 500000.0,
                                0) == 0);
        }
        read_buffer(&e, mems[3], 0, (size_t)ROWS * D_MODEL * 4, back);
        CHECK(table_failures(back, POSENC_DTYPE_F32, ROWS, D_MODEL, 10000.0, 1000) == 0);
    }
    for (int i = 0; i < 4; i++) {
        posenc_buffer_destroy(buffers[i]);
        if (mems[i])
            clReleaseMemObject(mems[i]);
    }
    posenc_context_destroy(ctx);
    engine_destroy(&e);
}

/* ---- The paged KV cache on the caller's queue ------------------------------------------------ */

/* Blocks of the caches, and guard bytes around each cache in their one engine allocation: no
 * slot may write there. */
enum { BLOCKS = 3, BLOCK_SIZE = 4, CACHE_SLOTS = BLOCKS * BLOCK_SIZE, GUARD = 64 };
#define CACHE_FILL 0xa5
/* Per mode: slots past the end (12, INT32_MAX) and negative ones write nothing. */
static const int32_t kv_slots[2][TOKENS] = {{9, -1, 12, 0, 5}, {INT32_MAX, 3, 11, -1, 6}};

/* Element index of (slot, head, dim) in k_cache (HND: [blocks, heads, block_size, dim]) and
 * v_cache (NHD, packed). */
static size_t k_cache_at(int32_t slot, int h, int d)
{
    size_t block = (size_t)slot / BLOCK_SIZE, row = (size_t)slot % BLOCK_SIZE;
    return ((block * K_HEADS + (size_t)h) * BLOCK_SIZE + row) * HEAD_DIM + (size_t)d;
}

static size_t v_cache_at(int32_t slot, int h, int d)
{
    return ((size_t)slot * K_HEADS + (size_t)h) * HEAD_DIM + (size_t)d;
}

/* Where one path of the call finds its memory: posenc buffers or host memory (NULL buffers). */
typedef struct kv_memory {
    posenc_buffer *q, *k, *v, *slots, *positions, *caches;
    void *q_host, *k_host, *v_host, *caches_host;
} kv_memory;

static posenc_tensor kv_tensor(posenc_buffer *buffer, void *host, posenc_dtype dtype,
                               uint32_t ndim, const int64_t *shape)
{
    return buffer ? posenc_tensor_of_buffer(buffer, dtype, ndim, shape)
                  : posenc_tensor_of_host(host, dtype, ndim, shape);
}

/* q rotated in place; k only read (mode 0) or rotated in place (mode 1) and into k_cache; v
 * copied into v_cache. */
static posenc_rope_desc kv_desc(const kv_memory *m, posenc_dtype dtype, int mode)
{
    int64_t e = (int64_t)posenc_dtype_size(dtype);
    const int64_t k_shape[3] = {TOKENS, K_HEADS, HEAD_DIM};
    const int64_t cache_shape[4] = {BLOCKS, BLOCK_SIZE, K_HEADS, HEAD_DIM};
    void *slots_host = (void *)(uintptr_t)kv_slots[mode];
    void *positions_host = (void *)(uintptr_t)positions;
    posenc_rope_desc desc = {
        .q = kv_tensor(m->q, m->q_host, dtype, 3, (int64_t[]){TOKENS, Q_HEADS, HEAD_DIM}),
        .k = kv_tensor(m->k, m->k_host, dtype, 3, k_shape),
        .positions = kv_tensor(m->positions, positions_host, POSENC_DTYPE_I32, 1,
                               (int64_t[]){TOKENS}),
        .theta = 10000.0,
        .slot_mapping = kv_tensor(m->slots, slots_host, POSENC_DTYPE_I32, 1,
                                  (int64_t[]){TOKENS}),
        .k_cache = kv_tensor(m->caches, m->caches_host, dtype, 4, cache_shape),
        .v = kv_tensor(m->v, m->v_host, dtype, 3, k_shape),
        .v_cache = kv_tensor(m->caches, m->caches_host, dtype, 4, cache_shape),
    };
    if (mode == 1)
        desc.k_out = desc.k;
    size_t cache_bytes = (size_t)CACHE_SLOTS * K_HEADS * HEAD_DIM * (size_t)e;
    desc.k_cache.offset = GUARD;
    const int64_t hnd[4] = {K_HEADS * BLOCK_SIZE * HEAD_DIM * e, HEAD_DIM * e,
                            BLOCK_SIZE * HEAD_DIM * e, e};
    memcpy(desc.k_cache.strides, hnd, sizeof hnd);
    desc.v_cache.offset = 2 * GUARD + cache_bytes;
    return desc;
}

/* One dtype and mode through the three paths: a synchronous call on host memory, an enqueue on
 * the caller's queue after the caller's own write of the caches, and a submit; each path's q,
 * k and whole cache allocation (guards included) bit for bit alike. The synchronous result is
 * checked against the float64 reference, v, the guards and the rows without a slot. */
static void kv_case(const engine *e, posenc_context *ctx, posenc_dtype dtype, int mode)
{
    size_t element = posenc_dtype_size(dtype);
    size_t q_bytes = (size_t)TOKENS * Q_HEADS * HEAD_DIM * element;
    size_t k_count = (size_t)TOKENS * K_HEADS * HEAD_DIM, k_bytes = k_count * element;
    size_t cache_bytes = (size_t)CACHE_SLOTS * K_HEADS * HEAD_DIM * element;
    size_t caches_bytes = 3 * GUARD + 2 * cache_bytes;
    float q_in[TOKENS * Q_HEADS * HEAD_DIM], k_in[TOKENS * K_HEADS * HEAD_DIM];
    float v_in[TOKENS * K_HEADS * HEAD_DIM];
    unsigned char q_stored[TOKENS * Q_HEADS * HEAD_DIM * 4];
    unsigned char k_stored[TOKENS * K_HEADS * HEAD_DIM * 4];
    unsigned char v_stored[TOKENS * K_HEADS * HEAD_DIM * 4];
    fill(q_in, q_stored, sizeof q_in / sizeof q_in[0], dtype, 600 + (uint64_t)mode);
    fill(k_in, k_stored, k_count, dtype, 700 + (uint64_t)mode);
    fill(v_in, v_stored, k_count, dtype, 800 + (uint64_t)mode);

    /* Each path's results: q, k, then the caches' allocation. */
    size_t result_bytes = q_bytes + k_bytes + caches_bytes;
    unsigned char *results[3] = {calloc(1, result_bytes), calloc(1, result_bytes),
                                 calloc(1, result_bytes)};
    unsigned char *fill_bytes = malloc(caches_bytes);
    cl_mem mems[6] = {device_buffer(e, q_bytes, q_stored), device_buffer(e, k_bytes, k_stored),
                      device_buffer(e, k_bytes, v_stored),
                      device_buffer(e, sizeof kv_slots[mode], kv_slots[mode]),
                      device_buffer(e, sizeof positions, positions),
                      device_buffer(e, caches_bytes, NULL)};
    posenc_buffer *wrapped[6] = {NULL};
    bool ready = results[0] && results[1] && results[2] && fill_bytes;
    for (int i = 0; i < 6 && ready; i++)
        ready = mems[i] && (wrapped[i] = wrap(ctx, mems[i])) != NULL;
    CHECK(ready);
    if (ready) {
        memset(fill_bytes, CACHE_FILL, caches_bytes);
        kv_memory device = {.q = wrapped[0], .k = wrapped[1], .v = wrapped[2],
                            .slots = wrapped[3], .positions = wrapped[4], .caches = wrapped[5]};
        posenc_rope_desc device_desc = kv_desc(&device, dtype, mode);

        /* posenc_prepare builds what the enqueue runs: it then builds nothing. */
        posenc_prepare_desc prepare = {.rope = &device_desc, .rope_count = 1};
        CHECK_OK(posenc_prepare(ctx, &prepare));
        posenc_stats prepared = stats_of(ctx);

        /* The enqueue waits for the caller's non-blocking write of the caches. */
        cl_event filled = NULL, rotated = NULL;
        CHECK_CL(clEnqueueWriteBuffer(e->queue, mems[5], CL_FALSE, 0, caches_bytes, fill_bytes,
                                      0, NULL, &filled));
        CHECK_OK(posenc_cl_enqueue_rope(ctx, &device_desc, 1, &filled, &rotated));
        posenc_stats enqueued = stats_of(ctx);
        CHECK(enqueued.kernels_built == prepared.kernels_built &&
              enqueued.kernels_loaded == prepared.kernels_loaded);
        if (rotated) {
            CHECK_CL(clWaitForEvents(1, &rotated));
            clReleaseEvent(rotated);
        }
        if (filled)
            clReleaseEvent(filled);
        read_buffer(e, mems[0], 0, q_bytes, results[1]);
        read_buffer(e, mems[1], 0, k_bytes, results[1] + q_bytes);
        read_buffer(e, mems[5], 0, caches_bytes, results[1] + q_bytes + k_bytes);

        /* Enqueued work runs on device memory only: a host cache is refused, untouched. */
        kv_memory host_caches = device;
        host_caches.caches = NULL;
        host_caches.caches_host = results[0];
        posenc_rope_desc refused = kv_desc(&host_caches, dtype, mode);
        CHECK_STATUS(posenc_cl_enqueue_rope(ctx, &refused, 0, NULL, NULL),
                     POSENC_INVALID_ARGUMENT);
        CHECK_MESSAGE(posenc_context_last_error(ctx), "k_cache.host");
        CHECK(results[0][0] == 0 && memcmp(results[0], results[0] + 1, result_bytes - 1) == 0);

        /* The submit, on the inputs and caches as they were. */
        CHECK_CL(clEnqueueWriteBuffer(e->queue, mems[0], CL_TRUE, 0, q_bytes, q_stored, 0, NULL,
                                      NULL));
        CHECK_CL(clEnqueueWriteBuffer(e->queue, mems[1], CL_TRUE, 0, k_bytes, k_stored, 0, NULL,
                                      NULL));
        CHECK_CL(clEnqueueWriteBuffer(e->queue, mems[5], CL_TRUE, 0, caches_bytes, fill_bytes,
                                      0, NULL, NULL));
        posenc_event *submitted = NULL;
        CHECK_OK(posenc_rope_submit(ctx, &device_desc, &submitted));
        if (submitted) {
            CHECK_OK(posenc_event_wait(submitted, UINT64_MAX));
            posenc_event_destroy(submitted);
        }
        read_buffer(e, mems[0], 0, q_bytes, results[2]);
        read_buffer(e, mems[1], 0, k_bytes, results[2] + q_bytes);
        read_buffer(e, mems[5], 0, caches_bytes, results[2] + q_bytes + k_bytes);
        unsigned char v_back[TOKENS * K_HEADS * HEAD_DIM * 4];
        read_buffer(e, mems[2], 0, k_bytes, v_back);
        CHECK(memcmp(v_back, v_stored, k_bytes) == 0); /* v is only read */

        /* The synchronous call on host memory, in the results' own layout. */
        unsigned char *host = results[0];
        memcpy(host, q_stored, q_bytes);
        memcpy(host + q_bytes, k_stored, k_bytes);
        memcpy(host + q_bytes + k_bytes, fill_bytes, caches_bytes);
        kv_memory host_memory = {.q_host = host, .k_host = host + q_bytes, .v_host = v_stored,
                                 .caches_host = host + q_bytes + k_bytes};
        posenc_rope_desc host_desc = kv_desc(&host_memory, dtype, mode);
        CHECK_OK(posenc_rope(ctx, &host_desc));

        CHECK(memcmp(results[1], host, result_bytes) == 0);
        CHECK(memcmp(results[2], host, result_bytes) == 0);
        CHECK(rope_failures(host, q_in, dtype, TOKENS, Q_HEADS, positions, 10000.0, 0) == 0);
        const unsigned char *k_result = host + q_bytes;
        if (mode == 0)
            CHECK(memcmp(k_result, k_stored, k_bytes) == 0);
        else
            CHECK(rope_failures(k_result, k_in, dtype, TOKENS, K_HEADS, positions, 10000.0,
                                0) == 0);

        /* The cache rows of the tokens with a slot, gathered in token order; every other byte
         * of the allocation still the fill. */
        const unsigned char *caches = host + q_bytes + k_bytes;
        unsigned char *expected = malloc(caches_bytes), *gathered = malloc(k_bytes);
        float k_of[TOKENS * K_HEADS * HEAD_DIM];
        int32_t at[TOKENS];
        int rows = 0;
        CHECK(expected && gathered);
        if (expected)
            memset(expected, CACHE_FILL, caches_bytes);
        for (int t = 0; t < TOKENS && expected && gathered; t++) {
            int32_t slot = kv_slots[mode][t];
            if (slot < 0 || slot >= CACHE_SLOTS)
                continue;
            for (int h = 0; h < K_HEADS; h++) {
                for (int d = 0; d < HEAD_DIM; d++) {
                    size_t token_at = ((size_t)t * K_HEADS + (size_t)h) * HEAD_DIM + (size_t)d;
                    size_t row_at = ((size_t)rows * K_HEADS + (size_t)h) * HEAD_DIM + (size_t)d;
                    size_t k_at = GUARD + k_cache_at(slot, h, d) * element;
                    size_t v_at = 2 * GUARD + cache_bytes + v_cache_at(slot, h, d) * element;
                    memcpy(gathered + row_at * element, caches + k_at, element);
                    k_of[row_at] = k_in[token_at];
                    /* In place, k is k_out: the cache row holds its very bits. */
                    memcpy(expected + k_at,
                           mode == 1 ? k_result + token_at * element : caches + k_at, element);
                    memcpy(expected + v_at, v_stored + token_at * element, element);
                }
            }
            at[rows++] = positions[t];
        }
        if (expected && gathered) {
            CHECK(rows == 3);
            CHECK(memcmp(caches, expected, caches_bytes) == 0);
            CHECK(rope_failures(gathered, k_of, dtype, rows, K_HEADS, at, 10000.0, 0) == 0);
        }
        free(expected);
        free(gathered);
    }
    for (int i = 0; i < 6; i++) {
        posenc_buffer_destroy(wrapped[i]);
        if (mems[i])
            clReleaseMemObject(mems[i]);
    }
    for (int i = 0; i < 3; i++)
        free(results[i]);
    free(fill_bytes);
}

static void test_kv_cache(cl_device_id device)
{
    engine e;
    if (!engine_create(&e, device, 0)) {
        CHECK(!"engine_create");
        return;
    }
    posenc_context *ctx = context_on(&e);
    const posenc_dtype dtypes[] = {POSENC_DTYPE_F32, POSENC_DTYPE_F16, POSENC_DTYPE_BF16};
    for (size_t d = 0; d < 3 && ctx; d++)
        for (int mode = 0; mode < 2; mode++)
            kv_case(&e, ctx, dtypes[d], mode);
    posenc_context_destroy(ctx);
    engine_destroy(&e);
}

/* ---- The caller's events hold posenc's work back --------------------------------------------- */

static void test_user_event(cl_device_id device)
{
    engine e;
    if (!engine_create(&e, device, 0)) {
        CHECK(!"engine_create");
        return;
    }
    posenc_context *ctx = context_on(&e);
    enum { T = 6, H = 2 };
    /* CL_MEM_USE_HOST_PTR: where the device works in the host memory itself (CPU devices), a
     * command that ran too early shows there at once; elsewhere the event status still does. */
    static float q_host[T * H * HEAD_DIM], table_host[T * HEAD_DIM];
    float q_in[T * H * HEAD_DIM];
    fill(q_in, q_host, T * H * HEAD_DIM, POSENC_DTYPE_F32, 7);
    memset(table_host, 0, sizeof table_host);
    cl_int err = CL_SUCCESS;
    cl_mem q_mem = clCreateBuffer(e.context, CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR,
                                  sizeof q_host, q_host, &err);
    CHECK_CL(err);
    cl_mem table_mem = clCreateBuffer(e.context, CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR,
                                      sizeof table_host, table_host, &err);
    CHECK_CL(err);
    cl_event gate = clCreateUserEvent(e.context, &err);
    CHECK_CL(err);
    posenc_buffer *q = ctx && q_mem ? wrap(ctx, q_mem) : NULL;
    posenc_buffer *table = ctx && table_mem ? wrap(ctx, table_mem) : NULL;
    if (q && table && gate) {
        posenc_rope_desc rope = {0};
        rope.q = posenc_tensor_of_buffer(q, POSENC_DTYPE_F32, 3, (int64_t[]){T, H, HEAD_DIM});
        rope.position_offset = 300;
        cl_event rotated = NULL, tabled = NULL;
        CHECK_OK(posenc_cl_enqueue_rope(ctx, &rope, 1, &gate, &rotated));
        /* No wait list: posenc's own order still puts it after the RoPE, hence after the gate. */
        posenc_sinusoidal_desc sinusoidal = {0};
        sinusoidal.out = posenc_tensor_of_buffer(table, POSENC_DTYPE_F32, 2,
                                                 (int64_t[]){T, HEAD_DIM});
        CHECK_OK(posenc_cl_enqueue_sinusoidal(ctx, &sinusoidal, 0, NULL, &tabled));
        /* A submit (posenc's own events) is held back too: a timed wait times out. It rotates
         * q once more, out of place into a posenc buffer. */
        posenc_event *submitted = NULL;
        posenc_buffer *twice = NULL;
        posenc_buffer_desc twice_desc = {.size = sizeof q_host};
        CHECK_OK(posenc_buffer_create(ctx, &twice_desc, &twice));
        posenc_rope_desc again = rope;
        again.q_out = posenc_tensor_of_buffer(twice, POSENC_DTYPE_F32, 3,
                                              (int64_t[]){T, H, HEAD_DIM});
        CHECK_OK(posenc_rope_submit(ctx, &again, &submitted));
        if (submitted) {
            CHECK_STATUS(posenc_event_wait(submitted, 0), POSENC_TIMEOUT);
            CHECK_STATUS(posenc_event_wait(submitted, 2000000), POSENC_TIMEOUT);
        }
        CHECK_CL(clFlush(e.queue));
        sleep_ms(50);
        if (rotated && tabled) {
            cl_int r = execution_status(rotated), s = execution_status(tabled);
            CHECK(r == CL_QUEUED || r == CL_SUBMITTED);
            CHECK(s == CL_QUEUED || s == CL_SUBMITTED);
        }
        bool untouched = true;
        for (int i = 0; i < T * H * HEAD_DIM; i++)
            untouched &= q_host[i] == q_in[i];
        for (int i = 0; i < T * HEAD_DIM; i++)
            untouched &= table_host[i] == 0.0f;
        CHECK(untouched);

        CHECK_CL(clSetUserEventStatus(gate, CL_COMPLETE));
        if (tabled)
            CHECK_CL(clWaitForEvents(1, &tabled));
        if (rotated)
            CHECK(execution_status(rotated) == CL_COMPLETE);
        float back[T * H * HEAD_DIM];
        read_buffer(&e, q_mem, 0, sizeof back, back);
        int32_t at[T];
        for (int t = 0; t < T; t++)
            at[t] = 300 + t;
        CHECK(rope_failures(back, q_in, POSENC_DTYPE_F32, T, H, at, 10000.0, 0) == 0);
        if (submitted) {
            /* R(300 + t) applied twice is R(2 (300 + t)), within two roundings (the second
             * rotation's input is off by up to 8 units of the pair). */
            CHECK_OK(posenc_event_wait(submitted, UINT64_MAX));
            posenc_event_destroy(submitted);
            CHECK_OK(posenc_buffer_download(twice, 0, back, sizeof back));
            for (int t = 0; t < T; t++)
                at[t] = 2 * (300 + t);
            CHECK(rope_failures(back, q_in, POSENC_DTYPE_F32, T, H, at, 10000.0, 8.0) == 0);
        }
        posenc_buffer_destroy(twice);
        read_buffer(&e, table_mem, 0, sizeof table_host, back);
        CHECK(table_failures(back, POSENC_DTYPE_F32, T, HEAD_DIM, 10000.0, 0) == 0);
        if (rotated)
            clReleaseEvent(rotated);
        if (tabled)
            clReleaseEvent(tabled);
    } else if (gate) {
        clSetUserEventStatus(gate, CL_COMPLETE);
    }
    if (gate)
        clReleaseEvent(gate);
    posenc_buffer_destroy(q);
    posenc_buffer_destroy(table);
    if (q_mem)
        clReleaseMemObject(q_mem);
    if (table_mem)
        clReleaseMemObject(table_mem);
    posenc_context_destroy(ctx);
    engine_destroy(&e);
}

/* ---- Teardown ---------------------------------------------------------------------------------
 * posenc_buffer_destroy and posenc_context_destroy wait for posenc's own commands: a RoPE held
 * back by a user event, which another thread sets HOLD_MS later, is complete when either
 * returns (a destroy that did not wait would return while the RoPE is still queued). The
 * engine's cl_mem, wrapped for it, then shows both rotations. */
enum { HOLD_MS = 200 };

typedef struct gate_setter {
    cl_event gate;
    posenc__thread thread;
} gate_setter;

static void set_gate_later(void *argument)
{
    gate_setter *g = argument;
    sleep_ms(HOLD_MS);
    CHECK_CL(clSetUserEventStatus(g->gate, CL_COMPLETE));
}

static void test_destroy_waits(cl_device_id device)
{
    engine e;
    if (!engine_create(&e, device, 0)) {
        CHECK(!"engine_create");
        return;
    }
    posenc_context *ctx = context_on(&e);
    enum { T = 4, H = 2, COUNT = T * H * HEAD_DIM };
    float q_in[COUNT], stored[COUNT], back[COUNT];
    fill(q_in, stored, COUNT, POSENC_DTYPE_F32, 23);
    cl_mem q_mem = device_buffer(&e, sizeof stored, stored);
    for (int round = 0; round < 2 && ctx && q_mem; round++) {
        cl_int err = CL_SUCCESS;
        gate_setter g = {.gate = clCreateUserEvent(e.context, &err)};
        CHECK_CL(err);
        posenc_buffer *q = wrap(ctx, q_mem);
        cl_event rotated = NULL;
        if (g.gate && q) {
            posenc_rope_desc rope = {0};
            rope.q = posenc_tensor_of_buffer(q, POSENC_DTYPE_F32, 3, (int64_t[]){T, H, HEAD_DIM});
            rope.position_offset = 100;
            CHECK_OK(posenc_cl_enqueue_rope(ctx, &rope, 1, &g.gate, &rotated));
            CHECK_CL(clFlush(e.queue));
        }
        bool started = g.gate && posenc__thread_start(&g.thread, set_gate_later, &g);
        CHECK(started);
        if (!started && g.gate)
            clSetUserEventStatus(g.gate, CL_COMPLETE); /* so that nothing waits forever */
        if (round == 0) {
            posenc_buffer_destroy(q);
        } else {
            posenc_context_destroy(ctx); /* destroys q too */
            ctx = NULL;
        }
        if (rotated) {
            cl_int status = execution_status(rotated);
            if (status != CL_COMPLETE) {
                test_failures++;
                fprintf(stderr, "  %s returned with posenc's RoPE still %d\n",
                        round == 0 ? "posenc_buffer_destroy" : "posenc_context_destroy",
                        (int)status);
            }
            clReleaseEvent(rotated);
        }
        if (started)
            posenc__thread_join(&g.thread);
        if (g.gate)
            clReleaseEvent(g.gate);
    }
    if (q_mem) {
        read_buffer(&e, q_mem, 0, sizeof back, back);
        /* Two rotations by 100 + t are one by 2 (100 + t), within two roundings. */
        int32_t at[T];
        for (int t = 0; t < T; t++)
            at[t] = 2 * (100 + t);
        CHECK(rope_failures(back, q_in, POSENC_DTYPE_F32, T, H, at, 10000.0, 8.0) == 0);
        clReleaseMemObject(q_mem);
    }
    posenc_context_destroy(ctx);
    engine_destroy(&e);
}

/* ---- An out-of-order queue ------------------------------------------------------------------- */

static void test_out_of_order(cl_device_id device)
{
    cl_command_queue_properties supported = 0;
    CHECK_CL(clGetDeviceInfo(device, CL_DEVICE_QUEUE_PROPERTIES, sizeof supported, &supported,
                             NULL));
    engine e;
    if (!(supported & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE) ||
        !engine_create(&e, device, CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE)) {
        printf("    (no out-of-order queues on this device: not checked)\n");
        return;
    }
    posenc_context *ctx = context_on(&e);
    enum { T = 7, H = 3, COUNT = T * H * HEAD_DIM };
    float x[COUNT];
    fill(x, NULL, COUNT, POSENC_DTYPE_F32, 21);
    cl_mem mem = device_buffer(&e, sizeof x, x);
    cl_mem scratch = device_buffer(&e, 64, NULL);
    cl_int err = CL_SUCCESS;
    cl_event gate = clCreateUserEvent(e.context, &err);
    CHECK_CL(err);
    posenc_buffer *buffer = ctx && mem ? wrap(ctx, mem) : NULL;
    posenc_buffer *owned = NULL;
    if (ctx) {
        posenc_buffer_desc owned_desc = {.size = sizeof x, .initial_data = x};
        CHECK_OK(posenc_buffer_create(ctx, &owned_desc, &owned));
    }
    if (buffer && owned && scratch && gate) {
        /* The caller's own command, held back until the end: posenc never waits for it. */
        static const char zeros[64];
        cl_event blocked = NULL;
        CHECK_CL(clEnqueueWriteBuffer(e.queue, scratch, CL_FALSE, 0, sizeof zeros, zeros, 1,
                                      &gate, &blocked));

        /* Forward at theta A, back at A, forward at theta B: only right in this order. */
        const int64_t shape[3] = {T, H, HEAD_DIM};
        posenc_rope_desc forward = {0};
        forward.q = posenc_tensor_of_buffer(buffer, POSENC_DTYPE_F32, 3, shape);
        forward.theta = 20000.0;
        posenc_rope_desc backward = forward;
        backward.inverse = true;
        posenc_rope_desc last = forward;
        last.theta = 10000.0;
        last.position_offset = 77;
        CHECK_OK(posenc_cl_enqueue_rope(ctx, &forward, 0, NULL, NULL));
        CHECK_OK(posenc_cl_enqueue_rope(ctx, &backward, 0, NULL, NULL));

        /* A synchronous call on host memory in between returns (it waits for posenc's own
         * commands, not for the queue). */
        float host[COUNT];
        memcpy(host, x, sizeof host);
        posenc_rope_desc on_host = last;
        on_host.q = posenc_tensor_of_host(host, POSENC_DTYPE_F32, 3, shape);
        CHECK_OK(posenc_rope(ctx, &on_host));
        int32_t at[T];
        for (int t = 0; t < T; t++)
            at[t] = 77 + t;
        CHECK(rope_failures(host, x, POSENC_DTYPE_F32, T, H, at, 10000.0, 0) == 0);

        cl_event done = NULL;
        CHECK_OK(posenc_cl_enqueue_rope(ctx, &last, 0, NULL, &done));
        /* A posenc buffer: upload, enqueue, download at once; the download shows the result. */
        posenc_rope_desc on_owned = last;
        on_owned.q = posenc_tensor_of_buffer(owned, POSENC_DTYPE_F32, 3, shape);
        CHECK_OK(posenc_cl_enqueue_rope(ctx, &on_owned, 0, NULL, NULL));
        float back[COUNT];
        CHECK_OK(posenc_buffer_download(owned, 0, back, sizeof back));
        CHECK(rope_failures(back, x, POSENC_DTYPE_F32, T, H, at, 10000.0, 0) == 0);
        CHECK_OK(posenc_context_finish(ctx));

        if (done) {
            CHECK_CL(clWaitForEvents(1, &done));
            clReleaseEvent(done);
        }
        read_buffer(&e, mem, 0, sizeof back, back);
        /* Three rotations, each within the promise of the pair (8 units): the first two leave
         * at most 16 units of error in the input of the third. */
        CHECK(rope_failures(back, x, POSENC_DTYPE_F32, T, H, at, 10000.0, 16.0) == 0);
        CHECK(execution_status(blocked) != CL_COMPLETE);
        CHECK_CL(clSetUserEventStatus(gate, CL_COMPLETE));
        CHECK_CL(clWaitForEvents(1, &blocked));
        clReleaseEvent(blocked);
    } else if (gate) {
        clSetUserEventStatus(gate, CL_COMPLETE);
    }
    if (gate)
        clReleaseEvent(gate);
    posenc_buffer_destroy(buffer);
    posenc_buffer_destroy(owned);
    if (mem)
        clReleaseMemObject(mem);
    if (scratch)
        clReleaseMemObject(scratch);
    posenc_context_destroy(ctx);
    engine_destroy(&e);
}

/* ---- Several threads enqueueing on one context ----------------------------------------------- */

enum { THREADS = 4, ITERATIONS = 6, TT = 5, TH = 2, SLICE = TT * TH * HEAD_DIM };

typedef struct worker {
    posenc_context *ctx;
    int index;
    cl_mem wrap_in_thread[3]; /* if set: input, output and tables, wrapped by the thread */
    posenc_buffer *input, *output, *tables;
    cl_event events[2 * ITERATIONS];
    int event_count;
    int failures;
} worker;

/* Each thread its own frequency tables (theta, base), so the context's small table cache keeps
 * replacing tables that other threads' queued work still reads. */
static double worker_theta(int index) { return 10000.0 + 1000.0 * index; }
static double worker_base(int index) { return 10000.0 + 7.0 * index; }

static void worker_run(void *argument)
{
    worker *w = argument;
    if (w->wrap_in_thread[0]) {
        posenc_buffer **wrapped[3] = {&w->input, &w->output, &w->tables};
        for (int i = 0; i < 3; i++) {
            if (posenc_cl_buffer_wrap(w->ctx, w->wrap_in_thread[i], wrapped[i]) != POSENC_OK) {
                w->failures++;
                return;
            }
        }
    }
    for (int j = 0; j < ITERATIONS; j++) {
        posenc_rope_desc rope = {0};
        rope.q = posenc_tensor_of_buffer(w->input, POSENC_DTYPE_F32, 3,
                                         (int64_t[]){TT, TH, HEAD_DIM});
        rope.q_out = posenc_tensor_of_buffer(w->output, POSENC_DTYPE_F32, 3,
                                             (int64_t[]){TT, TH, HEAD_DIM});
        rope.q_out.offset = (uint64_t)j * SLICE * sizeof(float);
        rope.position_offset = 1000 * w->index + 10 * j;
        rope.theta = worker_theta(w->index);
        cl_event event = NULL;
        if (posenc_cl_enqueue_rope(w->ctx, &rope, 0, NULL, &event) != POSENC_OK) {
            w->failures++;
            continue;
        }
        w->events[w->event_count++] = event;

        posenc_sinusoidal_desc table = {0};
        table.out = posenc_tensor_of_buffer(w->tables, POSENC_DTYPE_F32, 2,
                                            (int64_t[]){TT, HEAD_DIM});
        table.out.offset = (uint64_t)j * TT * HEAD_DIM * sizeof(float);
        table.position_offset = 100 * j;
        table.base = worker_base(w->index);
        if (posenc_cl_enqueue_sinusoidal(w->ctx, &table, 0, NULL, &event) != POSENC_OK) {
            w->failures++;
            continue;
        }
        w->events[w->event_count++] = event;
    }
}

/* Worker t's results, read back: every rotated slice (mems[1]) and table (mems[2]) of its
 * ITERATIONS enqueues against the float64 reference. */
static void check_worker_outputs(const engine *e, int t, cl_mem mems[3], const float *input)
{
    float *back = malloc(sizeof(float) * SLICE * ITERATIONS);
    if (!back) {
        CHECK(!"out of memory");
        return;
    }
    read_buffer(e, mems[1], 0, sizeof(float) * SLICE * ITERATIONS, back);
    for (int j = 0; j < ITERATIONS; j++) {
        int32_t at[TT];
        for (int i = 0; i < TT; i++)
            at[i] = 1000 * t + 10 * j + i;
        CHECK(rope_failures(back + (size_t)j * SLICE, input, POSENC_DTYPE_F32, TT, TH, at,
                            worker_theta(t), 0) == 0);
    }
    read_buffer(e, mems[2], 0, sizeof(float) * TT * HEAD_DIM * ITERATIONS, back);
    for (int j = 0; j < ITERATIONS; j++)
        CHECK(table_failures(back + (size_t)j * TT * HEAD_DIM, POSENC_DTYPE_F32, TT, HEAD_DIM,
                             worker_base(t), 100 * j) == 0);
    free(back);
}

static void test_threads(cl_device_id device)
{
    engine e;
    if (!engine_create(&e, device, 0)) {
        CHECK(!"engine_create");
        return;
    }
    posenc_context *ctx = context_on(&e);
    worker workers[THREADS];
    cl_mem mems[THREADS][3];
    memset(workers, 0, sizeof workers);
    memset(mems, 0, sizeof mems);
    static float inputs[THREADS][SLICE];
    bool ready = ctx != NULL;
    for (int t = 0; t < THREADS && ready; t++) {
        fill(inputs[t], NULL, SLICE, POSENC_DTYPE_F32, 50 + (uint64_t)t);
        mems[t][0] = device_buffer(&e, sizeof inputs[t], inputs[t]);
        mems[t][1] = device_buffer(&e, sizeof(float) * SLICE * ITERATIONS, NULL);
        mems[t][2] = device_buffer(&e, sizeof(float) * TT * HEAD_DIM * ITERATIONS, NULL);
        ready = mems[t][0] && mems[t][1] && mems[t][2];
        workers[t] = (worker){.ctx = ctx, .index = t};
        if (ready) {
            workers[t].input = wrap(ctx, mems[t][0]);
            workers[t].output = wrap(ctx, mems[t][1]);
            workers[t].tables = wrap(ctx, mems[t][2]);
            ready = workers[t].input && workers[t].output && workers[t].tables;
        }
    }
    if (ready) {
        posenc__thread threads[THREADS];
        int started = 0;
        for (; started < THREADS; started++) {
            if (!posenc__thread_start(&threads[started], worker_run, &workers[started]))
                break;
        }
        CHECK(started == THREADS);
        for (int t = 0; t < started; t++)
            posenc__thread_join(&threads[t]);
        /* Every enqueue counted once, by threads counting at once; wrapped buffers are the
         * engine's memory, not posenc's. */
        posenc_stats stats = {0};
        CHECK_OK(posenc_context_stats(ctx, &stats));
        CHECK(stats.rope_calls == (uint64_t)started * ITERATIONS);
        CHECK(stats.sinusoidal_calls == (uint64_t)started * ITERATIONS);
        CHECK(stats.buffer_bytes == 0 && stats.staged_bytes == 0);
        for (int t = 0; t < THREADS; t++) {
            CHECK(workers[t].failures == 0);
            if (workers[t].event_count)
                CHECK_CL(clWaitForEvents((cl_uint)workers[t].event_count, workers[t].events));
            for (int i = 0; i < workers[t].event_count; i++)
                clReleaseEvent(workers[t].events[i]);
        }
        for (int t = 0; t < THREADS; t++)
            check_worker_outputs(&e, t, mems[t], inputs[t]);
    }
    posenc_context_destroy(ctx); /* releases the wrapped buffers */
    for (int t = 0; t < THREADS; t++) {
        for (int i = 0; i < 3; i++) {
            if (mems[t][i])
                clReleaseMemObject(mems[t][i]);
        }
    }
    engine_destroy(&e);
}

/* ---- Buffers wrapped, made and destroyed while other threads enqueue --------------------------
 * As an engine wraps the buffers of a layer it loads while it enqueues the last: two workers
 * wrap their buffers in their thread and enqueue (checked against the reference), while two
 * others wrap and destroy the engine's buffers, create buffers with data and read them back,
 * and make calls that fail; every message a thread reads is one whole message. */

enum { CHURNERS = 2, CHURN_ROUNDS = 12, CHURN_WORDS = 64 };

/* The messages of the failing calls the churners make, read beforehand on one thread. */
typedef struct churn_messages {
    char wrap[256];    /* posenc_cl_buffer_wrap of a NULL cl_mem */
    char enqueue[256]; /* posenc_cl_enqueue_rope with a count but no wait list */
    char create[256];  /* posenc_buffer_create of size 0 */
} churn_messages;

typedef struct churner {
    posenc_context *ctx;
    cl_mem mem; /* the engine's, wrapped and unwrapped round after round */
    int index;
    const churn_messages *messages;
    int failures;
    char first_failure[300];
} churner;

static void churn_failed(churner *c, const char *what)
{
    if (c->failures++ == 0)
        snprintf(c->first_failure, sizeof c->first_failure, "churner %d: %s", c->index, what);
}

/* A message read while other threads fail and succeed on the context: one of theirs, whole. */
static void churn_check_message(churner *c)
{
    const char *message = posenc_context_last_error(c->ctx);
    const churn_messages *known = c->messages;
    if (message[0] && strcmp(message, known->wrap) != 0 &&
        strcmp(message, known->enqueue) != 0 && strcmp(message, known->create) != 0)
        churn_failed(c, "a message that no call wrote whole");
}

static void churn_run(void *argument)
{
    churner *c = argument;
    posenc_rope_desc no_work = {0};
    for (int round = 0; round < CHURN_ROUNDS; round++) {
        posenc_buffer *view = NULL, *made = NULL, *refused = NULL;
        if (posenc_cl_buffer_wrap(c->ctx, c->mem, &view) != POSENC_OK)
            churn_failed(c, "posenc_cl_buffer_wrap");
        else if (posenc_buffer_size(view) != sizeof(float) * SLICE)
            churn_failed(c, "the wrapped size");
        if (posenc_cl_buffer_wrap(c->ctx, NULL, &refused) != POSENC_INVALID_ARGUMENT || refused)
            churn_failed(c, "a NULL cl_mem was not refused");
        churn_check_message(c);
        cl_event event = NULL;
        if (posenc_cl_enqueue_rope(c->ctx, &no_work, 1, NULL, &event) !=
                POSENC_INVALID_ARGUMENT ||
            event)
            churn_failed(c, "a wait list of NULL was not refused");
        churn_check_message(c);

        uint32_t data[CHURN_WORDS], back[CHURN_WORDS];
        for (int i = 0; i < CHURN_WORDS; i++)
            data[i] = (uint32_t)(c->index * 100000 + round * 100 + i);
        memset(back, 0, sizeof back);
        posenc_buffer_desc desc = {.size = sizeof data, .initial_data = data};
        if (posenc_buffer_create(c->ctx, &desc, &made) != POSENC_OK)
            churn_failed(c, "posenc_buffer_create");
        else if (posenc_buffer_download(made, 0, back, sizeof back) != POSENC_OK ||
                 memcmp(back, data, sizeof data) != 0)
            churn_failed(c, "a created buffer read back");
        posenc_buffer_desc empty = {0};
        if (posenc_buffer_create(c->ctx, &empty, &refused) != POSENC_INVALID_ARGUMENT || refused)
            churn_failed(c, "a buffer of size 0 was not refused");
        churn_check_message(c);
        posenc_buffer_destroy(made);
        posenc_buffer_destroy(view);
    }
}

static void read_churn_messages(posenc_context *ctx, churn_messages *messages)
{
    posenc_buffer *refused = NULL;
    posenc_rope_desc no_work = {0};
    posenc_buffer_desc empty = {0};
    cl_event event = NULL;
    CHECK_STATUS(posenc_cl_buffer_wrap(ctx, NULL, &refused), POSENC_INVALID_ARGUMENT);
    snprintf(messages->wrap, sizeof messages->wrap, "%s", posenc_context_last_error(ctx));
    CHECK_STATUS(posenc_cl_enqueue_rope(ctx, &no_work, 1, NULL, &event),
                 POSENC_INVALID_ARGUMENT);
    snprintf(messages->enqueue, sizeof messages->enqueue, "%s", posenc_context_last_error(ctx));
    CHECK_STATUS(posenc_buffer_create(ctx, &empty, &refused), POSENC_INVALID_ARGUMENT);
    snprintf(messages->create, sizeof messages->create, "%s", posenc_context_last_error(ctx));
    CHECK_MESSAGE(messages->wrap, "mem");
    CHECK_MESSAGE(messages->enqueue, "event_wait_list");
    CHECK_MESSAGE(messages->create, "size");
}

static void test_wrap_while_enqueueing(cl_device_id device)
{
    enum { WORKERS = 2 };
    engine e;
    if (!engine_create(&e, device, 0)) {
        CHECK(!"engine_create");
        return;
    }
    posenc_context *ctx = context_on(&e);
    worker workers[WORKERS];
    churner churners[CHURNERS];
    cl_mem mems[WORKERS][3], churn_mems[CHURNERS];
    memset(workers, 0, sizeof workers);
    memset(mems, 0, sizeof mems);
    memset(churn_mems, 0, sizeof churn_mems);
    static float inputs[WORKERS][SLICE];
    churn_messages messages;
    bool ready = ctx != NULL;
    if (ready)
        read_churn_messages(ctx, &messages);
    for (int t = 0; t < WORKERS && ready; t++) {
        fill(inputs[t], NULL, SLICE, POSENC_DTYPE_F32, 90 + (uint64_t)t);
        mems[t][0] = device_buffer(&e, sizeof inputs[t], inputs[t]);
        mems[t][1] = device_buffer(&e, sizeof(float) * SLICE * ITERATIONS, NULL);
        mems[t][2] = device_buffer(&e, sizeof(float) * TT * HEAD_DIM * ITERATIONS, NULL);
        ready = mems[t][0] && mems[t][1] && mems[t][2];
        workers[t] = (worker){.ctx = ctx, .index = t};
        memcpy(workers[t].wrap_in_thread, mems[t], sizeof mems[t]);
    }
    for (int c = 0; c < CHURNERS && ready; c++) {
        churn_mems[c] = device_buffer(&e, sizeof(float) * SLICE, NULL);
        ready = churn_mems[c] != NULL;
        churners[c] = (churner){.ctx = ctx, .mem = churn_mems[c], .index = c,
                                .messages = &messages};
    }
    if (ready) {
        /* Interleaved, so that each kind starts while the other runs. */
        posenc__thread threads[WORKERS + CHURNERS];
        bool started[WORKERS + CHURNERS] = {false};
        for (int i = 0; i < WORKERS + CHURNERS; i++) {
            started[i] = posenc__thread_start(&threads[i], i % 2 ? churn_run : worker_run,
                                              i % 2 ? (void *)&churners[i / 2]
                                                    : (void *)&workers[i / 2]);
            CHECK(started[i]);
        }
        for (int i = 0; i < WORKERS + CHURNERS; i++) {
            if (started[i])
                posenc__thread_join(&threads[i]);
        }
        for (int c = 0; c < CHURNERS; c++) {
            if (churners[c].failures) {
                test_failures++;
                fprintf(stderr, "  %s (%d failures)\n", churners[c].first_failure,
                        churners[c].failures);
            }
        }
        for (int t = 0; t < WORKERS; t++) {
            CHECK(workers[t].failures == 0);
            if (workers[t].event_count)
                CHECK_CL(clWaitForEvents((cl_uint)workers[t].event_count, workers[t].events));
            for (int i = 0; i < workers[t].event_count; i++)
                clReleaseEvent(workers[t].events[i]);
        }
        for (int t = 0; t < WORKERS && workers[t].failures == 0; t++)
            check_worker_outputs(&e, t, mems[t], inputs[t]);
    }
    posenc_context_destroy(ctx); /* releases the buffers the workers wrapped */
    for (int t = 0; t < WORKERS; t++) {
        for (int i = 0; i < 3; i++) {
            if (mems[t][i])
                CHECK(settled(COUNTED_MEM, mems[t][i], 1) == 1);
            if (mems[t][i])
                clReleaseMemObject(mems[t][i]);
        }
    }
    for (int c = 0; c < CHURNERS; c++) {
        if (churn_mems[c]) {
            CHECK(settled(COUNTED_MEM, churn_mems[c], 1) == 1); /* every wrap released once */
            clReleaseMemObject(churn_mems[c]);
        }
    }
    engine_destroy(&e);
}

/* ---- Every OpenCL device --------------------------------------------------------------------- */

/* ---- Tables past the cache ------------------------------------------------------------------ */

/* Every step enqueued on the engine's queue, a batch at a time, the batch then read back and
 * checked. The cache evicts tables that enqueued work may still use: OpenCL keeps their memory
 * until that work is done. */
static void test_decode_loop(cl_device_id device)
{
    engine e;
    if (!engine_create(&e, device, 0)) {
        CHECK(!"engine_create");
        return;
    }
    posenc_context *ctx = context_on(&e);
    float *inputs = malloc(DECODE_BATCH_BYTES), *out = malloc(DECODE_BATCH_BYTES);
    cl_mem mem = device_buffer(&e, DECODE_BATCH_BYTES, NULL);
    posenc_buffer *buffer = ctx && mem ? wrap(ctx, mem) : NULL;
    bool ok = buffer && inputs && out;
    CHECK(ok);
    posenc_stats full = {0}, stats = {0};
    for (int32_t done = 0; ok && done < DECODE_STEPS; done += DECODE_BATCH) {
        decode_fill(inputs, (uint64_t)done);
        CHECK_CL(clEnqueueWriteBuffer(e.queue, mem, CL_TRUE, 0, DECODE_BATCH_BYTES, inputs, 0,
                                      NULL, NULL));
        for (uint32_t i = 0; ok && i < DECODE_BATCH; i++) {
            posenc_rope_desc desc = decode_step_desc(buffer, i, DECODE_START + done + (int32_t)i);
            posenc_status status = posenc_cl_enqueue_rope(ctx, &desc, 0, NULL, NULL);
            ok = status == POSENC_OK;
            if (!ok) {
                test_failures++;
                fprintf(stderr, "  decode step %d: %s: %s\n", DECODE_START + done + (int32_t)i,
                        posenc_status_name(status), posenc_context_last_error(ctx));
            }
        }
        read_buffer(&e, mem, 0, DECODE_BATCH_BYTES, out); /* in order, after the steps */
        ok = ok && decode_batch_ok(inputs, out, DECODE_START + done);
        CHECK(ok);
        ok = decode_memory_flat(ctx, done, &full, &stats) && ok; /* once the cache is full */
    }
    decode_report(DECODE_STEPS, &full, &stats, ok);
    posenc_buffer_destroy(buffer);
    posenc_context_destroy(ctx);
    if (mem)
        clReleaseMemObject(mem);
    free(inputs);
    free(out);
    engine_destroy(&e);
}

static int unavailable(const char *reason)
{
    return test_device_absent("test_opencl_engine", "opencl", reason);
}

int main(void)
{
    const char *reason = "";
    if (posenc_backend_status(POSENC_BACKEND_OPENCL, &reason) != POSENC_OK)
        return unavailable(reason);
    cl_platform_id platforms[8];
    cl_uint platform_count = 0;
    if (clGetPlatformIDs(8, platforms, &platform_count) != CL_SUCCESS || platform_count == 0)
        return unavailable("no platform");
    unsigned devices = 0;
    for (cl_uint p = 0; p < platform_count && p < 8; p++) {
        cl_device_id ids[8];
        cl_uint count = 0;
        if (clGetDeviceIDs(platforms[p], CL_DEVICE_TYPE_ALL, 8, ids, &count) != CL_SUCCESS)
            continue;
        for (cl_uint d = 0; d < count && d < 8; d++) {
            char name[256] = "";
            clGetDeviceInfo(ids[d], CL_DEVICE_NAME, sizeof name - 1, name, NULL);
            cl_bool available = CL_FALSE, compiler = CL_FALSE;
            clGetDeviceInfo(ids[d], CL_DEVICE_AVAILABLE, sizeof available, &available, NULL);
            clGetDeviceInfo(ids[d], CL_DEVICE_COMPILER_AVAILABLE, sizeof compiler, &compiler,
                            NULL);
            if (!available || !compiler) { /* posenc_context_create says UNSUPPORTED */
                printf("  opencl   %-40s not usable (no compiler or not available)\n", name);
                continue;
            }
            int before = test_failures;
            test_references(ids[d]);
            test_mismatched_handles(ids[d]);
            test_dtypes(ids[d]);
            test_tables_enqueued(ids[d]);
            test_norm_enqueued(ids[d]);
            test_prepare(ids[d]);
            test_kv_cache(ids[d]);
            test_user_event(ids[d]);
            test_destroy_waits(ids[d]);
            test_out_of_order(ids[d]);
            test_threads(ids[d]);
            test_wrap_while_enqueueing(ids[d]);
            test_decode_loop(ids[d]);
            printf("  opencl   %-40s %s\n", name, test_failures == before ? "ok" : "FAILED");
            devices++;
        }
    }
    if (devices == 0)
        return unavailable("no device");
    return test_finish("test_opencl_engine");
}
