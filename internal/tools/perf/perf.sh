#!/usr/bin/env bash
# Performance run: index golang.org/x/tools and gonum from the module cache with assay (graph +
# metrics), against a bare packages.Load of the same patterns and mode (the floor) and against
# scip-go when it installs. Prints wall times, peak RSS, counts and the ratios the targets name.
#
#   bash internal/tools/perf/perf.sh [module@version ...]
set -euo pipefail
cd "$(dirname "$0")/../../.."
SCIP_GO_VERSION=v0.2.9
modules=("$@")
if [ ${#modules[@]} -eq 0 ]; then
  modules=(golang.org/x/tools@v0.52.0 gonum.org/v1/gonum@v0.17.0)
fi
bin="$(mktemp -d)"
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/perf" ./internal/tools/perf
scip=""
if GOBIN="$bin" GOFLAGS= go install "github.com/scip-code/scip-go/cmd/scip-go@$SCIP_GO_VERSION" 2>"$bin/scip-install.log"; then
  scip="$bin/scip-go"
else
  echo "scip-go $SCIP_GO_VERSION did not install: $(tail -1 "$bin/scip-install.log")"
  echo
fi
echo "# Performance run ($(date -u +%Y-%m-%dT%H:%MZ), $(go version | cut -d' ' -f3), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg))"
echo
"$bin/perf" -scip-go "$scip" "${modules[@]}"
