/* The CPU backend's sweeps: one sample's mixing-method forward and Gauss-Seidel backward over
 * its free variables only. Compiled at first use by cpu.py, once for float32 and once with
 * -DDOUBLE, for the target cpu.py names (this CPU by default); cpu.py holds the math. A pass
 * over a batch shares its samples out to threads, one whole sample at a time (run).
 *
 * Both passes update row q from g_q = sum_{j != q} C_qj x_j over the free variables, rows before
 * q already updated (the fixed variables' share of the forward's g is computed once, as F).
 * Rows are taken a group at a time: the group's g's are first computed from the vectors as they
 * stand, by one tiled product, then each row is updated in turn and its change pushed into the
 * g's of the group's later rows, exactly as the sequential order requires. The product runs on
 * the vector tile (TROWS rows x TVECS vectors of running sums in registers, the group's rows of
 * C broadcast from a packed panel, each vector streamed once per group) or, for float32 with k
 * padded to 16 or 32 columns, on bfloat16 pairs with fp32 sums: AMX tiles (bf16x3 products, or
 * plain bf16 ones; see amx_times) or, where the CPU has AVX512_BF16 and no AMX, a vdpbf16ps tile
 * (bf16 products; see dp_times). The precision is the caller's: 0 fp32, 1 bf16x3 (AMX only),
 * 2 bf16.
 */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef DOUBLE
#define REAL double
#else
#define REAL float
#endif

/* The vector tile, sized to the target's register file as BLIS sizes its micro-kernels: TROWS x
 * TVECS accumulators, plus TVECS vectors of X and a broadcast of C, must fit, or the tile spills
 * on every step. Chosen from the compiler's predefined macros, so one source builds them all;
 * -DMIXING_PORTABLE forces the portable tile (tests/kernel_check.c checks it on any machine). */
#if defined(MIXING_PORTABLE)
#define PORTABLE_TILE
#elif defined(__AVX512F__)
/* 32 zmm: 12 x 2 sums + 2 of X; the FMA broadcasts C from memory ({1toN}), no register */
#define VBYTES 64
#define TROWS 12
#define TVECS 2
#define TILE_ISA "avx512"
#elif defined(__AVX2__) && defined(__FMA__)
/* 16 ymm: 6 x 2 sums + 2 of X + 1 broadcast = 15 (BLIS's Haswell sgemm kernel is 6 x 16) */
#define VBYTES 32
#define TROWS 6
#define TVECS 2
#define TILE_ISA "avx2"
#elif defined(__aarch64__) && defined(__ARM_NEON)
/* 32 q registers: 8 x 3 sums + 3 of X + 2 holding 8 rows of C, read by lane (BLIS's 8 x 12) */
#define VBYTES 16
#define TROWS 8
#define TVECS 3
#define TILE_ISA "neon"
#define LANE_BROADCAST /* the rows of C loaded as vectors, each used by lane (fmla by element) */
#elif defined(__SSE2__)
/* 16 xmm, no FMA: 4 x 2 sums + 2 of X + a broadcast and a product per step = 12 */
#define VBYTES 16
#define TROWS 4
#define TVECS 2
#define TILE_ISA "sse"
#else
#define PORTABLE_TILE
#endif
#ifdef PORTABLE_TILE /* GCC/Clang vector types, lowered to whatever the target has (or scalars) */
#define VBYTES 16
#define TROWS 4
#define TVECS 2
#define TILE_ISA "portable"
#endif
#define LANES ((int)(VBYTES / sizeof(REAL))) /* numbers in one vector */
#define ALIGN 64                             /* every array: a cache line, and any VBYTES */
#define AMX_ROWS 16 /* rows of an AMX tile (a group on that path) */
#define TINY ((REAL)1e-12)

#if defined(__AMX_TILE__) && defined(__AMX_BF16__) && !defined(DOUBLE) && !defined(MIXING_PORTABLE)
#define AMX 1
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif
#if defined(__AVX512BF16__) && !defined(DOUBLE) && !defined(MIXING_PORTABLE)
#define BF16_TILE 1 /* vdpbf16ps: 32 bf16 products into 16 fp32 sums per instruction */
#include <immintrin.h>
#endif
#if defined(AMX) || defined(BF16_TILE)
#define BF16_PAIRS 1 /* a build that can hold C and X as bfloat16 pairs */
#endif
enum { PRECISION_FP32, PRECISION_BF16X3, PRECISION_BF16 };

typedef REAL vec __attribute__((vector_size(VBYTES)));

static REAL *alloc(size_t count) /* ALIGN-byte aligned, uninitialised, never of size 0 */
{
    return aligned_alloc(ALIGN, (count * sizeof(REAL) / ALIGN + 1) * ALIGN);
}

static REAL *zeroed(size_t count)
{
    REAL *p = alloc(count);
    if (p)
        memset(p, 0, count * sizeof(REAL));
    return p;
}

/* out[r][c0 : c0 + nv * LANES] = sum_j P[j][r] X[j][c0 : ...], r < TROWS, 1 <= nv <= TVECS:
 * inlined with nv a constant, so every branch on it folds away. */
static inline __attribute__((always_inline)) void
tile(const REAL *P, const REAL *X, int n, int kp, int c0, int nv, REAL *out)
{
    vec acc[TROWS][TVECS];
    for (int r = 0; r < TROWS; r++)
        for (int v = 0; v < TVECS; v++)
            acc[r][v] = (vec){0};
    for (int j = 0; j < n; j++) {
        const vec *x = (const vec *)(X + (size_t)j * kp + c0);
        vec xv[TVECS];
        for (int v = 0; v < TVECS; v++)
            xv[v] = x[v < nv ? v : 0];
        const REAL *p = P + (size_t)j * TROWS;
#ifdef LANE_BROADCAST
        vec pv[TROWS / LANES];
        for (int i = 0; i < TROWS / LANES; i++)
            pv[i] = ((const vec *)p)[i];
#define ROW(r) pv[(r) / LANES][(r) % LANES]
#else
#define ROW(r) p[r]
#endif
        for (int r = 0; r < TROWS; r++)
            for (int v = 0; v < TVECS; v++)
                if (v < nv)
                    acc[r][v] += ROW(r) * xv[v];
#undef ROW
    }
    for (int r = 0; r < TROWS; r++)
        for (int v = 0; v < nv; v++)
            *(vec *)(out + (size_t)r * kp + c0 + v * LANES) = acc[r][v];
}

