package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"unicode"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/toolplane/toolplane/toolkit/discovery"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// print prints the result: the whole of it as data with -o, else every
// content block, text as written and the others as one line of metadata,
// each saved under --output-dir when it is given. A result with no content
// but structuredContent prints that.
func (co *callOptions) print(res *spec.CallResult) error {
	if co.outputDir != "" {
		if err := os.MkdirAll(co.outputDir, 0o755); err != nil {
			return err
		}
	}
	var lines []string
	for i, c := range res.Content {
		line, err := co.block(i, c)
		if err != nil {
			return err
		}
		lines = append(lines, line)
	}
	if co.output != "" {
		if err := printData(co.out, co.output, res); err != nil {
			return err
		}
		// What was saved is said on stderr, to keep stdout the data.
		if co.outputDir != "" {
			for i, c := range res.Content {
				if c.Type != spec.ContentText {
					fmt.Fprintln(co.errOut, lines[i])
				}
			}
		}
		return nil
	}
	if len(res.Content) == 0 && len(res.StructuredContent) > 0 {
		lines = append(lines, string(res.StructuredContent))
	}
	for _, l := range lines {
		fmt.Fprintln(co.out, l)
	}
	return nil
}

// block is how one content block prints, saving its bytes first if
// --output-dir asks. A file's name is the block's index and an extension
// of its media type: nothing the server sent picks a path.
func (co *callOptions) block(i int, c spec.Content) (string, error) {
	var data []byte
	var desc, mimeType string
	switch c.Type {
	case spec.ContentText:
		return c.Text, nil
	case spec.ContentImage, spec.ContentAudio:
		data, mimeType = c.Data, c.MIMEType
		desc = fmt.Sprintf("[%s %s, %d bytes]", c.Type, clean(or(c.MIMEType, "of no media type")), len(c.Data))
	case spec.ContentResource:
		r := c.Resource
		if r == nil {
			return "[resource, empty]", nil
		}
		data, mimeType = r.Blob, r.MIMEType
		if r.Blob == nil {
			data = []byte(r.Text)
		}
		desc = fmt.Sprintf("[resource %s, %s, %d bytes]", clean(r.URI), clean(or(r.MIMEType, "of no media type")), len(data))
	case "resource_link":
		var uri, name string
		_ = json.Unmarshal(c.Extra["uri"], &uri)
		_ = json.Unmarshal(c.Extra["name"], &name)
		return fmt.Sprintf("[resource link %s %s]", clean(or(name, "(no name)")), clean(uri)), nil
	default:
		return fmt.Sprintf("[%s block]", clean(or(c.Type, "untyped"))), nil
	}
	if co.outputDir == "" {
		return desc, nil
	}
	ext := ".bin"
	if exts, _ := mime.ExtensionsByType(mimeType); len(exts) > 0 {
		ext = exts[0]
	}
	path := filepath.Join(co.outputDir, fmt.Sprintf("content-%d%s", i, ext))
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return "", err
	}
	return strings.TrimSuffix(desc, "]") + ", saved to " + path + "]", nil
}

// clean makes a field the server chose safe on one line of a terminal:
// control characters (escape sequences, newlines) become "?", and it is
// cut at 256 bytes.
func clean(s string) string {
	if len(s) > 256 {
		s = strings.ToValidUTF8(s[:256], "") + "…"
	}
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return '?'
		}
		return r
	}, s)
}

// callError says why a call failed as kubectl says it, in one sentence of
// ours and the cause at the root, without the libraries' chain of
// wrappers (go-sdk's "calling tools/call: sending …: …").
func callError(name, endpoint string, err error) error {
	where := ""
	if endpoint != "" {
		// Never echo a password the URL carries.
		if u, perr := url.Parse(endpoint); perr == nil {
			endpoint = u.Redacted()
		}
		where = " at " + endpoint
	}
	var he *discovery.HTTPError
	var rpc *jsonrpc.Error
	var op *net.OpError
	var ue *url.Error
	switch {
	case errors.As(err, &he):
		return fmt.Errorf("calling %s%s: HTTP %d %s: %s", name, where, he.StatusCode, he.Detail.Code, he.Detail.Message)
	case errors.Is(err, discovery.ErrToolNotFound):
		return fmt.Errorf("tool %q not found in the tool table", name)
	case errors.Is(err, discovery.ErrNoEndpoint):
		return fmt.Errorf("tool %s has no endpoint to call: its ToolSet sets no spec.service", name)
	case errors.Is(err, discovery.ErrForeignEndpoint), errors.Is(err, discovery.ErrRedirect),
		errors.Is(err, discovery.ErrResponseTooLarge), errors.Is(err, discovery.ErrBadRequest):
		return fmt.Errorf("calling %s%s: %s", name, where, strings.TrimPrefix(err.Error(), "discovery: "))
	case errors.Is(err, context.DeadlineExceeded):
		return err
	case errors.As(err, &op):
		// The network's own words, which go-sdk wraps beside its
		// "rejected by transport".
		return fmt.Errorf("calling %s%s: %s", name, where, op.Error())
	case errors.As(err, &ue):
		return fmt.Errorf("calling %s%s: %s", name, where, stripChain(ue.Err.Error()))
	case errors.As(err, &rpc):
		return fmt.Errorf("calling %s%s: %s", name, where, rpc.Message)
	}
	return fmt.Errorf("calling %s%s: %s", name, where, stripChain(rootCause(err).Error()))
}

// rootCause is the innermost error of a chain of single wrappers.
func rootCause(err error) error {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err
		}
		err = next
	}
}

// sdkWrapper matches one wrapper go-sdk and net/http put before a cause
// they keep only as text: `calling "initialize": sending "initialize":
// rejected by transport: Post "http://…": dial tcp …`.
var sdkWrapper = regexp.MustCompile(`^(?:(?:calling|sending|connecting|writing|reading) "[^"]*": |(?:rejected by transport|connection closed|broken session|session initialization failed|connecting|discovery): |(?:GET|POST|DELETE|Get|Post|Delete) "[^"]*": )`)

// stripChain drops those wrappers, keeping the cause.
func stripChain(msg string) string {
	for {
		loc := sdkWrapper.FindStringIndex(msg)
		if loc == nil || loc[1] == len(msg) {
			return msg
		}
		msg = msg[loc[1]:]
	}
}
