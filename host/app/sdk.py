"""The Android build tools aiot uses, found on this machine or fetched into the cache.

Bookworm packages ``aapt2``, ``zipalign``, ``apksigner``, ``dexdump`` and the framework
resources (``android-sdk-build-tools``, ``android-framework-res``, ``dexdump``; installed by
``scripts/bootstrap.sh``), and the JDK gives ``javac``/``java``/``keytool``. Two pieces exist
only in Debian bullseye: ``android.jar`` (API 23, ``libandroid-23-java``) to compile against,
and the ``dx`` dexer (``dalvik-exchange``). :func:`ensure_jars` downloads those two .debs once
with an apt configuration of its own (the machine's sources and state are not touched) and
keeps the two jars under ``<cache>/android-sdk/``.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from aiot.core import environment
from aiot.core.errors import AiotError
from aiot.core.paths import cache_dir
from aiot.host.devices.wheels import debian_mirror

#: The bullseye packages that hold the jars, and where each jar lies inside its package.
BULLSEYE_JARS = {
    "android.jar": ("libandroid-23-java", "usr/share/java/com.android.android-23.jar"),
    "dx.jar": ("dalvik-exchange", "usr/share/java/com.android.dx-10.0.0.jar"),
}
FRAMEWORK_RES = Path("/usr/share/android-framework-res/framework-res.apk")
_BOOTSTRAP = "run scripts/bootstrap.sh (or: apt-get install default-jdk-headless "\
             "android-sdk-build-tools android-framework-res dexdump)"


class SdkError(AiotError):
    """A build tool is missing or the bullseye jars could not be fetched."""


@dataclass(frozen=True)
class Sdk:
    """Paths of every tool one APK build needs."""

    javac: str
    java: str
    keytool: str
    aapt2: str
    zipalign: str
    apksigner: str
    framework_res: Path
    android_jar: Path
    dx_jar: Path


def tool(name: str) -> str:
    """The path of build tool ``name``.

    Raises:
        SdkError: it is not on PATH (nor in Debian's build-tools folder).
    """
    found = shutil.which(name) or shutil.which(name, path="/usr/lib/android-sdk/build-tools/debian")
    if not found:
        raise SdkError(f"{name} not found: the APK build needs it", _BOOTSTRAP)
    return found


def jars_dir() -> Path:
    """Where the bullseye jars are kept: ``AIOT_ANDROID_SDK`` or ``<cache>/android-sdk``."""
    env = environment.get("AIOT_ANDROID_SDK")
    return Path(env).expanduser().absolute() if env else cache_dir() / "android-sdk"


def ensure_jars(progress=None) -> tuple[Path, Path]:
    """``(android.jar, dx.jar)``, fetched from bullseye on first use.

    Raises:
        SdkError: apt-get/dpkg-deb are missing or the Debian mirror is unreachable.
    """
    folder = jars_dir()
    jars = tuple(folder / name for name in BULLSEYE_JARS)
    if all(jar.is_file() for jar in jars):
        return jars  # type: ignore[return-value]
    if progress:
        progress("fetching android.jar and dx.jar from Debian bullseye")
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder, prefix="fetch-") as tmp:
        debs = _download([pkg for pkg, _ in BULLSEYE_JARS.values()], Path(tmp))
        for name, (pkg, inside) in BULLSEYE_JARS.items():
            extracted = Path(tmp) / "x" / pkg
            extracted.mkdir(parents=True)
            _run(["dpkg-deb", "-x", str(debs[pkg]), str(extracted)], f"unpacking {pkg}")
            source = (extracted / inside).resolve()
            if not source.is_file():
                raise SdkError(f"{pkg} has no {inside}", "the bullseye package changed; report it")
            part = folder / (name + ".part")
            shutil.copyfile(source, part)
            part.replace(folder / name)
    return jars  # type: ignore[return-value]


def _download(packages: list[str], tmp: Path) -> dict[str, Path]:
    """Download ``packages``' .debs from bullseye with an isolated apt configuration."""
    for needed in ("apt-get", "dpkg-deb"):
        if not shutil.which(needed):
            raise SdkError(f"{needed} not found: fetching android.jar and dx.jar needs Debian's apt",
                           "or put android.jar and dx.jar into AIOT_ANDROID_SDK by hand")
    (tmp / "lists" / "partial").mkdir(parents=True)
    (tmp / "cache" / "archives" / "partial").mkdir(parents=True)
    sources = tmp / "sources.list"
    keyring = "/usr/share/keyrings/debian-archive-keyring.gpg"
    signed = f"[signed-by={keyring}] " if Path(keyring).exists() else ""
    sources.write_text(f"deb {signed}{debian_mirror()} bullseye main\n")
    options = ["-o", f"Dir::Etc::SourceList={sources}", "-o", "Dir::Etc::SourceParts=/dev/null",
               "-o", f"Dir::State::Lists={tmp / 'lists'}", "-o", f"Dir::Cache={tmp / 'cache'}",
               "-o", "APT::Sandbox::User=root", "-o", "Debug::NoLocking=1"]
    hint = ("check that this machine reaches its Debian mirror (AIOT_DEBIAN_MIRROR overrides it), "
            "or put android.jar and dx.jar into AIOT_ANDROID_SDK by hand")
    mirror = debian_mirror()
    update = _run(["apt-get", *options, "update"], "apt-get update (bullseye)", hint)
    if not any((tmp / "lists").glob("*Packages*")):  # apt-get only warns when nothing came
        lines = update.splitlines()
        why = ([line for line in lines if "Failed to fetch" in line or line.startswith("Err:")]
               or [line for line in lines if line.startswith(("W:", "E:"))]
               or ["no package index downloaded"])[0]
        raise SdkError(f"cannot reach {mirror} for bullseye's index: {why.strip()[:300]}", hint)
    _run(["apt-get", *options, "download", *packages], "apt-get download", hint, cwd=tmp)
    debs = {}
    for pkg in packages:
        found = sorted(tmp.glob(f"{pkg}_*.deb"))
        if not found:
            raise SdkError(f"apt-get downloaded no {pkg} package from bullseye", hint)
        debs[pkg] = found[-1]
    return debs


def _run(argv: list[str], what: str, hint: str | None = None, cwd: Path | None = None) -> str:
    """Run ``argv``; returns its output (stdout and stderr), raises SdkError on failure."""
    done = subprocess.run(argv, capture_output=True, text=True, cwd=cwd, check=False)
    output = done.stdout + "\n" + done.stderr
    if done.returncode != 0:
        lines = [line for line in output.splitlines() if line.strip()]
        errors = [line for line in lines if line.startswith(("E:", "W:"))] or lines or ["no output"]
        raise SdkError(f"{what} failed: {errors[-1][:300]}", hint)
    return output


def find_sdk(progress=None) -> Sdk:
    """Every tool of an APK build (the bullseye jars fetched if needed).

    Raises:
        SdkError: a tool is missing (one line naming it and how to install it).
    """
    tools = {name: tool(name) for name in ("javac", "java", "keytool", "aapt2", "zipalign",
                                           "apksigner")}
    if not FRAMEWORK_RES.is_file():
        raise SdkError(f"{FRAMEWORK_RES} not found: aapt2 links against it", _BOOTSTRAP)
    android_jar, dx_jar = ensure_jars(progress)
    return Sdk(**tools, framework_res=FRAMEWORK_RES, android_jar=android_jar, dx_jar=dx_jar)
