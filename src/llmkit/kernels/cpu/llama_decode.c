/* Every layer of a llama-family decoder's decode step in one call, for w4a8, q8, kq or mxfp4
 * weights.
 *
 * At one stream a 30-layer model spends as long in the torch ops and module calls between
 * its matmuls (norms, RoPE, the KV write, SwiGLU, residuals: ~35 ops a layer, each a few
 * microseconds of dispatch on a row of 576 floats) as in the matmuls. Here the whole stack
 * runs in one OpenMP region: per layer RMSNorm, the fused QKV matmul (+ bias), the q/k
 * RMSNorm (Qwen3), RoPE, the KV write, attention over the paged cache as the layer's spec
 * says (a sliding window, a soft-cap, sinks), the output matmul and residual, RMSNorm, and
 * the MLP: gate/up, the gated activation, down and residual, or a mixture of experts
 * (fused_moe.h); Gemma's sandwich norms on both blocks' outputs. Barriers separate the
 * phases. Rows (phases that work on a token) are split the same way in every phase, so a
 * thread reads back only rows it wrote itself between barriers; matmuls split their output
 * tiles (fused_linear.h); attention splits each row's slots into spans (paged_attend.h).
 *
 * The rows are M one-token requests: row m is request m of the block tables (decode steps;
 * speculative proposals are rows of their own). Layers in KV cache groups (sliding-window
 * layers apart from full ones: model/kv_layout.py) read their group's slots [M] and block
 * tables [M, width], the groups' one after the other. All KV writes of a layer land before any of
 * its attention reads, so a row sees the rows of its request before it. Called by
 * model/models/llama_fused.py, which checks the layers fit (native formats, float32, one rank).
 */
#include "fused_moe.h"
#include "gdn_step.h"
#include "paged_attend.h"

typedef struct {
    const float *norm1, *norm2;         /* before attention; before the MLP */
    const float *attn_norm, *mlp_norm;  /* sandwich norms of the blocks' outputs, or NULL */
    const float *q_norm, *k_norm;       /* per head of q and of k, before RoPE, or NULL */
    const float *cos, *sin;             /* the layer's rotary table [positions, head_dim],
                                           the sine negated on the first half */
    const float *sinks;                 /* [heads] or NULL */
    Linear qkv, o, gate_up, down;       /* gate_up, down: a dense MLP's */
    const Moe *moe;                     /* or NULL: a dense MLP */
    Act act;                            /* the dense MLP's */
    void *k_cache, *v_cache; /* [blocks, block_size, kv_heads, head_dim], float32 or float16 */
    int64_t window;          /* 0: the whole context */
    int64_t group;           /* the KV cache group whose slots and block tables it reads */
    float scale, softcap;    /* softcap 0: none */
    const Gdn *gdn;          /* a linear-attention layer's (its attention fields unused), or NULL */
    int64_t rotary;          /* the dimensions of each head RoPE turns: the table's width */
    int64_t gated;           /* the query projection gives each head's query, then its gate */
} Layer;

typedef struct {
    int64_t layers, hidden, heads, kv_heads, head_dim, block_size, kv_half;
    float eps;
    const Layer *layer;
} Model;

typedef struct { /* scratch for one call, M rows */
    float *xn, *qkv, *attn, *out, *gu;
    Codes codes;
    float *scores, *slots; /* slots: a float16 slot row widened, per thread */
    int64_t score_stride;
    float *parts;  /* attention's parts: [M, spans, part_size] */
    int64_t spans;   /* the most of a row's slots (paged_attend.h) */
    int64_t threads; /* asked for, which a row's spans follow */
    MoeWork moe;
    float *q; /* a gated attention's queries, without their gates */
    GdnWork gdn;
} Work;

static void rms_norm(const float *x, const float *weight, float *out, int64_t n, float eps) {
    float sum = 0.f;
    for (int64_t i = 0; i < n; i++) sum += x[i] * x[i];
    const float inv = 1.f / sqrtf(sum / (float)n + eps);
    for (int64_t i = 0; i < n; i++) out[i] = x[i] * inv * weight[i];
}

/* The residual stream's row x += a block's output row (+ its bias; normed first with a
 * sandwich norm). */
