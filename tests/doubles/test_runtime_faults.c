/* SPDX-License-Identifier: MIT */
/* Driver entry points that fail, at every call: in front of the real driver stands a test
 * double (Vulkan: the layer VK_LAYER_POSENC_faults, vulkan/fault_layer.h; OpenCL: the fault
 * ICD, opencl/fault_icd.h). Each scenario below runs once clean, counting the driver calls it
 * makes; then once for each N, on a fresh context, with its Nth driver call failing with an
 * error every wrapped entry point may return (VK_ERROR_OUT_OF_DEVICE_MEMORY;
 * CL_OUT_OF_RESOURCES). At each fault:
 *   - the call fails with a status and a message naming the driver call that failed, or, where
 *     posenc has another way (host memory it cannot import is staged instead), succeeds with
 *     the clean run's results;
 *   - a failed call leaves its outputs as they were; the one exception is a fault in the wait
 *     for work already submitted (vkWaitForFences, vkGetFenceStatus, clWaitForEvents,
 *     clGetEventInfo, clFinish): an output imported in place may then hold the results
 *     (docs/backends.md);
 *   - nothing leaks (ASan);
 *   - the same call again, with the driver healthy, gives results bit for bit those of the
 *     clean run.
 *   test_runtime_faults vulkan|opencl SCENARIO (context, prepare, buffer, rope_host,
 *   rope_host_f16, rope_buffer, rope_submit, rope_wrapped, sinusoidal_host, sinusoidal_submit)
 * The double's library comes from POSENC_FAULT_LAYER (Vulkan) or POSENC_TEST_CL_FAULT_ICD
 * (OpenCL). */
#include "opencl/fault_icd.h"
#include "required_devices.h"
#include "test_common.h"
#include "vulkan/fault_layer.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#define NAME "test_runtime_faults"

enum { TOKENS = 5, Q_HEADS = 4, K_HEADS = 2, DIM = 64 };
#define Q_ELEMENTS (TOKENS * Q_HEADS * DIM)
#define K_ELEMENTS (TOKENS * K_HEADS * DIM)
#define TABLE_ELEMENTS (TOKENS * DIM)
static const int64_t q_shape[3] = {TOKENS, Q_HEADS, DIM}, k_shape[3] = {TOKENS, K_HEADS, DIM};
static const int64_t table_shape[2] = {TOKENS, DIM};

/* The double of one backend, through the same four calls. */
static struct {
    posenc_backend backend;
    const char *name;
    void (*arm)(const char *call, uint32_t nth); /* nth 0: counts only */
    uint32_t (*count)(void);                     /* wrapped calls since the arm */
    const char *(*fired_call)(void);             /* "" when the fault did not fire */
    const char *const *waits; /* calls that wait for submitted work, NULL-terminated */
} faults;

static posenc_faults_arm_fn vk_arm;
static posenc_faults_count_fn vk_count;
static posenc_cl_faults_arm_fn cl_arm;
static posenc_cl_faults_count_fn cl_count;

/* VK_ERROR_OUT_OF_DEVICE_MEMORY and CL_OUT_OF_RESOURCES, without either API's headers. */
enum { VK_OUT_OF_DEVICE_MEMORY_ = -2, CL_OUT_OF_RESOURCES_ = -5 };

static void arm_vulkan(const char *call, uint32_t nth)
{
    vk_arm(call, nth, VK_OUT_OF_DEVICE_MEMORY_);
}
static uint32_t count_vulkan(void)
{
    return vk_count("*");
}
static void arm_opencl(const char *call, uint32_t nth)
{
    cl_arm(call, nth, CL_OUT_OF_RESOURCES_, 0);
}
static uint32_t count_opencl(void)
{
    return cl_count("*");
}
static const char *const vulkan_waits[] = {"vkWaitForFences", "vkGetFenceStatus", NULL};
static const char *const opencl_waits[] = {"clWaitForEvents", "clGetEventInfo", "clFinish", NULL};

