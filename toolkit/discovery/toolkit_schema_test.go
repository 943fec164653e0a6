package discovery_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/toolplane/toolplane/toolkit"
	"github.com/toolplane/toolplane/toolkit/discovery"
	"github.com/toolplane/toolplane/toolkit/server"
	"github.com/toolplane/toolplane/toolkit/spec"
)

type address struct {
	City string `json:"city"`
	Zip  string `json:"zip,omitempty"`
}

type node struct {
	Name     string `json:"name"`
	Children []node `json:"children,omitempty"`
}

type order struct {
	ID     string    `json:"id" description:"Order id, e.g. o-1"`
	Status string    `json:"status,omitempty" tool:"enum=open|closed" default:"open"`
	Limit  int       `json:"limit,omitempty" tool:"minimum=1;maximum=100" default:"10"`
	At     time.Time `json:"at,omitzero"`
	Tags   []string  `json:"tags,omitempty" tool:"maxItems=5;maxLength=20"`
	Ship   *address  `json:"ship,omitempty"`
	Bill   address   `json:"bill"`
	Tree   *node     `json:"tree,omitempty"`
	Blob   []byte    `json:"blob,omitempty"`
	Code   string    `json:"code" pattern:"^[A-Z]{2,3}$"`
}

// TestStrictToolkitSchemas converts the schemas toolkit generates from Go
// types, and sends what a strict-mode model would send back to a toolkit
// registry.
func TestStrictToolkitSchemas(t *testing.T) {
	place := toolkit.MustNew("place.order", "Places an order.", func(_ context.Context, in order) (order, error) { return in, nil })
	strictSchema, err := discovery.StrictSchema(place.Spec().InputSchema)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range strictViolations(unmarshal(t, strictSchema)) {
		t.Error(v)
	}
	optionalsNullable(t, unmarshal(t, place.Spec().InputSchema), unmarshal(t, strictSchema), "#")

	// Every property present, null where the model has nothing to say.
	args := `{"id":"o-1","status":null,"limit":null,"at":null,"tags":null,"ship":null,
		"bill":{"city":"Oslo","zip":null},"tree":{"name":"root","children":[{"name":"leaf","children":null}]},
		"blob":null,"code":"NO"}`
	if err := validate(t, compile(t, strictSchema), args); err != nil {
		t.Fatalf("strict-mode arguments do not validate against the strict schema: %v", err)
	}

	reg := &toolkit.Registry{Logger: slog.New(slog.DiscardHandler)}
	if err := reg.Add(place); err != nil {
		t.Fatal(err)
	}
	h := server.New(reg, &server.Options{Logger: slog.New(slog.DiscardHandler), AllowAnyHostOnLoopback: true})
	srv := httptest.NewServer(h)
	defer func() { srv.Close(); h.Close() }()
	c := &discovery.Client{HTTPClient: clusterHTTP(srv)}
	if err := c.SetTable(table(spec.TableTool{
		Name: "place.order", SourceName: "place.order", InputSchema: place.Spec().InputSchema,
		ToolSet:   spec.ObjectReference{Namespace: "shop", Name: "orders"},
		Endpoints: &spec.Endpoints{Invoke: "http://orders.shop.svc:8080" + spec.InvokePrefix + "place.order"},
	})); err != nil {
		t.Fatal(err)
	}
	fn := c.OpenAITools(true)[0].Function
	if !fn.Strict || string(fn.Parameters) != string(strictSchema) {
		t.Fatalf("exported as strict=%v", fn.Strict)
	}
	res, err := c.Call(t.Context(), fn.Name, args)
	if err != nil {
		t.Fatal(err)
	}
	var got order
	if err := json.Unmarshal(res.StructuredContent, &got); err != nil || res.IsError {
		t.Fatalf("result %+v: %v", res, err)
	}
	if got.Status != "open" || got.Limit != 10 || got.Bill.City != "Oslo" || got.Tree == nil || len(got.Tree.Children) != 1 {
		t.Fatalf("the tool received %+v; want defaults for the nulls and the rest as sent", got)
	}

	// Maps and values of any type have no strict form.
	type labels struct {
		Labels map[string]string `json:"labels"`
	}
	type payload struct {
		Data any `json:"data"`
	}
	for _, tool := range []*toolkit.Tool{
		toolkit.MustNewAction("set_labels", "Sets labels.", func(context.Context, labels) error { return nil }),
		toolkit.MustNewAction("put", "Stores data.", func(context.Context, payload) error { return nil }),
	} {
		if _, err := discovery.StrictSchema(tool.Spec().InputSchema); !errors.Is(err, discovery.ErrNotStrict) {
			t.Errorf("%s: err = %v, want ErrNotStrict", tool.Name(), err)
		}
	}
}
