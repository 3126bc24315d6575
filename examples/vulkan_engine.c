/* SPDX-License-Identifier: MIT */
/* posenc inside a Vulkan engine: a headless "engine" owns its instance, device, queue and
 * buffers. At load it has posenc build what the frames will need (posenc_prepare); then, frame
 * after frame, it re-records ONE command buffer and submits it:
 *   1. its own compute pass, which writes q and k (vulkan_engine_fill.comp),
 *   2. posenc's RoPE on q and k, in place (posenc_vk_cmd_rope), at positions moving on by the
 *      frame's tokens,
 *   3. its own pass, which reads them to compute attention logits (vulkan_engine_scores.comp),
 * with the barriers of posenc_vulkan.h's synchronization contract between them. Where the
 * instance offers VK_EXT_debug_utils the engine enables it, listens with a messenger, labels its
 * own passes and tells posenc (POSENC_VULKAN_FEATURE_DEBUG_UTILS), which then names its objects
 * and labels its dispatches: a capture tool shows "engine fill", "posenc rope f32", "engine
 * scores", and validation messages name posenc's objects. Each frame's logits are checked
 * against a float64 reference; the exit code is non-zero on a mismatch, or when the validation layer
 * (VK_INSTANCE_LAYERS=VK_LAYER_KHRONOS_validation) reports anything.
 * Usage: vulkan_engine [DIRECTORY_OF_SPV_FILES] */
#include <posenc/posenc_vulkan.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef EXAMPLE_SHADER_DIR
#define EXAMPLE_SHADER_DIR "."
#endif

enum { TOKENS = 8, Q_HEADS = 4, K_HEADS = 2, HEAD_DIM = 64, POSITION_OFFSET = 1000, FRAMES = 3 };
#define Q_COUNT (TOKENS * Q_HEADS * HEAD_DIM)
#define K_COUNT (TOKENS * K_HEADS * HEAD_DIM)
#define SCORE_COUNT (Q_HEADS * TOKENS * TOKENS)
#define THETA 10000.0

static int validation_messages;

static VKAPI_ATTR VkBool32 VKAPI_CALL on_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                 VkDebugUtilsMessageTypeFlagsEXT types,
                                                 const VkDebugUtilsMessengerCallbackDataEXT *data,
                                                 void *user)
{
    (void)severity, (void)types, (void)user;
    validation_messages++;
    fprintf(stderr, "validation: %s\n", data->pMessage);
    return VK_FALSE;
}

#define VK_CHECK(call)                                                                          \
    do {                                                                                        \
        VkResult result_ = (call);                                                              \
        if (result_ != VK_SUCCESS) {                                                            \
            fprintf(stderr, "%s failed: %d\n", #call, (int)result_);                            \
            exit(1);                                                                            \
        }                                                                                       \
    } while (0)

/* The barrier of the contract: compute writes made visible to compute reads and writes. */
static void compute_barrier(VkCommandBuffer cmd)
{
    VkMemoryBarrier barrier = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
        .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
        .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT,
    };
    vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                         VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &barrier, 0, NULL, 0, NULL);
}

/* ---- the engine's plumbing: nothing here is specific to posenc ------------------------------ */

typedef struct engine {
    VkInstance instance;
    VkDebugUtilsMessengerEXT messenger;
    VkPhysicalDevice physical;
    VkDevice device;
    uint32_t family;
    VkQueue queue;
    bool push_descriptor;
    PFN_vkCmdBeginDebugUtilsLabelEXT begin_label; /* NULL without VK_EXT_debug_utils */
    PFN_vkCmdEndDebugUtilsLabelEXT end_label;
    VkBuffer buffer; /* q, k and scores, one after the other */
    VkDeviceMemory memory;
    float *mapped;
} engine;

static bool has_instance_extension(const char *name)
{
    uint32_t count = 0;
    vkEnumerateInstanceExtensionProperties(NULL, &count, NULL);
    VkExtensionProperties *list = calloc(count + 1, sizeof *list);
    bool found = false;
    vkEnumerateInstanceExtensionProperties(NULL, &count, list);
    for (uint32_t i = 0; i < count && !found; i++)
        found = strcmp(list[i].extensionName, name) == 0;
    free(list);
    return found;
}

