/* SPDX-License-Identifier: MIT */
/* Status names and messages, per-context and per-thread error messages, and logging. */
#include "core/internal.h"
#include "core/platform.h"

#include <stdio.h>
#include <string.h>

static POSENC__THREAD_LOCAL char thread_last_error[POSENC__MESSAGE_BYTES];
/* This thread's copy of a context's message, as posenc_context_last_error returns it: the
 * context's own may be rewritten by a call on another thread while the caller reads it. */
static POSENC__THREAD_LOCAL char thread_context_error[POSENC__MESSAGE_BYTES];

const char *posenc_status_name(posenc_status status)
{
    switch (status) {
#define POSENC_STATUS_NAME_(name, value, message) \
    case POSENC_##name:                           \
        return "POSENC_" #name;
        POSENC_STATUS_LIST(POSENC_STATUS_NAME_)
#undef POSENC_STATUS_NAME_
    }
    return "POSENC_UNKNOWN_STATUS";
}

const char *posenc_status_string(posenc_status status)
{
    switch (status) {
#define POSENC_STATUS_STRING_(name, value, message) \
    case POSENC_##name:                             \
        return message;
        POSENC_STATUS_LIST(POSENC_STATUS_STRING_)
#undef POSENC_STATUS_STRING_
    }
    return "unknown status";
}

#define POSENC__STRINGIFY_(x) #x
#define POSENC__STRINGIFY(x) POSENC__STRINGIFY_(x)

const char *posenc_version(void)
{
    return POSENC__STRINGIFY(POSENC_VERSION_MAJOR) "." POSENC__STRINGIFY(
        POSENC_VERSION_MINOR) "." POSENC__STRINGIFY(POSENC_VERSION_PATCH);
}

const char *posenc_thread_last_error(void) { return thread_last_error; }

const char *posenc_context_last_error(const posenc_context *ctx)
{
    if (!ctx)
        return "context: is NULL";
    /* The lock is not part of the context's value: reading locks it all the same. */
    posenc__mutex *lock = (posenc__mutex *)&ctx->shared_lock;
    posenc__mutex_lock(lock);
    posenc__copy_string(thread_context_error, sizeof thread_context_error, ctx->last_error);
    posenc__mutex_unlock(lock);
    return thread_context_error;
}

void posenc__clear_error(posenc_context *ctx)
{
    if (!ctx) {
        thread_last_error[0] = '\0';
        return;
    }
    /* Most calls follow a successful one: then there is nothing to clear and no lock to take.
     * A message another thread is storing meanwhile is then simply ordered after this call. */
    if (!posenc__atomic_load_relaxed(&ctx->has_error))
        return;
    posenc__mutex_lock(&ctx->shared_lock);
    ctx->last_error[0] = '\0';
    posenc__atomic_store_relaxed(&ctx->has_error, 0);
    posenc__mutex_unlock(&ctx->shared_lock);
}

static void emit(posenc_log_fn log, void *user_data, posenc_log_level level, const char *format,
                 va_list args)
{
    if (!log)
        return;
    char message[1024];
    vsnprintf(message, sizeof message, format, args);
    log(level, message, user_data);
}

posenc_status posenc__fail(posenc_context *ctx, posenc_status status, const char *format, ...)
{
    /* Formatted apart, then stored in one copy under the lock: two calls failing at once on
     * one context leave one whole message, never a mix of both. */
    char message[POSENC__MESSAGE_BYTES];
    va_list args;
    va_start(args, format);
    vsnprintf(message, sizeof message, format, args);
    va_end(args);
    /* The call that finds the device lost says what follows from it, whichever backend's. */
    static const char lost_note[] = ": the device was lost; destroy this context";
    size_t length = strlen(message);
    if (status == POSENC_DEVICE_LOST && !strstr(message, "destroy") &&
        length + sizeof lost_note <= sizeof message)
        memcpy(message + length, lost_note, sizeof lost_note);
    if (!ctx) {
        posenc__copy_string(thread_last_error, sizeof thread_last_error, message);
        return status;
    }
    posenc__mutex_lock(&ctx->shared_lock);
    posenc__copy_string(ctx->last_error, sizeof ctx->last_error, message);
    posenc__atomic_store_relaxed(&ctx->has_error, 1);
    posenc__mutex_unlock(&ctx->shared_lock);
    if (status == POSENC_DEVICE_LOST) /* whichever backend call saw it: lost for good */
        posenc__mark_lost(ctx);
    if (ctx->log)
        ctx->log(POSENC_LOG_DEBUG, message, ctx->log_user_data);
    return status;
}

bool posenc__is_lost(const posenc_context *ctx)
{
    return posenc__atomic_load_acquire(&ctx->lost) != 0;
}

void posenc__mark_lost(posenc_context *ctx)
{
    posenc__atomic_store_release(&ctx->lost, 1);
}

posenc_status posenc__check_lost(posenc_context *ctx)
{
    if (!posenc__is_lost(ctx))
        return POSENC_OK;
    return posenc__fail(ctx, POSENC_DEVICE_LOST,
                        "context: the device was lost in an earlier call; only destroying "
                        "this context and its buffers and events works now: create another");
}

void posenc__log(posenc_context *ctx, posenc_log_level level, const char *format, ...)
{
    if (!ctx || !ctx->log)
        return;
    va_list args;
    va_start(args, format);
    emit(ctx->log, ctx->log_user_data, level, format, args);
    va_end(args);
}

void posenc__log_to(posenc_log_fn log, void *user_data, posenc_log_level level,
                    const char *format, ...)
{
    va_list args;
    va_start(args, format);
    emit(log, user_data, level, format, args);
    va_end(args);
}

const char *posenc_backend_name(posenc_backend backend)
{
#define BACKEND_NAME(kind, value, name)                                                           \
    if (backend == POSENC_BACKEND_##kind)                                                         \
        return name;
    POSENC_BACKEND_LIST(BACKEND_NAME)
#undef BACKEND_NAME
    return backend == POSENC_BACKEND_AUTO ? "auto" : "unknown";
}

bool posenc__backend_known(posenc_backend backend)
{
#define BACKEND_KNOWN(kind, value, name) backend == POSENC_BACKEND_##kind ||
    return POSENC_BACKEND_LIST(BACKEND_KNOWN) false;
#undef BACKEND_KNOWN
}

const char *posenc_device_type_name(posenc_device_type type)
{
    switch (type) {
    case POSENC_DEVICE_DISCRETE_GPU: return "discrete GPU";
    case POSENC_DEVICE_INTEGRATED_GPU: return "integrated GPU";
    case POSENC_DEVICE_VIRTUAL_GPU: return "virtual GPU";
    case POSENC_DEVICE_CPU: return "CPU";
    case POSENC_DEVICE_SOFTWARE: return "software";
    case POSENC_DEVICE_OTHER: return "other";
    }
    return "unknown";
}

size_t posenc_dtype_size(posenc_dtype dtype) { return posenc__dtype_size(dtype); }
