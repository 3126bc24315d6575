/* SPDX-License-Identifier: MIT */
/* A Vulkan device lost during a call (VK_LAYER_POSENC_faults, fault_layer.h, reports
 * VK_ERROR_DEVICE_LOST where a driver can): the call returns DEVICE_LOST and nothing hangs;
 * every later call on the context fails at once with the same status and without reaching the
 * device; buffers, events and the context are destroyed with nothing leaked (ASan); a context
 * on another device (a new Vulkan device, the CPU) works and is right; an engine's device is
 * never destroyed by posenc.
 *   test_lost_vulkan POINT, POINT one of:
 *     sync_submit    posenc_rope on host tensors, vkQueueSubmit lost
 *     sync_fence     posenc_rope on host tensors, vkWaitForFences lost
 *     buffer_map     posenc_buffer_create of a mapped buffer, vkMapMemory lost
 *     submit_submit  posenc_rope_submit, vkQueueSubmit lost
 *     submit_fence   posenc_rope_submit twice, vkWaitForFences lost: both events end lost,
 *                    the one whose work may have been done before the loss too
 *     recorded       posenc_vk_cmd_rope on an engine's device, vkMapMemory lost (the frequency
 *                    table), and the engine's own vkQueueSubmit lost */
#include "fault_layer.h"
#include "lost_work.h"
#include "required_devices.h"
#include "test_common.h"

#include <posenc/posenc_vulkan.h>

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#define NAME "test_lost_vulkan"

static struct {
    posenc_faults_arm_fn arm;
    posenc_faults_count_fn count;
    posenc_faults_fired_fn fired;
    posenc_faults_destroyed_fn destroyed;
} faults;

static bool load_layer(void)
{
    const char *path = getenv("POSENC_FAULT_LAYER");
    void *library = path ? dlopen(path, RTLD_NOW | RTLD_GLOBAL) : NULL;
    if (!library) {
        fprintf(stderr, "%s: cannot open the fault layer (POSENC_FAULT_LAYER=%s): %s\n", NAME,
                path ? path : "(unset)", dlerror());
        return false;
    }
    faults.arm = (posenc_faults_arm_fn)dlsym(library, POSENC_FAULTS_ARM);
    faults.count = (posenc_faults_count_fn)dlsym(library, POSENC_FAULTS_COUNT);
    faults.fired = (posenc_faults_fired_fn)dlsym(library, POSENC_FAULTS_FIRED);
    faults.destroyed = (posenc_faults_destroyed_fn)dlsym(library, POSENC_FAULTS_DESTROYED);
    return faults.arm && faults.count && faults.fired && faults.destroyed;
}

/* Every later call on a lost context fails at once, with DEVICE_LOST and a message that says
 * so, without reaching the device. */
static void check_lost_for_good(posenc_context *ctx, posenc_buffer *buffer)
{
    faults.arm("*", 0, 0); /* disarmed: counts every wrapped call from here */
    static float q[LOST_ELEMENTS];
    posenc_rope_desc rope = {.q = posenc_tensor_of_host(q, POSENC_DTYPE_F32, 3, lost_shape)};
    CHECK_STATUS(posenc_rope(ctx, &rope), POSENC_DEVICE_LOST);
    CHECK_MESSAGE(posenc_context_last_error(ctx), "context");
    CHECK(strstr(posenc_context_last_error(ctx), "lost") != NULL);
    static float table[LOST_TOKENS * LOST_DIM];
    const int64_t table_shape[2] = {LOST_TOKENS, LOST_DIM};
    posenc_sinusoidal_desc sinusoidal = {
        .out = posenc_tensor_of_host(table, POSENC_DTYPE_F32, 2, table_shape)};
    CHECK_STATUS(posenc_sinusoidal(ctx, &sinusoidal), POSENC_DEVICE_LOST);
    posenc_event *event = NULL;
    CHECK_STATUS(posenc_rope_submit(ctx, &rope, &event), POSENC_DEVICE_LOST);
    CHECK(event == NULL);
    posenc_prepare_desc prepare = {.rope = &rope, .rope_count = 1};
    CHECK_STATUS(posenc_prepare(ctx, &prepare), POSENC_DEVICE_LOST);
    posenc_buffer_desc buffer_desc = {.size = 4096};
    posenc_buffer *made = NULL;
    CHECK_STATUS(posenc_buffer_create(ctx, &buffer_desc, &made), POSENC_DEVICE_LOST);
    CHECK(made == NULL);
    if (buffer) {
        float data[4] = {1, 2, 3, 4}, back[4] = {5, 6, 7, 8};
        void *mapped = NULL;
        CHECK_STATUS(posenc_buffer_upload(buffer, 0, data, sizeof data), POSENC_DEVICE_LOST);
        CHECK_STATUS(posenc_buffer_download(buffer, 0, back, sizeof back), POSENC_DEVICE_LOST);
        CHECK(back[0] == 5 && back[3] == 8); /* untouched */
        CHECK_STATUS(posenc_buffer_map(buffer, &mapped), POSENC_DEVICE_LOST);
        CHECK(mapped == NULL);
    }
    CHECK_STATUS(posenc_context_finish(ctx), POSENC_DEVICE_LOST);
    uint32_t reached = faults.count("*");
    if (reached) {
        test_failures++;
        fprintf(stderr, "%s: calls on the lost context reached the device %u time(s)\n", NAME,
                reached);
    }
}

