#!/usr/bin/env bash
# Regenerates screenshots/*.png from the real renderer: the `screenshots` example draws every
# console screen and overlay on a fresh demo workspace into ratatui's TestBackend and writes SVG;
# rsvg-convert (Debian package librsvg2-bin, with fonts-dejavu-core) turns each into a PNG.
#
#   scripts/screenshots.sh            # dark theme
#   scripts/screenshots.sh light      # another theme: files get a -light suffix
set -euo pipefail
cd "$(dirname "$0")/.."
theme="${1:-dark}"
if ! command -v rsvg-convert >/dev/null; then
  echo "installing rsvg-convert (librsvg2-bin) and DejaVu fonts" >&2
  sudo_cmd=""; [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq librsvg2-bin fonts-dejavu-core
fi
svg_dir="target/screenshots-svg/$theme"
rm -rf "$svg_dir"
cargo run --quiet --example screenshots -- "$svg_dir" "$theme" >/dev/null
mkdir -p screenshots
suffix=""; [ "$theme" != "dark" ] && suffix="-$theme"
for svg in "$svg_dir"/*.svg; do
  name="$(basename "$svg" .svg)"
  rsvg-convert --format png --output "screenshots/$name$suffix.png" "$svg"
  echo "screenshots/$name$suffix.png"
done
