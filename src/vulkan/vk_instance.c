/* SPDX-License-Identifier: MIT */
/* Vulkan instances: the version and extensions posenc asks for, the Khronos validation layer
 * when a context wants validation, and the debug messenger that forwards validation warnings
 * and errors to the context's log. */
#include "vulkan/vk_internal.h"

#include "core/platform.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VALIDATION_LAYER "VK_LAYER_KHRONOS_validation"

#if defined(__SANITIZE_ADDRESS__)
#define POSENC_VK_SYNC_VALIDATION 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define POSENC_VK_SYNC_VALIDATION 0
#endif
#endif
#ifndef POSENC_VK_SYNC_VALIDATION
#define POSENC_VK_SYNC_VALIDATION 1
#endif
#define PORTABILITY_ENUMERATION "VK_KHR_portability_enumeration"
#ifndef VK_KHR_portability_enumeration /* headers older than 1.3.216 */
#define VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR 0x00000001
#endif

static VKAPI_ATTR VkBool32 VKAPI_CALL forward_message(
    VkDebugUtilsMessageSeverityFlagBitsEXT severity, VkDebugUtilsMessageTypeFlagsEXT types,
    const VkDebugUtilsMessengerCallbackDataEXT *data, void *user_data)
{
    posenc_context *ctx = user_data;
    const char *message = data && data->pMessage ? data->pMessage : "(no message)";
    bool error = (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT) != 0;
    /* The loader's own notices ("VK_INSTANCE_LAYERS defined and adding layers") come at warning
     * severity too; they describe the setup rather than a misuse of the API. */
    bool loader = types == VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT && data &&
                  data->pMessageIdName && strcmp(data->pMessageIdName, "Loader Message") == 0;
    if (loader && !error)
        posenc__log(ctx, POSENC_LOG_INFO, "vulkan loader: %s", message);
    else
        posenc__log(ctx, error ? POSENC_LOG_ERROR : POSENC_LOG_WARNING, "vulkan validation: %s",
                    message);
    return VK_FALSE; /* never abort the call that triggered it */
}

bool posenc_vk_has_extension(const VkExtensionProperties *extensions, uint32_t count,
                             const char *name)
{
    for (uint32_t i = 0; i < count; i++) {
        if (strcmp(extensions[i].extensionName, name) == 0)
            return true;
    }
    return false;
}

/* The instance extensions of the implementation and the implicit layers, plus those of `layer`
 * when it is not NULL and installed (`*with_layer`: asking for its extensions tells, with
 * VK_ERROR_LAYER_NOT_PRESENT). NULL when out of host memory: not knowing must not turn
 * validation off quietly. */
static VkExtensionProperties *instance_extensions(const posenc_vk_loader *loader,
                                                  const char *layer, uint32_t *count,
                                                  bool *with_layer)
{
    uint32_t base = 0, extra = 0;
    *count = 0;
    if (loader->EnumerateInstanceExtensionProperties(NULL, &base, NULL) != VK_SUCCESS)
        base = 0;
    *with_layer =
        layer && loader->EnumerateInstanceExtensionProperties(layer, &extra, NULL) == VK_SUCCESS;
    if (!*with_layer)
        extra = 0;
    VkExtensionProperties *extensions = calloc(base + extra + 1, sizeof *extensions);
    if (!extensions)
        return NULL;
    if (base && loader->EnumerateInstanceExtensionProperties(NULL, &base, extensions) < 0)
        base = 0;
    if (extra &&
        loader->EnumerateInstanceExtensionProperties(layer, &extra, extensions + base) < 0)
        extra = 0;
    *count = base + extra;
    return extensions;
}

