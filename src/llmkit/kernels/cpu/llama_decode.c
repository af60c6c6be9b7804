/* Every layer of a llama-family decoder's decode step in one call, for w4a8, q8, kq or mxfp4
 * weights.
 *
 * At one stream a 30-layer model spends as long in the torch ops and module calls between
 * its matmuls (norms, RoPE, the KV write, SwiGLU, residuals: ~35 ops a layer, each a few
 * microseconds of dispatch on a row of 576 floats) as in the matmuls. Here the whole stack
 * runs in one OpenMP region: per layer RMSNorm, the fused QKV matmul (+ bias), RoPE, the KV
 * write, attention over the paged cache, the output matmul and residual, RMSNorm, gate/up,
 * SiLU-and-mul and down and residual, with barriers between the phases. Rows (phases that
 * work on a token) are split the same way in every phase, so a thread reads back only rows
 * it wrote itself between barriers; matmuls split their output tiles; attention splits
 * (row, query head) pairs. The matmuls are w4a8.c's, q8.c's, kq.c's and mxfp4.c's (included,
 * each under its own names), so their numbers are the separate layers'; each part of a linear says which
 * it is, and a linear's parts (q, k, v) may differ: a Q4_K_M file's v is Q6_K on some layers.
 *
 * The rows are M one-token requests: row m is request m of the block tables (decode steps;
 * speculative proposals are rows of their own). All KV writes of a layer land before any of
 * its attention reads, so a row sees the rows of its request before it. Called by
 * model/models/llama_fused.py, which checks the layers fit (native formats, float32, one rank).
 */
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
#include "kq.c"
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

#include "paged_attend.h"

enum { W4A8 = 0, Q8 = 1, KQ = 2, MXFP4 = 3 };

/* One weight of a linear layer's stacked output rows, of one of the kernels' formats. */
typedef struct {
    const void *w, *hi;       /* the codes (kq: their low nibbles), kq's higher bits */
    const void *scale, *min;  /* w4a8: float16 per group; q8: scale; kq: sc and mn; mxfp4:
                                 the exponents */
    const uint16_t *d, *dmin; /* kq's K formats: per 256 inputs */
    int64_t N, kind, fmt;     /* fmt: kq's format */
} Part;

/* A linear layer: its parts' outputs side by side (q, k, v may each be another format),
 * on one quantized input (every kernel's activations are s8 by blocks of 32). */
typedef struct {
    Part part[3];
    int64_t parts, mxfp4; /* mxfp4: whether a part is, so the input's block sums are needed */
    const float *bias; /* or NULL */
    int64_t K, Kp, N, G;
} Linear;

typedef struct {
    const float *norm1, *norm2; /* input_layernorm, post_attention_layernorm */
    Linear qkv, o, gate_up, down;
    void *k_cache, *v_cache; /* [blocks, block_size, kv_heads, head_dim], float32 or float16 */
} Layer;

typedef struct {
    int64_t layers, hidden, heads, kv_heads, head_dim, inter, block_size, kv_half;
    float eps, scale;
    const float *cos, *sin; /* [positions, head_dim], the sine negated on the first half */
    const Layer *layer;
} Model;

typedef struct { /* scratch for one call, M rows */
    float *xn, *qkv, *attn, *out, *gu;
    int8_t *q;
    float *xscale, *xsum, *scores, *slots; /* slots: a float16 slot row widened, per thread */
    int64_t score_stride;
    int32_t *qsum; /* mxfp4's: each block's sum of codes */
} Work;

/* Rows [m0, m1) of x quantized for lin (the same codes for every kernel; w4a8 and kq read
 * the group sums too, mxfp4 the blocks' integer sums). */
static void quantize_for(const Linear *lin, const float *x, const Work *w, int64_t m0,
                         int64_t m1) {
    quantize_grouped(x, w->q, w->xscale, w->xsum, lin->K, lin->Kp, lin->G, m0, m1);
    if (lin->mxfp4) block_sums(w->q, w->qsum, lin->Kp, m0, m1);
}

/* Output tiles [first, last) of part p into out (its columns, rows lin->N apart). */
static void part_tiles(const Linear *lin, const Part *p, float *out, const Work *w, int64_t M,
                       int64_t first, int64_t last) {
    if (p->kind == W4A8) {
        const W4Job job = {NULL, p->w, p->scale, p->min, out, w->q, w->xscale, w->xsum,
                           M, lin->K, lin->Kp, p->N, lin->G, lin->N};
        w4_gemm_tiles(&job, first, last);
    } else if (p->kind == Q8) {
        const Q8Job job = {NULL, p->w, p->scale, out, w->q, w->xscale, M, lin->K, lin->Kp,
                           p->N, lin->N};
        q8_gemm_tiles(&job, first, last);
    } else if (p->kind == KQ) {
        const KQJob job = {NULL, p->w, p->hi, p->scale, p->min, p->d, p->dmin, out, w->q,
                           w->xscale, w->xsum, M, lin->K, lin->Kp, p->N, p->fmt, lin->N};
        kq_gemm_tiles(&job, first, last);
    } else {
        const MXJob job = {NULL, p->w, p->scale, out, w->q, w->xscale, w->qsum, M, lin->K,
                           lin->Kp, p->N, lin->N};
        mx_gemm_tiles(&job, first, last);
    }
}