/* Opens the backend's double; false when it cannot be found. */
static bool load_double(const char *backend)
{
    bool vulkan = strcmp(backend, "vulkan") == 0;
    const char *path = getenv(vulkan ? "POSENC_FAULT_LAYER" : "POSENC_TEST_CL_FAULT_ICD");
    void *library = path ? dlopen(path, RTLD_NOW | RTLD_GLOBAL) : NULL;
    if (!library) {
        fprintf(stderr, "%s: cannot open the %s double (%s)\n", NAME, backend,
                path ? path : "its variable is unset");
        return false;
    }
    if (vulkan) {
        faults.backend = POSENC_BACKEND_VULKAN;
        vk_arm = (posenc_faults_arm_fn)dlsym(library, POSENC_FAULTS_ARM);
        vk_count = (posenc_faults_count_fn)dlsym(library, POSENC_FAULTS_COUNT);
        faults.fired_call = (posenc_faults_fired_call_fn)dlsym(library, POSENC_FAULTS_FIRED_CALL);
        faults.arm = arm_vulkan;
        faults.count = count_vulkan;
        faults.waits = vulkan_waits;
        return vk_arm && vk_count && faults.fired_call;
    }
    faults.backend = POSENC_BACKEND_OPENCL;
    cl_arm = (posenc_cl_faults_arm_fn)dlsym(library, POSENC_CL_FAULTS_ARM);
    cl_count = (posenc_cl_faults_count_fn)dlsym(library, POSENC_CL_FAULTS_COUNT);
    faults.fired_call =
        (posenc_cl_faults_fired_call_fn)dlsym(library, POSENC_CL_FAULTS_FIRED_CALL);
    faults.arm = arm_opencl;
    faults.count = count_opencl;
    faults.waits = opencl_waits;
    return cl_arm && cl_count && faults.fired_call;
}

static bool is_wait(const char *call)
{
    for (const char *const *wait = faults.waits; *wait; wait++) {
        if (strcmp(*wait, call) == 0)
            return true;
    }
    return false;
}

/* What a scenario works on: host memory for its inputs and outputs, and the context's
 * buffers, made by its set-up before the fault is armed. */
typedef struct work {
    posenc_context *ctx;
    _Alignas(64) float q[Q_ELEMENTS];
    _Alignas(64) float k[K_ELEMENTS];
    _Alignas(64) uint16_t q16[Q_ELEMENTS];
    _Alignas(64) uint16_t out16[Q_ELEMENTS];
    _Alignas(64) float table[TABLE_ELEMENTS];
    _Alignas(4096) float wrapped[Q_ELEMENTS];
    posenc_buffer *buffer;
    posenc_buffer *made; /* a buffer the scenario itself creates */
    posenc_event *event;
} work;

typedef struct scenario {
    const char *name;
    void (*setup)(work *w);
    posenc_status (*run)(work *w);
    /* The outputs, as bytes: what must stay as it was after a failed run and equal the clean
     * run after a good one. Reads device buffers back (with the driver healthy). */
    size_t (*outputs)(work *w, unsigned char *bytes);
} scenario;

static void fill_inputs(work *w)
{
    for (int i = 0; i < Q_ELEMENTS; i++) {
        w->q[i] = (float)((i * 37) % 101 - 50) / 25.0f;
        w->q16[i] = (uint16_t)(0x3c00 + (i * 13) % 512); /* f16 values near 1 */
        w->out16[i] = 0x7e00;                           /* a NaN: any write shows */
        w->wrapped[i] = w->q[i];
    }
    for (int i = 0; i < K_ELEMENTS; i++)
        w->k[i] = (float)((i * 11) % 53 - 26) / 13.0f;
    for (int i = 0; i < TABLE_ELEMENTS; i++)
        w->table[i] = -7.0f;
}

