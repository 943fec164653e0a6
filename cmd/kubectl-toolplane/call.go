package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/toolplane/toolplane/toolkit/discovery"
	"github.com/toolplane/toolplane/toolkit/spec"
)

type callOptions struct {
	*options
	args    string
	gateway string
	output  string
	timeout time.Duration
}

func newCallCommand(o *options) *cobra.Command {
	co := &callOptions{options: o}
	cmd := &cobra.Command{
		Use:   "call NAME [--args JSON] [--gateway URL] [-o json]",
		Short: "Call a tool and print its result",
		Long: `Call a published tool with a JSON object of arguments and print its result: the text
of its content, or with -o json the whole MCP CallToolResult.

With --gateway, the call goes through toolplane's gateway (or any MCP server) at that
MCP endpoint. Without it, the tool's invoke endpoint is looked up in the tool table and
called directly; those are cluster addresses, so run it inside the cluster or use the
gateway through a port-forward.

It exits 1 when the tool answers with isError.`,
		Example: `  # Through the gateway, port-forwarded
  kubectl -n toolplane-system port-forward svc/toolplane-gateway 8080:80 &
  kubectl toolplane call crm_query_customer --args '{"id":"c-42"}' --gateway http://localhost:8080/mcp

  # At the tool's own invoke endpoint, from inside the cluster
  kubectl toolplane call crm_query_customer --args '{"id":"c-42"}' -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return co.run(cmd.Context(), args[0]) },
	}
	cmd.Flags().StringVar(&co.args, "args", "{}", "The arguments, a JSON object.")
	cmd.Flags().StringVar(&co.gateway, "gateway", "", "Call through this MCP endpoint, the gateway's /mcp, instead of the tool's invoke endpoint.")
	cmd.Flags().StringVarP(&co.output, "output", "o", "", "Output format: json for the whole result.")
	cmd.Flags().DurationVar(&co.timeout, "timeout", 30*time.Second, "How long to wait for the result.")
	return cmd
}

func (co *callOptions) run(ctx context.Context, name string) error {
	var args map[string]any
	if err := json.Unmarshal([]byte(co.args), &args); err != nil || args == nil {
		return fmt.Errorf("--args must be a JSON object: %s", co.args)
	}
	ctx, cancel := context.WithTimeout(ctx, co.timeout)
	defer cancel()
	var res *spec.CallResult
	var err error
	if co.gateway != "" {
		res, err = callMCP(ctx, co.gateway, name, args)
	} else {
		res, err = co.callInvoke(ctx, name, args)
	}
	if err != nil {
		return err
	}
	if co.output == "json" {
		if err := printData(co.out, "json", res); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(co.out, res.Text())
	}
	if res.IsError {
		return &exitError{code: 1, msg: "the tool answered with an error"}
	}
	return nil
}

func (co *callOptions) callInvoke(ctx context.Context, name string, args map[string]any) (*spec.CallResult, error) {
	c, err := co.newClient()
	if err != nil {
		return nil, err
	}
	t, err := co.readTable(ctx, c)
	if err != nil {
		return nil, err
	}
	d := &discovery.Client{Timeout: co.timeout}
	if err := d.SetTable(t); err != nil {
		return nil, err
	}
	return d.Call(ctx, name, args)
}

func callMCP(ctx context.Context, endpoint, name string, args map[string]any) (*spec.CallResult, error) {
	client := mcp.NewClient(&mcp.Implementation{Name: "kubectl-toolplane", Version: "v1alpha1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint}, nil)
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", endpoint, err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return nil, fmt.Errorf("calling %s at %s: %w", name, endpoint, err)
	}
	out := &spec.CallResult{IsError: res.IsError}
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			out.Content = append(out.Content, spec.Content{Type: "text", Text: t.Text})
		}
	}
	if res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			out.StructuredContent = b
		}
	}
	return out, nil
}
