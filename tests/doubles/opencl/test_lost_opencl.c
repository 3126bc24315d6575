/* SPDX-License-Identifier: MIT */
/* An OpenCL device lost during a call (the fault ICD, fault_icd.h, reports
 * CL_DEVICE_NOT_AVAILABLE where a runtime can: as a call's error or as a command's execution
 * status): the call returns DEVICE_LOST and nothing hangs; outputs the call never reached stay
 * untouched; every later call on the context fails at once with the same status and a message
 * that says the context must be destroyed, without reaching the runtime; pending events end
 * lost; buffers, events and the context are destroyed with nothing leaked (ASan); another
 * OpenCL context, alive during the loss or made after it, and a CPU context work and are
 * right; an engine's context, queue and buffers keep exactly the references the engine holds.
 *   test_lost_opencl POINT_MODE, POINT where the runtime reports the loss:
 *     kernel  clEnqueueNDRangeKernel         write   clEnqueueWriteBuffer
 *     read    clEnqueueReadBuffer            map     clEnqueueMapBuffer
 *     wait    clWaitForEvents (the commands end lost)
 *     status  clGetEventInfo (a command's execution status is the loss)
 *     flush   clFlush                        finish  clFinish (the engine's own)
 *   and MODE how the call is made:
 *     sync    posenc_rope on host tensors (staged)
 *     buffer  posenc_buffer_upload / _download / _map
 *     submit  posenc_rope_submit, then its event or a download
 *     timed   posenc_rope_submit, then a wait for its event with a timeout
 *     engine  posenc_cl_enqueue_rope on an engine's queue, then the engine's own calls
 *   not_lost_sync: CL_OUT_OF_RESOURCES at the kernel's enqueue is no loss (the call fails, the
 *   next works); env_sync: the fault armed by the environment (POSENC_CL_FAULT_CALL) from the
 *   process start. */
#include "fault_icd.h"
#include "lost_work.h"
#include "required_devices.h"
#include "test_common.h"

#include <posenc/posenc_opencl.h>

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#define NAME "test_lost_opencl"

static struct {
    posenc_cl_faults_arm_fn arm;
    posenc_cl_faults_count_fn count;
    posenc_cl_faults_fired_fn fired;
    posenc_cl_faults_lost_fn lost;
} faults;

/* The ICD the loader opened (the same library: dlopen finds it loaded). */
static bool load_double(void)
{
    const char *path = getenv("POSENC_TEST_CL_FAULT_ICD");
    void *library = path ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
    if (!library) {
        fprintf(stderr, "%s: cannot open the fault ICD (POSENC_TEST_CL_FAULT_ICD=%s): %s\n", NAME,
                path ? path : "(unset)", dlerror());
        return false;
    }
    faults.arm = (posenc_cl_faults_arm_fn)dlsym(library, POSENC_CL_FAULTS_ARM);
    faults.count = (posenc_cl_faults_count_fn)dlsym(library, POSENC_CL_FAULTS_COUNT);
    faults.fired = (posenc_cl_faults_fired_fn)dlsym(library, POSENC_CL_FAULTS_FIRED);
    faults.lost = (posenc_cl_faults_lost_fn)dlsym(library, POSENC_CL_FAULTS_LOST);
    return faults.arm && faults.count && faults.fired && faults.lost;
}

/* The message of a call on a lost context: the loss, and what to do. */
static void check_lost_message(posenc_context *ctx)
{
    const char *message = posenc_context_last_error(ctx);
    CHECK_MESSAGE(message, "lost");
    CHECK_MESSAGE(message, "destroy");
}

/* Every later call on a lost context fails at once, with DEVICE_LOST and a message that says
 * so, without reaching the runtime. `buffer` (optional) is one of the context's buffers,
 * `pending` (optional) an event of work submitted before the loss. */
