package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/toolplane/toolplane/toolkit/discovery"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// maxArgsBytes bounds the arguments read from --args or -f: a tool call's
// arguments are small, and stdin may be anything.
const maxArgsBytes = 4 << 20

type callOptions struct {
	*options
	args      string
	file      string
	gateway   string
	via       string
	output    string
	outputDir string
	timeout   time.Duration
}

func newCallCommand(o *options) *cobra.Command {
	co := &callOptions{options: o}
	cmd := &cobra.Command{
		Use:   "call NAME [--args JSON | -f FILE] [--gateway URL] [-o json|yaml]",
		Short: "Call a tool and print its result",
		Long: `Call a published tool with a JSON object of arguments and print its result: every
content block, text as it is, and images, audio and resources as one line of their
metadata (saved to files with --output-dir); or, with -o json or yaml, the whole MCP
CallToolResult.

The arguments are --args, or the file -f names (- for stdin), a JSON object. They are
sent as written: numbers are never rounded through a float.

With --gateway, the call goes through toolplane's gateway (or any MCP server) at that
MCP endpoint. Without it, the tool's endpoint is looked up in the tool table and
called: directly when kubectl toolplane runs inside the cluster, and otherwise through
the API server's service proxy (services/proxy in the tool's namespace), with your
kubeconfig's credentials; --via chooses.

It exits 1 when the tool answers with isError.`,
		Example: `  # Through the API server, from your machine
  kubectl toolplane call crm_query_customer --args '{"id":"c-42"}'

  # Arguments from a file, or from stdin
  kubectl toolplane call crm_refund -f refund.json
  echo '{"id":"c-42"}' | kubectl toolplane call crm_query_customer -f -

  # Through the gateway, port-forwarded
  kubectl -n toolplane-system port-forward svc/toolplane-gateway 8080:80 &
  kubectl toolplane call crm_query_customer --args '{"id":"c-42"}' --gateway http://localhost:8080/mcp

  # The whole result, images saved to ./out
  kubectl toolplane call charts_render --args '{"q":"sales"}' -o json --output-dir ./out`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: o.toolArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			return co.run(cmd.Context(), cmd.InOrStdin(), args[0])
		},
	}
	cmd.Flags().StringVar(&co.args, "args", "", "The arguments, a JSON object (default {}).")
	cmd.Flags().StringVarP(&co.file, "filename", "f", "", "Read the arguments, a JSON object, from this file (- for stdin).")
	cmd.MarkFlagsMutuallyExclusive("args", "filename")
	cmd.Flags().StringVar(&co.gateway, "gateway", "", "Call through this MCP endpoint, the gateway's /mcp, instead of the tool's own endpoint.")
	cmd.Flags().StringVar(&co.via, "via", viaAuto, "Without --gateway, how to reach the tool's endpoint: direct (cluster DNS), api-server (its service proxy), or auto (direct inside a Pod, else api-server).")
	_ = cmd.RegisterFlagCompletionFunc("via", cobra.FixedCompletions([]string{viaAuto, viaDirect, viaAPIServer}, cobra.ShellCompDirectiveNoFileComp))
	addReportOutputFlag(cmd, &co.output, "the whole CallToolResult")
	cmd.Flags().StringVar(&co.outputDir, "output-dir", "", "Save each image, audio and resource block into this directory, as content-N.EXT.")
	cmd.Flags().DurationVar(&co.timeout, "timeout", 30*time.Second, "How long to wait for the result.")
	return cmd
}

func (co *callOptions) run(ctx context.Context, stdin io.Reader, name string) error {
	if err := checkReportFormat(co.output); err != nil {
		return err
	}
	switch co.via {
	case viaAuto, viaDirect, viaAPIServer:
	default:
		return fmt.Errorf("unknown --via %q: want auto, direct or api-server", co.via)
	}
	args, err := co.arguments(stdin)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, co.timeout)
	defer cancel()
	var res *spec.CallResult
	if co.gateway != "" {
		res, err = co.callMCP(ctx, name, args)
	} else {
		res, err = co.callTable(ctx, name, args)
	}
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("calling %s: no result within --timeout %s", name, co.timeout)
		}
		return err
	}
	if err := co.print(res); err != nil {
		return err
	}
	if res.IsError {
		return &exitError{code: 1, msg: "the tool answered with an error"}
	}
	return nil
}

// arguments are --args or -f's, checked to be one JSON object and kept as
// written: decoding them into Go values would round integers past 2^53.
func (co *callOptions) arguments(stdin io.Reader) (json.RawMessage, error) {
	raw, what := []byte(co.args), "--args"
	switch co.file {
	case "":
		if co.args == "" {
			return json.RawMessage("{}"), nil
		}
	case "-":
		what = "stdin"
		b, err := readBounded(stdin, maxArgsBytes)
		if err != nil {
			return nil, fmt.Errorf("reading the arguments from stdin: %w", err)
		}
		raw = b
	default:
		what = co.file
		f, err := os.Open(co.file)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		b, err := readBounded(f, maxArgsBytes)
		if err != nil {
			return nil, fmt.Errorf("reading the arguments from %s: %w", co.file, err)
		}
		raw = b
	}
	if len(raw) > maxArgsBytes {
		return nil, fmt.Errorf("the arguments are larger than %d bytes", maxArgsBytes)
	}
	raw = bytes.TrimSpace(bytes.TrimPrefix(raw, []byte("\xef\xbb\xbf")))
	if !json.Valid(raw) || len(raw) == 0 || raw[0] != '{' {
		return nil, fmt.Errorf("the arguments (%s) must be a JSON object", what)
	}
	return raw, nil
}

// callTable calls the tool at its endpoint in the tool table.
func (co *callOptions) callTable(ctx context.Context, name string, args json.RawMessage) (*spec.CallResult, error) {
	c, err := co.newClient()
	if err != nil {
		return nil, err
	}
	t, err := co.readTable(ctx, c)
	if err != nil {
		return nil, err
	}
	d := &discovery.Client{Timeout: co.timeout}
	if co.via == viaAPIServer || co.via == viaAuto && !inCluster() {
		cfg, err := co.config.ToRESTConfig()
		if err != nil {
			return nil, err
		}
		hc, err := serviceProxyClient(cfg)
		if err != nil {
			return nil, err
		}
		d.HTTPClient = hc
	}
	if err := d.SetTable(t); err != nil {
		return nil, err
	}
	res, err := d.Call(ctx, name, args)
	if err != nil {
		return nil, callError(name, "", err)
	}
	return res, nil
}

// callMCP calls the tool through an MCP endpoint, with the arguments as
// written, and keeps every content block of the result.
func (co *callOptions) callMCP(ctx context.Context, name string, args json.RawMessage) (*spec.CallResult, error) {
	res, err := (&discovery.MCPCaller{}).Call(ctx, co.gateway, name, args)
	if err != nil {
		return nil, callError(name, co.gateway, err)
	}
	b, err := json.Marshal(res)
	if err != nil {
		return nil, fmt.Errorf("encoding the result of %s: %w", name, err)
	}
	var out spec.CallResult
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("decoding the result of %s: %w", name, err)
	}
	if out.Content == nil {
		out.Content = []spec.Content{}
	}
	return &out, nil
}