static void add_residual(float *x, float *out, const float *bias, const float *norm, int64_t n,
                         float eps) {
    add_bias(out, bias, n);
    if (norm != NULL) rms_norm(out, norm, out, n, eps);
    for (int64_t i = 0; i < n; i++) x[i] += out[i];
}

/* x * cos + roll(x, R / 2) * sin on the first R dimensions of `heads` heads `stride` apart,
 * in place (R: the table's width, the head size unless RoPE turns part of each head). */
static void rope(float *x, int64_t heads, int64_t stride, int64_t R, const float *cos,
                 const float *sin) {
    const int64_t half = R / 2;
    float t[512];
    for (int64_t h = 0; h < heads; h++) {
        float *v = x + h * stride;
        memcpy(t, v, sizeof(float) * (size_t)R);
        for (int64_t d = 0; d < half; d++) v[d] = t[d] * cos[d] + t[d + half] * sin[d];
        for (int64_t d = half; d < R; d++) v[d] = t[d] * cos[d] + t[d - half] * sin[d];
    }
}

/* The dense MLP of the rows normed into w->xn, its output rows into w->out. */
static void dense_mlp(const Layer *L, const Work *w, int64_t M, int64_t m0, int64_t m1,
                      int64_t i, int64_t n) {
    quantize_for(&L->gate_up, w->xn, &w->codes, m0, m1);
#pragma omp barrier
    matmul_for(&L->gate_up, w->gu, &w->codes, M, i, n);
#pragma omp barrier
    activate(&L->act, &L->gate_up, &L->down, w->gu, w->xn, &w->codes, m0, m1);
#pragma omp barrier
    matmul_for(&L->down, w->out, &w->codes, M, i, n);
#pragma omp barrier
}

/* Attention on the rows normed in w->xn, its output rows in w->out. Ends after a barrier. */
static void attention_mix(const Model *mdl, const Layer *L, const int64_t *positions,
                          const int64_t *slots, const int32_t *tables, const int32_t *seq_lens,
                          int64_t M, int64_t width, const Work *w, int64_t i, int64_t n) {
    const int64_t D = mdl->head_dim, NH = mdl->heads, NKV = mdl->kv_heads;
    const int64_t m0 = M * i / n, m1 = M * (i + 1) / n;
    const int64_t qkv_n = L->qkv.N, attn_n = NH * D, qs = L->gated ? 2 * D : D, ko = NH * qs;
    float *score = w->scores + i * w->score_stride;
    slots += L->group * M;
    tables += L->group * M * width;
    quantize_for(&L->qkv, w->xn, &w->codes, m0, m1);
#pragma omp barrier
    matmul_for(&L->qkv, w->qkv, &w->codes, M, i, n);
#pragma omp barrier
    for (int64_t m = m0; m < m1; m++) {
        float *row = w->qkv + m * qkv_n;
        add_bias(row, L->qkv.bias, qkv_n);
        for (int64_t h = 0; L->q_norm != NULL && h < NH + NKV; h++) {
            float *head = h < NH ? row + h * qs : row + ko + (h - NH) * D;
            rms_norm(head, h < NH ? L->q_norm : L->k_norm, head, D, mdl->eps);
        }
        const float *c = L->cos + positions[m] * L->rotary, *s = L->sin + positions[m] * L->rotary;
        rope(row, NH, qs, L->rotary, c, s);
        rope(row + ko, NKV, D, L->rotary, c, s);
        for (int64_t h = 0; L->gated && h < NH; h++)
            memcpy(w->q + m * attn_n + h * D, row + h * qs, sizeof(float) * (size_t)D);
        if (slots[m] >= 0) {
            const int64_t at = slots[m] * NKV * D;
            kv_store(L->k_cache, mdl->kv_half, at, row + ko, NKV * D);
            kv_store(L->v_cache, mdl->kv_half, at, row + ko + NKV * D, NKV * D);
        }
    }
#pragma omp barrier
    /* Items of (row, span of its slots), then each row's parts merged. */
    const PagedKV kv = {L->k_cache, L->v_cache, mdl->kv_half, mdl->block_size, NH, NKV, D,
                        mdl->block_size * NKV * D, L->scale, L->window, L->softcap, L->sinks};
    /* A row's spans follow its own length (not the step's longest row's), so that its
     * numbers are the same whatever shares its step. */
    const int64_t spans = w->spans, size = part_size(&kv), nt = w->threads;
    for (int64_t j = i; j < M * spans; j += n) {
        const int64_t m = j / spans, its = spans_for(nt, seq_lens[m]);
        if (j % spans >= its) continue;
        const float *q = L->gated ? w->q + m * attn_n : w->qkv + m * qkv_n;
        attend_part(&kv, q, tables + m * width, seq_lens[m], j % spans, its, score,
                    w->slots + i * NKV * D, w->parts + j * size);
    }
#pragma omp barrier
    for (int64_t m = m0; m < m1; m++)
        merge_parts(&kv, w->parts + m * spans * size, spans_for(nt, seq_lens[m]), size,
                    w->attn + m * attn_n);
    /* The rows merged here are this thread's own in the phases below, up to the barrier. */
    for (int64_t m = m0; L->gated && m < m1; m++) /* each output times its gate's sigmoid */
        for (int64_t h = 0; h < NH; h++) {
            const float *gate = w->qkv + m * qkv_n + h * qs + D;
            float *o = w->attn + m * attn_n + h * D;
            for (int64_t d = 0; d < D; d++) o[d] /= 1.0f + expf(-gate[d]);
        }
    quantize_for(&L->o, w->attn, &w->codes, m0, m1);
#pragma omp barrier
    matmul_for(&L->o, w->out, &w->codes, M, i, n);
#pragma omp barrier
}

