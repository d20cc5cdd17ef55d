"""Tiny image and PDF files for the simulator tests: headers only, with a chosen size.

The simulator reads an image's size from its header, so a valid header is all a test
needs; the pixel data after it is never decoded.
"""

from __future__ import annotations

import base64
import struct
from typing import Any


def png(width: int, height: int) -> bytes:
    ihdr = struct.pack(">II", width, height) + b"\x08\x02\x00\x00\x00"
    return b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + ihdr + b"\x00" * 4


def gif(width: int, height: int) -> bytes:
    return b"GIF89a" + struct.pack("<HH", width, height) + b"\x00" * 8


def jpeg(width: int, height: int) -> bytes:
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00" + b"\x00" * 9
    sof = b"\xff\xc0" + struct.pack(">HBHHB", 11, 8, height, width, 1) + b"\x01\x11\x00"
    return b"\xff\xd8" + app0 + sof + b"\xff\xd9"


def webp(width: int, height: int) -> bytes:
    """A lossless (VP8L) WebP header."""
    bits = (width - 1) | ((height - 1) << 14)
    chunk = b"VP8L" + struct.pack("<I", 5) + b"\x2f" + bits.to_bytes(4, "little")
    return b"RIFF" + struct.pack("<I", 4 + len(chunk)) + b"WEBP" + chunk


def webp_lossy(width: int, height: int) -> bytes:
    """A lossy (VP8) WebP header."""
    frame = b"\x00\x00\x00" + b"\x9d\x01\x2a" + struct.pack("<HH", width, height)
    chunk = b"VP8 " + struct.pack("<I", len(frame)) + frame
    return b"RIFF" + struct.pack("<I", 4 + len(chunk)) + b"WEBP" + chunk


def webp_extended(width: int, height: int) -> bytes:
    """An extended (VP8X) WebP header, whose canvas size is what counts."""
    canvas = (width - 1).to_bytes(3, "little") + (height - 1).to_bytes(3, "little")
    chunk = b"VP8X" + struct.pack("<I", 10) + b"\x00" * 4 + canvas
    return b"RIFF" + struct.pack("<I", 4 + len(chunk)) + b"WEBP" + chunk


def pdf(pages: int) -> bytes:
    objects = b"".join(b"<< /Type /Page /Parent 2 0 R >>\n" for _ in range(pages))
    tree = b"<< /Type /Pages /Count " + str(pages).encode() + b" >>\n"
    return b"%PDF-1.7\n" + tree + objects + b"%%EOF\n"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def image_block(data: bytes, media_type: str = "image/png") -> dict[str, Any]:
    return {
        "type": "image",
        "source": {"type": "base64", "media_type": media_type, "data": b64(data)},
    }


def pdf_block(pages: int) -> dict[str, Any]:
    source = {"type": "base64", "media_type": "application/pdf", "data": b64(pdf(pages))}
    return {"type": "document", "source": source}
