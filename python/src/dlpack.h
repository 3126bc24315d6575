/* SPDX-License-Identifier: MIT */
/* The C structs of the DLPack exchange format (unversioned, as numpy's and torch's __dlpack__()
 * hand it over in a capsule named "dltensor"), written from the published spec (dmlc/dlpack). */
#ifndef POSENC_PYTHON_DLPACK_H
#define POSENC_PYTHON_DLPACK_H

#include <stdint.h>

enum { PYPOSENC_DL_CPU = 1 };                                   /* DLDeviceType kDLCPU */
enum { PYPOSENC_DL_INT = 0, PYPOSENC_DL_FLOAT = 2, PYPOSENC_DL_BFLOAT = 4 }; /* DLDataTypeCode */

typedef struct pyposenc_dl_device {
    int device_type; /* a C enum in the spec: int-sized */
    int32_t device_id;
} pyposenc_dl_device;

typedef struct pyposenc_dl_dtype {
    uint8_t code;
    uint8_t bits;
    uint16_t lanes;
} pyposenc_dl_dtype;

typedef struct pyposenc_dl_tensor {
    void *data;
    pyposenc_dl_device device;
    int32_t ndim;
    pyposenc_dl_dtype dtype;
    int64_t *shape;
    int64_t *strides; /* in elements; NULL means compact row-major */
    uint64_t byte_offset;
} pyposenc_dl_tensor;

typedef struct pyposenc_dl_managed {
    pyposenc_dl_tensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct pyposenc_dl_managed *self); /* called by the consumer when done */
} pyposenc_dl_managed;

#endif