static void layer_step(const Model *mdl, const Layer *L, float *x, const int64_t *positions,
                       const int64_t *slots, const int32_t *tables, const int32_t *seq_lens,
                       const StateRows *states, int64_t M, int64_t width, const Work *w,
                       int64_t i, int64_t n) {
    const int64_t H = mdl->hidden;
    const int64_t m0 = M * i / n, m1 = M * (i + 1) / n;
    for (int64_t m = m0; m < m1; m++) rms_norm(x + m * H, L->norm1, w->xn + m * H, H, mdl->eps);
    if (L->gdn != NULL)
        gdn_mix(L->gdn, states, w->xn, w->out, &w->codes, &w->gdn, M, mdl->eps, i, n);
    else
        attention_mix(mdl, L, positions, slots, tables, seq_lens, M, width, w, i, n);
    for (int64_t m = m0; m < m1; m++) {
        add_residual(x + m * H, w->out + m * H, L->gdn ? NULL : L->o.bias, L->attn_norm, H,
                     mdl->eps);
        rms_norm(x + m * H, L->norm2, w->xn + m * H, H, mdl->eps);
    }
    if (L->moe != NULL) {
        quantize_for(&L->moe->gate_up, w->xn, &w->codes, m0, m1);
        const MoeRows rows = {w->xn, w->codes, w->gu};
#pragma omp barrier
        moe_step(L->moe, &rows, &w->moe, w->out, M, i, n);
    } else {
        dense_mlp(L, w, M, m0, m1, i, n);
    }
    for (int64_t m = m0; m < m1; m++)
        add_residual(x + m * H, w->out + m * H, L->moe ? NULL : L->down.bias, L->mlp_norm, H,
                     mdl->eps);
    /* The next layer's first phase reads only these rows: no barrier needed here. */
}

