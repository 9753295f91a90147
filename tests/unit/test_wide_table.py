"""A table wider than the terminal is printed in parts, never with a cut header or value."""

from rich.console import Console

from aiot.host.cli.wide_table import column_parts, wide_tables

NAMES = ["gaussian_noise", "shot_noise", "impulse_noise", "defocus_blur", "glass_blur", "motion_blur",
         "zoom_blur", "snow", "frost", "fog", "brightness", "contrast", "elastic_transform", "pixelate",
         "jpeg_compression", "mNR", "NCI"]


def _printed(width: int) -> str:
    rows = [[method, bits, *(f"{10 + i:.2f}" for i in range(len(NAMES)))]
            for method in ("DoReFa-Net", "PACT", "LSQ") for bits in ("2", "4", "8")]
    console = Console(width=width, record=True)
    with console.capture() as captured:
        console.print(*wide_tables("Table 6", ("method", "bits"), NAMES, rows, width))
    return captured.get()


def test_an_eighteen_column_table_on_100_columns_is_in_parts_with_every_name_whole():
    text = _printed(100)
    assert "…" not in text and "(part 1 of 3)" in text and "(part 3 of 3)" in text
    assert all(name in text for name in NAMES)
    assert max(len(line) for line in text.splitlines()) <= 100
    assert text.count("DoReFa-Net") == 3 * 3  # the key columns are repeated in every part


def test_a_table_that_fits_is_one_part_without_a_part_title():
    text = _printed(400)
    assert "part" not in text and all(name in text for name in NAMES)


def test_parts_are_even_where_even_parts_fit_and_a_too_wide_column_stands_alone():
    assert column_parts([4], [5] * 10, 4 + 3 + 1 + 8 * 7) == [range(0, 5), range(5, 10)]
    assert column_parts([4], [5, 200, 5], 60) == [range(0, 1), range(1, 2), range(2, 3)]
    assert column_parts([4], [], 60) == [range(0, 0)]
