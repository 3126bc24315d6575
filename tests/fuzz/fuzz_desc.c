/* SPDX-License-Identifier: MIT */
/* Fuzz target: posenc_rope and posenc_sinusoidal (and their _submit calls) on the CPU device,
 * with descriptors decoded from the input (desc_case.h) over memory sized exactly to the views.
 * Checks the promises of posenc.h: a listed status and a message naming the field; nothing
 * written on failure; views the header calls invalid (no memory, bad ndim, shape, stride or
 * offset, extents that overflow, a buffer view past its buffer, host views in a submit) are
 * refused; on success only output elements are written, no output shares a byte with another
 * view unless it is that view in place, and the result equals that of a second context whose
 * frequency cache is emptied before each call. The CPU kernels are those of POSENC_CPU_VARIANT
 * (exit 77 when this machine cannot run them), else the best this machine runs. */
#include <posenc/posenc.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h" /* the contexts' frequency caches, emptied on the twin */
#include "desc_case.h"
#include "fuzz_common.h"

/* Inputs stay cheap: views whose work or memory is larger are not run (unless they are
 * invalid anyway: those the library must refuse before it does any work). */
#define BLOCK_CAP (UINT64_C(1) << 18)   /* bytes of one memory block */
#define ELEMENT_CAP (UINT64_C(1) << 16) /* elements of all views together */
#define ARRAY_CAP 65536u                 /* entries of a caller array */

typedef enum geometry_kind { GEOM_FITS, GEOM_INVALID, GEOM_OVERFLOW } geometry_kind;

typedef struct view_plan {
    const desc_view *spec;
    const char *name;
    bool absent;        /* no memory and ndim 0: an optional view left out */
    geometry_kind kind;
    size_t element;     /* 0 for an unknown dtype */
    int64_t strides[4]; /* resolved: packed where 0 */
    uint64_t extent;    /* GEOM_FITS: last byte + 1, from the view's first byte */
    uint64_t end;       /* GEOM_FITS: offset + extent (UINT64_MAX when that overflows) */
    uint64_t elements;  /* GEOM_FITS: the product of the shape (saturating) */
    bool misaligned;    /* a stride or the offset is not a multiple of the element size */
    bool has_memory;    /* host or buffer memory of this run's blocks (not foreign) */
} view_plan;

typedef struct fuzz_run {
    const desc_case *c;
    bool rope;
    int view_count;
    view_plan views[DESC_VIEWS];
    uint64_t block_size[DESC_BLOCKS];
    uint8_t *block[DESC_BLOCKS];
    uint8_t *snapshot[DESC_BLOCKS];
    uint8_t *twin_result[DESC_BLOCKS];
    uint8_t *mask[DESC_BLOCKS];
    double *arrays[DESC_ARRAYS];
    char must_fail[160]; /* why the call must fail; "" when it may succeed */
} fuzz_run;

static void must_fail(fuzz_run *r, const char *why, const char *name)
{
    if (!r->must_fail[0])
        snprintf(r->must_fail, sizeof r->must_fail, "%s: %s", name, why);
}

static bool add_overflows(uint64_t a, uint64_t b, uint64_t limit)
{
    return a > limit || b > limit - a;
}

/* The view's extent as posenc.h defines it: strides in bytes, 0 = packed behind the next inner
 * dim; computed here without the library's code. */