/* Thread i of n's share of out = the quantized rows times lin's weight: the tiles of all
 * its parts, split evenly. */
static void matmul_for(const Linear *lin, float *out, const Work *w, int64_t M, int64_t i,
                       int64_t n) {
    int64_t tiles = 0;
    for (int64_t p = 0; p < lin->parts; p++) tiles += (lin->part[p].N + 7) / 8;
    const int64_t first = tiles * i / n, last = tiles * (i + 1) / n;
    int64_t base = 0, column = 0;
    for (int64_t p = 0; p < lin->parts; p++) {
        const Part *part = lin->part + p;
        const int64_t count = (part->N + 7) / 8;
        const int64_t lo = first > base ? first - base : 0;
        const int64_t hi = last - base < count ? last - base : count;
        if (lo < hi) part_tiles(lin, part, out + column, w, M, lo, hi);
        base += count;
        column += part->N;
    }
}

static void rms_norm(const float *x, const float *weight, float *out, int64_t n, float eps) {
    float sum = 0.f;
    for (int64_t i = 0; i < n; i++) sum += x[i] * x[i];
    const float inv = 1.f / sqrtf(sum / (float)n + eps);
    for (int64_t i = 0; i < n; i++) out[i] = x[i] * inv * weight[i];
}

static void add_bias(float *row, const float *bias, int64_t n) {
    if (bias != NULL)
        for (int64_t i = 0; i < n; i++) row[i] += bias[i];
}

/* The residual stream's row x += a linear's output row (+ its bias). */
static void add_residual(float *x, float *out, const float *bias, int64_t n) {
    add_bias(out, bias, n);
    for (int64_t i = 0; i < n; i++) x[i] += out[i];
}

/* x * cos + roll(x, D / 2) * sin, in place, for `heads` heads of D. */
static void rope(float *x, int64_t heads, int64_t D, const float *cos, const float *sin) {
    const int64_t half = D / 2;
    float t[512];
    for (int64_t h = 0; h < heads; h++) {
        float *v = x + h * D;
        memcpy(t, v, sizeof(float) * (size_t)D);
        for (int64_t d = 0; d < half; d++) v[d] = t[d] * cos[d] + t[d + half] * sin[d];
        for (int64_t d = half; d < D; d++) v[d] = t[d] * cos[d] + t[d - half] * sin[d];
    }
}

static void layer_step(const Model *mdl, const Layer *L, float *x, const int64_t *positions,
                       const int64_t *slots, const int32_t *tables, const int32_t *seq_lens,
                       int64_t M, int64_t width, const Work *w, int64_t i, int64_t n) {
    const int64_t H = mdl->hidden, D = mdl->head_dim, NH = mdl->heads, NKV = mdl->kv_heads;
    const int64_t I = mdl->inter, m0 = M * i / n, m1 = M * (i + 1) / n;
    const int64_t qkv_n = L->qkv.N, attn_n = NH * D;
    float *score = w->scores + i * w->score_stride;

    for (int64_t m = m0; m < m1; m++) rms_norm(x + m * H, L->norm1, w->xn + m * H, H, mdl->eps);
    quantize_for(&L->qkv, w->xn, w, m0, m1);
#pragma omp barrier
    matmul_for(&L->qkv, w->qkv, w, M, i, n);
#pragma omp barrier
    for (int64_t m = m0; m < m1; m++) {
        float *row = w->qkv + m * qkv_n;
        add_bias(row, L->qkv.bias, qkv_n);
        const float *c = mdl->cos + positions[m] * D, *s = mdl->sin + positions[m] * D;
        rope(row, NH + NKV, D, c, s); /* q and k heads side by side */
        if (slots[m] >= 0) {
            const int64_t at = slots[m] * NKV * D;
            kv_store(L->k_cache, mdl->kv_half, at, row + attn_n, NKV * D);
            kv_store(L->v_cache, mdl->kv_half, at, row + attn_n + NKV * D, NKV * D);
        }
    }
#pragma omp barrier
    /* A row's heads together (its keys and values read once), or with fewer rows than
     * twice the threads one query head an item, so that every thread has work. */
    const int64_t per = M >= 2 * n ? NH : 1, items = M * NH / per;
    const PagedKV kv = {L->k_cache, L->v_cache, mdl->kv_half, mdl->block_size, NH, NKV, D,
                        mdl->scale, 0, 0.f, NULL};
    for (int64_t j = items * i / n; j < items * (i + 1) / n; j++) {
        const int64_t m = j / (NH / per), h0 = j % (NH / per) * per;
        attend_heads(&kv, w->qkv + m * qkv_n, w->attn + m * attn_n, score,
                     w->slots + i * NKV * D, tables + m * width, seq_lens[m], h0, per);
    }
#pragma omp barrier
    quantize_for(&L->o, w->attn, w, m0, m1);
#pragma omp barrier
    matmul_for(&L->o, w->out, w, M, i, n);
#pragma omp barrier
    for (int64_t m = m0; m < m1; m++) {
        add_residual(x + m * H, w->out + m * H, L->o.bias, H);
        rms_norm(x + m * H, L->norm2, w->xn + m * H, H, mdl->eps);
    }
    quantize_for(&L->gate_up, w->xn, w, m0, m1);
#pragma omp barrier
    matmul_for(&L->gate_up, w->gu, w, M, i, n);
#pragma omp barrier
    for (int64_t m = m0; m < m1; m++) {
        const float *g = w->gu + m * 2 * I, *u = g + I;
        float *a = w->xn + m * I;
        for (int64_t k = 0; k < I; k++) a[k] = g[k] / (1.f + expf(-g[k])) * u[k];
    }
    quantize_for(&L->down, w->xn, w, m0, m1);
#pragma omp barrier
    matmul_for(&L->down, w->out, w, M, i, n);
#pragma omp barrier
    for (int64_t m = m0; m < m1; m++) add_residual(x + m * H, w->out + m * H, L->down.bias, H);
    /* The next layer's first phase reads only these rows: no barrier needed here. */
}

