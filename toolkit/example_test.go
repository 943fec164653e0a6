package toolkit_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/toolplane/toolplane/toolkit"
)

type ForecastInput struct {
	City  string `json:"city" description:"City name, e.g. Paris, France"`
	Days  int    `json:"days,omitempty" tool:"minimum=1;maximum=14" default:"3"`
	Units string `json:"units,omitempty" tool:"enum=metric|imperial" default:"metric"`
}

type Forecast struct {
	City  string `json:"city"`
	Days  int    `json:"days"`
	Units string `json:"units"`
}

// A typed function becomes a tool; its schema comes from the struct tags.
// The model's sloppy arguments are repaired: a number sent as a string, an
// enum in the wrong case, a trailing comma, and a missing optional field
// that takes its default.
func ExampleNew() {
	forecast, err := toolkit.New("get_forecast", "Forecasts the weather.",
		func(ctx context.Context, in ForecastInput) (Forecast, error) {
			return Forecast(in), nil
		}, toolkit.ReadOnly())
	if err != nil {
		panic(err)
	}
	var reg toolkit.Registry
	if err := reg.Add(forecast); err != nil {
		panic(err)
	}
	res, err := reg.Call(context.Background(), "get_forecast", json.RawMessage(`{"city":"Oslo","units":"METRIC","days":"5",}`))
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Text())
	fmt.Println(string(res.StructuredContent))
	// Output:
	// {"city":"Oslo","days":5,"units":"metric"}
	// {"city":"Oslo","days":5,"units":"metric"}
}

// A tool with no output answers "Success"; bad arguments are explained to
// the model, every problem at once.
func ExampleNewAction() {
	type Input struct {
		ID    int64  `json:"id" description:"Customer ID"`
		Email string `json:"email" tool:"format=email"`
	}
	update, err := toolkit.NewAction("update_email", "Changes a customer's email address.",
		func(ctx context.Context, in Input) error { return nil },
		toolkit.Idempotent(), toolkit.Destructive(false))
	if err != nil {
		panic(err)
	}
	var reg toolkit.Registry
	_ = reg.Add(update)

	ok, _ := reg.Call(context.Background(), "update_email", json.RawMessage(`{"id":9007199254740993,"email":"ada@example.com"}`))
	fmt.Println(ok.Text())

	bad, _ := reg.Call(context.Background(), "update_email", json.RawMessage(`{"id":1.5,"mail":"ada@example.com"}`))
	fmt.Println(bad.IsError)
	fmt.Println(bad.Text())
	// Output:
	// Success
	// true
	// invalid arguments for tool "update_email":
	// - $.email: expected a string (required), received nothing
	// - $.id: expected an integer, received 1.5
	// - $.mail: expected a known argument name, received unknown name "mail" (did you mean "email"?); valid names are email, id
}

type OrderService struct{}

type OrderQuery struct {
	ID int64 `json:"id" description:"Order number"`
}

type Order struct {
	ID     int64  `json:"id"`
	Status string `json:"status"`
}

func (OrderService) GetOrder(ctx context.Context, q OrderQuery) (Order, error) {
	return Order{ID: q.ID, Status: "shipped"}, nil
}

func (OrderService) CancelOrder(ctx context.Context, q OrderQuery) error { return nil }

func (OrderService) Internal(ctx context.Context, q OrderQuery) error { return nil }

// Methods of a service value become tools named in snake_case; only the
// methods listed are exposed.
func ExampleScan() {
	tools, err := toolkit.Scan(OrderService{},
		toolkit.Method{Name: "GetOrder", Description: "Looks an order up.", Options: []toolkit.Option{toolkit.ReadOnly()}},
		toolkit.Method{Name: "CancelOrder", Description: "Cancels an order."},
	)
	if err != nil {
		panic(err)
	}
	var reg toolkit.Registry
	if err := reg.Add(tools...); err != nil {
		panic(err)
	}
	for _, s := range reg.Specs() {
		fmt.Println(s.Name)
	}
	res, _ := reg.Call(context.Background(), "get_order", json.RawMessage(`{"id":"42"}`))
	fmt.Println(res.Text())
	// Output:
	// cancel_order
	// get_order
	// {"id":42,"status":"shipped"}
}

// A dynamic tool takes its schema from a parameter builder (or raw JSON
// Schema) and its arguments as a map, with numbers as exact json.Number.
func ExampleNewDynamic() {
	params := new(toolkit.Params).
		String("sql", "A read-only SQL query").
		Integer("limit", "Rows to return, at most", toolkit.Minimum(1), toolkit.Maximum(1000), toolkit.Default(100))
	query, err := toolkit.NewDynamic("run_query", "Runs a query against the reporting database.", params.Schema(),
		func(ctx context.Context, args map[string]any) (any, error) {
			limit, _ := args["limit"].(json.Number).Int64()
			return fmt.Sprintf("ran %q with limit %d", args["sql"], limit), nil
		})
	if err != nil {
		panic(err)
	}
	var reg toolkit.Registry
	_ = reg.Add(query)
	res, _ := reg.Call(context.Background(), "run_query", json.RawMessage(`{"sql":"select 1"}`))
	fmt.Println(res.Text())
	fmt.Println(string(query.Spec().InputSchema))
	// Output:
	// ran "select 1" with limit 100
	// {"type":"object","properties":{"sql":{"type":"string","description":"A read-only SQL query"},"limit":{"type":"integer","description":"Rows to return, at most","default":100,"minimum":1,"maximum":1000}},"required":["sql"],"additionalProperties":false}
}

// Middleware wraps every call on every transport. Here a tool declares the
// scopes it needs, and RequireScopes checks them against the Caller that
// the transport put into the context.
func ExampleRequireScopes() {
	deleteUser := toolkit.MustNewAction("delete_user", "Deletes a user.",
		func(ctx context.Context, in struct {
			ID int64 `json:"id"`
		}) error {
			return nil
		}, toolkit.Scopes("users:write"))

	var reg toolkit.Registry
	_ = reg.Add(deleteUser)
	reg.Use(toolkit.Recover(nil), toolkit.RequireScopes())

	anonymous := context.Background()
	res, _ := reg.Call(anonymous, "delete_user", json.RawMessage(`{"id":7}`))
	fmt.Println(res.IsError, res.Text())

	admin := toolkit.WithCaller(context.Background(), toolkit.Caller{Subject: "ada", Scopes: []string{"users:write"}})
	res, _ = reg.Call(admin, "delete_user", json.RawMessage(`{"id":7}`))
	fmt.Println(res.IsError, res.Text())
	// Output:
	// true toolkit: permission denied: tool "delete_user" requires the scopes users:write, and the caller lacks users:write
	// false Success
}

// Subscribers hear of every change of the tool list, for example to send
// MCP's notifications/tools/list_changed; the revision changes with it.
func ExampleRegistry_Subscribe() {
	var reg toolkit.Registry
	cancel := reg.Subscribe(func() { fmt.Println("tools changed:", len(reg.Specs())) })
	defer cancel()

	before := reg.Revision()
	_ = reg.Add(toolkit.MustNew("ping", "Answers pong.", func(context.Context, struct{}) (string, error) { return "pong", nil }))
	fmt.Println(reg.Revision() != before)
	reg.Remove("ping")
	fmt.Println(reg.Revision() == before)
	// Output:
	// tools changed: 1
	// true
	// tools changed: 0
	// true
}
