/* SPDX-License-Identifier: MIT */
/* `posenc devices`: every device with its capabilities, the backends that are unavailable and
 * why, and what the automatic choice picks; as text or --json. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "device.h"

static const char devices_help[] =
    "usage: posenc devices [--json]\n"
    "\n"
    "Lists every device posenc can use (Vulkan, OpenCL, then its own CPU path), with its\n"
    "selector (\"vulkan:1\": pass it to --device or POSENC_DEVICE), type, vendor, driver,\n"
    "memory, 16-bit and float64 support, compute units and limits; then each backend that is\n"
    "unavailable and why; then the device the automatic choice picks and why, and whether\n"
    "POSENC_DEVICE overrides it.\n"
    "\n"
    "flags:\n"
    "  --json     print one JSON object instead of text\n"
    "  --help     this text\n";

/* The backends in the registry's order, which is the order devices are listed in. */
#define BACKEND_KIND(kind, value, name) POSENC_BACKEND_##kind,

typedef struct devices_choice {
    posenc_status status;
    uint32_t index;
    const char *reason; /* the library's explanation, or its error message on failure */
} devices_choice;

static devices_choice devices_choose(uint32_t flags)
{
    devices_choice choice = {POSENC_OK, 0, ""};
    posenc_context_desc desc = {.flags = flags};
    const char *reason = NULL;
    choice.status = posenc_device_choose(&desc, &choice.index, &reason);
    if (choice.status != POSENC_OK) {
        reason = posenc_thread_last_error();
        if (!reason || !reason[0]) {
            reason = posenc_status_string(choice.status);
        }
    }
    choice.reason = reason ? reason : "";
    return choice;
}

static const char *yes_no(bool value)
{
    return value ? "yes" : "no";
}

/* ---- text ---- */

static void devices_print_choice(const char *label, devices_choice choice,
                                 const posenc_device_info *infos, uint32_t count)
{
    if (choice.status != POSENC_OK) {
        /* The library's message may quote POSENC_DEVICE. */
        printf("%s: none: %s: ", label, posenc_status_name(choice.status));
        cli_put_escaped(stdout, choice.reason);
        printf("\n");
    } else if (choice.index < count) {
        char selector[64];
        cli_device_selector(&infos[choice.index], selector, sizeof selector);
        printf("%s: [%u] %s \"%s\": %s\n", label, choice.index, selector,
               infos[choice.index].name, choice.reason);
    } else {
        printf("%s: device index %u (out of range): %s\n", label, choice.index, choice.reason);
    }
}

static void devices_print_text(const posenc_device_info *infos, uint32_t count)
{
    printf("devices: %u\n", count);
    for (uint32_t i = 0; i < count; i++) {
        const posenc_device_info *d = &infos[i];
        char selector[64], memory[32], max_buffer[32], max_binding[32], subgroup[16];
        cli_device_selector(d, selector, sizeof selector);
        cli_format_bytes(d->memory_bytes, memory, sizeof memory);
        cli_format_bytes(d->max_buffer_bytes, max_buffer, sizeof max_buffer);
        cli_format_bytes(d->max_binding_bytes, max_binding, sizeof max_binding);
        if (d->subgroup_size) {
            snprintf(subgroup, sizeof subgroup, "%u", d->subgroup_size);
        } else {
            snprintf(subgroup, sizeof subgroup, "variable");
        }
        printf("  [%u] %-10s %s\n", i, selector, d->name);
        printf("       type %s%s, vendor %s, driver ", posenc_device_type_name(d->type),
               d->native_cpu ? " (posenc's own CPU path)" : "", d->vendor[0] ? d->vendor : "-");
        cli_put_escaped(stdout, d->driver[0] ? d->driver : "-"); /* may quote the environment */
        printf("\n");
        printf("       memory %s, unified memory %s, host memory import %s\n", memory,
               yes_no(d->unified_memory), yes_no(d->host_memory_import));
        printf("       fp16 storage %s, fp16 arithmetic %s, bf16 %s, fp64 %s\n",
               yes_no(d->fp16_storage), yes_no(d->fp16_arithmetic), yes_no(d->bf16),
               yes_no(d->fp64));
        printf("       compute units %u, max work-group %u, subgroup %s\n", d->compute_units,
               d->max_workgroup_size, subgroup);
        printf("       max buffer %s, max binding %s\n", max_buffer, max_binding);
    }
    printf("backends:\n");
    static const posenc_backend backends[] = {POSENC_BACKEND_LIST(BACKEND_KIND)};
    for (size_t i = 0; i < sizeof backends / sizeof backends[0]; i++) {
        const char *reason = NULL;
        posenc_status status = posenc_backend_status(backends[i], &reason);
        if (status == POSENC_OK) {
            printf("  %-8s available\n", posenc_backend_name(backends[i]));
        } else {
            printf("  %-8s unavailable: %s\n", posenc_backend_name(backends[i]),
                   reason && reason[0] ? reason : posenc_status_string(status));
        }
    }
    const char *env = support_env_get("POSENC_DEVICE");
    devices_print_choice("automatic choice", devices_choose(0), infos, count);
    if (env && env[0]) {
        printf("  POSENC_DEVICE=");
        cli_put_escaped(stdout, env);
        printf(" is set and steers it (--device overrides both)\n");
        devices_print_choice("without POSENC_DEVICE", devices_choose(POSENC_CONTEXT_IGNORE_ENV),
                             infos, count);
    } else {
        printf("  POSENC_DEVICE is not set\n");
    }
}

/* ---- JSON ---- */

