#!/usr/bin/env bash
# Install the Debian packages Open3D needs, only when they are missing (idempotent).
#   libusb-1.0-0                      : open3d's pybind module links against it (import fails without)
#   libvulkan1 mesa-vulkan-drivers    : Open3D's OffscreenRenderer (headless PNG rendering)
#   libgl1 libgomp1                   : OpenGL / OpenMP runtimes used by the legacy visualizer and KD-trees
# With --test also:
#   chromium                          : opens the HTML report headless (tests/viz/test_report.py;
#                                       the test skips without it)
set -u
need=()
have_lib() { ldconfig -p 2>/dev/null | grep -q "$1"; }
have_lib 'libusb-1.0.so.0' || need+=(libusb-1.0-0)
have_lib 'libvulkan.so.1' || need+=(libvulkan1)
[ -e /usr/share/vulkan/icd.d/lvp_icd.x86_64.json ] || [ -n "$(ls /usr/share/vulkan/icd.d/ 2>/dev/null)" ] || need+=(mesa-vulkan-drivers)
have_lib 'libGL.so.1' || need+=(libgl1)
have_lib 'libgomp.so.1' || need+=(libgomp1)
if [ "${1:-}" = "--test" ]; then command -v chromium >/dev/null 2>&1 || need+=(chromium); fi
[ ${#need[@]} -eq 0 ] && exit 0
echo "pcreg setup: installing Debian packages: ${need[*]}"
if [ "$(id -u)" != 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then SUDO=sudo; else
    echo "pcreg setup: cannot install ${need[*]} (not root and no passwordless sudo)." >&2
    echo "  Ask an administrator to run: apt-get install -y ${need[*]}" >&2
    echo "  Without libusb-1.0-0 'import open3d' fails; without the Vulkan packages only offscreen rendering is lost." >&2
    exit 0
  fi
else SUDO=; fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "pcreg setup: no apt-get here; install the equivalents of: ${need[*]}" >&2
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >/dev/null && $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null \
  || { echo "pcreg setup: apt-get install ${need[*]} failed" >&2; exit 1; }