/* tile() for each nv, so that nv is a constant inside */
static void tile_nv(const REAL *P, const REAL *X, int n, int kp, int c0, int nv, REAL *out)
{
    switch (nv) {
    case 1:
        tile(P, X, n, kp, c0, 1, out);
        break;
#if TVECS >= 2
    case 2:
        tile(P, X, n, kp, c0, 2, out);
        break;
#endif
#if TVECS >= 3
    case 3:
        tile(P, X, n, kp, c0, 3, out);
        break;
#endif
    }
}

#if defined(__AVX512F__) && TROWS == 12 && !defined(DOUBLE) && !defined(MIXING_PORTABLE)
#define TILE16 1
#include <immintrin.h>

/* tile() at kp = 16 (one vector of X a step), the same FMAs in the same order, so the same bits,
 * on rows in pairs: lane 2i + s of sums[q][h] holds out[2q + s][8h + i]. A step broadcasts six
 * 64-bit pairs of C's rows from memory and spreads its vector of X over two registers, each of
 * its columns twice, by two permutes. tile()'s step, twelve 32-bit broadcast loads for twelve
 * FMAs, is bound by those loads on an Ice Lake Xeon; this one loads seven times
 * (docs/satnet-layer.md). */
static void tile16(const float *P, const float *X, int n, float *out)
{
    const __m512i low = _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
    const __m512i high = _mm512_add_epi32(low, _mm512_set1_epi32(8));
    __m512 sums[TROWS / 2][2];
    for (int q = 0; q < TROWS / 2; q++)
        sums[q][0] = sums[q][1] = _mm512_setzero_ps();
    for (int j = 0; j < n; j++) {
        const __m512 x = _mm512_load_ps(X + (size_t)j * 16);
        const __m512 x_low = _mm512_permutexvar_ps(low, x);
        const __m512 x_high = _mm512_permutexvar_ps(high, x);
        const float *p = P + (size_t)j * TROWS;
        for (int q = 0; q < TROWS / 2; q++) {
            double pair; /* rows 2q and 2q + 1 of this step, broadcast as one 64-bit number */
            memcpy(&pair, p + 2 * q, sizeof(pair));
            const __m512 rows = _mm512_castpd_ps(_mm512_set1_pd(pair));
            sums[q][0] = _mm512_fmadd_ps(rows, x_low, sums[q][0]);
            sums[q][1] = _mm512_fmadd_ps(rows, x_high, sums[q][1]);
        }
    }
    const __m512i even =
        _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
    for (int q = 0; q < TROWS / 2; q++) {
        _mm512_store_ps(out + (size_t)(2 * q) * 16,
                        _mm512_permutex2var_ps(sums[q][0], even, sums[q][1]));
        _mm512_store_ps(out + (size_t)(2 * q + 1) * 16,
                        _mm512_permutex2var_ps(sums[q][0], odd, sums[q][1]));
    }
}
#endif

/* out (TROWS x kp) = a group's panel (n x TROWS) transposed times X (n x kp). */
static void group_times(const REAL *panel, const REAL *X, int n, int kp, REAL *out)
{
#ifdef TILE16
    if (kp == 16) {
        tile16(panel, X, n, out);
        return;
    }
#endif
    int c0 = 0;
    for (; c0 + TVECS * LANES <= kp; c0 += TVECS * LANES)
        tile(panel, X, n, kp, c0, TVECS, out);
    if (c0 < kp)
        tile_nv(panel, X, n, kp, c0, (kp - c0) / LANES, out);
}

/* panels[g][j][r] = C[rows[g * TROWS + r]][cols[j]] for every group g of TROWS rows, zero for
 * rows past n: each panel written in order, from its TROWS rows of C read side by side. */
static void pack(const REAL *C, int N, const int *rows, int n, const int *cols, int ncols,
                 REAL *panels)
{
    int groups = (n + TROWS - 1) / TROWS;
    for (int g = 0; g < groups; g++) {
        const REAL *row[TROWS];
        int live = n - g * TROWS < TROWS ? n - g * TROWS : TROWS;
        for (int r = 0; r < TROWS; r++)
            row[r] = C + (size_t)rows[g * TROWS + (r < live ? r : 0)] * N;
        REAL *out = panels + (size_t)g * ncols * TROWS;
        for (int j = 0; j < ncols; j++, out += TROWS) {
            int col = cols[j];
            for (int r = 0; r < TROWS; r++)
                out[r] = r < live ? row[r][col] : 0;
        }
    }
}

struct sample {
    int nf, nx, kp;
    int pairs; /* the group product runs on bf16 pairs: on AMX tiles (amx) or the vdpbf16ps tile */
    int amx, split; /* split: bf16x3 (hi + lo parts), else one bf16 product */
    int R, groups; /* rows per group (TROWS, or AMX_ROWS on the bf16 paths), and groups */
    int *f;  /* free variables, in visiting order */
    int *x;  /* fixed variables */
    REAL *D; /* each group's block of C: D[g][a][b] = C[f[g * R + a]][f[g * R + b]] */
    REAL *P; /* vector tile: panels of the free rows of C over the free columns (pack) */
    int depth;           /* bf16: nf rounded up to 32, the products' depth */
    int *col;            /* bf16: col[q], where free variable f[q] sits in the products' depth,
                          * which takes the free variables in index order (pairs_init) */
    uint16_t *Ahi, *Alo; /* bf16: C's free rows, hi (and lo for bf16x3) parts: [g][r][depth] on
                          * AMX (a tile's rows); [g][depth/2][r][2] on the vdpbf16ps tile, so
                          * that one step's 16 broadcast pairs are one cache line */
    uint16_t *Xhi, *Xlo; /* bf16: the swept vectors, rows interleaved in pairs: [j/2][c][j%2],
                          * j = col[q], c < kp (16 or 32 on these paths) */
};

