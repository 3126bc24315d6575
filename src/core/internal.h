/* SPDX-License-Identifier: MIT */
/* Private types shared by the front end and the backends: devices, contexts, buffers, resolved
 * tensor views and validated operation descriptions. */
#ifndef POSENC_CORE_INTERNAL_H
#define POSENC_CORE_INTERNAL_H

#include <posenc/posenc.h>

#include "core/angle.h"
#include "core/atomics.h"
#include "core/platform.h"

#include <stdarg.h>

typedef struct posenc__backend posenc__backend;

/* Room for one error message, terminator included (longer ones are cut). */
#define POSENC__MESSAGE_BYTES 512

/* One enumerated device. Owned by the registry and alive until the process exits. */
typedef struct posenc__device {
    posenc_device_info info;
    const posenc__backend *backend;
    void *handle; /* backend-specific (a physical device, a cl_device_id), owned by the backend */
} posenc__device;

typedef struct posenc__device_list {
    posenc__device *items;
    uint32_t count;
    uint32_t capacity;
} posenc__device_list;

posenc_status posenc__device_list_append(posenc__device_list *list, const posenc__device *device);

/* The registry (core/registry.c). Each backend's devices are listed on first need, loading
 * only that backend's runtime, and kept once listed. OUT_OF_MEMORY (with the thread's error
 * message set) when listing ran out of host memory; the next call lists them again. */
/* The devices of backend `kind`, listing no other backend (none when it is absent or was not
 * compiled in), or with AUTO every backend's, in the order of posenc_device_get. The records
 * live for the process. */
posenc_status posenc__registry_devices(posenc_backend kind, const posenc__device *const **devices,
                                       uint32_t *count);
/* The backend of `kind` when its runtime loaded and it has devices; else BACKEND_UNAVAILABLE
 * (or OUT_OF_MEMORY) with `*backend` NULL and the reason (a static string) in `*reason`. Lists
 * that backend alone. */
posenc_status posenc__registry_backend(posenc_backend kind, const posenc__backend **backend,
                                       const char **reason);
/* Whether the devices of `kind` have been listed (its runtime loaded, when it has one): for the
 * tests that check a context loads only what it asked for. */
bool posenc__registry_listed(posenc_backend kind);
/* The backend of `kind` compiled into this build, without enumerating devices (no runtime is
 * loaded); NULL if it was not compiled in. For contexts on caller-owned devices. */
const posenc__backend *posenc__registry_compiled_backend(posenc_backend kind);
/* Whether `backend` is one of POSENC_BACKEND_LIST (AUTO is not), compiled in or not. */
bool posenc__backend_known(posenc_backend backend);

/* posenc_dtype_size, inline for the calls' own paths (a CPU decode step asks a dozen times). */
static inline size_t posenc__dtype_size(posenc_dtype dtype)
{
    switch (dtype) {
    case POSENC_DTYPE_F32:
    case POSENC_DTYPE_I32: return 4;
    case POSENC_DTYPE_F16:
    case POSENC_DTYPE_BF16: return 2;
    case POSENC_DTYPE_DEFAULT: return 0;
    }
    return 0;
}

struct posenc_buffer {
    posenc_context *ctx;
    uint64_t size;
    void *host_memory;   /* wrapped caller memory (borrowed), or NULL */
    bool host_imported;  /* the device uses host_memory in place (set by the backend's
                          * buffer_init): work left running may bind it */
    void *backend_state; /* owned by the backend */
    /* Where the host sees the buffer for its whole life, set by a backend whose buffers are
     * plain host memory (the CPU's), or NULL: posenc__buffer_host_address asks the backend. */
    void *host_address;
    /* 1 while mapped (posenc_buffer_map); changed under ctx->shared_lock, read by the view
     * checks without it. */
    posenc__atomic_u32 mapped;
    void *mapped_address; /* what the backend's buffer_map returned */
    uint64_t counted_bytes; /* what it adds to ctx->stats.buffer_bytes while alive */
    posenc_buffer *prev; /* the context's list of live buffers, freed at context destroy */
    posenc_buffer *next;
};