static void check_lost_for_good(posenc_context *ctx, posenc_buffer *buffer,
                                posenc_event *pending)
{
    faults.arm("*", 0, 0, 0); /* disarmed: counts every wrapped call from here */
    static float q[LOST_ELEMENTS], before[LOST_ELEMENTS];
    lost_fill(q, 0.25f);
    memcpy(before, q, sizeof q);
    posenc_rope_desc rope = {.q = posenc_tensor_of_host(q, POSENC_DTYPE_F32, 3, lost_shape)};
    CHECK_STATUS(posenc_rope(ctx, &rope), POSENC_DEVICE_LOST);
    check_lost_message(ctx);
    CHECK(memcmp(q, before, sizeof q) == 0);
    static float table[LOST_TOKENS * LOST_DIM];
    const int64_t table_shape[2] = {LOST_TOKENS, LOST_DIM};
    posenc_sinusoidal_desc sinusoidal = {
        .out = posenc_tensor_of_host(table, POSENC_DTYPE_F32, 2, table_shape)};
    CHECK_STATUS(posenc_sinusoidal(ctx, &sinusoidal), POSENC_DEVICE_LOST);
    check_lost_message(ctx);
    posenc_prepare_desc prepare = {.rope = &rope, .rope_count = 1};
    CHECK_STATUS(posenc_prepare(ctx, &prepare), POSENC_DEVICE_LOST);
    check_lost_message(ctx);
    posenc_buffer_desc buffer_desc = {.size = 4096};
    posenc_buffer *made = NULL;
    CHECK_STATUS(posenc_buffer_create(ctx, &buffer_desc, &made), POSENC_DEVICE_LOST);
    CHECK(made == NULL);
    check_lost_message(ctx);
    if (buffer) {
        posenc_rope_desc on_buffer = {
            .q = posenc_tensor_of_buffer(buffer, POSENC_DTYPE_F32, 3, lost_shape)};
        posenc_event *event = NULL;
        CHECK_STATUS(posenc_rope_submit(ctx, &on_buffer, &event), POSENC_DEVICE_LOST);
        CHECK(event == NULL);
        check_lost_message(ctx);
        CHECK_STATUS(posenc_cl_enqueue_rope(ctx, &on_buffer, 0, NULL, NULL), POSENC_DEVICE_LOST);
        check_lost_message(ctx);
        posenc_sinusoidal_desc table_on_buffer = {
            .out = posenc_tensor_of_buffer(buffer, POSENC_DTYPE_F32, 2, table_shape)};
        CHECK_STATUS(posenc_cl_enqueue_sinusoidal(ctx, &table_on_buffer, 0, NULL, NULL),
                     POSENC_DEVICE_LOST);
        check_lost_message(ctx);
        float data[4] = {1, 2, 3, 4}, back[4] = {5, 6, 7, 8};
        void *mapped = &back; /* must stay as it is */
        CHECK_STATUS(posenc_buffer_upload(buffer, 0, data, sizeof data), POSENC_DEVICE_LOST);
        check_lost_message(ctx);
        CHECK_STATUS(posenc_buffer_download(buffer, 0, back, sizeof back), POSENC_DEVICE_LOST);
        check_lost_message(ctx);
        CHECK(back[0] == 5 && back[3] == 8);
        CHECK_STATUS(posenc_buffer_map(buffer, &mapped), POSENC_DEVICE_LOST);
        check_lost_message(ctx);
        CHECK(mapped == (void *)&back);
    }
    CHECK_STATUS(posenc_context_finish(ctx), POSENC_DEVICE_LOST);
    check_lost_message(ctx);
    uint32_t reached = faults.count("*");
    if (reached) {
        test_failures++;
        fprintf(stderr, "%s: calls on the lost context reached the runtime %u time(s)\n", NAME,
                reached);
    }
    if (pending) { /* work submitted before the loss ends lost (its cl_event released) */
        CHECK_STATUS(posenc_event_wait(pending, UINT64_MAX), POSENC_DEVICE_LOST);
        CHECK_STATUS(posenc_event_wait(pending, 0), POSENC_DEVICE_LOST);
        CHECK(faults.count("*") == faults.count("clReleaseEvent"));
    }
}