static bool has_device_extension(VkPhysicalDevice physical, const char *name)
{
    uint32_t count = 0;
    vkEnumerateDeviceExtensionProperties(physical, NULL, &count, NULL);
    VkExtensionProperties *list = calloc(count + 1, sizeof *list);
    bool found = false;
    vkEnumerateDeviceExtensionProperties(physical, NULL, &count, list);
    for (uint32_t i = 0; i < count && !found; i++)
        found = strcmp(list[i].extensionName, name) == 0;
    free(list);
    return found;
}

static void engine_create(engine *e)
{
    bool debug = has_instance_extension(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
    const char *debug_extension = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;
    VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                             .pApplicationName = "posenc vulkan_engine",
                             .apiVersion = VK_API_VERSION_1_1};
    VkInstanceCreateInfo instance_info = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                                          .pApplicationInfo = &app,
                                          .enabledExtensionCount = debug ? 1 : 0,
                                          .ppEnabledExtensionNames = &debug_extension};
    VkResult created = vkCreateInstance(&instance_info, NULL, &e->instance);
    if (created == VK_ERROR_INCOMPATIBLE_DRIVER) {
        /* A loader without any driver (VK_ICD_FILENAMES naming none, or a machine whose GPU
         * driver installs no Vulkan part): no device, as below. */
        fprintf(stderr, "no Vulkan driver\n");
        exit(77);
    }
    VK_CHECK(created);
    if (debug) {
        PFN_vkCreateDebugUtilsMessengerEXT create =
            (PFN_vkCreateDebugUtilsMessengerEXT)vkGetInstanceProcAddr(
                e->instance, "vkCreateDebugUtilsMessengerEXT");
        VkDebugUtilsMessengerCreateInfoEXT messenger_info = {
            .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
            .messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                               VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
            .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                           VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT,
            .pfnUserCallback = on_message,
        };
        VK_CHECK(create(e->instance, &messenger_info, NULL, &e->messenger));
        e->begin_label = (PFN_vkCmdBeginDebugUtilsLabelEXT)vkGetInstanceProcAddr(
            e->instance, "vkCmdBeginDebugUtilsLabelEXT");
        e->end_label = (PFN_vkCmdEndDebugUtilsLabelEXT)vkGetInstanceProcAddr(
            e->instance, "vkCmdEndDebugUtilsLabelEXT");
    }

    uint32_t count = 1;
    VkResult result = vkEnumeratePhysicalDevices(e->instance, &count, &e->physical);
    if ((result != VK_SUCCESS && result != VK_INCOMPLETE) || count == 0) {
        /* 77: "skipped" for CTest, unless the build requires Vulkan devices (CI: lavapipe). */
        fprintf(stderr, "no Vulkan device\n");
        exit(77);
    }
    VkQueueFamilyProperties families[16];
    count = 16;
    vkGetPhysicalDeviceQueueFamilyProperties(e->physical, &count, families);
    for (e->family = 0; e->family < count; e->family++) {
        if (families[e->family].queueFlags & VK_QUEUE_COMPUTE_BIT)
            break;
    }
    e->push_descriptor = has_device_extension(e->physical, VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME);
    const char *device_extension = VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME;
    float priority = 1.0f;
    VkDeviceQueueCreateInfo queue_info = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                          .queueFamilyIndex = e->family,
                                          .queueCount = 1,
                                          .pQueuePriorities = &priority};
    VkDeviceCreateInfo device_info = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                                      .queueCreateInfoCount = 1,
                                      .pQueueCreateInfos = &queue_info,
                                      .enabledExtensionCount = e->push_descriptor ? 1 : 0,
                                      .ppEnabledExtensionNames = &device_extension};
    VK_CHECK(vkCreateDevice(e->physical, &device_info, NULL, &e->device));
    vkGetDeviceQueue(e->device, e->family, 0, &e->queue);

    /* One host-visible buffer (a real engine would use device-local memory and a staging copy
     * for its readback; posenc does not care which). */
    VkBufferCreateInfo buffer_info = {
        .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
        .size = (Q_COUNT + K_COUNT + SCORE_COUNT) * sizeof(float),
        .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT,
    };
    VK_CHECK(vkCreateBuffer(e->device, &buffer_info, NULL, &e->buffer));
    VkMemoryRequirements requirements;
    vkGetBufferMemoryRequirements(e->device, e->buffer, &requirements);
    VkPhysicalDeviceMemoryProperties memory;
    vkGetPhysicalDeviceMemoryProperties(e->physical, &memory);
    const VkMemoryPropertyFlags wanted =
        VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    uint32_t type = 0;
    while (type < memory.memoryTypeCount &&
           (!(requirements.memoryTypeBits & (1u << type)) ||
            (memory.memoryTypes[type].propertyFlags & wanted) != wanted))
        type++;
    VkMemoryAllocateInfo allocate = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                                     .allocationSize = requirements.size,
                                     .memoryTypeIndex = type};
    VK_CHECK(vkAllocateMemory(e->device, &allocate, NULL, &e->memory));
    VK_CHECK(vkBindBufferMemory(e->device, e->buffer, e->memory, 0));
    VK_CHECK(vkMapMemory(e->device, e->memory, 0, VK_WHOLE_SIZE, 0, (void **)&e->mapped));
}