posenc_status posenc_vk_instance_create(posenc_context *log_ctx, bool validation,
                                        posenc_vk_instance *instance, char *message,
                                        size_t message_size, VkResult *runtime_result)
{
    memset(instance, 0, sizeof *instance);
    *runtime_result = VK_SUCCESS;
    const char *reason = NULL;
    const posenc_vk_loader *loader = posenc_vk_loader_get(&reason);
    if (!loader) {
        posenc__copy_string(message, message_size, reason);
        return POSENC_BACKEND_UNAVAILABLE;
    }

    bool with_layer = false;
    uint32_t extension_count = 0;
    VkExtensionProperties *extensions = instance_extensions(
        loader, validation && log_ctx ? VALIDATION_LAYER : NULL, &extension_count, &with_layer);
    if (!extensions) {
        posenc__copy_string(message, message_size, "out of host memory");
        return POSENC_OUT_OF_MEMORY;
    }
    const char *enabled[2];
    uint32_t enabled_count = 0;
    VkInstanceCreateFlags flags = 0;
    if (posenc_vk_has_extension(extensions, extension_count, PORTABILITY_ENUMERATION)) {
        enabled[enabled_count++] = PORTABILITY_ENUMERATION;
        flags |= VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR;
    }
    /* A context's instance names its objects and labels its dispatches wherever the extension
     * is offered (by the driver, the loader or a capture tool's layer), for whoever looks: a
     * call per object made and two per dispatch. */
    bool debug_utils = log_ctx && posenc_vk_has_extension(extensions, extension_count,
                                                          VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
    if (debug_utils)
        enabled[enabled_count++] = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;
    /* Layers may also come from VK_INSTANCE_LAYERS, unknown to posenc: their messages go to the
     * log as well, rather than to the layers' default output. */
    const char *env_layers = posenc__env_get("VK_INSTANCE_LAYERS");
    bool messenger = debug_utils && (with_layer || (env_layers && *env_layers));
    free(extensions);

    /* Vulkan 1.1 is the baseline; asking for up to 1.3 lets newer devices report their core
     * properties. */
    instance->api_version = loader->instance_version < VK_API_VERSION_1_3
                                ? loader->instance_version
                                : VK_API_VERSION_1_3;
    VkApplicationInfo app = {
        .sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
        .pApplicationName = "posenc",
        .pEngineName = "posenc",
        .engineVersion = VK_MAKE_API_VERSION(0, POSENC_VERSION_MAJOR, POSENC_VERSION_MINOR,
                                             POSENC_VERSION_PATCH),
        .apiVersion = instance->api_version,
    };
    VkDebugUtilsMessengerCreateInfoEXT messenger_info = {
        .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
        .messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                           VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
        .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                       VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                       VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT,
        .pfnUserCallback = forward_message,
        .pUserData = log_ctx,
    };
    /* Synchronization validation as well: it reports missing barriers between posenc's
     * dispatches and copies (VK_EXT_validation_features comes with the layer). Left out under
     * AddressSanitizer: the layer keeps allocations of its synchronization state that it never
     * frees, and once it is unloaded at vkDestroyInstance LeakSanitizer reports them from an
     * unknown module, which no suppression can name. */
    VkValidationFeatureEnableEXT sync = VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT;
    VkValidationFeaturesEXT features = {
        .sType = VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT,
        .pNext = messenger ? &messenger_info : NULL,
        .enabledValidationFeatureCount = 1,
        .pEnabledValidationFeatures = &sync,
    };
    const char *layers[] = {VALIDATION_LAYER};
    VkInstanceCreateInfo info = {
        .sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
        /* Chained, so that messages of instance creation and destruction are caught too. */
        .pNext = with_layer && POSENC_VK_SYNC_VALIDATION ? (const void *)&features
                 : messenger ? (const void *)&messenger_info
                             : NULL,
        .flags = flags,
        .pApplicationInfo = &app,
        .enabledLayerCount = with_layer ? 1 : 0,
        .ppEnabledLayerNames = with_layer ? layers : NULL,
        .enabledExtensionCount = enabled_count,
        .ppEnabledExtensionNames = enabled_count ? enabled : NULL,
    };
    VkResult result = loader->CreateInstance(&info, NULL, &instance->handle);
    if (result != VK_SUCCESS) {
        instance->handle = VK_NULL_HANDLE;
        *runtime_result = result;
        if (result == VK_ERROR_INCOMPATIBLE_DRIVER)
            snprintf(message, message_size,
                     "no Vulkan driver found (vkCreateInstance: VK_ERROR_INCOMPATIBLE_DRIVER)");
        else
            snprintf(message, message_size, "vkCreateInstance failed: %s",
                     posenc_vk_result_name(result));
        return result == VK_ERROR_INCOMPATIBLE_DRIVER ? POSENC_BACKEND_UNAVAILABLE
                                                      : posenc_vk_status_of(result);
    }
    const char *missing = "";
    if (!posenc_vk_load_instance_fns(loader->GetInstanceProcAddr, instance->handle,
                                     &instance->fns, &missing)) {
        if (instance->fns.DestroyInstance) /* loaded first, unless it is the one missing */
            instance->fns.DestroyInstance(instance->handle, NULL);
        instance->handle = VK_NULL_HANDLE;
        snprintf(message, message_size, "the Vulkan instance lacks %s", missing);
        return POSENC_BACKEND_UNAVAILABLE;
    }
    instance->validation = with_layer;
    instance->debug_utils = debug_utils;
    if (messenger && instance->fns.CreateDebugUtilsMessengerEXT) {
        result = instance->fns.CreateDebugUtilsMessengerEXT(instance->handle, &messenger_info,
                                                            NULL, &instance->messenger);
        if (result != VK_SUCCESS)
            instance->messenger = VK_NULL_HANDLE; /* validation still runs, just unheard */
    }
    return POSENC_OK;
}

void posenc_vk_instance_destroy(posenc_vk_instance *instance)
{
    if (instance->borrowed || !instance->handle)
        return;
    if (instance->messenger && instance->fns.DestroyDebugUtilsMessengerEXT)
        instance->fns.DestroyDebugUtilsMessengerEXT(instance->handle, instance->messenger, NULL);
    instance->fns.DestroyInstance(instance->handle, NULL);
    memset(instance, 0, sizeof *instance);
}