static void plan_geometry(view_plan *p, posenc_dtype default_dtype)
{
    const desc_view *v = p->spec;
    posenc_dtype dtype = v->dtype == 0 ? default_dtype : (posenc_dtype)v->dtype;
    p->element = posenc_dtype_size(dtype);
    p->kind = GEOM_INVALID;
    if (p->absent || v->ndim < 1 || v->ndim > 4 || p->element == 0)
        return;
    uint32_t n = v->ndim;
    for (uint32_t k = 0; k < n; k++) {
        if (v->shape[k] < 1 || v->strides[k] < 0)
            return;
    }
    uint64_t element = p->element;
    uint64_t packed = element, extent = element, elements = 1;
    bool packed_overflow = false, overflow = false;
    p->misaligned = (uint64_t)v->offset % element != 0;
    for (uint32_t k = n; k-- > 0;) {
        uint64_t shape = (uint64_t)v->shape[k];
        uint64_t stride = (uint64_t)v->strides[k];
        if (stride == 0) {
            overflow = overflow || packed_overflow;
            stride = packed;
        }
        p->misaligned = p->misaligned || stride % element != 0;
        p->strides[k] = (int64_t)stride;
        if (stride != 0 && shape - 1 > (uint64_t)INT64_MAX / stride)
            overflow = true;
        else if (add_overflows(extent, stride * (shape - 1), (uint64_t)INT64_MAX))
            overflow = true;
        else
            extent += stride * (shape - 1);
        packed_overflow = stride != 0 && shape > (uint64_t)INT64_MAX / stride;
        packed = packed_overflow ? 0 : stride * shape;
        elements = elements > UINT64_MAX / shape ? UINT64_MAX : elements * shape;
    }
    if (overflow) {
        p->kind = GEOM_OVERFLOW;
        return;
    }
    p->kind = GEOM_FITS;
    p->extent = extent;
    p->elements = elements;
    uint64_t offset = (uint64_t)v->offset;
    p->end = add_overflows(offset, extent, UINT64_MAX) ? UINT64_MAX : offset + extent;
}

static posenc_dtype resolved_dtype(const view_plan *p, posenc_dtype default_dtype)
{
    return p->spec->dtype == 0 ? default_dtype : (posenc_dtype)p->spec->dtype;
}

/* Plans the views and the blocks. Returns false when the input is not to be run (too large, or
 * a host view that reaches past its memory without wrapping the address space: the library
 * cannot know the size of caller memory). */