/* A posenc_buffer around storage the backend already holds (an engine's own device buffer,
 * wrapped by a backend's interop call): listed in the context like any buffer, and released
 * through the backend's buffer_fini. On failure nothing is allocated (the caller keeps
 * `backend_state`). */
posenc_status posenc__buffer_adopt(posenc_context *ctx, uint64_t size, void *backend_state,
                                   posenc_buffer **buffer);
/* Where the host sees a buffer's memory: wrapped host memory itself, else the backend's
 * buffer_host_address; NULL when the host cannot. Wrapped memory is the caller's, compared by
 * address with host tensors and other buffers, so that aliasing is seen. Inline for buffers
 * whose address is fixed (host_address): a CPU call asks for it once per view. */
void *posenc__buffer_backend_host_address(posenc_context *ctx, posenc_buffer *buf);
static inline void *posenc__buffer_host_address(posenc_context *ctx, posenc_buffer *buf)
{
    if (buf->host_memory)
        return buf->host_memory;
    return buf->host_address ? buf->host_address : posenc__buffer_backend_host_address(ctx, buf);
}

/* A frequency table kept across calls with everything it was computed from (the key: scalar
 * inputs, then the caller's arrays by value), so a repeated call (every decode step) does no
 * pow() and no allocation. `id` is unique within the context and changes whenever the table is
 * recomputed: equal ids mean equal tables; 0 means empty. */
typedef struct posenc__freq_cache {
    posenc__freq *freqs;
    uint32_t count;
    uint32_t capacity;
    uint64_t id;
    unsigned char *key;
    size_t key_size;
    size_t key_capacity;
} posenc__freq_cache;

/* The counters behind posenc_context_stats (the fields of posenc_stats, device_bytes aside),
 * counted where the thing happens: atomics, since calls running at once on one context count
 * into them. */
typedef struct posenc__stats {
    posenc__atomic_u64 rope_calls;
    posenc__atomic_u64 sinusoidal_calls;
    posenc__atomic_u64 staged_bytes;
    posenc__atomic_u64 uploaded_bytes;
    posenc__atomic_u64 downloaded_bytes;
    posenc__atomic_u64 kernels_built;
    posenc__atomic_u64 kernels_loaded;
    posenc__atomic_u64 freq_tables;
    posenc__atomic_u64 buffer_bytes;
    posenc__atomic_u64 staging_bytes;
    posenc__atomic_u64 table_bytes;
} posenc__stats;

struct posenc_context {
    const posenc__backend *backend;
    const posenc__device *device;
    void *backend_state;
    posenc_log_fn log;
    void *log_user_data;
    uint32_t flags;
    uint32_t num_threads;
    char *cache_dir;           /* owned copies of the descriptor's strings, or NULL */
    char *pipeline_cache_path;
    /* Guards what calls running at once on one context share here (posenc.h, "Thread
     * safety"): `buffers` and `last_error`. Held briefly, never while taking another lock or
     * calling out (a log callback), so code holding a backend's own lock may take it. */
    posenc__mutex shared_lock;
    posenc_buffer *buffers;    /* under shared_lock */
    posenc_event *events;      /* live events, freed at context destroy */
    posenc__freq_cache rope_freqs;       /* the last RoPE frequency table and what made it */
    posenc__freq_cache sinusoidal_freqs; /* the same for sinusoidal encodings */
    uint64_t freqs_ids;                  /* ids handed out to frequency tables so far */
    struct posenc__rope_memo *rope_memo; /* the last RoPE descriptor prepared in full
                                          * (core/rope_memo.h), or NULL */
    char last_error[POSENC__MESSAGE_BYTES]; /* under shared_lock */
    posenc__atomic_u32 has_error; /* 1 while last_error may hold a message: written under
                                   * shared_lock, read without it (posenc__clear_error) */
    posenc__atomic_u32 lost; /* 1 once a call reported the device lost (posenc__fail with
                              * DEVICE_LOST): every later call that would reach the device
                              * fails at once (posenc__check_lost); destroying still works */
    posenc__stats stats;
};