/* x [M, hidden] float32, in place: the residual stream after every layer (the final norm
 * is the caller's). Returns 0, or -1 out of memory. */
int llama_decode(const Model *mdl, float *x, const int64_t *positions, const int64_t *slots,
                 const int32_t *block_tables, const int32_t *seq_lens, int64_t M, int64_t width,
                 int64_t n_threads) {
    if (M == 0) return 0;
    const int64_t H = mdl->hidden, I = mdl->inter, NH = mdl->heads, D = mdl->head_dim;
    const int64_t nt = n_threads < 1 ? 1 : n_threads;
    int64_t kp = 0, qkv_n = 0, longest = 1;
    for (int64_t l = 0; l < mdl->layers; l++) {
        const Layer *L = mdl->layer + l;
        const int64_t k[4] = {L->qkv.Kp, L->o.Kp, L->gate_up.Kp, L->down.Kp};
        for (int j = 0; j < 4; j++) kp = k[j] > kp ? k[j] : kp;
        qkv_n = L->qkv.N > qkv_n ? L->qkv.N : qkv_n;
    }
    for (int64_t m = 0; m < M; m++) longest = seq_lens[m] > longest ? seq_lens[m] : longest;
    const int64_t widest = H > I ? H : I;
    Work w = {
        malloc(sizeof(float) * (size_t)(M * widest)),
        malloc(sizeof(float) * (size_t)(M * qkv_n)),
        malloc(sizeof(float) * (size_t)(M * NH * D)),
        malloc(sizeof(float) * (size_t)(M * H)),
        malloc(sizeof(float) * (size_t)(M * 2 * I)),
        malloc((size_t)(M * kp)),
        malloc(sizeof(float) * (size_t)(M * kp / 32)),
        malloc(sizeof(float) * (size_t)(M * kp / 32)),
        malloc(sizeof(float) * (size_t)(nt * NH * (longest + 1))),
        malloc(sizeof(float) * (size_t)(nt * mdl->kv_heads * D)),
        NH * (longest + 1),
        malloc(sizeof(int32_t) * (size_t)(M * kp / 32)),
    };
    int status = w.xn && w.qkv && w.attn && w.out && w.gu && w.q && w.xscale && w.xsum && w.scores && w.slots && w.qsum
                     ? 0
                     : -1;
    if (status == 0) {
#pragma omp parallel num_threads((int)nt)
        {
            /* The runtime may give fewer threads than asked: split by the ones it gave. */
            const int64_t i = omp_get_thread_num(), n = omp_get_num_threads();
            for (int64_t l = 0; l < mdl->layers; l++)
                layer_step(mdl, mdl->layer + l, x, positions, slots, block_tables, seq_lens, M,
                           width, &w, i, n);
        }
    }
    free(w.xn);
    free(w.qkv);
    free(w.attn);
    free(w.out);
    free(w.gu);
    free(w.q);
    free(w.xscale);
    free(w.xsum);
    free(w.scores);
    free(w.slots);
    free(w.qsum);
    return status;
}
