/* SPDX-License-Identifier: MIT */
/* VK_LAYER_POSENC_faults, a Vulkan layer the tests build (fault_layer.c): it sits in front of
 * the real driver and makes a chosen call fail. The tests enable it through the loader's
 * variables (VK_LAYER_PATH, VK_INSTANCE_LAYERS) and steer it through these functions, which
 * they find with dlopen/dlsym on the layer's own library. */
#ifndef POSENC_TESTS_FAULT_LAYER_H
#define POSENC_TESTS_FAULT_LAYER_H

#include <stdint.h>

/* Arms the layer: the `nth` call from now (1: the next one) of entry point `call` ("vkQueueSubmit";
 * "*": any call the layer wraps) returns `result` (a VkResult) instead of reaching the driver.
 * With VK_ERROR_DEVICE_LOST the device that call was made on stays lost, as a real one does:
 * every later vkQueueSubmit, vkWaitForFences, vkGetFenceStatus, vkMapMemory, vkQueueWaitIdle and
 * vkDeviceWaitIdle on it returns VK_ERROR_DEVICE_LOST (after waiting for the work already
 * submitted, so that nothing the driver still runs is freed under it), while other devices
 * work. `nth` 0 disarms. Every call resets the counts. */
typedef void (*posenc_faults_arm_fn)(const char *call, uint32_t nth, int32_t result);
#define POSENC_FAULTS_ARM "posenc_faults_arm"

/* Calls of `call` ("*": all wrapped calls) since the last arm; the fault, once it fired, counts. */
typedef uint32_t (*posenc_faults_count_fn)(const char *call);
#define POSENC_FAULTS_COUNT "posenc_faults_count"

/* Whether the fault fired since the last arm. */
typedef int (*posenc_faults_fired_fn)(void);
#define POSENC_FAULTS_FIRED "posenc_faults_fired"

/* The entry point the fault fired in since the last arm ("vkQueueSubmit"), or "". */
typedef const char *(*posenc_faults_fired_call_fn)(void);
#define POSENC_FAULTS_FIRED_CALL "posenc_faults_fired_call"

/* vkDestroyDevice calls seen on `device` (a VkDevice), for the check that posenc never destroys
 * an engine's device. */
typedef uint32_t (*posenc_faults_destroyed_fn)(const void *device);
#define POSENC_FAULTS_DESTROYED "posenc_faults_destroyed"

/* Whether an object was given the debug name `name` (posenc names each pipeline after its
 * kernel: "posenc rope f32 blocks norm"). */
typedef int (*posenc_faults_named_fn)(const char *name);
#define POSENC_FAULTS_NAMED "posenc_faults_named"

/* Besides, the environment changes what the driver reports (fault_layer.c):
 * POSENC_FAULTS_STORAGE_BUFFERS=N, storage buffers a shader stage; POSENC_FAULTS_NO_SHUFFLE=1,
 * subgroups without shuffles. */

/* The layer's own definitions of the six (fault_layer.c). */
void posenc_faults_arm(const char *call, uint32_t nth, int32_t result);
uint32_t posenc_faults_count(const char *call);
int posenc_faults_fired(void);
const char *posenc_faults_fired_call(void);
int posenc_faults_named(const char *name);
uint32_t posenc_faults_destroyed(const void *device);

#endif
