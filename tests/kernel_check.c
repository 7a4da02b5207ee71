/* A self-contained check of the CPU kernel (satground/satnet/mixing.c) against plain
 * Gauss-Seidel loops written here, for builds Python cannot load: a cross-compiled AArch64 binary
 * run under qemu-user, or the portable tile. tests/test_kernel_builds.py compiles and runs it:
 *
 *     cc -O2 [-DDOUBLE] [-march=...] tests/kernel_check.c -lm && ./a.out
 *
 * prints the largest difference of V, gnrm and U from the plain loops over a few problem sizes
 * and exits 1 when one is above the tolerance of its precision. A build with the vectorised bf16
 * conversion (AVX512_BF16, e.g. -march=cooperlake, or native on a Zen 4) also checks it against the scalar
 * one, bit for bit, hi and lo parts, both row parities and the padding past nf.
 */
#include <stdio.h>

#include "../satground/satnet/mixing.c"

static unsigned long long state = 88172645463325252ULL;

static double uniform(void) /* xorshift64: the same numbers on every machine */
{
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return (double)(state >> 11) / 9007199254740992.0;
}

/* The forward's sweeps, one variable at a time: v_i = -g_i / |g_i|, g_i = sum_{j != i} C_ij v_j */
static void plain_forward(const REAL *C, int N, int k, const int64_t *order, const uint8_t *free_,
                          REAL *V, int sweeps, REAL *gnrm)
{
    REAL *g = malloc(sizeof(REAL) * k);
    for (int t = 0; t < sweeps; t++)
        for (int p = 0; p < N; p++) {
            int i = (int)order[p];
            if (!free_[i])
                continue;
            double gn2 = 0;
            for (int c = 0; c < k; c++) {
                double sum = 0;
                for (int j = 0; j < N; j++)
                    if (j != i)
                        sum += (double)C[(size_t)i * N + j] * V[(size_t)j * k + c];
                g[c] = (REAL)sum;
                gn2 += sum * sum;
            }
            REAL gn = (REAL)sqrt(gn2);
            if (gn <= TINY)
                continue;
            for (int c = 0; c < k; c++)
                V[(size_t)i * k + c] = -g[c] / gn;
            gnrm[i] = gn;
        }
    free(g);
}

/* The backward's sweeps: u_i = (a_i - P_i h_i) / (gnrm_i + prox_lam), h_i over free j != i */
static void plain_backward(const REAL *C, int N, int k, const int64_t *order,
                           const uint8_t *free_, const REAL *V, const REAL *gnrm, const REAL *a,
                           int sweeps, REAL prox_lam, REAL *U)
{
    REAL *h = malloc(sizeof(REAL) * k);
    for (int t = 0; t < sweeps; t++)
        for (int p = 0; p < N; p++) {
            int i = (int)order[p];
            if (!free_[i])
                continue;
            double hv = 0;
            for (int c = 0; c < k; c++) {
                double sum = 0;
                for (int j = 0; j < N; j++)
                    if (j != i && free_[j])
                        sum += (double)C[(size_t)i * N + j] * U[(size_t)j * k + c];
                h[c] = (REAL)sum;
                hv += sum * V[(size_t)i * k + c];
            }
            for (int c = 0; c < k; c++)
                U[(size_t)i * k + c] = (a[(size_t)i * k + c] -
                                        (h[c] - (REAL)hv * V[(size_t)i * k + c])) /
                                       (gnrm[i] + prox_lam);
        }
    free(h);
}

static double largest_difference(const REAL *x, const REAL *y, size_t n)
{
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)x[i] - (double)y[i]);
        if (!(d <= worst)) /* NaN counts as the worst */
            worst = d;
    }
    return worst;
}