static posenc_context *opencl_context(void)
{
    posenc_context_desc desc = {.backend = POSENC_BACKEND_OPENCL,
                                .flags = POSENC_CONTEXT_NO_FALLBACK,
                                .log = test_count_warnings};
    posenc_context *ctx = NULL;
    if (posenc_context_create(&desc, &ctx) != POSENC_OK) {
        fprintf(stderr, "%s: no OpenCL context: %s\n", NAME, posenc_thread_last_error());
        return NULL;
    }
    return ctx;
}

/* After the loss: `bystander` (an OpenCL context made before it), a new OpenCL context on the
 * same device and a CPU context work. */
static void check_others_work(posenc_context *bystander)
{
    if (bystander)
        lost_check_working(bystander, NAME, "another OpenCL context, made before the loss");
    posenc_context *fresh = opencl_context();
    CHECK(fresh != NULL);
    if (fresh)
        lost_check_working(fresh, NAME, "an OpenCL context made after the loss");
    posenc_context_destroy(fresh);
    posenc_context_desc cpu_desc = {.backend = POSENC_BACKEND_CPU};
    posenc_context *cpu = NULL;
    CHECK_OK(posenc_context_create(&cpu_desc, &cpu));
    if (cpu)
        lost_check_working(cpu, NAME, "a CPU context");
    posenc_context_destroy(cpu);
}

/* The loss, armed for the next call of `call`: CL_DEVICE_NOT_AVAILABLE as that call's error,
 * or with `as_status` as the execution status of the commands it reports on. */
static void arm_lost(const char *call, bool as_status)
{
    faults.arm(call, 1, CL_DEVICE_NOT_AVAILABLE, as_status);
}

static void expect_fired(const char *call)
{
    if (!faults.fired()) {
        test_failures++;
        fprintf(stderr, "%s: posenc made no %s call where one was expected\n", NAME, call);
    }
}

/* The failed call's own status and message. */
static void check_failed(posenc_status status, posenc_context *ctx, const char *call)
{
    CHECK_STATUS(status, POSENC_DEVICE_LOST);
    expect_fired(call);
    check_lost_message(ctx);
    CHECK_MESSAGE(posenc_context_last_error(ctx), "CL_DEVICE_NOT_AVAILABLE");
}

/* ---- posenc's own contexts ------------------------------------------------------------------- */

/* posenc_rope on host tensors (staged), the device lost at `call`: q rotated into q_out, which
 * is read back whole (clEnqueueReadBuffer), or with `in_place` rotated in place, its written
 * elements copied back through a map. Only a command's status (the last wait's) reports the
 * loss after the copy back: at every other point q and q_out are untouched. */
static void lost_sync_in(const char *call, bool as_status, bool in_place)
{
    posenc_context *ctx = opencl_context(), *bystander = opencl_context();
    if (!ctx || !bystander) {
        test_failures++;
        posenc_context_destroy(ctx);
        posenc_context_destroy(bystander);
        return;
    }
    lost_check_working(ctx, NAME, "before the loss"); /* kernels and tables made */
    static float q[LOST_ELEMENTS], q_out[LOST_ELEMENTS], before[LOST_ELEMENTS], out_before[LOST_ELEMENTS];
    lost_fill(q, 0.5f);
    lost_fill(q_out, -2.0f);
    memcpy(before, q, sizeof q);
    memcpy(out_before, q_out, sizeof q_out);
    posenc_rope_desc rope = {.q = posenc_tensor_of_host(q, POSENC_DTYPE_F32, 3, lost_shape),
                             .position_offset = 3};
    if (!in_place)
        rope.q_out = posenc_tensor_of_host(q_out, POSENC_DTYPE_F32, 3, lost_shape);
    arm_lost(call, as_status);
    check_failed(posenc_rope(ctx, &rope), ctx, call);
    if (strcmp(call, "clGetEventInfo") != 0) {
        CHECK(memcmp(q, before, sizeof q) == 0);
        CHECK(memcmp(q_out, out_before, sizeof q_out) == 0);
    }
    check_lost_for_good(ctx, NULL, NULL);
    posenc_context_destroy(ctx);
    check_others_work(bystander);
    posenc_context_destroy(bystander);
}

