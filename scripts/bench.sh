#!/usr/bin/env bash
# Runs the packages' benchmarks, peers side by side, -count=10 each, and summarizes them with
# benchstat (installed from the module proxy if missing). Takes about half an hour on 2 cores.
#
#   scripts/bench.sh [OUTDIR]     # default OUTDIR: bench-results
#
# The machines here are shared and noisy: quote medians and ratios between peers of one run.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-bench-results}
mkdir -p "$out"
export PATH="$(go env GOPATH)/bin:$PATH"
command -v benchstat >/dev/null || go install golang.org/x/perf/cmd/benchstat@latest

run() { # name package pattern [extra go test flags...]
	local name=$1 pkg=$2 pattern=$3
	shift 3
	echo "== $name: go test -run='^\$' -bench='$pattern' -benchmem -count=10 $* $pkg" >&2
	go test -run='^$' -bench="$pattern" -benchmem -count=10 -timeout=60m "$@" "$pkg" > "$out/$name.txt"
	benchstat "$out/$name.txt" > "$out/$name.stat"
}

run semaphore ./semaphore '^Benchmark(Uncontended|Contended)$'
run semaphore-fairness ./semaphore '^BenchmarkFairness$' -benchtime=3x
run scopedvalue ./scopedvalue '.'
run scope ./scope '^Benchmark(ForkJoin|Map)$'
# 100k parked goroutines slow every later benchmark in the same process: one process each.
run scope-parked ./scope '^BenchmarkParked$' -benchtime=1x
run scope-parked-memory ./scope '^BenchmarkParkedMemory$' -benchtime=1x
run limiter ./limiter '^Benchmark(Do|DoParallel|DoTaskTimeout|Throughput)$'
run limiter-memory ./limiter '^BenchmarkWaitingMemory$' -benchtime=1x
echo "results in $out/" >&2
