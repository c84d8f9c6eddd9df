#!/usr/bin/env bash
# Stops the nodes cluster-start.sh started in DIR. Usage: cluster-stop.sh DIR [--purge]
set -uo pipefail
DIR=$(realpath -m "${1:?usage: cluster-stop.sh DIR [--purge]}")
here=$(dirname "$0")
for i in 3 2 1; do "$here/broker-stop.sh" "$DIR/n$i"; done
if [[ ${2:-} == --purge ]]; then rm -rf "$DIR"; fi
exit 0
