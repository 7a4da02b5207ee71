/* The core's peak multiply-add rate, measured: CHAINS independent chains of one instruction
 * (an fp32 FMA on the build's widest vectors, and AVX512_BF16's vdpbf16ps where built), enough
 * chains to cover the instruction's latency on the cores this project runs. Each function runs
 * `rounds` rounds and returns a sum, so nothing is optimised away; products_per_round says how
 * many products a round takes. Built by benchmarks/core_peak.py with the kernel's flags. */
#define CHAINS 12

/* the build's widest vectors: zmm with AVX-512, else ymm (AVX2: 12 chains + 2 fit its 16) */
#ifdef __AVX512F__
#define WIDE_BYTES 64
#else
#define WIDE_BYTES 32
#endif
typedef float wide __attribute__((vector_size(WIDE_BYTES)));
#ifdef __aarch64__
#define VREG "+w"
#else
#define VREG "+v"
#endif

float fma_wide(long rounds)
{
    wide acc[CHAINS], x = (wide){0} + 1.0f / 3, y = (wide){0} + 0.999f;
    for (int c = 0; c < CHAINS; c++)
        acc[c] = (wide){0} + (float)c;
    for (long i = 0; i < rounds; i++) {
        for (int c = 0; c < CHAINS; c++)
            acc[c] = acc[c] * y + x;
        __asm__ volatile("" : VREG(y)); /* y unknown each round: nothing folds across rounds */
    }
    float s = 0;
    for (int c = 0; c < CHAINS; c++)
        for (int l = 0; l < WIDE_BYTES / 4; l++)
            s += acc[c][l];
    return s;
}

#ifdef __AVX512BF16__
#include <immintrin.h>

/* vdpbf16ps on zmm: 32 bf16 products into 16 fp32 sums an instruction */
float dp_bf16(long rounds)
{
    __m512 acc[CHAINS];
    __m512bh a = (__m512bh)_mm512_set1_epi16(0x3f80), b = (__m512bh)_mm512_set1_epi16(0x3c00);
    for (int c = 0; c < CHAINS; c++)
        acc[c] = _mm512_set1_ps((float)c);
    for (long i = 0; i < rounds; i++) {
        for (int c = 0; c < CHAINS; c++)
            acc[c] = _mm512_dpbf16_ps(acc[c], a, b);
        __asm__ volatile("" : "+v"(b));
    }
    float s = 0;
    for (int c = 0; c < CHAINS; c++)
        s += _mm512_reduce_add_ps(acc[c]);
    return s;
}
int dp_bf16_built(void) { return 1; }
#else
float dp_bf16(long rounds) { (void)rounds; return 0; }
int dp_bf16_built(void) { return 0; }
#endif

/* products a round takes: fma_wide (0), dp_bf16 (2) */
int products_per_round(int which) { return CHAINS * (which == 2 ? 32 : WIDE_BYTES / 4); }
