/* A mixture of experts' block in the fused decode step (llama_decode.c), on the step's M
 * decode rows: the router, each row's experts as model/layers/moe.py's Routing picks them,
 * then the rows grouped by expert, so each routed expert's weights are read once for all its
 * rows and an expert no row chose is never read.
 *
 * The experts are a GGUF file's stacked tensors (moe.py's NativeExperts): each projection one
 * weight of E * rows rows, expert e's rows whole tiles of it, so an expert's view is expert
 * 0's with every field moved on by e steps. The rows' codes (quantized once by the caller;
 * with their block sums for MXFP4 experts) are copied into slot order (a row once per expert
 * it chose, the slots grouped by expert in ascending order, rows ascending within one), so an
 * expert's rows are contiguous codes and its matmuls are the dense kernels' on a range of
 * tiles. The matmuls split the (expert,
 * tile) pairs of a projection evenly over the threads: with one row and 8 experts, 8 small
 * matmuls keep every thread busy. A row's output sums its experts in ascending order, as the
 * module's index_add_ does, then adds the shared expert (times its sigmoid gate).
 */
#ifndef LLMKIT_FUSED_MOE_H
#define LLMKIT_FUSED_MOE_H

#include "fused_linear.h"

enum { SOFTMAX = 0, SIGMOID = 1 };

typedef struct {
    Linear gate_up, down; /* expert 0's: its gate rows and up rows (2 parts); its down */
    int64_t step[3][6];   /* bytes from an expert's fields (Part's w, hi, scale, min, d, dmin)
                             to the next expert's, of gate, up and down */
    const float *router, *router_bias; /* [E, H], [E] or NULL */
    const float *b13, *b2;             /* the experts' biases [E, 2I] and [E, H], or NULL */
    Linear shared_gate_up, shared_down; /* the shared expert's (shared_down.parts 0: none) */
    const float *shared_gate;           /* [H]: its sigmoid gate's weight, or NULL */
    int64_t experts, top_k, scoring, renormalize, after_top_k; /* Routing's */
    Act act, shared_act;
} Moe;

/* The step's routing in slot order, each thread's own copy (computed alike by every thread
 * from the shared ids, so no thread waits for another's). */
typedef struct {
    int64_t *first;  /* [E + 1]: expert e's slots are [first[e], first[e + 1]) */
    int64_t *row;    /* [S]: each slot's row */
    int64_t *expert; /* [S] */
    float *weight;   /* [S] */
} Route;

typedef struct { /* scratch for one call: M rows, S = M top_k slots */
    float *logits, *gate_logit; /* [M, E] router logits, then scores; [M] shared gates */
    int64_t *ids;               /* [M, top_k] each row's experts */
    float *weights;             /* [M, top_k] and their weights */
    Codes slots;                /* [S]: the rows' codes in slot order, then the activations' */
    float *gu, *act, *y;        /* [S, 2I], [S, I], [S, H] */
    float *shared_y;            /* [M, H] the shared expert's output */
    Route *route;               /* [threads] */
} MoeWork;

/* The caller's rows: xn the normed rows [M, H] (after routing, the shared expert's
 * activations), codes their codes for the experts' gate/up, gu [M, 2 shared I] scratch. */
typedef struct {
    float *xn;
    Codes codes;
    float *gu;
} MoeRows;

#define ADVANCE(ptr, bytes) ((ptr) == NULL ? (ptr) : (void *)((const char *)(ptr) + (bytes)))

/* Expert e's view of a projection's part (expert 0's, fields `step` bytes apart). */
static Part expert_part(Part p, const int64_t step[6], int64_t e) {
    p.w = ADVANCE(p.w, e * step[0]);
    p.hi = ADVANCE(p.hi, e * step[1]);
    p.scale = ADVANCE(p.scale, e * step[2]);
    p.min = ADVANCE(p.min, e * step[3]);
    p.d = ADVANCE(p.d, e * step[4]);
    p.dmin = ADVANCE(p.dmin, e * step[5]);
    return p;
}

/* Expert e's gate/up (down = 0) or down (1) linear. */
static Linear expert_linear(const Moe *moe, int down, int64_t e) {
    Linear lin = down ? moe->down : moe->gate_up;
    for (int64_t p = 0; p < lin.parts; p++)
        lin.part[p] = expert_part(lin.part[p], moe->step[down ? 2 : p], e);
    return lin;
}

