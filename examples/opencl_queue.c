/* SPDX-License-Identifier: MIT */
/* posenc inside an OpenCL engine. The engine owns the context, the device, the queue and the
 * buffers, and runs its own kernels; posenc's RoPE goes between two of them, ordered by events:
 *
 *   make_qk (engine) --event--> posenc_cl_enqueue_rope --event--> scores (engine) ... clFinish
 *
 * Nothing waits until the engine's single clFinish at the end. The q.k scores are then checked
 * against a float64 computation here; the exit status is non-zero on a mismatch.
 */
#include <posenc/posenc_opencl.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

enum { TOKENS = 8, HEADS = 4, HEAD_DIM = 64, COUNT = TOKENS * HEADS * HEAD_DIM };
#define THETA 10000.0
#define FIRST_POSITION 1000 /* the tokens sit at positions 1000..1007 of a sequence */

/* The engine's own kernels: q and k from a formula (values exact in float, so the host can
 * recompute them), and the attention scores q[t, h] . k[u, h] for every pair of tokens. */
static const char engine_source[] =
    "__kernel void make_qk(__global float *q, __global float *k)\n"
    "{\n"
    "    int i = get_global_id(0);\n"
    "    q[i] = (float)((i * 7) % 13 - 6) / 8.0f;\n"
    "    k[i] = (float)((i * 5) % 11 - 5) / 4.0f;\n"
    "}\n"
    "__kernel void scores(__global const float *q, __global const float *k,\n"
    "                     __global float *s, int heads, int head_dim)\n"
    "{\n"
    "    int t = get_global_id(0), u = get_global_id(1), h = get_global_id(2);\n"
    "    int tokens = get_global_size(0);\n"
    "    float sum = 0.0f;\n"
    "    for (int d = 0; d < head_dim; d++)\n"
    "        sum += q[(t * heads + h) * head_dim + d] * k[(u * heads + h) * head_dim + d];\n"
    "    s[(h * tokens + t) * tokens + u] = sum;\n"
    "}\n";

static double q_value(int i) { return (double)((i * 7) % 13 - 6) / 8.0; }
static double k_value(int i) { return (double)((i * 5) % 11 - 5) / 4.0; }

/* x[token, head, :] rotated in float64, NeoX pairing (d with d + HEAD_DIM/2). */
static void rotate(double *x, int token)
{
    double position = FIRST_POSITION + token;
    for (int h = 0; h < HEADS; h++) {
        double *head = x + (token * HEADS + h) * HEAD_DIM;
        for (int j = 0; j < HEAD_DIM / 2; j++) {
            double angle = position * pow(THETA, -2.0 * j / HEAD_DIM);
            double a = head[j], b = head[j + HEAD_DIM / 2];
            head[j] = a * cos(angle) - b * sin(angle);
            head[j + HEAD_DIM / 2] = a * sin(angle) + b * cos(angle);
        }
    }
}

static int fail(const char *what, int code)
{
    fprintf(stderr, "%s failed (%d)\n", what, code);
    return EXIT_FAILURE;
}

