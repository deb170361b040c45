#!/bin/sh
# Installs the pinned zig into DIR (DIR/zig, DIR/lib) from the ziglang wheel on PyPI, without
# pip: the wheel is a zip file, and pip is the problem (cross 0.2.5's images have pip 9, too
# old for the wheel's manylinux tag; Ubuntu 24.04's pip refuses system installs, PEP 668).
#   cross/install-zig.sh DIR [WHEEL]    WHEEL: an already downloaded wheel (checked the same)
set -eu
ZIG_VERSION=0.13.0.post1
WHEEL=ziglang-$ZIG_VERSION-py3-none-manylinux_2_12_x86_64.manylinux2010_x86_64.musllinux_1_1_x86_64.whl
WHEEL_SHA256=5ff0f2cb0d583b4f94820909612043f62e4d1d9a8bed77ceec088a01fc2ef015
# The file's address on PyPI (as `pip download ziglang==0.13.0.post1` fetches it).
WHEEL_URL=https://files.pythonhosted.org/packages/e1/15/88cd364004181c9db4e4b295df2184edbaed1433226cb315c2e058c00c4a/$WHEEL

dir=${1:?usage: $0 DIR [WHEEL]}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ -n "${2:-}" ]; then
	cp "$2" "$tmp/$WHEEL"
else
	curl -fsSL --proto '=https' -o "$tmp/$WHEEL" "$WHEEL_URL"
fi
echo "$WHEEL_SHA256  $tmp/$WHEEL" | sha256sum -c - >/dev/null || { echo "install-zig: $WHEEL: checksum mismatch" >&2; exit 1; }
unzip -q "$tmp/$WHEEL" 'ziglang/*' -d "$tmp/x"
rm -rf "$dir"
mkdir -p "$(dirname "$dir")"
mv "$tmp/x/ziglang" "$dir"
chmod 0755 "$dir/zig"
"$dir/zig" version
