/* A Gated DeltaNet layer's token mixing in the fused decode step (llama_decode.c): the
 * in-projection (q, k, v, then z, b, a), the causal convolution over each row's slot's last
 * inputs, the delta rule on the slot's state (delta_rule.h), the gated RMSNorm and the
 * out-projection, for M one-token rows. The states are the pool model/recurrent.py keeps;
 * a row may copy its slot's state into a checkpoint slot before (save_at 0) or after (1)
 * its token. Value heads are processed in HF's grouped order, the state's; a GGUF file's
 * weights keep theirs (to_grouped: grouped head -> the file's head).
 */
#ifndef LLMKIT_GDN_STEP_H
#define LLMKIT_GDN_STEP_H

#include <string.h>

#include "delta_rule.h"
#include "fused_linear.h"

#define GDN_MAX_DIM 512

typedef struct {
    Linear in_proj, out;
    const float *conv;            /* [channels, kernel] */
    const float *A_log, *dt_bias; /* [Hv] */
    const float *norm;            /* [Dv] */
    float *conv_states;           /* [slots, kernel - 1, channels] */
    float *states;                /* [slots, Hv, Dk, Dv] */
    const int64_t *to_grouped;    /* [Hv] or NULL: the weights' value heads are HF's */
    int64_t hk, hv, dk, dv, kernel;
} Gdn;

/* Each row's slot, and where it saves a checkpoint (save_at NULL: none does). */
typedef struct {
    const int64_t *slot, *save_at, *save_slot;
} StateRows;

typedef struct { /* scratch, M rows */
    float *proj, *mixed, *gb; /* in-projection [M, N]; delta outputs [M, Hv Dv]; g, beta [M, 2 Hv] */
} GdnWork;

static inline float silu(float x) { return x / (1.0f + expf(-x)); }

/* Row m's convolution: its slot's last inputs and its own, through the channels' taps. */
static void gdn_conv(const Gdn *g, const StateRows *st, float *row, int64_t m) {
    const int64_t C = 2 * g->hk * g->dk + g->hv * g->dv, K = g->kernel, K1 = K - 1;
    float *cs = g->conv_states + st->slot[m] * K1 * C;
    const int64_t at = st->save_at == NULL ? -1 : st->save_at[m];
    float *saved = at < 0 ? NULL : g->conv_states + st->save_slot[m] * K1 * C;
    if (at == 0) memcpy(saved, cs, sizeof(float) * (size_t)(K1 * C));
    for (int64_t c = 0; c < C; c++) {
        const float *w = g->conv + c * K;
        float acc = row[c] * w[K1];
        for (int64_t k = 0; k < K1; k++) acc += cs[k * C + c] * w[k];
        for (int64_t k = 0; k + 1 < K1; k++) cs[k * C + c] = cs[(k + 1) * C + c];
        cs[(K1 - 1) * C + c] = row[c];
        row[c] = silu(acc);
    }
    if (at == 1) memcpy(saved, cs, sizeof(float) * (size_t)(K1 * C));
}

/* Rows normed in xn -> the layer's output rows in out. Ends after a barrier. */
static void gdn_mix(const Gdn *g, const StateRows *st, const float *xn, float *out,
                    const Codes *codes, const GdnWork *w, int64_t M, float eps, int64_t i,
                    int64_t n) {
    const int64_t m0 = M * i / n, m1 = M * (i + 1) / n, N = g->in_proj.N;
    const int64_t Hk = g->hk, Hv = g->hv, Dk = g->dk, Dv = g->dv, VD = Hv * Dv;
    const int64_t C = 2 * Hk * Dk + VD, size = Dk * Dv;
    quantize_for(&g->in_proj, xn, codes, m0, m1);
#pragma omp barrier
    matmul_for(&g->in_proj, w->proj, codes, M, i, n);
#pragma omp barrier
    for (int64_t m = m0; m < m1; m++) {
        float *row = w->proj + m * N, *gb = w->gb + m * 2 * Hv;
        gdn_conv(g, st, row, m);
        for (int64_t h = 0; h < Hv; h++) {
            const float a = row[C + VD + Hv + h] + g->dt_bias[h], b = row[C + VD + h];
            const float softplus = a > 20.0f ? a : log1pf(expf(a));
            gb[h] = -expf(g->A_log[h]) * softplus;
            gb[Hv + h] = 1.0f / (1.0f + expf(-b));
        }
    }
#pragma omp barrier
    const int64_t items = M * Hv, per_key = Hv / Hk;
    const float q_scale = 1.0f / sqrtf((float)Dk);
    for (int64_t j = items * i / n; j < items * (i + 1) / n; j++) {
        const int64_t m = j / Hv, h = j % Hv, kh = h / per_key;
        const int64_t hf = g->to_grouped == NULL ? h : g->to_grouped[h];
        const float *row = w->proj + m * N, *gb = w->gb + m * 2 * Hv;
        float *S = g->states + (st->slot[m] * Hv + h) * size;
        const int64_t at = st->save_at == NULL ? -1 : st->save_at[m];
        float *saved = at < 0 ? NULL : g->states + (st->save_slot[m] * Hv + h) * size;
        float qn[GDN_MAX_DIM], kn[GDN_MAX_DIM], kv[GDN_MAX_DIM];
        if (at == 0) memcpy(saved, S, sizeof(float) * (size_t)size);
        normalized(row + kh * Dk, Dk, q_scale, qn);
        normalized(row + Hk * Dk + kh * Dk, Dk, 1.0f, kn);
        delta_token(S, qn, kn, row + 2 * Hk * Dk + hf * Dv, expf(gb[hf]), gb[Hv + hf],
                    w->mixed + m * VD + hf * Dv, kv, Dk, Dv);
        if (at == 1) memcpy(saved, S, sizeof(float) * (size_t)size);
    }
#pragma omp barrier
    for (int64_t m = m0; m < m1; m++) {
        for (int64_t h = 0; h < Hv; h++) { /* RMSNorm per head, times silu(z) */
            float *o = w->mixed + m * VD + h * Dv;
            const float *z = w->proj + m * N + C + h * Dv;
            float sum = 0.0f;
            for (int64_t d = 0; d < Dv; d++) sum += o[d] * o[d];
            const float inv = 1.0f / sqrtf(sum / (float)Dv + eps);
            for (int64_t d = 0; d < Dv; d++) o[d] = o[d] * inv * g->norm[d] * silu(z[d]);
        }
    }
    quantize_for(&g->out, w->mixed, codes, m0, m1);
#pragma omp barrier
    matmul_for(&g->out, out, codes, M, i, n);
#pragma omp barrier
}

#endif
