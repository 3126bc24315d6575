/* SPDX-License-Identifier: MIT */
/* Sinusoidal encodings against the float64 reference on every device: layouts, odd widths,
 * integer and float positions, frequency parameters, scales, add mode (separate and in place),
 * batches, dtypes, strided outputs and the three kinds of memory.
 *
 * Tolerances (reference.h):
 * - table values: |out - ref| <= 8 * 2^-24 * |output_scale|, the header's promise;
 * - add mode, the header's bound: the table's bound plus the rounding of the sum,
 *   2^-24 * (|x * input_scale| + |output_scale * PE|), plus 2 * 2^-24 * |x * input_scale| when
 *   input_scale is not a power of two (rounding input_scale to f32 and its product with x);
 *   plus second-order terms (the sum's rounding of the other errors);
 * - f16 and bf16 outputs add one ulp of the output type (a single rounding of the f32 result).
 * An odd d_model's last column must be exactly 0 in table mode. */
#include "reference.h"
#include "test_common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef enum positions_kind {
    POS_ABSENT = 0,    /* position_offset + row index */
    POS_I32 = 1,       /* i32 [rows], shared by every batch */
    POS_I32_BATCH = 2, /* i32 [batch, rows] */
    POS_F32 = 3,       /* f32 [rows] */
    POS_F32_BATCH = 4, /* f32 [batch, rows] */
    POS_TIMESTEPS = 5, /* f32 [rows] holding 0, 1, 2, ...: diffusion timesteps */
} positions_kind;

typedef enum add_kind {
    ADD_NONE = 0,     /* write the table */
    ADD_SEPARATE = 1, /* out = x * input_scale + output_scale * PE, x in its own memory */
    ADD_IN_PLACE = 2, /* the same with x == out */
} add_kind;

typedef enum layout_kind {
    LAYOUT_PACKED = 0, /* strides left 0 */
    LAYOUT_PADDED = 1, /* gaps after each row and batch, and a leading offset */
    LAYOUT_SPREAD = 2, /* every other element */
} layout_kind;

typedef struct sin_case {
    const char *name;
    posenc_dtype dtype;
    int64_t batch, rows; /* batch 0: a 2-d [rows, d_model] view */
    uint32_t d_model;
    posenc_sinusoidal_layout layout;
    double base, freq_shift, position_scale, input_scale, output_scale;
    positions_kind positions;
    int32_t position_offset;
    double position_min, position_max; /* random positions in this range; default [0, 4096) */
    add_kind add;
    layout_kind out_layout;
    layout_kind x_layout; /* ADD_SEPARATE only */
    test_memory_kind memory;
} sin_case;

#define F32 POSENC_DTYPE_F32
#define F16 POSENC_DTYPE_F16
#define BF16 POSENC_DTYPE_BF16
#define INTERLEAVED POSENC_SINUSOIDAL_INTERLEAVED
#define SIN_COS POSENC_SINUSOIDAL_SIN_COS
#define COS_SIN POSENC_SINUSOIDAL_COS_SIN

