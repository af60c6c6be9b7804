/* The gated delta rule of Gated DeltaNet layers (Qwen3.5, Qwen3-Next) over a step's tokens, for CPU.
 *
 * Each sequence of the step owns rows starts[b] .. starts[b+1]-1 and a state slot: per value
 * head a float32 matrix S[Dk][Dv] that it reads as its start and leaves as its end. Per token,
 * with q and k L2-normalized (q also scaled by Dk^-1/2):
 *
 *   S *= exp(g);  kv = k^T S;  delta = (v - kv) * beta;  S += k delta^T;  out = q^T S
 *
 * in two passes over S (decay with k^T S; update with q^T S), S staying in the core's cache
 * (64 KiB at Dk = Dv = 128). The same loop serves decode (one row a sequence) and prefill: a
 * chunked form would turn the prefill's work into matmuls, but here it is ~6% of a prefill
 * (64 ms a layer for 1536 tokens at Hv = 16, Dk = Dv = 128, 2 threads, against ~10 s for the
 * prompt on benchmarks/RESULTS.md's 1B hybrid), whose time goes to the projections.
 * Value head h reads key head h / (Hv / Hk), as HF groups them. A checkpoint copies a
 * sequence's state after save_at[b] of its tokens into slot save_slot[b].
 * (sequence, value head) pairs are split over n_threads OpenMP threads (torch's own pool:
 * see build.py). Built and loaded by model/layers/gated_delta_cpu.py.
 */
#include <string.h>

#include "delta_rule.h"

#define MAX_DIM 512

int gated_delta_f32(const float *q, const float *k, const float *v, const float *g,
                    const float *beta, float *states, const int64_t *slots, const int64_t *starts,
                    const int64_t *save_at, const int64_t *save_slot, float *out,
                    int64_t num_seqs, int64_t Hk, int64_t Hv, int64_t Dk, int64_t Dv,
                    int64_t q_stride, int64_t k_stride, int64_t v_stride, int64_t n_threads) {
    if (Dk > MAX_DIM || Dv > MAX_DIM || Hv % Hk) return -1;
    const int64_t per_key = Hv / Hk, size = Dk * Dv;
    const float q_scale = 1.0f / sqrtf((float)Dk);
#pragma omp parallel for schedule(dynamic, 1) num_threads(n_threads)
    for (int64_t item = 0; item < num_seqs * Hv; item++) {
        const int64_t b = item / Hv, h = item % Hv, kh = h / per_key;
        float *S = states + (slots[b] * Hv + h) * size;
        float qn[MAX_DIM], kn[MAX_DIM], kv[MAX_DIM], o[MAX_DIM];
        const int64_t first = starts[b], last = starts[b + 1];
        const int64_t at = save_at == NULL ? -1 : save_at[b];
        for (int64_t t = first; t < last; t++) {
            if (t - first == at) memcpy(states + (save_slot[b] * Hv + h) * size, S, size * 4);
            normalized(q + t * q_stride + kh * Dk, Dk, q_scale, qn);
            normalized(k + t * k_stride + kh * Dk, Dk, 1.0f, kn);
            const float *vt = v + t * v_stride + h * Dv;
            delta_token(S, qn, kn, vt, expf(g[t * Hv + h]), beta[t * Hv + h], o, kv, Dk, Dv);
            memcpy(out + (t * Hv + h) * Dv, o, Dv * 4);
        }
        if (last - first == at) memcpy(states + (save_slot[b] * Hv + h) * size, S, size * 4);
    }
    return 0;
}
