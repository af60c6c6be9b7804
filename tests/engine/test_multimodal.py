"""Images in prompts (LLaVA): greedy tokens equal HF transformers' token for token, however
the step splits them, and the prefix cache keys image blocks by the image."""

from __future__ import annotations

import io

import pytest
import torch
import transformers
from PIL import Image

from llmkit import LLM, SamplingParams

MAX_TOKENS = 10
GREEDY = SamplingParams(temperature=0.0, max_tokens=MAX_TOKENS, ignore_eos=True)
ONE = "<|user|>\n<image>\nWhat is in this image?</s>\n<|assistant|>\n"
TWO = "<|user|>\n<image>\nand <image>\nWhich of the two is brighter?</s>\n<|assistant|>\n"
TEXT = "<|user|>\nTell me about the river and the mountain.</s>\n<|assistant|>\n"


def image(i: int, size: tuple[int, int] = (56, 40)) -> Image.Image:
    """A distinct picture per ``i``: a base colour with stripes of another."""
    img = Image.new("RGB", size, ((i * 97) % 256, (i * 53 + 80) % 256, (i * 31 + 160) % 256))
    for y in range(0, size[1], i % 5 + 2):
        for x in range(size[0]):
            img.putpixel((x, y), ((i * 41) % 256, 255 - (i * 67) % 256, 128))
    return img


@pytest.fixture(scope="module")
def hf(llava_model):
    model = transformers.LlavaForConditionalGeneration.from_pretrained(
        llava_model, dtype=torch.float32
    ).eval()
    model.generation_config.eos_token_id = None  # like ignore_eos
    return model, transformers.AutoProcessor.from_pretrained(llava_model)


def hf_greedy(hf, text: str, images: list[Image.Image]) -> list[int]:
    model, processor = hf
    if images:
        inputs = processor(images=images, text=text, return_tensors="pt")
    else:
        inputs = processor.tokenizer(text, return_tensors="pt")
    out = model.generate(**inputs, max_new_tokens=MAX_TOKENS, do_sample=False, pad_token_id=0)
    return out[0, inputs["input_ids"].shape[1] :].tolist()


def prompt(text: str, images: list[Image.Image]) -> dict:
    return {"prompt": text, "multi_modal_data": {"image": images}} if images else {"prompt": text}


CASES = [(ONE, [image(1)]), (TEXT, []), (TWO, [image(2), image(3)]), (ONE, [image(4)])]


@pytest.fixture(scope="module")
def expected(hf):
    return [hf_greedy(hf, text, images) for text, images in CASES]


def tokens(outputs) -> list[list[int]]:
    return [o.outputs[0].token_ids for o in outputs]


@pytest.mark.parametrize(
    "settings",
    [
        {},
        # 20-token chunks split every image's 36 placeholders over two or three steps.
        {"max_num_batched_tokens": 20},
        # A pool this small preempts requests midway through their images.
        {"max_num_batched_tokens": 24, "num_kv_blocks": 16, "block_size": 8},
    ],
    ids=["one-step", "chunked", "preempted"],
)
def test_images_and_text_batched_match_hf(llava_model, expected, settings):
    llm = LLM(llava_model, max_model_len=256, limit_mm_per_prompt={"image": 2}, **settings)
    outputs = llm.generate([prompt(t, i) for t, i in CASES], GREEDY, use_tqdm=False)
    assert tokens(outputs) == expected
    assert len(set(map(tuple, expected))) > 2  # the images decide the tokens
    assert len(llm._core.encoder) == 0  # every image's embeddings freed
    if "num_kv_blocks" in settings:
        assert llm.stats().num_preemptions > 0


def test_first_token_logprobs_match_hf(llava_model, hf):
    """Beyond the argmax: the image's embeddings land where HF puts them, to float32 rounding."""
    model, processor = hf
    llm = LLM(llava_model, max_model_len=256)
    params = SamplingParams(temperature=0.0, max_tokens=1, logprobs=5)
    out = llm.generate(prompt(ONE, [image(5)]), params, use_tqdm=False)[0]
    inputs = processor(images=[image(5)], text=ONE, return_tensors="pt")
    with torch.no_grad():
        ref = torch.log_softmax(model(**inputs).logits[0, -1].float(), dim=-1)
    assert out.prompt_token_ids == inputs["input_ids"][0].tolist()
    top = ref.topk(5)
    for tid, val in zip(top.indices.tolist(), top.values.tolist()):
        assert out.outputs[0].logprobs[0][tid].logprob == pytest.approx(val, abs=1e-4)


