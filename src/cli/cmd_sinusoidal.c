/* SPDX-License-Identifier: MIT */
/* `posenc sinusoidal`: a sinusoidal position table, or x plus the table (add mode), for row
 * indices or a positions file (e.g. diffusion timesteps), written as .npy. */
#include <float.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "data.h"
#include "device.h"
#include "outputs.h"

static const char sinusoidal_help[] =
    "usage: posenc sinusoidal (--rows N --d-model D | --positions FILE --d-model D | --x FILE)\n"
    "                         [FLAGS]\n"
    "\n"
    "Writes out[b, r, :] = x[b, r, :] * input_scale + output_scale * PE(p), p the position of\n"
    "row r; PE(p) has d_model values at frequencies f_i = base^(-i / (d_model/2 - freq_shift)),\n"
    "i < d_model/2 (an odd d_model ends in one zero). Without --x it writes the table PE.\n"
    "\n"
    "data (.npy, little-endian, C order; f32 '<f4', f16 '<f2', or bf16 stored as '<u2' raw\n"
    "bf16 words since numpy has no bf16):\n"
    "  --rows N              table rows, at positions N0 + 0 .. N0 + N-1 (N0: --position-offset)\n"
    "  --d-model D           values per row (required unless --x gives it)\n"
    "  --positions FILE      positions instead of row indices: i32 '<i4' (i64 '<i8' is narrowed)\n"
    "                        or f32 '<f4' (e.g. diffusion timesteps), [rows] or [batch, rows];\n"
    "                        the output is [rows, D] or [batch, rows, D]\n"
    "  --x FILE              add mode: x [rows, D] or [batch, rows, D]; out has its shape\n"
    "  --out FILE            write the result (same shape as x, or [.., rows, D])\n"
    "  --dtype f32|f16|bf16  output dtype (default: x's dtype, or f32)\n"
    "\n"
    "encoding:\n"
    "  --layout interleaved|sin_cos|cos_sin\n"
    "                        interleaved: sin f0, cos f0, sin f1, ... (Vaswani; default);\n"
    "                        sin_cos: [sin | cos] (diffusers); cos_sin: [cos | sin]\n"
    "                        (diffusers flip_sin_to_cos)\n"
    "  --base X              max_period (default 10000)\n"
    "  --freq-shift X        diffusers' downscale_freq_shift (default 0)\n"
    "  --position-scale X    multiplies positions (diffusers' scale; default 1)\n"
    "  --input-scale X       add mode: multiplies x, e.g. sqrt(d_model) (default 1)\n"
    "  --output-scale X      multiplies PE (default 1)\n"
    "  --position-offset N   without --positions: position = N + row index (default 0)\n"
    "  Names (--layout, --dtype) are written with underscores; hyphens (cos-sin) and any\n"
    "  case are accepted too.\n"
    "\n"
    "other:\n"
    "  --device SEL          cpu, vulkan, vulkan:1, opencl:0 or a name substring (default:\n"
    "                        automatic, or POSENC_DEVICE)\n"
    "  --quiet               print nothing on success\n"
    "  --help                this text\n"
    "\n"
    "example: posenc sinusoidal --rows 2048 --d-model 512 --out pe.npy\n"
    "         posenc sinusoidal --positions t.npy --d-model 320 --layout cos_sin --out emb.npy\n";

typedef struct sinusoidal_options {
    const char *positions_path, *x_path, *out_path, *device;
    int64_t rows;     /* 0: not given */
    int64_t d_model;  /* 0: not given */
    posenc_dtype dtype;
    bool quiet;
    posenc_sinusoidal_desc desc; /* the scalar fields, straight from the flags */
} sinusoidal_options;

/* A finite non-zero number: zero would silently mean "the default". */
static int sinusoidal_nonzero(cli_args *args, double *value)
{
    const char *text = NULL;
    double v = 0;
    if (cli_value(args, &text)) {
        return CLI_EXIT_USAGE;
    }
    if (!cli_parse_double(text, &v) || v == 0.0) {
        return cli_bad_value(args, text, "a non-zero number");
    }
    *value = v;
    return 0;
}

