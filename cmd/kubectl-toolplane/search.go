package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"
	"unicode"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/printers"

	"github.com/toolplane/toolplane/toolkit/discovery"
	"github.com/toolplane/toolplane/toolkit/search"
	"github.com/toolplane/toolplane/toolkit/spec"
)

type searchOptions struct {
	*options
	limit     int
	output    string
	gateway   string
	tokenFile string
	timeout   time.Duration
}

func newSearchCommand(o *options) *cobra.Command {
	so := &searchOptions{options: o}
	cmd := &cobra.Command{
		Use:   "search QUERY [-n NAMESPACE] [--limit N] [-o wide|json] [--gateway URL]",
		Short: "Find the tools that fit a task, best first",
		Long: `Search the tool table for the tools that fit a task written in plain words, as an agent
does through the gateway's /mcp/search: NAME, OWNER (the ToolSet), STATE, SCORE and
DESCRIPTION, best first. The ranking is toolplane's search (BM25F over names,
descriptions, parameters and categories, stemmed).

It searches every namespace unless -n names one. Without --gateway it reads the table
from the cluster and ranks it here. With --gateway it asks the gateway's GET /v1/search
(give the gateway's base URL), which returns only the tools the gateway would let you
call when it authenticates callers.

With -o json it prints the result as /v1/search answers it: table entries with a score.`,
		Example: `  # The tools for a task, in every namespace
  kubectl toolplane search "refund a customer's order"

  # In one namespace, with endpoints and source names
  kubectl toolplane search "weather forecast for a city" -n weather -o wide

  # Through the gateway, port-forwarded, as an agent would see it
  kubectl -n toolplane-system port-forward svc/toolplane-gateway 8080:80 &
  kubectl toolplane search "list the pods of a namespace" --gateway http://localhost:8080 -o json`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return so.run(cmd.Context(), strings.Join(args, " "))
		},
	}
	cmd.Flags().IntVar(&so.limit, "limit", search.DefaultLimit, fmt.Sprintf("The most tools to show (at most %d).", search.MaxLimit))
	cmd.Flags().StringVarP(&so.output, "output", "o", "", "Output format: wide or json.")
	cmd.Flags().StringVar(&so.gateway, "gateway", "", "Ask the gateway at this base URL (its GET /v1/search) instead of ranking the cluster's table here.")
	cmd.Flags().StringVar(&so.tokenFile, "token-file", "", "With --gateway: a file holding the bearer token to present, for a gateway that authenticates callers (kubectl create token SA > FILE).")
	cmd.Flags().DurationVar(&so.timeout, "timeout", 30*time.Second, "How long to wait for the gateway's answer.")
	return cmd
}

// searchOutput is what -o json prints: /v1/search's answer.
type searchOutput struct {
	Revision string                   `json:"revision,omitempty"`
	Tools    []discovery.SearchResult `json:"tools"`
}

func (so *searchOptions) run(ctx context.Context, query string) error {
	switch so.output {
	case "", "wide", "json":
	default:
		return fmt.Errorf("unknown output format %q: want wide or json", so.output)
	}
	if strings.TrimSpace(query) == "" {
		return errors.New("the query is empty: say in a few words what the tool should do")
	}
	if so.tokenFile != "" && so.gateway == "" {
		return errors.New("--token-file is for --gateway")
	}
	if so.limit < 1 {
		return fmt.Errorf("--limit must be at least 1")
	}
	// -n narrows the search; without it, every namespace.
	var ns string
	if so.config.Namespace != nil {
		ns = *so.config.Namespace
	}
	opts := &discovery.SearchOptions{Limit: min(so.limit, search.MaxLimit), Namespace: ns}

	var (
		out   searchOutput
		state = func(spec.TableTool) string { return "<unknown>" }
		err   error
	)
	if so.gateway != "" {
		d := &discovery.Client{Timeout: so.timeout}
		if so.tokenFile != "" {
			b, err := os.ReadFile(so.tokenFile)
			if err != nil {
				return fmt.Errorf("reading --token-file: %w", err)
			}
			tok := strings.TrimSpace(string(b))
			if tok == "" || len(tok) > 16<<10 {
				return fmt.Errorf("--token-file %s holds no usable token", so.tokenFile)
			}
			d.TableHTTPClient = &http.Client{Transport: bearerToken(tok)}
		}
		out.Tools, err = d.SearchURL(ctx, strings.TrimSuffix(so.gateway, "/")+"/v1/search", query, opts)
		if err != nil {
			return fmt.Errorf("searching at the gateway %s: %w", so.gateway, err)
		}
	} else {
		_, cl, err := so.read(ctx, ns)
		if err != nil {
			return err
		}
		d := &discovery.Client{}
		if err := d.SetTable(cl.table); err != nil {
			return err
		}
		if out.Tools, err = d.Search(ctx, query, opts); err != nil {
			return err
		}
		out.Revision = cl.table.Revision
		state = cl.stateOf
	}
	if out.Tools == nil {
		out.Tools = []discovery.SearchResult{}
	}

	if so.output == "json" {
		b, err := json.MarshalIndent(out, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(so.out, string(b))
		return err
	}
	if len(out.Tools) == 0 {
		where := "in the cluster"
		if ns != "" {
			where = "in " + ns + " namespace"
		}
		fmt.Fprintf(so.errOut, "No tools found for %q %s.\n", query, where)
		return nil
	}
	w := printers.GetNewTabWriter(so.out)
	header := "NAME\tOWNER\tSTATE\tSCORE\tDESCRIPTION"
	if so.output == "wide" {
		header += "\tSOURCE NAME\tENDPOINT"
	}
	fmt.Fprintln(w, header)
	for _, t := range out.Tools {
		row := fmt.Sprintf("%s\t%s\t%s\t%.2f\t%s", t.Name, t.ToolSet, state(t.TableTool), t.Score, cell(t.Description, 80))
		if so.output == "wide" {
			row += fmt.Sprintf("\t%s\t%s", t.SourceName, endpointOf(t.TableTool))
		}
		fmt.Fprintln(w, row)
	}
	return w.Flush()
}

// bearerToken presents a token on every request of the gateway's client.
type bearerToken string

func (t bearerToken) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(t))
	return http.DefaultTransport.RoundTrip(r)
}

// cell is the first line of s, cut to n runes, for a table cell.
func cell(s string, n int) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		s = s[:i]
	}
	// A description is a tenant's text: no control character (a terminal
	// escape, a tab that breaks the columns) reaches the terminal.
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	if s == "" {
		return "<none>"
	}
	return s
}