static void lost_sync(const char *call, bool as_status) { lost_sync_in(call, as_status, false); }

static void lost_sync_in_place(const char *call, bool as_status)
{
    lost_sync_in(call, as_status, true);
}

/* A buffer call lost at `call`: an upload, a download or a map (the wait: a download's). */
static void lost_buffer(const char *call, bool as_status)
{
    posenc_context *ctx = opencl_context(), *bystander = opencl_context();
    posenc_buffer *buffer = NULL;
    static float data[LOST_ELEMENTS];
    lost_fill(data, 1.0f);
    posenc_buffer_desc desc = {.size = sizeof data, .initial_data = data};
    if (ctx)
        CHECK_OK(posenc_buffer_create(ctx, &desc, &buffer));
    if (!ctx || !bystander || !buffer) {
        test_failures++;
        posenc_buffer_destroy(buffer);
        posenc_context_destroy(ctx);
        posenc_context_destroy(bystander);
        return;
    }
    static float host[LOST_ELEMENTS];
    memset(host, 0x5a, sizeof host);
    unsigned char before[sizeof host];
    memcpy(before, host, sizeof host);
    arm_lost(call, as_status);
    if (strcmp(call, "clEnqueueWriteBuffer") == 0) {
        check_failed(posenc_buffer_upload(buffer, 0, data, sizeof data), ctx, call);
    } else if (strcmp(call, "clEnqueueMapBuffer") == 0) {
        void *mapped = &host; /* must stay as it is */
        check_failed(posenc_buffer_map(buffer, &mapped), ctx, call);
        CHECK(mapped == (void *)&host);
    } else {
        check_failed(posenc_buffer_download(buffer, 0, host, sizeof host), ctx, call);
        if (strcmp(call, "clEnqueueReadBuffer") == 0) /* never read */
            CHECK(memcmp(host, before, sizeof host) == 0);
    }
    check_lost_for_good(ctx, buffer, NULL);
    posenc_buffer_destroy(buffer); /* destroying still works */
    posenc_context_destroy(ctx);
    check_others_work(bystander);
    posenc_context_destroy(bystander);
}

/* posenc_rope_submit on a device buffer, the device lost at `call`: the submit itself (the
 * kernel's enqueue, the flush), or work left pending: then the event (waited for without or
 * with a timeout) or a download after it sees the loss, and a second pending event ends lost
 * too. */
static void lost_submit(const char *call, bool as_status, bool timed)
{
    posenc_context *ctx = opencl_context(), *bystander = opencl_context();
    posenc_buffer *buffer = NULL;
    static float data[LOST_ELEMENTS];
    lost_fill(data, 1.0f);
    posenc_buffer_desc desc = {.size = sizeof data, .initial_data = data};
    if (ctx)
        CHECK_OK(posenc_buffer_create(ctx, &desc, &buffer));
    if (!ctx || !bystander || !buffer) {
        test_failures++;
        posenc_buffer_destroy(buffer);
        posenc_context_destroy(ctx);
        posenc_context_destroy(bystander);
        return;
    }
    posenc_rope_desc rope = {.q = posenc_tensor_of_buffer(buffer, POSENC_DTYPE_F32, 3, lost_shape)};
    posenc_event *warm = NULL;
    CHECK_OK(posenc_rope_submit(ctx, &rope, &warm));
    CHECK_OK(posenc_event_wait(warm, UINT64_MAX));
    posenc_event_destroy(warm);

    posenc_event *first = NULL, *second = NULL;
    if (strcmp(call, "clEnqueueNDRangeKernel") == 0 || strcmp(call, "clFlush") == 0) {
        arm_lost(call, as_status);
        check_failed(posenc_rope_submit(ctx, &rope, &first), ctx, call);
        CHECK(first == NULL);
    } else {
        CHECK_OK(posenc_rope_submit(ctx, &rope, &first));
        CHECK_OK(posenc_rope_submit(ctx, &rope, &second));
        arm_lost(call, as_status);
        if (strcmp(call, "clGetEventInfo") == 0) {
            /* 10 s: far more than the work takes, far less than the test's limit. */
            uint64_t timeout = timed ? UINT64_C(10000000000) : UINT64_MAX;
            check_failed(posenc_event_wait(second, timeout), ctx, call);
            CHECK_STATUS(posenc_event_wait(second, 0), POSENC_DEVICE_LOST); /* kept */
        } else {
            static float host[LOST_ELEMENTS];
            check_failed(posenc_buffer_download(buffer, 0, host, sizeof host), ctx, call);
        }
    }
    check_lost_for_good(ctx, buffer, second ? first : NULL);
    if (second) {
        CHECK_STATUS(posenc_event_wait(second, UINT64_MAX), POSENC_DEVICE_LOST);
        posenc_event_destroy(second);
    }
    posenc_event_destroy(first);
    posenc_buffer_destroy(buffer);
    posenc_context_destroy(ctx);
    check_others_work(bystander);
    posenc_context_destroy(bystander);
}