#define COEF(s, g, a, b) ((s)->D[((size_t)(g) * (s)->R + (a)) * (s)->R + (b)])

static void sample_free(struct sample *s)
{
    free(s->f);
    free(s->x);
    free(s->D);
    free(s->P);
    free(s->col);
    free(s->Ahi);
    free(s->Alo);
    free(s->Xhi);
    free(s->Xlo);
}

#ifdef BF16_PAIRS
/* bf16x3: x = hi + lo, both bf16 (rounded to nearest even), to about 2^-17 relative; a product
 * is hi*hi + hi*lo + lo*hi, to about 2^-16 relative, with fp32 sums. bf16: hi*hi alone, to
 * about 2^-8 relative, each product exact in the fp32 sum. */
static inline uint16_t bf16(float x)
{
    uint32_t b;
    memcpy(&b, &x, 4);
    return (uint16_t)((b + 0x7fff + ((b >> 16) & 1)) >> 16);
}

static inline float widen(uint16_t h)
{
    uint32_t b = (uint32_t)h << 16;
    float x;
    memcpy(&x, &b, 4);
    return x;
}

static inline void split(float x, uint16_t *hi, uint16_t *lo)
{
    *hi = bf16(x);
    if (lo)
        *lo = bf16(x - widen(*hi));
}

#if defined(__AVX512BF16__) && defined(__AVX512BW__)
#define VECTOR_CONVERT 1 /* every AMX or vdpbf16ps build this project meets: 16 at a time */
#define VECTOR_CONVERT_WIDTH 16
/* 16 floats to bf16 (nearest even, as bf16()), each in the low half of a 32-bit lane */
static inline __m512i bf16_lanes(__m512 x)
{
    return _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(x));
}

/* the bf16 parts of 16 floats, hi and (for bf16x3) lo, as 32-bit lanes */
static inline void split16(__m512 x, int with_lo, __m512i *hi, __m512i *lo)
{
    *hi = bf16_lanes(x);
    *lo = with_lo ? bf16_lanes(_mm512_sub_ps(x, _mm512_castsi512_ps(_mm512_slli_epi32(*hi, 16))))
                  : _mm512_setzero_si512();
}
#else
#define VECTOR_CONVERT_WIDTH 1
#endif

/* x_q changed: its bf16 pair(s) in the products' operand */
static void pairs_set_row(struct sample *s, int q, const REAL *xq)
{
    int j = s->col[q];
    size_t at = (size_t)(j / 2) * 2 * s->kp + (j & 1);
#ifdef VECTOR_CONVERT
    /* columns c0..c0+15 of the row go to every other 16-bit slot of a 64-byte line: the even
     * ones for an even j, the odd ones for an odd j */
    __mmask32 slots = j & 1 ? 0xAAAAAAAAu : 0x55555555u;
    at -= j & 1;
    for (int c0 = 0; c0 < s->kp; c0 += 16) {
        __m512i hi, lo;
        split16(_mm512_loadu_ps(xq + c0), s->split, &hi, &lo);
        int up = (j & 1) * 16;
        _mm512_mask_storeu_epi16(s->Xhi + at + 2 * c0, slots, _mm512_slli_epi32(hi, up));
        if (s->split)
            _mm512_mask_storeu_epi16(s->Xlo + at + 2 * c0, slots, _mm512_slli_epi32(lo, up));
    }
#else
    for (int c = 0; c < s->kp; c++)
        split(xq[c], s->Xhi + at + 2 * c, s->split ? s->Xlo + at + 2 * c : NULL);
#endif
}

/* Where row i, column j of C's bf16 rows sit in Ahi (and Alo) once pairs_init has packed them:
 * [g][r][depth] for the AMX tiles, [g][depth/2][r][2] for the vdpbf16ps tile (dp_tile). */
static inline size_t pair_index(const struct sample *s, int i, int j)
{
    if (s->amx)
        return (size_t)i * s->depth + j;
    return ((size_t)(i / AMX_ROWS) * (s->depth / 2) + j / 2) * AMX_ROWS * 2 +
           (size_t)(i % AMX_ROWS) * 2 + (j & 1);
}

/* A group's rows of C, packed [r][depth] in `rows` (hi parts, then lo parts for bf16x3), into
 * its block of Ahi (Alo) as [depth/2][r][2] for the vdpbf16ps tile: a step of its product then
 * reads its 16 rows' pairs from one cache line, one stream of C instead of sixteen, with one
 * pointer where sixteen spilled the registers. */
static void interleave_group(struct sample *s, int g, const uint16_t *rows)
{
    int steps = s->depth / 2;
    for (int part = 0; part < 1 + s->split; part++) {
        const uint32_t *from = (const uint32_t *)(rows + (size_t)part * AMX_ROWS * s->depth);
        uint32_t *block = (uint32_t *)((part ? s->Alo : s->Ahi) + (size_t)g * AMX_ROWS * s->depth);
        for (int jj = 0; jj < steps; jj++)
            for (int r = 0; r < AMX_ROWS; r++)
                block[(size_t)jj * AMX_ROWS + r] = from[(size_t)r * steps + jj];
    }
}

/* The products' operands: C's free rows and the vectors as bf16 pairs. Their depth takes the free
 * variables in index order (col[q]: where f[q] sits), so that a row of C is packed from runs of
 * consecutive columns read front to back; in visiting order it would be read at random. */
