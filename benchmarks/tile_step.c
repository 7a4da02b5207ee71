/* One step of the CPU kernel's fp32 tile, timed: tile() at k = 16 (one vector of X: 12
 * broadcast loads for 12 FMAs), tile16 (the same sums on rows in pairs: 7 loads and 2 permutes),
 * the tile16 of b0dcd0a (rows 6-11 broadcast from two 4-row loads by shuffles: 9 loads and 6
 * shuffles; kept here only to be timed beside it) and tile() at k = 32 (12 broadcast loads for 24
 * FMAs), on one thread, over a panel the size of the default's (705 free variables, groups of
 * TROWS rows). benchmarks/tile_step.py builds it with the kernel's flags; it includes mixing.c,
 * so it times the kernel's own code. */
#include <stdio.h>
#include <time.h>

#include "../satground/satnet/mixing.c"

static double seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

typedef void (*run_fn)(const REAL *P, const REAL *X, int n, REAL *out);
static void k16_tile(const REAL *P, const REAL *X, int n, REAL *out) { tile_nv(P, X, n, 16, 0, 1, out); }
static void k32_tile(const REAL *P, const REAL *X, int n, REAL *out) { group_times(P, X, n, 32, out); }
#ifdef TILE16
static void k16_tile16(const REAL *P, const REAL *X, int n, REAL *out) { tile16(P, X, n, out); }

static void k16_shuffled(const float *P, const float *X, int n, float *out)
{
    __m512 acc[TROWS];
    for (int r = 0; r < TROWS; r++)
        acc[r] = _mm512_setzero_ps();
    for (int j = 0; j < n; j++) {
        const __m512 x = _mm512_load_ps(X + (size_t)j * 16);
        const float *p = P + (size_t)j * TROWS;
        const __m512 mid = _mm512_broadcast_f32x4(_mm_loadu_ps(p + 4));
        const __m512 end = _mm512_broadcast_f32x4(_mm_loadu_ps(p + 8));
        for (int r = 0; r < 6; r++)
            acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(p[r]), x, acc[r]);
        acc[6] = _mm512_fmadd_ps(_mm512_permute_ps(mid, 0xaa), x, acc[6]);
        acc[7] = _mm512_fmadd_ps(_mm512_permute_ps(mid, 0xff), x, acc[7]);
        acc[8] = _mm512_fmadd_ps(_mm512_permute_ps(end, 0x00), x, acc[8]);
        acc[9] = _mm512_fmadd_ps(_mm512_permute_ps(end, 0x55), x, acc[9]);
        acc[10] = _mm512_fmadd_ps(_mm512_permute_ps(end, 0xaa), x, acc[10]);
        acc[11] = _mm512_fmadd_ps(_mm512_permute_ps(end, 0xff), x, acc[11]);
    }
    for (int r = 0; r < TROWS; r++)
        _mm512_store_ps(out + (size_t)r * 16, acc[r]);
}
#endif

static void time_one(const char *name, run_fn run, int kp, const REAL *P, const REAL *X, int n,
                     int groups, REAL *out)
{
    double best = 1e30;
    int reps = 40;
    for (int t = 0; t < 7; t++) {
        double start = seconds();
        for (int r = 0; r < reps; r++)
            for (int g = 0; g < groups; g++)
                run(P + (size_t)g * n * TROWS, X, n, out);
        double took = seconds() - start;
        best = took < best ? took : best;
    }
    double steps = (double)reps * groups * n;
    printf("%-28s %.2f ns a step, %.1f G products/s (one thread)\n", name, 1e9 * best / steps,
           (double)TROWS * kp * steps / best / 1e9);
}

int main(void)
{
    enum { N = 705 };
    int groups = (N + TROWS - 1) / TROWS;
    REAL *P = alloc((size_t)groups * N * TROWS), *X = alloc((size_t)N * 32), *out = alloc(TROWS * 32);
    for (size_t i = 0; i < (size_t)groups * N * TROWS; i++)
        P[i] = (REAL)((i * 2654435761u) % 1000) / 997 - (REAL)0.5;
    for (int i = 0; i < N * 32; i++)
        X[i] = (REAL)((i * 40503u) % 1000) / 991 - (REAL)0.5;
    printf("tile %s, %d free variables, panel %.2f MiB\n", tile_shape(), N,
           (double)groups * N * TROWS * sizeof(REAL) / 1048576);
    time_one("k = 16, tile()", k16_tile, 16, P, X, N, groups, out);
#ifdef TILE16
    time_one("k = 16, tile16", k16_tile16, 16, P, X, N, groups, out);
    time_one("k = 16, b0dcd0a's shuffles", k16_shuffled, 16, P, X, N, groups, out);
#endif
    time_one("k = 32, tile()", k32_tile, 32, P, X, N, groups, out);
    free(P), free(X), free(out);
    return 0;
}