static bool plan(fuzz_run *r, const desc_case *c)
{
    static const char *const rope_names[DESC_ROPE_VIEWS] = {
        "q",   "q_out", "k",           "k_out",        "positions",
        "cos", "sin",   "q_norm_weight", "k_norm_weight"};
    static const char *const sinusoidal_names[DESC_SINUSOIDAL_VIEWS] = {"out", "x",
                                                                        "positions"};
    r->c = c;
    r->rope = c->op % 2 == 0;
    r->view_count = r->rope ? DESC_ROPE_VIEWS : DESC_SINUSOIDAL_VIEWS;
    for (int i = 0; i < r->view_count; i++) {
        view_plan *p = &r->views[i];
        p->spec = &c->views[i];
        p->name = r->rope ? rope_names[i] : sinusoidal_names[i];
        p->absent = p->spec->memory == DESC_ABSENT && p->spec->ndim == 0;
    }
    /* Each view's default dtype is the library's: f32 data, i32 positions, and q's (out's)
     * dtype for the views that must match it. */
    view_plan *v = r->views;
    if (r->rope) {
        posenc_dtype q = resolved_dtype(&v[0], POSENC_DTYPE_F32);
        posenc_dtype k = resolved_dtype(&v[2], q);
        plan_geometry(&v[0], POSENC_DTYPE_F32);
        plan_geometry(&v[1], q);
        plan_geometry(&v[2], q);
        plan_geometry(&v[3], k);
        plan_geometry(&v[4], POSENC_DTYPE_I32);
        for (int i = 5; i < DESC_ROPE_VIEWS; i++) /* the tables and the norm weights */
            plan_geometry(&v[i], POSENC_DTYPE_F32);
    } else {
        posenc_dtype out = resolved_dtype(&v[0], POSENC_DTYPE_F32);
        plan_geometry(&v[0], POSENC_DTYPE_F32);
        plan_geometry(&v[1], out);
        plan_geometry(&v[2], POSENC_DTYPE_I32);
    }

    uint64_t elements = 0;
    for (int b = 0; b < DESC_BLOCKS; b++) {
        uint64_t size = (uint64_t)c->blocks[b].size;
        r->block_size[b] = size > BLOCK_CAP ? size % (BLOCK_CAP + 1) : size;
    }
    for (int i = 0; i < r->view_count; i++) {
        view_plan *p = &v[i];
        const desc_view *s = p->spec;
        if (p->absent)
            continue;
        if (s->memory == DESC_ABSENT)
            must_fail(r, "has no memory", p->name);
        else if (s->memory == DESC_BOTH)
            must_fail(r, "sets both buffer and host", p->name);
        else if (s->memory == DESC_FOREIGN_BUFFER)
            must_fail(r, "has a buffer of another context", p->name);
        if ((c->call & 1) && (s->memory == DESC_HOST || s->memory == DESC_BOTH))
            must_fail(r, "is a host view in a submit", p->name);
        if (p->kind == GEOM_INVALID)
            must_fail(r, "has an invalid ndim, dtype, shape or stride", p->name);
        else if (p->kind == GEOM_OVERFLOW)
            must_fail(r, "has an extent that overflows", p->name);
        else if (p->misaligned)
            must_fail(r, "has a stride or offset that is not a multiple of the element size",
                      p->name);
        p->has_memory = s->memory == DESC_HOST || s->memory == DESC_BUFFER;
        if (p->kind == GEOM_FITS) {
            elements = elements > UINT64_MAX - p->elements ? UINT64_MAX : elements + p->elements;
            if (s->memory == DESC_HOST && p->end <= BLOCK_CAP && p->end > r->block_size[s->block])
                r->block_size[s->block] = p->end;
        }
    }
    if (!r->must_fail[0] && elements > ELEMENT_CAP)
        return false;
    /* Caller arrays as long as the descriptor says they are. */
    for (int a = 0; a < DESC_ARRAYS && r->rope; a++) {
        uint32_t count = a == 0 ? c->inv_freq_count : c->factor_count;
        if (!c->arrays[a].present)
            continue;
        if (count > ARRAY_CAP)
            return false;
        r->arrays[a] = malloc(count ? count * sizeof(double) : 1);
        if (!r->arrays[a])
            return false;
        for (uint32_t j = 0; j < count; j++)
            r->arrays[a][j] = c->arrays[a].first + c->arrays[a].step * j;
    }

    for (int b = 0; b < DESC_BLOCKS; b++) {
        uint64_t size = r->block_size[b];
        size_t bytes = size ? (size_t)size : 1;
        r->block[b] = malloc(bytes);
        r->snapshot[b] = malloc(bytes);
        r->twin_result[b] = malloc(bytes);
        r->mask[b] = malloc(bytes);
        if (!r->block[b] || !r->snapshot[b] || !r->twin_result[b] || !r->mask[b])
            return false;
        /* 0: zeros; high bit: ascending int32 words (usable positions); else random bytes. */
        uint8_t fill = c->blocks[b].fill;
        uint64_t state = fill * UINT64_C(0x9e3779b97f4a7c15) + 1;
        for (uint64_t i = 0; i < size; i++) {
            if (fill == 0) {
                r->block[b][i] = 0;
            } else if (fill & 0x80) {
                uint32_t word = (uint32_t)(i / 4) * (fill & 0x7fu);
                r->block[b][i] = (uint8_t)(word >> (8 * (i % 4)));
            } else {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                r->block[b][i] = (uint8_t)(state >> 24);
            }
        }
        memcpy(r->snapshot[b], r->block[b], (size_t)size);
    }

    /* Host views past their memory must wrap the address space (and be refused); buffer views
     * past their buffer are refused whatever their size. */
    for (int i = 0; i < r->view_count; i++) {
        view_plan *p = &v[i];
        const desc_view *s = p->spec;
        if (p->absent || p->kind != GEOM_FITS)
            continue;
        uint64_t size = r->block_size[s->block];
        if (s->memory == DESC_HOST && p->end > size) {
            uint64_t room = (uint64_t)(UINTPTR_MAX - (uintptr_t)r->block[s->block]);
            if (p->end != UINT64_MAX && p->end <= room)
                return false;
            must_fail(r, "wraps the address space", p->name);
            p->has_memory = false;
        }
        if (s->memory == DESC_BUFFER && p->end > size) {
            must_fail(r, "reaches past the end of its buffer", p->name);
            p->has_memory = false;
        }
    }
    return true;
}

static void release(fuzz_run *r)
{
    for (int b = 0; b < DESC_BLOCKS; b++) {
        free(r->block[b]);
        free(r->snapshot[b]);
        free(r->twin_result[b]);
        free(r->mask[b]);
    }
    for (int a = 0; a < DESC_ARRAYS; a++)
        free(r->arrays[a]);
}

