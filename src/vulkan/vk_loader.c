/* SPDX-License-Identifier: MIT */
/* Loading the Vulkan loader at run time and filling the per-instance and per-device function
 * tables through vkGetInstanceProcAddr / vkGetDeviceProcAddr. The library never links libvulkan,
 * so one binary runs on machines without it. */
#include "vulkan/vk_internal.h"

#include "core/platform.h"

#include <string.h>

static struct {
    posenc__once once;
    posenc_vk_loader loader;
    const char *reason;
    bool ok;
} state;

/* Tried in this order (docs/backends.md). macOS: a loader shipped with the application (in the
 * run paths of the program or of libposenc) before the system's, found through the dyld search
 * paths (the LunarG SDK's /usr/local/lib among them) or at Homebrew's arm64 prefix, which no
 * default search path covers; MoltenVK itself, loaded directly as a Vulkan implementation, last.
 * LIBRARY_HINT names them in the message when none opens. */
static const char *const library_names[] = {
#if defined(_WIN32)
#define LIBRARY_HINT "vulkan-1.dll"
    "vulkan-1.dll",
#elif defined(__APPLE__)
#define LIBRARY_HINT "libvulkan.1.dylib or MoltenVK"
    "@rpath/libvulkan.1.dylib", "libvulkan.1.dylib", "libvulkan.dylib",
    "/opt/homebrew/lib/libvulkan.1.dylib", "libMoltenVK.dylib",
#else
#define LIBRARY_HINT "libvulkan.so.1"
    "libvulkan.so.1", "libvulkan.so",
#endif
};

static void load(void)
{
    if (!posenc__library_loading(&state.reason))
        return;
    void *library = posenc__library_open_first(
        library_names, sizeof library_names / sizeof library_names[0], NULL);
    if (!library) {
        state.reason = "the Vulkan loader (" LIBRARY_HINT ") was not found";
        return;
    }
    posenc_vk_loader *loader = &state.loader;
    void *symbol = posenc__library_symbol(library, "vkGetInstanceProcAddr");
    /* A data pointer to a function pointer: what dlsym requires on every platform we know. */
    memcpy(&loader->GetInstanceProcAddr, &symbol, sizeof symbol);
    if (!loader->GetInstanceProcAddr) {
        posenc__library_close(library);
        state.reason = "the Vulkan loader has no vkGetInstanceProcAddr";
        return;
    }
    loader->CreateInstance =
        (PFN_vkCreateInstance)loader->GetInstanceProcAddr(VK_NULL_HANDLE, "vkCreateInstance");
    loader->EnumerateInstanceExtensionProperties =
        (PFN_vkEnumerateInstanceExtensionProperties)loader->GetInstanceProcAddr(
            VK_NULL_HANDLE, "vkEnumerateInstanceExtensionProperties");
    PFN_vkEnumerateInstanceVersion enumerate_version =
        (PFN_vkEnumerateInstanceVersion)loader->GetInstanceProcAddr(VK_NULL_HANDLE,
                                                                    "vkEnumerateInstanceVersion");
    if (!loader->CreateInstance || !loader->EnumerateInstanceExtensionProperties) {
        posenc__library_close(library);
        state.reason = "the Vulkan loader lacks its global functions";
        return;
    }
    loader->instance_version = VK_API_VERSION_1_0;
    if (enumerate_version && enumerate_version(&loader->instance_version) != VK_SUCCESS)
        loader->instance_version = VK_API_VERSION_1_0;
    if (loader->instance_version < VK_API_VERSION_1_1) {
        posenc__library_close(library);
        state.reason = "the Vulkan loader supports only Vulkan 1.0 (posenc needs 1.1)";
        return;
    }
    /* The library stays open for the life of the process: instances may come and go. */
    state.ok = true;
}

const posenc_vk_loader *posenc_vk_loader_get(const char **reason)
{
    posenc__run_once(&state.once, load);
    if (!state.ok) {
        *reason = state.reason;
        return NULL;
    }
    return &state.loader;
}

/* Loads vk<name> into fns->name through `get`; a missing one fails the load, named in
 * `*missing`. */
#define LOAD_(get, handle, name)                                                                  \
    fns->name = (PFN_vk##name)get(handle, "vk" #name);                                            \
    if (!fns->name) {                                                                             \
        *missing = "vk" #name;                                                                    \
        return false;                                                                             \
    }

bool posenc_vk_load_instance_fns(PFN_vkGetInstanceProcAddr get, VkInstance instance,
                                 posenc_vk_instance_fns *fns, const char **missing)
{
    memset(fns, 0, sizeof *fns);
#define LOAD_INSTANCE_(name) LOAD_(get, instance, name)
    POSENC_VK_INSTANCE_FUNCTIONS(LOAD_INSTANCE_)
#undef LOAD_INSTANCE_
#define LOAD_OPTIONAL_(name)                                                                      \
    fns->name = (PFN_vk##name)get(instance, "vk" #name);
    POSENC_VK_DEBUG_FUNCTIONS(LOAD_OPTIONAL_)
#undef LOAD_OPTIONAL_
    return true;
}

bool posenc_vk_load_device_fns(const posenc_vk_instance_fns *instance_fns, VkDevice device,
                               posenc_vk_device_fns *fns, const char **missing)
{
    memset(fns, 0, sizeof *fns);
#define LOAD_DEVICE_(name) LOAD_(instance_fns->GetDeviceProcAddr, device, name)
    POSENC_VK_DEVICE_FUNCTIONS(LOAD_DEVICE_)
#undef LOAD_DEVICE_
    return true;
}