static void json_string(const char *text)
{
    putchar('"');
    for (const unsigned char *c = (const unsigned char *)text; *c; c++) {
        if (*c == '"' || *c == '\\') {
            printf("\\%c", *c);
        } else if (*c < 0x20) {
            printf("\\u%04x", *c);
        } else {
            putchar(*c);
        }
    }
    putchar('"');
}

static void json_choice(const char *key, devices_choice choice)
{
    printf("  \"%s\": {", key);
    if (choice.status == POSENC_OK) {
        printf("\"index\": %u, \"status\": \"POSENC_OK\", \"reason\": ", choice.index);
    } else {
        printf("\"index\": null, \"status\": \"%s\", \"reason\": ",
               posenc_status_name(choice.status));
    }
    json_string(choice.reason);
    printf("}");
}

static void devices_print_json(const posenc_device_info *infos, uint32_t count)
{
    printf("{\n  \"devices\": [");
    for (uint32_t i = 0; i < count; i++) {
        const posenc_device_info *d = &infos[i];
        char selector[64];
        cli_device_selector(d, selector, sizeof selector);
        printf("%s\n    {\"index\": %u, \"selector\": \"%s\", \"backend\": \"%s\", "
               "\"backend_index\": %u, \"type\": \"%s\", \"native_cpu\": %s,\n     \"name\": ",
               i ? "," : "", i, selector, posenc_backend_name(d->backend), d->backend_index,
               posenc_device_type_name(d->type), d->native_cpu ? "true" : "false");
        json_string(d->name);
        printf(", \"vendor\": ");
        json_string(d->vendor);
        printf(", \"driver\": ");
        json_string(d->driver);
        printf(",\n     \"memory_bytes\": %llu, \"unified_memory\": %s, "
               "\"host_memory_import\": %s, \"fp16_storage\": %s, "
               "\"fp16_arithmetic\": %s, \"bf16\": %s, \"fp64\": %s,\n",
               (unsigned long long)d->memory_bytes, d->unified_memory ? "true" : "false",
               d->host_memory_import ? "true" : "false",
               d->fp16_storage ? "true" : "false", d->fp16_arithmetic ? "true" : "false",
               d->bf16 ? "true" : "false", d->fp64 ? "true" : "false");
        printf("     \"compute_units\": %u, \"max_workgroup_size\": %u, \"subgroup_size\": %u, "
               "\"max_buffer_bytes\": %llu, \"max_binding_bytes\": %llu}",
               d->compute_units, d->max_workgroup_size, d->subgroup_size,
               (unsigned long long)d->max_buffer_bytes, (unsigned long long)d->max_binding_bytes);
    }
    printf("\n  ],\n  \"backends\": [");
    static const posenc_backend backends[] = {POSENC_BACKEND_LIST(BACKEND_KIND)};
    for (size_t i = 0; i < sizeof backends / sizeof backends[0]; i++) {
        const char *reason = NULL;
        posenc_status status = posenc_backend_status(backends[i], &reason);
        printf("%s\n    {\"backend\": \"%s\", \"available\": %s, \"reason\": ", i ? "," : "",
               posenc_backend_name(backends[i]), status == POSENC_OK ? "true" : "false");
        json_string(status == POSENC_OK ? "" : reason ? reason : posenc_status_string(status));
        printf("}");
    }
    printf("\n  ],\n");
    const char *env = support_env_get("POSENC_DEVICE");
    printf("  \"posenc_device\": ");
    if (env && env[0]) {
        json_string(env);
    } else {
        printf("null");
    }
    printf(",\n");
    json_choice("auto", devices_choose(0));
    printf(",\n");
    json_choice("auto_ignoring_env", devices_choose(POSENC_CONTEXT_IGNORE_ENV));
    printf("\n}\n");
}

/* Returns 0, CLI_EXIT_USAGE on an error, or -1 after --help was printed. */
static int devices_parse(int argc, char **argv, bool *json)
{
    cli_args args;
    int rc;
    cli_args_init(&args, "devices", argc, argv);
    while ((rc = cli_next_flag(&args)) > 0) {
        if (cli_is(&args, "--help")) {
            fputs(devices_help, stdout);
            return -1;
        } else if (cli_is(&args, "--json")) {
            if (cli_no_value(&args)) {
                return CLI_EXIT_USAGE;
            }
            *json = true;
        } else {
            return cli_unknown_flag(&args);
        }
    }
    return rc < 0 ? CLI_EXIT_USAGE : 0;
}

int cli_devices_parse_only(int argc, char **argv)
{
    bool json = false;
    int rc = devices_parse(argc, argv, &json);
    return rc < 0 ? CLI_EXIT_OK : rc;
}

int cli_devices_main(int argc, char **argv)
{
    bool json = false;
    int rc = devices_parse(argc, argv, &json);
    if (rc != 0) {
        return rc < 0 ? CLI_EXIT_OK : rc;
    }

    uint32_t count = 0;
    posenc_status status = posenc_device_count(&count);
    if (status != POSENC_OK) {
        return cli_library_error("devices", NULL, status, "posenc_device_count");
    }
    posenc_device_info *infos = calloc(count ? count : 1, sizeof *infos);
    if (!infos) {
        return cli_fail("devices", CLI_EXIT_FAILURE, "out of memory");
    }
    for (uint32_t i = 0; i < count; i++) {
        status = posenc_device_get(i, &infos[i]);
        if (status != POSENC_OK) {
            free(infos);
            return cli_library_error("devices", NULL, status, "posenc_device_get");
        }
    }
    if (json) {
        devices_print_json(infos, count);
    } else {
        devices_print_text(infos, count);
    }
    free(infos);
    return CLI_EXIT_OK;
}
