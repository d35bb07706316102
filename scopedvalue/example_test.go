package scopedvalue_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/goloom/loom/scopedvalue"
)

// Keys are declared once, next to the code that binds them.
var (
	requestID = scopedvalue.New[string]("request-id")
	userName  = scopedvalue.New[string]("user")
	tenantID  = scopedvalue.New[int]("tenant")
)

// A request ID travels from the server loop to a handler and its helpers without being passed
// as an argument.
func Example() {
	handle := func(ctx context.Context) {
		logf(ctx, "loading order")
		logf(ctx, "done")
	}
	for _, id := range []string{"r-1", "r-2"} {
		scopedvalue.Where(requestID, id).Run(context.Background(), handle)
	}
	logf(context.Background(), "idle")
	// Output:
	// [r-1] loading order
	// [r-1] done
	// [r-2] loading order
	// [r-2] done
	// [-] idle
}

func logf(ctx context.Context, format string, args ...any) {
	fmt.Printf("["+requestID.OrElse(ctx, "-")+"] "+format+"\n", args...)
}

// Several values are bound at once with And; a nested binding shadows one of them for its own
// extent only.
func Example_severalBindings() {
	bindings := scopedvalue.Where(requestID, "r-7").
		And(scopedvalue.Where(userName, "ada")).
		And(scopedvalue.Where(tenantID, 42))
	bindings.Run(context.Background(), func(ctx context.Context) {
		fmt.Println(requestID.Get(ctx), userName.Get(ctx), tenantID.Get(ctx))
		scopedvalue.Where(userName, "admin").Run(ctx, func(ctx context.Context) {
			fmt.Println(requestID.Get(ctx), userName.Get(ctx), tenantID.Get(ctx))
		})
		fmt.Println(requestID.Get(ctx), userName.Get(ctx), tenantID.Get(ctx))
	})
	// Output:
	// r-7 ada 42
	// r-7 admin 42
	// r-7 ada 42
}

func ExampleNew() {
	traceID := scopedvalue.New[[16]byte]("trace-id")
	fmt.Println(traceID.Name())
	// Output: trace-id
}

func ExampleKey_Get() {
	scopedvalue.Where(requestID, "r-42").Run(context.Background(), func(ctx context.Context) {
		fmt.Println(requestID.Get(ctx))
	})
	defer func() { fmt.Println(recover()) }()
	requestID.Get(context.Background())
	// Output:
	// r-42
	// scopedvalue: "request-id" is not bound
}

func ExampleKey_Lookup() {
	ctx := scopedvalue.Where(userName, "").Context(context.Background())
	name, ok := userName.Lookup(ctx)
	fmt.Printf("%q %v\n", name, ok)
	_, ok = tenantID.Lookup(ctx)
	fmt.Println(ok)
	// Output:
	// "" true
	// false
}

func ExampleKey_OrElse() {
	ctx := context.Background()
	fmt.Println(userName.OrElse(ctx, "anonymous"))
	ctx = scopedvalue.Where(userName, "ada").Context(ctx)
	fmt.Println(userName.OrElse(ctx, "anonymous"))
	// Output:
	// anonymous
	// ada
}

func ExampleKey_IsBound() {
	ctx := context.Background()
	fmt.Println(tenantID.IsBound(ctx))
	ctx = scopedvalue.Where(tenantID, 0).Context(ctx)
	fmt.Println(tenantID.IsBound(ctx))
	// Output:
	// false
	// true
}

func ExampleKey_Name() {
	fmt.Println(requestID.Name(), tenantID.Name())
	// Output: request-id tenant
}

func ExampleKey_String() {
	fmt.Println(requestID, tenantID)
	// Output: scopedvalue.Key[string]("request-id") scopedvalue.Key[int]("tenant")
}

func ExampleWhere() {
	withUser := scopedvalue.Where(userName, "ada") // binds nothing yet
	withUser.Run(context.Background(), func(ctx context.Context) {
		fmt.Println("hello,", userName.Get(ctx))
	})
	// Output: hello, ada
}

func ExampleCarrier_And() {
	base := scopedvalue.Where(userName, "ada").And(scopedvalue.Where(tenantID, 1))
	moved := base.And(scopedvalue.Where(tenantID, 2)) // the later binding wins; base is unchanged
	for _, c := range []scopedvalue.Carrier{base, moved} {
		c.Run(context.Background(), func(ctx context.Context) {
			fmt.Println(userName.Get(ctx), tenantID.Get(ctx))
		})
	}
	// Output:
	// ada 1
	// ada 2
}

func ExampleCarrier_Run() {
	ctx := scopedvalue.Where(userName, "ada").Context(context.Background())
	func() {
		defer func() { recover() }()
		scopedvalue.Where(userName, "mallory").Run(ctx, func(ctx context.Context) {
			fmt.Println("inside:", userName.Get(ctx))
			panic("boom")
		})
	}()
	fmt.Println("after:", userName.Get(ctx)) // ctx was never changed
	// Output:
	// inside: mallory
	// after: ada
}

func ExampleCall() {
	lookupOrder := func(ctx context.Context) (string, error) {
		if tenantID.Get(ctx) != 42 {
			return "", errors.New("wrong tenant")
		}
		return "order 7 for " + userName.Get(ctx), nil
	}
	order, err := scopedvalue.Call(context.Background(),
		scopedvalue.Where(userName, "ada").And(scopedvalue.Where(tenantID, 42)),
		lookupOrder)
	fmt.Println(order, err)
	// Output: order 7 for ada <nil>
}

// Middleware binds onto the context it passes on, here a plain function chain; with net/http it
// is next.ServeHTTP(w, r.WithContext(scopedvalue.Where(requestID, id).Context(r.Context()))).
func ExampleCarrier_Context() {
	handler := func(ctx context.Context) {
		fmt.Println(requestID.Get(ctx), userName.OrElse(ctx, "anonymous"))
	}
	withRequestID := func(next func(context.Context)) func(context.Context) {
		return func(ctx context.Context) {
			next(scopedvalue.Where(requestID, "r-42").Context(ctx))
		}
	}
	withRequestID(handler)(context.Background())
	// Output: r-42 anonymous
}
