package registry_test

import (
	"context"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/goloom/loom/internal/registry"
	"github.com/goloom/loom/internal/registry/regtest"
)

// Dumps taken while scopes open, fork, complete and join on every core see consistent records
// (each scope's running list and counts copied together), never a scope whose Join had returned
// before the dump began, always the right parent; and once the churn stops nothing is left. Run
// under -race, this is also the test that the copy of an entry is synchronized with the forks
// and completions that change it.
func TestCollectRacingChurn(t *testing.T) {
	enable(t, registry.Scopes|registry.Labels)
	workers := 2 * runtime.GOMAXPROCS(0)
	const rounds = 300
	var gone sync.Map // IDs of scopes whose Join has returned
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range workers {
		wg.Go(func() {
			for i := range rounds {
				if t.Failed() {
					return
				}
				root := regtest.Open(t.Context(), regtest.Options{Name: "root", Policy: registry.AwaitAll})
				parent := strconv.FormatUint(root.Record().ID(), 10)
				n := 1 + (w+i)%7
				var subtasks []*regtest.Subtask
				for k := range n {
					subtasks = append(subtasks, root.Go(func(ctx context.Context) error {
						if k%3 == 0 {
							child := regtest.Open(ctx, regtest.Options{Name: "child-" + parent})
							child.Go(func(context.Context) error { runtime.Gosched(); return nil })
							child.Go(func(context.Context) error { return nil })
							id := child.Record().ID()
							if err := child.Join(); err != nil {
								return err
							}
							gone.Store(id, true)
						}
						if k%4 == 1 {
							runtime.Gosched()
						}
						if k == 5 && i%2 == 0 {
							return regtest.ErrBoom // cancels the root: later forks are refused
						}
						return nil
					}))
				}
				failed := int64(0)
				for _, st := range subtasks {
					if st.Wait() != nil {
						failed++
					}
				}
				// Every subtask has completed: its record says so exactly.
				id := root.Record().ID()
				for _, r := range collect() {
					if r.ID == id {
						assert.Equal(t, [3]int64{0, int64(n), failed}, [3]int64{r.Running, r.Succeeded + r.Failed + r.CancelledSubtasks, r.Failed})
						assert.Empty(t, r.Tasks)
					}
				}
				if err := root.Join(); failed == 0 {
					assert.NoError(t, err)
				}
				gone.Store(id, true)
			}
		})
	}
	snapshots := 0
	var snapper sync.WaitGroup
	snapper.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			var left []uint64
			gone.Range(func(k, _ any) bool { left = append(left, k.(uint64)); return true })
			recs := collect()
			snapshots++
			checkRecords(t, recs, left)
			if t.Failed() {
				return
			}
		}
	})
	wg.Wait()
	close(stop)
	snapper.Wait()
	assert.Empty(t, collect(), "nothing is left once every scope has been joined")
	assert.Positive(t, snapshots)
}

func checkRecords(t *testing.T, recs []registry.ScopeRecord, left []uint64) {
	t.Helper()
	ids := make(map[uint64]bool, len(recs))
	for _, r := range recs {
		ids[r.ID] = true
		forks := r.Running + r.Succeeded + r.Failed + r.CancelledSubtasks
		for _, c := range []int64{r.Running, r.Succeeded, r.Failed, r.CancelledSubtasks} {
			if !assert.GreaterOrEqual(t, c, int64(0), "scope #%d: a count below zero", r.ID) {
				return
			}
		}
		if !assert.LessOrEqual(t, int64(len(r.Tasks)), r.Running, "scope #%d: running list and counts copied together", r.ID) {
			return
		}
		var prev int64
		for _, tr := range r.Tasks {
			if !assert.Greater(t, tr.Seq, prev, "seqs increase") || !assert.LessOrEqual(t, tr.Seq, forks, "a seq is a fork") {
				return
			}
			prev = tr.Seq
		}
		if p, ok := strings.CutPrefix(r.Name, "child-"); ok {
			if !assert.Equal(t, p, strconv.FormatUint(r.Parent, 10), "scope #%d's parent", r.ID) {
				return
			}
		}
	}
	for _, id := range left {
		if !assert.False(t, ids[id], "scope #%d is listed after its Join returned", id) {
			return
		}
	}
}

// Failures and cancellations racing dumps: as no subtask succeeds, a dump must show no success
// (successes are what is left of the completions once the rarer outcomes are taken off, so an
// outcome counted before its completion would show as a negative success), and no count below
// zero. Driven on the record directly, so that completions come as fast as they can.
func TestCountsRacingCompletions(t *testing.T) {
	enable(t, registry.Scopes)
	inner, cancel := context.WithCancelCause(t.Context())
	defer cancel(nil)
	e := registry.Open(inner, registry.ScopeInfo{Name: "outcomes"})
	defer e.Leave()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				var task registry.Task
				o := []registry.Outcome{registry.Failed, registry.Cancelled}[(i+w)%2]
				if i%7 == 0 {
					e.Refuse(o)
					continue
				}
				e.Fork(&task)
				e.Done(e.Enter(&task, noop), o)
			}
		})
	}
	for range 20_000 {
		recs := collect()
		if !assert.Len(t, recs, 1) {
			break
		}
		r := recs[0]
		if !assert.True(t, r.Running >= 0 && r.Succeeded == 0 && r.Failed >= 0 && r.CancelledSubtasks >= 0,
			"counts %+v", r) {
			break
		}
	}
	close(stop)
	wg.Wait()
}
