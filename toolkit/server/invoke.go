package server

import (
	"bytes"
	"errors"
	"io"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/toolplane/toolplane/toolkit"
)

// serveInvoke serves POST /tools/{name}: the body is the arguments object,
// handed to the registry as it came, so that the registry's lenient binding
// repairs it, or refuses it with a result that says why, exactly as it does
// for MCP.
func (h *Handler) serveInvoke(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		methodNotAllowed(w, http.MethodPost)
		return
	}
	if !h.guard.check(w, r) {
		discard(r.Body)
		return
	}
	name := r.PathValue("name")
	if _, ok := h.reg.Lookup(name); !ok {
		discard(r.Body)
		h.notFound(w, name)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.maxBody))
	if err != nil {
		if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
			writeError(w, http.StatusRequestEntityTooLarge, CodeBodyTooLarge,
				"the arguments exceed the limit of "+byteCount(mbe.Limit))
			return
		}
		writeError(w, http.StatusBadRequest, CodeBadRequest, "the request body could not be read")
		return
	}
	if len(bytes.TrimSpace(body)) == 0 {
		// No body is no arguments, as MCP's absent "arguments" is.
		body = []byte("{}")
	}

	ctx := h.callContext(r.Context(), r.Header, auth.TokenInfoFromContext(r.Context()))
	ctx, err = h.txn.verifyCall(ctx, r.Header)
	if err != nil {
		logRefusal(h.logger, err)
		writeError(w, http.StatusUnauthorized, CodeUnauthorized, txnRefusal(err))
		return
	}
	res, err := h.reg.Call(ctx, name, body)
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, res)
	case errors.Is(err, toolkit.ErrToolNotFound):
		// Removed between the lookup and the call.
		h.notFound(w, name)
	case errors.Is(err, toolkit.ErrInvalidArguments):
		// Only a registry that propagates errors gets here.
		writeError(w, http.StatusBadRequest, CodeInvalidArguments, err.Error())
	default:
		writeError(w, http.StatusInternalServerError, CodeToolFailed, err.Error())
	}
}

// notFound replies 404 for an unknown tool, naming the one most likely
// meant.
func (h *Handler) notFound(w http.ResponseWriter, name string) {
	msg := "no tool named " + quote(name)
	if near, ok := h.reg.Nearest(name); ok {
		msg += " (did you mean " + quote(near) + "?)"
	}
	writeError(w, http.StatusNotFound, CodeToolNotFound, msg)
}

func byteCount(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + " MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + " KiB"
	default:
		return strconv.FormatInt(n, 10) + " bytes"
	}
}

// invokeGuard keeps web pages from calling tools: the rules of the MCP
// SDK's /mcp handler (DNS-rebinding protection on loopback, Content-Type
// application/json), plus a cross-origin check.
type invokeGuard struct {
	anyHost        bool
	anyContentType bool
	crossOrigin    *http.CrossOriginProtection // nil: allowed
}

func newInvokeGuard(o *Options) invokeGuard {
	g := invokeGuard{anyHost: o.AllowAnyHostOnLoopback, anyContentType: o.AllowAnyContentType}
	if !o.AllowCrossOrigin {
		g.crossOrigin = o.CrossOriginProtection
		if g.crossOrigin == nil {
			g.crossOrigin = http.NewCrossOriginProtection()
		}
	}
	return g
}

// check writes the refusal and returns false for a request that must not
// run a tool.
func (g invokeGuard) check(w http.ResponseWriter, r *http.Request) bool {
	if !g.anyHost {
		if local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && local != nil &&
			isLoopback(local.String()) && !isLoopback(r.Host) {
			writeError(w, http.StatusForbidden, CodeForbidden, "a request on a loopback address must name a loopback host, not "+quote(r.Host))
			return false
		}
	}
	if g.crossOrigin != nil {
		if err := g.crossOrigin.Check(r); err != nil {
			writeError(w, http.StatusForbidden, CodeForbidden, "cross-origin requests are refused")
			return false
		}
	}
	if !g.anyContentType {
		if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
			writeError(w, http.StatusUnsupportedMediaType, CodeUnsupportedMediaType, "the body must be sent as Content-Type: application/json")
			return false
		}
	}
	return true
}

// isLoopback reports whether addr (a host, or host:port) is "localhost" or
// a loopback IP, as the MCP SDK decides it.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = strings.Trim(addr, "[]")
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}