static size_t copy_out(unsigned char *bytes, const void *data, size_t size)
{
    memcpy(bytes, data, size);
    return size;
}

/* The buffer's bytes, read back with the driver healthy; a run that failed before creating it
 * has none. */
static size_t download(work *w, posenc_buffer *buffer, unsigned char *bytes, size_t size)
{
    if (!buffer)
        return 0;
    CHECK_OK(posenc_buffer_download(buffer, 0, bytes, size));
    return size;
}

/* ---- the scenarios ------------------------------------------------------------------------ */

static posenc_rope_desc rope_host_desc(work *w)
{
    posenc_rope_desc desc = {
        .q = posenc_tensor_of_host(w->q, POSENC_DTYPE_F32, 3, q_shape),
        .k = posenc_tensor_of_host(w->k, POSENC_DTYPE_F32, 3, k_shape),
        .theta = 500000.0,
        .position_offset = 100,
    };
    return desc;
}

static void setup_none(work *w)
{
    (void)w;
}

static posenc_status run_prepare(work *w)
{
    posenc_rope_desc rope = rope_host_desc(w);
    posenc_sinusoidal_desc sinusoidal = {
        .out = posenc_tensor_of_host(w->table, POSENC_DTYPE_F32, 2, table_shape)};
    posenc_prepare_desc desc = {.rope = &rope, .rope_count = 1, .sinusoidal = &sinusoidal,
                                .sinusoidal_count = 1};
    return posenc_prepare(w->ctx, &desc);
}

/* After a prepare, the prepared call itself. */
static size_t outputs_prepare(work *w, unsigned char *bytes)
{
    posenc_rope_desc rope = rope_host_desc(w);
    CHECK_OK(posenc_rope(w->ctx, &rope));
    return copy_out(bytes, w->q, sizeof w->q);
}

static posenc_status run_buffer(work *w)
{
    posenc_buffer_desc desc = {.size = sizeof w->q, .initial_data = w->q};
    posenc_status status = posenc_buffer_create(w->ctx, &desc, &w->made);
    if (status != POSENC_OK)
        return status;
    void *mapped = NULL;
    status = posenc_buffer_map(w->made, &mapped);
    if (status == POSENC_OK) {
        ((float *)mapped)[0] = 42.0f;
        status = posenc_buffer_unmap(w->made);
    } else if (status == POSENC_UNSUPPORTED) { /* device-local memory: not mappable, no fault */
        status = posenc_buffer_upload(w->made, 0, (const float[]){42.0f}, sizeof(float));
    }
    if (status == POSENC_OK)
        status = posenc_buffer_upload(w->made, sizeof(float), w->k, sizeof(float) * 8);
    if (status == POSENC_OK)
        status = posenc_buffer_download(w->made, 0, w->table, sizeof(float) * 16);
    return status;
}

static size_t outputs_buffer(work *w, unsigned char *bytes)
{
    return copy_out(bytes, w->table, sizeof w->table);
}

static posenc_status run_rope_host(work *w)
{
    posenc_rope_desc desc = rope_host_desc(w);
    return posenc_rope(w->ctx, &desc);
}

static size_t outputs_rope_host(work *w, unsigned char *bytes)
{
    size_t n = copy_out(bytes, w->q, sizeof w->q);
    return n + copy_out(bytes + n, w->k, sizeof w->k);
}

static posenc_status run_rope_host_f16(work *w)
{
    posenc_rope_desc desc = {
        .q = posenc_tensor_of_host(w->q16, POSENC_DTYPE_F16, 3, q_shape),
        .q_out = posenc_tensor_of_host(w->out16, POSENC_DTYPE_F16, 3, q_shape),
        .style = POSENC_ROPE_GPTJ,
        .position_offset = 7,
    };
    return posenc_rope(w->ctx, &desc);
}

static size_t outputs_rope_host_f16(work *w, unsigned char *bytes)
{
    return copy_out(bytes, w->out16, sizeof w->out16);
}

