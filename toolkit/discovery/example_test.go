package discovery_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/toolplane/toolplane/toolkit/discovery"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// An agent loads the table mounted from the tool-table ConfigMap and follows
// its updates for as long as it runs.
func ExampleClient_WatchDir() {
	c := &discovery.Client{
		OnChange: func(t *spec.Table) { log.Printf("tool table %s: %d tools", t.Revision, len(t.Tools)) },
	}
	const dir = "/etc/toolplane/tools"
	// Fail fast if the table is not there at start-up...
	if err := c.LoadDir(dir); err != nil {
		log.Fatal(err)
	}
	// ...then follow kubelet's updates in the background.
	go func() {
		if err := c.WatchDir(context.Background(), dir); err != nil {
			log.Print(err)
		}
	}()
}

func ExampleClient_Call() {
	// A workload serving get_weather, as toolkit's server does.
	workload := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var args struct{ City string }
		if err := json.NewDecoder(r.Body).Decode(&args); err != nil {
			http.Error(w, `{"error":{"code":"bad_request","message":"unreadable body"}}`, http.StatusBadRequest)
			return
		}
		_ = json.NewEncoder(w).Encode(spec.CallResult{Content: []spec.Content{{Type: "text", Text: "Sunny in " + args.City}}})
	}))
	defer workload.Close()

	// In a cluster the default HTTP client reaches the Service; here a
	// dialer stands in for cluster DNS and sends it to the workload.
	dial := func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, workload.Listener.Addr().String())
	}
	c := &discovery.Client{HTTPClient: &http.Client{Transport: &http.Transport{DialContext: dial}}}
	err := c.SetTable(&spec.Table{SchemaVersion: spec.SchemaVersion, Tools: []spec.TableTool{{
		Name: "weather.get", SourceName: "get_weather",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`),
		// Call sends arguments only to a Service of the tool's namespace.
		ToolSet:   spec.ObjectReference{Namespace: "weather", Name: "weather-tools"},
		Endpoints: &spec.Endpoints{Invoke: "http://weather-tools.weather.svc:8080/tools/get_weather"},
	}}})
	if err != nil {
		log.Fatal(err)
	}

	// The model calls the tool by the function name it was offered.
	fn := c.OpenAITools(true)[0].Function.Name
	res, err := c.Call(context.Background(), fn, `{"city":"Oslo"}`)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(fn)
	fmt.Println(res.Text(), res.IsError)
	// Output:
	// weather_get_b8affdae
	// Sunny in Oslo false
}

func ExampleStrictSchema() {
	schema, err := discovery.StrictSchema(json.RawMessage(`{
		"type": "object",
		"properties": {
			"city": {"type": "string"},
			"days": {"type": "integer", "minimum": 1, "default": 3}
		},
		"required": ["city"]
	}`))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(schema))
	// Output:
	// {"additionalProperties":false,"properties":{"city":{"type":"string"},"days":{"description":"(default: 3)","minimum":1,"type":["integer","null"]}},"required":["city","days"],"type":"object"}
}

// An agent in any namespace follows the table that the toolplane gateway
// serves, with no volume to mount. The token goes only to the gateway:
// TableHTTPClient makes the table's GETs, HTTPClient the tool calls.
func ExampleClient_WatchURL() {
	c := &discovery.Client{
		TableHTTPClient: &http.Client{Timeout: 10 * time.Second},
		OnChange:        func(t *spec.Table) { log.Printf("tool table %s: %d tools", t.Revision, len(t.Tools)) },
	}
	const url = "http://toolplane-gateway.toolplane-system.svc/v1/tools"
	ctx := context.Background()
	if err := c.LoadURL(ctx, url); err != nil {
		log.Fatal(err)
	}
	go func() { _ = c.WatchURL(ctx, url, 30*time.Second) }()
}

// An agent outside the operator's namespace asks the gateway for the few
// tools a task needs instead of reading the whole table; the gateway
// returns only those its token may call.
func ExampleClient_SearchURL() {
	c := &discovery.Client{TableHTTPClient: http.DefaultClient} // a client that presents the agent's token
	tools, err := c.SearchURL(context.Background(), "http://toolplane-gateway.toolplane-system.svc/v1/search",
		"refund a customer's order", &discovery.SearchOptions{Limit: 5})
	if err != nil {
		log.Fatal(err)
	}
	for _, t := range tools {
		fmt.Println(t.Name, t.ToolSet, t.Score)
	}
}

// CheckServiceEndpoint says whether an endpoint of a tool of namespace crm
// may be called, and gives the name to dial.
func ExampleCheckServiceEndpoint() {
	u, err := discovery.CheckServiceEndpoint("http://crm-tools.crm.svc:8080/mcp", "crm", "")
	fmt.Println(u, err)
	_, err = discovery.CheckServiceEndpoint("http://crm-tools.crm.svc.attacker.example:8080/mcp", "crm", "")
	fmt.Println(err)
	// Output:
	// http://crm-tools.crm.svc.cluster.local:8080/mcp <nil>
	// discovery: endpoint is not a Service in the tool's namespace: host "crm-tools.crm.svc.attacker.example" is not a Service of namespace crm (<service>.crm.svc.cluster.local)
}