static int pairs_init(struct sample *s, const REAL *C, int N, const uint8_t *is_free)
{
    s->depth = (s->nf + 31) / 32 * 32;
    size_t a = (size_t)s->groups * AMX_ROWS * s->depth, x = (size_t)s->depth * s->kp;
    s->Ahi = aligned_alloc(64, a * 2 + 64);
    s->Xhi = aligned_alloc(64, x * 2 + 64);
    if (s->split) {
        s->Alo = aligned_alloc(64, a * 2 + 64);
        s->Xlo = aligned_alloc(64, x * 2 + 64);
    }
    s->col = malloc(sizeof(int) * N);
    int *by_index = malloc(sizeof(int) * N), *rank = malloc(sizeof(int) * N);
    int *run = malloc(sizeof(int) * (N + 1)); /* where each run of consecutive indices starts */
    /* the vdpbf16ps tile's layout: a group's rows are packed here, then interleaved into place */
    uint16_t *rows = s->amx ? NULL : malloc(sizeof(uint16_t) * 2 * AMX_ROWS * s->depth);
    int status = -1, runs = 0;
    if (!s->Ahi || !s->Xhi || (s->split && (!s->Alo || !s->Xlo)) || !s->col || !by_index ||
        !rank || !run || (!s->amx && !rows))
        goto done;
    for (int i = 0, r = 0; i < N; i++)
        if (is_free[i])
            by_index[r] = i, rank[i] = r++;
    for (int q = 0; q < s->nf; q++)
        s->col[q] = rank[s->f[q]];
    for (int p = 0; p < s->nf; p++) /* runs: a blank cell's digits, the auxiliaries */
        if (p == 0 || by_index[p] != by_index[p - 1] + 1)
            run[runs++] = p;
    run[runs] = s->nf;
    memset(s->Xhi, 0, x * 2);
    if (s->split)
        memset(s->Xlo, 0, x * 2);
    for (int i = 0; i < s->groups * AMX_ROWS; i++) {
        size_t r = i % AMX_ROWS;
        uint16_t *hi = rows ? rows + r * s->depth : s->Ahi + (size_t)i * s->depth;
        uint16_t *lo = !s->split ? NULL
                       : rows ? rows + (AMX_ROWS + r) * s->depth : s->Alo + (size_t)i * s->depth;
        const REAL *row = C + (size_t)s->f[i < s->nf ? i : 0] * N;
        int filled = 0; /* entries written; past nf (and in the rows past nf) zeros */
        for (int u = 0; u < runs && i < s->nf; u++)
            for (int p = run[u]; p < run[u + 1]; p += VECTOR_CONVERT_WIDTH) {
                int live = run[u + 1] - p < VECTOR_CONVERT_WIDTH ? run[u + 1] - p
                                                                 : VECTOR_CONVERT_WIDTH;
#ifdef VECTOR_CONVERT /* 16 at a time */
                __mmask16 m = (__mmask16)((1u << live) - 1);
                __m512i h, l;
                split16(_mm512_maskz_loadu_ps(m, row + by_index[p]), !!lo, &h, &l);
                _mm512_mask_cvtepi32_storeu_epi16(hi + p, m, h);
                if (lo)
                    _mm512_mask_cvtepi32_storeu_epi16(lo + p, m, l);
#else
                split(row[by_index[p]], hi + p, lo ? lo + p : NULL);
#endif
                filled = p + live;
            }
        memset(hi + filled, 0, sizeof(uint16_t) * (s->depth - filled));
        if (lo)
            memset(lo + filled, 0, sizeof(uint16_t) * (s->depth - filled));
        if (rows && r == AMX_ROWS - 1)
            interleave_group(s, i / AMX_ROWS, rows);
    }
    status = 0;
done:
    free(rows);
    free(by_index);
    free(rank);
    free(run);
    return status;
}
#else /* a build without bf16 products: s->pairs stays 0, so none of these runs */
#define pairs_set_row(s, q, xq) ((void)0)
#define pairs_init(s, C, N, is_free) (-1)
#endif

#ifdef AMX

/* AMX use needs the kernel's leave, once per process (Linux 5.16+). */
static int amx_permitted(void)
{
    static int state; /* 0 not asked yet, 1 granted, -1 refused */
    if (!state)
        state = syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */,
                        18 /* XFEATURE_XTILEDATA */) == 0 ? 1 : -1;
    return state > 0;
}

static void amx_configure(void) /* six 16 x 64-byte tiles, for this thread */
{
    struct {
        uint8_t palette, start, reserved[14];
        uint16_t colsb[16];
        uint8_t rows[16];
    } cfg = {.palette = 1};
    for (int t = 0; t < 6; t++) {
        cfg.colsb[t] = 64;
        cfg.rows[t] = 16;
    }
    _tile_loadconfig(&cfg);
}

static void amx_release(void)
{
    _tile_release();
}

/* out (AMX_ROWS x kp) = the group's rows of C times X, from the bf16 pairs: tiles 0 and, at
 * kp = 32, 1 hold the 16-column halves of the sums, 2, 3 C's hi and lo, 4, 5 X's hi and lo.
 * A pair row of X is 2 kp bf16 numbers; a half's 16 columns are 64 bytes of it. */
static void amx_times(const struct sample *s, int grp, REAL *out)
{
    const uint16_t *ahi = s->Ahi + (size_t)grp * AMX_ROWS * s->depth;
    const uint16_t *alo = s->split ? s->Alo + (size_t)grp * AMX_ROWS * s->depth : NULL;
    int xstride = s->kp * 4, two = s->kp == 32; /* bytes per pair row of X; a second half */
    _tile_zero(0);
    _tile_zero(1);
    for (int j0 = 0; j0 < s->depth; j0 += 32) {
        const uint16_t *bhi = s->Xhi + (size_t)j0 * s->kp;
        const uint16_t *blo = s->split ? s->Xlo + (size_t)j0 * s->kp : NULL;
        _tile_loadd(2, ahi + j0, s->depth * 2);
        _tile_loadd(4, bhi, xstride);
        _tile_dpbf16ps(0, 2, 4);
        if (s->split) { /* + hi*lo + lo*hi, in this order in each half */
            _tile_loadd(3, alo + j0, s->depth * 2);
            _tile_loadd(5, blo, xstride);
            _tile_dpbf16ps(0, 2, 5);
            _tile_dpbf16ps(0, 3, 4);
        }
        if (two) {
            _tile_loadd(4, bhi + 32, xstride);
            _tile_dpbf16ps(1, 2, 4);
            if (s->split) {
                _tile_loadd(5, blo + 32, xstride);
                _tile_dpbf16ps(1, 2, 5);
                _tile_dpbf16ps(1, 3, 4);
            }
        }
    }
    _tile_stored(0, out, s->kp * 4);
    if (two)
        _tile_stored(1, out + 16, s->kp * 4);
}

