/* SPDX-License-Identifier: MIT */
/* The kernels' parameter blocks and flag bits, written once and read as GLSL (the push
 * constants of *.comp), OpenCL C (the arguments of *.cl) and C11 (src/vulkan, src/opencl).
 *
 * Each block is an X-macro list of (type, name): every parameter a 4-byte scalar, so that the
 * GLSL push-constant layout (std430: offset 4 * index), the C struct (no padding) and the order
 * of OpenCL arguments are the same sequence of words. In GLSL a list becomes a block,
 *   layout(push_constant) uniform Params { POSENC_ROPE_PASS(POSENC_PARAM_FIELD) } params;
 * in OpenCL C scalar arguments after the buffers,
 *   kernel void posenc_sinusoidal(global T *out, ...
 *                                 POSENC_SINUSOIDAL_PARAMS(POSENC_PARAM_ARGUMENT))
 * or a struct argument (posenc_rope_pass), and in C a struct (posenc__rope_pass, ...) whose
 * words the host sets in that order.
 *
 * The variants (which -D defines build which kernel) are listed in shaders/variants.cmake; the
 * build turns that list into the ids the backends look kernels up by (kernel_ids.h).
 *
 * None of these names is API. They take one underscore after POSENC, as the shaders' own
 * (POSENC_OUT_F32), because GLSL reserves names with two; FLAG_ in a name marks a kernel flag
 * apart from posenc.h's enum values of the same theme (POSENC_SINUSOIDAL_SIN_COS).
 */
#ifndef POSENC_KERNEL_PARAMS_H
#define POSENC_KERNEL_PARAMS_H

/* The type spellings of each language. glslang defines VULKAN when compiling for Vulkan; an
 * OpenCL C compiler __OPENCL_C_VERSION__ (1.2 on) or __OPENCL_VERSION__ (every version). */
#if defined(__OPENCL_C_VERSION__) || defined(__OPENCL_VERSION__) || defined(VULKAN)
#define POSENC_PARAMS_IN_KERNEL 1
#define POSENC_PARAM_U32 uint
#define POSENC_PARAM_I32 int
#define POSENC_PARAM_F32 float
#else
/* No system header, so that the OpenCL C text embeds as it is: the C types are 32 bits on every
 * platform posenc builds for, as the checks at the end make sure. */
#define POSENC_PARAM_U32 unsigned int
#define POSENC_PARAM_I32 int
#define POSENC_PARAM_F32 float
#endif

/* A list's entry as a block member (GLSL, C) and as a kernel argument after others (OpenCL C). */
#define POSENC_PARAM_FIELD(type, name) type name;
#define POSENC_PARAM_ARGUMENT(type, name) , type name

/* Where a token's position comes from: a 2-bit field of each kernel's flags. NONE: the
 * position_offset parameter plus the token (or row) index; I32, F32: the positions binding. */
#define POSENC_POSITIONS_NONE 0u
#define POSENC_POSITIONS_I32 1u
#define POSENC_POSITIONS_F32 2u

/* ---- RoPE (rope.comp, rope_blocks.comp, rope.cl, rope_contiguous.cl) ------------------------
 * One block, POSENC_ROPE_PASS, describes one pass of a call: one input tensor read over
 * [batch, tokens, heads] and rotated (or, with pairs 0, copied) into one output. A call runs up
 * to four passes, in this order: q; k into k_cache (from k as it is, before k is rotated in
 * place); v into v_cache; k. Vulkan pushes each pass's block as the push constants of its own
 * dispatches (so a block stays within the 128 bytes every device has); OpenCL passes all four
 * blocks to one launch, as struct arguments in this order, an absent pass's block zero (heads
 * 0), and its work-items pick their pass (a decode step is mostly launch latency). */
#define POSENC_ROPE_PASS_Q 0u
#define POSENC_ROPE_PASS_K_CACHE 1u
#define POSENC_ROPE_PASS_V_CACHE 2u
#define POSENC_ROPE_PASS_K 3u
#define POSENC_ROPE_PASSES 4u

