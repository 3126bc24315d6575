/* SPDX-License-Identifier: MIT */
/* posenc inside a Vulkan engine: typed interop for callers that own the instance, device, queues
 * and buffers, and record posenc's work into their own command buffers.
 * Include this header only if you use Vulkan; posenc.h stays free of vendor headers.
 *
 * Setting up
 *   posenc_context_desc desc = {
 *       .vulkan = posenc_vulkan_external_of(instance, physical_device, device, family, queue,
 *                                           vkGetInstanceProcAddr,
 *                                           POSENC_VULKAN_FEATURE_PUSH_DESCRIPTOR),
 *   };
 *   posenc_context_create(&desc, &ctx);       // borrowed: nothing of the caller's is destroyed
 *   posenc_vk_buffer_wrap(ctx, q_buffer, 0, q_bytes, &q);    // the engine's VkBuffers
 *   ...
 *   posenc_rope_desc rope = {.q = posenc_tensor_of_buffer(q, POSENC_DTYPE_F32, 3, shape), ...};
 *   posenc_vk_cmd_rope(ctx, command_buffer, &rope);          // recorded, not submitted
 *
 * Synchronization contract of posenc_vk_cmd_rope / posenc_vk_cmd_sinusoidal
 * - posenc records only vkCmdBindPipeline, descriptor binding (vkCmdPushDescriptorSetKHR or
 *   vkCmdBindDescriptorSets), vkCmdPushConstants and vkCmdDispatch (each dispatch inside a
 *   vkCmdBeginDebugUtilsLabelEXT / vkCmdEndDebugUtilsLabelEXT pair with
 *   POSENC_VULKAN_FEATURE_DEBUG_UTILS, see "Debug names" below), plus a compute-to-compute
 *   memory barrier between two of its own dispatches of the same call that touch the same bytes
 *   (q and k slices of one fused buffer, or a tensor split because it is larger than
 *   maxStorageBufferRange). No submission, no waiting, no queue access, no other barriers; the
 *   command buffer must be in the recording state, outside a render pass. posenc leaves the
 *   compute pipeline, descriptor set 0 and push constants bound: rebind yours afterwards.
 * - Every binding is used at VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT: inputs (q, k, x, positions)
 *   with VK_ACCESS_SHADER_READ_BIT, outputs (q_out, k_out, out, and q, k in place) with
 *   VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT. posenc's own frequency tables are
 *   host-written before the call returns and need nothing from the caller.
 * - Before the call, make the caller's writes of every tensor posenc reads or writes available
 *   and visible to compute-shader reads and writes; after it, make posenc's writes visible to
 *   their next reader (the caller's pass, or another posenc call on the same memory). For a
 *   compute producer and a compute consumer, exactly:
 *
 *     VkMemoryBarrier barrier = {
 *         .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
 *         .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
 *         .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT,
 *     };
 *     vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
 *                          VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &barrier, 0, NULL, 0,
 *                          NULL);
 *
 *   before the call, and the same barrier after it. Other producers or consumers change only
 *   their side (a transfer: VK_PIPELINE_STAGE_TRANSFER_BIT with VK_ACCESS_TRANSFER_WRITE_BIT /
 *   _READ_BIT; a vertex shader: VK_PIPELINE_STAGE_VERTEX_SHADER_BIT; the host after a fence:
 *   VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT). Buffer memory barriers over the same
 *   ranges work too. Queue family ownership transfers, if the buffers move between families,
 *   are the caller's.
 *
 * Lifetime of recorded work
 * - A recorded command buffer stays valid, and may be submitted later and any number of times,
 *   until the context is destroyed, whatever is recorded or run on the context after it, as
 *   long as the buffers it binds are alive. Any number of distinct frequency tables may be
 *   recorded (dynamic NTK: one per decode step), in bounded memory. The first 256 (up to 4 MiB)
 *   live in device memory of their own until the context is destroyed; past them, the command
 *   buffer writes its table itself (a barrier, vkCmdUpdateBuffer into a 64-slot ring, a
 *   barrier, before the dispatch), so a later submit still reads the right one. Two command
 *   buffers carrying such tables must not run at the same time on different queues unless they
 *   were recorded fewer than 64 such tables apart. Destroying a posenc_buffer frees the
 *   descriptor sets that bind its VkBuffer (for wraps: when no other wrap of that VkBuffer is
 *   alive): see "Teardown" below.
 * - Descriptors: with POSENC_VULKAN_FEATURE_PUSH_DESCRIPTOR they are pushed into the command
 *   buffer and nothing is allocated. Without it, posenc keeps one descriptor set per distinct
 *   set of bound ranges (buffer, offset, range of each binding), written at its first use and
 *   never rewritten, from pools of its own that grow by 64 sets: recording the same tensors
 *   again (every frame) allocates and writes nothing, and sets are recycled only when a buffer
 *   they bind is destroyed (or with the context).
 * - On failure nothing is recorded, except for an OUT_OF_MEMORY / OUT_OF_DEVICE_MEMORY while
 *   allocating descriptor sets (pool path) in the middle of a split call: reset the command
 *   buffer then.
 *
 * Warm-up
 * - A context creates each pipeline, and each frequency table's device memory, at the first
 *   record that needs it (milliseconds on some drivers). posenc_prepare (posenc.h, "Warm-up")
 *   creates them ahead, while the engine loads, so that the first record creates nothing.
 *
 * Teardown: what must have completed before each destroy call
 * - posenc waits, inside the destroy, for what it submitted itself to the context's queue
 *   (posenc_rope, posenc_sinusoidal, the submits, staged uploads and downloads): their fences.
 *   It cannot see the caller's submissions of command buffers that posenc_vk_cmd_* recorded
 *   into, and it never waits for the caller's queue or device (no vkQueueWaitIdle, no
 *   vkDeviceWaitIdle on a caller's device: the engine's other work may go on meanwhile).
 * - posenc_buffer_destroy(b): every command buffer into which posenc_vk_cmd_* recorded a
 *   command using b has completed execution, and none of them is submitted again (reset,
 *   re-record or free them): the descriptor sets binding b are freed, and a VkBuffer that
 *   posenc allocated is destroyed. Destroy a wrap before the caller's VkBuffer it wraps.
 * - posenc_context_destroy(ctx): every command buffer into which posenc_vk_cmd_* recorded
 *   anything on ctx has completed execution, and none of them is submitted again (ctx's
 *   pipelines, layouts, descriptor sets and frequency tables are destroyed); and no other
 *   call on ctx runs. The caller's VkDevice and VkInstance are destroyed after it.
 * - A sufficient rule for an engine: the fence of its last submission that contains posenc's
 *   commands has signalled (or vkDeviceWaitIdle has returned).
 * - posenc_event_destroy needs nothing (it does not wait). On posenc's own device
 *   (posenc_context_desc.vulkan.device NULL, or a device posenc picked) posenc_context_destroy
 *   also waits for the whole device.
 * - Destroying too early cannot be caught by posenc; the validation layer reports it
 *   (VUID-vkDestroyBuffer-buffer-00922, VUID-vkFreeDescriptorSets-pDescriptorSets-00309,
 *   VUID-vkDestroyPipeline-pipeline-00765), naming posenc's objects when the context has
 *   POSENC_VULKAN_FEATURE_DEBUG_UTILS ("VkBuffer 0x... [posenc buffer]").
 *
 * Debug names (POSENC_VULKAN_FEATURE_DEBUG_UTILS: VK_EXT_debug_utils enabled on the instance)
 * - Every object posenc creates on the device is named once, when made, with
 *   vkSetDebugUtilsObjectNameEXT: pipelines after their kernel ("posenc rope f16",
 *   "posenc rope bf16 s16" with 16-bit storage, "posenc sinusoidal f32"), "posenc pipeline
 *   layout", "posenc descriptor set layout", "posenc descriptor pool", "posenc pipeline cache",
 *   buffers and their memory ("posenc buffer", "posenc staging", "posenc frequency table",
 *   "posenc frequency table ring", "posenc placeholder", "posenc imported host memory"), and
 *   with a queue "posenc command pool", "posenc command buffer", "posenc fence", "posenc
 *   submission command buffer", "posenc submission fence". The caller's objects (wrapped
 *   VkBuffers too) keep their names.
 * - Each dispatch posenc records, into the caller's command buffer or its own, lies inside a
 *   label of its pipeline's name, opened and closed around it, and so does each write of a
 *   frequency table into the ring ("posenc frequency table write"): a label the caller opened
 *   before the call stays open, and encloses posenc's.
 * - Without the flag posenc calls none of these functions, even where the instance has the
 *   extension. The functions come from vulkan.get_instance_proc_addr; with the flag set on an
 *   instance that lacks them, posenc_context_create fails (INVALID_ARGUMENT naming
 *   vulkan.enabled_features).
 *
 * Threads
 * - Recording from several threads at once into different command buffers on the same context
 *   is safe: the context serialises its internal state (validation, frequency tables, descriptor
 *   sets, pipelines) with a mutex, so such calls run one after another. Meanwhile other threads
 *   may wrap buffers (posenc_vk_buffer_wrap), create, upload, download and destroy them, e.g.
 *   an engine wrapping the buffers of a new layer while another thread records the last one.
 * - Destroying a buffer while another thread records with it is the caller's error, as is
 *   destroying one while a command buffer recorded with it may still run (see "Teardown").
 * - posenc_context_last_error gives each thread a whole message: that of whichever call on the
 *   context failed or succeeded last (see posenc.h).
 * - Every other call on the context (posenc_rope, posenc_sinusoidal, submits and events,
 *   destroying the context) still needs the context to itself, as posenc.h says; and the
 *   caller's queue, when given, must not be used by another thread while posenc submits to it
 *   (Vulkan's external synchronisation of queues): posenc submits only inside posenc_rope,
 *   posenc_sinusoidal, posenc_*_submit and staged buffer uploads and downloads (those of
 *   posenc_buffer_create's initial_data included), one submission at a time per context.
 */
