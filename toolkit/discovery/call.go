package discovery

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// maxErrorBodyBytes bounds how much of a non-200 reply is read: error bodies
// are short, whatever MaxResponseBytes allows.
const maxErrorBodyBytes = 64 << 10

// HTTPError is a non-200 reply of a tool's invoke endpoint. Argument and
// execution errors are not HTTPErrors: the workload answers those with 200
// and a CallResult whose IsError is set.
type HTTPError struct {
	// Tool is the published name of the tool called.
	Tool string
	// StatusCode is the HTTP status of the reply.
	StatusCode int
	// Detail is the reply's JSON error body. A reply without one (from a
	// proxy, say) gets the code "http_<status>" and, as message, the start
	// of its body.
	Detail spec.ErrorDetail
}

// Error names the tool, the status and the workload's error code and message.
func (e *HTTPError) Error() string {
	return fmt.Sprintf("discovery: tool %s: %d %s: %s", e.Tool, e.StatusCode, e.Detail.Code, e.Detail.Message)
}

// Is makes a 404, 400 or 413 match [ErrToolNotFound], [ErrBadRequest] or
// [ErrRequestTooLarge].
func (e *HTTPError) Is(target error) bool {
	switch e.StatusCode {
	case http.StatusNotFound:
		return target == ErrToolNotFound
	case http.StatusBadRequest:
		return target == ErrBadRequest
	case http.StatusRequestEntityTooLarge:
		return target == ErrRequestTooLarge
	}
	return false
}

// Call calls the tool name (a published name, or the function name a model
// was given for it) through its invoke endpoint, and returns the workload's
// result. A tool whose entry has protocol MCP (an MCP server that toolkit did
// not write) is called with MCP's tools/call at its MCP endpoint instead,
// through the official Go SDK client, so that an agent calls every tool the
// same way; its result passes on unchanged, whatever content it holds. A tool that ran and failed, or refused its arguments, is not an
// error: the result has IsError set and says why, for the model to correct
// itself.
//
// args is the arguments object: a json.RawMessage, []byte or string holding
// JSON (as a model's tool call carries it), or any value that encodes to a
// JSON object; nil means no arguments. A null given for an optional property
// that the schema does not declare nullable is dropped, because models in
// OpenAI's strict mode send null for what they would leave out.
//
// The call is bounded by Timeout and the reply by MaxResponseBytes. A non-200
// reply is an [*HTTPError].
//
// The table is trusted no further than the operator's own rules: an
// endpoint must be http or https, on a host that is a Service of the tool's
// ToolSet namespace (see Client.ClusterDomain), or the call fails with
// [ErrForeignEndpoint] before anything is sent; and a redirect in reply
// fails with [ErrRedirect] instead of being followed.
func (c *Client) Call(ctx context.Context, name string, args any) (*spec.CallResult, error) {
	s := c.snap()
	i, ok := s.lookup(name)
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrToolNotFound, name)
	}
	tool := &s.table.Tools[i]
	endpoint := ""
	if tool.Endpoints != nil {
		endpoint = tool.Endpoints.Invoke
		if tool.IsMCP() {
			endpoint = tool.Endpoints.MCP
		}
	}
	if endpoint == "" {
		return nil, fmt.Errorf("%w: %s (ToolSet %s)", ErrNoEndpoint, tool.Name, tool.ToolSet)
	}
	// The endpoint as checked, its host fully qualified: a trailing dot or
	// an older table's <service>.<namespace>.svc would not be dialed as
	// a Service name (ServiceDialer), and the latter would walk the search
	// path.
	u, err := checkEndpoint(tool, endpoint, c.ClusterDomain)
	if err != nil {
		return nil, err
	}
	endpoint = u.String()
	body, err := encodeArgs(args)
	if err != nil {
		return nil, fmt.Errorf("discovery: tool %s: encoding arguments: %w", tool.Name, err)
	}
	body = dropOptionalNulls(body, tool.InputSchema)

	timeout := c.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if tool.IsMCP() {
		return c.callMCP(ctx, tool, endpoint, body)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("discovery: tool %s: %w", tool.Name, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	hc := *c.httpClient()
	hc.CheckRedirect = refuseRedirect
	resp, err := hc.Do(req)
	if err != nil {
		if errors.Is(err, ErrRedirect) {
			return nil, fmt.Errorf("discovery: calling tool %s: %w", tool.Name, unwrapURLError(err))
		}
		return nil, fmt.Errorf("discovery: calling tool %s: %w", tool.Name, err)
	}
	defer resp.Body.Close()

	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBodyBytes))
		return nil, httpError(tool.Name, resp.StatusCode, b)
	}
	limit := c.MaxResponseBytes
	if limit <= 0 {
		limit = DefaultMaxResponseBytes
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("discovery: reading reply of tool %s: %w", tool.Name, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%w: tool %s replied with more than %d bytes", ErrResponseTooLarge, tool.Name, limit)
	}
	var res spec.CallResult
	if err := json.Unmarshal(b, &res); err != nil {
		return nil, fmt.Errorf("discovery: decoding reply of tool %s: %w", tool.Name, err)
	}
	return &res, nil
}