/* ---- An engine's context --------------------------------------------------------------------- */

typedef struct engine {
    cl_device_id device;
    cl_context context;
    cl_command_queue queue;
    cl_mem mem;
} engine;

/* The engine's references to its context (0), queue (1) and buffer (2). */
static cl_uint reference_count(const engine *e, int which)
{
    cl_uint count = 0;
    cl_int err = CL_SUCCESS;
    if (which == 0)
        err = clGetContextInfo(e->context, CL_CONTEXT_REFERENCE_COUNT, sizeof count, &count,
                               NULL);
    else if (which == 1)
        err = clGetCommandQueueInfo(e->queue, CL_QUEUE_REFERENCE_COUNT, sizeof count, &count,
                                    NULL);
    else
        err = clGetMemObjectInfo(e->mem, CL_MEM_REFERENCE_COUNT, sizeof count, &count, NULL);
    CHECK(err == CL_SUCCESS);
    return count;
}

/* The runtime drops its own transient references (events of finished commands hold their
 * queue, context and buffers) from its worker threads a moment after the commands complete: a
 * count is read until it settles at `expected`, for up to a second. */
static cl_uint settled(const engine *e, int which, cl_uint expected)
{
    cl_uint count = reference_count(e, which);
    for (int i = 0; i < 200 && count != expected; i++) {
        posenc__sleep_seconds(5e-3);
        count = reference_count(e, which);
    }
    return count;
}

/* The engine's objects on the first OpenCL device, through the ICD loader it links, which
 * finds the fault ICD as posenc does. */
static bool engine_create(engine *e, const float *data, size_t size)
{
    memset(e, 0, sizeof *e);
    cl_platform_id platform = NULL;
    cl_uint count = 0;
    if (clGetPlatformIDs(1, &platform, &count) != CL_SUCCESS || count == 0)
        return false;
    if (clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &e->device, &count) != CL_SUCCESS ||
        count == 0)
        return false;
    cl_int err = CL_SUCCESS;
    e->context = clCreateContext(NULL, 1, &e->device, NULL, NULL, &err);
    if (err == CL_SUCCESS)
        e->queue = clCreateCommandQueue(e->context, e->device, 0, &err);
    if (err == CL_SUCCESS)
        e->mem = clCreateBuffer(e->context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, size,
                                (void *)(uintptr_t)data, &err);
    return err == CL_SUCCESS;
}

/* The engine's own releases work on a lost context as on any. */
static void engine_destroy(engine *e)
{
    if (e->mem)
        CHECK(clReleaseMemObject(e->mem) == CL_SUCCESS);
    if (e->queue)
        CHECK(clReleaseCommandQueue(e->queue) == CL_SUCCESS);
    if (e->context)
        CHECK(clReleaseContext(e->context) == CL_SUCCESS);
}

/* posenc on an engine's context, queue and buffer, the device lost at `call`: posenc's own
 * enqueue, upload, download or map; or the engine's wait for posenc's event, its query of the
 * event's status or its clFinish, after which posenc learns of the loss at its next call that
 * reaches the runtime, as the engine did from its own status. */