static float dot(const float *a, const float *b, int64_t n) {
    float sum = 0.f;
    for (int64_t k = 0; k < n; k++) sum += a[k] * b[k];
    return sum;
}

/* The k largest of s [n] (ties: the first), largest first. */
static void top_k(const float *s, int64_t n, int64_t k, int64_t *ids) {
    for (int64_t j = 0; j < k; j++) {
        int64_t best = -1;
        for (int64_t e = 0; e < n; e++) {
            int taken = 0;
            for (int64_t c = 0; c < j; c++) taken |= ids[c] == e;
            if (!taken && (best < 0 || s[e] > s[best])) best = e;
        }
        ids[j] = best;
    }
}

static void softmax(float *s, int64_t n) {
    float top = -INFINITY, sum = 0.f;
    for (int64_t e = 0; e < n; e++) top = s[e] > top ? s[e] : top;
    for (int64_t e = 0; e < n; e++) {
        s[e] = expf(s[e] - top);
        sum += s[e];
    }
    for (int64_t e = 0; e < n; e++) s[e] /= sum;
}

/* A row's experts and their weights from its router logits s [E] (overwritten), as
 * Routing.route: scores then the top k (renormalized or not), or the top k logits then
 * their softmax. */
static void route_row(const Moe *moe, float *s, int64_t *ids, float *weights) {
    const int64_t E = moe->experts, k = moe->top_k;
    if (!moe->after_top_k && moe->scoring == SOFTMAX) softmax(s, E);
    if (!moe->after_top_k && moe->scoring == SIGMOID)
        for (int64_t e = 0; e < E; e++) s[e] = 1.f / (1.f + expf(-s[e]));
    top_k(s, E, k, ids);
    float sum = 0.f;
    for (int64_t j = 0; j < k; j++) sum += weights[j] = s[ids[j]];
    if (moe->after_top_k) softmax(weights, k);
    if (!moe->after_top_k && moe->renormalize)
        for (int64_t j = 0; j < k; j++) weights[j] /= sum;
}

/* The slots of every row's experts, grouped by expert (a stable counting sort of the ids). */
static void sort_slots(const Moe *moe, const MoeWork *w, const Route *r, int64_t M) {
    const int64_t E = moe->experts, k = moe->top_k;
    memset(r->first, 0, sizeof(int64_t) * (size_t)(E + 1));
    for (int64_t j = 0; j < M * k; j++) r->first[w->ids[j] + 1]++;
    for (int64_t e = 0; e < E; e++) r->first[e + 1] += r->first[e];
    for (int64_t j = 0; j < M * k; j++) { /* row-major: rows ascending within an expert */
        const int64_t e = w->ids[j], s = r->first[e]++;
        r->row[s] = j / k;
        r->expert[s] = e;
        r->weight[s] = w->weights[j];
    }
    for (int64_t e = E; e > 0; e--) r->first[e] = r->first[e - 1]; /* back to each start */
    r->first[0] = 0;
}

/* Thread i of n's share of every routed expert's gate/up (down = 0) or down (1) tiles,
 * expert after expert, then the shared expert's on the M rows. */
static void expert_matmuls(const Moe *moe, int down, const Route *r, const MoeWork *w,
                           const Codes *rows, float *shared_out, int64_t M, int64_t i,
                           int64_t n) {
    const Linear *shared = down ? &moe->shared_down : &moe->shared_gate_up;
    const int64_t per = linear_tiles(down ? &moe->down : &moe->gate_up);
    int64_t total = linear_tiles(shared);
    for (int64_t e = 0; e < moe->experts; e++) total += r->first[e + 1] > r->first[e] ? per : 0;
    const int64_t first = total * i / n, last = total * (i + 1) / n;
    int64_t base = 0;
    for (int64_t e = 0; e < moe->experts && base < last; e++) {
        const int64_t s0 = r->first[e], count = r->first[e + 1] - s0;
        if (count == 0) continue;
        const int64_t lo = first > base ? first - base : 0, hi = last - base < per ? last - base : per;
        if (lo < hi) {
            const Linear lin = expert_linear(moe, down, e);
            const Codes codes = codes_at(&w->slots, &lin, s0);
            matmul_tiles(&lin, (down ? w->y : w->gu) + s0 * lin.N, &codes, count, lo, hi);
        }
        base += per;
    }
    if (shared->parts > 0 && last > base)
        matmul_tiles(shared, shared_out, rows, M, first > base ? first - base : 0, last - base);
}