static posenc_context *vulkan_context(void)
{
    posenc_context_desc desc = {.backend = POSENC_BACKEND_VULKAN};
    posenc_context *ctx = NULL;
    posenc_status status = posenc_context_create(&desc, &ctx);
    if (status != POSENC_OK) {
        fprintf(stderr, "%s: no Vulkan context: %s\n", NAME, posenc_thread_last_error());
        return NULL;
    }
    return ctx;
}

/* A context made after the loss, on a new Vulkan device and on the CPU, works. */
static void check_others_work(void)
{
    posenc_context *fresh = vulkan_context();
    CHECK(fresh != NULL);
    if (fresh)
        lost_check_working(fresh, NAME, "a new Vulkan context");
    posenc_context_destroy(fresh);
    posenc_context_desc cpu_desc = {.backend = POSENC_BACKEND_CPU};
    posenc_context *cpu = NULL;
    CHECK_OK(posenc_context_create(&cpu_desc, &cpu));
    if (cpu)
        lost_check_working(cpu, NAME, "a CPU context");
    posenc_context_destroy(cpu);
}

static void arm_lost(const char *call)
{
    faults.arm(call, 1, VK_ERROR_DEVICE_LOST);
}

static void expect_fired(const char *call)
{
    if (!faults.fired()) {
        test_failures++;
        fprintf(stderr, "%s: posenc made no %s call where one was expected\n", NAME, call);
    }
}

/* posenc_rope on host tensors, the device lost at `call`. */
static void lost_sync(const char *call)
{
    posenc_context *ctx = vulkan_context();
    if (!ctx)
        return;
    lost_check_working(ctx, NAME, "before the loss"); /* pipelines and tables made */
    static float q[LOST_ELEMENTS], before[LOST_ELEMENTS];
    lost_fill(q, 0.5f);
    memcpy(before, q, sizeof q);
    posenc_rope_desc rope = {.q = posenc_tensor_of_host(q, POSENC_DTYPE_F32, 3, lost_shape),
                             .position_offset = 3};
    arm_lost(call);
    CHECK_STATUS(posenc_rope(ctx, &rope), POSENC_DEVICE_LOST);
    expect_fired(call);
    CHECK(strstr(posenc_context_last_error(ctx), "LOST") != NULL);
    if (strcmp(call, "vkQueueSubmit") == 0) /* the work never ran */
        CHECK(memcmp(q, before, sizeof q) == 0);
    check_lost_for_good(ctx, NULL);
    posenc_context_destroy(ctx);
}