def test_prefix_cache_keys_image_blocks_by_content(llava_model, hf):
    llm = LLM(llava_model, max_model_len=256, block_size=8)
    first = llm.generate(prompt(ONE, [image(6)]), GREEDY, use_tqdm=False)[0]
    other = llm.generate(prompt(ONE, [image(7)]), GREEDY, use_tqdm=False)[0]
    same = llm.generate(prompt(ONE, [image(6)]), GREEDY, use_tqdm=False)[0]
    image_start = first.prompt_token_ids.index(llm.model_info.image_token_id)
    # The different image shares only the text blocks before it; the same image, all.
    assert other.num_cached_tokens == image_start // 8 * 8
    assert same.num_cached_tokens > image_start + 36
    assert first.outputs[0].token_ids != other.outputs[0].token_ids
    assert same.outputs[0].token_ids == first.outputs[0].token_ids
    assert same.outputs[0].token_ids == hf_greedy(hf, ONE, [image(6)])
    # The same picture in another encoding is the same pixels, so the same blocks.
    png = io.BytesIO()
    image(6).save(png, format="PNG")
    reread = llm.generate(prompt(ONE, [Image.open(png)]), GREEDY, use_tqdm=False)[0]
    assert reread.num_cached_tokens == same.num_cached_tokens


def test_bad_image_input_is_refused_before_queueing(llava_model, tiny_model):
    llm = LLM(llava_model, max_model_len=256)
    corrupt = io.BytesIO()
    image(1).save(corrupt, format="PNG")
    corrupt = Image.open(io.BytesIO(corrupt.getvalue()[:60]))
    cases = [
        # As many images as the context holds (vLLM's default), counted before any is read.
        (prompt(ONE, ["not an image"] * 8), "8 images take 288 tokens (36 each), more than"),
        (prompt(TWO, [image(1)]), "2 image placeholder(s) for 1 image(s)"),
        (prompt(TEXT, [image(1)]), "0 image placeholder(s) for 1 image(s)"),
        ({"prompt": ONE}, "no image was given"),
        (prompt(ONE, ["not an image"]), "must be a PIL.Image.Image"),
        (prompt(ONE, [corrupt]), "cannot be read as an image"),
        ({"prompt": ONE, "multi_modal_data": {"audio": b""}}, "unsupported modality 'audio'"),
    ]
    for bad, message in cases:
        with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
            llm.generate([prompt(ONE, [image(1)]), bad], GREEDY, use_tqdm=False)
        assert llm.stats().num_waiting == 0 and llm.stats().num_running == 0
    tight = LLM(llava_model, max_model_len=40, limit_mm_per_prompt={"image": 1})
    with pytest.raises(ValueError, match="max_model_len"):
        tight.generate(prompt(ONE, [image(1)]), GREEDY, use_tqdm=False)
    with pytest.raises(ValueError, match="more than limit_mm_per_prompt allows"):
        tight.generate(prompt(TWO, [image(1), image(2)]), GREEDY, use_tqdm=False)
    text_only = LLM(tiny_model, max_model_len=256)
    with pytest.raises(ValueError, match="text-only"):
        text_only.generate(prompt("Hello", [image(1)]), GREEDY, use_tqdm=False)
    # The engine serves the next request, two images by default.
    assert llm.generate(prompt(TWO, [image(1), image(2)]), GREEDY, use_tqdm=False)[0].outputs


def test_torchvision_processor_config_loads_with_pil(llava_model, tmp_path):
    """A folder whose config names the torchvision-backed processor still loads (PIL backend)."""
    import json
    import shutil

    folder = shutil.copytree(llava_model, tmp_path / "llava-fast")
    config = json.loads((folder / "processor_config.json").read_text())
    config["image_processor"]["image_processor_type"] = "CLIPImageProcessorFast"
    (folder / "processor_config.json").write_text(json.dumps(config))
    (folder / "preprocessor_config.json").write_text(json.dumps(config["image_processor"]))
    llm = LLM(str(folder), max_model_len=256)
    out = llm.generate(prompt(ONE, [image(1)]), GREEDY, use_tqdm=False)[0]
    reference = LLM(llava_model, max_model_len=256)
    assert (
        out.outputs[0].token_ids
        == reference.generate(prompt(ONE, [image(1)]), GREEDY, use_tqdm=False)[0]
        .outputs[0]
        .token_ids
    )