static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* x [M, hidden] float32, in place: the residual stream after every layer (the final norm
 * is the caller's). Returns 0, or -1 out of memory. */
int llama_decode(const Model *mdl, float *x, const int64_t *positions, const int64_t *slots,
                 const int32_t *block_tables, const int32_t *seq_lens, int64_t M, int64_t width,
                 int64_t n_threads, const int64_t *state_slots, const int64_t *save_at,
                 const int64_t *save_slot) {
    if (M == 0) return 0;
    const int64_t H = mdl->hidden, NH = mdl->heads, D = mdl->head_dim;
    const int64_t nt = n_threads < 1 ? 1 : n_threads;
    /* The widest of each buffer over the layers: the dense MLPs', the shared experts' and
     * the experts' own intermediate sizes and inputs. */
    int64_t kp = 0, qkv_n = 0, inter = 0, longest = 1, E = 0, k = 0, ei = 0, ekp = 0;
    int64_t mixed = NH * D, heads = 0; /* the widest attention or delta-rule output; Hv */
    for (int64_t l = 0; l < mdl->layers; l++) {
        const Layer *L = mdl->layer + l;
        const Moe *e = L->moe;
        const Linear *dense_down = e ? &e->shared_down : &L->down;
        const int64_t k4[4] = {L->qkv.Kp, L->o.Kp, e ? e->gate_up.Kp : L->gate_up.Kp,
                               dense_down->parts ? dense_down->Kp : 0};
        for (int j = 0; j < 4; j++) kp = max64(kp, k4[j]);
        qkv_n = max64(qkv_n, L->qkv.N);
        if (L->gdn != NULL) { /* its in-projection's rows take the qkv buffer */
            const Gdn *g = L->gdn;
            if (g->dk > GDN_MAX_DIM || g->dv > GDN_MAX_DIM || g->hv % g->hk) return -1;
            qkv_n = max64(qkv_n, g->in_proj.N);
            kp = max64(kp, max64(g->in_proj.Kp, g->out.Kp));
            mixed = max64(mixed, g->hv * g->dv);
            heads = max64(heads, g->hv);
        }
        inter = max64(inter, dense_down->parts ? dense_down->K : 0);
        if (e != NULL) {
            E = max64(E, e->experts);
            k = max64(k, e->top_k);
            ei = max64(ei, e->down.K);
            ekp = max64(ekp, max64(e->gate_up.Kp, e->down.Kp));
        }
    }
    for (int64_t m = 0; m < M; m++) longest = seq_lens[m] > longest ? seq_lens[m] : longest;
    const int64_t widest = H > inter ? H : inter;
    const int64_t spans = spans_for(nt, longest);
    Work w = {
        malloc(sizeof(float) * (size_t)(M * widest)),
        malloc(sizeof(float) * (size_t)(M * qkv_n)),
        malloc(sizeof(float) * (size_t)(M * mixed)),
        malloc(sizeof(float) * (size_t)(M * H)),
        malloc(sizeof(float) * (size_t)(M * 2 * inter)),
        codes_alloc(M, kp),
        malloc(sizeof(float) * (size_t)(nt * NH * (longest + 1))),
        malloc(sizeof(float) * (size_t)(nt * mdl->kv_heads * D)),
        NH * (longest + 1),
        malloc(sizeof(float) * (size_t)(M * spans * NH * (2 + D))),
        spans,
        nt,
        {0},
        malloc(sizeof(float) * (size_t)(M * NH * D)),
        {NULL, NULL, heads ? malloc(sizeof(float) * (size_t)(M * 2 * heads)) : NULL},
    };
    w.gdn.proj = w.qkv; /* the phases of a layer never use both */
    w.gdn.mixed = w.attn;
    const StateRows states = {state_slots, save_at, save_slot};
    int status = w.xn && w.qkv && w.attn && w.out && w.gu && codes_made(&w.codes) &&
                         w.scores && w.slots && w.parts && w.q &&
                         (heads == 0 || w.gdn.gb)
                     ? 0
                     : -1;
    if (E > 0 && moe_alloc(&w.moe, M, nt, E, k, ei, ekp, H) != 0) status = -1;
    if (status == 0) {
#pragma omp parallel num_threads((int)nt)
        {
            /* The runtime may give fewer threads than asked: split by the ones it gave. */
            const int64_t i = omp_get_thread_num(), n = omp_get_num_threads();
            for (int64_t l = 0; l < mdl->layers; l++)
                layer_step(mdl, mdl->layer + l, x, positions, slots, block_tables, seq_lens,
                           &states, M, width, &w, i, n);
        }
    }
    if (E > 0) moe_free(&w.moe, nt);
    free(w.xn);
    free(w.qkv);
    free(w.attn);
    free(w.out);
    free(w.gu);
    codes_free(&w.codes);
    free(w.scores);
    free(w.slots);
    free(w.parts);
    free(w.q);
    free(w.gdn.gb);
    return status;
}
