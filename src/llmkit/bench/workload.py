"""The benchmarks' workloads (prompts of random words, random token-id jobs), their flags,
and a line naming the machine."""

from __future__ import annotations

import argparse
import os
import platform
import random
from dataclasses import dataclass

_WORDS = (
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "a",
    "lazy",
    "dog",
    "while",
    "river",
    "light",
    "music",
    "story",
    "garden",
    "window",
    "coffee",
    "morning",
    "evening",
    "city",
    "night",
    "model",
    "token",
    "engine",
    "serve",
    "batch",
    "cache",
    "block",
    "request",
)


@dataclass(frozen=True)
class Workload:
    """Prompts of ``input_words`` random words, each asking for ``output_len`` tokens."""

    input_words: int = 24
    output_len: int = 128
    seed: int = 0

    def prompts(self, count: int) -> list[str]:
        rng = random.Random(self.seed)
        return [" ".join(rng.choices(_WORDS, k=self.input_words)) for _ in range(count)]


Jobs = list[tuple[list[int], int]]


def token_jobs(
    count: int,
    vocab: int,
    prompt_len: tuple[int, int],
    output_len: tuple[int, int] | None = None,
    seed: int = 0,
) -> Jobs:
    """``count`` (prompt token ids, output length) pairs: ids drawn from 10 up (past the
    special tokens), lengths uniform in the inclusive ranges; output length 0 without one."""
    rng = random.Random(seed)
    jobs = []
    for _ in range(count):
        prompt = [rng.randrange(10, vocab) for _ in range(rng.randint(*prompt_len))]
        jobs.append((prompt, rng.randint(*output_len) if output_len else 0))
    return jobs


def machine() -> str:
    return f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"


def add_stream_flags(parser: argparse.ArgumentParser) -> None:
    """The flags of the benchmarks that stream a Workload at several concurrency levels."""
    parser.add_argument(
        "--model",
        default="demo",
        help="a model directory, a GGUF file, 'smollm2' or 'demo'",
    )
    parser.add_argument(
        "--concurrency", type=int, nargs="+", default=[1, 16, 64], help="streams at once"
    )
    parser.add_argument("--rounds", type=int, default=2, help="requests per stream, in turn")
    parser.add_argument("--repeat", type=int, default=3, help="runs per level and side")
    parser.add_argument("--input-words", type=int, default=24, help="words per prompt")
    parser.add_argument("--output-len", type=int, default=128, help="tokens per completion")


def workload_of(args: argparse.Namespace) -> Workload:
    """The Workload that add_stream_flags' flags describe."""
    return Workload(input_words=args.input_words, output_len=args.output_len)
