"""Images in chat over HTTP: data: URLs always, http(s) and file: URLs only where the server
allows them; the openai client gets the tokens LLM.generate gives for the same image. The
chat page offers attaching an image to a model that takes them, over /v1/ws."""

from __future__ import annotations

import base64
import http.server
import io
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest
from PIL import Image
from tests.transports.http.page_helpers import Frames, ask, chromium, expect, watch_reply

from llmkit import LLM, SamplingParams

PROMPT = "<s><|user|>\n<image>\nWhat is in this image?</s>\n<|assistant|>\n"
MAX_TOKENS = 8


def picture(i: int) -> Image.Image:
    img = Image.new("RGB", (60, 44), ((i * 97) % 256, (i * 53 + 80) % 256, 200))
    for y in range(0, 44, i % 4 + 2):
        for x in range(60):
            img.putpixel((x, y), (255 - (i * 41) % 256, 30, 128))
    return img


def encoded(img: Image.Image, fmt: str = "PNG") -> bytes:
    out = io.BytesIO()
    img.save(out, format=fmt)
    return out.getvalue()


def data_url(data: bytes, media_type: str = "image/png") -> str:
    return f"data:{media_type};base64,{base64.b64encode(data).decode()}"


def image_message(*urls: str, text: str = "What is in this image?") -> list[dict]:
    parts = [{"type": "image_url", "image_url": {"url": url}} for url in urls]
    return [{"role": "user", "content": [*parts, {"type": "text", "text": text}]}]


@pytest.fixture(scope="module")
def media_dir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("media")
    (folder / "one.png").write_bytes(encoded(picture(1)))
    (folder / "one.webp").write_bytes(encoded(picture(1), "WEBP"))
    return folder


@pytest.fixture(scope="module")
def image_host(media_dir) -> Iterator[str]:
    """A local HTTP server of the media folder, on 127.0.0.1 (the allowed domain)."""
    handler = lambda *a: http.server.SimpleHTTPRequestHandler(*a, directory=str(media_dir))  # noqa: E731
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


@pytest.fixture(scope="module")
def llava_server(module_server, llava_model, media_dir):
    return module_server(
        llava_model,
        "--max-model-len=256",
        "--limit-mm-per-prompt",
        json.dumps({"image": 2}),
        "--allowed-media-domains",
        "127.0.0.1",
        "--allowed-local-media-path",
        str(media_dir),
        "--return-tokens-as-token-ids",
        "--served-model-name=llava",
    )


@pytest.fixture(scope="module")
def client(llava_server) -> openai.OpenAI:
    return openai.OpenAI(base_url=llava_server.base_url, api_key="none", max_retries=0)


def chat_tokens(client: openai.OpenAI, messages: list[dict]) -> list[int]:
    reply = client.chat.completions.create(
        model="llava",
        messages=messages,
        max_tokens=MAX_TOKENS,
        temperature=0.0,
        logprobs=True,
        extra_body={"ignore_eos": True},
    )
    return [int(t.token.split(":")[1]) for t in reply.choices[0].logprobs.content]


def test_data_url_image_gives_llm_generate_tokens(client, llava_model, media_dir, image_host):
    png = encoded(picture(1))
    llm = LLM(llava_model, max_model_len=256)
    ids = llm.get_tokenizer().encode(PROMPT, add_special_tokens=False)
    params = SamplingParams(temperature=0.0, max_tokens=MAX_TOKENS, ignore_eos=True)
    image = Image.open(io.BytesIO(png))
    out = llm.generate({"prompt_token_ids": ids, "multi_modal_data": {"image": image}}, params)
    expected = out[0].outputs[0].token_ids
    assert chat_tokens(client, image_message(data_url(png))) == expected
    # The same file from the allowed host and the allowed folder: the same pixels.
    assert chat_tokens(client, image_message(f"{image_host}/one.png")) == expected
    assert chat_tokens(client, image_message((media_dir / "one.png").as_uri())) == expected
    other = chat_tokens(client, image_message(data_url(encoded(picture(4)))))
    assert other != expected


def test_bad_images_are_400s_and_the_server_serves_on(client, media_dir, image_host, tmp_path):
    outside = tmp_path / "secret.png"
    outside.write_bytes(encoded(picture(1)))
    png = data_url(encoded(picture(1)))
    cases = [
        (image_message("http://example.com/cat.png"), "--allowed-media-domains"),
        (image_message(f"{image_host}/missing.png"), "HTTP 404"),
        (image_message(outside.as_uri()), "outside the allowed local media directory"),
        (image_message(data_url(b"not an image at all")), "cannot be read as a PNG, JPEG"),
        (image_message(data_url(encoded(picture(1), "BMP"), "image/bmp")), "BMP images"),
        (image_message("data:text/plain,hello"), "data:image/<type>;base64"),
        (image_message(png, png, png), "more than limit_mm_per_prompt allows"),
        (image_message(png, text="and <image> too"), "2 image placeholder(s) for 1 image(s)"),
        (image_message("ftp://127.0.0.1/one.png"), "scheme 'ftp'"),
    ]
    for messages, message in cases:
        with pytest.raises(openai.BadRequestError) as info:
            chat_tokens(client, messages)
        error = info.value.body
        assert message in error["message"], error
        assert info.value.status_code == 400 and error["type"] == "invalid_request_error"
    assert len(chat_tokens(client, image_message((media_dir / "one.webp").as_uri()))) == MAX_TOKENS


def test_images_to_a_text_only_model_are_400s(module_server, tiny_model):
    server = module_server(tiny_model, "--max-model-len=256", "--served-model-name=tiny")
    text_client = openai.OpenAI(base_url=server.base_url, api_key="none", max_retries=0)
    with pytest.raises(openai.BadRequestError, match="text-only and takes no images"):
        text_client.chat.completions.create(
            model="tiny", messages=image_message(data_url(encoded(picture(1)))), max_tokens=2
        )
    reply = text_client.chat.completions.create(
        model="tiny", messages=[{"role": "user", "content": "Hello"}], max_tokens=2
    )
    assert reply.choices[0].message.content is not None
    assert text_client.models.list().data[0].input_modalities == ["text"]


@pytest.fixture(scope="module")
def browser():
    yield from chromium()


def test_the_chat_page_attaches_an_image(llava_server, client, media_dir, browser):
    assert client.models.list().data[0].input_modalities == ["text", "image"]
    page = browser.new_page()
    frames = Frames(page)
    page.goto(llava_server.url + "/")
    page.get_by_label("Attach image").set_input_files(media_dir / "one.png")
    expect(page.get_by_role("button", name="Remove image 1")).to_be_visible()
    ask(page, "What is in this image?", MAX_TOKENS)
    watch_reply(page)
    expect(page.get_by_role("status")).to_contain_text("Done:")
    expect(page.locator(".message.user img")).to_have_count(1)
    messages = frames.requests()[0]["body"]["messages"]
    url = data_url((media_dir / "one.png").read_bytes())
    assert messages[0]["content"][1] == {"type": "image_url", "image_url": {"url": url}}
    usage = [m for m in frames.received if m["type"] == "chunk"][-1]["data"]["usage"]
    page.close()
    # The image reached the model: the prompt counts its tokens, as over HTTP.
    over_http = client.chat.completions.create(model="llava", messages=messages, max_tokens=1)
    assert usage["prompt_tokens"] == over_http.usage.prompt_tokens
    text_only = [{"role": "user", "content": "What is in this image?"}]
    alone = client.chat.completions.create(model="llava", messages=text_only, max_tokens=1)
    assert usage["prompt_tokens"] > alone.usage.prompt_tokens
