/* The CPU backend's sweeps: one sample's mixing-method forward and Gauss-Seidel backward over
 * its free variables only. Compiled at first use by cpu.py, once with REAL=float and once with
 * REAL=double; cpu.py holds the math and the per-sample threading.
 *
 * Both passes update row q from g_q = sum_{j != q} C_qj x_j over the free variables, rows before
 * q already updated (the fixed variables' share of the forward's g is computed once, as F).
 * Rows are taken ROWS at a time: the group's g's are first computed from the vectors as they
 * stand, by a register-tiled kernel (ROWS x 2 vectors of running sums in registers, the group's
 * rows of C broadcast from a packed panel, each vector streamed once per group); then each row
 * is updated in turn and its change pushed into the g's of the group's later rows, exactly as
 * the sequential order requires.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifndef REAL
#define REAL float
#endif
#define LANES ((int)(64 / sizeof(REAL))) /* one 512-bit vector */
#define ROWS 12 /* rows per group: the tile is 24 of the 32 vector registers */
#define TINY ((REAL)1e-12)

typedef REAL vec __attribute__((vector_size(64)));

static REAL *alloc(size_t count) /* 64-byte aligned, uninitialised, never of size 0 */
{
    return aligned_alloc(64, (count * sizeof(REAL) / 64 + 1) * 64);
}

static REAL *zeroed(size_t count)
{
    REAL *p = alloc(count);
    if (p)
        memset(p, 0, count * sizeof(REAL));
    return p;
}

/* out[r][c0 : c0 + nv * LANES] = sum_j P[j][r] X[j][c0 : ...], r < ROWS; nv is 1 or 2. */
static inline __attribute__((always_inline)) void
tile(const REAL *P, const REAL *X, int n, int kp, int c0, int nv, REAL *out)
{
    vec acc[ROWS][2];
    for (int r = 0; r < ROWS; r++)
        acc[r][0] = acc[r][1] = (vec){0};
    for (int j = 0; j < n; j++) {
        const vec *x = (const vec *)(X + (size_t)j * kp + c0);
        vec x0 = x[0], x1 = nv == 2 ? x[1] : x[0];
        const REAL *p = P + (size_t)j * ROWS;
        for (int r = 0; r < ROWS; r++) {
            acc[r][0] += p[r] * x0;
            if (nv == 2)
                acc[r][1] += p[r] * x1;
        }
    }
    for (int r = 0; r < ROWS; r++)
        for (int v = 0; v < nv; v++)
            *(vec *)(out + (size_t)r * kp + c0 + v * LANES) = acc[r][v];
}

/* out (ROWS x kp) = a group's panel (n x ROWS) transposed times X (n x kp). */
static void group_times(const REAL *panel, const REAL *X, int n, int kp, REAL *out)
{
    int c0 = 0;
    for (; c0 + 2 * LANES <= kp; c0 += 2 * LANES)
        tile(panel, X, n, kp, c0, 2, out);
    if (c0 < kp)
        tile(panel, X, n, kp, c0, 1, out);
}

/* panels[g][j][r] = C[rows[g * ROWS + r]][cols[j]] for every group g of ROWS rows, zero for
 * rows past n: the rows of C read once each, the panels written in order. */
static void pack(const REAL *C, int N, const int *rows, int n, const int *cols, int ncols,
                 REAL *panels)
{
    int groups = (n + ROWS - 1) / ROWS;
    for (int i = 0; i < groups * ROWS; i++) {
        REAL *out = panels + (size_t)(i / ROWS) * ncols * ROWS + i % ROWS;
        if (i >= n) {
            for (int j = 0; j < ncols; j++)
                out[(size_t)j * ROWS] = 0;
            continue;
        }
        const REAL *row = C + (size_t)rows[i] * N;
        for (int j = 0; j < ncols; j++)
            out[(size_t)j * ROWS] = row[cols[j]];
    }
}

struct sample {
    int nf, nx, kp, groups;
    int *f;  /* free variables, in visiting order */
    int *x;  /* fixed variables */
    REAL *P; /* panels of the free rows of C over the free columns (pack) */
};

static void sample_free(struct sample *s)
{
    free(s->f);
    free(s->x);
    free(s->P);
}

