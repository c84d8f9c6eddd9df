#!/bin/sh
# install.sh [DIR]: installs the npm packages pinned in package-lock.json for
# tests/cli/test_interop_otel.py into this directory's node_modules, or into DIR/node_modules
# (then run the test with WARREN_OTEL_NODE_MODULES=DIR/node_modules). Needs node, npm and the
# npm registry. Does nothing when node_modules was installed from this very lock file.
set -eu
here=$(cd "$(dirname "$0")" && pwd -P)
dir=${1:-$here}
command -v npm >/dev/null || { echo "install.sh: npm is missing (Debian: apt-get install nodejs npm)" >&2; exit 1; }
mkdir -p "$dir"
dir=$(cd "$dir" && pwd -P)
want=$(sha256sum <"$here/package-lock.json" | cut -d' ' -f1)
stamp=$dir/node_modules/.warren-lock.sha256
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then exit 0; fi
[ "$dir" = "$here" ] || cp "$here/package.json" "$here/package-lock.json" "$dir/"
cd "$dir"
npm ci --no-audit --no-fund --loglevel=error >/dev/null  # npm ci starts from an empty node_modules
echo "$want" >"$stamp"
