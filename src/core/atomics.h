/* SPDX-License-Identifier: MIT */
/* The few 32-bit atomic operations the CPU thread pool needs, 64-bit counters for the context's
 * statistics, and a CPU pause for spin loops: GCC and Clang __atomic builtins (MinGW included),
 * or MSVC intrinsics, whose C compiler has no <stdatomic.h> without an experimental flag.
 * Private to the library (and its tests). */
#ifndef POSENC_CORE_ATOMICS_H
#define POSENC_CORE_ATOMICS_H

#include <stdbool.h>
#include <stdint.h>

/* A 32-bit value that several threads read and write at once: only through the functions
 * below. A struct, so that a plain read or write of it does not compile. */
typedef struct posenc__atomic_u32 {
    volatile uint32_t value;
} posenc__atomic_u32;

/* A 64-bit counter that several threads add to at once. Aligned to 8 bytes even where uint64_t
 * is not (32-bit x86), so that its loads and read-modify-writes are single-copy atomic. */
#if defined(_MSC_VER) && !defined(__clang__)
typedef struct posenc__atomic_u64 {
    __declspec(align(8)) volatile uint64_t value;
} posenc__atomic_u64;
#else
typedef struct posenc__atomic_u64 {
    volatile uint64_t value __attribute__((aligned(8)));
} posenc__atomic_u64;
#endif

#if defined(__GNUC__) || defined(__clang__)

static inline uint32_t posenc__atomic_load_relaxed(const posenc__atomic_u32 *a)
{
    return __atomic_load_n(&a->value, __ATOMIC_RELAXED);
}
static inline uint32_t posenc__atomic_load_acquire(const posenc__atomic_u32 *a)
{
    return __atomic_load_n(&a->value, __ATOMIC_ACQUIRE);
}
static inline void posenc__atomic_store_relaxed(posenc__atomic_u32 *a, uint32_t value)
{
    __atomic_store_n(&a->value, value, __ATOMIC_RELAXED);
}
static inline void posenc__atomic_store_release(posenc__atomic_u32 *a, uint32_t value)
{
    __atomic_store_n(&a->value, value, __ATOMIC_RELEASE);
}
/* Both return the value before the change. */
static inline uint32_t posenc__atomic_fetch_add(posenc__atomic_u32 *a, uint32_t value)
{
    return __atomic_fetch_add(&a->value, value, __ATOMIC_ACQ_REL);
}
static inline uint32_t posenc__atomic_fetch_sub(posenc__atomic_u32 *a, uint32_t value)
{
    return __atomic_fetch_sub(&a->value, value, __ATOMIC_ACQ_REL);
}
/* Sets *a to `desired` where it holds `expected`, and says whether it did. */
static inline bool posenc__atomic_compare_exchange(posenc__atomic_u32 *a, uint32_t expected,
                                                   uint32_t desired)
{
    return __atomic_compare_exchange_n(&a->value, &expected, desired, false, __ATOMIC_ACQ_REL,
                                       __ATOMIC_ACQUIRE);
}

/* Counters: relaxed, since they order nothing; each stays exact under concurrent updates. */
static inline uint64_t posenc__atomic64_load(const posenc__atomic_u64 *a)
{
    return __atomic_load_n(&a->value, __ATOMIC_RELAXED);
}
static inline void posenc__atomic64_add(posenc__atomic_u64 *a, uint64_t value)
{
    (void)__atomic_fetch_add(&a->value, value, __ATOMIC_RELAXED);
}
static inline void posenc__atomic64_sub(posenc__atomic_u64 *a, uint64_t value)
{
    (void)__atomic_fetch_sub(&a->value, value, __ATOMIC_RELAXED);
}

/* Tells the core that this is a spin loop (lets a sibling hyperthread run, saves power). */
#  if defined(__x86_64__) || defined(__i386__)
static inline void posenc__cpu_pause(void) { __builtin_ia32_pause(); }
#  elif defined(__aarch64__) || defined(__arm__)
static inline void posenc__cpu_pause(void) { __asm__ __volatile__("yield"); }
#  else
static inline void posenc__cpu_pause(void) {}
#  endif