/* Sets the error message (the context's, or this thread's when ctx is NULL), logs it at DEBUG
 * level and returns `status`. Messages start with the path of the bad field. Safe on several
 * threads at once on one context: each message is formatted apart and stored whole, under the
 * context's shared_lock, which the caller must not hold. */
posenc_status posenc__fail(posenc_context *ctx, posenc_status status, const char *format, ...)
    POSENC__PRINTF_LIKE(3, 4);
void posenc__log(posenc_context *ctx, posenc_log_level level, const char *format, ...)
    POSENC__PRINTF_LIKE(3, 4);
/* Logs through an explicit callback (used before a context exists). */
void posenc__log_to(posenc_log_fn log, void *user_data, posenc_log_level level,
                    const char *format, ...)
    POSENC__PRINTF_LIKE(4, 5);
/* Empties the message (the context's, under its shared_lock, or this thread's). */
void posenc__clear_error(posenc_context *ctx);
/* DEVICE_LOST, with a message saying so, once the context's device was lost; OK before. The
 * first check of every call that would reach the device: a lost device does not come back, so
 * the context is good only for destroying. */
posenc_status posenc__check_lost(posenc_context *ctx);
/* Whether the context's device was lost; marking it lost without a failing call (a backend
 * that saw the loss where it falls back and goes on, to fail the next call). */
bool posenc__is_lost(const posenc_context *ctx);
void posenc__mark_lost(posenc_context *ctx);

/* A validated tensor view, always 4-D (leading dims of size 1), byte strides resolved. */
typedef struct posenc__view {
    posenc_buffer *buffer; /* NULL for host views */
    uint8_t *host;         /* host views: caller memory; NULL for buffer views */
    uint64_t offset;
    posenc_dtype dtype;
    int64_t shape[POSENC_MAX_DIMS];
    int64_t strides[POSENC_MAX_DIMS];
} posenc__view;

/* Host address of element 0 when the view's memory is host-visible to the library (host views,
 * CPU buffers, wrapped memory), else NULL. Inline: the CPU backend takes a dozen per call. */
static inline uint8_t *posenc__view_host_base(posenc_context *ctx, const posenc__view *view)
{
    if (view->host)
        return view->host + view->offset;
    uint8_t *base = view->buffer ? posenc__buffer_host_address(ctx, view->buffer) : NULL;
    return base ? base + view->offset : NULL;
}

/* Position components a token may have (POSENC_ROPE_POSITIONS_MAP). */
#define POSENC__MAX_COMPONENTS 4