#else /* a build without AMX: s->amx stays 0, so none of these runs */
#define amx_permitted() 0
#define amx_configure() ((void)0)
#define amx_release() ((void)0)
#define amx_times(s, grp, out) ((void)0)
#endif

#ifdef BF16_TILE
/* out (rows x nv*16, row stride nv*16) = rows r0.. of a group's interleaved bf16 panel (a) times
 * the pairs of X: each step broadcasts a row's pair of C (two consecutive columns) and multiplies
 * it into 16 columns' pairs of X by one vdpbf16ps. Inlined with r0, rows and nv constants. */
static inline __attribute__((always_inline)) void
dp_tile(const struct sample *s, const uint16_t *a, int r0, int rows, int nv, REAL *out)
{
    __m512 acc[16][2];
    for (int r = 0; r < rows; r++)
        for (int v = 0; v < nv; v++)
            acc[r][v] = _mm512_setzero_ps();
    for (int jj = 0; jj < s->depth / 2; jj++) {
        const uint16_t *x = s->Xhi + (size_t)jj * nv * 32;
        __m512bh xv[2];
        for (int v = 0; v < nv; v++)
            xv[v] = (__m512bh)_mm512_load_si512(x + 32 * v);
        const uint16_t *step = a + ((size_t)jj * AMX_ROWS + r0) * 2;
        for (int r = 0; r < rows; r++) {
            uint32_t pair;
            memcpy(&pair, step + 2 * r, 4);
            __m512bh c = (__m512bh)_mm512_set1_epi32((int)pair);
            for (int v = 0; v < nv; v++)
                acc[r][v] = _mm512_dpbf16_ps(acc[r][v], c, xv[v]);
        }
    }
    for (int r = 0; r < rows; r++)
        for (int v = 0; v < nv; v++)
            _mm512_storeu_ps(out + (size_t)r * nv * 16 + 16 * v, acc[r][v]);
}

/* out (AMX_ROWS x kp) = the group's rows of C times X from the bf16 pairs, one product each.
 * 16 accumulators either way: kp = 32 takes 8 rows x 2 vectors twice (each broadcast feeds two
 * products), kp = 16 all 16 rows x 1 vector at once (each vector of X loaded once a group). */
static void dp_times(const struct sample *s, int grp, REAL *out)
{
    const uint16_t *a = s->Ahi + (size_t)grp * AMX_ROWS * s->depth;
    if (s->kp == 16) {
        dp_tile(s, a, 0, 16, 1, out);
        return;
    }
    dp_tile(s, a, 0, 8, 2, out);
    dp_tile(s, a, 8, 8, 2, out + 8 * 32);
}
#define BF16_TILE_BUILT 1
#else
#define dp_times(s, grp, out) ((void)0)
#define BF16_TILE_BUILT 0
#endif

/* The products a sample's sweeps take at rank k for the caller's precision, as a precision
 * code: bf16x3 on the AMX tiles, bf16 on those or the vdpbf16ps tile, where this build, this
 * machine and k (padded to 16 or 32) allow; otherwise, and for fp32, the vector tile's fp32.
 * sample_init follows it, and so does the name a run's record gives (cpu.products). */
int products_taken(int k, int precision)
{
    int kp = (k + LANES - 1) / LANES * LANES;
    if (precision == PRECISION_FP32 || (kp != 16 && kp != 32))
        return PRECISION_FP32;
    if (amx_permitted())
        return precision;
    return precision == PRECISION_BF16 && BF16_TILE_BUILT ? PRECISION_BF16 : PRECISION_FP32;
}

static int sample_init(struct sample *s, const REAL *C, int N, int k, const int64_t *order,
                       const uint8_t *is_free, int precision)
{
    memset(s, 0, sizeof(*s));
    s->kp = (k + LANES - 1) / LANES * LANES;
    s->f = malloc(sizeof(int) * N);
    s->x = malloc(sizeof(int) * N);
    if (!s->f || !s->x)
        return -1;
    for (int p = 0; p < N; p++)
        if (is_free[order[p]])
            s->f[s->nf++] = (int)order[p];
    for (int i = 0; i < N; i++)
        if (!is_free[i])
            s->x[s->nx++] = i;
    int taken = products_taken(k, precision);
    s->pairs = taken != PRECISION_FP32;
    s->amx = s->pairs && amx_permitted();
    s->split = taken == PRECISION_BF16X3;
    s->R = s->pairs ? AMX_ROWS : TROWS;
    s->groups = (s->nf + s->R - 1) / s->R;
    s->D = alloc((size_t)s->groups * s->R * s->R);
    if (!s->D)
        return -1;
    for (int g = 0; g < s->groups; g++)
        for (int a = 0; a < s->R; a++)
            for (int b = 0; b < s->R; b++) {
                int qa = g * s->R + a, qb = g * s->R + b;
                COEF(s, g, a, b) = qa < s->nf && qb < s->nf
                                       ? C[(size_t)s->f[qa] * N + s->f[qb]] : 0;
            }
    if (s->pairs)
        return pairs_init(s, C, N, is_free);
    s->P = alloc((size_t)s->groups * TROWS * s->nf);
    if (!s->P)
        return -1;
    pack(C, N, s->f, s->nf, s->f, s->nf, s->P);
    return 0;
}

/* out (R x kp) = group grp's rows of C times X (the swept vectors, nf x kp) */
static void group_product(const struct sample *s, int grp, const REAL *X, REAL *out)
{
    if (s->amx)
        amx_times(s, grp, out);
    else if (s->pairs)
        dp_times(s, grp, out);
    else
        group_times(s->P + (size_t)grp * s->nf * TROWS, X, s->nf, s->kp, out);
}

