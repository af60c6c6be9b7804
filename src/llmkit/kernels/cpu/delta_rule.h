/* One token of the gated delta rule on one value head's state S[Dk][Dv] (gated_delta.c, and
 * the linear-attention layers of the fused decode step, llama_decode.c):
 *
 *   S *= exp(g);  kv = k^T S;  delta = (v - kv) * beta;  S += k delta^T;  out = q^T S
 *
 * in two passes over S (the decay with k^T S, the update with q^T S), q and k already
 * L2-normalized (normalized()). kv: scratch of Dv floats.
 */
#ifndef LLMKIT_DELTA_RULE_H
#define LLMKIT_DELTA_RULE_H

#include <math.h>
#include <stdint.h>

/* y = x * scale / sqrt(sum(x^2) + 1e-6): transformers' l2norm (FLA's), q's times Dk^-1/2. */
static inline void normalized(const float *x, int64_t n, float scale, float *y) {
    float sum = 0.0f;
    for (int64_t i = 0; i < n; i++) sum += x[i] * x[i];
    const float inv = scale / sqrtf(sum + 1e-6f);
    for (int64_t i = 0; i < n; i++) y[i] = x[i] * inv;
}

static inline void delta_token(float *S, const float *qn, const float *kn, const float *v,
                               float decay, float rate, float *out, float *kv, int64_t Dk,
                               int64_t Dv) {
    for (int64_t j = 0; j < Dv; j++) kv[j] = 0.0f;
    for (int64_t i = 0; i < Dk; i++) {
        float *row = S + i * Dv;
        const float ki = kn[i];
        for (int64_t j = 0; j < Dv; j++) {
            row[j] *= decay;
            kv[j] += row[j] * ki;
        }
    }
    for (int64_t j = 0; j < Dv; j++) {
        kv[j] = (v[j] - kv[j]) * rate; /* the delta */
        out[j] = 0.0f;
    }
    for (int64_t i = 0; i < Dk; i++) {
        float *row = S + i * Dv;
        const float ki = kn[i], qi = qn[i];
        for (int64_t j = 0; j < Dv; j++) {
            row[j] += ki * kv[j];
            out[j] += row[j] * qi;
        }
    }
}

#endif
