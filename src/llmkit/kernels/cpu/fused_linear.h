/* The linear layers of the fused decode step (llama_decode.c, fused_moe.h): w4a8.c's, q8.c's,
 * kq.c's and mxfp4.c's matmuls (included, each under its own names, so their numbers are the
 * separate layers'), a layer's parts side by side, and the int8 activation codes they share.
 *
 * Each part of a linear says which kernel reads it, and a linear's parts (q, k, v) may differ:
 * a Q4_K_M file's v is Q6_K on some layers. Every kernel reads the same activation codes (s8
 * by blocks of 32, a scale per block, w4a8 and kq a scaled code sum per group, mxfp4 and
 * kq's Q6_K each 16 inputs' integer code sum), so a row is quantized once for all the
 * linears of one input layout (K, Kp, G).
 */
#ifndef LLMKIT_FUSED_LINEAR_H
#define LLMKIT_FUSED_LINEAR_H
#include "formats.h" /* W4A8 .. MXFP4: a part's kernel, numbered by the registry */

#define Job W4Job
#define tile w4_tile
#define gemm_tiles w4_gemm_tiles
#define quantize_rows w4_quantize_rows
#define run_job w4_run_job
#include "w4a8.c"
#undef Job
#undef tile
#undef gemm_tiles
#undef quantize_rows
#undef run_job
#define Job Q8Job
#define tile q8_tile
#define gemm_tiles q8_gemm_tiles
#define quantize_rows q8_quantize_rows
#define run_job q8_run_job
#include "q8.c"
#undef Job
#undef tile
#undef gemm_tiles
#undef quantize_rows
#undef run_job
#define Job KQJob
#define tile kq_tile
#define gemm_tiles kq_gemm_tiles
#define quantize_rows kq_quantize_rows
#define run_job kq_run_job
#define gemm_unpacked kq_gemm_unpacked
#include "kq.c"
#undef gemm_unpacked
#undef Job
#undef tile
#undef gemm_tiles
#undef quantize_rows
#undef run_job
#define Job MXJob
#define tile mx_tile
#define gemm_tiles mx_gemm_tiles
#define quantize_rows mx_quantize_rows
#define run_job mx_run_job
#include "mxfp4.c"
#undef Job
#undef tile
#undef gemm_tiles
#undef quantize_rows
#undef run_job

/* One weight of a linear layer's stacked output rows, of one of the kernels' formats. */
typedef struct {
    const void *w, *hi;       /* the codes (kq: their low nibbles), kq's higher bits */
    const void *scale, *min;  /* w4a8: float16 per group; q8: scale; kq: sc and mn; mxfp4:
                                 the exponents */
    const uint16_t *d, *dmin; /* kq's K formats: per 256 inputs */
    int64_t N, kind, fmt;     /* fmt: kq's format */
} Part;

/* A linear layer: its parts' outputs side by side (N columns in all: the output's row
 * stride), on one quantized input of K values padded to Kp, in groups of G. */
typedef struct {
    Part part[4]; /* q, k, v; a linear attention's q/k/v, z, b, a */
    int64_t parts, sums; /* sums: whether a part reads the input's code sums (MXFP4, Q6_K) */
    const float *bias; /* or NULL */
    int64_t K, Kp, N, G;
} Linear;

/* Rows of int8 activations as a linear reads them: codes [rows, Kp], each block of 32's
 * scale [rows, Kp / 32], each group's scaled code sum [rows, Kp / G], each 16 inputs'
 * integer code sum [rows, Kp / 16] (made only for a linear whose parts read them). */
typedef struct {
    int8_t *q;
    float *scale, *sum;
    int32_t *sum16;
} Codes;

/* Codes for `rows` rows of at most kp padded inputs in groups of 32 or more (a NULL field:
 * out of memory, see codes_made). */
static Codes codes_alloc(int64_t rows, int64_t kp) {
    const Codes c = {malloc((size_t)(rows * kp)), malloc(sizeof(float) * (size_t)(rows * kp / 32)),
                     malloc(sizeof(float) * (size_t)(rows * kp / 32)),
                     malloc(sizeof(int32_t) * (size_t)(rows * kp / 16))};
    return c;
}

static int codes_made(const Codes *c) { return c->q && c->scale && c->sum && c->sum16; }

static void codes_free(const Codes *c) {
    free(c->q);
    free(c->scale);
    free(c->sum);
    free(c->sum16);
}

/* Row `row` onwards of c, laid out for lin. */
static Codes codes_at(const Codes *c, const Linear *lin, int64_t row) {
    const Codes at = {c->q + row * lin->Kp, c->scale + row * (lin->Kp / 32),
                      c->sum + row * (lin->Kp / lin->G), c->sum16 + row * (lin->Kp / 16)};
    return at;
}

/* Rows [m0, m1) of x [rows, lin->K] quantized into c for lin. */
static void quantize_for(const Linear *lin, const float *x, const Codes *c, int64_t m0, int64_t m1) {
    quantize_grouped(x, c->q, c->scale, c->sum, lin->K, lin->Kp, lin->G, m0, m1);
    if (lin->sums) code_sums(c->q, c->sum16, lin->Kp, 16, m0, m1);
}