/* out[q] = X[idx[q]] for q < n: rows of length k, out's padded to kp */
static void gather(const int *idx, int n, const REAL *X, int k, int kp, REAL *out)
{
    for (int q = 0; q < n; q++)
        memcpy(out + (size_t)q * kp, X + (size_t)idx[q] * k, sizeof(REAL) * k);
}

static void scatter(const int *idx, int n, const REAL *X, int k, int kp, REAL *out)
{
    for (int q = 0; q < n; q++)
        memcpy(out + (size_t)idx[q] * k, X + (size_t)q * kp, sizeof(REAL) * k);
}

/* F (nf rounded up to TROWS, x kp): every free variable's g from the fixed variables alone,
 * F_q = sum_{j fixed} C_{f[q], j} v_j, with the same tile. Returns 0, or -1 out of memory. */
static int fixed_part(const struct sample *s, const REAL *C, int N, const REAL *V, int k,
                      REAL *F)
{
    int groups = (s->nf + TROWS - 1) / TROWS;
    REAL *panels = alloc((size_t)groups * TROWS * s->nx), *Vx = zeroed((size_t)s->nx * s->kp);
    int status = panels && Vx ? 0 : -1;
    if (!status) {
        gather(s->x, s->nx, V, k, s->kp, Vx);
        pack(C, N, s->f, s->nf, s->x, s->nx, panels);
        for (int g = 0; g < groups; g++)
            group_times(panels + (size_t)g * s->nx * TROWS, Vx, s->nx, s->kp,
                        F + (size_t)g * TROWS * s->kp);
    }
    free(panels);
    free(Vx);
    return status;
}

#if defined(__AVX512F__) && defined(__AVX512DQ__) && !defined(DOUBLE) && !defined(MIXING_PORTABLE)
#define ROWS_IN_REGISTERS 1 /* kp = 16: a group's g's (or h's) held in zmm registers */
#include <immintrin.h>

/* The sum of 16 lanes, halving as the compiler's vectorised reductions of the generic loops do
 * (8 + 8, 4 + 4, 2 + 2, 1 + 1), so that both give the same bits */
static inline float lanes_sum(__m512 x)
{
    __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(x), _mm512_extractf32x8_ps(x, 1));
    __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    return _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 0x55)));
}

/* The forward's updates of a whole group of R rows at kp = 16, the same arithmetic as the
 * generic loops in forward_sweeps, with the group's g's in registers: each row's update waits
 * on the row before it (its norm, square root and division), and a g kept in memory would add a
 * store and a reload to every link of that chain. Inlined with R a constant. */
static inline __attribute__((always_inline)) void
forward_rows16(struct sample *s, int grp, int R, const REAL *g, REAL *Vc, REAL *gnrm,
               REAL *delta)
{
    __m512 G[AMX_ROWS > TROWS ? AMX_ROWS : TROWS];
    const __m512 sign = _mm512_set1_ps(-0.0f);
    int q0 = grp * R;
    for (int r = 0; r < R; r++)
        G[r] = _mm512_loadu_ps(g + r * 16);
    for (int r = 0; r < R; r++) {
        int q = q0 + r;
        REAL *vq = Vc + (size_t)q * 16;
        REAL gn = sqrtf(lanes_sum(_mm512_mul_ps(G[r], G[r])));
        if (gn <= TINY)
            continue;
        REAL inv = 1 / gn;
        __m512 v_new = _mm512_xor_ps(_mm512_mul_ps(G[r], _mm512_set1_ps(inv)), sign);
        __m512 dv = _mm512_sub_ps(v_new, _mm512_loadu_ps(vq));
        _mm512_storeu_ps(vq, v_new);
        if (s->pairs)
            pairs_set_row(s, q, vq);
        gnrm[s->f[q]] = gn;
        *delta += gn * lanes_sum(_mm512_mul_ps(dv, dv));
        for (int p = r + 1; p < R; p++)
            G[p] = _mm512_fmadd_ps(_mm512_set1_ps(COEF(s, grp, r, p)), dv, G[p]);
    }
}

/* The backward's, likewise */
static inline __attribute__((always_inline)) void
backward_rows16(struct sample *s, int grp, int R, const REAL *h, REAL *Uc, const REAL *Vc,
                const REAL *Ac, const REAL *gnrm, REAL prox_lam)
{
    __m512 H[AMX_ROWS > TROWS ? AMX_ROWS : TROWS];
    int q0 = grp * R;
    for (int r = 0; r < R; r++)
        H[r] = _mm512_loadu_ps(h + r * 16);
    for (int r = 0; r < R; r++) {
        int q = q0 + r;
        REAL *uq = Uc + (size_t)q * 16;
        __m512 vq = _mm512_loadu_ps(Vc + (size_t)q * 16);
        __m512 hv = _mm512_set1_ps(lanes_sum(_mm512_mul_ps(H[r], vq)));
        REAL inv = 1 / (gnrm[s->f[q]] + prox_lam);
        __m512 u_new = _mm512_mul_ps(
            _mm512_add_ps(_mm512_fmsub_ps(hv, vq, H[r]), _mm512_loadu_ps(Ac + (size_t)q * 16)),
            _mm512_set1_ps(inv));
        __m512 du = _mm512_sub_ps(u_new, _mm512_loadu_ps(uq));
        _mm512_storeu_ps(uq, u_new);
        if (s->pairs)
            pairs_set_row(s, q, uq);
        for (int p = r + 1; p < R; p++)
            H[p] = _mm512_fmadd_ps(_mm512_set1_ps(COEF(s, grp, r, p)), du, H[p]);
    }
}
#endif

