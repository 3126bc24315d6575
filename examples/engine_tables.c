/* SPDX-License-Identifier: MIT */
/* Engines' own cos/sin tables through posenc_rope (docs/engines.md, "Engines' cos/sin tables"):
 * the calls of HF transformers (apply_rotary_pos_emb), ONNX RotaryEmbedding, vLLM
 * (rotary_embedding with its cos_sin_cache) and flash-attn (apply_rotary_emb), each checked
 * against that engine's formula written out here. */
#include <posenc/posenc.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#define TOKENS 6
#define HEADS 2
#define HEAD_DIM 16
#define MAX_POSITION 12

static const int32_t position_ids[TOKENS] = {3, 0, 7, 7, 1, 11};

/* The engines build their tables from the same frequencies: theta^(-2j / rotary_dim). */
static double angle(int32_t position, int j, int rotary_dim)
{
    return position * pow(10000.0, -2.0 * j / rotary_dim);
}

/* Rotates q (a copy of `x`) with `desc` and compares it with `want`. */
static int check(posenc_context *ctx, const char *engine, posenc_rope_desc desc, const float *x,
                 const double *want)
{
    static float q[TOKENS * HEADS * HEAD_DIM];
    int64_t shape[4] = {1, TOKENS, HEADS, HEAD_DIM};
    memcpy(q, x, sizeof q);
    desc.q = posenc_tensor_of_host(q, POSENC_DTYPE_F32, 4, shape);
    if (posenc_rope(ctx, &desc) != POSENC_OK) {
        fprintf(stderr, "%s: %s\n", engine, posenc_context_last_error(ctx));
        return 1;
    }
    double worst = 0.0;
    for (int i = 0; i < TOKENS * HEADS * HEAD_DIM; i++) {
        double difference = fabs(q[i] - want[i]);
        if (!(difference <= worst)) /* a NaN too */
            worst = difference;
    }
    printf("%-48s largest difference %.1e\n", engine, worst);
    return worst <= 1e-6 ? 0 : 1;
}

