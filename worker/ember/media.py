"""Sizes of images and documents, read from their headers, and the tokens they cost.

Anthropic counts an image by its pixels, never by the length of its base64 text:
about ``width * height / 750`` tokens, after scaling an image whose long edge is
over 1568 px or whose cost is over about 1,600 tokens down to fit, keeping its
aspect ratio (Images and vision,
https://platform.claude.com/docs/en/build-with-claude/vision). A PDF costs, per
page, the text extracted from it (the PDF support page gives 1,500 to 3,000 tokens
a page) plus the page as an image
(https://platform.claude.com/docs/en/build-with-claude/pdf-support); the simulator
counts 1,500 a page.

Where a figure is a range, the low end is taken: a simulator that undercounts
reports a miss the API would not (harmless), one that overcounts may call a prefix
cacheable that the API silently does not cache.

Only the header is parsed (PNG, JPEG, GIF, WebP), so a request never costs more than
one base64 decode per image.
"""

from __future__ import annotations

import base64
import binascii
import re
import struct
from collections.abc import Mapping
from typing import Any

IMAGE_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")
MAX_EDGE_PX = 8000  # a larger image is refused
RESIZE_LONG_EDGE_PX = 1568
RESIZE_MAX_TOKENS = 1600
PIXELS_PER_TOKEN = 750
# The low end of the documented 1,500-3,000 text tokens a page. The page's image cost
# is not added: its rendered size is not documented, and an undercount is the safe side.
PDF_TOKENS_PER_PAGE = 1500


class MediaError(ValueError):
    """An image or document the API would refuse, or one the simulator cannot size."""


def image_size(data: bytes) -> tuple[str, int, int]:
    """(media type, width, height) from the header of a PNG, JPEG, GIF or WebP."""
    if data.startswith(b"\x89PNG\r\n\x1a\n") and data[12:16] == b"IHDR":
        width, height = struct.unpack(">II", data[16:24])
        return "image/png", width, height
    if data[:6] in (b"GIF87a", b"GIF89a") and len(data) >= 10:
        width, height = struct.unpack("<HH", data[6:10])
        return "image/gif", width, height
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return ("image/webp", *_webp_size(data))
    if data[:2] == b"\xff\xd8":
        return ("image/jpeg", *_jpeg_size(data))
    raise MediaError("Could not process image: not a PNG, JPEG, GIF or WebP")


def _webp_size(data: bytes) -> tuple[int, int]:
    chunk = data[12:16]
    if chunk == b"VP8 " and len(data) >= 30 and data[23:26] == b"\x9d\x01\x2a":
        width, height = struct.unpack("<HH", data[26:30])
        return width & 0x3FFF, height & 0x3FFF
    if chunk == b"VP8L" and len(data) >= 25 and data[20] == 0x2F:
        bits = int.from_bytes(data[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8X" and len(data) >= 30:
        width = int.from_bytes(data[24:27], "little") + 1
        height = int.from_bytes(data[27:30], "little") + 1
        return width, height
    raise MediaError("Could not process image: unreadable WebP header")


# Start-of-frame markers carry the size; C4 (Huffman), C8 (reserved), CC (arithmetic) do not.
_SOF = {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}


def _jpeg_size(data: bytes) -> tuple[int, int]:
    i = 2
    while i + 4 <= len(data):
        if data[i] != 0xFF:
            break
        marker = data[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:  # no length
            i += 2
            continue
        length = int.from_bytes(data[i + 2 : i + 4], "big")
        if marker in _SOF and i + 9 <= len(data):
            height, width = struct.unpack(">HH", data[i + 5 : i + 9])
            return width, height
        if length < 2:
            break
        i += 2 + length
    raise MediaError("Could not process image: no JPEG frame header")


def image_tokens(width: int, height: int) -> int:
    """Tokens of an image of this size, after the documented scaling down."""
    if width <= 0 or height <= 0:
        raise MediaError("Could not process image: zero width or height")
    if width > MAX_EDGE_PX or height > MAX_EDGE_PX:
        raise MediaError(
            f"image dimensions exceed max allowed size: {MAX_EDGE_PX} pixels ({width}x{height})"
        )
    scale = min(
        1.0,
        RESIZE_LONG_EDGE_PX / max(width, height),
        (RESIZE_MAX_TOKENS * PIXELS_PER_TOKEN / (width * height)) ** 0.5,
    )
    w, h = int(width * scale), int(height * scale)
    return max(1, (w * h) // PIXELS_PER_TOKEN)


_PDF_PAGE = re.compile(rb"/Type\s*/Page(?![A-Za-z])")
_PDF_COUNT = re.compile(rb"/Type\s*/Pages\b[^>]*?/Count\s+(\d+)|/Count\s+(\d+)[^>]*?/Type\s*/Pages")


def pdf_pages(data: bytes) -> int:
    """Pages of a PDF: its page objects, else the page tree's /Count, else 1."""
    if not data.startswith(b"%PDF-"):
        raise MediaError("The PDF specified was not valid.")
    pages = len(_PDF_PAGE.findall(data))
    if pages == 0:
        counts = [int(a or b) for a, b in _PDF_COUNT.findall(data)]
        pages = max(counts, default=0)
    # Page objects inside compressed object streams are invisible to this scan: such a
    # PDF counts as one page, an undercount (the safe side) rather than a refusal.
    return max(pages, 1)


def _decode(source: Mapping[str, Any], where: str) -> bytes:
    data = source.get("data")
    if not isinstance(data, str):
        raise MediaError(f"{where}.source.data: Field required")
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise MediaError(f"{where}.source.data: invalid base64 data") from None


def image_block_tokens(block: Mapping[str, Any], where: str = "image") -> int:
    """Tokens of an ``image`` block with a base64 source; MediaError otherwise."""
    source = block.get("source")
    if not isinstance(source, Mapping) or source.get("type") != "base64":
        kind = source.get("type") if isinstance(source, Mapping) else None
        raise MediaError(
            f"{where}.source: image sources of type {kind!r} are not modelled by ember sim "
            "(it cannot read their size); send the image as base64"
        )
    media_type = source.get("media_type")
    if media_type not in IMAGE_TYPES:
        raise MediaError(f"{where}.source.media_type: must be one of {', '.join(IMAGE_TYPES)}")
    found, width, height = image_size(_decode(source, where))
    if found != media_type:
        raise MediaError(
            f"{where}: Image does not match the provided media type {media_type} "
            f"(the data is {found})"
        )
    return image_tokens(width, height)


def document_block_tokens(block: Mapping[str, Any], where: str = "document") -> int:
    """Tokens of a ``document`` block: a base64 PDF by pages, text by its characters."""
    from .tokens import block_tokens, estimate_tokens  # tokens imports this module

    source = block.get("source")
    kind = source.get("type") if isinstance(source, Mapping) else None
    if isinstance(source, Mapping) and kind == "base64":
        if source.get("media_type") != "application/pdf":
            raise MediaError(f"{where}.source.media_type: must be application/pdf")
        pages = pdf_pages(_decode(source, where))
        return pages * PDF_TOKENS_PER_PAGE
    if isinstance(source, Mapping) and kind == "text" and isinstance(source.get("data"), str):
        return estimate_tokens(source["data"])
    if (
        isinstance(source, Mapping)
        and kind == "content"
        and isinstance(source.get("content"), list)
    ):
        return sum(block_tokens(part) for part in source["content"])
    raise MediaError(
        f"{where}.source: document sources of type {kind!r} are not modelled by ember sim "
        "(it cannot read their pages); send a base64 PDF, text or content"
    )
