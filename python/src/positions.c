/* SPDX-License-Identifier: MIT */
/* Positions, HF's position_ids and slot mappings as the int32 (or float32) tensors posenc
 * takes: int32 and float32 are used where they are; int64 (numpy's and torch's default
 * integers, the dtype HF and vLLM pass) is checked and narrowed into a packed copy; HF's
 * component-first M-RoPE ids [3, batch, tokens] are read as posenc's [batch, tokens, 3]. */
#include "pyposenc.h"

#include <stdlib.h>
#include <string.h>

void pyposenc_indices_release(pyposenc_indices *indices)
{
    pyposenc_view_release(&indices->view);
    if (indices->copy != indices->small) {
        free(indices->copy);
    }
    indices->copy = NULL;
}

/* Moves dim 0 to the end (components first to components innermost). */
static void components_last(posenc_tensor *tensor)
{
    for (uint32_t d = 0; d + 1 < tensor->ndim; d++) {
        pyposenc_tensor_swap(tensor, d, d + 1);
    }
}

/* The int64 values of `tensor` into a packed int32 copy, each checked; `tensor` then views the
 * copy. */
static int narrow(const char *name, pyposenc_indices *indices, posenc_tensor *tensor)
{
    int64_t count = 1;
    for (uint32_t d = 0; d < tensor->ndim; d++) {
        count *= tensor->shape[d];
    }
    if (count <= (int64_t)(sizeof indices->small / sizeof indices->small[0])) {
        indices->copy = indices->small;
    } else if (!(indices->copy = malloc((size_t)count * sizeof *indices->copy))) {
        PyErr_NoMemory();
        return -1;
    }
    /* At most 4 dims (POSENC_MAX_DIMS): walk them as an odometer. */
    int64_t index[POSENC_MAX_DIMS] = {0};
    const char *base = tensor->host;
    for (int64_t n = 0; n < count; n++) {
        int64_t offset = 0;
        for (uint32_t d = 0; d < tensor->ndim; d++) {
            offset += index[d] * tensor->strides[d];
        }
        int64_t value;
        memcpy(&value, base + offset, sizeof value);
        if (value < INT32_MIN || value > INT32_MAX) {
            pyposenc_raisef(POSENC_INVALID_ARGUMENT,
                            "%s: the value %lld (element %lld) is outside int32", name,
                            (long long)value, (long long)n);
            return -1;
        }
        indices->copy[n] = (int32_t)value;
        for (int d = (int)tensor->ndim - 1; d >= 0 && ++index[d] == tensor->shape[d]; d--) {
            index[d] = 0;
        }
    }
    tensor->host = indices->copy;
    tensor->dtype = POSENC_DTYPE_I32;
    int64_t stride = (int64_t)sizeof(int32_t);
    for (int d = (int)tensor->ndim - 1; d >= 0; d--) {
        tensor->strides[d] = stride;
        stride *= tensor->shape[d];
    }
    return 0;
}

int pyposenc_indices_get(PyObject *object, const char *name, int hf_order,
                         pyposenc_indices *indices, posenc_tensor *tensor)
{
    indices->copy = NULL;
    int got = pyposenc_view_get(object, name, PYPOSENC_INDICES, 0, 0, &indices->view, tensor);
    if (got < 0 || object == Py_None) {
        return got;
    }
    if (hf_order & PYPOSENC_HF_COMPONENTS_FIRST && tensor->ndim >= 2) {
        components_last(tensor);
    }
    /* HF's [1, tokens] ids serve every sequence of the batch, as posenc's [tokens]. */
    uint32_t least = hf_order & PYPOSENC_HF_COMPONENTS_FIRST ? 3 : 2;
    if (hf_order && tensor->ndim >= least && tensor->shape[0] == 1) {
        for (uint32_t d = 0; d + 1 < tensor->ndim; d++) {
            tensor->shape[d] = tensor->shape[d + 1];
            tensor->strides[d] = tensor->strides[d + 1];
        }
        tensor->ndim--;
    }
    if (tensor->dtype == PYPOSENC_DTYPE_I64 && narrow(name, indices, tensor) < 0) {
        pyposenc_indices_release(indices);
        memset(tensor, 0, sizeof *tensor);
        return -1;
    }
    return 0;
}
