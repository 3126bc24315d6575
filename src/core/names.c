/* SPDX-License-Identifier: MIT */
/* Names of the enum values of posenc.h (styles, scaling types, multimodal kinds, sinusoidal
 * layouts, dtypes), both ways, generated from the lists that generate the enums. */
#include "core/internal.h"

#include <stdio.h>
#include <string.h>

typedef struct name_entry {
    const char *name;
    int value;
} name_entry;

typedef struct name_list {
    const char *kind; /* "rope_style": how a refused name's message starts */
    const name_entry *entries;
    size_t count;
    const name_entry *aliases; /* older spellings, accepted but never returned */
    size_t alias_count;
} name_list;

#define NAME_ENTRY(name, value, text) {text, value},
#define COUNT_OF(array) (sizeof(array) / sizeof((array)[0]))

static const name_entry style_entries[] = {POSENC_ROPE_STYLE_LIST(NAME_ENTRY)};
static const name_entry scaling_entries[] = {POSENC_ROPE_SCALING_TYPE_LIST(NAME_ENTRY)};
static const name_entry multimodal_entries[] = {POSENC_ROPE_MULTIMODAL_LIST(NAME_ENTRY)};
static const name_entry layout_entries[] = {POSENC_SINUSOIDAL_LAYOUT_LIST(NAME_ENTRY)};
static const name_entry dtype_entries[] = {POSENC_DTYPE_LIST(NAME_ENTRY)};

/* The spellings Python's posenc.rope took before the names came from these lists. */
static const name_entry multimodal_aliases[] = {
    {"1d", POSENC_ROPE_POSITIONS_1D},
    {"vision_2d_pixtral", POSENC_ROPE_VISION_2D_PIXTRAL},
};

static const name_list styles = {"rope_style", style_entries, COUNT_OF(style_entries), NULL, 0};
static const name_list scalings = {"rope_scaling_type", scaling_entries,
                                   COUNT_OF(scaling_entries), NULL, 0};
static const name_list multimodals = {"rope_multimodal", multimodal_entries,
                                      COUNT_OF(multimodal_entries), multimodal_aliases,
                                      COUNT_OF(multimodal_aliases)};
static const name_list layouts = {"sinusoidal_layout", layout_entries, COUNT_OF(layout_entries),
                                  NULL, 0};
static const name_list dtypes = {"dtype", dtype_entries, COUNT_OF(dtype_entries), NULL, 0};

static const char *name_of(const name_list *list, int value)
{
    for (size_t i = 0; i < list->count; i++) {
        if (list->entries[i].value == value)
            return list->entries[i].name;
    }
    return "unknown";
}

/* Whether `given` spells `name`: a hyphen for an underscore, ASCII letters in either case
 * (not the locale's tolower, which another thread may change). */
static bool spells(const char *given, const char *name)
{
    for (;; given++, name++) {
        char c = *given;
        if (c == '-')
            c = '_';
        else if (c >= 'A' && c <= 'Z')
            c = (char)(c - 'A' + 'a');
        if (c != *name)
            return false;
        if (!c)
            return true;
    }
}

static posenc_status value_of(const name_list *list, const char *name, bool has_out, int *value)
{
    if (!name || !has_out)
        return posenc__fail(NULL, POSENC_INVALID_ARGUMENT, "%s: %s is NULL", list->kind,
                            name ? "out" : "name");
    for (size_t i = 0; i < list->count; i++) {
        if (spells(name, list->entries[i].name)) {
            *value = list->entries[i].value;
            return POSENC_OK;
        }
    }
    for (size_t i = 0; i < list->alias_count; i++) {
        if (spells(name, list->aliases[i].name)) {
            *value = list->aliases[i].value;
            return POSENC_OK;
        }
    }
    char expected[256] = "";
    size_t used = 0;
    for (size_t i = 0; i < list->count && used < sizeof expected; i++) {
        int n = snprintf(expected + used, sizeof expected - used, "%s%s", i ? ", " : "",
                         list->entries[i].name);
        used += n > 0 ? (size_t)n : 0;
    }
    return posenc__fail(NULL, POSENC_INVALID_ARGUMENT, "%s: '%.64s' is not one of %s",
                        list->kind, name, expected);
}

/* posenc_<kind>_name and posenc_<kind>_from_name of one list. */
#define NAME_FUNCTIONS(kind, type, list)                                                           \
    const char *posenc_##kind##_name(type value) { return name_of(&list, (int)value); }            \
    posenc_status posenc_##kind##_from_name(const char *name, type *out)                           \
    {                                                                                              \
        int value = 0;                                                                             \
        posenc_status status = value_of(&list, name, out != NULL, &value);                         \
        if (status == POSENC_OK)                                                                   \
            *out = (type)value;                                                                    \
        return status;                                                                             \
    }

NAME_FUNCTIONS(rope_style, posenc_rope_style, styles)
NAME_FUNCTIONS(rope_scaling_type, posenc_rope_scaling_type, scalings)
NAME_FUNCTIONS(rope_multimodal, posenc_rope_multimodal, multimodals)
NAME_FUNCTIONS(sinusoidal_layout, posenc_sinusoidal_layout, layouts)
NAME_FUNCTIONS(dtype, posenc_dtype, dtypes)
