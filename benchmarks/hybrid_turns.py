"""A conversation's turns on a hybrid model (Gated DeltaNet layers with a recurrent state):
each turn's time to first token, llmkit's server against llama-server on the same GGUF file.

    python benchmarks/hybrid_turns.py --llama-cpp LLAMA_CPP_SRC --file FILE.gguf \
        [--turns 4] [--first 1500] [--each 300] [--threads 2] [--repeat 2]

Both servers listen on 127.0.0.1 in turn (never together, on the same cores) and get the
same conversation over OpenAI's chat API, streamed: a first user message of ``--first``
tokens' worth of words, then ``--turns - 1`` more of ``--each``, each after the previous
answer (16 greedy tokens; the history gets the same fixed answer of that length on both
sides, as a replayed conversation). A turn's time to first token is what its client
waits for the first streamed token. llama-server runs with its defaults (``-c 8192 -t
THREADS``: its prompt cache and the context checkpoints it keeps of a recurrent state),
llmkit with ``llmkit serve FILE --max-model-len 8192`` (prefix caching on, its state
checkpoints). Each side runs the whole conversation ``--repeat`` times from a fresh server;
the best time per turn is kept. Prints a table per turn and the ratio llama.cpp / llmkit.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

WORDS = "the engine serves a batch of prompts while the cache keeps every block".split()
ANSWER_TOKENS = 16


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def server(argv: list[str], port: int) -> Iterator[str]:
    """A server process on ``port`` until the block ends; yields its base URL once ready."""
    log = Path(f"/tmp/hybrid_turns-{Path(argv[0]).name}-{port}.log")
    proc = subprocess.Popen(argv, stdout=log.open("w"), stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"{argv[0]} exited with {proc.returncode}")
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        _warm_up(url)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def _warm_up(url: str) -> None:
    """One short chat, retried while the server is still coming up: a server may answer
    /health before its first request is served (llama-server's did, and then dropped it)."""
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}
    for _ in range(60):
        if _served(url, body):
            return
        time.sleep(1)
    raise RuntimeError(f"{url} serves no chat")


def _served(url: str, body: dict) -> bool:
    try:
        return httpx.post(f"{url}/v1/chat/completions", json=body, timeout=60).is_success
    except httpx.HTTPError:
        return False


def _text(words: int, offset: int) -> str:
    return " ".join(WORDS[(offset + i) % len(WORDS)] for i in range(words))


def conversation(url: str, turns: int, first: int, each: int) -> list[float]:
    """Each turn's time to first token, in seconds."""
    messages: list[dict[str, str]] = []
    times = []
    # The demo tokenizer takes ~1.75 tokens a word of WORDS.
    sizes = [first] + [each] * (turns - 1)
    with httpx.Client(timeout=600) as client:
        for turn, size in enumerate(sizes):
            messages.append({"role": "user", "content": _text(int(size / 1.75), turn)})
            body = {
                "model": "m",
                "messages": messages,
                "max_tokens": ANSWER_TOKENS,
                "temperature": 0.0,
                "stream": True,
            }
            start, first_at = time.perf_counter(), None
            with client.stream("POST", f"{url}/v1/chat/completions", json=body) as response:
                response.raise_for_status()
                for line in response.iter_lines():
                    if not line.startswith("data: ") or line == "data: [DONE]":
                        continue
                    delta = json.loads(line[6:])["choices"][0]["delta"].get("content") or ""
                    if delta and first_at is None:
                        first_at = time.perf_counter()
            times.append((first_at or time.perf_counter()) - start)
            # The history takes a fixed answer, the same on both sides: a random model's own
            # text differs between them and re-tokenizes to other lengths, which would make
            # the next turns' prompts unequal.
            messages.append({"role": "assistant", "content": _text(ANSWER_TOKENS * 4 // 7, 99)})
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--llama-cpp", required=True, type=Path)
    parser.add_argument("--file", required=True, type=Path)
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--first", type=int, default=1500)
    parser.add_argument("--each", type=int, default=300)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    sides = {
        "llama.cpp": lambda port: [
            str(args.llama_cpp / "build/bin/llama-server"),
            *("-m", str(args.file), "-c", "8192", "-t", str(args.threads)),
            *("--host", "127.0.0.1", "--port", str(port)),
        ],
        "llmkit": lambda port: [
            sys.executable,
            *("-m", "llmkit.cli", "serve", str(args.file), "--max-model-len", "8192"),
            *("--served-model-name", "m"),
            *("--host", "127.0.0.1", "--port", str(port)),
        ],
    }
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    best: dict[str, list[float]] = {}
    for _ in range(args.repeat):  # the sides alternate
        for name, argv in sides.items():
            port = _free_port()
            with server(argv(port), port) as url:
                times = conversation(url, args.turns, args.first, args.each)
            best[name] = [min(a, b) for a, b in zip(best.get(name, times), times)]
            print(name, " ".join(f"{t:.2f}" for t in times), flush=True)
    print("\n| turn | llama-server TTFT (s) | llmkit TTFT (s) | llama.cpp / llmkit |")
    print("|---|---|---|---|")
    for turn, (theirs, ours) in enumerate(zip(best["llama.cpp"], best["llmkit"]), start=1):
        print(f"| {turn} | {theirs:.2f} | {ours:.2f} | {theirs / ours:.2f}x |")


if __name__ == "__main__":
    main()