static int sinusoidal_size(cli_args *args, int64_t *value)
{
    const char *text = NULL;
    if (cli_value(args, &text)) {
        return CLI_EXIT_USAGE;
    }
    if (!cli_parse_i64(text, value) || *value < 1) {
        return cli_bad_value(args, text, "a positive integer");
    }
    return 0;
}

/* Returns 0, CLI_EXIT_USAGE on an error, or -1 after --help was printed. */
static int sinusoidal_parse(int argc, char **argv, sinusoidal_options *o)
{
    cli_args args;
    int rc;
    cli_args_init(&args, "sinusoidal", argc, argv);
    while ((rc = cli_next_flag(&args)) > 0) {
        posenc_sinusoidal_desc *d = &o->desc;
        if (cli_is(&args, "--help")) {
            fputs(sinusoidal_help, stdout);
            return -1;
        } else if (cli_is(&args, "--rows")) {
            rc = sinusoidal_size(&args, &o->rows);
        } else if (cli_is(&args, "--d-model")) {
            rc = sinusoidal_size(&args, &o->d_model);
        } else if (cli_is(&args, "--positions")) {
            rc = cli_value(&args, &o->positions_path);
        } else if (cli_is(&args, "--x")) {
            rc = cli_value(&args, &o->x_path);
        } else if (cli_is(&args, "--out")) {
            rc = cli_value(&args, &o->out_path);
        } else if (cli_is(&args, "--device")) {
            rc = cli_value(&args, &o->device);
        } else if (cli_is(&args, "--dtype")) {
            rc = cli_value_data_dtype(&args, &o->dtype);
        } else if (cli_is(&args, "--layout")) {
            rc = cli_value_sinusoidal_layout(&args, &d->layout);
        } else if (cli_is(&args, "--base")) {
            rc = cli_value_double(&args, &d->base, 0.0, true, "a positive number");
        } else if (cli_is(&args, "--freq-shift")) {
            rc = cli_value_double(&args, &d->freq_shift, -DBL_MAX, false, "a number");
        } else if (cli_is(&args, "--position-scale")) {
            rc = cli_value_double(&args, &d->position_scale, 0.0, true, "a positive number");
        } else if (cli_is(&args, "--input-scale")) {
            rc = sinusoidal_nonzero(&args, &d->input_scale);
        } else if (cli_is(&args, "--output-scale")) {
            rc = sinusoidal_nonzero(&args, &d->output_scale);
        } else if (cli_is(&args, "--position-offset")) {
            rc = cli_value_i32(&args, &d->position_offset);
        } else if (cli_is(&args, "--quiet")) {
            o->quiet = true;
            rc = cli_no_value(&args);
        } else {
            return cli_unknown_flag(&args);
        }
        if (rc) {
            return CLI_EXIT_USAGE;
        }
    }
    if (rc < 0) {
        return CLI_EXIT_USAGE;
    }
    if (o->rows && (o->positions_path || o->x_path)) {
        return cli_fail("sinusoidal", CLI_EXIT_USAGE,
                        "--rows applies only without --positions and --x (they give the rows)");
    }
    if (!o->x_path && !o->d_model) {
        return cli_fail("sinusoidal", CLI_EXIT_USAGE, "--d-model D is required (or --x FILE)");
    }
    if (!o->x_path && !o->positions_path && !o->rows) {
        return cli_fail("sinusoidal", CLI_EXIT_USAGE,
                        "one of --rows N, --positions FILE or --x FILE is required");
    }
    if (o->positions_path && o->desc.position_offset != 0) {
        return cli_fail("sinusoidal", CLI_EXIT_USAGE,
                        "--position-offset applies only without --positions");
    }
    return 0;
}

typedef struct sinusoidal_data {
    cli_npy_array x, out, positions;
} sinusoidal_data;

