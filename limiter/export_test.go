package limiter

import "context"

// A TestStep is an admission step for tests of the steps' life: Take runs as the step's take,
// under the wait's ctx (ended also by Shutdown); a non-nil Hold is what the call holds until its
// task is done.
type TestStep struct {
	Take func(ctx context.Context) (*TestHold, error)
}

// A TestHold records what the call's life does with it.
type TestHold struct {
	Lost  func() error // the hold's verdict, asked when fn has returned; nil: it holds
	Given func()       // called when the call gives it back
}

func (s TestStep) take(w stepWait) (hold, context.Context, error) {
	h, err := s.Take(w.ctx)
	if err != nil || h == nil {
		return nil, w.parent, err
	}
	return h, w.parent, nil
}

func (s TestStep) describe(add func(name, value string)) { add("test", "step") }

func (h *TestHold) lost() error {
	if h.Lost == nil {
		return nil
	}
	return h.Lost()
}

func (h *TestHold) give() {
	if h.Given != nil {
		h.Given()
	}
}

// WithTestSteps makes steps the limiter's admission steps after the slot, in order.
func WithTestSteps(steps ...TestStep) Option {
	return func(c *config) {
		c.permit, c.token = nil, nil
		for i, s := range steps {
			switch i {
			case 0:
				c.permit = s
			case 1:
				c.token = s
			}
		}
	}
}
