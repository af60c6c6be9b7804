"""N-gram speculative decoding on SmolLM2 (CPU): tok/s and forward passes per token, with
and without, on an input-echo workload (edit a given passage) and open-ended chat.

    python benchmarks/speculative.py [--model smollm2] [--max-tokens 96] [--k 4] \
        [--disable-by-batch-size N]

Each workload runs single-stream (one request at a time) and 8-stream (eight at once),
greedy, on one engine without speculation and one with, in the same process; the greedy
outputs are checked to be identical. "Forwards/token" is engine steps per output token.
"""

from __future__ import annotations

import argparse
import time

from llmkit import LLM, SamplingParams

PASSAGES = [
    "def area(width, height):\n    result = width * height\n    return result\n\n"
    "def perimeter(width, height):\n    result = 2 * (width + height)\n    return result\n",
    "The river runs past the old mill, under the stone bridge and into the lake. "
    "Children swim there in summer, and in winter the lake freezes over.",
    "import os\n\nfor name in os.listdir('.'):\n    if name.endswith('.txt'):\n"
    "        print(name, os.path.getsize(name))\n",
    "Our meeting is on Tuesday at ten in room four. Please bring the budget report, "
    "the hiring plan and your questions about the new office.",
]
EDITS = [
    "Rename the variable result to value in this code and show the whole code:\n\n",
    "Rewrite this paragraph, changing summer to spring:\n\n",
    "Repeat this code exactly, but use print(name) only:\n\n",
    "Copy this note, replacing Tuesday with Friday:\n\n",
]
CHAT = [
    "Tell me about the history of tea.",
    "What are some good habits for learning to program?",
    "Describe a walk through a forest in autumn.",
    "Why is the sky blue?",
]


def conversations(kind: str, count: int) -> list[list[dict[str, str]]]:
    if kind == "echo":
        texts = [EDITS[i % 4] + PASSAGES[i % 4] for i in range(count)]
    else:
        texts = [CHAT[i % 4] + ("" if i < 4 else " Be brief.") for i in range(count)]
    return [[{"role": "user", "content": t}] for t in texts]


def run(
    llm: LLM, convs: list, streams: int, params: SamplingParams
) -> tuple[float, int, int, list]:
    """(seconds, output tokens, engine steps, outputs) for ``convs`` ``streams`` at a time."""
    steps0 = llm._core.stats().steps
    start = time.perf_counter()
    outs = []
    for i in range(0, len(convs), streams):
        outs += llm.chat(convs[i : i + streams], params, use_tqdm=False)
    seconds = time.perf_counter() - start
    tokens = sum(len(o.outputs[0].token_ids) for o in outs)
    return seconds, tokens, llm._core.stats().steps - steps0, outs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--disable-by-batch-size", type=int, help="vLLM's speculative setting")
    args = ap.parse_args()
    spec = {
        "method": "ngram",
        "num_speculative_tokens": args.k,
        "prompt_lookup_max": 4,
        "prompt_lookup_min": 2,
        "disable_by_batch_size": args.disable_by_batch_size,
    }
    plain = LLM(args.model, max_model_len=1024)
    fast = LLM(args.model, max_model_len=1024, speculative_config=spec)
    params = SamplingParams(temperature=0, max_tokens=args.max_tokens)
    warm = conversations("chat", 1)
    run(plain, warm, 1, params), run(fast, warm, 1, params)
    print(
        "| workload | streams | plain tok/s | spec tok/s | speedup | forwards/token plain -> spec "
        "| accepted / proposed |"
    )
    print("|---|---:|---:|---:|---:|---|---:|")
    for kind in ("echo", "chat"):
        for streams, count in ((1, 4), (8, 8)):
            convs = conversations(kind, count)
            s0, t0, f0, o0 = run(plain, convs, streams, params)
            before = fast._core.stats()
            s1, t1, f1, o1 = run(fast, convs, streams, params)
            after = fast._core.stats()
            same = [a.outputs[0].token_ids for a in o0] == [b.outputs[0].token_ids for b in o1]
            proposed = after.spec_num_draft_tokens - before.spec_num_draft_tokens
            accepted = after.spec_num_accepted_tokens - before.spec_num_accepted_tokens
            print(
                f"| {kind} | {streams} | {t0 / s0:.1f} | {t1 / s1:.1f} | "
                f"{(t1 / s1) / (t0 / s0):.2f}x | {f0 / t0:.2f} -> {f1 / t1:.2f} | "
                f"{accepted} / {proposed} ({accepted / max(proposed, 1):.0%})"
                + ("" if same else " OUTPUTS DIFFER")
            )


if __name__ == "__main__":
    main()