#ifndef POSENC_POSENC_VULKAN_H
#define POSENC_POSENC_VULKAN_H

#include <posenc/posenc.h>
#include <vulkan/vulkan.h>

#ifdef __cplusplus
extern "C" {
#endif

/* posenc_context_desc.vulkan from typed handles (queue may be VK_NULL_HANDLE: record only).
 * allocation_callbacks and pipeline_cache stay default; set them on the result. */
static inline posenc_vulkan_external posenc_vulkan_external_of(
    VkInstance instance, VkPhysicalDevice physical_device, VkDevice device,
    uint32_t queue_family, VkQueue queue, PFN_vkGetInstanceProcAddr get_instance_proc_addr,
    uint32_t enabled_features)
{
    posenc_vulkan_external external;
    external.instance = instance;
    external.physical_device = physical_device;
    external.device = device;
    external.queue_family = queue_family;
    external.queue = queue;
    external.get_instance_proc_addr = (void (*)(void))get_instance_proc_addr;
    external.enabled_features = enabled_features;
    external.allocation_callbacks = NULL;
    external.pipeline_cache = 0;
    return external;
}

/* A posenc_buffer over [offset, offset + range) of the caller's VkBuffer, so that tensor views
 * and all of posenc's validation apply to it. Borrowed: posenc_buffer_destroy frees only posenc's
 * record and descriptor sets (destroy it before the VkBuffer, once the command buffers recorded
 * with it have completed: see "Teardown"). The VkBuffer needs VK_BUFFER_USAGE_STORAGE_BUFFER_BIT
 * (and TRANSFER_SRC/DST for posenc_buffer_upload/download, which copy through a staging buffer
 * and need the context's queue); `offset` must be a multiple of 16 and of the device's
 * minStorageBufferOffsetAlignment; range > 0 (VK_WHOLE_SIZE is not accepted: give the size). */
POSENC_API posenc_status posenc_vk_buffer_wrap(posenc_context *context, VkBuffer buffer,
                                               VkDeviceSize offset, VkDeviceSize range,
                                               posenc_buffer **wrapped);

/* Validates exactly like posenc_rope / posenc_sinusoidal (same errors), then records the work
 * into `command_buffer` (see the synchronization contract above). Every tensor must be a
 * posenc_buffer view (wrapped or created by posenc): host tensors are INVALID_ARGUMENT and
 * buffers wrapping host_memory UNSUPPORTED unless imported at their creation (a unified-memory
 * device with VK_EXT_external_memory_host enabled, given as
 * POSENC_VULKAN_FEATURE_HOST_MEMORY_IMPORT), naming the tensor. The context must be on the
 * caller's device (posenc_context_desc.vulkan.device). */
POSENC_API posenc_status posenc_vk_cmd_rope(posenc_context *context,
                                            VkCommandBuffer command_buffer,
                                            const posenc_rope_desc *desc);
POSENC_API posenc_status posenc_vk_cmd_sinusoidal(posenc_context *context,
                                                  VkCommandBuffer command_buffer,
                                                  const posenc_sinusoidal_desc *desc);

#ifdef __cplusplus
}
#endif

#endif /* POSENC_POSENC_VULKAN_H */
