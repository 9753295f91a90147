"""Phone and board SoCs by the names their software reports, with marketing names and CPUs.

Android says which SoC it runs on in ``getprop`` (``ro.soc.model`` since Android 12, else
``ro.board.platform`` / ``ro.hardware``: a code name such as ``kalama`` or a part number such
as ``SM8550``); boards say it in the device tree's ``compatible`` list. Results tables want
what AIoTBench prints per phone: "Snapdragon 8 Gen 2", its cores and their clocks.

Sources: Qualcomm's product briefs and the "List of Qualcomm Snapdragon systems on chips",
MediaTek's Dimensity product pages, HiSilicon's Kirin pages, Google Tensor announcements,
Raspberry Pi's BCM2711/BCM2712 datasheets; code names as the SoCs' Android device trees in
AOSP/LineageOS name them (``kalama``, ``taro``, ``lahaina``, ``kona``, ``msmnile``, ``zuma``).
Clusters are (cores, core, max MHz), smallest cores first, as the kernel numbers CPUs.
"""

from __future__ import annotations

from dataclasses import dataclass

#: MIDR part numbers of Arm cores (``CPU part`` in /proc/cpuinfo), from Arm's TRMs.
ARM_PARTS = {
    "Cortex-A55": 0xD05, "Cortex-A72": 0xD08, "Cortex-A75": 0xD0A, "Cortex-A76": 0xD0B,
    "Cortex-A77": 0xD0D, "Cortex-A78": 0xD41, "Cortex-X1": 0xD44, "Cortex-A510": 0xD46,
    "Cortex-A710": 0xD47, "Cortex-X2": 0xD48, "Cortex-A715": 0xD4D, "Cortex-X3": 0xD4E,
    "Cortex-A520": 0xD80, "Cortex-A720": 0xD81, "Cortex-X4": 0xD82,
}


@dataclass(frozen=True)
class Soc:
    """One SoC: marketing name, maker, the names software reports, and its CPU clusters."""

    name: str
    maker: str
    codes: tuple[str, ...]
    clusters: tuple[tuple[int, str, int], ...]

    @property
    def cores(self) -> int:
        return sum(n for n, _, _ in self.clusters)


SOCS = (
    Soc("Snapdragon 8 Gen 3", "Qualcomm", ("sm8650", "pineapple"),
        ((2, "Cortex-A520", 2265), (3, "Cortex-A720", 2960), (2, "Cortex-A720", 3150), (1, "Cortex-X4", 3300))),
    Soc("Snapdragon 8 Gen 2", "Qualcomm", ("sm8550", "kalama"),
        ((3, "Cortex-A510", 2016), (2, "Cortex-A715", 2803), (2, "Cortex-A710", 2803), (1, "Cortex-X3", 3187))),
    Soc("Snapdragon 8+ Gen 1", "Qualcomm", ("sm8475", "cape"),
        ((4, "Cortex-A510", 2016), (3, "Cortex-A710", 2745), (1, "Cortex-X2", 3187))),
    Soc("Snapdragon 8 Gen 1", "Qualcomm", ("sm8450", "taro"),
        ((4, "Cortex-A510", 1785), (3, "Cortex-A710", 2496), (1, "Cortex-X2", 2995))),
    Soc("Snapdragon 888", "Qualcomm", ("sm8350", "lahaina"),
        ((4, "Cortex-A55", 1804), (3, "Cortex-A78", 2419), (1, "Cortex-X1", 2841))),
    Soc("Snapdragon 865", "Qualcomm", ("sm8250", "kona"),
        ((4, "Cortex-A55", 1804), (3, "Cortex-A77", 2419), (1, "Cortex-A77", 2841))),
    Soc("Snapdragon 855", "Qualcomm", ("sm8150", "msmnile"),
        ((4, "Cortex-A55", 1785), (3, "Cortex-A76", 2419), (1, "Cortex-A76", 2841))),
    Soc("Snapdragon 845", "Qualcomm", ("sdm845",),
        ((4, "Cortex-A55", 1766), (4, "Cortex-A75", 2803))),
    Soc("Dimensity 9300", "MediaTek", ("mt6989",),
        ((4, "Cortex-A720", 2000), (3, "Cortex-X4", 2850), (1, "Cortex-X4", 3250))),
    Soc("Dimensity 9200", "MediaTek", ("mt6985",),
        ((4, "Cortex-A510", 1800), (3, "Cortex-A715", 2850), (1, "Cortex-X3", 3050))),
    Soc("Dimensity 9000", "MediaTek", ("mt6983",),
        ((4, "Cortex-A510", 1800), (3, "Cortex-A710", 2850), (1, "Cortex-X2", 3050))),
    Soc("Dimensity 1200", "MediaTek", ("mt6893",),
        ((4, "Cortex-A55", 2000), (3, "Cortex-A78", 2600), (1, "Cortex-A78", 3000))),
    Soc("Kirin 9000", "HiSilicon", ("kirin9000",),
        ((4, "Cortex-A55", 2050), (3, "Cortex-A77", 2540), (1, "Cortex-A77", 3130))),
    Soc("Kirin 990", "HiSilicon", ("kirin990",),
        ((4, "Cortex-A55", 1950), (2, "Cortex-A76", 2360), (2, "Cortex-A76", 2860))),
    Soc("Kirin 980", "HiSilicon", ("kirin980",),
        ((4, "Cortex-A55", 1800), (2, "Cortex-A76", 1920), (2, "Cortex-A76", 2600))),
    Soc("Google Tensor G3", "Google", ("zuma",),
        ((4, "Cortex-A510", 1704), (4, "Cortex-A715", 2367), (1, "Cortex-X3", 2910))),
    Soc("Google Tensor G2", "Google", ("gs201",),
        ((4, "Cortex-A55", 1803), (2, "Cortex-A78", 2348), (2, "Cortex-X1", 2850))),
    Soc("Google Tensor", "Google", ("gs101",),
        ((4, "Cortex-A55", 1803), (2, "Cortex-A76", 2253), (2, "Cortex-X1", 2802))),
    Soc("BCM2712 (Raspberry Pi 5)", "Broadcom", ("bcm2712",), ((4, "Cortex-A76", 2400),)),
    Soc("BCM2711 (Raspberry Pi 4)", "Broadcom", ("bcm2711",), ((4, "Cortex-A72", 1500),)),
)
_BY_CODE = {code: soc for soc in SOCS for code in soc.codes}


def lookup(*names: str | None) -> Soc | None:
    """The first SoC any of ``names`` (part number, code name, compatible entry) denotes."""
    for name in names:
        if not name:
            continue
        key = name.strip().lower()
        soc = _BY_CODE.get(key) or _BY_CODE.get(key.rpartition(",")[2])
        if soc is not None:
            return soc
    return None


__all__ = ["ARM_PARTS", "SOCS", "Soc", "lookup"]
