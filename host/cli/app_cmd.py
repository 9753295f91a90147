"""``aiot app``: build the Android app offline, show it, install it on a phone."""

from __future__ import annotations

from typing import Annotated

import typer

from aiot.core.errors import UsageError
from aiot.host.app.build import build, require_built, runtime_builds
from aiot.host.app.runtime import install_app
from aiot.host.cli._output import message, out, print_json, spinner
from aiot.host.cli.options import JsonOpt
from aiot.host.devices.resolve import open_transport

app = typer.Typer(no_args_is_help=True,
                  help="The aiot Android app: build its APK offline, show it, install it (for --via app).")


def _print_facts(meta: dict, as_json: bool) -> None:
    if as_json:
        print_json(meta)
        return
    for key in ("path", "package", "instrumentation", "version", "version_code", "sha256",
                "size_bytes", "certificate_sha256", "min_sdk", "target_sdk", "built_at",
                "build_seconds"):
        if key in meta:
            out.print(f"{key:<19} {meta[key]}")


@app.command("build")
def build_command(
    force: Annotated[bool, typer.Option("--force", help="Build again even when sources are unchanged.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Build and sign the APK from android_app/ (javac, dx, aapt2, zipalign, apksigner)."""
    with spinner("building the aiot app…") as status:
        meta = build(force=force, progress=lambda step: status.update(f"{step}…"))
    if not as_json:
        how = "unchanged, reused" if meta.get("reused") else f"built in {meta['build_seconds']} s"
        message(f"aiot app {meta['version']} ({how}): {meta['size_bytes']} bytes")
    _print_facts(meta, as_json)


@app.command("info")
def info_command(as_json: JsonOpt = False) -> None:
    """The built APK: version, sha256, package, instrumentation class and path; and the phone
    APKs built from it, each with one runtime's loader."""
    meta = require_built()
    phones = [{k: m[k] for k in ("runtime_tree", "native_library", "sha256", "size_bytes", "path")}
              for m in runtime_builds()]
    _print_facts({**meta, "runtime_builds": phones}, as_json)
    if not as_json:
        for phone in phones:
            out.print(f"{'with runtime':<19} {phone['runtime_tree']}: {phone['sha256'][:16]}…, "
                      f"{phone['size_bytes']} bytes, {phone['path']}")


@app.command("install")
def install_command(
    device: Annotated[str, typer.Argument(help="An Android device (aiot devices list).")],
    as_json: JsonOpt = False,
) -> None:
    """Install the APK on DEVICE with pm install (builds it first if needed).

    On a phone set up with aiot's runtime, the APK carries that runtime's loader (the one file
    an Android 10+ app may execute) and the runtime is copied into the app's files."""
    transport = open_transport(device)
    try:
        if transport.kind != "adb":
            raise UsageError(f"'{transport.name}' is not an Android device ({transport.kind})",
                             "the app installs on devices reached over ADB")
        with spinner(f"installing the aiot app on {transport.name}…") as status:
            done = install_app(transport, progress=lambda step: status.update(f"{step}…"))
    finally:
        transport.close()
    if as_json:
        print_json(done)
    else:
        carries = (f", carrying runtime {done['runtime_tree']}'s loader" if done.get("runtime_tree")
                   else "")
        message(f"aiot app {done['version']} installed on {done['device']} ({done['pm']}){carries}; "
                f"measure through it with --via app")