/* One problem: N variables of rank k, C = S S^T from m clauses. Returns its worst difference. */
static double check(int N, int m, int k, int sweeps)
{
    REAL *S = malloc(sizeof(REAL) * N * m), *C = malloc(sizeof(REAL) * N * N);
    REAL *V0 = malloc(sizeof(REAL) * N * k), *V1 = malloc(sizeof(REAL) * N * k);
    REAL *V2 = malloc(sizeof(REAL) * N * k), *a = malloc(sizeof(REAL) * N * k);
    REAL *U1 = calloc((size_t)N * k, sizeof(REAL)), *U2 = calloc((size_t)N * k, sizeof(REAL));
    REAL *g1 = calloc(N, sizeof(REAL)), *g2 = calloc(N, sizeof(REAL));
    int64_t *order = malloc(sizeof(int64_t) * N);
    uint8_t *free_ = malloc(N);
    for (int i = 0; i < N * m; i++)
        S[i] = (REAL)((uniform() - 0.5) / sqrt(m));
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) {
            double sum = 0;
            for (int c = 0; c < m; c++)
                sum += (double)S[(size_t)i * m + c] * S[(size_t)j * m + c];
            C[(size_t)i * N + j] = (REAL)sum;
        }
    for (int i = 0; i < N; i++) {
        double norm = 0;
        for (int c = 0; c < k; c++) {
            V0[(size_t)i * k + c] = (REAL)(uniform() - 0.5);
            a[(size_t)i * k + c] = (REAL)(uniform() - 0.5);
            norm += (double)V0[(size_t)i * k + c] * V0[(size_t)i * k + c];
        }
        for (int c = 0; c < k; c++)
            V0[(size_t)i * k + c] /= (REAL)sqrt(norm);
        free_[i] = i > 0 && uniform() < 0.6; /* variable 0, the truth, is never free */
        order[i] = i;
    }
    for (int i = N - 1; i > 0; i--) { /* a random visiting order */
        int j = (int)(uniform() * (i + 1));
        int64_t t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    memcpy(V1, V0, sizeof(REAL) * N * k);
    memcpy(V2, V0, sizeof(REAL) * N * k);
    int ran = 0; /* one sample, on one thread */
    double worst = mix_forward(C, N, k, order, free_, 1, V1, sweeps, 0, g1, &ran, 0, 1) ? INFINITY
                                                                                       : 0;
    plain_forward(C, N, k, order, free_, V2, sweeps, g2);
    worst = ran == sweeps ? worst : INFINITY;
    double dv = largest_difference(V1, V2, (size_t)N * k), dg = largest_difference(g1, g2, N);
    int sweeps_run[1] = {sweeps};
    if (mix_backward(C, N, k, order, free_, 1, V2, g2, a, sweeps_run, (REAL)0.1, U1, 0, 1))
        worst = INFINITY;
    plain_backward(C, N, k, order, free_, V2, g2, a, sweeps, (REAL)0.1, U2);
    double du = largest_difference(U1, U2, (size_t)N * k);
    double scale = 1;
    for (int i = 0; i < N; i++)
        scale = fabs(g2[i]) > scale ? fabs(g2[i]) : scale;
    printf("N=%d m=%d k=%d sweeps=%d: V %.3g, gnrm %.3g (of %.3g), U %.3g\n", N, m, k, sweeps, dv,
           dg, scale, du);
    dg /= scale;
    worst = dv > worst ? dv : worst;
    worst = dg > worst ? dg : worst;
    worst = du > worst ? du : worst;
    free(S), free(C), free(V0), free(V1), free(V2), free(a), free(U1), free(U2), free(g1);
    free(g2), free(order), free(free_);
    return worst;
}

#ifdef VECTOR_CONVERT
/* pairs_set_row and pairs_init, vectorised, against split() one number at a time: values
 * over many magnitudes and signs, exact ties (1 + 2^-8: halfway between two bf16 numbers), at
 * both widths of the vectors' pair rows (kp 16 and 32), in both layouts of C's rows */