/* Output tiles [first, last) of part p into out (its columns, rows lin->N apart), for the M
 * rows of codes c. */
static void part_tiles(const Linear *lin, const Part *p, float *out, const Codes *c, int64_t M,
                       int64_t first, int64_t last) {
    if (p->kind == W4A8) {
        const W4Job job = {NULL, p->w, p->scale, p->min, out, c->q, c->scale, c->sum,
                           M, lin->K, lin->Kp, p->N, lin->G, lin->N};
        w4_gemm_tiles(&job, first, last);
    } else if (p->kind == Q8) {
        const Q8Job job = {NULL, p->w, p->scale, out, c->q, c->scale, M, lin->K, lin->Kp,
                           p->N, lin->N};
        q8_gemm_tiles(&job, first, last);
    } else if (p->kind == KQ) {
        const KQJob job = {NULL, p->w, p->hi, p->scale, p->min, p->d, p->dmin, out, c->q,
                           c->scale, c->sum, c->sum16, M, lin->K, lin->Kp, p->N, p->fmt, lin->N};
        kq_gemm_tiles(&job, first, last);
    } else if (p->kind == MXFP4) { /* a kernel the step lacks has no fused view in Python */
        const MXJob job = {NULL, p->w, p->scale, out, c->q, c->scale, c->sum16, M, lin->K,
                           lin->Kp, p->N, lin->N};
        mx_gemm_tiles(&job, first, last);
    }
}

/* How many output tiles of 8 columns lin has, over all its parts. */
static int64_t linear_tiles(const Linear *lin) {
    int64_t tiles = 0;
    for (int64_t p = 0; p < lin->parts; p++) tiles += (lin->part[p].N + 7) / 8;
    return tiles;
}

/* Tiles [first, last) of out = the M rows of codes c times lin's weight (the tiles of its
 * parts, counted in order). */
static void matmul_tiles(const Linear *lin, float *out, const Codes *c, int64_t M,
                         int64_t first, int64_t last) {
    int64_t base = 0, column = 0;
    for (int64_t p = 0; p < lin->parts; p++) {
        const Part *part = lin->part + p;
        const int64_t count = (part->N + 7) / 8;
        const int64_t lo = first > base ? first - base : 0;
        const int64_t hi = last - base < count ? last - base : count;
        if (lo < hi) part_tiles(lin, part, out + column, c, M, lo, hi);
        base += count;
        column += part->N;
    }
}

/* Thread i of n's share of out = the M rows of codes c times lin's weight. */
static void matmul_for(const Linear *lin, float *out, const Codes *c, int64_t M, int64_t i,
                       int64_t n) {
    const int64_t tiles = linear_tiles(lin);
    matmul_tiles(lin, out, c, M, tiles * i / n, tiles * (i + 1) / n);
}

static void add_bias(float *row, const float *bias, int64_t n) {
    if (bias != NULL)
        for (int64_t i = 0; i < n; i++) row[i] += bias[i];
}

/* A gated activation of a fused gate/up row (model/layers/activation.py): SiLU-and-mul,
 * GELU(tanh)-and-mul, or gpt-oss's clamped SwiGLU. */
enum { SILU = 0, GELU_TANH = 1, CLAMPED_SWIGLU = 2 };
typedef struct {
    int64_t kind;
    float alpha, limit; /* CLAMPED_SWIGLU's */
} Act;

/* a[0 .. n) = act(g, u). */
static void gated(const Act *act, const float *g, const float *u, float *a, int64_t n) {
    if (act->kind == SILU) {
        for (int64_t k = 0; k < n; k++) a[k] = g[k] / (1.f + expf(-g[k])) * u[k];
    } else if (act->kind == GELU_TANH) {
        const float c = 0.7978845608028654f; /* sqrt(2 / pi) */
        for (int64_t k = 0; k < n; k++) {
            const float x = g[k];
            a[k] = 0.5f * x * (1.f + tanhf(c * (x + 0.044715f * x * x * x))) * u[k];
        }
    } else {
        const float alpha = act->alpha, limit = act->limit;
        for (int64_t k = 0; k < n; k++) {
            const float x = fminf(g[k], limit), y = fminf(fmaxf(u[k], -limit), limit);
            a[k] = (y + 1.f) * (x / (1.f + expf(-x * alpha)));
        }
    }
}

/* Rows [m0, m1) of an MLP's gate/up output gu [rows, 2I] (+ gate_up's bias) through act
 * into a [rows, I], then quantized into c for down (I = down's inputs). */
static void activate(const Act *act, const Linear *gate_up, const Linear *down, float *gu,
                     float *a, const Codes *c, int64_t m0, int64_t m1) {
    const int64_t I = down->K;
    for (int64_t m = m0; m < m1; m++) {
        float *g = gu + m * 2 * I;
        add_bias(g, gate_up->bias, 2 * I);
        gated(act, g, g + I, a + m * I, I);
    }
    quantize_for(down, a, c, m0, m1);
}

#endif