/* ---- one call ---- */

typedef struct call_buffers {
    posenc_buffer *own[DESC_BLOCKS];     /* of the context called */
    posenc_buffer *foreign[DESC_BLOCKS]; /* of the other context */
} call_buffers;

static posenc_buffer *wrap(posenc_context *ctx, fuzz_run *r, int b)
{
    posenc_buffer_desc desc = {.size = r->block_size[b] ? r->block_size[b] : 1,
                               .host_memory = r->block[b]};
    posenc_buffer *buffer = NULL;
    posenc_status status = posenc_buffer_create(ctx, &desc, &buffer);
    FUZZ_CHECK(status == POSENC_OK, "posenc_buffer_create of %llu bytes: %s: %s",
               (unsigned long long)desc.size, posenc_status_name(status),
               posenc_context_last_error(ctx));
    return buffer;
}

static posenc_tensor tensor_of(const fuzz_run *r, const call_buffers *buffers, int i)
{
    const desc_view *s = r->views[i].spec;
    posenc_tensor t = {0};
    if (s->memory == DESC_HOST || s->memory == DESC_BOTH)
        t.host = r->block[s->block];
    if (s->memory == DESC_BUFFER || s->memory == DESC_BOTH)
        t.buffer = buffers->own[s->block];
    if (s->memory == DESC_FOREIGN_BUFFER)
        t.buffer = buffers->foreign[s->block];
    t.offset = (uint64_t)s->offset;
    t.dtype = (posenc_dtype)s->dtype;
    t.ndim = s->ndim;
    for (int k = 0; k < 4; k++) {
        t.shape[k] = s->shape[k];
        t.strides[k] = s->strides[k];
    }
    return t;
}

static void rope_desc_of(const fuzz_run *r, const call_buffers *buffers, posenc_rope_desc *d)
{
    const desc_case *c = r->c;
    memset(d, 0, sizeof *d);
    d->q = tensor_of(r, buffers, 0);
    d->q_out = tensor_of(r, buffers, 1);
    d->k = tensor_of(r, buffers, 2);
    d->k_out = tensor_of(r, buffers, 3);
    d->positions = tensor_of(r, buffers, 4);
    d->cos = tensor_of(r, buffers, 5);
    d->sin = tensor_of(r, buffers, 6);
    d->q_norm_weight = tensor_of(r, buffers, 7);
    d->k_norm_weight = tensor_of(r, buffers, 8);
    d->norm_eps = c->norm_eps;
    d->norm_weight_offset = c->norm_weight_offset;
    d->position_offset = c->position_offset;
    d->rotary_dim = c->rotary_dim;
    d->rotary_offset = c->rotary_offset;
    d->style = (posenc_rope_style)c->style;
    d->theta = c->theta;
    d->attention_factor = c->attention_factor;
    d->inverse = c->inverse != 0;
    d->inv_freq = r->arrays[0];
    d->inv_freq_count = c->inv_freq_count;
    d->multimodal = (posenc_rope_multimodal)c->multimodal;
    memcpy(d->mrope_section, c->mrope_section, sizeof c->mrope_section); /* the fourth: 0 */
    posenc_rope_scaling *s = &d->scaling;
    s->type = (posenc_rope_scaling_type)c->scaling_type;
    s->factor = c->factor;
    s->original_max_positions = c->original_max_positions;
    s->sequence_length = c->sequence_length;
    s->beta_fast = c->beta_fast;
    s->beta_slow = c->beta_slow;
    s->mscale = c->mscale;
    s->mscale_all_dim = c->mscale_all_dim;
    s->no_truncate = c->no_truncate != 0;
    s->low_freq_factor = c->low_freq_factor;
    s->high_freq_factor = c->high_freq_factor;
    s->freq_factors = r->arrays[1];
    s->short_factor = r->arrays[2];
    s->long_factor = r->arrays[3];
    s->factor_count = c->factor_count;
}