static int sample_init(struct sample *s, const REAL *C, int N, int k, const int64_t *order,
                       const uint8_t *is_free)
{
    s->nf = s->nx = 0;
    s->kp = (k + LANES - 1) / LANES * LANES;
    s->f = malloc(sizeof(int) * N);
    s->x = malloc(sizeof(int) * N);
    s->P = NULL;
    if (!s->f || !s->x) {
        sample_free(s);
        return -1;
    }
    for (int p = 0; p < N; p++)
        if (is_free[order[p]])
            s->f[s->nf++] = (int)order[p];
    for (int i = 0; i < N; i++)
        if (!is_free[i])
            s->x[s->nx++] = i;
    s->groups = (s->nf + ROWS - 1) / ROWS;
    s->P = alloc((size_t)s->groups * ROWS * s->nf);
    if (!s->P) {
        sample_free(s);
        return -1;
    }
    pack(C, N, s->f, s->nf, s->f, s->nf, s->P);
    return 0;
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

/* F (groups * ROWS x kp): every free variable's g from the fixed variables alone,
 * F_q = sum_{j fixed} C_{f[q], j} v_j, with the same tile. Returns 0, or -1 out of memory. */
static int fixed_part(const struct sample *s, const REAL *C, int N, const REAL *V, int k,
                      REAL *F)
{
    REAL *panels = alloc((size_t)s->groups * ROWS * s->nx), *Vx = zeroed((size_t)s->nx * s->kp);
    int status = panels && Vx ? 0 : -1;
    if (!status) {
        gather(s->x, s->nx, V, k, s->kp, Vx);
        pack(C, N, s->f, s->nf, s->x, s->nx, panels);
        for (int g = 0; g < s->groups; g++)
            group_times(panels + (size_t)g * s->nx * ROWS, Vx, s->nx, s->kp,
                        F + (size_t)g * ROWS * s->kp);
    }
    free(panels);
    free(Vx);
    return status;
}

/* The forward's sweeps on the compact arrays; returns the sweeps run. */
static int forward_sweeps(const struct sample *s, int kp, REAL *Vc, const REAL *Fc, REAL *g,
                          REAL *dv, int max_iter, REAL eps, REAL *gnrm)
{
    int nf = s->nf, sweeps = 0;
    REAL threshold = 0;
    for (int sweep = 0; sweep < max_iter; sweep++) {
        REAL delta = 0;
        for (int grp = 0; grp < s->groups; grp++) {
            int q0 = grp * ROWS, rows = nf - q0 < ROWS ? nf - q0 : ROWS;
            const REAL *panel = s->P + (size_t)grp * nf * ROWS;
            group_times(panel, Vc, nf, kp, g);
            for (int r = 0; r < rows; r++) { /* the fixed part, and no self-term */
                REAL cqq = panel[(size_t)(q0 + r) * ROWS + r];
                const REAL *fq = Fc + (size_t)(q0 + r) * kp, *vq = Vc + (size_t)(q0 + r) * kp;
                for (int c = 0; c < kp; c++)
                    g[r * kp + c] += fq[c] - cqq * vq[c];
            }
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
                gnrm[s->f[q]] = gn;
                delta += gn * d2; /* the objective's decrease from this update */
                /* the group's later rows see this update, as the sequential order requires */
                for (int p = r + 1; p < rows; p++) {
                    REAL cpq = panel[(size_t)q * ROWS + p];
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
static void backward_sweeps(const struct sample *s, int kp, REAL *Uc, const REAL *Vc,
                            const REAL *Ac, REAL *h, REAL *du, int sweeps, const REAL *gnrm,
                            REAL prox_lam)
{
    int nf = s->nf;
    for (int sweep = 0; sweep < sweeps; sweep++) {
        for (int grp = 0; grp < s->groups; grp++) {
            int q0 = grp * ROWS, rows = nf - q0 < ROWS ? nf - q0 : ROWS;
            const REAL *panel = s->P + (size_t)grp * nf * ROWS;
            group_times(panel, Uc, nf, kp, h);
            for (int r = 0; r < rows; r++) { /* no self-term */
                REAL cqq = panel[(size_t)(q0 + r) * ROWS + r];
                const REAL *uq = Uc + (size_t)(q0 + r) * kp;
                for (int c = 0; c < kp; c++)
                    h[r * kp + c] -= cqq * uq[c];
            }
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
                for (int p = r + 1; p < rows; p++) {
                    REAL cpq = panel[(size_t)q * ROWS + p];
                    for (int c = 0; c < kp; c++)
                        h[p * kp + c] += cpq * du[c];
                }
            }
        }
    }
}

/* Forward sweeps, in place on V (N x k) and gnrm (N). Returns the sweeps run, or -1 when out
 * of memory. */
int mix_forward(const REAL *C, int N, int k, const int64_t *order, const uint8_t *is_free,
                REAL *V, int max_iter, REAL eps, REAL *gnrm)
{
    struct sample s;
    if (sample_init(&s, C, N, k, order, is_free))
        return -1;
    int nf = s.nf, kp = s.kp, sweeps;
    REAL *Vc = zeroed((size_t)nf * kp), *Fc = zeroed((size_t)s.groups * ROWS * kp);
    REAL *g = zeroed((size_t)ROWS * kp), *dv = zeroed(kp);
    if (!Vc || !Fc || !g || !dv || fixed_part(&s, C, N, V, k, Fc)) {
        sweeps = -1;
        goto done;
    }
    gather(s.f, nf, V, k, kp, Vc);
    sweeps = forward_sweeps(&s, kp, Vc, Fc, g, dv, max_iter, eps, gnrm);
    scatter(s.f, nf, Vc, k, kp, V);
done:
    free(Vc);
    free(Fc);
    free(g);
    free(dv);
    sample_free(&s);
    return sweeps;
}

/* Gauss-Seidel sweeps of the backward system, U (N x k) written for the free variables (the
 * fixed ones' rows are left as they are). Returns 0, or -1 when out of memory. */
int mix_backward(const REAL *C, int N, int k, const int64_t *order, const uint8_t *is_free,
                 const REAL *V, const REAL *gnrm, const REAL *a, int sweeps, REAL prox_lam,
                 REAL *U)
{
    struct sample s;
    if (sample_init(&s, C, N, k, order, is_free))
        return -1;
    int nf = s.nf, kp = s.kp, status = 0;
    REAL *Vc = zeroed((size_t)nf * kp), *Ac = zeroed((size_t)nf * kp);
    REAL *Uc = zeroed((size_t)nf * kp);
    REAL *h = zeroed((size_t)ROWS * kp), *du = zeroed(kp);
    if (!Vc || !Ac || !Uc || !h || !du) {
        status = -1;
        goto done;
    }
    gather(s.f, nf, V, k, kp, Vc);
    gather(s.f, nf, a, k, kp, Ac);
    backward_sweeps(&s, kp, Uc, Vc, Ac, h, du, sweeps, gnrm, prox_lam);
    scatter(s.f, nf, Uc, k, kp, U);
done:
    free(Vc);
    free(Ac);
    free(Uc);
    free(h);
    free(du);
    sample_free(&s);
    return status;
}