int main(void)
{
    /* ---- The engine: its device, context, queue, buffers and kernels. */
    cl_platform_id platform;
    cl_device_id device;
    cl_uint found = 0;
    if (clGetPlatformIDs(1, &platform, &found) != CL_SUCCESS || found == 0 ||
        clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &device, &found) != CL_SUCCESS) {
        printf("no OpenCL device: skipped\n");
        return 77; /* "skipped" for CTest, unless the build requires OpenCL devices */
    }
    cl_int err;
    cl_context context = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
    if (err != CL_SUCCESS)
        return fail("clCreateContext", err);
    cl_command_queue queue = clCreateCommandQueue(context, device, 0, &err);
    if (err != CL_SUCCESS)
        return fail("clCreateCommandQueue", err);
    cl_mem q = clCreateBuffer(context, CL_MEM_READ_WRITE, sizeof(float) * COUNT, NULL, &err);
    cl_mem k = clCreateBuffer(context, CL_MEM_READ_WRITE, sizeof(float) * COUNT, NULL, &err);
    cl_mem s = clCreateBuffer(context, CL_MEM_WRITE_ONLY,
                              sizeof(float) * HEADS * TOKENS * TOKENS, NULL, &err);
    if (err != CL_SUCCESS)
        return fail("clCreateBuffer", err);
    const char *source = engine_source;
    cl_program program = clCreateProgramWithSource(context, 1, &source, NULL, &err);
    if (err != CL_SUCCESS || clBuildProgram(program, 1, &device, "", NULL, NULL) != CL_SUCCESS)
        return fail("building the engine's kernels", err);
    cl_kernel make_qk = clCreateKernel(program, "make_qk", &err);
    cl_kernel scores = clCreateKernel(program, "scores", &err);
    if (err != CL_SUCCESS)
        return fail("clCreateKernel", err);

    /* ---- posenc on the engine's objects: borrowed, retained until posenc_context_destroy. */
    posenc_context_desc desc = {.opencl = posenc_opencl_external_of(context, device, queue)};
    posenc_context *ctx = NULL;
    posenc_buffer *q_buffer = NULL, *k_buffer = NULL;
    if (posenc_context_create(&desc, &ctx) != POSENC_OK ||
        posenc_cl_buffer_wrap(ctx, q, &q_buffer) != POSENC_OK ||
        posenc_cl_buffer_wrap(ctx, k, &k_buffer) != POSENC_OK) {
        fprintf(stderr, "posenc: %s%s\n", posenc_thread_last_error(),
                ctx ? posenc_context_last_error(ctx) : "");
        return EXIT_FAILURE;
    }

    /* ---- One step: make q and k, rotate them, compute the scores. */
    size_t global = COUNT;
    cl_event made, rotated, scored;
    clSetKernelArg(make_qk, 0, sizeof q, &q);
    clSetKernelArg(make_qk, 1, sizeof k, &k);
    err = clEnqueueNDRangeKernel(queue, make_qk, 1, NULL, &global, NULL, 0, NULL, &made);
    if (err != CL_SUCCESS)
        return fail("make_qk", err);

    const int64_t q_shape[3] = {TOKENS, HEADS, HEAD_DIM};
    posenc_rope_desc rope = {
        .q = posenc_tensor_of_buffer(q_buffer, POSENC_DTYPE_F32, 3, q_shape),
        .k = posenc_tensor_of_buffer(k_buffer, POSENC_DTYPE_F32, 3, q_shape),
        .position_offset = FIRST_POSITION,
        .theta = THETA,
    };
    if (posenc_cl_enqueue_rope(ctx, &rope, 1, &made, &rotated) != POSENC_OK) {
        fprintf(stderr, "posenc: %s\n", posenc_context_last_error(ctx));
        return EXIT_FAILURE;
    }

    cl_int heads = HEADS, head_dim = HEAD_DIM;
    size_t grid[3] = {TOKENS, TOKENS, HEADS};
    clSetKernelArg(scores, 0, sizeof q, &q);
    clSetKernelArg(scores, 1, sizeof k, &k);
    clSetKernelArg(scores, 2, sizeof s, &s);
    clSetKernelArg(scores, 3, sizeof heads, &heads);
    clSetKernelArg(scores, 4, sizeof head_dim, &head_dim);
    err = clEnqueueNDRangeKernel(queue, scores, 3, NULL, grid, NULL, 1, &rotated, &scored);
    if (err != CL_SUCCESS)
        return fail("scores", err);
    static float result[HEADS][TOKENS][TOKENS];
    err = clEnqueueReadBuffer(queue, s, CL_FALSE, 0, sizeof result, result, 1, &scored, NULL);
    if (err != CL_SUCCESS)
        return fail("clEnqueueReadBuffer", err);
    err = clFinish(queue); /* the engine's only wait */
    if (err != CL_SUCCESS)
        return fail("clFinish", err);

    /* ---- The check: the same step in float64. Each rotated value is within 8 * 2^-24 of its
     * pair's norm (posenc's promise) and the kernel sums 64 float products: the score of
     * |q| |k| is then off by well under 1e-5 |q| |k|. */
    static double q64[COUNT], k64[COUNT];
    for (int i = 0; i < COUNT; i++) {
        q64[i] = q_value(i);
        k64[i] = k_value(i);
    }
    for (int t = 0; t < TOKENS; t++) {
        rotate(q64, t);
        rotate(k64, t);
    }
    double worst = 0.0;
    for (int h = 0; h < HEADS; h++) {
        for (int t = 0; t < TOKENS; t++) {
            for (int u = 0; u < TOKENS; u++) {
                const double *qh = q64 + (t * HEADS + h) * HEAD_DIM;
                const double *kh = k64 + (u * HEADS + h) * HEAD_DIM;
                double exact = 0.0, q_norm = 0.0, k_norm = 0.0;
                for (int d = 0; d < HEAD_DIM; d++) {
                    exact += qh[d] * kh[d];
                    q_norm += qh[d] * qh[d];
                    k_norm += kh[d] * kh[d];
                }
                double error = fabs(result[h][t][u] - exact) / sqrt(q_norm * k_norm);
                worst = error > worst ? error : worst;
            }
        }
    }
    printf("q.k scores of %d heads x %d x %d tokens: worst error %.2e of |q| |k|\n", HEADS,
           TOKENS, TOKENS, worst);

    clReleaseEvent(made);
    clReleaseEvent(rotated);
    clReleaseEvent(scored);
    posenc_context_destroy(ctx); /* also destroys the wrapped buffers: q and k stay the engine's */
    clReleaseKernel(make_qk);
    clReleaseKernel(scores);
    clReleaseProgram(program);
    clReleaseMemObject(q);
    clReleaseMemObject(k);
    clReleaseMemObject(s);
    clReleaseCommandQueue(queue);
    clReleaseContext(context);
    if (!(worst < 1e-5)) {
        fprintf(stderr, "mismatch: the scores are off by more than 1e-5 of |q| |k|\n");
        return EXIT_FAILURE;
    }
    return EXIT_SUCCESS;
}