/* posenc_buffer_create of a buffer posenc maps, the device lost at vkMapMemory. */
static void lost_buffer_map(void)
{
    posenc_context *ctx = vulkan_context();
    if (!ctx)
        return;
    posenc_buffer *kept = NULL;
    posenc_buffer_desc desc = {.size = sizeof(float) * LOST_ELEMENTS};
    CHECK_OK(posenc_buffer_create(ctx, &desc, &kept));
    posenc_device_info info;
    CHECK_OK(posenc_context_device(ctx, &info));
    posenc_buffer *made = NULL;
    arm_lost("vkMapMemory");
    posenc_status status = posenc_buffer_create(ctx, &desc, &made);
    if (!info.unified_memory && status == POSENC_OK) {
        /* Device-local memory is not mapped: no loss to see. */
        posenc_buffer_destroy(made);
        posenc_context_destroy(ctx);
        printf("%s: buffer_map: the device maps no buffer memory; nothing to lose\n", NAME);
        return;
    }
    CHECK_STATUS(status, POSENC_DEVICE_LOST);
    CHECK(made == NULL);
    expect_fired("vkMapMemory");
    check_lost_for_good(ctx, kept);
    posenc_buffer_destroy(kept); /* destroying still works */
    posenc_context_destroy(ctx);
}

/* posenc_rope_submit on device buffers, the device lost at `call`. With vkWaitForFences two
 * events are pending: both end lost. */
static void lost_submit(const char *call)
{
    posenc_context *ctx = vulkan_context();
    if (!ctx)
        return;
    static float q[LOST_ELEMENTS];
    lost_fill(q, 1.0f);
    posenc_buffer *buffer = NULL;
    posenc_buffer_desc desc = {.size = sizeof q, .initial_data = q};
    CHECK_OK(posenc_buffer_create(ctx, &desc, &buffer));
    if (!buffer) {
        posenc_context_destroy(ctx);
        return;
    }
    posenc_rope_desc rope = {.q = posenc_tensor_of_buffer(buffer, POSENC_DTYPE_F32, 3, lost_shape)};
    posenc_event *warm = NULL;
    CHECK_OK(posenc_rope_submit(ctx, &rope, &warm));
    CHECK_OK(posenc_event_wait(warm, UINT64_MAX));
    posenc_event_destroy(warm);

    posenc_event *first = NULL, *second = NULL;
    arm_lost(call);
    if (strcmp(call, "vkQueueSubmit") == 0) {
        CHECK_STATUS(posenc_rope_submit(ctx, &rope, &first), POSENC_DEVICE_LOST);
        CHECK(first == NULL);
        expect_fired(call);
    } else {
        CHECK_OK(posenc_rope_submit(ctx, &rope, &first));
        CHECK_OK(posenc_rope_submit(ctx, &rope, &second));
        /* The second first: the first may be seen done (its fence polled) by the time the
         * second is submitted, and then has no fence left to wait for. */
        CHECK_STATUS(posenc_event_wait(second, UINT64_MAX), POSENC_DEVICE_LOST);
        expect_fired(call);
        CHECK_STATUS(posenc_event_wait(first, UINT64_MAX), POSENC_DEVICE_LOST);
        CHECK_STATUS(posenc_event_wait(second, 0), POSENC_DEVICE_LOST); /* kept */
    }
    check_lost_for_good(ctx, buffer);
    posenc_event_destroy(first);
    posenc_event_destroy(second);
    posenc_buffer_destroy(buffer);
    posenc_context_destroy(ctx);
}

/* ---- an engine's device --------------------------------------------------------------------- */

typedef struct engine {
    void *library;
    PFN_vkGetInstanceProcAddr gipa;
    VkInstance instance;
    VkPhysicalDevice physical;
    VkDevice device;
    uint32_t family;
    VkQueue queue;
    VkCommandPool pool;
    VkCommandBuffer commands;
    PFN_vkDestroyInstance DestroyInstance;
    PFN_vkDestroyDevice DestroyDevice;
    PFN_vkDestroyCommandPool DestroyCommandPool;
    PFN_vkQueueSubmit QueueSubmit;
    PFN_vkBeginCommandBuffer BeginCommandBuffer;
    PFN_vkEndCommandBuffer EndCommandBuffer;
} engine;

#define LOAD_(e, handle, name) ((PFN_vk##name)(e)->gipa((handle), "vk" #name))

