/* SPDX-License-Identifier: MIT */
/* posenc inside an OpenCL engine: the engine's cl_context, device and queue as a posenc context,
 * its cl_mem buffers as posenc buffers, and RoPE / sinusoidal encodings enqueued on its queue
 * after its own events. Include this header only where you use OpenCL; it needs the OpenCL
 * headers (CL/cl.h), not a link with libOpenCL: posenc loads the ICD loader at run time, the
 * same loader your handles come from. The functions exist in builds of posenc with the OpenCL
 * backend (posenc_backend_status(POSENC_BACKEND_OPENCL, ...) tells whether a runtime loaded).
 *
 *   posenc_context_desc desc = {.opencl = posenc_opencl_external_of(context, device, queue)};
 *   posenc_context_create(&desc, &ctx);
 *   posenc_cl_buffer_wrap(ctx, q_mem, &q);            (views of q: posenc_tensor_of_buffer ...)
 *   posenc_cl_enqueue_rope(ctx, &rope, 1, &written, &rotated);
 *   ... clEnqueueNDRangeKernel(queue, attention, ..., 1, &rotated, NULL); clReleaseEvent(rotated);
 *
 * Contexts on the caller's objects
 * - The context, device and queue are borrowed: retained by posenc_context_create and released
 *   by posenc_context_destroy, never destroyed. The device must be one of the context's and the
 *   queue created on both; otherwise posenc_context_create fails naming `opencl.<field>`.
 * - The queue may be in-order or out-of-order: posenc makes each of its commands wait for its
 *   previous one, so posenc's own work runs in call order either way.
 * - posenc_rope / posenc_sinusoidal (and host tensors) work as on any context: they enqueue on
 *   the caller's queue and wait for their own commands only (never clFinish on the queue).
 *   posenc_context_finish, posenc_buffer_destroy and posenc_context_destroy also wait for
 *   posenc's commands only: work enqueued after an event that is never set would wait forever
 *   (see "Teardown").
 * - posenc_context_device describes the caller's device (backend_index 0: it is not one of the
 *   devices posenc enumerates). Kernels are built on first use through the program binary cache
 *   (posenc_context_desc.cache_dir), as for contexts posenc creates, or ahead of it by
 *   posenc_prepare (posenc.h, "Warm-up"), so that the first enqueue builds nothing.
 *
 * Teardown: what must have completed before each destroy call
 * - posenc_buffer_destroy and posenc_context_destroy wait, inside the call, until every
 *   command posenc enqueued on the queue is complete (posenc_cl_enqueue_*, submits, synchronous
 *   calls and copies), and for nothing else: never clFinish on the queue. Hence, before either,
 *   every event in a wait list given to posenc_cl_enqueue_* must be complete or certain to
 *   complete without the calling thread: a user event already set (clSetUserEventStatus) or
 *   set by another thread, a command of the caller's already flushed. Otherwise the destroy
 *   waits forever. That is the only requirement: OpenCL keeps memory that enqueued commands use
 *   until they are done, and posenc's own commands are over when the call returns.
 * - The wrapped cl_mem, the context, device and queue are retained by posenc: the caller may
 *   release its own references whenever it likes; posenc releases its own in the destroy.
 * - Events that posenc_cl_enqueue_* returned are the caller's, released with clReleaseEvent
 *   before or after the destroy. posenc_event_destroy does not wait.
 *
 * Threads
 * - A posenc context serialises its own state: posenc_cl_enqueue_rope and
 *   posenc_cl_enqueue_sinusoidal may be called from several threads at once on one context,
 *   and meanwhile other threads may wrap buffers (posenc_cl_buffer_wrap), create, upload,
 *   download and destroy them. Other calls on the context keep the rule of posenc.h (not while
 *   any other call on the context runs).
 * - Destroying a buffer while another thread's enqueue call uses it is the caller's error.
 *   Work already enqueued is not: posenc_buffer_destroy waits for posenc's commands first.
 * - posenc_context_last_error gives each thread a whole message: that of whichever call on the
 *   context failed or succeeded last (see posenc.h).
 * - The caller may use its queue from its own threads meanwhile, as OpenCL allows.
 *
 * Frequency tables
 * - A RoPE or sinusoidal table is computed on the host and copied to a device buffer of its own
 *   at creation (CL_MEM_COPY_HOST_PTR: no host memory has to outlive the call and nothing waits
 *   on the queue). The context keeps the last 4 tables, keyed by their inputs, so repeated calls
 *   (every decode step of every layer) reuse them; a table dropped from that small cache while
 *   enqueued work still reads it is released with clReleaseMemObject, which OpenCL defers until
 *   that work is done.
 */
#ifndef POSENC_POSENC_OPENCL_H
#define POSENC_POSENC_OPENCL_H

#include <posenc/posenc.h>

#ifndef CL_TARGET_OPENCL_VERSION
#  define CL_TARGET_OPENCL_VERSION 120
#endif
#if defined(__APPLE__)
#  include <OpenCL/cl.h>
#else
#  include <CL/cl.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* posenc_context_desc.opencl from typed handles. */
static inline posenc_opencl_external posenc_opencl_external_of(cl_context context,
                                                               cl_device_id device,
                                                               cl_command_queue queue)
{
    posenc_opencl_external external;
    external.context = context;
    external.device = device;
    external.queue = queue;
    return external;
}

/* A posenc buffer over `mem`, a buffer (or sub-buffer) of the context's cl_context, so that
 * tensor views and every check of posenc apply to the engine's memory. `mem` is borrowed:
 * retained here, released by posenc_buffer_destroy (which first waits for posenc's commands).
 * Its size is CL_MEM_SIZE. Wrap a cl_mem once: posenc sees aliasing within one buffer, not
 * between two wraps of the same memory. */
POSENC_API posenc_status posenc_cl_buffer_wrap(posenc_context *context, cl_mem mem,
                                               posenc_buffer **buffer);

/* Validates `desc` exactly like posenc_rope (same errors, nothing enqueued or written on
 * failure), then enqueues the work on the context's queue after the `num_events_in_wait_list`
 * events of `event_wait_list` (and after posenc's previous commands), and returns without
 * waiting or flushing. Every tensor must be a posenc_buffer view (host views are
 * INVALID_ARGUMENT, naming the tensor; buffers wrapping host_memory are UNSUPPORTED unless
 * the device imported them at their creation: posenc_device_info.host_memory_import). `event`
 * (optional) receives an event that completes when all of the work is done; release it with
 * clReleaseEvent. An OpenCL error from the enqueue (an invalid wait list, ...) becomes a status
 * with a message naming the call and the error. */
POSENC_API posenc_status posenc_cl_enqueue_rope(posenc_context *context,
                                                const posenc_rope_desc *desc,
                                                cl_uint num_events_in_wait_list,
                                                const cl_event *event_wait_list,
                                                cl_event *event);
/* The same for posenc_sinusoidal. */
POSENC_API posenc_status posenc_cl_enqueue_sinusoidal(posenc_context *context,
                                                      const posenc_sinusoidal_desc *desc,
                                                      cl_uint num_events_in_wait_list,
                                                      const cl_event *event_wait_list,
                                                      cl_event *event);

#ifdef __cplusplus
}
#endif

#endif /* POSENC_POSENC_OPENCL_H */
