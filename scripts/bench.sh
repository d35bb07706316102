#!/usr/bin/env bash
# Reproduces every benchmark figure in the README. Each set runs -count=10 and is summarized with
# benchstat (installed from the module proxy if missing):
#
#   - the bench module (bench/): loom and its peers as sibling sub-benchmarks (impl=...), so each
#     set's .stat file has one column per implementation and its ratio to loom's, from one run;
#   - the load harness (bench/cmd/loadtest -quick): the virtual-thread experiments, run once;
#   - loom's own benchmarks beside its code (root-*): loom alone, the baseline for comparing a
#     change with the code before it (benchstat old.txt new.txt).
#
# Usage, from anywhere in the checkout:
#
#   scripts/bench.sh [OUTDIR]                  # default OUTDIR: bench-results; about an hour on 2 cores
#   BENCH_QUICK=1 scripts/bench.sh /tmp/b      # -count=1, -benchtime=100x, -short: checks that it all runs
#   BENCH_ONLY='^scope' scripts/bench.sh       # only the sets whose name matches the regexp
#
# The machines here are shared and noisy: quote medians, and ratios between the columns of one set.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
out=${1:-bench-results}
mkdir -p "$out"
out=$(cd "$out" && pwd)
export PATH="$(go env GOPATH)/bin:$PATH"
command -v benchstat >/dev/null || go install golang.org/x/perf/cmd/benchstat@latest

quick=${BENCH_QUICK:-}
only=${BENCH_ONLY:-.}
count=10
[[ -n "$quick" ]] && count=1

{
	go version
	echo "nproc: $(nproc 2>/dev/null || echo '?')"
	uname -srm
	grep -m1 'model name' /proc/cpuinfo 2>/dev/null || true
	git -C "$root" rev-parse --short HEAD 2>/dev/null || true
} > "$out/machine.txt"

# run NAME DIR PACKAGE PATTERN [BENCHTIME]: one set of benchmarks, in a process of its own.
# BENCHTIME is the set's -benchtime (default: go test's 1s); BENCH_QUICK makes it 100x, or 1x
# for a set that counts iterations (NNNx).
run() {
	local name=$1 dir=$2 pkg=$3 pattern=$4 benchtime=${5:-}
	[[ "$name" =~ $only ]] || return 0
	local flags=(-run='^$' -bench="$pattern" -benchmem -count="$count" -timeout=60m)
	if [[ -n "$quick" ]]; then
		flags+=(-short)
		if [[ "$benchtime" == *x ]]; then benchtime=1x; else benchtime=100x; fi
	fi
	[[ -n "$benchtime" ]] && flags+=(-benchtime="$benchtime")
	echo "== $name: (cd $dir && go test ${flags[*]} $pkg)" >&2
	(cd "$root/$dir" && go test "${flags[@]}" "$pkg") > "$out/$name.txt"
	# Sub-benchmarks named impl=X become columns, the first (loom's) the base of the ratios.
	if grep -q '/impl=' "$out/$name.txt"; then
		benchstat -col /impl "$out/$name.txt" > "$out/$name.stat"
	elif grep -q '/features=' "$out/$name.txt"; then
		benchstat -col /features "$out/$name.txt" > "$out/$name.stat"
	else
		benchstat "$out/$name.txt" > "$out/$name.stat"
	fi
}

# loom against its peers: the README's benchmark table.
run semaphore-uncontended bench . '^BenchmarkSemaphoreUncontended$'
run semaphore-contended bench . '^BenchmarkSemaphoreContended$'
run semaphore-fairness bench . '^BenchmarkSemaphoreFairness$' 3x
run scopedvalue bench . '^BenchmarkScopedValue'
run scope-forkjoin bench . '^BenchmarkScopeForkJoin$'
run scope-map bench . '^BenchmarkScopeMap$'
# 100k parked goroutines slow every later benchmark in the same process: one process each.
run scope-parked bench . '^BenchmarkScopeParked$' 1x
run scope-parked-memory bench . '^BenchmarkScopeParkedMemory$' 1x
run limiter-do bench . '^BenchmarkLimiter(Do|DoParallel)$'
run limiter-task-timeout bench . '^BenchmarkLimiterDoTaskTimeout$'
run limiter-rate bench . '^BenchmarkLimiterRate$'
run limiter-throughput bench . '^BenchmarkLimiterThroughput$'
run scope-limit-throughput bench . '^BenchmarkScopeLimitThroughput$'
run limiter-waiting-memory bench . '^BenchmarkLimiterWaitingMemory$' 1x

# The virtual-thread experiments: the README's table of the articles' figures beside loom's.
if [[ loadtest =~ $only ]]; then
	args=(-quick -progress=false)
	[[ -n "$quick" ]] && args+=(-scale 0.1)
	echo "== loadtest: (cd bench && go run ./cmd/loadtest ${args[*]})" >&2
	(cd "$root/bench" && go run ./cmd/loadtest "${args[@]}") > "$out/loadtest.txt"
fi

# loom alone, beside its code.
run root-scope . ./scope '.'
run root-scopedvalue . ./scopedvalue '.'
run root-semaphore . ./semaphore '.'
run root-limiter . ./limiter '.'
run root-adaptive . ./internal/window '.'
# What inspection costs, each feature set a column (features=off the base of the ratios).
run root-inspect . ./inspect '.'
# The fleet client on its in-memory backend, beside a process-local semaphore.
run root-fleet . ./fleet/... '.'
# On Redis, in the nested module fleet/redisfleet (go-redis stays out of the root module), against
# a redis-server the benchmarks start on loopback: the fleet's round trips beside bare EVALSHAs,
# scripts per permit under contention; then real processes sharing a capacity, 2 s of traffic
# per iteration.
run fleet-redis fleet/redisfleet . '^Benchmark(AcquireRelease|Contention|RateReserve)$' 5000x
run fleet-throughput fleet/redisfleet . '^BenchmarkThroughput$' 1x

echo "results in $out/ (NAME.txt: go test output, NAME.stat: benchstat)" >&2
