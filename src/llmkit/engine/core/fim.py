"""Fill in the middle: a code model's FIM tokens, found by their text in its vocabulary (as
llama.cpp finds them in a GGUF file's), and the prompt llama-server's ``/infill`` builds of
them: the other files of the repository first, then ``<PRE> prefix <SUF> suffix <MID>``, after
which the model writes the middle. No torch."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

# Each token's texts in the vocabularies of the code models people run (llama.cpp's list:
# Qwen, StarCoder and Granite, DeepSeek, CodeLlama, GLM-4.5, Falcon-H1 coder, ...).
FIM_TEXTS: dict[str, tuple[str, ...]] = {
    "fim_pre": ("<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>",
                "<\uff5cfim\u2581begin\uff5c>", "<PRE>",
                "\u2581<PRE>", "<|code_prefix|>", "<|prefix|>"),
    "fim_suf": ("<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>",
                "<\uff5cfim\u2581hole\uff5c>", "<SUF>",
                "\u2581<SUF>", "<|code_suffix|>", "<|suffix|>"),
    "fim_mid": ("<|fim_middle|>", "<fim-middle>", "<fim_middle>",
                "<\uff5cfim\u2581end\uff5c>", "<MID>",
                "\u2581<MID>", "<|code_middle|>", "<|middle|>"),
    "fim_pad": ("<|fim_pad|>", "<fim-pad>", "<fim_pad>"),
    "fim_rep": ("<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"),
    "fim_sep": ("<|file_sep|>", "<file_sep>", "<file-sep>"),
}  # fmt: skip
REQUIRED = ("fim_pre", "fim_suf", "fim_mid")
# Without a file separator, llama-server puts this between the repository's chunks.
_CHUNK_BREAK = "\n\n--- snippet ---\n\n"
_PROJECT = "myproject\n"
_FILE = "filename\n"  # the file being completed: llama-server names it so
_BATCH = 2048  # llama-server's default batch, which the prefix and suffix must fit


@dataclass(frozen=True)
class FimTokens:
    """The FIM tokens a vocabulary holds, by name (``fim_pre``, ...)."""

    ids: dict[str, int]

    @classmethod
    def find(cls, vocab: dict[str, int]) -> FimTokens:
        found = {}
        for name, texts in FIM_TEXTS.items():
            token = next((vocab[t] for t in texts if t in vocab), None)
            if token is not None:
                found[name] = token
        return cls(found)

    @classmethod
    def among(cls, texts: Iterable[str]) -> FimTokens:
        """Those among tokens of ``texts`` (a file's token list; their ids unknown: 0)."""
        return cls.find(dict.fromkeys(texts, 0))

    @property
    def missing(self) -> list[str]:
        """The tokens an infill needs that the vocabulary lacks (none: it can infill)."""
        return [name for name in REQUIRED if name not in self.ids]


def infill_prompt(
    fim: FimTokens,
    encode: Callable[[str], list[int]],
    prefix: list[int],
    suffix: list[int],
    extra: Sequence[tuple[str, str]] = (),
    prompt: Sequence[int] = (),
    bos: int | None = None,
    room: int = 1 << 30,
) -> list[int]:
    """The token ids of an infill, in llama-server's layout (a repository-level FIM prompt,
    Qwen2.5-Coder's): ``[REP]myproject``, then each ``extra`` file as ``[SEP]name`` and its
    text, ``[SEP]filename``, ``[PRE]`` prefix and ``prompt``, ``[SUF]`` suffix, ``[MID]``.

    ``room``: the most tokens the prompt may take. As llama-server does, the prefix keeps its
    last three quarters of a batch (2048 tokens, or the room), the suffix its first quarter
    less the prompt and the FIM tokens, and the repository's files the end of what is left.
    """
    ids = fim.ids
    start = [] if bos is None else [bos]
    batch = min(_BATCH, room - len(start))
    prefix = prefix[len(prefix) - min(len(prefix), 3 * batch // 4) :]
    suffix = suffix[: max(0, batch // 4 - 3 - len(prompt))]
    repo: list[int] = []
    named: list[int] = []  # the file being completed, which the repository's end names
    if "fim_rep" in ids:
        repo += [ids["fim_rep"], *encode(_PROJECT)]
    for filename, text in extra:
        head = [ids["fim_sep"], *encode(filename + "\n")] if "fim_sep" in ids else []
        repo += head or encode(_CHUNK_BREAK)
        repo += encode(text)
    if "fim_sep" in ids:
        named = [ids["fim_sep"], *encode(_FILE)]
        repo += named
    body = [ids["fim_pre"], *prefix, *prompt, ids["fim_suf"], *suffix, ids["fim_mid"]]
    keep = max(0, room - len(start) - len(body))
    if keep < len(named):  # the files' ends without the name of the one they lead to
        keep = 0
    return start + repo[len(repo) - min(len(repo), keep) :] + body