static void lost_engine(const char *call, bool as_status)
{
    static float data[LOST_ELEMENTS];
    lost_fill(data, 1.0f);
    engine e;
    if (!engine_create(&e, data, sizeof data)) {
        test_failures++;
        fprintf(stderr, "%s: the engine's objects could not be made\n", NAME);
        engine_destroy(&e);
        return;
    }
    cl_uint held[3] = {reference_count(&e, 0), reference_count(&e, 1), reference_count(&e, 2)};
    posenc_context_desc desc = {.opencl = posenc_opencl_external_of(e.context, e.device, e.queue),
                                .log = test_count_warnings};
    posenc_context *ctx = NULL, *bystander = opencl_context();
    CHECK_OK(posenc_context_create(&desc, &ctx));
    posenc_buffer *buffer = NULL;
    if (ctx)
        CHECK_OK(posenc_cl_buffer_wrap(ctx, e.mem, &buffer));
    if (!ctx || !bystander || !buffer) {
        test_failures++;
        posenc_buffer_destroy(buffer);
        posenc_context_destroy(ctx);
        posenc_context_destroy(bystander);
        engine_destroy(&e);
        return;
    }
    posenc_rope_desc rope = {.q = posenc_tensor_of_buffer(buffer, POSENC_DTYPE_F32, 3, lost_shape)};
    cl_event done = NULL;
    CHECK_OK(posenc_cl_enqueue_rope(ctx, &rope, 0, NULL, &done)); /* kernels and table made */
    if (done) {
        CHECK(clWaitForEvents(1, &done) == CL_SUCCESS);
        clReleaseEvent(done);
        done = NULL;
    }

    static float host[LOST_ELEMENTS];
    memset(host, 0x5a, sizeof host);
    unsigned char before[sizeof host];
    memcpy(before, host, sizeof host);
    posenc_status status = POSENC_OK;
    if (strcmp(call, "clEnqueueNDRangeKernel") == 0) {
        arm_lost(call, as_status);
        status = posenc_cl_enqueue_rope(ctx, &rope, 0, NULL, &done);
        CHECK(done == NULL);
    } else if (strcmp(call, "clEnqueueWriteBuffer") == 0) {
        arm_lost(call, as_status);
        status = posenc_buffer_upload(buffer, 0, data, sizeof data);
    } else if (strcmp(call, "clEnqueueReadBuffer") == 0) {
        arm_lost(call, as_status);
        status = posenc_buffer_download(buffer, 0, host, sizeof host);
        CHECK(memcmp(host, before, sizeof host) == 0);
    } else if (strcmp(call, "clEnqueueMapBuffer") == 0) {
        void *mapped = &host; /* must stay as it is */
        arm_lost(call, as_status);
        status = posenc_buffer_map(buffer, &mapped);
        CHECK(mapped == (void *)&host);
    } else {
        /* The engine's own call sees the loss first. */
        CHECK_OK(posenc_cl_enqueue_rope(ctx, &rope, 0, NULL, &done));
        CHECK(clFlush(e.queue) == CL_SUCCESS);
        arm_lost(call, as_status);
        cl_int execution = CL_COMPLETE;
        if (strcmp(call, "clWaitForEvents") == 0) {
            CHECK(clWaitForEvents(1, &done) == CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST);
            CHECK(clGetEventInfo(done, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof execution,
                                 &execution, NULL) == CL_SUCCESS);
        } else if (strcmp(call, "clGetEventInfo") == 0) {
            CHECK(clGetEventInfo(done, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof execution,
                                 &execution, NULL) == CL_SUCCESS);
        } else {
            execution = clFinish(e.queue);
        }
        CHECK(execution == CL_DEVICE_NOT_AVAILABLE);
        expect_fired(call);
        clReleaseEvent(done);
        done = NULL;
        /* posenc learns of it at its next enqueue, which the runtime refuses. */
        faults.arm("*", 0, 0, 0);
        status = posenc_cl_enqueue_rope(ctx, &rope, 0, NULL, &done);
        CHECK(done == NULL);
        CHECK(faults.count("clEnqueueNDRangeKernel") == 1);
        call = NULL;
    }
    if (call) {
        check_failed(status, ctx, call);
    } else {
        CHECK_STATUS(status, POSENC_DEVICE_LOST);
        check_lost_message(ctx);
        CHECK_MESSAGE(posenc_context_last_error(ctx), "CL_DEVICE_NOT_AVAILABLE");
    }
    CHECK(faults.lost(e.context));
    check_lost_for_good(ctx, buffer, NULL);
    posenc_buffer *wrapped = buffer; /* must stay as it is */
    CHECK_STATUS(posenc_cl_buffer_wrap(ctx, e.mem, &wrapped), POSENC_DEVICE_LOST);
    CHECK(wrapped == buffer);
    check_lost_message(ctx);
    posenc_buffer_destroy(buffer);
    posenc_context_destroy(ctx);
    /* posenc released what it retained, and only that. The buffer is released before the
     * queue is counted: the runtime may keep the event of the last command that wrote a buffer
     * (and with it the queue) while the buffer lives. */
    static const int order[3] = {0, 2, 1};
    for (int i = 0; i < 3; i++) {
        int which = order[i];
        cl_uint count = settled(&e, which, held[which]);
        if (count != held[which]) {
            test_failures++;
            fprintf(stderr, "%s: the engine's object %d has %u references, not its own %u\n",
                    NAME, which, count, held[which]);
        }
        if (which == 2) {
            CHECK(clReleaseMemObject(e.mem) == CL_SUCCESS);
            e.mem = NULL;
        }
    }
    engine_destroy(&e);
    check_others_work(bystander);
    posenc_context_destroy(bystander);
}