static void sinusoidal_desc_of(const fuzz_run *r, const call_buffers *buffers,
                               posenc_sinusoidal_desc *d)
{
    const desc_case *c = r->c;
    memset(d, 0, sizeof *d);
    d->out = tensor_of(r, buffers, 0);
    d->x = tensor_of(r, buffers, 1);
    d->positions = tensor_of(r, buffers, 2);
    d->position_offset = c->position_offset;
    d->layout = (posenc_sinusoidal_layout)c->layout;
    d->base = c->base;
    d->freq_shift = c->freq_shift;
    d->position_scale = c->position_scale;
    d->input_scale = c->input_scale;
    d->output_scale = c->output_scale;
}

static bool is_listed_failure(posenc_status status)
{
    switch (status) {
    case POSENC_INVALID_ARGUMENT:
    case POSENC_INVALID_SHAPE:
    case POSENC_INVALID_DTYPE:
    case POSENC_INVALID_LAYOUT:
    case POSENC_OUT_OF_BOUNDS:
    case POSENC_UNSUPPORTED:
    case POSENC_OUT_OF_MEMORY:
        return true;
    default:
        return false;
    }
}

/* "field.path[0]: text": the message starts with the path of the bad field. */
static bool names_a_field(const char *message)
{
    const char *p = message;
    while ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
           *p == '_' || *p == '.' || *p == '[' || *p == ']')
        p++;
    return p > message && p[0] == ':' && p[1] == ' ' && p[2] != '\0';
}

/* Calls the operation on `ctx` (buffers of `other` for the foreign views) and checks what the
 * header promises of one call. */
static posenc_status call(fuzz_run *r, posenc_context *ctx, posenc_context *other,
                          char *message, size_t message_size)
{
    call_buffers buffers = {{0}, {0}};
    for (int i = 0; i < r->view_count; i++) {
        const desc_view *s = r->views[i].spec;
        if (r->views[i].absent)
            continue;
        if ((s->memory == DESC_BUFFER || s->memory == DESC_BOTH) && !buffers.own[s->block])
            buffers.own[s->block] = wrap(ctx, r, s->block);
        if (s->memory == DESC_FOREIGN_BUFFER && !buffers.foreign[s->block])
            buffers.foreign[s->block] = wrap(other, r, s->block);
    }

    static char sentinel;
    posenc_event *unset = (posenc_event *)(void *)&sentinel;
    posenc_event *event = unset;
    posenc_event **event_out = (r->c->call & 2) ? &event : NULL;
    bool submit = r->c->call & 1;
    posenc_status status;
    if (r->rope) {
        posenc_rope_desc d;
        rope_desc_of(r, &buffers, &d);
        status = submit ? posenc_rope_submit(ctx, &d, event_out) : posenc_rope(ctx, &d);
    } else {
        posenc_sinusoidal_desc d;
        sinusoidal_desc_of(r, &buffers, &d);
        status = submit ? posenc_sinusoidal_submit(ctx, &d, event_out)
                        : posenc_sinusoidal(ctx, &d);
    }
    const char *op = r->rope ? "rope" : "sinusoidal";
    const char *last = posenc_context_last_error(ctx);
    snprintf(message, message_size, "%s", last ? last : "(null)");

    if (status == POSENC_OK) {
        FUZZ_CHECK(!r->must_fail[0], "%s succeeded although %s", op, r->must_fail);
        if (submit && event_out) {
            FUZZ_CHECK(event != unset && event != NULL, "%s_submit: no event", op);
            posenc_status waited = posenc_event_wait(event, UINT64_MAX);
            FUZZ_CHECK(waited == POSENC_OK, "posenc_event_wait: %s",
                       posenc_status_name(waited));
            posenc_event_destroy(event);
        }
    } else {
        FUZZ_CHECK(is_listed_failure(status), "%s returned %s (%d), not an input error", op,
                   posenc_status_name(status), (int)status);
        FUZZ_CHECK(names_a_field(message), "%s failed with %s and the message '%s', which "
                   "does not start with the bad field", op, posenc_status_name(status),
                   message);
        FUZZ_CHECK(event == unset, "%s_submit failed with %s but wrote the event", op,
                   posenc_status_name(status));
        for (int b = 0; b < DESC_BLOCKS; b++) {
            FUZZ_CHECK(memcmp(r->block[b], r->snapshot[b], (size_t)r->block_size[b]) == 0,
                       "%s failed with %s ('%s') but changed memory block %d", op,
                       posenc_status_name(status), message, b);
        }
    }
    for (int b = 0; b < DESC_BLOCKS; b++) {
        posenc_buffer_destroy(buffers.own[b]);
        posenc_buffer_destroy(buffers.foreign[b]);
    }
    return status;
}