static const sin_case cases[] = {
    /* layouts and widths */
    {.name = "interleaved", .dtype = F32, .rows = 50, .d_model = 64, .layout = INTERLEAVED},
    {.name = "sin|cos", .dtype = F32, .rows = 50, .d_model = 64, .layout = SIN_COS,
     .positions = POS_I32},
    {.name = "cos|sin", .dtype = F32, .rows = 50, .d_model = 64, .layout = COS_SIN,
     .positions = POS_I32},
    {.name = "interleaved odd 33", .dtype = F32, .rows = 20, .d_model = 33,
     .layout = INTERLEAVED, .positions = POS_I32},
    {.name = "sin|cos odd 7", .dtype = F32, .rows = 20, .d_model = 7, .layout = SIN_COS,
     .positions = POS_I32},
    {.name = "cos|sin odd 5", .dtype = F32, .rows = 20, .d_model = 5, .layout = COS_SIN,
     .positions = POS_F32},
    {.name = "d_model 2", .dtype = F32, .rows = 20, .d_model = 2, .layout = INTERLEAVED,
     .positions = POS_I32},
    {.name = "d_model 3", .dtype = F32, .rows = 20, .d_model = 3, .layout = SIN_COS,
     .positions = POS_I32},
    {.name = "wide 1024", .dtype = F32, .rows = 16, .d_model = 1024, .layout = INTERLEAVED,
     .positions = POS_I32, .position_max = 1 << 20},

    /* positions */
    {.name = "position_offset", .dtype = F32, .rows = 30, .d_model = 48, .layout = INTERLEAVED,
     .position_offset = 5000},
    {.name = "negative offset", .dtype = F32, .rows = 30, .d_model = 48, .layout = SIN_COS,
     .position_offset = -17},
    {.name = "i32 negative", .dtype = F32, .rows = 30, .d_model = 48, .layout = COS_SIN,
     .positions = POS_I32, .position_min = -100000, .position_max = 100000},
    {.name = "f32 fractional", .dtype = F32, .rows = 40, .d_model = 64, .layout = INTERLEAVED,
     .positions = POS_F32, .position_min = -10, .position_max = 10},
    {.name = "timesteps 0..999 sin|cos shift 1", .dtype = F32, .rows = 1000, .d_model = 128,
     .layout = SIN_COS, .freq_shift = 1, .positions = POS_TIMESTEPS},
    {.name = "timesteps 0..999 cos|sin shift 0", .dtype = F32, .rows = 1000, .d_model = 128,
     .layout = COS_SIN, .positions = POS_TIMESTEPS},
    {.name = "fractional timesteps x1000", .dtype = F32, .rows = 64, .d_model = 64,
     .layout = SIN_COS, .freq_shift = 1, .position_scale = 1000, .positions = POS_F32,
     .position_min = 0, .position_max = 1},
    {.name = "batch, per-batch i32", .dtype = F32, .batch = 3, .rows = 10, .d_model = 32,
     .layout = INTERLEAVED, .positions = POS_I32_BATCH, .position_max = 100000},
    {.name = "batch, per-batch f32", .dtype = F32, .batch = 2, .rows = 10, .d_model = 32,
     .layout = COS_SIN, .positions = POS_F32_BATCH, .position_max = 1000},
    {.name = "batch, shared positions", .dtype = F32, .batch = 2, .rows = 10, .d_model = 31,
     .layout = SIN_COS, .positions = POS_I32},
    {.name = "batch, row index", .dtype = F32, .batch = 2, .rows = 10, .d_model = 32,
     .layout = INTERLEAVED, .position_offset = 3},
    /* Long tables at the row index: from anchors and steps on the CPU path and CPU-type
     * OpenCL devices (blocks of 64 rows, a partial one last). */
    {.name = "stepped up to INT32_MAX", .dtype = F32, .rows = 300, .d_model = 48,
     .layout = INTERLEAVED, .position_offset = 2147483647 - 299},
    {.name = "stepped odd, scaled, add", .dtype = F32, .rows = 130, .d_model = 33,
     .layout = SIN_COS, .output_scale = -1.5, .input_scale = 0.7, .add = ADD_SEPARATE},
    {.name = "stepped f16, batch", .dtype = F16, .batch = 2, .rows = 600, .d_model = 64,
     .layout = COS_SIN, .position_offset = -1000},
    {.name = "stepped bf16 add in place", .dtype = BF16, .rows = 100, .d_model = 32,
     .layout = INTERLEAVED, .input_scale = 3, .add = ADD_IN_PLACE},

    /* frequency parameters and scales */
    {.name = "freq_shift 1", .dtype = F32, .rows = 30, .d_model = 64, .layout = INTERLEAVED,
     .freq_shift = 1, .positions = POS_I32},
    {.name = "base 100", .dtype = F32, .rows = 30, .d_model = 64, .layout = SIN_COS,
     .base = 100, .positions = POS_I32},
    {.name = "max_period 1e6", .dtype = F32, .rows = 30, .d_model = 64, .layout = COS_SIN,
     .base = 1e6, .freq_shift = 1, .positions = POS_F32},
    {.name = "position_scale 0.5", .dtype = F32, .rows = 30, .d_model = 64,
     .layout = INTERLEAVED, .position_scale = 0.5, .positions = POS_I32},
    {.name = "position_scale 3", .dtype = F32, .rows = 30, .d_model = 64, .layout = SIN_COS,
     .position_scale = 3, .positions = POS_F32},
    {.name = "output_scale 0.125", .dtype = F32, .rows = 30, .d_model = 64,
     .layout = INTERLEAVED, .output_scale = 0.125, .positions = POS_I32},
    {.name = "output_scale -2.5", .dtype = F32, .rows = 30, .d_model = 65, .layout = COS_SIN,
     .output_scale = -2.5, .positions = POS_I32},

    /* add mode */
    {.name = "add x*8", .dtype = F32, .rows = 30, .d_model = 64, .layout = INTERLEAVED,
     .input_scale = 8, .positions = POS_I32, .add = ADD_SEPARATE},
    {.name = "add in place", .dtype = F32, .rows = 30, .d_model = 64, .layout = SIN_COS,
     .output_scale = 0.5, .positions = POS_I32, .add = ADD_IN_PLACE},
    {.name = "add in place sqrt(d) odd", .dtype = F32, .rows = 30, .d_model = 45,
     .layout = INTERLEAVED, .input_scale = 6.708203932499369, .add = ADD_IN_PLACE},
    {.name = "add batch per-batch", .dtype = F32, .batch = 2, .rows = 12, .d_model = 32,
     .layout = COS_SIN, .input_scale = 0.7, .output_scale = 1.3, .positions = POS_I32_BATCH,
     .add = ADD_SEPARATE},

    /* dtypes */
    {.name = "f16 table", .dtype = F16, .rows = 40, .d_model = 64, .layout = INTERLEAVED,
     .positions = POS_I32, .position_max = 60000},
    {.name = "bf16 table", .dtype = BF16, .rows = 40, .d_model = 64, .layout = SIN_COS,
     .positions = POS_I32, .position_max = 60000},
    {.name = "f16 add", .dtype = F16, .batch = 2, .rows = 12, .d_model = 33,
     .layout = COS_SIN, .input_scale = 2, .positions = POS_F32_BATCH, .add = ADD_SEPARATE},
    {.name = "bf16 add in place", .dtype = BF16, .rows = 12, .d_model = 64,
     .layout = INTERLEAVED, .input_scale = 8, .output_scale = 0.25, .positions = POS_I32,
     .add = ADD_IN_PLACE},
    {.name = "f16 timesteps", .dtype = F16, .rows = 100, .d_model = 32, .layout = SIN_COS,
     .freq_shift = 1, .positions = POS_TIMESTEPS},

    /* strided views */
    {.name = "padded out", .dtype = F32, .batch = 2, .rows = 9, .d_model = 21,
     .layout = INTERLEAVED, .positions = POS_I32_BATCH, .out_layout = LAYOUT_PADDED},
    {.name = "element stride 2", .dtype = F32, .batch = 2, .rows = 9, .d_model = 16,
     .layout = SIN_COS, .positions = POS_I32, .out_layout = LAYOUT_SPREAD},
    {.name = "padded x to packed out", .dtype = F32, .batch = 2, .rows = 9, .d_model = 20,
     .layout = COS_SIN, .input_scale = 3, .positions = POS_I32, .add = ADD_SEPARATE,
     .x_layout = LAYOUT_PADDED},
    {.name = "padded add in place bf16", .dtype = BF16, .batch = 2, .rows = 9, .d_model = 20,
     .layout = INTERLEAVED, .positions = POS_I32, .add = ADD_IN_PLACE,
     .out_layout = LAYOUT_PADDED},
    {.name = "spread out, packed x, f16", .dtype = F16, .rows = 9, .d_model = 12,
     .layout = SIN_COS, .input_scale = 0.5, .positions = POS_F32, .add = ADD_SEPARATE,
     .out_layout = LAYOUT_SPREAD},

    /* memory kinds */
    {.name = "buffers", .dtype = F32, .batch = 2, .rows = 10, .d_model = 32,
     .layout = INTERLEAVED, .positions = POS_I32_BATCH, .memory = TEST_MEMORY_BUFFER},
    {.name = "buffers add", .dtype = F16, .rows = 10, .d_model = 32, .layout = SIN_COS,
     .input_scale = 2, .positions = POS_F32, .add = ADD_SEPARATE, .memory = TEST_MEMORY_BUFFER},
    {.name = "buffers padded add in place", .dtype = F32, .batch = 2, .rows = 10, .d_model = 30,
     .layout = COS_SIN, .add = ADD_IN_PLACE, .out_layout = LAYOUT_PADDED,
     .memory = TEST_MEMORY_BUFFER},
    {.name = "wrapped", .dtype = F32, .rows = 10, .d_model = 32, .layout = INTERLEAVED,
     .positions = POS_I32, .memory = TEST_MEMORY_WRAPPED},
    {.name = "wrapped add", .dtype = BF16, .batch = 2, .rows = 10, .d_model = 32,
     .layout = SIN_COS, .input_scale = 4, .positions = POS_I32_BATCH, .add = ADD_SEPARATE,
     .out_layout = LAYOUT_PADDED, .memory = TEST_MEMORY_WRAPPED},
};