static int check_conversion(void)
{
    enum { NF = 45, N = 50 };
    static REAL C[N * N];
    for (int i = 0; i < N * N; i++)
        C[i] = (REAL)((uniform() - 0.5) * pow(2.0, (int)(uniform() * 40) - 20));
    C[3] = 1.0f + 1.0f / 256, C[4] = -(1.0f + 3.0f / 256), C[5] = 0;
    int bad = 0;
    for (int amx = 0; amx < 2; amx++) /* the layouts of C's rows: AMX tiles' and vdpbf16ps's */
    for (int with_lo = 0; with_lo < 2; with_lo++)
    for (int kp = 16; kp <= 32; kp += 16) {
        struct sample s;
        memset(&s, 0, sizeof(s));
        s.nf = NF, s.kp = kp, s.split = with_lo, s.groups = (NF + AMX_ROWS - 1) / AMX_ROWS;
        s.amx = amx; /* only the layout: nothing here runs an AMX instruction */
        s.f = malloc(sizeof(int) * N);
        uint8_t is_free[N] = {0};
        for (int q = 0; q < NF; q++)
            is_free[s.f[q] = (q * 7 + 3) % N] = 1; /* distinct variables, not in index order */
        if (pairs_init(&s, C, N, is_free))
            return 1;
        /* row i, column col[q]: C[f[i]][f[q]]; the rows past NF and the columns past NF zero */
        int rows = s.groups * AMX_ROWS, *taken = calloc(s.depth, sizeof(int));
        for (int q = 0; q < NF; q++)
            taken[s.col[q]] = 1;
        for (int i = 0; i < rows; i++)
            for (int q = 0; q < NF; q++) {
                uint16_t hi, lo = 0;
                split(i < NF ? C[(size_t)s.f[i] * N + s.f[q]] : 0, &hi, with_lo ? &lo : NULL);
                size_t at = pair_index(&s, i, s.col[q]);
                bad += s.Ahi[at] != hi || (with_lo && s.Alo[at] != lo);
            }
        for (int i = 0; i < rows; i++)
            for (int j = 0; j < s.depth; j++)
                bad += !taken[j] && (s.Ahi[pair_index(&s, i, j)] ||
                                     (with_lo && s.Alo[pair_index(&s, i, j)]));
        free(taken);
        for (int q = 0; q < NF; q++) {
            pairs_set_row(&s, q, C + (size_t)q * 32);
            for (int c = 0; c < kp; c++) {
                uint16_t hi, lo = 0;
                split(C[(size_t)q * 32 + c], &hi, with_lo ? &lo : NULL);
                size_t at = (size_t)(s.col[q] / 2) * 2 * kp + 2 * c + (s.col[q] & 1);
                bad += s.Xhi[at] != hi || (with_lo && s.Xlo[at] != lo);
            }
        }
        sample_free(&s);
    }
    printf("bf16 conversion, vector against scalar: %s\n", bad ? "FAILED" : "ok");
    return bad != 0;
}
#endif

#ifdef TILE16
/* tile16 against tile() at one vector of X: the same FMAs in the same order, so bit for bit,
 * over panels of several lengths and values of many magnitudes */
static int check_tile16(void)
{
    enum { NMAX = 131 };
    REAL *P = alloc((size_t)NMAX * TROWS), *X = alloc((size_t)NMAX * 16);
    REAL *a = alloc((size_t)TROWS * 16), *b = alloc((size_t)TROWS * 16);
    int bad = 0;
    for (int i = 0; i < NMAX * TROWS; i++)
        P[i] = (REAL)((uniform() - 0.5) * pow(2.0, (int)(uniform() * 20) - 10));
    for (int i = 0; i < NMAX * 16; i++)
        X[i] = (REAL)((uniform() - 0.5) * pow(2.0, (int)(uniform() * 20) - 10));
    for (int n = 1; n <= NMAX; n += 13) {
        tile16(P, X, n, a);
        tile_nv(P, X, n, 16, 0, 1, b);
        bad += memcmp(a, b, sizeof(REAL) * TROWS * 16) != 0;
    }
    printf("tile16 against tile(), bit for bit: %s\n", bad ? "FAILED" : "ok");
    free(P), free(X), free(a), free(b);
    return bad != 0;
}
#endif

int main(void)
{
    double tolerance = sizeof(REAL) == 8 ? 1e-9 : 1e-4;
    int sizes[][4] = {{40, 48, 32, 4}, {150, 90, 32, 5}, {77, 60, 5, 5}, {61, 40, 13, 6},
                      {200, 120, 8, 3}, {100, 70, 16, 4}};
    double worst = 0;
    printf("tile: %s, %s\n", tile_shape(), sizeof(REAL) == 8 ? "double" : "float");
    for (size_t t = 0; t < sizeof(sizes) / sizeof(sizes[0]); t++) {
        double w = check(sizes[t][0], sizes[t][1], sizes[t][2], sizes[t][3]);
        worst = w > worst || w != w ? w : worst;
    }
    printf("largest difference %.3g, tolerance %.3g: %s\n", worst, tolerance,
           worst <= tolerance ? "ok" : "FAILED");
    int failed = !(worst <= tolerance);
#ifdef VECTOR_CONVERT
    failed |= check_conversion();
#endif
#ifdef TILE16
    failed |= check_tile16();
#endif
    return failed;
}