/* ---- what a successful call may have written ---- */

static uint64_t element_offset(const view_plan *p, uint64_t index)
{
    uint64_t offset = (uint64_t)p->spec->offset;
    for (uint32_t k = p->spec->ndim; k-- > 0;) {
        uint64_t shape = (uint64_t)p->spec->shape[k];
        offset += (index % shape) * (uint64_t)p->strides[k];
        index /= shape;
    }
    return offset;
}

/* The same elements of the same memory in the same order: an operation in place. */
static bool same_elements(const view_plan *a, const view_plan *b)
{
    if (a->spec->block != b->spec->block || a->element != b->element ||
        a->elements != b->elements)
        return false;
    for (uint64_t i = 0; i < a->elements; i++) {
        if (element_offset(a, i) != element_offset(b, i))
            return false;
    }
    return true;
}

#define MASK_OUTPUT(o) (uint8_t)(1u << (o))

static void check_writes(fuzz_run *r)
{
    const char *op = r->rope ? "rope" : "sinusoidal";
    /* Outputs and the input each would be in place over. */
    int outputs[2], in_place_of[2], output_count = 0;
    if (r->rope) {
        bool q_out = !r->views[1].absent, k = !r->views[2].absent, k_out = !r->views[3].absent;
        outputs[output_count] = q_out ? 1 : 0;
        in_place_of[output_count++] = 0;
        if (k) {
            outputs[output_count] = k_out ? 3 : 2;
            in_place_of[output_count++] = 2;
        }
    } else {
        outputs[output_count] = 0;
        in_place_of[output_count++] = 1;
    }
    for (int b = 0; b < DESC_BLOCKS; b++)
        memset(r->mask[b], 0, (size_t)r->block_size[b]);

    for (int o = 0; o < output_count; o++) {
        const view_plan *p = &r->views[outputs[o]];
        FUZZ_CHECK(p->has_memory && p->kind == GEOM_FITS, "%s succeeded with output %s unusable",
                   op, p->name);
        uint8_t *mask = r->mask[p->spec->block];
        for (uint64_t i = 0; i < p->elements; i++) {
            uint64_t at = element_offset(p, i);
            for (size_t byte = 0; byte < p->element; byte++) {
                FUZZ_CHECK(!(mask[at + byte] & MASK_OUTPUT(o)),
                           "%s succeeded although two elements of %s share byte %llu", op,
                           p->name, (unsigned long long)(at + byte));
                FUZZ_CHECK(mask[at + byte] == 0, "%s succeeded although %s overlaps %s", op,
                           p->name, r->views[outputs[0]].name);
                mask[at + byte] |= MASK_OUTPUT(o);
            }
        }
    }
    /* Every other view present: its bytes belong to no output, except an output in place over
     * exactly this view. */
    for (int i = 0; i < r->view_count; i++) {
        const view_plan *p = &r->views[i];
        bool is_output = false;
        uint8_t allowed = 0;
        for (int o = 0; o < output_count; o++) {
            is_output = is_output || outputs[o] == i;
            if (in_place_of[o] == i && same_elements(&r->views[outputs[o]], p))
                allowed |= MASK_OUTPUT(o);
        }
        if (is_output || p->absent || !p->has_memory || p->kind != GEOM_FITS)
            continue;
        const uint8_t *mask = r->mask[p->spec->block];
        for (uint64_t e = 0; e < p->elements; e++) {
            uint64_t at = element_offset(p, e);
            for (size_t byte = 0; byte < p->element; byte++) {
                FUZZ_CHECK((mask[at + byte] & ~allowed) == 0,
                           "%s succeeded although an output overlaps %s at byte %llu", op,
                           p->name, (unsigned long long)(at + byte));
            }
        }
    }
    for (int b = 0; b < DESC_BLOCKS; b++) {
        for (uint64_t i = 0; i < r->block_size[b]; i++) {
            FUZZ_CHECK(r->mask[b][i] || r->block[b][i] == r->snapshot[b][i],
                       "%s wrote byte %llu of block %d, which is no output element", op,
                       (unsigned long long)i, b);
        }
    }
}