typedef struct view {
    int memory;
    uint64_t offset;
    int64_t shape[3];   /* batch, rows, d_model */
    int64_t strides[3]; /* bytes */
    bool packed;
} view;

static uint64_t view_at(const view *v, int64_t b, int64_t r, int64_t c)
{
    return v->offset + (uint64_t)(b * v->strides[0] + r * v->strides[1] + c * v->strides[2]);
}

static size_t make_view(view *v, layout_kind layout, int64_t b, int64_t r, int64_t d, int64_t e)
{
    v->shape[0] = b, v->shape[1] = r, v->shape[2] = d;
    v->offset = 0;
    v->packed = false;
    switch (layout) {
    case LAYOUT_PADDED:
        v->offset = (uint64_t)(2 * e);
        v->strides[2] = e;
        v->strides[1] = (d + 5) * e;
        v->strides[0] = r * v->strides[1] + 3 * e;
        return (size_t)(v->offset + (uint64_t)(b * v->strides[0]) + (uint64_t)(2 * e));
    case LAYOUT_SPREAD:
        v->offset = (uint64_t)e;
        v->strides[2] = 2 * e;
        v->strides[1] = 2 * d * e + e;
        v->strides[0] = r * v->strides[1];
        return (size_t)(v->offset + (uint64_t)(b * v->strides[0]) + (uint64_t)e);
    default:
        v->packed = true;
        v->strides[2] = e;
        v->strides[1] = d * e;
        v->strides[0] = r * d * e;
        return (size_t)(b * r * d * e);
    }
}