/* The forward's sweeps on the compact arrays; returns the sweeps run. */
static int forward_sweeps(struct sample *s, REAL *Vc, const REAL *Fc, REAL *g, REAL *dv,
                          int max_iter, REAL eps, REAL *gnrm)
{
    int nf = s->nf, kp = s->kp, sweeps = 0;
    REAL threshold = 0;
    for (int sweep = 0; sweep < max_iter; sweep++) {
        REAL delta = 0;
        for (int grp = 0; grp < s->groups; grp++) {
            int q0 = grp * s->R, rows = nf - q0 < s->R ? nf - q0 : s->R;
            group_product(s, grp, Vc, g);
            for (int r = 0; r < rows; r++) { /* the fixed part, and no self-term */
                REAL cqq = COEF(s, grp, r, r);
                const REAL *fq = Fc + (size_t)(q0 + r) * kp, *vq = Vc + (size_t)(q0 + r) * kp;
                for (int c = 0; c < kp; c++)
                    g[r * kp + c] += fq[c] - cqq * vq[c];
            }
#ifdef ROWS_IN_REGISTERS
            if (kp == 16 && rows == s->R) { /* a whole group, at the default's rank */
                if (s->R == AMX_ROWS)
                    forward_rows16(s, grp, AMX_ROWS, g, Vc, gnrm, &delta);
                else
                    forward_rows16(s, grp, TROWS, g, Vc, gnrm, &delta);
                continue;
            }
#endif
            for (int r = 0; r < rows; r++) {
                int q = q0 + r;
                REAL *gr = g + r * kp, *vq = Vc + (size_t)q * kp;
                REAL gn2 = 0;
                for (int c = 0; c < kp; c++)
                    gn2 += gr[c] * gr[c];
                REAL gn = sqrt(gn2);
                if (gn <= TINY)
                    continue;
                REAL d2 = 0, inv = 1 / gn;
                for (int c = 0; c < kp; c++) {
                    REAL v_new = -gr[c] * inv;
                    dv[c] = v_new - vq[c];
                    d2 += dv[c] * dv[c];
                    vq[c] = v_new;
                }
                if (s->pairs) /* keep the products' operand in step */
                    pairs_set_row(s, q, vq);
                gnrm[s->f[q]] = gn;
                delta += gn * d2; /* the objective's decrease from this update */
                /* the group's later rows see this update, as the sequential order requires */
                for (int p = r + 1; p < rows; p++) {
                    REAL cpq = COEF(s, grp, r, p);
                    for (int c = 0; c < kp; c++)
                        g[p * kp + c] += cpq * dv[c];
                }
            }
        }
        sweeps++;
        if (sweep == 0)
            threshold = eps * delta;
        if (delta < threshold)
            break;
    }
    return sweeps;
}

/* The backward's sweeps on the compact arrays. */
static void backward_sweeps(struct sample *s, REAL *Uc, const REAL *Vc, const REAL *Ac,
                            REAL *h, REAL *du, int sweeps, const REAL *gnrm, REAL prox_lam)
{
    int nf = s->nf, kp = s->kp;
    for (int sweep = 0; sweep < sweeps; sweep++) {
        for (int grp = 0; grp < s->groups; grp++) {
            int q0 = grp * s->R, rows = nf - q0 < s->R ? nf - q0 : s->R;
            group_product(s, grp, Uc, h);
            for (int r = 0; r < rows; r++) { /* no self-term */
                REAL cqq = COEF(s, grp, r, r);
                const REAL *uq = Uc + (size_t)(q0 + r) * kp;
                for (int c = 0; c < kp; c++)
                    h[r * kp + c] -= cqq * uq[c];
            }
#ifdef ROWS_IN_REGISTERS
            if (kp == 16 && rows == s->R) {
                if (s->R == AMX_ROWS)
                    backward_rows16(s, grp, AMX_ROWS, h, Uc, Vc, Ac, gnrm, prox_lam);
                else
                    backward_rows16(s, grp, TROWS, h, Uc, Vc, Ac, gnrm, prox_lam);
                continue;
            }
#endif
            for (int r = 0; r < rows; r++) {
                int q = q0 + r;
                REAL *hr = h + r * kp, *uq = Uc + (size_t)q * kp;
                const REAL *vq = Vc + (size_t)q * kp, *aq = Ac + (size_t)q * kp;
                REAL hv = 0;
                for (int c = 0; c < kp; c++)
                    hv += hr[c] * vq[c];
                REAL inv = 1 / (gnrm[s->f[q]] + prox_lam);
                for (int c = 0; c < kp; c++) {
                    REAL u_new = (aq[c] - (hr[c] - hv * vq[c])) * inv;
                    du[c] = u_new - uq[c];
                    uq[c] = u_new;
                }
                if (s->pairs)
                    pairs_set_row(s, q, uq);
                for (int p = r + 1; p < rows; p++) {
                    REAL cpq = COEF(s, grp, r, p);
                    for (int c = 0; c < kp; c++)
                        h[p * kp + c] += cpq * du[c];
                }
            }
        }
    }
}

/* One pass over a batch: its arguments, and the next sample a thread takes. Sample b's rows of
 * is_free, V, gnrm, a and U start at b times their per-sample size; C and order are shared. */
struct pass {
    const REAL *C;
    int N, k, B, precision;
    const int64_t *order;
    const uint8_t *is_free;
    REAL *V, *gnrm;            /* the forward's, in place; the backward reads them */
    int max_iter, *sweeps;     /* forward: written (sweeps run); backward: read */
    REAL eps, prox_lam;
    const REAL *a;             /* backward */
    REAL *U;                   /* backward */
    int backward, next, failed;
};

/* Sample b's forward sweeps, in place on its V (N x k) and gnrm (N). Returns the sweeps run,
 * or -1 when out of memory. */
