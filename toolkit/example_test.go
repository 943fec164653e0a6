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
	// - $.mail: expected a known argument name, received unknown name "mail"; valid names are email, id
}