static void setup_buffer(work *w)
{
    posenc_buffer_desc desc = {.size = sizeof w->q, .initial_data = w->q};
    CHECK_OK(posenc_buffer_create(w->ctx, &desc, &w->buffer));
}

static posenc_status run_rope_buffer(work *w)
{
    if (!w->buffer)
        return POSENC_INVALID_ARGUMENT;
    posenc_rope_desc desc = {.q = posenc_tensor_of_buffer(w->buffer, POSENC_DTYPE_F32, 3,
                                                          q_shape),
                             .position_offset = 3};
    return posenc_rope(w->ctx, &desc);
}

static size_t outputs_buffer_q(work *w, unsigned char *bytes)
{
    return download(w, w->buffer, bytes, sizeof w->q);
}

static posenc_status run_rope_submit(work *w)
{
    if (!w->buffer)
        return POSENC_INVALID_ARGUMENT;
    posenc_rope_desc desc = {.q = posenc_tensor_of_buffer(w->buffer, POSENC_DTYPE_F32, 3,
                                                          q_shape),
                             .style = POSENC_ROPE_GPTJ,
                             .position_offset = 9};
    posenc_status status = posenc_rope_submit(w->ctx, &desc, &w->event);
    if (status == POSENC_OK)
        status = posenc_event_wait(w->event, UINT64_MAX);
    posenc_event_destroy(w->event);
    w->event = NULL;
    return status;
}

static void setup_wrapped(work *w)
{
    posenc_buffer_desc desc = {.size = sizeof w->wrapped, .host_memory = w->wrapped};
    CHECK_OK(posenc_buffer_create(w->ctx, &desc, &w->buffer));
}

static size_t outputs_wrapped(work *w, unsigned char *bytes)
{
    return copy_out(bytes, w->wrapped, sizeof w->wrapped);
}

static posenc_status run_sinusoidal_host(work *w)
{
    posenc_sinusoidal_desc desc = {
        .out = posenc_tensor_of_host(w->table, POSENC_DTYPE_F32, 2, table_shape),
        .position_offset = 11};
    return posenc_sinusoidal(w->ctx, &desc);
}

static size_t outputs_table(work *w, unsigned char *bytes)
{
    return copy_out(bytes, w->table, sizeof w->table);
}

static void setup_table_buffer(work *w)
{
    posenc_buffer_desc desc = {.size = sizeof w->table, .initial_data = w->table};
    CHECK_OK(posenc_buffer_create(w->ctx, &desc, &w->buffer));
}

static posenc_status run_sinusoidal_submit(work *w)
{
    if (!w->buffer)
        return POSENC_INVALID_ARGUMENT;
    posenc_sinusoidal_desc desc = {
        .out = posenc_tensor_of_buffer(w->buffer, POSENC_DTYPE_F32, 2, table_shape),
        .layout = POSENC_SINUSOIDAL_SIN_COS};
    posenc_status status = posenc_sinusoidal_submit(w->ctx, &desc, &w->event);
    if (status == POSENC_OK)
        status = posenc_event_wait(w->event, UINT64_MAX);
    posenc_event_destroy(w->event);
    w->event = NULL;
    return status;
}

static size_t outputs_table_buffer(work *w, unsigned char *bytes)
{
    return download(w, w->buffer, bytes, sizeof w->table);
}

static const scenario scenarios[] = {
    {"prepare", setup_none, run_prepare, outputs_prepare},
    {"buffer", setup_none, run_buffer, outputs_buffer},
    {"rope_host", setup_none, run_rope_host, outputs_rope_host},
    {"rope_host_f16", setup_none, run_rope_host_f16, outputs_rope_host_f16},
    {"rope_buffer", setup_buffer, run_rope_buffer, outputs_buffer_q},
    {"rope_submit", setup_buffer, run_rope_submit, outputs_buffer_q},
    {"rope_wrapped", setup_wrapped, run_rope_buffer, outputs_wrapped},
    {"sinusoidal_host", setup_none, run_sinusoidal_host, outputs_table},
    {"sinusoidal_submit", setup_table_buffer, run_sinusoidal_submit, outputs_table_buffer},
};

