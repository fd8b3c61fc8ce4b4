"""IIIF Image API 3 request parameters: `{region}/{size}/{rotation}/{quality}.{format}` parsed and
resolved against one image's pixel size, or refused with the status the specification gives.

Level 2 (checked by the official validator: tests/reading/test_iiif_validator.py) and a little
more: region `full`, `square`, `x,y,w,h`, `pct:x,y,w,h`; size `max`, `w,`, `,h`, `pct:n`, `w,h`,
`!w,h`, each with `^` for upscaling; rotation by multiples of 90, mirrored with `!`; quality
`default`, `color`, `gray`, `bitonal`; `jpg` and `png`. A request that is not IIIF syntax is 400;
a well-formed one this server does not do (a rotation of 22.5, `tif`) is 501. Every size is bounded by `max_pixels` before anything
is rendered, so no URL can make the server allocate an oversized image, and no side exceeds
what the format can encode (JPEG: 65,535 pixels). Digits are ASCII digits only: `re`'s `\\d`
would take '٣' or '³', which `int()` reads or refuses at will.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

FEATURES = ["regionByPx", "regionByPct", "regionSquare", "sizeByW", "sizeByH", "sizeByPct",
            "sizeByWh", "sizeByConfinedWh", "sizeUpscaling", "rotationBy90s", "mirroring",
            "canonicalLinkHeader", "profileLinkHeader", "cors", "jsonldMediaType",
            "baseUriRedirect"]
QUALITIES = ["default", "color", "gray", "bitonal"]
FORMATS = {"jpg": "image/jpeg", "png": "image/png"}
KNOWN_FORMATS = {"jpg", "png", "tif", "gif", "jp2", "pdf", "webp"}
KNOWN_QUALITIES = {"default", "color", "gray", "bitonal"}
MAX_PARAMETER = 64  # characters; nothing valid is longer
MAX_SIDE = 65_500  # pixels a side: JPEG's own ceiling is 65,535 (PNG's is larger; one rule for both)

_INT = r"[0-9]{1,9}"
_NUM = r"(?:[0-9]{1,9}(?:\.[0-9]{1,9})?|\.[0-9]{1,9})"
_REGION_PX = re.compile(rf"^({_INT}),({_INT}),({_INT}),({_INT})$")
_REGION_PCT = re.compile(rf"^pct:({_NUM}),({_NUM}),({_NUM}),({_NUM})$")
_SIZE_W = re.compile(rf"^({_INT}),$")
_SIZE_H = re.compile(rf"^,({_INT})$")
_SIZE_WH = re.compile(rf"^(!?)({_INT}),({_INT})$")
_SIZE_PCT = re.compile(rf"^pct:({_NUM})$")
_ROTATION = re.compile(rf"^(!?)({_NUM})$")


class ImageRequestError(ValueError):
    """A request refused before any pixel is touched; `status` is the HTTP status to answer."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def bad(message: str) -> ImageRequestError:
    return ImageRequestError(400, message)


@dataclass(frozen=True)
class Box:
    x: int
    y: int
    w: int
    h: int


@dataclass(frozen=True)
class ImageRequest:
    """A resolved request: which pixels of the image, at what output size, in which format."""

    region: Box
    width: int  # the size before rotation (IIIF's order: region, size, rotation, quality)
    height: int
    format: str  # "jpg" | "png"
    rotation: int = 0  # clockwise degrees: 0, 90, 180 or 270
    mirror: bool = False  # flipped left to right before the rotation
    quality: str = "default"  # default | color | gray | bitonal

    @property
    def media_type(self) -> str:
        return FORMATS[self.format]

    @property
    def key(self) -> str:
        """One cache entry per distinct output (every parameter resolved to pixels)."""
        r = self.region
        return (f"{r.x},{r.y},{r.w},{r.h}/{self.width},{self.height}/"
                f"{'!' if self.mirror else ''}{self.rotation}/{self.quality}.{self.format}")

    def canonical(self, width: int, height: int, max_size: tuple[int, int]) -> str:
        """The canonical URI path (IIIF Image 3 §4.7) of this request on an image of `width` ×
        `height` whose `max` for the whole image is `max_size`: `full` and `max` where they
        apply, pixels elsewhere, `default` for the colour this server serves by default."""
        r = self.region
        full = (r.x, r.y, r.w, r.h) == (0, 0, width, height)
        region = "full" if full else f"{r.x},{r.y},{r.w},{r.h}"
        size = "max" if full and (self.width, self.height) == max_size else f"{self.width},{self.height}"
        quality = "default" if self.quality == "color" else self.quality
        return f"{region}/{size}/{'!' if self.mirror else ''}{self.rotation}/{quality}.{self.format}"


def _checked(parameter: str, name: str) -> str:
    if not parameter or len(parameter) > MAX_PARAMETER:
        raise bad(f"{name} parameter {parameter[:MAX_PARAMETER]!r} is not IIIF syntax")
    return parameter