/* ---- the entry point ---- */

static posenc_context *open_context(void)
{
    posenc_context_desc desc = {
        .backend = POSENC_BACKEND_CPU,
        .flags = POSENC_CONTEXT_NO_FALLBACK | POSENC_CONTEXT_IGNORE_ENV,
        .num_threads = 2,
    };
    posenc_context *ctx = NULL;
    posenc_status status = posenc_context_create(&desc, &ctx);
    const char *variant = posenc__env_get("POSENC_CPU_VARIANT");
    if (status == POSENC_UNSUPPORTED && variant && variant[0]) {
        /* As the other tests: a kernel variant this machine cannot run is skipped. */
        fprintf(stderr, "skipped: %s\n", posenc_thread_last_error());
        exit(77);
    }
    FUZZ_CHECK(status == POSENC_OK, "posenc_context_create on the CPU: %s: %s",
               posenc_status_name(status), posenc_thread_last_error());
    return ctx;
}

static posenc_context *warm, *cold;

/* At exit: the contexts' worker threads are joined, not cut off mid-spin by the process's end
 * (wine, which ends them with signals, then sometimes reports the process killed). */
static void close_contexts(void)
{
    posenc_context_destroy(cold);
    posenc_context_destroy(warm);
    cold = warm = NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* Made once and kept: `warm` keeps its frequency cache from input to input, `cold` has
     * it emptied before each call, so a cache that answers for the wrong descriptor shows as a
     * difference between the two. Each lends the other its buffers for the foreign views. */
    if (!warm) {
        warm = open_context();
        cold = open_context();
        atexit(close_contexts);
    }
    desc_case c;
    desc_decode(data, size, &c);
    fuzz_run r;
    memset(&r, 0, sizeof r);
    if (!plan(&r, &c)) {
        release(&r);
        return 0;
    }

    char cold_message[512], warm_message[512];
    cold->rope_freqs.id = 0;
    cold->sinusoidal_freqs.id = 0;
    posenc_status cold_status = call(&r, cold, warm, cold_message, sizeof cold_message);
    if (cold_status == POSENC_OK)
        check_writes(&r);
    for (int b = 0; b < DESC_BLOCKS; b++) {
        memcpy(r.twin_result[b], r.block[b], (size_t)r.block_size[b]);
        memcpy(r.block[b], r.snapshot[b], (size_t)r.block_size[b]);
    }

    /* POSENC_FUZZ_VERBOSE=1 shows what each input does (to see what a corpus covers). */
    static int verbose = -1;
    if (verbose < 0) {
        const char *env = posenc__env_get("POSENC_FUZZ_VERBOSE");
        verbose = env && env[0] && strcmp(env, "0") != 0;
    }
    if (verbose)
        fprintf(stderr, "  %s%s: %s%s%s\n", r.rope ? "rope" : "sinusoidal",
                c.call & 1 ? "_submit" : "", posenc_status_name(cold_status),
                cold_status == POSENC_OK ? "" : ": ", cold_status == POSENC_OK ? "" : cold_message);

    posenc_status warm_status = call(&r, warm, cold, warm_message, sizeof warm_message);
    if (warm_status == POSENC_OK)
        check_writes(&r);
    FUZZ_CHECK(warm_status == cold_status, "the same call returned %s, and %s on a context "
               "with an empty frequency cache", posenc_status_name(warm_status),
               posenc_status_name(cold_status));
    FUZZ_CHECK(strcmp(warm_message, cold_message) == 0 || warm_status == POSENC_OK,
               "the same call failed with '%s', and '%s' on a context with an empty frequency "
               "cache", warm_message, cold_message);
    for (int b = 0; b < DESC_BLOCKS; b++) {
        FUZZ_CHECK(memcmp(r.block[b], r.twin_result[b], (size_t)r.block_size[b]) == 0,
                   "the same call wrote other values into block %d than on a context with an "
                   "empty frequency cache", b);
    }
    release(&r);
    return 0;
}
