"""``aiot app build``: the APK of ``android_app/``, built offline and signed, under the cache.

The steps (tool by tool, see ``../shared/notes/devinfra.md`` §5):

1. ``aapt2 link --debug-mode`` the manifest against the framework resources (API 29) into an
   APK without code, with aiot's version as versionName, minSdk 21 and targetSdk 29
   (debuggable, so the host may ``run-as`` the app to stage the runtime in its files);
2. ``javac -source 8 -target 8 -bootclasspath android.jar``: against API 23's own ``java.*``,
   so a Java API newer than Android 6 fails here, not on a phone;
3. ``dx --min-sdk-version=21`` into ``classes.dex``, added to the APK;
4. ``zipalign -p 4``, then ``apksigner sign`` with a debug key generated once per cache
   (``keytool``; never in the source tree) and ``apksigner verify``.

The result lies in ``<cache>/app/`` with ``app.json`` (version, sha256, package, component),
which ``aiot app info`` and ``aiot app install`` read. A build is reused while the sources,
the jars and aiot's version are the same.

A phone's APK is that build plus one native library, ``lib/arm64-v8a/libaiot_ld_<tree>.so``:
the glibc loader of the aiot runtime set up on that phone (:func:`build_for_runtime`), its
system calls the app's seccomp filter traps patched out (:mod:`aiot.host.app.seccomp`), which
Android extracts into the app's native-library dir, the one place an app targeting API 29+
may execute a file from (see :mod:`aiot.host.app.runtime`). It is sealed (zipalign, signed)
again with the same key, under ``<cache>/app/runtime-<tree>/``.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import tempfile
import time
import zipfile
from pathlib import Path

import aiot
from aiot.core import paths
from aiot.core.errors import AiotError, UsageError
from aiot.core.fileio import sha256_file, write_text_atomic
from aiot.host.app.sdk import find_sdk, tool
from aiot.host.app.seccomp import PATCH_VERSION, patch_syscalls, require_patched

PACKAGE = "org.aiot.agent"
INSTRUMENTATION = "org.aiot.agent.AgentInstrumentation"
COMPONENT = f"{PACKAGE}/{INSTRUMENTATION}"
MIN_SDK, TARGET_SDK = 21, 29
#: Bump when how the APK is built changes without its sources changing.
BUILD_LAYOUT = 2
#: Where a native library goes in the APK: Android extracts ``lib/<abi>/lib*.so`` on install.
NATIVE_ABI = "arm64-v8a"
#: The debug key: a password in the clear is fine for a key that only identifies this cache's
#: builds (Android needs some signature; nothing is published with it).
KEY_ALIAS, KEY_PASS = "aiotdebug", "android"


def loader_name(tree: str) -> str:
    """The runtime loader's name in the APK (Android extracts only ``lib*.so``)."""
    return f"libaiot_ld_{tree}.so"


class AppBuildError(AiotError):
    """A step of the APK build failed."""


def sources_dir() -> Path:
    """``android_app/`` of the aiot checkout.

    Raises:
        UsageError: aiot runs from an installed wheel (the Java sources are not installed).
    """
    root = paths.source_root()
    folder = root / "android_app" if root else None
    if folder is None or not (folder / "AndroidManifest.xml").is_file():
        raise UsageError("aiot app build needs an aiot source checkout: android_app/ is not installed "
                         "with the package", "run it from a clone of aiot (pip install -e .)")
    return folder


def app_dir() -> Path:
    """Where builds, the debug keystore and ``app.json`` live: ``<cache>/app``."""
    folder = paths.cache_dir() / "app"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def java_sources(folder: Path) -> list[Path]:
    """The app's Java files (the tests under ``test/`` stay out of the APK)."""
    return sorted((folder / "java").rglob("*.java"))


def version_code(version: str) -> int:
    """``X.Y.Z`` as ``X*10000 + Y*100 + Z`` (at least 1): newer aiot, higher code."""
    parts = [int(re.match(r"\d*", p).group() or 0) for p in version.split(".")[:3]]
    parts += [0] * (3 - len(parts))
    return max(1, parts[0] * 10000 + parts[1] * 100 + parts[2])


