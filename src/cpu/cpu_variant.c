/* SPDX-License-Identifier: MIT */
/* Which kernel variants this build has and this CPU runs: CPUID feature bits and, for the wide
 * registers, XGETBV (the OS must save them on context switches). Detected once per process. */
#include "core/platform.h"
#include "cpu/cpu_kernels.h"

#include <string.h>

#if (defined(__x86_64__) || defined(_M_X64)) && defined(POSENC_CPU_X86_VARIANTS)
#  define HAVE_X86_VARIANTS 1
#  if defined(_MSC_VER) && !defined(__clang__)
#    include <intrin.h>
#  else
#    include <cpuid.h>
#  endif
#else
#  define HAVE_X86_VARIANTS 0
#endif
#if (defined(__aarch64__) || defined(_M_ARM64)) && defined(POSENC_CPU_NEON_VARIANT)
#  define HAVE_NEON_VARIANT 1
#else
#  define HAVE_NEON_VARIANT 0
#endif

static const char *const variant_names[POSENC_CPU_VARIANT_COUNT] = {
    [POSENC_CPU_PORTABLE] = "portable",
    [POSENC_CPU_AVX2] = "avx2",
    [POSENC_CPU_AVX512] = "avx512",
    [POSENC_CPU_AVX512BF16] = "avx512bf16",
    [POSENC_CPU_NEON] = "neon",
};

static struct {
    posenc__once once;
    bool runs[POSENC_CPU_VARIANT_COUNT];
} detected;

#if HAVE_X86_VARIANTS
static void cpuid(uint32_t leaf, uint32_t subleaf, uint32_t regs[4])
{
#  if defined(_MSC_VER) && !defined(__clang__)
    int r[4];
    __cpuidex(r, (int)leaf, (int)subleaf);
    for (int i = 0; i < 4; i++)
        regs[i] = (uint32_t)r[i];
#  else
    __cpuid_count(leaf, subleaf, regs[0], regs[1], regs[2], regs[3]);
#  endif
}

/* XCR0: which register states the OS saves. Only valid when CPUID says OSXSAVE. */
static uint64_t xgetbv0(void)
{
#  if defined(_MSC_VER) && !defined(__clang__)
    return _xgetbv(0);
#  else
    uint32_t eax, edx;
    __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
    return ((uint64_t)edx << 32) | eax;
#  endif
}

static void detect_x86(void)
{
    uint32_t r[4];
    cpuid(0, 0, r);
    uint32_t max_leaf = r[0];
    if (max_leaf < 7)
        return;
    cpuid(1, 0, r);
    uint32_t ecx1 = r[2];
    bool fma = ecx1 & (1u << 12), osxsave = ecx1 & (1u << 27), avx = ecx1 & (1u << 28),
         f16c = ecx1 & (1u << 29);
    if (!(osxsave && avx))
        return;
    uint64_t xcr0 = xgetbv0();
    bool ymm_saved = (xcr0 & 0x6) == 0x6;    /* SSE and AVX state */
    bool zmm_saved = (xcr0 & 0xe6) == 0xe6;  /* plus opmask, ZMM0-15 upper halves, ZMM16-31 */
    cpuid(7, 0, r);
    uint32_t ebx7 = r[1], eax7 = r[0];
    bool avx2 = ebx7 & (1u << 5);
    bool avx512 = (ebx7 & (1u << 16)) && (ebx7 & (1u << 17)) && (ebx7 & (1u << 30)) &&
                  (ebx7 & (1u << 31)); /* F, DQ, BW, VL */
    bool bf16 = false;
    if (eax7 >= 1) {
        cpuid(7, 1, r);
        bf16 = r[0] & (1u << 5);
    }
    detected.runs[POSENC_CPU_AVX2] = ymm_saved && avx2 && fma && f16c;
    detected.runs[POSENC_CPU_AVX512] = detected.runs[POSENC_CPU_AVX2] && zmm_saved && avx512;
#  if defined(POSENC_CPU_AVX512BF16_VARIANT)
    detected.runs[POSENC_CPU_AVX512BF16] = detected.runs[POSENC_CPU_AVX512] && bf16;
#  else
    (void)bf16;
#  endif
}
#endif

static void detect(void)
{
    detected.runs[POSENC_CPU_PORTABLE] = true;
#if HAVE_X86_VARIANTS
    detect_x86();
#endif
#if HAVE_NEON_VARIANT
    detected.runs[POSENC_CPU_NEON] = true;
#endif
}

bool posenc_cpu_variant_compiled(posenc_cpu_variant variant)
{
    switch (variant) {
    case POSENC_CPU_PORTABLE: return true;
    case POSENC_CPU_AVX2:
    case POSENC_CPU_AVX512: return HAVE_X86_VARIANTS;
    case POSENC_CPU_AVX512BF16:
#if HAVE_X86_VARIANTS && defined(POSENC_CPU_AVX512BF16_VARIANT)
        return true;
#else
        return false;
#endif
    case POSENC_CPU_NEON: return HAVE_NEON_VARIANT;
    default: return false;
    }
}

const posenc_cpu_kernels *posenc_cpu_kernels_for(posenc_cpu_variant variant)
{
    if ((unsigned)variant >= POSENC_CPU_VARIANT_COUNT)
        return NULL;
    posenc__run_once(&detected.once, detect);
    if (!detected.runs[variant])
        return NULL;
    switch (variant) {
#if HAVE_X86_VARIANTS
    case POSENC_CPU_AVX2: return &posenc_cpu_kernels_avx2;
    case POSENC_CPU_AVX512: return &posenc_cpu_kernels_avx512;
#  if defined(POSENC_CPU_AVX512BF16_VARIANT)
    case POSENC_CPU_AVX512BF16: return &posenc_cpu_kernels_avx512bf16;
#  endif
#endif
#if HAVE_NEON_VARIANT
    case POSENC_CPU_NEON: return &posenc_cpu_kernels_neon;
#endif
    default: return &posenc_cpu_kernels_portable;
    }
}

posenc_cpu_variant posenc_cpu_best_variant(void)
{
    static const posenc_cpu_variant preference[] = {POSENC_CPU_AVX512BF16, POSENC_CPU_AVX512,
                                                    POSENC_CPU_AVX2, POSENC_CPU_NEON};
    for (size_t i = 0; i < sizeof preference / sizeof preference[0]; i++)
        if (posenc_cpu_kernels_for(preference[i]))
            return preference[i];
    return POSENC_CPU_PORTABLE;
}

const char *posenc_cpu_variant_name(posenc_cpu_variant variant)
{
    return (unsigned)variant < POSENC_CPU_VARIANT_COUNT ? variant_names[variant] : NULL;
}

bool posenc_cpu_variant_parse(const char *name, posenc_cpu_variant *variant)
{
    for (int i = 0; i < POSENC_CPU_VARIANT_COUNT; i++) {
        if (strcmp(name, variant_names[i]) == 0) {
            *variant = (posenc_cpu_variant)i;
            return true;
        }
    }
    return false;
}