/* The block's output rows [M, H] into out, from rows normed and quantized by the caller
 * (every thread past a barrier since). Rows split as the caller's: thread i of n writes out
 * rows [M i / n, M (i + 1) / n) last, so the caller reads them back with no barrier. */
static void moe_step(const Moe *moe, const MoeRows *rows, const MoeWork *w, float *out,
                     int64_t M, int64_t i, int64_t n) {
    const int64_t E = moe->experts, k = moe->top_k, S = M * k;
    const int64_t H = moe->down.N, I = moe->down.K;
    const int64_t m0 = M * i / n, m1 = M * (i + 1) / n, s0 = S * i / n, s1 = S * (i + 1) / n;
    const Route *r = w->route + i;

    const int64_t gates = moe->shared_gate != NULL, items = M * (E + gates);
    for (int64_t j = items * i / n; j < items * (i + 1) / n; j++) {
        const int64_t m = j / (E + gates), e = j % (E + gates);
        const float *x = rows->xn + m * H;
        if (e < E)
            w->logits[m * E + e] = dot(x, moe->router + e * H, H) +
                                   (moe->router_bias ? moe->router_bias[e] : 0.f);
        else
            w->gate_logit[m] = dot(x, moe->shared_gate, H);
    }
#pragma omp barrier
    for (int64_t m = m0; m < m1; m++)
        route_row(moe, w->logits + m * E, w->ids + m * k, w->weights + m * k);
#pragma omp barrier
    sort_slots(moe, w, r, M);
    for (int64_t s = s0; s < s1; s++) { /* the slots' codes: their rows' */
        const Codes from = codes_at(&rows->codes, &moe->gate_up, r->row[s]);
        const Codes to = codes_at(&w->slots, &moe->gate_up, s);
        const int64_t Kp = moe->gate_up.Kp;
        memcpy(to.q, from.q, (size_t)Kp);
        memcpy(to.scale, from.scale, sizeof(float) * (size_t)(Kp / 32));
        memcpy(to.sum, from.sum, sizeof(float) * (size_t)(Kp / moe->gate_up.G));
        if (moe->gate_up.sums) memcpy(to.sum16, from.sum16, sizeof(int32_t) * (size_t)(Kp / 16));
    }
#pragma omp barrier
    expert_matmuls(moe, 0, r, w, &rows->codes, rows->gu, M, i, n);
#pragma omp barrier
    for (int64_t s = s0; moe->b13 != NULL && s < s1; s++)
        add_bias(w->gu + s * 2 * I, moe->b13 + r->expert[s] * 2 * I, 2 * I);
    activate(&moe->act, &moe->gate_up, &moe->down, w->gu, w->act, &w->slots, s0, s1);
    if (moe->shared_down.parts > 0)
        activate(&moe->shared_act, &moe->shared_gate_up, &moe->shared_down, rows->gu, rows->xn,
                 &rows->codes, m0, m1);
#pragma omp barrier
    expert_matmuls(moe, 1, r, w, &rows->codes, w->shared_y, M, i, n);
#pragma omp barrier
    for (int64_t m = m0; m < m1; m++) memset(out + m * H, 0, sizeof(float) * (size_t)H);
    for (int64_t s = 0; s < S; s++) { /* slot order: a row's experts in ascending order */
        const int64_t m = r->row[s];
        if (m < m0 || m >= m1) continue;
        const float *y = w->y + s * H, wt = r->weight[s];
        const float *b2 = moe->b2 == NULL ? NULL : moe->b2 + r->expert[s] * H;
        float *o = out + m * H;
        for (int64_t h = 0; h < H; h++) o[h] += wt * (y[h] + (b2 ? b2[h] : 0.f));
    }
    if (moe->shared_down.parts > 0) {
        for (int64_t m = m0; m < m1; m++) {
            float *y = w->shared_y + m * H, *o = out + m * H;
            add_bias(y, moe->shared_down.bias, H);
            const float gate = gates ? 1.f / (1.f + expf(-w->gate_logit[m])) : 1.f;
            for (int64_t h = 0; h < H; h++) o[h] += y[h] * gate;
        }
    }
}