/* The engine's instance and device (Vulkan 1.1, the first device with a compute queue), through
 * the loader, so that the fault layer sits under its calls too. */
static bool engine_create(engine *e)
{
    memset(e, 0, sizeof *e);
    e->library = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!e->library)
        return false;
    e->gipa = (PFN_vkGetInstanceProcAddr)dlsym(e->library, "vkGetInstanceProcAddr");
    VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                             .apiVersion = VK_API_VERSION_1_1};
    VkInstanceCreateInfo instance_info = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                                          .pApplicationInfo = &app};
    if (LOAD_(e, NULL, CreateInstance)(&instance_info, NULL, &e->instance) != VK_SUCCESS)
        return false;
    e->DestroyInstance = LOAD_(e, e->instance, DestroyInstance);
    uint32_t count = 1;
    VkResult listed =
        LOAD_(e, e->instance, EnumeratePhysicalDevices)(e->instance, &count, &e->physical);
    if ((listed != VK_SUCCESS && listed != VK_INCOMPLETE) || count == 0)
        return false;
    VkQueueFamilyProperties families[16];
    uint32_t family_count = 16;
    LOAD_(e, e->instance, GetPhysicalDeviceQueueFamilyProperties)(e->physical, &family_count,
                                                                  families);
    e->family = UINT32_MAX;
    for (uint32_t i = 0; i < family_count && e->family == UINT32_MAX; i++) {
        if (families[i].queueFlags & VK_QUEUE_COMPUTE_BIT)
            e->family = i;
    }
    if (e->family == UINT32_MAX)
        return false;
    float priority = 1.0f;
    VkDeviceQueueCreateInfo queue_info = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                          .queueFamilyIndex = e->family,
                                          .queueCount = 1,
                                          .pQueuePriorities = &priority};
    VkDeviceCreateInfo device_info = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                                      .queueCreateInfoCount = 1,
                                      .pQueueCreateInfos = &queue_info};
    if (LOAD_(e, e->instance, CreateDevice)(e->physical, &device_info, NULL, &e->device) !=
        VK_SUCCESS)
        return false;
    PFN_vkGetDeviceProcAddr gdpa = LOAD_(e, e->instance, GetDeviceProcAddr);
#define DEVICE_(name) ((PFN_vk##name)gdpa(e->device, "vk" #name))
    e->DestroyDevice = DEVICE_(DestroyDevice);
    e->DestroyCommandPool = DEVICE_(DestroyCommandPool);
    e->QueueSubmit = DEVICE_(QueueSubmit);
    e->BeginCommandBuffer = DEVICE_(BeginCommandBuffer);
    e->EndCommandBuffer = DEVICE_(EndCommandBuffer);
    DEVICE_(GetDeviceQueue)(e->device, e->family, 0, &e->queue);
    VkCommandPoolCreateInfo pool_info = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                         .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                         .queueFamilyIndex = e->family};
    if (DEVICE_(CreateCommandPool)(e->device, &pool_info, NULL, &e->pool) != VK_SUCCESS)
        return false;
    VkCommandBufferAllocateInfo buffer_info = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
        .commandPool = e->pool,
        .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
        .commandBufferCount = 1};
    return DEVICE_(AllocateCommandBuffers)(e->device, &buffer_info, &e->commands) == VK_SUCCESS;
#undef DEVICE_
}

static void engine_destroy(engine *e)
{
    if (e->pool)
        e->DestroyCommandPool(e->device, e->pool, NULL);
    if (e->device)
        e->DestroyDevice(e->device, NULL);
    if (e->instance)
        e->DestroyInstance(e->instance, NULL);
    if (e->library)
        dlclose(e->library);
}

static bool begin(engine *e)
{
    VkCommandBufferBeginInfo info = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    return e->BeginCommandBuffer(e->commands, &info) == VK_SUCCESS;
}

/* posenc_vk_cmd_rope on the engine's device: the device lost while posenc writes a new frequency
 * table (vkMapMemory), and then at the engine's own submit. posenc never destroys the engine's
 * device. */