/* flags, the same in every kernel: */
#define POSENC_ROPE_FLAG_STYLE_MASK 3u      /* bits 0-1: the pairing style, below */
#define POSENC_ROPE_FLAG_POSITIONS_SHIFT 2u /* bits 2-3: POSENC_POSITIONS_* */
#define POSENC_ROPE_FLAG_INVERSE 16u        /* rotate by -t */
/* The pass rotates in place: it reads through the output (whose words the input's repeat) and
 * leaves the pass-through dims alone. Without it they are copied from the input. */
#define POSENC_ROPE_FLAG_IN_PLACE 32u
/* The output is a paged KV cache: the output row of token (b, t) is the cache row of its slot
 * (the slots tensor): block slot / block_size at out_stride_batch, row slot % block_size at
 * out_stride_token. A slot outside [0, num_slots) writes nothing for the token. */
#define POSENC_ROPE_FLAG_SLOTS 64u
/* Caller cos/sin tables give each pair's cos and sin (rope.comp and rope.cl only): the frequency
 * table's binding holds the tables' layout instead (POSENC_ROPE_TABLE_*, below), and cos and sin
 * are two more bindings, whose token rows start cos_offset and sin_offset elements in. A token
 * whose position picks no row of the tables (outside [0, rows)) writes nothing. */
#define POSENC_ROPE_FLAG_TABLES 128u
/* The QK RMSNorm (rope.comp and rope.cl only): the pass normalizes each head of its input (or,
 * with NORM_PER_TOKEN, the token's whole tensor) before the rotation, x (w + offset) /
 * sqrt(mean(x^2) + eps), every dim of it, pass-through dims included. The weights are 1-D
 * elements (POSENC_TABLE_* in bits NORM_DTYPE_SHIFT..+1) from norm_offset, [head_dim] per head
 * or [heads * head_dim] per token; NORM_K: k's weights (their stride is POSENC_ROPE_NORM_K_STRIDE,
 * else POSENC_ROPE_NORM_Q_STRIDE). A work unit then owns whole heads (with NORM_PER_TOKEN all
 * of the token's), so that no invocation reads an element another has written in place. */
#define POSENC_ROPE_FLAG_NORM 256u
#define POSENC_ROPE_FLAG_NORM_K 512u
#define POSENC_ROPE_FLAG_NORM_PER_TOKEN 1024u
#define POSENC_ROPE_FLAG_NORM_DTYPE_SHIFT 11u
/* With a norm per head, a work unit owns at most this many heads of a row: it holds their
 * factors, so that each pair's sine and cosine, taken once, rotates all of them. */
#define POSENC_ROPE_NORM_UNIT_HEADS 16u
/* rope_blocks.comp's norm variants: a unit of this many pairs (or pass-through dims) an
 * invocation, a cluster of them, in one subgroup, a head. */
#define POSENC_ROPE_NORM_UNIT_PAIRS 8u
/* At most this many invocations a head (head_dim 512), within a work group of 64. */
#define POSENC_ROPE_NORM_MAX_LANES 64u
/* rope_contiguous.cl with the QK norm: a work-item takes every pair of a row, at most this
 * many (head_dim 256). */
#define POSENC_ROPE_NORM_CONTIGUOUS_PAIRS 128u

/* The pairing styles (posenc_rope_style's values) and the two dims of pair j, counted from
 * rotary_offset, in each: NeoX pairs j with j + pairs (half split), GPT-J 2j with 2j + 1
 * (interleaved). The generic kernels (rope.comp, rope.cl) read every style through these; the
 * fast kernels (rope_blocks.comp, rope_contiguous.cl) take the styles they were written for, as
 * core/gpu_rope.c chooses. A new style is a value and a line in each macro here. */
#define POSENC_ROPE_STYLE_NEOX 0u
#define POSENC_ROPE_STYLE_GPTJ 1u
#define POSENC_ROPE_PAIR_FIRST(style, j, pairs)                                                   \
    ((style) == POSENC_ROPE_STYLE_GPTJ ? 2u * (j) : (j))
#define POSENC_ROPE_PAIR_SECOND(style, j, pairs)                                                  \
    ((style) == POSENC_ROPE_STYLE_GPTJ ? 2u * (j) + 1u : (j) + (pairs))