/* A compute pipeline from a .spv file, with `bindings` storage buffers pushed as descriptors
 * (or, without VK_KHR_push_descriptor, written into a set from `pool`). */
typedef struct pass {
    VkDescriptorSetLayout set_layout;
    VkPipelineLayout layout;
    VkPipeline pipeline;
    VkDescriptorSet set;
    VkDescriptorBufferInfo infos[3];
    uint32_t bindings;
} pass;

static void pass_create(engine *e, pass *p, const char *dir, const char *name, uint32_t bindings,
                        uint32_t push_bytes, VkDescriptorPool pool)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *file = fopen(path, "rb");
    static uint32_t code[16384];
    size_t size = file ? fread(code, 1, sizeof code, file) : 0;
    if (file)
        fclose(file);
    if (size == 0) {
        fprintf(stderr, "cannot read %s\n", path);
        exit(1);
    }
    VkDescriptorSetLayoutBinding binding[3];
    for (uint32_t i = 0; i < bindings; i++)
        binding[i] = (VkDescriptorSetLayoutBinding){i, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1,
                                                    VK_SHADER_STAGE_COMPUTE_BIT, NULL};
    VkDescriptorSetLayoutCreateInfo set_info = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
        .flags = e->push_descriptor ? VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR : 0,
        .bindingCount = bindings,
        .pBindings = binding};
    VK_CHECK(vkCreateDescriptorSetLayout(e->device, &set_info, NULL, &p->set_layout));
    VkPushConstantRange push = {VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes};
    VkPipelineLayoutCreateInfo layout_info = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
        .setLayoutCount = 1,
        .pSetLayouts = &p->set_layout,
        .pushConstantRangeCount = 1,
        .pPushConstantRanges = &push};
    VK_CHECK(vkCreatePipelineLayout(e->device, &layout_info, NULL, &p->layout));
    VkShaderModuleCreateInfo module_info = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                            .codeSize = size,
                                            .pCode = code};
    VkShaderModule module;
    VK_CHECK(vkCreateShaderModule(e->device, &module_info, NULL, &module));
    VkComputePipelineCreateInfo pipeline_info = {
        .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                  .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                  .module = module,
                  .pName = "main"},
        .layout = p->layout};
    VK_CHECK(vkCreateComputePipelines(e->device, VK_NULL_HANDLE, 1, &pipeline_info, NULL,
                                      &p->pipeline));
    vkDestroyShaderModule(e->device, module, NULL);
    p->bindings = bindings;
    if (!e->push_descriptor) {
        VkDescriptorSetAllocateInfo allocate = {
            .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
            .descriptorPool = pool,
            .descriptorSetCount = 1,
            .pSetLayouts = &p->set_layout};
        VK_CHECK(vkAllocateDescriptorSets(e->device, &allocate, &p->set));
    }
}