static int sinusoidal_load(const sinusoidal_options *o, sinusoidal_data *data)
{
    int rc = 0;
    if (o->x_path) {
        rc = cli_load_data("sinusoidal", "--x", o->x_path, &data->x);
        if (rc) {
            return rc;
        }
        int64_t x_d_model = data->x.shape[data->x.ndim - 1];
        if (o->d_model && o->d_model != x_d_model) {
            return cli_fail("sinusoidal", CLI_EXIT_USAGE,
                            "--d-model %lld does not match --x %s, whose last dim is %lld",
                            (long long)o->d_model, o->x_path, (long long)x_d_model);
        }
    }
    if (o->positions_path) {
        rc = cli_load_positions("sinusoidal", "--positions", o->positions_path, &data->positions);
        if (rc) {
            return rc;
        }
        if (data->positions.ndim > 2) {
            return cli_fail("sinusoidal", CLI_EXIT_FAILURE,
                            "--positions %s: expected [rows] or [batch, rows], got %u dims",
                            o->positions_path, data->positions.ndim);
        }
    }

    posenc_dtype dtype = o->dtype ? o->dtype
                         : o->x_path ? cli_posenc_dtype(data->x.dtype)
                                     : POSENC_DTYPE_F32;
    int64_t shape[CLI_NPY_MAX_DIMS];
    uint32_t ndim;
    if (o->x_path) {
        ndim = data->x.ndim;
        memcpy(shape, data->x.shape, sizeof shape);
    } else if (o->positions_path) {
        ndim = data->positions.ndim + 1;
        memcpy(shape, data->positions.shape, sizeof shape);
        shape[ndim - 1] = o->d_model;
    } else {
        ndim = 2;
        shape[0] = o->rows;
        shape[1] = o->d_model;
    }
    if (cli_npy_alloc(&data->out, cli_npy_dtype_of(dtype), ndim, shape) != 0) {
        return cli_fail("sinusoidal", CLI_EXIT_FAILURE, "cannot allocate the output");
    }
    return 0;
}

static int sinusoidal_run(const sinusoidal_options *o, sinusoidal_data *data)
{
    cli_outputs outputs;
    cli_outputs_init(&outputs, "sinusoidal");
    cli_outputs_add(&outputs, "--out", o->out_path, &data->out);
    int rc = cli_outputs_check(&outputs);
    if (rc) {
        return rc;
    }
    rc = sinusoidal_load(o, data);
    if (rc) {
        return rc;
    }
    posenc_sinusoidal_desc desc = o->desc;
    desc.out = cli_tensor_of(&data->out);
    if (data->x.data) {
        desc.x = cli_tensor_of(&data->x);
    }
    if (data->positions.data) {
        desc.positions = cli_tensor_of(&data->positions);
    }

    posenc_context *context = NULL;
    posenc_device_info info;
    rc = cli_open_context("sinusoidal", o->device, &context, &info);
    if (rc) {
        return rc;
    }
    posenc_status status = posenc_sinusoidal(context, &desc);
    if (status != POSENC_OK) {
        rc = cli_library_error("sinusoidal", context, status, "posenc_sinusoidal");
        posenc_context_destroy(context);
        return rc;
    }
    posenc_context_destroy(context);

    rc = cli_outputs_write(&outputs);
    if (rc) {
        return rc;
    }
    if (!o->quiet) {
        char selector[64], shape[96];
        cli_device_selector(&info, selector, sizeof selector);
        cli_npy_format_shape(data->out.ndim, data->out.shape, shape, sizeof shape);
        printf("sinusoidal: %s %s %s on %s (%s)", data->x.data ? "x + table" : "table", shape,
               cli_npy_dtype_name(data->out.dtype), selector, info.name);
        if (o->out_path) {
            printf(": wrote ");
            cli_put_escaped(stdout, o->out_path);
            printf("\n");
        } else {
            printf("; nothing written without --out\n");
        }
    }
    return CLI_EXIT_OK;
}

int cli_sinusoidal_main(int argc, char **argv)
{
    sinusoidal_options options;
    memset(&options, 0, sizeof options);
    int rc = sinusoidal_parse(argc, argv, &options);
    if (rc != 0) {
        return rc < 0 ? CLI_EXIT_OK : rc;
    }
    sinusoidal_data data;
    memset(&data, 0, sizeof data);
    rc = sinusoidal_run(&options, &data);
    cli_npy_free(&data.x);
    cli_npy_free(&data.out);
    cli_npy_free(&data.positions);
    return rc;
}

int cli_sinusoidal_parse_only(int argc, char **argv)
{
    sinusoidal_options options;
    memset(&options, 0, sizeof options);
    int rc = sinusoidal_parse(argc, argv, &options);
    return rc < 0 ? CLI_EXIT_OK : rc;
}
