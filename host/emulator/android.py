"""An emulated Android phone: an aarch64 root with a toybox-like shell and no Python.

``aiot emulator start adb --arch arm64 --profile android`` gives the emulated ADB device what
a plain phone has and nothing more: ``/system/bin`` with a static aarch64 busybox standing in
for toybox (sh, ls, cat, tar, sha256sum, df, ...), ``getprop`` answering a Snapdragon 8 Gen 2
phone's properties (or another phone's ``getprop`` dump, ``--props FILE``), ``/data/local/tmp``
as the work dir, a ``/proc/cpuinfo`` and a ``/sys`` describing the SoC's CPU clusters, thermal
zones and battery, and no ``python3`` anywhere. Whatever aiot must run there, it brings
(:mod:`aiot.host.devices.android_runtime`), as on a real phone.

Each shell command of the device runs, through ``enter.sh``, in a new user and mount namespace
chrooted into the phone's root, where a binfmt_misc entry private to that namespace (Linux
≥ 6.7 namespaces binfmt_misc per user namespace) hands every aarch64 program to
qemu-aarch64-static: so the phone's own ``sh`` and the runtime's loader run as aarch64, and
nothing of the host's userland is reachable. qemu emulates a Cortex-A76 (``QEMU_CPU``: the
instructions the runtimes pick are those of a real Arm core) and reports an Android kernel
release (``QEMU_UNAME``). Timings under emulation say nothing about the phone.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tempfile
from pathlib import Path

from aiot.core.errors import AiotError, UsageError
from aiot.host.devices.wheels import debian_mirror
from aiot.host.emulator.adbd import read_props
from aiot.host.emulator.arm64 import QEMU_CPU, check_tools
from aiot.host.transports.quoting import quote
from aiot.host.transports.socs import ARM_PARTS, Soc, lookup

PROFILES = ("linux", "android")
WORKDIR = "/data/local/tmp/aiot"
#: What ``uname -r`` says on the phone (Android 14's GKI kernel on a Snapdragon 8 Gen 2).
KERNEL_RELEASE = "5.15.94-android14-11-g3b5e8a7c1d2f"
#: Android's shell environment (``adb shell``'s, minus what only apps use).
SHELL_ENV = {
    "PATH": "/product/bin:/apex/com.android.runtime/bin:/system/bin:/system/xbin:/vendor/bin",
    "HOME": "/", "TMPDIR": "/data/local/tmp", "ANDROID_ROOT": "/system", "ANDROID_DATA": "/data",
    "ANDROID_STORAGE": "/storage", "EXTERNAL_STORAGE": "/sdcard", "HOSTNAME": "localhost",
    "SHELL": "/system/bin/sh", "USER": "shell", "LOGNAME": "shell",
}
#: toybox's commands that scripts on a phone use; busybox answers for each.
APPLETS = (
    "sh", "ls", "cat", "echo", "printf", "mkdir", "rm", "rmdir", "mv", "cp", "ln", "chmod", "touch",
    "df", "du", "stat", "sha256sum", "md5sum", "uname", "id", "tar", "gzip", "gunzip", "cut", "sleep",
    "kill", "ps", "find", "env", "dirname", "basename", "pwd", "readlink", "realpath", "head", "tail",
    "tr", "wc", "grep", "sed", "awk", "sort", "uniq", "xargs", "date", "true", "false", "test", "[",
    "mount", "nproc", "free", "uptime", "which", "timeout", "nice", "taskset", "dd", "od", "expr",
)
#: A Galaxy S23 (SM-S911B): what ``getprop`` answers by default.
DEFAULT_PROPS = {
    "ro.product.model": "SM-S911B", "ro.product.manufacturer": "samsung", "ro.product.brand": "samsung",
    "ro.product.name": "dm1qxxx", "ro.product.device": "dm1q", "ro.board.platform": "kalama",
    "ro.hardware": "qcom", "ro.soc.manufacturer": "QTI", "ro.soc.model": "SM8550",
    "ro.product.cpu.abi": "arm64-v8a", "ro.product.cpu.abilist": "arm64-v8a,armeabi-v7a,armeabi",
    "ro.product.cpu.abilist64": "arm64-v8a", "ro.build.version.release": "14",
    "ro.build.version.sdk": "34", "ro.build.type": "user", "ro.build.characteristics": "phone",
    "ro.build.fingerprint": "samsung/dm1qxxx/dm1q:14/UP1A.231005.007/S911BXXU3BWK5:user/release-keys",
    "ro.debuggable": "0", "ro.secure": "1", "persist.sys.usb.config": "mtp,adb",
    "ro.aiot.emulated": "1",
}
#: A SoC the table does not know gets eight Cortex-A76 at 2.4 GHz.
_FALLBACK_SOC = Soc("unknown", "unknown", (), ((8, "Cortex-A76", 2400),))

_GETPROP = """#!/system/bin/sh
# getprop of an aiot emulated Android phone: no argument lists all, one prints one value.
if [ $# -eq 0 ]; then cat /system/build.prop.txt; exit 0; fi
while IFS= read -r line; do
  case "$line" in "[$1]: ["*) v=${line#"[$1]: ["}; printf '%s\\n' "${v%]}"; exit 0;; esac
done < /system/build.prop.txt
echo
"""

_ENTER = """#!/bin/sh
# Runs one shell command inside the emulated phone {name}: a new user and mount namespace,
# a private binfmt_misc that gives aarch64 programs to qemu, the phone's /proc/cpuinfo, a
# chroot into its root, and Android's shell environment (nothing of this host's).
exec unshare --user --map-root-user --mount --uts /bin/sh -c '
set -e
R="$1/root"
echo localhost > /proc/sys/kernel/hostname
mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
cat "$1/binfmt.reg" > /proc/sys/fs/binfmt_misc/register
mount --rbind /dev "$R/dev"
mount --rbind /proc "$R/proc"
mount --bind "$1/cpuinfo" "$R/proc/cpuinfo"
shift
if [ -z "$1" ]; then set -- /system/bin/sh; else set -- /system/bin/sh -c "$1"; fi
exec chroot "$R" /system/bin/env -i {env} "$@"
' enter {folder} "$1"
"""


def read_props_file(path: Path) -> dict[str, str]:
    """A phone's ``getprop`` dump (``[key]: [value]`` lines) as a dict.

    Raises:
        UsageError: the file is missing or holds no property lines.
    """
    try:
        props = read_props(path)
    except OSError as exc:
        raise UsageError(f"cannot read --props {path}: {exc.strerror or exc}",
                         "give a file saved with: adb shell getprop > phone-props.txt") from None
    if not props:
        raise UsageError(f"--props {path} has no '[key]: [value]' lines",
                         "give a file saved with: adb shell getprop > phone-props.txt")
    return props


def phone_soc(props: dict[str, str]) -> Soc:
    """The SoC the properties name (its clusters shape the phone's CPUs), or a generic one."""
    return lookup(props.get("ro.soc.model"), props.get("ro.board.platform"),
                  props.get("ro.hardware")) or _FALLBACK_SOC


def cpuinfo_text(soc: Soc) -> str:
    """An Android kernel's /proc/cpuinfo for ``soc``'s cores (parts from Arm's MIDR table).

    Features are those of the Cortex-A76 qemu emulates, so what the runtimes read here agrees
    with the hardware capabilities qemu reports.
    """
    blocks, n = [], 0
    for count, core, _ in soc.clusters:
        for _ in range(count):
            blocks.append(f"processor\t: {n}\nBogoMIPS\t: 38.40\nFeatures\t: fp asimd evtstrm aes pmull "
                          "sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp\n"
                          "CPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x0\n"
                          f"CPU part\t: {ARM_PARTS[core]:#x}\nCPU revision\t: 0\n\n")
            n += 1
    return "".join(blocks) + f"Hardware\t: {soc.maker} {soc.codes[0].upper() if soc.codes else ''}\n"


def write_sysfs(sys_root: Path, soc: Soc) -> None:
    """What the phone's /sys tells about CPUs, thermal zones and the battery."""
    cpu_root = sys_root / "devices" / "system" / "cpu"
    n = 0
    for count, _, mhz in soc.clusters:
        for _ in range(count):
            freq = cpu_root / f"cpu{n}" / "cpufreq"
            freq.mkdir(parents=True)
            for name, khz in (("cpuinfo_max_freq", mhz * 1000), ("cpuinfo_min_freq", 300000),
                              ("scaling_cur_freq", mhz * 1000)):
                (freq / name).write_text(f"{khz}\n")
            n += 1
    span = f"0-{n - 1}\n"
    for name in ("possible", "present", "online"):
        (cpu_root / name).write_text(span)
    for i, (kind, milli_c) in enumerate((("cpu-0-0-0", 38200), ("cpu-1-0-0", 39100), ("gpuss-0", 36400),
                                         ("battery", 31000), ("skin-therm", 33500))):
        zone = sys_root / "class" / "thermal" / f"thermal_zone{i}"
        zone.mkdir(parents=True)
        (zone / "type").write_text(kind + "\n")
        (zone / "temp").write_text(f"{milli_c}\n")
    for name, facts in (("battery", {"type": "Battery", "capacity": "78", "status": "Charging", "temp": "310"}),
                        ("usb", {"type": "USB"})):
        supply = sys_root / "class" / "power_supply" / name
        supply.mkdir(parents=True)
        for key, value in facts.items():
            (supply / key).write_text(value + "\n")


def ensure_busybox(cache: Path) -> Path:
    """A static aarch64 busybox (Debian's busybox-static), downloaded once and cached."""
    check_tools()
    folder = cache / "android-phone" / hashlib.sha256(b"bookworm busybox-static arm64").hexdigest()[:16]
    binary = folder / "busybox"
    if binary.exists():
        return binary
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder) as tmp:
        argv = ["mmdebstrap", "--variant=extract", "--architectures=arm64", "--include=busybox-static",
                "bookworm", f"{tmp}/root", f"deb {debian_mirror()} bookworm main"]
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            errors = [line for line in done.stderr.splitlines() if line.startswith("E:")] or ["mmdebstrap failed"]
            raise AiotError(f"could not fetch an aarch64 busybox for the phone: {errors[-1]}",
                            "check that this machine reaches its Debian mirror (AIOT_DEBIAN_MIRROR overrides it)")
        part = folder / "busybox.part"
        shutil.copy2(Path(tmp) / "root" / "bin" / "busybox", part)
        part.replace(binary)
    return binary


def binfmt_entry() -> str:
    """The binfmt_misc registration of aarch64 ELF executables for qemu-aarch64-static.

    ``F``: the kernel opens the interpreter now, so it runs inside the chroot where it is absent;
    ``P``: programs see the argv[0] they were started with (busybox picks its applet by it).
    """
    magic = r"\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\xb7\x00"
    mask = r"\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff"
    qemu = shutil.which("qemu-aarch64-static") or "/usr/bin/qemu-aarch64-static"
    return f":aiot-aarch64:M::{magic}:{mask}:{qemu}:FP\n"


def build_phone(folder: Path, cache: Path, props: dict[str, str]) -> Path:
    """The phone's files in ``folder``: ``root/`` (its filesystem), ``cpuinfo``, ``binfmt.reg``
    and ``enter.sh``; returns ``enter.sh``."""
    root = folder / "root"
    system_bin = root / "system" / "bin"
    system_bin.mkdir(parents=True)
    for part in ("data/local/tmp", "proc", "dev", "sys", "sdcard", "vendor/bin", "product/bin"):
        (root / part).mkdir(parents=True, exist_ok=True)
    shutil.copy2(ensure_busybox(cache), system_bin / "busybox")
    for applet in APPLETS:
        (system_bin / applet).symlink_to("busybox")
    (system_bin / "getprop").write_text(_GETPROP)
    (system_bin / "getprop").chmod(0o755)
    (system_bin / "getenforce").write_text("#!/system/bin/sh\necho Enforcing\n")
    (system_bin / "getenforce").chmod(0o755)
    (root / "system" / "build.prop.txt").write_text("".join(f"[{k}]: [{v}]\n" for k, v in sorted(props.items())))
    soc = phone_soc(props)
    write_sysfs(root / "sys", soc)
    (folder / "cpuinfo").write_text(cpuinfo_text(soc))
    (folder / "binfmt.reg").write_text(binfmt_entry())
    env = {**SHELL_ENV, "QEMU_CPU": QEMU_CPU, "QEMU_UNAME": KERNEL_RELEASE}
    enter = folder / "enter.sh"
    enter.write_text(_ENTER.format(name=folder.name, folder=quote(str(folder)),
                                   env=" ".join(quote(f"{k}={v}") for k, v in env.items())))
    enter.chmod(0o755)
    return enter


def check_phone(enter: Path) -> None:
    """Run ``uname -m`` on the phone: it must answer aarch64, or this kernel cannot host it.

    Raises:
        AiotError: the namespace, binfmt_misc or chroot set-up failed, with its last line.
    """
    done = subprocess.run([str(enter), "uname -m; test ! -e /usr/bin/python3"], capture_output=True,
                          text=True, timeout=60, check=False)
    if done.returncode != 0 or done.stdout.strip() != "aarch64":
        last = (done.stderr.strip() or done.stdout.strip() or f"exit {done.returncode}").splitlines()[-1]
        raise AiotError(f"the emulated Android phone does not start here: {last}",
                        "it needs unprivileged user namespaces and a kernel that gives each one its own "
                        "binfmt_misc (Linux 6.7 or newer), plus qemu-user-static")


def describe(props: dict[str, str]) -> dict:
    """Inventory labels of the phone: what it emulates and why its timings mean nothing."""
    soc = phone_soc(props)
    return {"emulated": "adb", "profile": "android", "soc": soc.name,
            "board": f"aiot emulated Android phone ({props.get('ro.product.model', '?')})",
            "arch": "arm64", "cpu": "aarch64 under qemu-user: outputs are real, timings are not"}


__all__ = ["DEFAULT_PROPS", "PROFILES", "WORKDIR", "build_phone", "check_phone", "cpuinfo_text",
           "describe", "phone_soc", "read_props_file", "write_sysfs"]

