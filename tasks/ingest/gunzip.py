"""Gzip-compressed inputs (a lone `page-0001.xml.gz`, the ALTO pages of an issue package): known
by their magic bytes, never by their name, and inflated within a limit, as a stream.

A gzip bomb (a few kilobytes that inflate to gigabytes) is stopped as soon as the inflated bytes
pass the limit, before they are held; a damaged stream (bad header, bad data, truncated, a wrong
CRC or length in the trailer) is refused with what zlib says. Concatenated members are read as
one stream, as `gzip.decompress` does; NUL padding after the last member is ignored, as it does.
"""
from __future__ import annotations

import zlib
from collections.abc import Iterator

GZIP_MAGIC = b"\x1f\x8b"
CHUNK = 1 << 20  # inflated bytes handed on at a time: a bomb is stopped within one chunk of its limit


class InflateRefused(ValueError):
    """The gzip stream cannot be read within the limit; the message says why."""


def is_gzip(data: bytes) -> bool:
    return data[:2] == GZIP_MAGIC


def inflated_chunks(data: bytes, limit: int, chunk: int = CHUNK) -> Iterator[bytes]:
    """The inflated bytes of `data`, chunk by chunk; InflateRefused past `limit` bytes or when the
    stream is damaged."""
    total, rest = 0, data
    try:
        while rest:
            member = zlib.decompressobj(16 + zlib.MAX_WBITS)  # a gzip header and trailer, checked
            pending = rest
            while not member.eof:
                out = member.decompress(pending, chunk)
                pending = member.unconsumed_tail
                if not out and not pending:
                    raise InflateRefused("corrupt gzip: the compressed stream is truncated")
                total += len(out)
                if total > limit:
                    raise InflateRefused(f"gzip bomb: inflates beyond the limit of {limit} bytes")
                yield out
            rest = member.unused_data
            if not rest.strip(b"\x00"):
                return
            if not is_gzip(rest):
                raise InflateRefused("corrupt gzip: bytes after the compressed stream are not gzip")
    except zlib.error as exc:
        raise InflateRefused(f"corrupt gzip: {exc}") from None


def inflate(data: bytes, limit: int) -> bytes:
    """The whole inflated content (InflateRefused as `inflated_chunks`)."""
    return b"".join(inflated_chunks(data, limit))