#elif defined(_MSC_VER)

#  include <intrin.h>

/* Plain volatile accesses with /volatile:iso semantics (__iso_volatile_*: no implied fences on
 * ARM64), ordered by hand: on x86 and x64 every load is an acquire and every store a release,
 * so only the compiler must be kept from moving accesses across them (_ReadWriteBarrier); on
 * ARM64 a full data memory barrier (dmb ish) does it. The Interlocked read-modify-writes are
 * full barriers on both, which is at least acq_rel. */
#  if defined(_M_ARM64) || defined(_M_ARM64EC)
#    define POSENC__ATOMIC_FENCE() __dmb(_ARM64_BARRIER_ISH)
#  elif defined(_M_X64) || defined(_M_IX86)
#    define POSENC__ATOMIC_FENCE() _ReadWriteBarrier()
#  else
#    error "posenc: MSVC atomics for x86, x64 and ARM64 only"
#  endif

static __forceinline uint32_t posenc__atomic_load_relaxed(const posenc__atomic_u32 *a)
{
    return (uint32_t)__iso_volatile_load32((const volatile __int32 *)&a->value);
}
static __forceinline uint32_t posenc__atomic_load_acquire(const posenc__atomic_u32 *a)
{
    uint32_t value = (uint32_t)__iso_volatile_load32((const volatile __int32 *)&a->value);
    POSENC__ATOMIC_FENCE();
    return value;
}
static __forceinline void posenc__atomic_store_relaxed(posenc__atomic_u32 *a, uint32_t value)
{
    __iso_volatile_store32((volatile __int32 *)&a->value, (__int32)value);
}
static __forceinline void posenc__atomic_store_release(posenc__atomic_u32 *a, uint32_t value)
{
    POSENC__ATOMIC_FENCE();
    __iso_volatile_store32((volatile __int32 *)&a->value, (__int32)value);
}
static __forceinline uint32_t posenc__atomic_fetch_add(posenc__atomic_u32 *a, uint32_t value)
{
    return (uint32_t)_InterlockedExchangeAdd((volatile long *)&a->value, (long)value);
}
static __forceinline uint32_t posenc__atomic_fetch_sub(posenc__atomic_u32 *a, uint32_t value)
{
    return (uint32_t)_InterlockedExchangeAdd((volatile long *)&a->value, -(long)value);
}
static __forceinline bool posenc__atomic_compare_exchange(posenc__atomic_u32 *a,
                                                          uint32_t expected, uint32_t desired)
{
    return (uint32_t)_InterlockedCompareExchange((volatile long *)&a->value, (long)desired,
                                                 (long)expected) == expected;
}

/* A compare-exchange that changes nothing reads all 64 bits at once on 32-bit x86 too, where a
 * plain volatile load may be split in two; only the statistics read counters, so its cost is
 * no matter. */
static __forceinline uint64_t posenc__atomic64_load(const posenc__atomic_u64 *a)
{
    return (uint64_t)_InterlockedCompareExchange64((volatile __int64 *)&a->value, 0, 0);
}
static __forceinline void posenc__atomic64_add(posenc__atomic_u64 *a, uint64_t value)
{
    (void)_InterlockedExchangeAdd64((volatile __int64 *)&a->value, (__int64)value);
}
static __forceinline void posenc__atomic64_sub(posenc__atomic_u64 *a, uint64_t value)
{
    (void)_InterlockedExchangeAdd64((volatile __int64 *)&a->value, -(__int64)value);
}

#  if defined(_M_ARM64) || defined(_M_ARM64EC)
static __forceinline void posenc__cpu_pause(void) { __yield(); }
#  else
static __forceinline void posenc__cpu_pause(void) { _mm_pause(); }
#  endif

#else
#  error "posenc: atomics need GCC, Clang or MSVC"
#endif

#endif