/* The tables' layout, the words of the frequency table's binding with POSENC_ROPE_FLAG_TABLES
 * (core/gpu_rope.c writes them): element strides of each table's batch (0: one row set shared
 * by the batch, or rows by position), row and column; the dtype of each (POSENC_TABLE_*); the
 * rows; the form (POSENC_ROPE_TABLE_BY_TOKEN: row t of the token's batch, else the row of its
 * i32 position; POSENC_ROPE_TABLE_FULL_WIDTH: pair j's value at the column of its first dim,
 * else at column j). */
#define POSENC_ROPE_TABLE_COS_STRIDE_BATCH 0u
#define POSENC_ROPE_TABLE_COS_STRIDE_ROW 1u
#define POSENC_ROPE_TABLE_COS_STRIDE_COLUMN 2u
#define POSENC_ROPE_TABLE_SIN_STRIDE_BATCH 3u
#define POSENC_ROPE_TABLE_SIN_STRIDE_ROW 4u
#define POSENC_ROPE_TABLE_SIN_STRIDE_COLUMN 5u
#define POSENC_ROPE_TABLE_COS_DTYPE 6u
#define POSENC_ROPE_TABLE_SIN_DTYPE 7u
#define POSENC_ROPE_TABLE_ROWS 8u
#define POSENC_ROPE_TABLE_FORM 9u
#define POSENC_ROPE_TABLE_WORDS 10u
#define POSENC_ROPE_TABLE_BY_TOKEN 1u
#define POSENC_ROPE_TABLE_FULL_WIDTH 2u
#define POSENC_TABLE_F32 0u
#define POSENC_TABLE_F16 1u
#define POSENC_TABLE_BF16 2u

/* With a QK norm, the frequency table's binding holds four more words after the frequencies
 * (4 words a pair) or the tables' layout: the element stride of q's weights and of k's, and
 * the norm's eps and weight offset (float bits). */
#define POSENC_ROPE_NORM_Q_STRIDE 0u
#define POSENC_ROPE_NORM_K_STRIDE 1u
#define POSENC_ROPE_NORM_EPS 2u
#define POSENC_ROPE_NORM_OFFSET 3u
#define POSENC_ROPE_NORM_WORDS 4u
#define POSENC_ROPE_NORM_WORDS_AT(tables, pairs)                                                  \
    ((tables) ? POSENC_ROPE_TABLE_WORDS : (pairs) > 0u ? 4u * (pairs) : 4u)

/* A tensor's words: its offset and its strides of batch, token, head and dim, in elements from
 * the start of its binding (0 for dims of one index); a cache's strides are those of block, row
 * in the block, head and dim. */