typedef struct posenc__rope_op {
    posenc__view q, q_out;   /* q_out == q (same memory) when rotating in place */
    posenc__view k, k_out;
    posenc__view positions;  /* shape [1, components, batch or 1, tokens]: dim 1 steps from
                              * one position component of a token to the next */
    uint32_t components;     /* position components per token: 1 to POSENC__MAX_COMPONENTS;
                              * each frequency's is its freqs[j].component */
    int64_t component_stride; /* bytes between components (positions.strides[1]); 0 when
                               * positions are absent (every component is offset + token) */
    bool has_k;
    bool has_positions;
    bool positions_per_batch;
    bool q_in_place;
    bool k_in_place;
    int32_t position_offset;
    int64_t batch, tokens, q_heads, k_heads, head_dim;
    uint32_t rotary_dim;
    uint32_t rotary_offset;  /* even: dims [rotary_offset, + rotary_dim) are rotated */
    posenc_rope_style style;
    bool inverse;
    float attention_factor;
    const posenc__freq *freqs; /* rotary_dim / 2 entries */
    uint64_t freqs_id;         /* equal ids within a context: equal tables (0: unknown) */
    /* Paged KV cache. The caches are [blocks, block_size, k_heads, head_dim] (a 3-D cache is
     * one block of num_slots rows): slot s is element (s / block_size, s % block_size, h, d).
     * A slot outside [0, num_slots) writes nothing. */
    bool has_k_cache;
    bool has_v;              /* v copied into v_cache (only with k_cache) */
    bool k_out_written;      /* k_out (or k in place) is written; false: with k_cache and no
                              * k_out, k is only read and k_out equals k */
    posenc__view slots;      /* i32 [1, 1, batch, tokens] (batch 1: [1, 1, 1, tokens]) */
    posenc__view k_cache, v, v_cache;
    int64_t num_slots;       /* blocks * block_size */
    /* Caller cos/sin tables (core/rope_tables.h): pair j of a token takes its row's values at
     * posenc__rope_table_column instead of angles from freqs (which stay the default table,
     * unused). Views [1, batch or 1, rows, width]. */
    bool has_tables;
    bool tables_by_token;    /* rows gathered per token ([batch or 1, tokens, width]); else the
                              * row is the token's position, in [0, table_rows) */
    bool tables_full_width;  /* width rotary_dim (a value per rotated dim), else rotary_dim/2 */
    int64_t table_rows;
    posenc__view cos, sin;
    /* QK RMSNorm before the rotation (core/rope_norm.c): weights [1, 1, 1, head_dim] per head
     * or [1, 1, 1, heads * head_dim] per token (the *_per_token flags). */
    bool has_q_norm, has_k_norm;
    bool q_norm_per_token, k_norm_per_token;
    double norm_eps, norm_weight_offset;
    posenc__view q_norm_weight, k_norm_weight;
} posenc__rope_op;

typedef struct posenc__sinusoidal_op {
    posenc__view out;        /* shape [1, batch, rows, d_model] */
    posenc__view x;
    posenc__view positions;  /* shape [1, 1, batch or 1, rows] */
    bool has_x;
    bool has_positions;
    bool positions_per_batch;
    int32_t position_offset;
    int64_t batch, rows, d_model;
    uint32_t half;           /* frequencies: d_model / 2 */
    posenc_sinusoidal_layout layout;
    float input_scale;
    float output_scale;
    const posenc__freq *freqs; /* `half` entries */
    uint64_t freqs_id;         /* equal ids within a context: equal tables (0: unknown) */
} posenc__sinusoidal_op;

/* The whole front end of posenc_rope / posenc_sinusoidal: defaults, validation (setting the
 * context error) and resolution into an operation a backend can trust. `freqs` points into the
 * context's frequency cache: valid until the next operation is prepared on the context, so a
 * backend that keeps the work beyond the call copies the table (it may key copies on freqs_id).
 * Which rows of cos/sin tables the positions pick is checked apart, by the calls that run the
 * work before they return (posenc__rope_check_table_rows). */
posenc_status posenc__rope_prepare(posenc_context *ctx, const posenc_rope_desc *desc,
                                   posenc__rope_op *prepared);
/* No output of `op` (q_out, k_out when written, k_cache, v_cache; resolved) shares memory with
 * `input`, another view the call only reads (caller tables, norm weights) named `name`. */
posenc_status posenc__rope_check_outputs_apart(posenc_context *ctx, const posenc__rope_op *op,
                                              const posenc__view *input, const char *name);
posenc_status posenc__sinusoidal_prepare(posenc_context *ctx, const posenc_sinusoidal_desc *desc,
                                         posenc__sinusoidal_op *prepared);

/* Submitted work (posenc_*_submit), listed in its context so that context destruction frees
 * events still alive. */
struct posenc_event {
    posenc_context *ctx;
    void *backend_state;   /* the backend's completion state; NULL once complete */
    posenc_status result;  /* the work's final status once backend_state is NULL */
    posenc_event *prev;
    posenc_event *next;
};

#endif