static int forward_one(const struct pass *p, int b)
{
    struct sample sample, *s = &sample;
    int N = p->N, k = p->k, sweeps = -1;
    REAL *V = p->V + (size_t)b * N * k, *gnrm = p->gnrm + (size_t)b * N;
    REAL *Vc = NULL, *Fc = NULL, *g = NULL, *dv = NULL;
    if (sample_init(s, p->C, N, k, p->order, p->is_free + (size_t)b * N, p->precision))
        goto done;
    int nf = s->nf, kp = s->kp;
    Vc = zeroed((size_t)nf * kp), Fc = zeroed((size_t)(nf + TROWS) * kp);
    g = zeroed((size_t)AMX_ROWS * kp), dv = zeroed(kp);
    if (!Vc || !Fc || !g || !dv || fixed_part(s, p->C, N, V, k, Fc))
        goto done;
    gather(s->f, nf, V, k, kp, Vc);
    if (s->pairs)
        for (int q = 0; q < nf; q++)
            pairs_set_row(s, q, Vc + (size_t)q * kp);
    if (s->amx)
        amx_configure(); /* held by this thread while the sample's sweeps run */
    sweeps = forward_sweeps(s, Vc, Fc, g, dv, p->max_iter, p->eps, gnrm);
    if (s->amx)
        amx_release();
    scatter(s->f, nf, Vc, k, kp, V);
done:
    free(Vc);
    free(Fc);
    free(g);
    free(dv);
    sample_free(s);
    return sweeps;
}

/* Sample b's Gauss-Seidel sweeps of the backward system, its U (N x k) written for the free
 * variables (the fixed ones' rows are left as they are). Returns 0, or -1 when out of memory. */
static int backward_one(const struct pass *p, int b)
{
    struct sample sample, *s = &sample;
    int N = p->N, k = p->k, status = -1;
    size_t at = (size_t)b * N * k;
    REAL *Vc = NULL, *Ac = NULL, *Uc = NULL, *h = NULL, *du = NULL;
    if (sample_init(s, p->C, N, k, p->order, p->is_free + (size_t)b * N, p->precision))
        goto done;
    int nf = s->nf, kp = s->kp;
    Vc = zeroed((size_t)nf * kp), Ac = zeroed((size_t)nf * kp), Uc = zeroed((size_t)nf * kp);
    h = zeroed((size_t)AMX_ROWS * kp), du = zeroed(kp);
    if (!Vc || !Ac || !Uc || !h || !du)
        goto done;
    gather(s->f, nf, p->V + at, k, kp, Vc);
    gather(s->f, nf, p->a + at, k, kp, Ac);
    if (s->amx) /* U starts at 0: so do its bf16 pairs */
        amx_configure();
    backward_sweeps(s, Uc, Vc, Ac, h, du, p->sweeps[b], p->gnrm + (size_t)b * N, p->prox_lam);
    if (s->amx)
        amx_release();
    scatter(s->f, nf, Uc, k, kp, p->U + at);
    status = 0;
done:
    free(Vc);
    free(Ac);
    free(Uc);
    free(h);
    free(du);
    sample_free(s);
    return status;
}

/* A thread's share of a pass: samples taken one at a time until none is left */
static void *work(void *arg)
{
    struct pass *p = arg;
    for (int b; (b = __atomic_fetch_add(&p->next, 1, __ATOMIC_RELAXED)) < p->B;) {
        int r = p->backward ? backward_one(p, b) : forward_one(p, b);
        if (r < 0)
            __atomic_store_n(&p->failed, 1, __ATOMIC_RELAXED);
        else if (!p->backward)
            p->sweeps[b] = r;
    }
    return NULL;
}

/* The pass over `threads` threads, this one among them (fewer if one cannot start: the samples
 * are shared out as threads ask). Returns 0, or -1 when a sample ran out of memory. */
static int run(struct pass *p, int threads)
{
    pthread_t *helper = threads > 1 ? malloc(sizeof(pthread_t) * (threads - 1)) : NULL;
    int started = 0;
    while (helper && started < threads - 1 && !pthread_create(&helper[started], NULL, work, p))
        started++;
    work(p);
    for (int t = 0; t < started; t++)
        pthread_join(helper[t], NULL);
    free(helper);
    return p->failed ? -1 : 0;
}

/* Forward sweeps of B samples on `threads` threads, in place on V (B x N x k) and gnrm
 * (B x N); sweeps (B) gets the sweeps each ran. Returns 0, or -1 when out of memory. */
int mix_forward(const REAL *C, int N, int k, const int64_t *order, const uint8_t *is_free,
                int B, REAL *V, int max_iter, REAL eps, REAL *gnrm, int *sweeps, int precision,
                int threads)
{
    struct pass p = {.C = C, .N = N, .k = k, .B = B, .precision = precision, .order = order,
                     .is_free = is_free, .V = V, .gnrm = gnrm, .max_iter = max_iter,
                     .sweeps = sweeps, .eps = eps};
    return run(&p, threads);
}

/* Gauss-Seidel sweeps of B samples' backward systems (sweeps[b] each), U (B x N x k) written
 * for the free variables. Returns 0, or -1 when out of memory. */
int mix_backward(const REAL *C, int N, int k, const int64_t *order, const uint8_t *is_free,
                 int B, const REAL *V, const REAL *gnrm, const REAL *a, const int *sweeps,
                 REAL prox_lam, REAL *U, int precision, int threads)
{
    struct pass p = {.C = C, .N = N, .k = k, .B = B, .precision = precision, .order = order,
                     .is_free = is_free, .V = (REAL *)V, .gnrm = (REAL *)gnrm,
                     .sweeps = (int *)sweeps, .prox_lam = prox_lam, .a = a, .U = U,
                     .backward = 1};
    return run(&p, threads);
}

/* 1 where the float build runs the bf16x3 AMX tiles (k padded to 16 or 32), else 0 */
int bf16x3_available(void)
{
    return amx_permitted();
}

/* 1 where the float build runs plain bf16 products (AMX tiles or the vdpbf16ps tile), else 0 */
int bf16_available(void)
{
    return amx_permitted() || BF16_TILE_BUILT;
}

/* The vector tile this build runs: its instruction set and shape */
const char *tile_shape(void)
{
#define STR_(x) #x
#define STR(x) STR_(x)
    return TILE_ISA " " STR(TROWS) "x" STR(TVECS) " vectors of " STR(VBYTES) " bytes";
}
