package gateway

import (
	"net/http"
	"time"
)

// sessionLimits bounds the 2025-era sessions of Options.Sessions: the SDK
// keeps every session it opens until it times out, with no bound on their
// number, so each initialize that would open one takes a slot here first,
// held until the session closes.
type sessionLimits struct {
	g     *Gateway
	count *counter
}

func newSessionLimits(g *Gateway) *sessionLimits {
	return &sessionLimits{g: g, count: newCounter(g.opts.MaxSessions, g.opts.MaxSessionsPerClient, refusedSessions, refusedSessionsPerClient)}
}

// serveNew serves a session request without a session id, which opens a
// session if it is an initialize: within the session bounds, and with the
// session's lifetime bound once the SDK has named it.
func (l *sessionLimits) serveNew(w http.ResponseWriter, r *http.Request, next http.Handler) {
	client := clientKey(r.RemoteAddr)
	if reason := l.count.acquire(client); reason != "" {
		l.g.metrics.refused.WithLabelValues(reason).Inc()
		w.Header().Set("Retry-After", "10")
		rpcError(w, http.StatusTooManyRequests, codeServerBusy, "too many MCP sessions are open (from your address, or at the gateway); close one (DELETE) or retry later")
		return
	}
	sw := &sessionIDWriter{ResponseWriter: w}
	next.ServeHTTP(sw, r)
	id := sw.id
	if id == "" {
		l.count.release(client)
		return
	}
	for ss := range l.g.server.Sessions() {
		if ss.ID() != id {
			continue
		}
		l.g.metrics.sessions.Inc()
		end := time.AfterFunc(l.g.opts.SessionLifetime, func() { _ = ss.Close() })
		go func() {
			_ = ss.Wait()
			end.Stop()
			l.count.release(client)
			l.g.metrics.sessions.Dec()
		}()
		return
	}
	// Closed already.
	l.count.release(client)
}

// sessionIDWriter notes the session id that the SDK's answer names.
type sessionIDWriter struct {
	http.ResponseWriter
	id      string
	written bool
}

func (w *sessionIDWriter) note() {
	if !w.written {
		w.written = true
		w.id = w.Header().Get("Mcp-Session-Id")
	}
}

func (w *sessionIDWriter) WriteHeader(code int) {
	w.note()
	w.ResponseWriter.WriteHeader(code)
}

func (w *sessionIDWriter) Write(b []byte) (int, error) {
	w.note()
	return w.ResponseWriter.Write(b)
}

// Unwrap gives [http.ResponseController] the writer underneath.
func (w *sessionIDWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
