/* SPDX-License-Identifier: MIT */
/* The names of the enum values: every value of every list through posenc_<kind>_name and back
 * through posenc_<kind>_from_name in each accepted spelling, refused names leaving the output
 * alone, values outside the lists, and the numbers, which are ABI. */
#include "test_common.h"

#include <ctype.h>
#include <string.h>

/* The numbers as released: a list edited by mistake fails to compile here. */
_Static_assert(POSENC_ROPE_NEOX == 0 && POSENC_ROPE_GPTJ == 1, "rope styles are ABI");
_Static_assert(POSENC_ROPE_SCALING_NONE == 0 && POSENC_ROPE_SCALING_LINEAR == 1 &&
                   POSENC_ROPE_SCALING_NTK == 2 && POSENC_ROPE_SCALING_DYNAMIC_NTK == 3 &&
                   POSENC_ROPE_SCALING_YARN == 4 && POSENC_ROPE_SCALING_LLAMA3 == 5 &&
                   POSENC_ROPE_SCALING_LONGROPE == 6 && POSENC_ROPE_SCALING_YARN_GGML == 7,
               "scaling types are ABI");
_Static_assert(POSENC_ROPE_POSITIONS_1D == 0 && POSENC_ROPE_MROPE == 1 &&
                   POSENC_ROPE_MROPE_INTERLEAVED == 2 && POSENC_ROPE_VISION_2D == 3 &&
                   POSENC_ROPE_VISION_2D_PIXTRAL == 4 && POSENC_ROPE_POSITIONS_MAP == 5 &&
                   POSENC_ROPE_VISION_GGML == 6,
               "multimodal kinds are ABI");
_Static_assert(POSENC_SINUSOIDAL_INTERLEAVED == 0 && POSENC_SINUSOIDAL_SIN_COS == 1 &&
                   POSENC_SINUSOIDAL_COS_SIN == 2,
               "sinusoidal layouts are ABI");
_Static_assert(POSENC_DTYPE_DEFAULT == 0 && POSENC_DTYPE_F32 == 1 && POSENC_DTYPE_F16 == 2 &&
                   POSENC_DTYPE_BF16 == 3 && POSENC_DTYPE_I32 == 4,
               "dtypes are ABI");

/* One kind's functions, with its values as ints (the enums' own types stay in the wrappers). */
typedef struct kind {
    const char *label;
    const char *(*name)(int value);
    posenc_status (*from_name)(const char *name, int *value);
    const int *values;
    const char *const *names; /* the list's canonical names, in the list's order */
    size_t count;
} kind;

#define WRAPPERS(k, type)                                                                        \
    static const char *k##_name(int value) { return posenc_##k##_name((type)value); }           \
    static posenc_status k##_from_name(const char *name, int *value)                             \
    {                                                                                            \
        type out = (type)*value;                                                                 \
        posenc_status status = posenc_##k##_from_name(name, &out);                               \
        *value = (int)out;                                                                       \
        return status;                                                                           \
    }
WRAPPERS(rope_style, posenc_rope_style)
WRAPPERS(rope_scaling_type, posenc_rope_scaling_type)
WRAPPERS(rope_multimodal, posenc_rope_multimodal)
WRAPPERS(sinusoidal_layout, posenc_sinusoidal_layout)
WRAPPERS(dtype, posenc_dtype)

#define VALUE(name, value, text) value,
#define TEXT(name, value, text) text,
static const int style_values[] = {POSENC_ROPE_STYLE_LIST(VALUE)};
static const char *const style_names[] = {POSENC_ROPE_STYLE_LIST(TEXT)};
static const int scaling_values[] = {POSENC_ROPE_SCALING_TYPE_LIST(VALUE)};
static const char *const scaling_names[] = {POSENC_ROPE_SCALING_TYPE_LIST(TEXT)};
static const int multimodal_values[] = {POSENC_ROPE_MULTIMODAL_LIST(VALUE)};
static const char *const multimodal_names[] = {POSENC_ROPE_MULTIMODAL_LIST(TEXT)};
static const int layout_values[] = {POSENC_SINUSOIDAL_LAYOUT_LIST(VALUE)};
static const char *const layout_names[] = {POSENC_SINUSOIDAL_LAYOUT_LIST(TEXT)};
static const int dtype_values[] = {POSENC_DTYPE_LIST(VALUE)};
static const char *const dtype_names[] = {POSENC_DTYPE_LIST(TEXT)};