/* ---- No loss; a fault from the environment --------------------------------------------------- */

/* CL_OUT_OF_RESOURCES from the kernel's enqueue fails that call (out of device memory), but
 * loses nothing: the next call works. */
static void not_lost(void)
{
    posenc_context *ctx = opencl_context();
    if (!ctx) {
        test_failures++;
        return;
    }
    lost_check_working(ctx, NAME, "before the failure");
    static float q[LOST_ELEMENTS], before[LOST_ELEMENTS];
    lost_fill(q, 0.5f);
    memcpy(before, q, sizeof q);
    posenc_rope_desc rope = {.q = posenc_tensor_of_host(q, POSENC_DTYPE_F32, 3, lost_shape)};
    faults.arm("clEnqueueNDRangeKernel", 1, CL_OUT_OF_RESOURCES, 0);
    CHECK_STATUS(posenc_rope(ctx, &rope), POSENC_OUT_OF_DEVICE_MEMORY);
    expect_fired("clEnqueueNDRangeKernel");
    CHECK_MESSAGE(posenc_context_last_error(ctx), "CL_OUT_OF_RESOURCES");
    CHECK(strstr(posenc_context_last_error(ctx), "lost") == NULL);
    CHECK(memcmp(q, before, sizeof q) == 0);
    lost_check_working(ctx, NAME, "after the failure");
    posenc_context_destroy(ctx);
}

/* The environment armed the loss at the process's first kernel enqueue: posenc's first RoPE. */
static void lost_from_environment(void)
{
    posenc_context *ctx = opencl_context();
    if (!ctx) {
        test_failures++;
        return;
    }
    static float q[LOST_ELEMENTS], before[LOST_ELEMENTS];
    lost_fill(q, 0.5f);
    memcpy(before, q, sizeof q);
    posenc_rope_desc rope = {.q = posenc_tensor_of_host(q, POSENC_DTYPE_F32, 3, lost_shape)};
    check_failed(posenc_rope(ctx, &rope), ctx, "clEnqueueNDRangeKernel");
    CHECK(faults.count("clEnqueueNDRangeKernel") == 1);
    CHECK(memcmp(q, before, sizeof q) == 0);
    check_lost_for_good(ctx, NULL, NULL);
    posenc_context_destroy(ctx);
    check_others_work(NULL);
}

