"""IIIF Image API 3 parameters: what each form resolves to, and a clear 400 (or 501) for the rest."""
from __future__ import annotations

import pytest

from tasks.reading.image_request import (Box, ImageRequestError, parse_image_request, parse_region,
                                         parse_rotation, parse_size)

W, H = 2480, 3509
LIMIT = 12_000_000


@pytest.mark.parametrize("region, box", [
    ("full", Box(0, 0, W, H)),
    ("square", Box(0, (H - W) // 2, W, W)),
    ("10,20,300,400", Box(10, 20, 300, 400)),
    ("2400,3400,500,500", Box(2400, 3400, 80, 109)),  # cropped at the edges, no padding
    ("pct:50,50,50,50", Box(1240, 1754, 1240, 1755)),
    ("pct:0,0,100,100", Box(0, 0, W, H)),
    ("pct:10.5,0,200,1", Box(260, 0, W - 260, 36)),
])
def test_regions_resolve_to_the_pixels_the_specification_names(region, box):
    assert parse_region(region, W, H) == box


@pytest.mark.parametrize("size, region, out", [
    ("max", Box(0, 0, W, H), (W, H)),
    ("200,", Box(0, 0, W, H), (200, 283)),
    (",100", Box(0, 0, W, H), (71, 100)),
    ("pct:50", Box(0, 0, 100, 50), (50, 25)),
    ("60,70", Box(0, 0, 100, 100), (60, 70)),
    ("!60,70", Box(0, 0, 100, 200), (35, 70)),
    ("!600,700", Box(0, 0, 600, 1400), (300, 700)),
    ("!100,700", Box(0, 0, 100, 200), (100, 200)),  # one side of the box fits the region exactly
    ("^!600,700", Box(0, 0, 100, 200), (350, 700)),
    ("^200,", Box(0, 0, 100, 50), (200, 100)),
    ("^pct:150", Box(0, 0, 100, 50), (150, 75)),
])
def test_sizes_resolve_as_the_specification_says(size, region, out):
    assert parse_size(size, region, LIMIT) == out


def test_max_is_bounded_by_the_pixel_limit_and_keeps_the_aspect():
    w, h = parse_size("max", Box(0, 0, W, H), 1_000_000)
    assert w * h <= 1_000_000 and abs(w / h - W / H) < 0.01
    w, h = parse_size("^max", Box(0, 0, 100, 100), 40_000)
    assert (w, h) == (200, 200)


@pytest.mark.parametrize("region", [
    "-1,0,10,10", "0,-5,10,10", "0,0,0,10", "0,0,10,0", "2480,0,10,10", "0,3509,1,1",
    "pct:0,0,0,10", "pct:101,0,10,10", "pct:-1,0,10,10", "a,b,c,d", "10,10,10", "10,10,10,10,10",
    "../../etc/passwd", "..%2F..", "full ", "", "1e3,0,10,10", "0x10,0,10,10", "9999999999,0,1,1",
    "pct:", "square!", "x" * 500,
])
def test_bad_regions_are_a_clear_400(region):
    with pytest.raises(ImageRequestError) as refused:
        parse_region(region, W, H)
    assert refused.value.status == 400 and str(refused.value)


@pytest.mark.parametrize("size", [
    "0,", ",0", "0,0", "-10,", ",-10", "pct:0", "pct:101", "pct:-5", "abc", "10", "!10", "max,",
    "3000,", ",4000", "2481,10", "^0,", "../", "..%2f", "1e9,", "", "^", "full",
    "!3000,4000",  # a box larger than the region both ways is an upscale: `^` first
])
def test_bad_sizes_are_a_clear_400(size):
    with pytest.raises(ImageRequestError) as refused:
        parse_size(size, Box(0, 0, W, H), LIMIT)
    assert refused.value.status == 400 and str(refused.value)


def test_a_size_over_the_pixel_limit_is_refused_with_the_setting_named():
    with pytest.raises(ImageRequestError) as refused:
        parse_size("^20000,20000", Box(0, 0, W, H), LIMIT)
    assert refused.value.status == 400
    assert "settings.reading_room.max_pixels" in str(refused.value)
    assert "400,000,000" in str(refused.value) and "12,000,000" in str(refused.value)
    with pytest.raises(ImageRequestError, match="max_pixels"):
        parse_size("2000,", Box(0, 0, W, H), 1_000_000)  # inside the image, over the limit


@pytest.mark.parametrize("rotation, status", [("22.5", 501), ("!45", 501), ("361", 400),
                                              ("-90", 400), ("abc", 400), ("", 400)])
def test_rotation_off_the_right_angles_is_refused(rotation, status):
    with pytest.raises(ImageRequestError) as refused:
        parse_rotation(rotation)
    assert refused.value.status == status


@pytest.mark.parametrize("rotation, turn", [("0", (0, False)), ("0.0", (0, False)), ("360", (0, False)),
                                            ("90", (90, False)), ("180", (180, False)),
                                            ("270.0", (270, False)), ("!0", (0, True)), ("!180", (180, True))])
def test_right_angles_and_mirroring_are_served(rotation, turn):
    assert parse_rotation(rotation) == turn


def test_every_quality_and_two_formats_are_served():
    request = parse_image_request("full", "max", "90", "gray.png", 100, 50, LIMIT)
    assert (request.width, request.height, request.media_type) == (100, 50, "image/png")
    assert (request.rotation, request.quality) == (90, "gray")
    for quality in ("default", "color", "bitonal"):
        assert parse_image_request("full", "max", "0", f"{quality}.jpg", 100, 50, LIMIT).quality == quality


@pytest.mark.parametrize("quality_format, status", [
    ("default.tif", 501), ("default.webp", 501),
    ("default", 400), ("default.exe", 400), ("ugly.jpg", 400), ("default.jpg/../x", 400)])
def test_other_qualities_and_formats(quality_format, status):
    with pytest.raises(ImageRequestError) as refused:
        parse_image_request("full", "max", "0", quality_format, 100, 50, LIMIT)
    assert refused.value.status == status


def test_the_canonical_form_names_full_and_max_where_they_apply():
    max_size = (100, 50)
    whole = parse_image_request("full", "max", "0", "color.jpg", 100, 50, LIMIT)
    assert whole.canonical(100, 50, max_size) == "full/max/0/default.jpg"
    part = parse_image_request("pct:50,0,50,100", "25,", "!90", "gray.png", 100, 50, LIMIT)
    assert part.canonical(100, 50, max_size) == "50,0,50,50/25,25/!90/gray.png"


def test_the_canonical_key_names_one_output():
    a = parse_image_request("full", "max", "0", "default.jpg", 100, 50, LIMIT)
    b = parse_image_request("0,0,100,50", "100,", "0", "default.jpg", 100, 50, LIMIT)
    assert a.key == b.key == "0,0,100,50/100,50/0/default.jpg"
    assert parse_image_request("full", "max", "!180", "bitonal.jpg", 100, 50, LIMIT).key == \
        "0,0,100,50/100,50/!180/bitonal.jpg"
