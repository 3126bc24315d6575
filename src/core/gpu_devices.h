/* SPDX-License-Identifier: MIT */
/* What every GPU backend decides alike about its devices: which features the environment turns
 * off (to run a device through the code paths of devices without them), whether caller host
 * memory is used in place, the device records a listing owns, and the reason a listing gives
 * when no device is usable. */
#ifndef POSENC_CORE_GPU_DEVICES_H
#define POSENC_CORE_GPU_DEVICES_H

#include "core/internal.h"

/* Whether the comma-separated list in environment variable `variable` (POSENC_VULKAN_DISABLE,
 * POSENC_OPENCL_DISABLE: docs/backends.md) names `feature` exactly: posenc then leaves that
 * feature of the device unused. */
bool posenc__gpu_feature_disabled(const char *variable, const char *feature);

/* Whether a device may use caller host memory in place (import it): only where it shares host
 * memory (`unified`), since a discrete GPU would read it across the bus in every kernel, which
 * the staging copy does once; and with `alignment`, the address alignment an import needs, a
 * power of two (a zero or odd one is a driver's error, and the memory is staged). */
bool posenc__gpu_host_importable(bool unified, uint64_t alignment);

/* Frees the record each device of `list` holds in its `handle` (one allocation each, as both
 * GPU backends make them) and empties the list: a listing abandoned or given back. */
void posenc__gpu_devices_free(posenc__device_list *list);

/* A runtime call that failed while a device was described (the description returns the
 * error's status): the runtime's error, its out-of-memory included, not a lack of the device,
 * which is then neither usable nor counted unusable. */
typedef struct posenc__gpu_failure {
    const char *call;  /* "clGetDeviceInfo (CL_DEVICE_EXTENSIONS)"; NULL: none failed */
    const char *error; /* the error's name: "CL_OUT_OF_HOST_MEMORY" */
    int32_t code;      /* its value */
} posenc__gpu_failure;

/* The end of describing a caller's device (`field` of the context descriptor, "opencl.device")
 * into `device` with `status`: a usable one becomes the context's device, of ctx's backend;
 * otherwise the context error names the failed call and its error, posenc's own shortage, or
 * what the device `lacks`. */
posenc_status posenc__gpu_external_device(posenc_context *ctx, posenc__device *device,
                                          posenc_status status,
                                          const posenc__gpu_failure *failure, const char *field,
                                          const char *lacks);

/* What a listing met besides the devices it listed, for the reason it gives when none is usable:
 * a backend fills in the first three fields, and counts the rest as it goes, describing the
 * first failure. */
typedef struct posenc__gpu_listing {
    const char *api;   /* "Vulkan" */
    const char *lacks; /* what an unusable device lacks, after their count */
    const char *none;  /* the reason when the runtime lists no device at all */
    uint32_t unusable; /* devices without what posenc needs */
    uint32_t failed;   /* runtime calls that failed on a platform or a device */
    char failure[128]; /* the first of them: "<call> failed: <error>" */
} posenc__gpu_listing;

/* Takes a device described with `status`: a usable one joins `list`, which then owns its handle
 * (freed otherwise), an unusable one and a failed call are counted. OK, or posenc's own
 * OUT_OF_MEMORY, which ends the listing. */
posenc_status posenc__gpu_listing_add(posenc__gpu_listing *listing, posenc__device_list *list,
                                      posenc_status status, const posenc__gpu_failure *failure,
                                      const posenc__device *device);

/* The end of a listing that ran into `status`. Every failure of the runtime is the runtime's:
 * with nothing listed the backend is absent (BACKEND_UNAVAILABLE) with the first failure, or
 * else the unusable devices, or else `none`, as the reason (written in `why`). Only posenc's own
 * shortage (`status` OUT_OF_MEMORY) returns that status, the records freed, so that the next
 * listing tries again. */
posenc_status posenc__gpu_listing_end(const posenc__gpu_listing *listing,
                                      posenc__device_list *list, posenc_status status, char *why,
                                      size_t why_size, const char **reason);

#endif