/* ---- Points ---------------------------------------------------------------------------------- */

typedef struct point {
    const char *name;
    const char *call;
    bool as_status;
    void (*run)(const char *call, bool as_status);
} point;

static void run_submit(const char *call, bool as_status) { lost_submit(call, as_status, false); }
static void run_timed(const char *call, bool as_status) { lost_submit(call, as_status, true); }

static const point points[] = {
    {"kernel_sync", "clEnqueueNDRangeKernel", false, lost_sync},
    {"kernel_submit", "clEnqueueNDRangeKernel", false, run_submit},
    {"kernel_engine", "clEnqueueNDRangeKernel", false, lost_engine},
    {"write_sync", "clEnqueueWriteBuffer", false, lost_sync},
    {"write_buffer", "clEnqueueWriteBuffer", false, lost_buffer},
    {"write_engine", "clEnqueueWriteBuffer", false, lost_engine},
    {"read_sync", "clEnqueueReadBuffer", false, lost_sync},
    {"read_buffer", "clEnqueueReadBuffer", false, lost_buffer},
    {"read_submit", "clEnqueueReadBuffer", false, run_submit},
    {"read_engine", "clEnqueueReadBuffer", false, lost_engine},
    {"map_sync", "clEnqueueMapBuffer", false, lost_sync_in_place},
    {"map_buffer", "clEnqueueMapBuffer", false, lost_buffer},
    {"map_engine", "clEnqueueMapBuffer", false, lost_engine},
    {"wait_sync", "clWaitForEvents", true, lost_sync},
    {"wait_buffer", "clWaitForEvents", true, lost_buffer},
    {"wait_submit", "clWaitForEvents", true, run_submit},
    {"wait_engine", "clWaitForEvents", true, lost_engine},
    {"status_sync", "clGetEventInfo", true, lost_sync},
    {"status_submit", "clGetEventInfo", true, run_submit},
    {"status_timed", "clGetEventInfo", true, run_timed},
    {"status_engine", "clGetEventInfo", true, lost_engine},
    {"flush_submit", "clFlush", false, run_submit},
    {"finish_engine", "clFinish", true, lost_engine},
};

int main(int argc, char **argv)
{
    const char *name = argc > 1 ? argv[1] : "";
    const point *chosen = NULL;
    for (size_t i = 0; i < sizeof points / sizeof points[0]; i++) {
        if (strcmp(points[i].name, name) == 0)
            chosen = &points[i];
    }
    bool environment = strcmp(name, "env_sync") == 0;
    if (!chosen && !environment && strcmp(name, "not_lost_sync") != 0) {
        fprintf(stderr, "usage: %s POINT_MODE (kernel_sync, wait_engine, ...: see the source)\n",
                NAME);
        return 2;
    }
    /* The double stands in front of one driver (PoCL by default): where it is not installed
     * (a GPU machine with its vendor's OpenCL alone) there is nothing to run it on. */
    const char *real = getenv("POSENC_CL_FAULT_ICD");
    void *driver = real ? dlopen(real, RTLD_NOW | RTLD_LOCAL) : NULL;
    if (!driver) {
        printf("%s: skipped: the fault ICD's driver %s is not installed\n", NAME,
               real ? real : "(POSENC_CL_FAULT_ICD unset)");
        return TEST_SKIP_CODE;
    }
    dlclose(driver);
    posenc_context *probe = opencl_context();
    if (!probe)
        return test_device_absent(NAME, "opencl", posenc_thread_last_error());
    posenc_context_destroy(probe);
    if (!load_double()) {
        test_failures++;
        return test_finish(NAME);
    }
    printf("%s: %s\n", NAME, name);
    if (!environment)
        faults.arm("*", 0, 0, 0); /* counts from here; the environment arms nothing here */
    if (chosen)
        chosen->run(chosen->call, chosen->as_status);
    else if (environment)
        lost_from_environment();
    else
        not_lost();
    return test_finish(NAME);
}
