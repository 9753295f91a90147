#!/usr/bin/env bash
# Set up everything aiot needs on a fresh Debian machine (root) or an existing checkout:
# Debian packages, a virtualenv in .venv and the aiot package with its extras.
# Idempotent: a second run only checks. Usage: scripts/bootstrap.sh [extras]   (default: all,test,docs)
set -euo pipefail
cd "$(dirname "$0")/.."

EXTRAS="${1:-all,test,docs}"
PYTHON="${PYTHON:-python3.11}"
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
VENV=.venv

apt_install() {
  local missing=()
  for pkg in "$@"; do dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -ne 0 ]; then
    echo "bootstrap: please install Debian packages: ${missing[*]} (needs root)" >&2
    return 1
  fi
  echo "bootstrap: apt-get install ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
}

# Fashion-MNIST (the demo's data set) comes from Debian, not from a download at run time;
# sshd, ssh and adb back the emulated SSH and ADB devices (`aiot emulator`) and their tests;
# qemu-user-static and mmdebstrap give them an aarch64 userland (`aiot emulator start ... --arch arm64`);
# chromium opens `aiot report`'s page headless in its test (the page loads, every image renders);
# chromium-driver lets Selenium drive it through `aiot lab view`'s live pages in theirs.
apt_install dataset-fashion-mnist openssh-server openssh-client adb qemu-user-static mmdebstrap chromium \
  chromium-driver
# The Android app (`aiot app build`, offline): javac/keytool, aapt2/zipalign/apksigner, the
# framework resources aapt2 links against, and dexdump (its test checks the APK with it).
apt_install default-jdk-headless android-sdk-build-tools android-framework-res dexdump

if [ ! -x "$VENV/bin/python" ]; then
  echo "bootstrap: creating $VENV with $($PYTHON --version)"
  "$PYTHON" -m venv "$VENV"
fi

stamp="$VENV/.aiot-installed"
want="$(cat pyproject.toml | sha256sum | cut -c1-16) $EXTRAS"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  PIP="$VENV/bin/python -m pip --disable-pip-version-check -q"
  # torch first and pinned, by pip: the CPU build on disk (pip's configuration finds it; uv
  # does not look there). A looser request would let a dependency pull a multi-GB CUDA build.
  $PIP install --no-compile "torch==2.13.0" uv
  # The rest by uv, which downloads and unpacks in parallel: the same packages that pip
  # resolves took pip 90-150 s on one core here, uv about 15 s. torch stays as installed.
  UV="$VENV/bin/uv pip install --python $VENV/bin/python -q"
  $UV -e ".[$EXTRAS]"
  case ",$EXTRAS," in
    *,all,*|*,robust,*)
      # Their declared dependencies (torchvision, the GUI opencv-python, an old requests) break
      # this environment; what they really import is already there through the robust extra.
      $UV --no-deps "torchattacks==3.5.1" "imagecorruptions-imaug==1.1.5" ;;
  esac
  # The installed modules' .pyc files, compiled on every core at once (pip compiles one after
  # another: 87 s here, 48 s on 2 cores). They must exist: where PYTHONDONTWRITEBYTECODE is
  # set, as on this project's CI machines, Python never writes one itself, and each process
  # that imports torch would compile its sources again (fresh-interpreter tests took 3x as long).
  # A module that does not compile (a template, a Python 2 file) is left as it is, as pip does.
  site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
  "$VENV/bin/python" -m compileall -q -j 0 "$site" >/dev/null || true
  echo "$want" > "$stamp"
fi
# aiot's own modules, byte-compiled as pip compiles an installed package's: the editable
# install leaves them as sources, and under PYTHONDONTWRITEBYTECODE every process would compile
# those it imports again (0.2 s of CPU per start of the CLI). Up-to-date files are skipped;
# a source edited later is compiled in memory until the next bootstrap, as before.
"$VENV/bin/python" -m compileall -q src/aiot core models converters device_agent host >/dev/null

# Isolated toolchains (own venvs, cached by their pinned requirements; a no-op when present):
# LCE needs TensorFlow and NumPy < 2, ExecuTorch NumPy 2 and a large dependency set.
# AIOT_TOOLCHAINS="" skips them (their converters then report "unavailable").
for toolchain in ${AIOT_TOOLCHAINS-lce executorch}; do
  "$VENV/bin/aiot" toolchains install "$toolchain"
done
# The APK of android_app/ (`aiot run --via app`): the first build fetches android.jar and dx
# from Debian bullseye into the cache (an isolated apt configuration), then takes ~5 s.
"$VENV/bin/aiot" app build >/dev/null
echo "bootstrap: ready ($VENV)"