#define POSENC_ROPE_VIEW(X, view)                                                                 \
    X(POSENC_PARAM_U32, view##_offset)                                                            \
    X(POSENC_PARAM_U32, view##_stride_batch)                                                      \
    X(POSENC_PARAM_U32, view##_stride_token)                                                      \
    X(POSENC_PARAM_U32, view##_stride_head)                                                       \
    X(POSENC_PARAM_U32, view##_stride_dim)

/* One pass (128 bytes): the input and the output (in place, the input's words are the
 * output's); the positions' offset and strides (batch stride 0 when the batch shares the
 * positions, component stride 0 with one component); the sizes of the work, the heads one
 * work unit rotates, the pairs rotated per row (0: every dim copied, as v into v_cache); then,
 * with POSENC_ROPE_FLAG_SLOTS, each token's i32 slot (its offset and strides) and the cache's
 * block size and slot count; with POSENC_ROPE_FLAG_TABLES, the offsets of the cos and sin
 * tables (of the work's first row, for rows gathered per token); with POSENC_ROPE_FLAG_NORM,
 * the offset of the weights (Vulkan: binding 7, the pass's own; OpenCL: q's or k's). */
#define POSENC_ROPE_PASS(X)                                                                       \
    POSENC_ROPE_VIEW(X, in)                                                                       \
    POSENC_ROPE_VIEW(X, out)                                                                      \
    X(POSENC_PARAM_U32, positions_offset)                                                         \
    X(POSENC_PARAM_U32, positions_stride_batch)                                                   \
    X(POSENC_PARAM_U32, positions_stride_token)                                                   \
    X(POSENC_PARAM_U32, positions_stride_component)                                               \
    X(POSENC_PARAM_U32, batch)                                                                    \
    X(POSENC_PARAM_U32, tokens)                                                                   \
    X(POSENC_PARAM_U32, heads) /* 0: the pass is absent (OpenCL) */                               \
    X(POSENC_PARAM_U32, heads_per_unit)                                                           \
    X(POSENC_PARAM_U32, pairs)                                                                    \
    X(POSENC_PARAM_U32, head_dim)                                                                 \
    X(POSENC_PARAM_I32, position_offset) /* positions absent: position_offset + token */          \
    X(POSENC_PARAM_U32, flags)                                                                    \
    X(POSENC_PARAM_F32, attention_factor)                                                         \
    X(POSENC_PARAM_U32, slots_offset)                                                             \
    X(POSENC_PARAM_U32, slots_stride_batch)                                                       \
    X(POSENC_PARAM_U32, slots_stride_token)                                                       \
    X(POSENC_PARAM_U32, block_size)                                                               \
    X(POSENC_PARAM_U32, num_slots) /* slots at or past it write nothing */                        \
    X(POSENC_PARAM_U32, rotary_offset) /* the first rotated dim (even) */                         \
    X(POSENC_PARAM_U32, cos_offset)                                                               \
    X(POSENC_PARAM_U32, sin_offset)                                                               \
    X(POSENC_PARAM_U32, norm_offset)

#if defined(__OPENCL_C_VERSION__) || defined(__OPENCL_VERSION__)
/* OpenCL C: the block as a struct argument (4-byte members, no padding: the C struct's bytes). */
typedef struct posenc_rope_pass {
    POSENC_ROPE_PASS(POSENC_PARAM_FIELD)
} posenc_rope_pass;
#endif

/* ---- Sinusoidal encodings (sinusoidal.comp, sinusoidal.cl) ------------------------------------
 * flags: bits 0-1 the layout (posenc_sinusoidal_layout: 0 interleaved, 1 sin|cos, 2 cos|sin) */
#define POSENC_SINUSOIDAL_FLAG_LAYOUT_MASK 3u
#define POSENC_SINUSOIDAL_FLAG_LAYOUT_INTERLEAVED 0u
#define POSENC_SINUSOIDAL_FLAG_LAYOUT_SIN_COS 1u
#define POSENC_SINUSOIDAL_FLAG_POSITIONS_SHIFT 2u /* bits 2-3: POSENC_POSITIONS_* */
#define POSENC_SINUSOIDAL_FLAG_ADD 16u            /* add mode: read x */
#define POSENC_SINUSOIDAL_FLAG_X_IN_OUT 32u       /* x lives in out (in place): read it there */
/* Rows at the row index come to sinusoidal_contiguous.cl in blocks of POSENC_SINUSOIDAL_BLOCK_ROWS
 * (the host sizes the launch with it), each computed from its anchor row, in its middle, by one
 * angle addition with a step of the table: sin/cos(k f) for k = 0 .. POSENC_SINUSOIDAL_STEPS - 1,
 * after the frequency words (core/gpu_tables.h), step k as `half` cos values then `half` sin
 * values (float bits). */
#define POSENC_SINUSOIDAL_BLOCK_ROWS 64u
#define POSENC_SINUSOIDAL_STEPS (POSENC_SINUSOIDAL_BLOCK_ROWS / 2u + 1u)

/* The push constants of sinusoidal.comp (72 bytes) and the arguments 4..21 of sinusoidal.cl,
 * after the four buffers. Offsets and strides in elements; every element index, and
 * batch * rows * (d_model/2 + d_model%2), fits in 32 bits. */
#define POSENC_SINUSOIDAL_PARAMS(X)                                                               \
    X(POSENC_PARAM_U32, out_offset)                                                               \
    X(POSENC_PARAM_U32, out_stride_batch)                                                         \
    X(POSENC_PARAM_U32, out_stride_row)                                                           \
    X(POSENC_PARAM_U32, out_stride_col)                                                           \
    X(POSENC_PARAM_U32, x_offset)                                                                 \
    X(POSENC_PARAM_U32, x_stride_batch)                                                           \
    X(POSENC_PARAM_U32, x_stride_row)                                                             \
    X(POSENC_PARAM_U32, x_stride_col)                                                             \
    X(POSENC_PARAM_U32, positions_offset)                                                         \
    X(POSENC_PARAM_U32, positions_stride_batch)                                                   \
    X(POSENC_PARAM_U32, positions_stride_row)                                                     \
    X(POSENC_PARAM_U32, batch)                                                                    \
    X(POSENC_PARAM_U32, rows)                                                                     \
    X(POSENC_PARAM_U32, d_model)                                                                  \
    X(POSENC_PARAM_I32, position_offset)                                                          \
    X(POSENC_PARAM_U32, flags)                                                                    \
    X(POSENC_PARAM_F32, input_scale)                                                              \
    X(POSENC_PARAM_F32, output_scale)

/* ---- The copy roofline (copy.comp, copy.cl) ----------------------------------------------------
 * flags: */
#define POSENC_COPY_FLAG_WRITE_ONLY 1u /* write only (like a table); else read + write in place */

/* copy.comp's push constants: offset and count in elements of binding 0; `mask` is 0 at run
 * time but unknown to the compiler, so that the in-place load cannot be folded away. */
#define POSENC_COPY_PUSH(X)                                                                       \
    X(POSENC_PARAM_U32, offset)                                                                   \
    X(POSENC_PARAM_U32, count)                                                                    \
    X(POSENC_PARAM_U32, mask)                                                                     \
    X(POSENC_PARAM_U32, flags)

/* copy.cl's arguments 1..4, after the data: offset and count in words; chunk 0 interleaves
 * work-items word by word (GPUs), n gives each a contiguous run of n words (CPU devices). */
#define POSENC_COPY_ARGS(X)                                                                       \
    X(POSENC_PARAM_U32, offset)                                                                   \
    X(POSENC_PARAM_U32, count)                                                                    \
    X(POSENC_PARAM_U32, flags)                                                                    \
    X(POSENC_PARAM_U32, chunk)

/* ---- C: the blocks as structs, checked against the lists ------------------------------------ */
#if !defined(POSENC_PARAMS_IN_KERNEL)

typedef struct posenc__rope_pass {
    POSENC_ROPE_PASS(POSENC_PARAM_FIELD)
} posenc__rope_pass;
typedef struct posenc__sinusoidal_params {
    POSENC_SINUSOIDAL_PARAMS(POSENC_PARAM_FIELD)
} posenc__sinusoidal_params;
typedef struct posenc__copy_push {
    POSENC_COPY_PUSH(POSENC_PARAM_FIELD)
} posenc__copy_push;
typedef struct posenc__copy_args {
    POSENC_COPY_ARGS(POSENC_PARAM_FIELD)
} posenc__copy_args;

/* Each parameter is a 4-byte scalar, so a struct of 4 bytes a parameter has no padding: the
 * parameter at index i of a list lies at offset 4 * i, its std430 offset in the GLSL block and,
 * in OpenCL, argument (first after the buffers) + i. */
#define POSENC_PARAM_COUNT(type, name) +1
#define POSENC_PARAM_CHECK(block, list)                                                           \
    _Static_assert(sizeof(block) == 4 * (0 list(POSENC_PARAM_COUNT)),                            \
                   #block ": one 4-byte word per parameter")
POSENC_PARAM_CHECK(posenc__rope_pass, POSENC_ROPE_PASS);
POSENC_PARAM_CHECK(posenc__sinusoidal_params, POSENC_SINUSOIDAL_PARAMS);
POSENC_PARAM_CHECK(posenc__copy_push, POSENC_COPY_PUSH);
POSENC_PARAM_CHECK(posenc__copy_args, POSENC_COPY_ARGS);
_Static_assert(sizeof(unsigned int) == 4 && sizeof(int) == 4 && sizeof(float) == 4,
               "32-bit parameters");
_Static_assert(sizeof(posenc__rope_pass) == 128, "a RoPE pass, Vulkan's 128 bytes");
_Static_assert(sizeof(posenc__sinusoidal_params) == 72,
               "sinusoidal.comp's push constants, sinusoidal.cl's arguments 4..21");
#endif

#endif
