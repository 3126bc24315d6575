/* SPDX-License-Identifier: MIT */
/* The OpenCL ICD the tests build (fault_icd.c): a driver for the ICD loader that is the real
 * one (PoCL) behind a dispatch table of its own, and makes a chosen call fail, a lost device
 * among the failures. The tests point the loader at it with OCL_ICD_VENDORS (naming the
 * library) and steer it through these functions, which they find with dlopen/dlsym
 * on the double's own library; or, from the process start, through the environment:
 *   POSENC_CL_FAULT_ICD     the real ICD (default libpocl.so.2)
 *   POSENC_CL_FAULT_CALL    the entry point that fails ("clEnqueueNDRangeKernel"; "*": any
 *                           wrapped call but retains and releases); unset, the double only
 *                           counts
 *   POSENC_CL_FAULT_AT      which of its calls fails, from 1 (default 1)
 *   POSENC_CL_FAULT_ERROR   what that call returns: a name (CL_OUT_OF_RESOURCES) or a number
 *                           (default CL_DEVICE_NOT_AVAILABLE)
 *   POSENC_CL_FAULT_STATUS  instead of ERROR: the execution status the commands end with
 *                           (below)
 *
 * What a fault does
 * - An error: the call returns it without reaching the real ICD (no command, no object, no
 *   event). CL_DEVICE_NOT_AVAILABLE loses the call's cl_context (below); any other error
 *   fails that call only, as in a sweep of every call's failures.
 * - A status: the commands end with that negative execution status, as when a device fails
 *   work it had accepted. Only the calls that report statuses take it: clWaitForEvents returns
 *   CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST, a query of CL_EVENT_COMMAND_EXECUTION_STATUS
 *   returns the status, clFinish the status itself; the fault fires at the first of them from
 *   the Nth call on (other queries of clGetEventInfo, other calls for "*", pass). A status
 *   always loses the context, whatever the code: with no record of single events, a failed
 *   command can only be told by the context's state (drivers that give CL_OUT_OF_RESOURCES
 *   after a crashed kernel behave the same way).
 * - A lost context stays lost, as a real driver's: every later call on its objects that can
 *   report a device failure does (creating buffers, programs, kernels and queues, building,
 *   enqueueing, flushing, finishing and waiting), with the fault's code, and every query of
 *   an event's execution status gives that code; waits return
 *   CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST. Queries, retains and releases keep working,
 *   so everything can still be released. Other contexts, and contexts made later, on the
 *   same device keep working: the loss is the context's, as a GPU reset loses the context
 *   that caused it.
 * - Before it reports a command failed (a wait, a finish, a status query), the double waits
 *   for the real command, so that nothing the real ICD still runs is freed under it. A
 *   command held back by a user event that is never set therefore waits for ever, as it
 *   would without the double.
 *
 * Objects made by entry points the double does not wrap (images, samplers, clCloneKernel, ...)
 * stay the real ICD's own, and calls on them bypass it. */
#ifndef POSENC_TESTS_FAULT_ICD_H
#define POSENC_TESTS_FAULT_ICD_H

#include <stdint.h>

/* Arms the double: the `nth` call from now (1: the next one) of entry point `call`
 * ("clEnqueueNDRangeKernel"; "*": any call the double wraps) fails with `error` (a cl_int),
 * as an error or, with `as_status`, as the commands' execution status (above). `nth` 0
 * disarms. Every call resets the counts; contexts already lost stay lost. */
typedef void (*posenc_cl_faults_arm_fn)(const char *call, uint32_t nth, int32_t error,
                                        int as_status);
#define POSENC_CL_FAULTS_ARM "posenc_cl_faults_arm"

/* Calls of `call` ("*": all wrapped calls) since the last arm; the fault, once it fired,
 * counts. */
typedef uint32_t (*posenc_cl_faults_count_fn)(const char *call);
#define POSENC_CL_FAULTS_COUNT "posenc_cl_faults_count"

/* Whether the fault fired since the last arm. */
typedef int (*posenc_cl_faults_fired_fn)(void);
#define POSENC_CL_FAULTS_FIRED "posenc_cl_faults_fired"

/* The entry point the fault fired in since the last arm ("clEnqueueNDRangeKernel"), or "". */
typedef const char *(*posenc_cl_faults_fired_call_fn)(void);
#define POSENC_CL_FAULTS_FIRED_CALL "posenc_cl_faults_fired_call"

/* Whether `context` (a cl_context) is lost. */
typedef int (*posenc_cl_faults_lost_fn)(const void *context);
#define POSENC_CL_FAULTS_LOST "posenc_cl_faults_lost"

/* The double's own definitions of the five (fault_icd.c). */
void posenc_cl_faults_arm(const char *call, uint32_t nth, int32_t error, int as_status);
uint32_t posenc_cl_faults_count(const char *call);
int posenc_cl_faults_fired(void);
const char *posenc_cl_faults_fired_call(void);
int posenc_cl_faults_lost(const void *context);

#endif