def source_key(folder: Path, jars: tuple[Path, Path]) -> str:
    """Hash of what an APK is built from: sources, manifest, jars' sizes, aiot's version."""
    digest = hashlib.sha256(f"{aiot.__version__}:{BUILD_LAYOUT}".encode())
    for path in [folder / "AndroidManifest.xml", *java_sources(folder)]:
        digest.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes())
    for jar in jars:
        digest.update(f"{jar.name}:{jar.stat().st_size}".encode())
    return digest.hexdigest()[:16]


def metadata_path() -> Path:
    return app_dir() / "app.json"


def read_metadata() -> dict | None:
    """The last build's facts, or None when there was none (or its APK is gone)."""
    return _read_metadata(metadata_path())


def _read_metadata(path: Path) -> dict | None:
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return meta if Path(meta.get("path", "")).is_file() else None


def require_built() -> dict:
    """The last build's facts.

    Raises:
        UsageError: nothing is built yet.
    """
    meta = read_metadata()
    if meta is None:
        raise UsageError("the aiot Android app is not built yet", "run: aiot app build")
    return meta


def build(force: bool = False, progress=None) -> dict:
    """Build (or reuse) the APK; returns its facts (also written to ``app.json``).

    Raises:
        SdkError: a tool or the bullseye jars are missing.
        AppBuildError: a step failed (its tool's last error line is the message).
    """
    folder = sources_dir()
    sdk = find_sdk(progress)
    key = source_key(folder, (sdk.android_jar, sdk.dx_jar))
    meta = read_metadata()
    if meta and meta.get("key") == key and Path(meta.get("unsigned", "")).is_file() and not force:
        return {**meta, "reused": True}
    started = time.perf_counter()
    out = app_dir()
    keystore = ensure_keystore(sdk, out / "debug.keystore")
    apk = out / f"aiot-agent-{aiot.__version__}-{key[:8]}.apk"
    unsigned = out / f"aiot-agent-{aiot.__version__}-{key[:8]}.unsigned.apk"
    with tempfile.TemporaryDirectory(dir=out, prefix="build-") as tmp:
        work = Path(tmp)
        _step(progress, "aapt2 link")
        unaligned = work / "unaligned.apk"
        _run([sdk.aapt2, "link", "-o", str(unaligned), "-I", str(sdk.framework_res),
              "--manifest", str(folder / "AndroidManifest.xml"), "--debug-mode",
              "--min-sdk-version", str(MIN_SDK), "--target-sdk-version", str(TARGET_SDK),
              "--version-code", str(version_code(aiot.__version__)),
              "--version-name", aiot.__version__], "aapt2 link")
        _step(progress, "javac")
        classes = work / "classes"
        _run([sdk.javac, "-source", "8", "-target", "8", "-bootclasspath", str(sdk.android_jar),
              "-Xlint:-options", "-encoding", "UTF-8", "-nowarn", "-d", str(classes),
              *map(str, java_sources(folder))], "javac")
        _step(progress, "dx")
        dex = work / "classes.dex"
        _run([sdk.java, "-cp", str(sdk.dx_jar), "com.android.dx.command.Main", "--dex",
              f"--min-sdk-version={MIN_SDK}", f"--output={dex}", str(classes)], "dx")
        with zipfile.ZipFile(unaligned, "a", compression=zipfile.ZIP_DEFLATED) as zf:
            zf.write(dex, "classes.dex")
        shutil.copyfile(unaligned, unsigned)  # what a phone's APK adds its loader to
        certificate = _seal(sdk, keystore, unaligned, work, apk, progress)
    for old in [*out.glob("aiot-agent-*.apk")]:
        if old not in (apk, unsigned):
            old.unlink(missing_ok=True)
    meta = {"key": key, "path": str(apk), "unsigned": str(unsigned), "package": PACKAGE,
            "instrumentation": INSTRUMENTATION,
            "component": COMPONENT, "version": aiot.__version__,
            "version_code": version_code(aiot.__version__), "min_sdk": MIN_SDK,
            "target_sdk": TARGET_SDK, "sha256": sha256_file(apk), "size_bytes": apk.stat().st_size,
            "certificate_sha256": certificate, "keystore": str(keystore),
            "build_seconds": round(time.perf_counter() - started, 2),
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    _write_metadata(metadata_path(), meta)
    return {**meta, "reused": False}


def runtime_metadata_path(tree: str) -> Path:
    return app_dir() / f"runtime-{tree}" / "app.json"


def read_runtime_metadata(tree: str) -> dict | None:
    """The facts of the APK built for runtime ``tree``, or None (none built, or it is gone)."""
    return _read_metadata(runtime_metadata_path(tree))


def runtime_builds() -> list[dict]:
    """The phone APKs built so far, one per runtime tree (:func:`build_for_runtime`)."""
    builds = (read_runtime_metadata(folder.name.removeprefix("runtime-"))
              for folder in sorted(app_dir().glob("runtime-*")))
    return [meta for meta in builds if meta]


def build_for_runtime(loader: Path, tree: str, progress=None) -> dict:
    """The APK for a phone whose aiot runtime is ``tree``: the app build plus ``loader`` (that
    runtime's glibc loader) as ``lib/arm64-v8a/libaiot_ld_<tree>.so``, signed with the same key.
    Reused while the app build and the loader are the same.

    Raises:
        SdkError, AppBuildError: as :func:`build`.
    """
    base = build(progress=progress)
    loader_sha = sha256_file(loader)
    key = hashlib.sha256(f"{base['key']}:{loader_sha}:{PATCH_VERSION}".encode()).hexdigest()[:16]
    meta_path = runtime_metadata_path(tree)
    meta = read_runtime_metadata(tree)
    if meta and meta.get("key") == key:
        return {**meta, "reused": True}
    started = time.perf_counter()
    sdk = find_sdk(progress)
    out = meta_path.parent
    out.mkdir(parents=True, exist_ok=True)
    apk = out / f"aiot-agent-{aiot.__version__}-{key[:8]}.apk"
    library = f"lib/{NATIVE_ABI}/{loader_name(tree)}"
    # The loader makes set_robust_list and rseq calls the app's seccomp filter traps: patched out.
    patched, sites = patch_syscalls(loader.read_bytes(), f"runtime {tree}'s loader")
    require_patched(sites, f"runtime {tree}'s loader")
    with tempfile.TemporaryDirectory(dir=out, prefix="build-") as tmp:
        work = Path(tmp)
        unaligned = work / "unaligned.apk"
        shutil.copyfile(base["unsigned"], unaligned)
        _step(progress, f"adding {library}")
        with zipfile.ZipFile(unaligned, "a", compression=zipfile.ZIP_DEFLATED) as zf:
            info = zipfile.ZipInfo(library, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o755 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, patched)
        certificate = _seal(sdk, Path(base["keystore"]), unaligned, work, apk, progress)
    for old in out.glob("aiot-agent-*.apk"):
        if old != apk:
            old.unlink(missing_ok=True)
    meta = {**{k: base[k] for k in ("package", "instrumentation", "component", "version",
                                     "version_code", "min_sdk", "target_sdk", "keystore")},
            "key": key, "base_key": base["key"], "base_sha256": base["sha256"], "path": str(apk),
            "runtime_tree": tree, "native_library": library, "loader_sha256": loader_sha,
            "loader_patched_sites": sites,
            "sha256": sha256_file(apk), "size_bytes": apk.stat().st_size,
            "certificate_sha256": certificate, "build_seconds": round(time.perf_counter() - started, 2),
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    _write_metadata(meta_path, meta)
    return {**meta, "reused": False}


def _seal(sdk, keystore: Path, unaligned: Path, work: Path, apk: Path, progress) -> str:
    """zipalign and sign ``unaligned`` into ``apk``; returns the signer certificate's SHA-256."""
    _step(progress, "zipalign")
    aligned = work / "aligned.apk"
    _run([sdk.zipalign, "-f", "-p", "4", str(unaligned), str(aligned)], "zipalign")
    _step(progress, "apksigner sign")
    signed = work / "signed.apk"
    _run([sdk.apksigner, "sign", "--v4-signing-enabled", "false", "--ks", str(keystore),
          "--ks-pass", f"pass:{KEY_PASS}", "--ks-key-alias", KEY_ALIAS, "--key-pass",
          f"pass:{KEY_PASS}", "--out", str(signed), str(aligned)], "apksigner sign")
    certificate = verify_signature(signed, sdk.apksigner)
    signed.replace(apk)
    return certificate


def _write_metadata(path: Path, meta: dict) -> None:
    write_text_atomic(path, json.dumps(meta, indent=2) + "\n")


def ensure_keystore(sdk, keystore: Path) -> Path:
    """The cache's debug keystore, generated by keytool the first time."""
    if keystore.is_file():
        return keystore
    part = keystore.with_name(keystore.name + ".part")
    part.unlink(missing_ok=True)
    _run([sdk.keytool, "-genkeypair", "-keystore", str(part), "-storetype", "PKCS12",
          "-storepass", KEY_PASS, "-keypass", KEY_PASS, "-alias", KEY_ALIAS, "-keyalg", "RSA",
          "-keysize", "2048", "-validity", "10000", "-dname", "CN=aiot debug, O=aiot"], "keytool")
    part.replace(keystore)
    return keystore


def verify_signature(apk: Path, apksigner: str | None = None) -> str:
    """``apksigner verify`` the APK; returns the signer certificate's SHA-256.

    Raises:
        AppBuildError: the signature does not verify (or apksigner is missing).
    """
    done = subprocess.run([apksigner or tool("apksigner"), "verify", "--print-certs", str(apk)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise AppBuildError(f"{apk.name} does not verify: {_last_line(done)}",
                            "rebuild it: aiot app build --force")
    for line in done.stdout.splitlines():
        if "certificate SHA-256 digest:" in line:
            return line.rsplit(":", 1)[1].strip()
    return ""


def manifest_facts(apk: Path) -> dict:
    """Package, version, instrumentation classes and the application's debuggable and
    extractNativeLibs flags the APK's manifest declares (aapt2)."""
    done = subprocess.run([tool("aapt2"), "dump", "xmltree", "--file", "AndroidManifest.xml", str(apk)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise AppBuildError(f"{apk.name} has no readable manifest: {_last_line(done)}")
    facts: dict = {"instrumentation": [], "package": None, "version_name": None,
                   "debuggable": False, "extract_native_libs": True}
    element = None
    for raw in done.stdout.splitlines():
        line = raw.strip()
        if line.startswith("E: "):
            element = line[3:].split(" ", 1)[0]
        elif line.startswith("A: "):
            name, _, value = line[3:].partition("=")
            name = name.split("(0x", 1)[0]  # android:name(0x01010003) → android:name
            value = value.split(" (Raw:", 1)[0].strip().strip('"')
            if element == "manifest" and name == "package":
                facts["package"] = value
            elif element == "manifest" and name.endswith("versionName"):
                facts["version_name"] = value
            elif element == "instrumentation" and name.endswith(":name"):
                facts["instrumentation"].append(value)
            elif element == "application" and name.endswith(":debuggable"):
                facts["debuggable"] = value == "true"
            elif element == "application" and name.endswith(":extractNativeLibs"):
                facts["extract_native_libs"] = value != "false"
    facts["instrumentation"] = [_qualify(facts["package"], n) for n in facts["instrumentation"]]
    return facts


def _qualify(package: str | None, name: str) -> str:
    return f"{package}{name}" if package and name.startswith(".") else name


def _step(progress, message: str) -> None:
    if progress:
        progress(message)


def _last_line(done: subprocess.CompletedProcess) -> str:
    lines = [line for line in (done.stderr + "\n" + done.stdout).splitlines() if line.strip()]
    return (lines[-1] if lines else f"exit {done.returncode}")[:300]


def _run(argv: list[str], what: str) -> None:
    if not shutil.which(argv[0]) and not Path(argv[0]).is_file():
        raise AppBuildError(f"{argv[0]} not found", "run scripts/bootstrap.sh")
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise AppBuildError(f"{what} failed: {_last_line(done)}", "run with --verbose for the command")