/* Scratch for M rows on nt threads, for experts of at most E experts, top_k, I rows, Kp
 * padded inputs and H outputs. Returns 0, or -1 out of memory (moe_free frees either way). */
static int moe_alloc(MoeWork *w, int64_t M, int64_t nt, int64_t E, int64_t k, int64_t I,
                     int64_t Kp, int64_t H) {
    const int64_t S = M * k;
    memset(w, 0, sizeof(*w));
    w->logits = malloc(sizeof(float) * (size_t)(M * E + M));
    w->gate_logit = w->logits == NULL ? NULL : w->logits + M * E;
    w->ids = malloc(sizeof(int64_t) * (size_t)S);
    w->weights = malloc(sizeof(float) * (size_t)S);
    w->slots = codes_alloc(S, Kp);
    w->gu = malloc(sizeof(float) * (size_t)(S * 2 * I));
    w->act = malloc(sizeof(float) * (size_t)(S * I));
    w->y = malloc(sizeof(float) * (size_t)(S * H));
    w->shared_y = malloc(sizeof(float) * (size_t)(M * H));
    w->route = calloc((size_t)nt, sizeof(Route));
    int ok = w->logits && w->ids && w->weights && codes_made(&w->slots) && w->gu && w->act &&
             w->y && w->shared_y && w->route;
    for (int64_t t = 0; ok && t < nt; t++) {
        Route *r = w->route + t;
        r->first = malloc(sizeof(int64_t) * (size_t)(E + 1 + 2 * S));
        r->weight = malloc(sizeof(float) * (size_t)S);
        ok = r->first != NULL && r->weight != NULL;
        if (ok) {
            r->row = r->first + E + 1;
            r->expert = r->row + S;
        }
    }
    return ok ? 0 : -1;
}

static void moe_free(MoeWork *w, int64_t nt) {
    for (int64_t t = 0; w->route != NULL && t < nt; t++) {
        free(w->route[t].first);
        free(w->route[t].weight);
    }
    free(w->route);
    free(w->logits);
    free(w->ids);
    free(w->weights);
    codes_free(&w->slots);
    free(w->gu);
    free(w->act);
    free(w->y);
    free(w->shared_y);
}

/* The block alone (moe.py's SparseMoE on the rows of a prompt too long for the fused step):
 * out [M, H] = the block's output for the normed rows x [M, H]. Returns 0, or -1 out of
 * memory. */
int moe_block(const Moe *moe, const float *x, float *out, int64_t M, int64_t n_threads) {
    if (M == 0) return 0;
    const int64_t nt = n_threads < 1 ? 1 : n_threads, H = moe->down.N;
    const Linear *shared = &moe->shared_down; /* its input: the shared expert's activations */
    const int64_t si = shared->parts ? shared->K : 0, wide = H > si ? H : si;
    const int64_t kp = shared->parts && shared->Kp > moe->gate_up.Kp ? shared->Kp : moe->gate_up.Kp;
    const int64_t ekp = moe->gate_up.Kp > moe->down.Kp ? moe->gate_up.Kp : moe->down.Kp;
    MoeRows rows = {malloc(sizeof(float) * (size_t)(M * wide)), codes_alloc(M, kp),
                    malloc(sizeof(float) * (size_t)(M * 2 * (si ? si : 1)))};
    MoeWork w;
    int status = rows.xn && codes_made(&rows.codes) && rows.gu ? 0 : -1;
    if (moe_alloc(&w, M, nt, moe->experts, moe->top_k, moe->down.K, ekp, H) != 0) status = -1;
    if (status == 0) {
        memcpy(rows.xn, x, sizeof(float) * (size_t)(M * H));
#pragma omp parallel num_threads((int)nt)
        {
            const int64_t i = omp_get_thread_num(), n = omp_get_num_threads();
            quantize_for(&moe->gate_up, rows.xn, &rows.codes, M * i / n, M * (i + 1) / n);
#pragma omp barrier
            moe_step(moe, &rows, &w, out, M, i, n);
        }
    }
    moe_free(&w, nt);
    free(rows.xn);
    codes_free(&rows.codes);
    free(rows.gu);
    return status;
}

#endif