static void lost_recorded(void)
{
    engine e;
    if (!engine_create(&e)) {
        test_failures++;
        fprintf(stderr, "%s: the engine's device could not be made\n", NAME);
        engine_destroy(&e);
        return;
    }
    posenc_context_desc desc = {
        .vulkan = posenc_vulkan_external_of(e.instance, e.physical, e.device, e.family,
                                            VK_NULL_HANDLE, e.gipa, 0),
    };
    posenc_context *ctx = NULL;
    CHECK_OK(posenc_context_create(&desc, &ctx));
    if (!ctx) {
        engine_destroy(&e);
        return;
    }
    posenc_buffer *buffer = NULL;
    posenc_buffer_desc buffer_desc = {.size = sizeof(float) * LOST_ELEMENTS};
    CHECK_OK(posenc_buffer_create(ctx, &buffer_desc, &buffer));
    posenc_rope_desc rope = {.q = posenc_tensor_of_buffer(buffer, POSENC_DTYPE_F32, 3, lost_shape)};
    CHECK(begin(&e));
    CHECK_OK(posenc_vk_cmd_rope(ctx, e.commands, &rope)); /* theta 10000's table */

    /* The engine's submit sees the loss: the engine learns it from its own status. */
    CHECK(e.EndCommandBuffer(e.commands) == VK_SUCCESS);
    VkSubmitInfo submit = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
                           .commandBufferCount = 1,
                           .pCommandBuffers = &e.commands};
    arm_lost("vkQueueSubmit");
    CHECK(e.QueueSubmit(e.queue, 1, &submit, VK_NULL_HANDLE) == VK_ERROR_DEVICE_LOST);
    expect_fired("vkQueueSubmit");

    /* posenc sees it at its next call that reaches the device: a new table is written. */
    CHECK(begin(&e));
    rope.theta = 500000.0;
    faults.arm("vkMapMemory", 0, 0);
    posenc_status status = posenc_vk_cmd_rope(ctx, e.commands, &rope);
    if (faults.count("vkMapMemory") == 0 && status == POSENC_OK) {
        /* The table went into memory mapped before: lose the device at the next map. */
        arm_lost("vkMapMemory");
        posenc_buffer *more = NULL;
        status = posenc_buffer_create(ctx, &buffer_desc, &more);
        CHECK(more == NULL);
    }
    CHECK_STATUS(status, POSENC_DEVICE_LOST);
    CHECK(strstr(posenc_context_last_error(ctx), "LOST") != NULL);
    CHECK_STATUS(posenc_vk_cmd_rope(ctx, e.commands, &rope), POSENC_DEVICE_LOST);
    check_lost_for_good(ctx, buffer);
    posenc_buffer_destroy(buffer);
    posenc_context_destroy(ctx);
    CHECK(faults.destroyed(e.device) == 0); /* the engine's device is the engine's */
    engine_destroy(&e);
}

int main(int argc, char **argv)
{
    const char *point = argc > 1 ? argv[1] : "";
    posenc_context *probe = vulkan_context();
    if (!probe)
        return test_device_absent(NAME, "vulkan", posenc_thread_last_error());
    posenc_context_destroy(probe);
    if (!load_layer()) {
        test_failures++;
        return test_finish(NAME);
    }
    printf("%s: %s\n", NAME, point);
    if (strcmp(point, "sync_submit") == 0)
        lost_sync("vkQueueSubmit");
    else if (strcmp(point, "sync_fence") == 0)
        lost_sync("vkWaitForFences");
    else if (strcmp(point, "buffer_map") == 0)
        lost_buffer_map();
    else if (strcmp(point, "submit_submit") == 0)
        lost_submit("vkQueueSubmit");
    else if (strcmp(point, "submit_fence") == 0)
        lost_submit("vkWaitForFences");
    else if (strcmp(point, "recorded") == 0)
        lost_recorded();
    else {
        fprintf(stderr, "usage: %s sync_submit|sync_fence|buffer_map|submit_submit|"
                        "submit_fence|recorded\n",
                NAME);
        return 2;
    }
    check_others_work();
    return test_finish(NAME);
}