static void pass_record(engine *e, const pass *p, VkCommandBuffer cmd, const char *label,
                        const void *push, uint32_t push_bytes, uint32_t invocations)
{
    if (e->begin_label) {
        VkDebugUtilsLabelEXT info = {.sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_LABEL_EXT,
                                     .pLabelName = label};
        e->begin_label(cmd, &info);
    }
    VkWriteDescriptorSet writes[3];
    for (uint32_t i = 0; i < p->bindings; i++)
        writes[i] = (VkWriteDescriptorSet){.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
                                           .dstSet = p->set,
                                           .dstBinding = i,
                                           .descriptorCount = 1,
                                           .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                           .pBufferInfo = &p->infos[i]};
    vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p->pipeline);
    if (e->push_descriptor) {
        PFN_vkCmdPushDescriptorSetKHR push_set = (PFN_vkCmdPushDescriptorSetKHR)
            vkGetDeviceProcAddr(e->device, "vkCmdPushDescriptorSetKHR");
        push_set(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p->layout, 0, p->bindings, writes);
    } else {
        vkUpdateDescriptorSets(e->device, p->bindings, writes, 0, NULL);
        vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p->layout, 0, 1, &p->set, 0,
                                NULL);
    }
    vkCmdPushConstants(cmd, p->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes, push);
    vkCmdDispatch(cmd, (invocations + 63) / 64, 1, 1);
    if (e->end_label)
        e->end_label(cmd);
}

static void pass_destroy(engine *e, pass *p)
{
    vkDestroyPipeline(e->device, p->pipeline, NULL);
    vkDestroyPipelineLayout(e->device, p->layout, NULL);
    vkDestroyDescriptorSetLayout(e->device, p->set_layout, NULL);
}

/* ---- the float64 reference ------------------------------------------------------------------ */

/* The values of vulkan_engine_fill.comp, rotated (NeoX pairing) at position offset + t: angles
 * from the double-precision product, reduced by the C library in double. */
static void reference_rotated(double *q, double *k, int32_t offset)
{
    for (int i = 0; i < Q_COUNT; i++)
        q[i] = (double)((i * 7u + 3u) % 17u) / 8.0 - 1.0;
    for (int i = 0; i < K_COUNT; i++)
        k[i] = (double)((i * 5u + 1u) % 13u) / 4.0 - 1.5;
    for (int t = 0; t < TOKENS; t++) {
        for (int h = 0; h < Q_HEADS + K_HEADS; h++) {
            double *x = h < Q_HEADS ? q + (t * Q_HEADS + h) * HEAD_DIM
                                    : k + (t * K_HEADS + h - Q_HEADS) * HEAD_DIM;
            for (int j = 0; j < HEAD_DIM / 2; j++) {
                double angle = (double)(offset + t) * pow(THETA, -2.0 * j / HEAD_DIM);
                double a = x[j], b = x[j + HEAD_DIM / 2];
                x[j] = a * cos(angle) - b * sin(angle);
                x[j + HEAD_DIM / 2] = a * sin(angle) + b * cos(angle);
            }
        }
    }
}

/* The frame's logits against float64: how many are off, and the worst error. Tolerance:
 * posenc's promise (8 * 2^-24 of each rotated pair) plus the f32 dot product of HEAD_DIM terms
 * (at most HEAD_DIM * 2^-24 of the sum of |products|), so 2 * HEAD_DIM * 2^-24 of that sum covers
 * both. */
static int check_scores(const float *result, int32_t offset, double *worst)
{
    static double ref_q[Q_COUNT], ref_k[K_COUNT];
    reference_rotated(ref_q, ref_k, offset);
    int bad = 0;
    for (int h = 0; h < Q_HEADS; h++) {
        for (int i = 0; i < TOKENS; i++) {
            for (int j = 0; j < TOKENS; j++) {
                const double *qv = ref_q + (i * Q_HEADS + h) * HEAD_DIM;
                const double *kv = ref_k + (j * K_HEADS + h / (Q_HEADS / K_HEADS)) * HEAD_DIM;
                double dot = 0.0, magnitude = 0.0;
                for (int d = 0; d < HEAD_DIM; d++) {
                    dot += qv[d] * kv[d];
                    magnitude += fabs(qv[d] * kv[d]);
                }
                double expected = dot / sqrt(HEAD_DIM), scale = magnitude / sqrt(HEAD_DIM);
                double got = result[(h * TOKENS + i) * TOKENS + j];
                double error = fabs(got - expected) / scale;
                *worst = error > *worst ? error : *worst;
                if (!(error <= 2.0 * HEAD_DIM / 16777216.0) && bad++ < 5)
                    fprintf(stderr, "offset %d: scores[%d][%d][%d] = %.9g, expected %.9g\n",
                            (int)offset, h, i, j, got, expected);
            }
        }
    }
    return bad;
}

