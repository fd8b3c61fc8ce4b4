#!/usr/bin/env bash
# Debian packages Mabillon needs on a fresh machine. Idempotent: installs only what is missing.
set -euo pipefail
need=()
command -v tesseract >/dev/null 2>&1 || need+=(tesseract-ocr)
if ! tesseract --list-langs 2>/dev/null | grep -qx fra; then need+=(tesseract-ocr-fra); fi
# orientation detection for scans turned 90/180/270° (a dependency of tesseract-ocr; checked anyway)
if ! tesseract --list-langs 2>/dev/null | grep -qx osd; then need+=(tesseract-ocr-osd); fi
[ -f /usr/share/fonts/truetype/dejavu/DejaVuSerif.ttf ] || need+=(fonts-dejavu-core)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v python3.11 >/dev/null 2>&1 || need+=(python3.11 python3.11-venv)
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "installing Debian packages: ${need[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