/* ---- the sweep ---------------------------------------------------------------------------- */

static posenc_context *backend_context(posenc_status *status)
{
    posenc_context_desc desc = {.backend = faults.backend, .flags = POSENC_CONTEXT_NO_FALLBACK};
    posenc_context *ctx = NULL;
    *status = posenc_context_create(&desc, &ctx);
    return ctx;
}

static void finish_work(work *w)
{
    posenc_event_destroy(w->event);
    posenc_buffer_destroy(w->made);
    posenc_buffer_destroy(w->buffer);
    posenc_context_destroy(w->ctx);
    w->event = NULL;
    w->made = w->buffer = NULL;
    w->ctx = NULL;
}

/* A fresh context with the scenario's inputs and buffers, the driver healthy. */
static bool start_work(work *w, const scenario *s)
{
    memset(w, 0, sizeof *w);
    fill_inputs(w);
    faults.arm("*", 0);
    posenc_status status;
    w->ctx = backend_context(&status);
    if (!w->ctx) {
        test_failures++;
        fprintf(stderr, "%s: no %s context: %s\n", NAME, faults.name,
                posenc_thread_last_error());
        return false;
    }
    s->setup(w);
    return true;
}

static unsigned char clean[1 << 18], before[1 << 18], after[1 << 18];

static void sweep(const scenario *s)
{
    static work w;
    /* The clean run: its driver calls counted, its results kept. */
    if (!start_work(&w, s))
        return;
    faults.arm("*", 0);
    posenc_status status = s->run(&w);
    uint32_t calls = faults.count();
    CHECK_OK(status);
    size_t size = s->outputs(&w, clean);
    finish_work(&w);
    unsigned failed = 0, recovered = 0;
    for (uint32_t n = 1; n <= calls; n++) {
        if (!start_work(&w, s))
            return;
        size_t before_size = s->outputs == outputs_prepare ? 0 : s->outputs(&w, before);
        faults.arm("*", n);
        status = s->run(&w);
        char call[80];
        snprintf(call, sizeof call, "%s", faults.fired_call());
        faults.arm("*", 0);
        if (!call[0]) { /* fewer calls this time: nothing failed */
            finish_work(&w);
            continue;
        }
        if (status == POSENC_OK) {
            recovered++;
            size_t got = s->outputs(&w, after);
            if (got != size || memcmp(after, clean, size) != 0) {
                test_failures++;
                fprintf(stderr, "%s: %s: %s failed (call %u) and the run went on with wrong "
                                "results\n",
                        NAME, s->name, call, n);
            }
        } else {
            failed++;
            const char *message = posenc_context_last_error(w.ctx);
            if (!strstr(message, call)) {
                test_failures++;
                fprintf(stderr, "%s: %s: %s failed (call %u): %s, message '%s' does not name "
                                "it\n",
                        NAME, s->name, call, n, posenc_status_name(status), message);
            }
            bool wait = is_wait(call);
            size_t got = before_size ? s->outputs(&w, after) : 0;
            if (!wait && got != before_size) {
                test_failures++;
                fprintf(stderr, "%s: %s: %s failed (call %u) and the outputs changed size\n",
                        NAME, s->name, call, n);
            } else if (!wait && memcmp(after, before, got) != 0) {
                test_failures++;
                fprintf(stderr, "%s: %s: %s failed (call %u) and the outputs changed\n", NAME,
                        s->name, call, n);
            }
            /* The same call again, the driver healthy: the clean run's results. */
            if (status != POSENC_DEVICE_LOST) {
                fill_inputs(&w);
                if (w.buffer && s->setup != setup_wrapped)
                    CHECK_OK(posenc_buffer_upload(w.buffer, 0,
                                                  s->setup == setup_table_buffer
                                                      ? (const void *)w.table
                                                      : (const void *)w.q,
                                                  s->setup == setup_table_buffer ? sizeof w.table
                                                                                 : sizeof w.q));
                posenc_buffer_destroy(w.made);
                w.made = NULL;
                posenc_status again = s->run(&w);
                if (again != POSENC_OK) {
                    test_failures++;
                    fprintf(stderr, "%s: %s: after %s failed (call %u), the next run: %s: %s\n",
                            NAME, s->name, call, n, posenc_status_name(again),
                            posenc_context_last_error(w.ctx));
                } else {
                    size_t next = s->outputs(&w, after);
                    if (next != size || memcmp(after, clean, size) != 0) {
                        test_failures++;
                        fprintf(stderr, "%s: %s: after %s failed (call %u), the next run's "
                                        "results differ from a clean run's\n",
                                NAME, s->name, call, n);
                    }
                }
            }
        }
        finish_work(&w);
    }
    printf("  %-18s %3u driver calls; each failed in turn: %u calls failed, %u went on with the "
           "same results\n",
           s->name, calls, failed, recovered);
}

