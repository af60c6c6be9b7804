"""Image URLs of chat messages -> PIL images. ``data:`` URLs always; ``http(s)`` only from the
allowed domains and ``file:`` only under the allowed directory: closed by default, as
fetching any URL a client names lets it reach internal hosts (SSRF) and local files."""

from __future__ import annotations

import base64
import binascii
import io
import os
from typing import Any
from urllib.parse import unquote, urlsplit

from llmkit.protocol.openai import ChatMessage
from llmkit.serving.context import ServingContext
from llmkit.serving.errors import OpenAIError, bad_request
from llmkit.serving.options import ServingOptions

_FORMATS = ("PNG", "JPEG", "WEBP")


def image_parts(messages: list[ChatMessage]) -> list[tuple[str, str]]:
    """(where, url) of every ``image_url`` content part, in order."""
    found = []
    for i, message in enumerate(messages):
        if not isinstance(message.content, list):
            continue
        for j, part in enumerate(message.content):
            if part.type == "image_url":
                where = f"messages.{i}.content.{j}.image_url"
                if part.image_url is None:
                    raise bad_request(f"{where} is required for a part of type 'image_url'")
                found.append((where, part.image_url.url))
    return found


async def chat_images(ctx: ServingContext, messages: list[ChatMessage]) -> list[Any]:
    """The images of ``messages``, loaded and decoded; a 400 naming the part that fails."""
    parts = image_parts(messages)
    if not parts:
        return []
    info = ctx.engine.model_info
    if not info.supports_images:
        raise bad_request(
            f"{parts[0][0]}: the model `{ctx.model_name}` is text-only and takes no images",
            "messages",
        )
    # Before any image is fetched or decoded.
    why = info.too_many_images(len(parts))
    if why is not None:
        raise bad_request(why, "messages")
    return [decode(where, await load(ctx.options, where, url)) for where, url in parts]


async def load(options: ServingOptions, where: str, url: str) -> bytes:
    scheme = urlsplit(url).scheme.lower()
    if scheme == "data":
        data = _data_url(where, url)
    elif scheme in ("http", "https"):
        data = await _fetch(options, where, url)
    elif scheme == "file":
        data = _read_file(options, where, url)
    else:
        raise _refused(where, f"URLs of scheme {scheme!r} are not supported")
    if len(data) > options.max_media_bytes:
        raise _refused(where, f"the image is larger than {options.max_media_bytes} bytes")
    return data


def decode(where: str, data: bytes) -> Any:
    from PIL import Image, UnidentifiedImageError

    try:
        image = Image.open(io.BytesIO(data))
        image.load()
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError) as exc:
        raise _refused(where, f"cannot be read as a PNG, JPEG or WebP image: {exc}") from None
    if image.format not in _FORMATS:
        raise _refused(where, f"{image.format} images are not supported (PNG, JPEG or WebP)")
    return image


def _data_url(where: str, url: str) -> bytes:
    header, comma, payload = url[len("data:") :].partition(",")
    if not comma or not header.endswith(";base64") or not header.startswith("image/"):
        raise _refused(where, "a data: URL must be data:image/<type>;base64,<data>")
    try:
        return base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise _refused(where, f"the data: URL is not valid base64: {exc}") from None


async def _fetch(options: ServingOptions, where: str, url: str) -> bytes:
    import httpx

    host = urlsplit(url).hostname or ""
    if host.lower() not in {d.lower() for d in options.allowed_media_domains}:
        raise _refused(
            where,
            f"http(s) image URLs are refused unless the server allows their domain "
            f"(--allowed-media-domains); {host!r} is not allowed",
        )
    limit = options.max_media_bytes
    try:
        # Redirects are not followed: one could lead to a host that is not allowed.
        async with (
            httpx.AsyncClient(timeout=options.media_fetch_timeout_s) as client,
            client.stream("GET", url) as response,
        ):
            if response.status_code != 200:
                raise _refused(where, f"fetching the image got HTTP {response.status_code}")
            declared = response.headers.get("content-length")
            if declared is not None and declared.isdigit() and int(declared) > limit:
                raise _refused(where, f"the image is larger than {limit} bytes")
            data = bytearray()
            async for chunk in response.aiter_bytes():
                data += chunk
                if len(data) > limit:
                    raise _refused(where, f"the image is larger than {limit} bytes")
    except httpx.HTTPError as exc:
        raise _refused(where, f"fetching the image failed: {type(exc).__name__}") from None
    return bytes(data)


def _read_file(options: ServingOptions, where: str, url: str) -> bytes:
    root = options.allowed_local_media_path
    if root is None:
        raise _refused(
            where,
            "file: image URLs are refused unless the server allows a local media directory "
            "(--allowed-local-media-path)",
        )
    base = os.path.realpath(root)
    path = os.path.realpath(unquote(urlsplit(url).path))
    if os.path.commonpath([base, path]) != base:
        raise _refused(where, "the file is outside the allowed local media directory")
    try:
        with open(path, "rb") as file:
            return file.read(options.max_media_bytes + 1)
    except OSError as exc:
        raise _refused(where, f"cannot read the file: {exc.strerror or exc}") from None


def _refused(where: str, why: str) -> OpenAIError:
    return bad_request(f"{where}: {why}", "messages")
