#!/usr/bin/env bash
# gooseBit, a DDI server nobody here wrote (PyPI `goosebit`, pinned), for the hawkBit
# backend's tests (tests/it/hawkbit_goosebit.rs, docs/hawkbit.md).
#
#   bash scripts/lib/goosebit.sh install DIR   a venv at DIR/venv with goosebit, made once
#
# The test starts it itself: DIR/venv/bin/python -m uvicorn goosebit:app on 127.0.0.1 only,
# its database and artifacts in the test's own directory, after `aerich upgrade` (gooseBit's
# database needs its migrations before the first start). scripts/test-cargo.sh runs
# `install` and exports GOOSEBIT_VENV; under CI=true the test fails without it.
set -euo pipefail
GOOSEBIT_VERSION=0.2.12
cmd=${1:-}
dir=${2:-}
[ "$cmd" = install ] && [ -n "$dir" ] || {
	echo "usage: $0 install DIR" >&2
	exit 2
}
venv=$dir/venv
if "$venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('goosebit') != '$GOOSEBIT_VERSION')" 2>/dev/null; then
	exit 0
fi
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$dir"
PY=/usr/bin/python3
if ! "$PY" -m venv "$venv" >/dev/null 2>&1; then
	# shellcheck source=scripts/lib/apt.sh
	. "$here/apt.sh"
	apt_need_file "/usr/lib/python3.$("$PY" -c "import sys; print(sys.version_info.minor)")/ensurepip/__init__.py" python3-venv
	apt_install_needed
	"$PY" -m venv "$venv"
fi
"$venv/bin/pip" install -q --disable-pip-version-check "goosebit==$GOOSEBIT_VERSION"
"$venv/bin/python" -c "import goosebit, aerich" || {
	echo "goosebit: installed, but it does not import" >&2
	exit 1
}