int main(void)
{
    posenc_context *ctx = NULL;
    if (posenc_context_create(NULL, &ctx) != POSENC_OK) {
        fprintf(stderr, "posenc: %s\n", posenc_thread_last_error());
        return 1;
    }
    float x[TOKENS * HEADS * HEAD_DIM];
    for (int i = 0; i < TOKENS * HEADS * HEAD_DIM; i++)
        x[i] = (float)sin(0.37 * i + 0.1);
    double want[TOKENS * HEADS * HEAD_DIM];
    int failed = 0;

    /* HF: cos and sin of [batch, tokens, head_dim], already gathered by position_ids, the
     * halves duplicated (cat(freqs, freqs)); q * cos + rotate_half(q) * sin. */
    static float hf_cos[TOKENS][HEAD_DIM], hf_sin[TOKENS][HEAD_DIM];
    for (int t = 0; t < TOKENS; t++) {
        for (int d = 0; d < HEAD_DIM; d++) {
            double a = angle(position_ids[t], d % (HEAD_DIM / 2), HEAD_DIM);
            hf_cos[t][d] = (float)cos(a);
            hf_sin[t][d] = (float)sin(a);
        }
    }
    for (int t = 0; t < TOKENS; t++) {
        for (int h = 0; h < HEADS; h++) {
            const float *q = x + (t * HEADS + h) * HEAD_DIM;
            for (int d = 0; d < HEAD_DIM; d++) {
                double half = d < HEAD_DIM / 2 ? -q[d + HEAD_DIM / 2] : q[d - HEAD_DIM / 2];
                want[(t * HEADS + h) * HEAD_DIM + d] =
                    (double)q[d] * hf_cos[t][d] + half * hf_sin[t][d];
            }
        }
    }
    int64_t hf_shape[3] = {1, TOKENS, HEAD_DIM};
    posenc_rope_desc hf = {
        .cos = posenc_tensor_of_host(hf_cos, POSENC_DTYPE_F32, 3, hf_shape),
        .sin = posenc_tensor_of_host(hf_sin, POSENC_DTYPE_F32, 3, hf_shape),
    };
    failed |= check(ctx, "HF apply_rotary_pos_emb", hf, x, want);

    /* ONNX RotaryEmbedding (interleaved = 0): cos_cache and sin_cache [max_position, half],
     * rows picked by position_ids; x1 * cos - x2 * sin, x1 * sin + x2 * cos over the halves. */
    static float onnx_cos[MAX_POSITION][HEAD_DIM / 2], onnx_sin[MAX_POSITION][HEAD_DIM / 2];
    for (int p = 0; p < MAX_POSITION; p++) {
        for (int j = 0; j < HEAD_DIM / 2; j++) {
            onnx_cos[p][j] = (float)cos(angle(p, j, HEAD_DIM));
            onnx_sin[p][j] = (float)sin(angle(p, j, HEAD_DIM));
        }
    }
    for (int t = 0; t < TOKENS; t++) {
        for (int h = 0; h < HEADS; h++) {
            const float *q = x + (t * HEADS + h) * HEAD_DIM;
            double *out = want + (t * HEADS + h) * HEAD_DIM;
            for (int j = 0; j < HEAD_DIM / 2; j++) {
                double c = onnx_cos[position_ids[t]][j], s = onnx_sin[position_ids[t]][j];
                out[j] = q[j] * c - q[j + HEAD_DIM / 2] * s;
                out[j + HEAD_DIM / 2] = q[j] * s + q[j + HEAD_DIM / 2] * c;
            }
        }
    }
    int64_t cache_shape[2] = {MAX_POSITION, HEAD_DIM / 2}, ids_shape[1] = {TOKENS};
    posenc_rope_desc onnx = {
        .cos = posenc_tensor_of_host(onnx_cos, POSENC_DTYPE_F32, 2, cache_shape),
        .sin = posenc_tensor_of_host(onnx_sin, POSENC_DTYPE_F32, 2, cache_shape),
        .positions = posenc_tensor_of_host((void *)position_ids, POSENC_DTYPE_I32, 1, ids_shape),
    };
    failed |= check(ctx, "ONNX RotaryEmbedding", onnx, x, want);

    /* vLLM, is_neox = False: one cos_sin_cache [max_position, rotary_dim], cos then sin,
     * passed as two views of it; pairs (2j, 2j + 1). */
    static float cos_sin_cache[MAX_POSITION][HEAD_DIM];
    for (int p = 0; p < MAX_POSITION; p++) {
        for (int j = 0; j < HEAD_DIM / 2; j++) {
            cos_sin_cache[p][j] = onnx_cos[p][j];
            cos_sin_cache[p][j + HEAD_DIM / 2] = onnx_sin[p][j];
        }
    }
    for (int t = 0; t < TOKENS; t++) {
        for (int h = 0; h < HEADS; h++) {
            const float *q = x + (t * HEADS + h) * HEAD_DIM;
            double *out = want + (t * HEADS + h) * HEAD_DIM;
            const float *row = cos_sin_cache[position_ids[t]];
            for (int j = 0; j < HEAD_DIM / 2; j++) {
                double c = row[j], s = row[j + HEAD_DIM / 2];
                out[2 * j] = q[2 * j] * c - q[2 * j + 1] * s;
                out[2 * j + 1] = q[2 * j + 1] * c + q[2 * j] * s;
            }
        }
    }
    posenc_rope_desc vllm = {
        .style = POSENC_ROPE_GPTJ,
        .positions = onnx.positions,
        .cos = posenc_tensor_of_host(cos_sin_cache, POSENC_DTYPE_F32, 2, cache_shape),
        .sin = posenc_tensor_of_host(cos_sin_cache, POSENC_DTYPE_F32, 2, cache_shape),
    };
    /* Rows of the whole cache; sin starts half a row in. */
    vllm.cos.strides[0] = vllm.sin.strides[0] = (int64_t)sizeof cos_sin_cache[0];
    vllm.sin.offset = HEAD_DIM / 2 * sizeof(float);
    failed |= check(ctx, "vLLM rotary_embedding (cos_sin_cache, GPT-J)", vllm, x, want);

    /* flash-attn apply_rotary_emb(x, cos, sin, seqlen_offsets=2): cos and sin
     * [seqlen, rotary_dim / 2] for a partial rotary_dim of 8, rows from the offset on; the
     * dims past rotary_dim pass through. */
    enum { ROTARY = 8, OFFSET = 2 };
    static float fa_cos[MAX_POSITION][ROTARY / 2], fa_sin[MAX_POSITION][ROTARY / 2];
    for (int p = 0; p < MAX_POSITION; p++) {
        for (int j = 0; j < ROTARY / 2; j++) {
            fa_cos[p][j] = (float)cos(angle(p, j, ROTARY));
            fa_sin[p][j] = (float)sin(angle(p, j, ROTARY));
        }
    }
    for (int t = 0; t < TOKENS; t++) {
        for (int h = 0; h < HEADS; h++) {
            const float *q = x + (t * HEADS + h) * HEAD_DIM;
            double *out = want + (t * HEADS + h) * HEAD_DIM;
            for (int d = ROTARY; d < HEAD_DIM; d++)
                out[d] = q[d];
            for (int j = 0; j < ROTARY / 2; j++) {
                double c = fa_cos[OFFSET + t][j], s = fa_sin[OFFSET + t][j];
                out[j] = q[j] * c - q[j + ROTARY / 2] * s;
                out[j + ROTARY / 2] = q[j] * s + q[j + ROTARY / 2] * c;
            }
        }
    }
    int64_t fa_shape[2] = {MAX_POSITION, ROTARY / 2};
    posenc_rope_desc flash = {
        .rotary_dim = ROTARY,
        .position_offset = OFFSET,
        .cos = posenc_tensor_of_host(fa_cos, POSENC_DTYPE_F32, 2, fa_shape),
        .sin = posenc_tensor_of_host(fa_sin, POSENC_DTYPE_F32, 2, fa_shape),
    };
    failed |= check(ctx, "flash-attn apply_rotary_emb (partial, offset)", flash, x, want);

    posenc_context_destroy(ctx);
    return failed;
}