/* Context creation, every driver call of it failing in turn: no context and a message naming
 * the call, then a good one. */
static void sweep_context(void)
{
    faults.arm("*", 0);
    posenc_status status;
    posenc_context *ctx = backend_context(&status);
    uint32_t calls = faults.count();
    CHECK_OK(status);
    posenc_context_destroy(ctx);
    unsigned failed = 0;
    for (uint32_t n = 1; n <= calls; n++) {
        faults.arm("*", n);
        ctx = backend_context(&status);
        char call[80];
        snprintf(call, sizeof call, "%s", faults.fired_call());
        faults.arm("*", 0);
        if (status != POSENC_OK) {
            failed++;
            CHECK(ctx == NULL);
            if (call[0] && !strstr(posenc_thread_last_error(), call)) {
                test_failures++;
                fprintf(stderr, "%s: context: %s failed (call %u): '%s' does not name it\n",
                        NAME, call, n, posenc_thread_last_error());
            }
        }
        posenc_context_destroy(ctx);
    }
    ctx = backend_context(&status);
    CHECK_OK(status);
    posenc_context_destroy(ctx);
    printf("  %-18s %3u driver calls; each failed in turn: %u creations failed\n", "context",
           calls, failed);
}

int main(int argc, char **argv)
{
    const char *backend = argc > 1 ? argv[1] : "";
    const char *which = argc > 2 ? argv[2] : "";
    if (strcmp(backend, "vulkan") != 0 && strcmp(backend, "opencl") != 0) {
        fprintf(stderr, "usage: %s vulkan|opencl SCENARIO\n", NAME);
        return 2;
    }
    faults.name = backend;
    faults.backend = strcmp(backend, "vulkan") == 0 ? POSENC_BACKEND_VULKAN : POSENC_BACKEND_OPENCL;
    posenc_status status;
    posenc_context *probe = backend_context(&status);
    if (!probe)
        return test_device_absent(NAME, backend, posenc_thread_last_error());
    posenc_context_destroy(probe);
    if (!load_double(backend))
        return 1;
    printf("%s: %s %s\n", NAME, backend, which);
    bool found = false;
    if (strcmp(which, "context") == 0) {
        sweep_context();
        found = true;
    }
    for (size_t i = 0; i < sizeof scenarios / sizeof scenarios[0]; i++) {
        if (strcmp(which, scenarios[i].name) == 0) {
            sweep(&scenarios[i]);
            found = true;
        }
    }
    if (!found) {
        fprintf(stderr, "%s: unknown scenario '%s'\n", NAME, which);
        return 2;
    }
    return test_finish(NAME);
}