def parse_region(region: str, width: int, height: int) -> Box:
    """The region as pixels of the image, cropped at its edges (IIIF §4.1)."""
    _checked(region, "region")
    if region == "full":
        return Box(0, 0, width, height)
    if region == "square":
        side = min(width, height)
        return Box((width - side) // 2, (height - side) // 2, side, side)
    if m := _REGION_PX.fullmatch(region):
        x, y, w, h = (int(v) for v in m.groups())
    elif m := _REGION_PCT.fullmatch(region):
        px, py, pw, ph = (float(v) for v in m.groups())
        if px > 100 or py > 100:
            raise bad(f"region {region!r} starts outside the image (percentages run 0-100)")
        x, y = math.floor(px * width / 100), math.floor(py * height / 100)
        w = math.ceil(min(pw, 100.0) * width / 100) if pw > 0 else 0
        h = math.ceil(min(ph, 100.0) * height / 100) if ph > 0 else 0
    else:
        raise bad(f"region {region!r} is not full, square, x,y,w,h or pct:x,y,w,h "
                  "(non-negative numbers)")
    if w <= 0 or h <= 0:
        raise bad(f"region {region!r} has a zero width or height")
    if x >= width or y >= height:
        raise bad(f"region {region!r} lies outside the image ({width}×{height} pixels)")
    return Box(x, y, min(w, width - x), min(h, height - y))


def _scale_to_area(w: int, h: int, area: int) -> tuple[int, int]:
    """The largest size of the same aspect whose area stays within `area` and whose sides stay
    within MAX_SIDE."""
    s = min(1.0, math.sqrt(area / (w * h)), MAX_SIDE / max(w, h))
    if s >= 1.0:
        return w, h
    return max(1, math.floor(w * s)), max(1, math.floor(h * s))


def parse_size(size: str, region: Box, max_pixels: int) -> tuple[int, int]:
    """Output width and height for the region (IIIF §4.2), bounded by `max_pixels`."""
    _checked(size, "size")
    upscale = size.startswith("^")
    body = size[1:] if upscale else size
    rw, rh = region.w, region.h
    if body == "max":
        if upscale:  # as large as the server allows, keeping the aspect ratio
            s = min(math.sqrt(max_pixels / (rw * rh)), MAX_SIDE / max(rw, rh))
            return max(1, math.floor(rw * s)), max(1, math.floor(rh * s))
        return _scale_to_area(rw, rh, max_pixels)
    if m := _SIZE_W.fullmatch(body):
        w = int(m.group(1))
        h = round(rh * w / rw)
    elif m := _SIZE_H.fullmatch(body):
        h = int(m.group(1))
        w = round(rw * h / rh)
    elif m := _SIZE_PCT.fullmatch(body):
        pct = float(m.group(1))
        if pct <= 0:
            raise bad(f"size {size!r} is zero")
        if pct > 100 and not upscale:
            raise bad(f"size {size!r} is larger than the region; prefix it with ^ to upscale")
        w, h = round(rw * pct / 100), round(rh * pct / 100)
    elif m := _SIZE_WH.fullmatch(body):
        confined, bw, bh = m.group(1) == "!", int(m.group(2)), int(m.group(3))
        if bw <= 0 or bh <= 0:
            raise bad(f"size {size!r} has a zero width or height")
        if confined:
            s = min(bw / rw, bh / rh)
            # a box larger than the region both ways asks for an upscale: 400 without `^`, as
            # for every other form (the official validator's size_noup asks this of !2000,3000;
            # answering the region's own size instead would be the spec's other reading)
            w, h = min(bw, round(rw * s)), min(bh, round(rh * s))
        else:
            w, h = bw, bh
    else:
        raise bad(f"size {size!r} is not max, w,, ,h, pct:n, w,h or !w,h (each may start with ^)")
    if w <= 0 or h <= 0:
        raise bad(f"size {size!r} gives an image with a zero width or height")
    if not upscale and (w > rw or h > rh):
        raise bad(f"size {size!r} ({w}×{h}) is larger than the region ({rw}×{rh}); "
                  "prefix it with ^ to upscale")
    if max(w, h) > MAX_SIDE:
        raise bad(f"size {size!r} asks for {w}×{h} pixels; a side may be at most {MAX_SIDE:,} "
                  "pixels (JPEG cannot encode more)")
    if w * h > max_pixels:
        raise bad(f"size {size!r} asks for {w}×{h} = {w * h:,} pixels, over this reading "
                  f"room's limit of {max_pixels:,} pixels (settings.reading_room.max_pixels)")
    return w, h


def parse_rotation(rotation: str) -> tuple[int, bool]:
    """Clockwise degrees (0, 90, 180, 270) and whether to mirror first."""
    _checked(rotation, "rotation")
    m = _ROTATION.fullmatch(rotation)
    if not m or float(m.group(2)) > 360:
        raise bad(f"rotation {rotation!r} is not a number of degrees from 0 to 360 (! to mirror)")
    degrees = float(m.group(2))
    if degrees % 90:
        raise ImageRequestError(501, f"rotation {rotation!r} is not implemented (multiples of 90 "
                                     "only)")
    return int(degrees) % 360, bool(m.group(1))


def parse_quality_format(quality_format: str) -> tuple[str, str]:
    _checked(quality_format, "quality.format")
    quality, dot, fmt = quality_format.rpartition(".")
    if not dot or quality not in KNOWN_QUALITIES or fmt not in KNOWN_FORMATS:
        raise bad(f"{quality_format!r} is not quality.format (default|color|gray|bitonal . "
                  "jpg|png|tif|gif|jp2|pdf|webp)")
    if fmt not in FORMATS:
        raise ImageRequestError(501, f"format {fmt!r} is not implemented (jpg, png)")
    return quality, fmt


def parse_image_request(region: str, size: str, rotation: str, quality_format: str,
                        width: int, height: int, max_pixels: int) -> ImageRequest:
    """Parse in the specification's order of implementation: region, size, rotation, quality."""
    box = parse_region(region, width, height)
    w, h = parse_size(size, box, max_pixels)
    degrees, mirror = parse_rotation(rotation)
    quality, fmt = parse_quality_format(quality_format)
    return ImageRequest(region=box, width=w, height=h, format=fmt, rotation=degrees, mirror=mirror,
                        quality=quality)