int main(int argc, char **argv)
{
    const char *shader_dir = argc > 1 ? argv[1] : EXAMPLE_SHADER_DIR;
    engine e = {0};
    engine_create(&e);

    /* ---- posenc on the engine's device: borrowed handles, nothing of them is destroyed ----
     * enabled_features says what the engine enabled: push descriptors on the device, debug
     * utils on the instance (posenc then names its objects and labels its dispatches). */
    posenc_context_desc desc = {
        .vulkan = posenc_vulkan_external_of(
            e.instance, e.physical, e.device, e.family, e.queue, vkGetInstanceProcAddr,
            (e.push_descriptor ? POSENC_VULKAN_FEATURE_PUSH_DESCRIPTOR : 0u) |
                (e.messenger ? POSENC_VULKAN_FEATURE_DEBUG_UTILS : 0u)),
    };
    posenc_context *ctx = NULL;
    if (posenc_context_create(&desc, &ctx) != POSENC_OK) {
        fprintf(stderr, "posenc_context_create: %s\n", posenc_thread_last_error());
        return 1;
    }
    /* The engine's q and k, as posenc buffers (views and validation apply to them). */
    const VkDeviceSize q_bytes = Q_COUNT * sizeof(float), k_bytes = K_COUNT * sizeof(float);
    posenc_buffer *q = NULL, *k = NULL;
    if (posenc_vk_buffer_wrap(ctx, e.buffer, 0, q_bytes, &q) != POSENC_OK ||
        posenc_vk_buffer_wrap(ctx, e.buffer, q_bytes, k_bytes, &k) != POSENC_OK) {
        fprintf(stderr, "posenc_vk_buffer_wrap: %s\n", posenc_context_last_error(ctx));
        return 1;
    }
    const int64_t q_shape[3] = {TOKENS, Q_HEADS, HEAD_DIM};
    const int64_t k_shape[3] = {TOKENS, K_HEADS, HEAD_DIM};
    posenc_rope_desc rope = {
        .q = posenc_tensor_of_buffer(q, POSENC_DTYPE_F32, 3, q_shape),
        .k = posenc_tensor_of_buffer(k, POSENC_DTYPE_F32, 3, k_shape),
        .position_offset = POSITION_OFFSET, /* positions POSITION_OFFSET + token index */
        .theta = THETA,
    };

    /* ---- the engine's two passes ---- */
    VkDescriptorPoolSize pool_size = {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 5};
    VkDescriptorPoolCreateInfo pool_info = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
                                            .maxSets = 2,
                                            .poolSizeCount = 1,
                                            .pPoolSizes = &pool_size};
    VkDescriptorPool descriptor_pool;
    VK_CHECK(vkCreateDescriptorPool(e.device, &pool_info, NULL, &descriptor_pool));
    pass fill = {0}, scores = {0};
    pass_create(&e, &fill, shader_dir, "vulkan_engine_fill.spv", 2, 8, descriptor_pool);
    pass_create(&e, &scores, shader_dir, "vulkan_engine_scores.spv", 3, 16, descriptor_pool);
    VkDescriptorBufferInfo q_info = {e.buffer, 0, q_bytes}, k_info = {e.buffer, q_bytes, k_bytes};
    VkDescriptorBufferInfo scores_info = {e.buffer, q_bytes + k_bytes,
                                          SCORE_COUNT * sizeof(float)};
    fill.infos[0] = scores.infos[0] = q_info;
    fill.infos[1] = scores.infos[1] = k_info;
    scores.infos[2] = scores_info;

    /* ---- at load time: every pipeline and table the frames will use, so the first frame
     * records without building anything ---- */
    if (posenc_prepare(ctx, &(posenc_prepare_desc){.rope = &rope, .rope_count = 1}) !=
        POSENC_OK) {
        fprintf(stderr, "posenc_prepare: %s\n", posenc_context_last_error(ctx));
        return 1;
    }

    /* ---- a frame loop: one command buffer, re-recorded every frame (fill, barrier, RoPE,
     * barrier, scores, barrier to the host), the positions moving on by TOKENS a frame ---- */
    VkCommandPoolCreateInfo command_pool_info = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO, .queueFamilyIndex = e.family};
    VkCommandPool command_pool;
    VK_CHECK(vkCreateCommandPool(e.device, &command_pool_info, NULL, &command_pool));
    VkCommandBufferAllocateInfo command_info = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
        .commandPool = command_pool,
        .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
        .commandBufferCount = 1};
    VkCommandBuffer cmd;
    VK_CHECK(vkAllocateCommandBuffers(e.device, &command_info, &cmd));
    VkFenceCreateInfo fence_info = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    VkFence fence;
    VK_CHECK(vkCreateFence(e.device, &fence_info, NULL, &fence));
    int bad = 0;
    double worst = 0.0;
    for (int frame = 0; frame < FRAMES && !bad; frame++) {
        rope.position_offset = POSITION_OFFSET + frame * TOKENS;
        VK_CHECK(vkResetCommandPool(e.device, command_pool, 0)); /* last frame's fence waited */
        VkCommandBufferBeginInfo begin = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                          .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
        VK_CHECK(vkBeginCommandBuffer(cmd, &begin));
        const uint32_t counts[2] = {Q_COUNT, K_COUNT};
        pass_record(&e, &fill, cmd, "engine fill", counts, sizeof counts, Q_COUNT);
        compute_barrier(cmd); /* the engine's writes of q and k -> posenc's reads */
        if (posenc_vk_cmd_rope(ctx, cmd, &rope) != POSENC_OK) {
            fprintf(stderr, "posenc_vk_cmd_rope: %s\n", posenc_context_last_error(ctx));
            return 1;
        }
        compute_barrier(cmd); /* posenc's writes of q and k -> the engine's reads */
        const uint32_t shape[4] = {TOKENS, Q_HEADS, K_HEADS, HEAD_DIM};
        pass_record(&e, &scores, cmd, "engine scores", shape, sizeof shape, SCORE_COUNT);
        VkMemoryBarrier to_host = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                                   .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
                                   .dstAccessMask = VK_ACCESS_HOST_READ_BIT};
        vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                             VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &to_host, 0, NULL, 0, NULL);
        VK_CHECK(vkEndCommandBuffer(cmd));

        VkSubmitInfo submit = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
                               .commandBufferCount = 1,
                               .pCommandBuffers = &cmd};
        VK_CHECK(vkQueueSubmit(e.queue, 1, &submit, fence));
        VK_CHECK(vkWaitForFences(e.device, 1, &fence, VK_TRUE, UINT64_MAX));
        VK_CHECK(vkResetFences(e.device, 1, &fence));
        bad = check_scores(e.mapped + Q_COUNT + K_COUNT, rope.position_offset, &worst);
    }
    printf("vulkan_engine: %d frames of %d logits, worst error %.3g of the magnitude, %d "
           "validation messages, descriptors %s, debug labels %s: %s\n",
           FRAMES, SCORE_COUNT, worst, validation_messages,
           e.push_descriptor ? "pushed" : "from a pool", e.messenger ? "on" : "off",
           bad || validation_messages ? "FAILED" : "ok");

    /* ---- teardown: posenc first (it frees only what it created), then the engine ---- */
    posenc_buffer_destroy(q);
    posenc_buffer_destroy(k);
    posenc_context_destroy(ctx);
    vkDestroyFence(e.device, fence, NULL);
    vkDestroyCommandPool(e.device, command_pool, NULL);
    pass_destroy(&e, &fill);
    pass_destroy(&e, &scores);
    vkDestroyDescriptorPool(e.device, descriptor_pool, NULL);
    vkDestroyBuffer(e.device, e.buffer, NULL);
    vkFreeMemory(e.device, e.memory, NULL);
    vkDestroyDevice(e.device, NULL);
    if (e.messenger) {
        PFN_vkDestroyDebugUtilsMessengerEXT destroy =
            (PFN_vkDestroyDebugUtilsMessengerEXT)vkGetInstanceProcAddr(
                e.instance, "vkDestroyDebugUtilsMessengerEXT");
        destroy(e.instance, e.messenger, NULL);
    }
    vkDestroyInstance(e.instance, NULL);
    return bad || validation_messages ? 1 : 0;
}