// refuseRedirect makes the client return a redirect's error instead of
// following it: a 307 would resend the arguments to wherever it points.
func refuseRedirect(req *http.Request, _ []*http.Request) error {
	return fmt.Errorf("%w: to %s", ErrRedirect, req.URL.Redacted())
}

func unwrapURLError(err error) error {
	if ue, ok := errors.AsType[*url.Error](err); ok {
		return ue.Err
	}
	return err
}

// checkEndpoint refuses an endpoint that the operator would never publish
// for the tool: see [CheckServiceEndpoint].
func checkEndpoint(tool *spec.TableTool, endpoint, domain string) (*url.URL, error) {
	u, why := serviceEndpoint(endpoint, tool.ToolSet.Namespace, domain)
	if why != "" {
		return nil, fmt.Errorf("%w: tool %s (ToolSet %s): %s", ErrForeignEndpoint, tool.Name, tool.ToolSet, why)
	}
	return u, nil
}

// CheckServiceEndpoint is the rule that decides whether a table endpoint
// may be called, shared by [Client.Call] and the toolplane gateway, so that
// both refuse exactly the same endpoints. endpoint must be an http or https
// URL without credentials whose host is a Service of namespace:
// <service>.<namespace>.svc.<clusterDomain>, as the operator publishes it,
// or <service>.<namespace>.svc, as tables written before it did; either
// may end in a dot. Any other host, another namespace's Service or a name
// with more labels after ".svc" (tools.crm.svc.attacker.example) included,
// is refused with [ErrForeignEndpoint]. An empty clusterDomain means
// [DefaultClusterDomain].
//
// It returns the endpoint with its host fully qualified
// (<service>.<namespace>.svc.<clusterDomain>, no final dot), the name the
// operator publishes: a caller that dials it should resolve it as rooted
// (with a final dot), so that the resolver's search path (ndots:5 in a
// Pod) is never walked. The URL's query and fragment are kept, for the
// caller to judge.
func CheckServiceEndpoint(endpoint, namespace, clusterDomain string) (*url.URL, error) {
	u, why := serviceEndpoint(endpoint, namespace, clusterDomain)
	if why != "" {
		return nil, fmt.Errorf("%w: %s", ErrForeignEndpoint, why)
	}
	return u, nil
}

// serviceEndpoint is CheckServiceEndpoint, with why an endpoint is refused
// ("" when it is not).
func serviceEndpoint(endpoint, namespace, clusterDomain string) (*url.URL, string) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return nil, "the endpoint is not a URL"
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Sprintf("scheme %q is not http or https", u.Scheme)
	}
	if u.User != nil {
		return nil, "the endpoint carries credentials"
	}
	if !isDNSLabel(namespace) {
		return nil, fmt.Sprintf("the tool's ToolSet namespace %q is not a namespace name", namespace)
	}
	domain := strings.ToLower(strings.Trim(cmp.Or(clusterDomain, DefaultClusterDomain), "."))
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	rest, ok := strings.CutSuffix(host, "."+namespace+".svc."+domain)
	if !ok {
		rest, ok = strings.CutSuffix(host, "."+namespace+".svc")
	}
	if !ok || !isDNSLabel(rest) {
		return nil, fmt.Sprintf("host %q is not a Service of namespace %s (<service>.%s.svc.%s)", host, namespace, namespace, domain)
	}
	fq := *u
	fq.Host = rest + "." + namespace + ".svc." + domain
	if p := u.Port(); p != "" {
		fq.Host = net.JoinHostPort(fq.Host, p)
	}
	return &fq, ""
}

// isDNSLabel says whether s is one DNS label: what a Service name is.
func isDNSLabel(s string) bool {
	if s == "" || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for _, r := range s {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '-' {
			return false
		}
	}
	return true
}

func encodeArgs(args any) ([]byte, error) {
	var b []byte
	switch a := args.(type) {
	case nil:
		return []byte("{}"), nil
	case json.RawMessage:
		b = a
	case []byte:
		b = a
	case string:
		b = []byte(a)
	default:
		var err error
		if b, err = json.Marshal(a); err != nil {
			return nil, err
		}
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return []byte("{}"), nil
	}
	// Sloppy JSON from a model goes to the workload as it is: its binder
	// repairs what can be repaired, and says what cannot.
	return b, nil
}

func httpError(tool string, status int, body []byte) *HTTPError {
	e := &HTTPError{Tool: tool, StatusCode: status}
	var er spec.ErrorResponse
	if err := json.Unmarshal(body, &er); err == nil && er.Error.Code != "" {
		e.Detail = er.Error
		return e
	}
	e.Detail.Code = "http_" + strconv.Itoa(status)
	msg := string(body)
	if len(msg) > 200 {
		msg = strings.ToValidUTF8(msg[:200], "") + "…"
	}
	if msg == "" {
		msg = http.StatusText(status)
	}
	e.Detail.Message = msg
	return e
}
