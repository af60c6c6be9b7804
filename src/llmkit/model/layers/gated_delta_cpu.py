"""TEMPORARY reference (replaced by the helper's kernel module on merge)."""

from __future__ import annotations

import torch


def gated_delta(q, k, v, g, beta, states, slots, starts, save_at=None, save_slot=None):
    starts_host = starts.tolist() if isinstance(starts, torch.Tensor) else list(starts)
    hk, hv = q.shape[1], v.shape[1]
    r = hv // hk
    out = torch.empty(v.shape, dtype=torch.float32, device=v.device)
    qn = q * torch.rsqrt((q * q).sum(-1, keepdim=True) + 1e-6) * q.shape[-1] ** -0.5
    kn = k * torch.rsqrt((k * k).sum(-1, keepdim=True) + 1e-6)
    qn, kn = qn.repeat_interleave(r, dim=1), kn.repeat_interleave(r, dim=1)
    for b, slot in enumerate(slots.tolist()):
        s = states[slot].clone()
        at = -1 if save_at is None else int(save_at[b])
        first, last = starts_host[b], starts_host[b + 1]
        for t in range(first, last):
            if t - first == at:
                states[int(save_slot[b])] = s
            s = s * g[t].exp()[:, None, None]
            kv = (s * kn[t][:, :, None]).sum(1)
            delta = (v[t] - kv) * beta[t][:, None]
            s = s + kn[t][:, :, None] * delta[:, None, :]
            out[t] = (s * qn[t][:, :, None]).sum(1)
        if last - first == at:
            states[int(save_slot[b])] = s
        states[slot] = s
    return out