static posenc_tensor view_tensor(const view *v, const test_memory *memories, posenc_dtype dtype,
                                 uint32_t ndim)
{
    uint32_t skip = 3 - ndim;
    return test_memory_tensor(&memories[v->memory], dtype, v->offset, ndim, v->shape + skip,
                              v->packed ? NULL : v->strides + skip);
}

static void fill_noise(unsigned char *bytes, size_t size, test_rng *rng)
{
    for (size_t i = 0; i < size; i++)
        bytes[i] = (unsigned char)(test_rng_u32(rng) >> 24);
}

#define MAX_REPORTS 6

enum { MEM_OUT, MEM_X, MEM_POSITIONS, MEM_COUNT };

/* Adds the case's errors to `device_stats`, and to `table_stats` for f32 tables. */
static void run_case(posenc_context *context, size_t case_index, ref_stats *device_stats,
                     ref_stats *table_stats)
{
    const sin_case *sc = &cases[case_index];
    test_rng rng = {.state = 0xabcdef12ull + case_index * 104729ull};
    const int64_t e = (int64_t)posenc_dtype_size(sc->dtype);
    const uint32_t ndim = sc->batch ? 3 : 2;
    const int64_t B = sc->batch ? sc->batch : 1, R = sc->rows, D = sc->d_model;
    int reports = 0;

    view out_view = {0}, x_view = {0};
    size_t sizes[MEM_COUNT] = {0};
    sizes[MEM_OUT] = make_view(&out_view, sc->out_layout, B, R, D, e);
    out_view.memory = MEM_OUT;
    if (sc->add == ADD_SEPARATE) {
        sizes[MEM_X] = make_view(&x_view, sc->x_layout, B, R, D, e);
        x_view.memory = MEM_X;
    } else if (sc->add == ADD_IN_PLACE) {
        x_view = out_view;
    }
    bool float_positions = sc->positions == POS_F32 || sc->positions == POS_F32_BATCH ||
                           sc->positions == POS_TIMESTEPS;
    bool batch_positions = sc->positions == POS_I32_BATCH || sc->positions == POS_F32_BATCH;
    int64_t position_count = batch_positions ? B * R : R;
    posenc_dtype position_dtype = float_positions ? POSENC_DTYPE_F32 : POSENC_DTYPE_I32;
    if (sc->positions != POS_ABSENT)
        sizes[MEM_POSITIONS] = (size_t)position_count * 4;

    test_memory memories[MEM_COUNT];
    unsigned char *before[MEM_COUNT] = {0};
    memset(memories, 0, sizeof memories);
    double *x_values = malloc((size_t)(B * R * D) * sizeof(double));
    double *positions = malloc((size_t)(B * R) * sizeof(double));
    double *freq = malloc((size_t)(D / 2 + 1) * sizeof(double));
    double *pe = malloc((size_t)D * sizeof(double));
    unsigned char *mask = NULL;
    bool ok = x_values && positions && freq && pe;
    for (int m = 0; m < MEM_COUNT && ok; m++)
        if (sizes[m])
            ok = test_memory_create(&memories[m], context, sc->memory, sizes[m]);
    if (!ok) {
        test_failures++;
        goto done;
    }

    for (int m = 0; m < MEM_COUNT; m++)
        if (sizes[m])
            fill_noise(memories[m].bytes, sizes[m], &rng);
    if (sc->add != ADD_NONE) {
        for (int64_t b = 0, i = 0; b < B; b++)
            for (int64_t r = 0; r < R; r++)
                for (int64_t c = 0; c < D; c++, i++) {
                    x_values[i] =
                        ref_round_to(sc->dtype, (float)test_rng_uniform(&rng, -1.0, 1.0));
                    ref_store(sc->dtype, memories[x_view.memory].bytes + view_at(&x_view, b, r, c),
                              x_values[i]);
                }
    }
    double lo = sc->position_min, hi = sc->position_max;
    if (lo == 0 && hi == 0)
        hi = 4096;
    for (int64_t i = 0; i < position_count && sizes[MEM_POSITIONS]; i++) {
        double p = test_rng_uniform(&rng, lo, hi);
        if (sc->positions == POS_TIMESTEPS)
            p = (double)i;
        p = float_positions ? (double)(float)p : floor(p);
        ref_store(position_dtype, memories[MEM_POSITIONS].bytes + i * 4, p);
    }
    for (int64_t b = 0; b < B; b++)
        for (int64_t r = 0; r < R; r++)
            positions[b * R + r] =
                sc->positions == POS_ABSENT
                    ? (double)sc->position_offset + (double)r
                    : ref_load(position_dtype, memories[MEM_POSITIONS].bytes +
                                                   (batch_positions ? b * R + r : r) * 4);
    for (int m = 0; m < MEM_COUNT; m++) {
        if (!sizes[m])
            continue;
        before[m] = malloc(sizes[m]);
        if (!before[m] || !test_memory_upload(&memories[m])) {
            test_failures++;
            goto done;
        }
        memcpy(before[m], memories[m].bytes, sizes[m]);
    }

    posenc_sinusoidal_desc desc = {
        .out = view_tensor(&out_view, memories, sc->dtype, ndim),
        .position_offset = sc->position_offset,
        .layout = sc->layout,
        .base = sc->base,
        .freq_shift = sc->freq_shift,
        .position_scale = sc->position_scale,
        .input_scale = sc->input_scale,
        .output_scale = sc->output_scale,
    };
    if (sc->add != ADD_NONE)
        desc.x = view_tensor(&x_view, memories, sc->dtype, ndim);
    if (sc->positions != POS_ABSENT) {
        int64_t shape[2] = {B, R};
        desc.positions = test_memory_tensor(&memories[MEM_POSITIONS], position_dtype, 0,
                                            batch_positions ? 2 : 1,
                                            batch_positions ? shape : shape + 1, NULL);
    }
    posenc_status status = posenc_sinusoidal(context, &desc);
    if (status != POSENC_OK) {
        test_failures++;
        fprintf(stderr, "  case %zu '%s': posenc_sinusoidal returned %s: %s\n", case_index,
                sc->name, posenc_status_name(status), posenc_context_last_error(context));
        goto done;
    }
    for (int m = 0; m < MEM_COUNT; m++)
        if (sizes[m] && !test_memory_download(&memories[m]))
            goto done;

    ref_sinusoidal_frequencies(&desc, (uint32_t)D, freq);
    double input_scale = sc->input_scale != 0 ? sc->input_scale : 1.0;
    double output_scale = sc->output_scale != 0 ? sc->output_scale : 1.0;
    int exponent;
    double input_rounding = fabs(frexp(input_scale, &exponent)) == 0.5 ? 1.0 : 3.0;
    ref_stats stats = {0};
    for (int64_t b = 0; b < B; b++) {
        for (int64_t r = 0; r < R; r++) {
            double position = positions[b * R + r];
            ref_sinusoidal_row(freq, (uint32_t)D, sc->layout, position, pe);
            for (int64_t c = 0; c < D; c++) {
                double out = ref_load(sc->dtype, memories[MEM_OUT].bytes +
                                                     view_at(&out_view, b, r, c));
                double scaled = output_scale * pe[c];
                double ref = scaled, extra = 0.0, tolerance;
                bool good;
                if (sc->add != ADD_NONE) {
                    double xs = x_values[(b * R + r) * D + c] * input_scale;
                    ref = xs + scaled;
                    /* the sum is rounded after the table value's and the product's own
                     * errors: u times those errors again (second order) */
                    extra = REF_UNIT * (input_rounding * fabs(xs) + fabs(scaled)) *
                                (1.0 + 4.0 * REF_UNIT) +
                            REF_UNIT * REF_PROMISE * fabs(output_scale);
                }
                if (sc->add == ADD_NONE && D % 2 && c == D - 1) {
                    good = out == 0.0; /* the odd column is exactly zero */
                    tolerance = 0.0;
                } else {
                    good = ref_check(&stats, sc->dtype, out, ref, output_scale, extra);
                    tolerance = ref_tolerance(sc->dtype, ref, output_scale, extra);
                }
                if (!good) {
                    test_failures++;
                    if (reports++ < MAX_REPORTS)
                        fprintf(stderr,
                                "  case %zu '%s' out[%lld,%lld,%lld] position %.9g: got %.9g, "
                                "expected %.9g (tolerance %.3g)\n",
                                case_index, sc->name, (long long)b, (long long)r, (long long)c,
                                position, out, ref, tolerance);
                }
            }
        }
    }

    /* Only the output elements may change: not the gaps, not x, not the positions. */
    static const char *const names[MEM_COUNT] = {"out memory", "x memory", "positions"};
    mask = calloc(sizes[MEM_OUT], 1);
    if (!mask) {
        test_failures++;
        goto done;
    }
    for (int64_t b = 0; b < B; b++)
        for (int64_t r = 0; r < R; r++)
            for (int64_t c = 0; c < D; c++)
                memset(mask + view_at(&out_view, b, r, c), 1, (size_t)e);
    for (int m = 0; m < MEM_COUNT; m++) {
        if (!sizes[m])
            continue;
        size_t changed = 0;
        for (size_t i = 0; i < sizes[m]; i++)
            if ((m != MEM_OUT || !mask[i]) && before[m][i] != memories[m].bytes[i])
                changed++;
        if (changed) {
            test_failures++;
            if (reports++ < MAX_REPORTS)
                fprintf(stderr, "  case %zu '%s': %zu bytes of %s outside the output changed\n",
                        case_index, sc->name, changed, names[m]);
        }
    }

    if (sc->dtype == POSENC_DTYPE_F32 && sc->add == ADD_NONE)
        printf("    %-34s %-4s %-7s max error %5.2f x 2^-24 |output_scale|\n", sc->name,
               posenc_dtype_name(sc->dtype), test_memory_kind_name(sc->memory), stats.max_units);
    else
        printf("    %-34s %-4s %-7s max error %5.3f of tolerance\n", sc->name,
               posenc_dtype_name(sc->dtype), test_memory_kind_name(sc->memory), stats.max_ratio);
    ref_stats_merge(device_stats, &stats);
    if (sc->dtype == POSENC_DTYPE_F32 && sc->add == ADD_NONE)
        ref_stats_merge(table_stats, &stats);

done:
    for (int m = 0; m < MEM_COUNT; m++) {
        if (sizes[m])
            test_memory_destroy(&memories[m]);
        free(before[m]);
    }
    free(mask);
    free(x_values);
    free(positions);
    free(freq);
    free(pe);
}

static void run_device(posenc_context *context, const posenc_device_info *info)
{
    ref_stats stats = {0}, table_stats = {0};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_case(context, i, &stats, &table_stats);
    printf("    worst f32 table error %.2f x 2^-24 |output_scale| (promise: 8); worst of "
           "tolerance %.3f over %llu values\n",
           table_stats.max_units, stats.max_ratio, stats.values);
}

int main(void)
{
    printf("test_sinusoidal: %zu cases per device\n", sizeof cases / sizeof cases[0]);
    test_for_each_device(run_device);
    return test_finish("test_sinusoidal");
}
