#!/usr/bin/env bash
# Debian packages Mabillon needs on a fresh machine. Idempotent: installs only what is missing.
set -euo pipefail
need=()
# OCR runs tesseract in process (the tesserocr wheel bundles the library); the language data
# comes from Debian. The tesseract CLI is the baseline of bench/bench_parsers.py.
command -v tesseract >/dev/null 2>&1 || need+=(tesseract-ocr)
has_tessdata() { compgen -G "/usr/share/tesseract-ocr/*/tessdata/$1.traineddata" >/dev/null; }
has_tessdata fra || need+=(tesseract-ocr-fra)
# orientation detection for scans turned 90/180/270° (a dependency of tesseract-ocr; checked anyway)
has_tessdata osd || need+=(tesseract-ocr-osd)
[ -f /usr/share/fonts/truetype/dejavu/DejaVuSerif.ttf ] || need+=(fonts-dejavu-core)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v python3.11 >/dev/null 2>&1 || need+=(python3.11 python3.11-venv)
# libmagic for python-magic (the IIIF Image API validator's tests), npm for Mirador in the viewer test
ldconfig -p 2>/dev/null | grep -q "libmagic.so.1 " || need+=(libmagic1)
command -v npm >/dev/null 2>&1 || need+=(npm)
# Postgres server programs (initdb, pg_ctl) for deploy/stack.py and its test; Debian keeps them
# under /usr/lib/postgresql/<version>/bin, off PATH. runuser (util-linux) runs them as `postgres`.
command -v initdb >/dev/null 2>&1 || compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || need+=(postgresql)
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "installing Debian packages: ${need[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