#define KIND(k, values, names)                                                                   \
    {#k, k##_name, k##_from_name, values, names, sizeof values / sizeof values[0]}
static const kind kinds[] = {
    KIND(rope_style, style_values, style_names),
    KIND(rope_scaling_type, scaling_values, scaling_names),
    KIND(rope_multimodal, multimodal_values, multimodal_names),
    KIND(sinusoidal_layout, layout_values, layout_names),
    KIND(dtype, dtype_values, dtype_names),
};

/* `name` with every '_' as `with`, upper-cased when `upper`. */
static void respell(const char *name, char with, bool upper, char *out, size_t size)
{
    size_t i = 0;
    for (; name[i] && i + 1 < size; i++) {
        char c = name[i] == '_' ? with : name[i];
        out[i] = upper ? (char)toupper((unsigned char)c) : c;
    }
    out[i] = '\0';
}

static void check_refused(const kind *k, const char *name)
{
    int value = 12345;
    CHECK_STATUS(k->from_name(name, &value), POSENC_INVALID_ARGUMENT);
    CHECK(value == 12345); /* untouched */
    /* The message names the kind and lists the canonical names. */
    const char *message = posenc_thread_last_error();
    CHECK(strncmp(message, k->label, strlen(k->label)) == 0);
    CHECK(strstr(message, k->names[k->count - 1]) != NULL);
}

static void check_kind(const kind *k)
{
    int largest = 0;
    for (size_t i = 0; i < k->count; i++) {
        const char *name = k->name(k->values[i]);
        CHECK(strcmp(name, k->names[i]) == 0);
        /* Canonical: lower case, digits and underscores. */
        for (const char *c = name; *c; c++)
            CHECK((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_');
        char spelling[64];
        for (int variant = 0; variant < 4; variant++) {
            respell(name, variant & 1 ? '-' : '_', variant & 2, spelling, sizeof spelling);
            int value = -1;
            CHECK_OK(k->from_name(spelling, &value));
            if (value != k->values[i])
                fprintf(stderr, "%s: '%s' read as %d, expected %d\n", k->label, spelling, value,
                        k->values[i]);
            CHECK(value == k->values[i]);
        }
        /* No name is another's. */
        for (size_t j = 0; j < i; j++)
            CHECK(strcmp(k->names[j], name) != 0);
        largest = k->values[i] > largest ? k->values[i] : largest;
    }
    /* Values outside the list. */
    CHECK(strcmp(k->name(-1), "unknown") == 0);
    CHECK(strcmp(k->name(largest + 1), "unknown") == 0);
    CHECK(strcmp(k->name(1000), "unknown") == 0);

    check_refused(k, "");
    check_refused(k, "unknown");
    check_refused(k, "no such name");
    char spelling[64];
    snprintf(spelling, sizeof spelling, "%s_", k->names[0]); /* a name and one more character */
    check_refused(k, spelling);
    snprintf(spelling, sizeof spelling, "%.*s", (int)strlen(k->names[0]) - 1, k->names[0]);
    check_refused(k, spelling); /* a name but its last character */
    snprintf(spelling, sizeof spelling, " %s", k->names[0]);
    check_refused(k, spelling);

    int value = 12345;
    CHECK_STATUS(k->from_name(NULL, &value), POSENC_INVALID_ARGUMENT);
    CHECK(value == 12345);
}

int main(void)
{
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        check_kind(&kinds[i]);

    /* A NULL output is refused, not written. */
    CHECK_STATUS(posenc_rope_style_from_name("neox", NULL), POSENC_INVALID_ARGUMENT);
    CHECK_STATUS(posenc_dtype_from_name("f32", NULL), POSENC_INVALID_ARGUMENT);

    /* The spellings of the multimodal kinds that are not their names. */
    posenc_rope_multimodal multimodal = POSENC_ROPE_MROPE;
    CHECK_OK(posenc_rope_multimodal_from_name("1d", &multimodal));
    CHECK(multimodal == POSENC_ROPE_POSITIONS_1D);
    CHECK_OK(posenc_rope_multimodal_from_name("vision-2d-pixtral", &multimodal));
    CHECK(multimodal == POSENC_ROPE_VISION_2D_PIXTRAL);

    /* The spellings the command line and Python used before, and the new ones. */
    posenc_rope_scaling_type scaling = POSENC_ROPE_SCALING_NONE;
    CHECK_OK(posenc_rope_scaling_type_from_name("dynamic-ntk", &scaling));
    CHECK(scaling == POSENC_ROPE_SCALING_DYNAMIC_NTK);
    CHECK_OK(posenc_rope_scaling_type_from_name("yarn-ggml", &scaling));
    CHECK(scaling == POSENC_ROPE_SCALING_YARN_GGML);
    CHECK_OK(posenc_rope_scaling_type_from_name("YaRN_GGML", &scaling));
    CHECK(scaling == POSENC_ROPE_SCALING_YARN_GGML);
    CHECK(strcmp(posenc_rope_scaling_type_name(POSENC_ROPE_SCALING_YARN_GGML), "yarn_ggml") == 0);
    CHECK(strcmp(posenc_rope_multimodal_name(POSENC_ROPE_POSITIONS_MAP), "positions_map") == 0);
    CHECK(strcmp(posenc_rope_multimodal_name(POSENC_ROPE_VISION_GGML), "vision_ggml") == 0);
    posenc_sinusoidal_layout layout = POSENC_SINUSOIDAL_INTERLEAVED;
    CHECK_OK(posenc_sinusoidal_layout_from_name("cos-sin", &layout));
    CHECK(layout == POSENC_SINUSOIDAL_COS_SIN);
    return test_finish("test_names");
}
