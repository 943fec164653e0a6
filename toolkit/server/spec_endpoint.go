package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"time"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// document is the encoded spec document of one revision. It is built once
// per revision, so a scrape that is not answered 304 costs one write.
type document struct {
	revision string
	etag     string
	body     []byte
}

// current returns the document of the registry's current revision.
func (h *Handler) current() (*document, error) {
	if d := h.doc.Load(); d != nil && d.revision == h.reg.Revision() {
		return d, nil
	}
	tools := h.reg.Specs()
	if tools == nil {
		tools = []spec.Tool{}
	}
	// The revision is computed from the very tools encoded, so the body
	// and its ETag agree even if the registry changed in between.
	rev := spec.Revision(tools)
	body, err := json.Marshal(spec.Document{
		SchemaVersion: spec.SchemaVersion,
		Revision:      rev,
		Server:        h.info,
		Tools:         tools,
	})
	if err != nil {
		return nil, err
	}
	d := &document{revision: rev, etag: spec.ETag(rev), body: body}
	h.doc.Store(d)
	return d, nil
}

// serveSpec serves the spec document. http.ServeContent answers
// If-None-Match (304), HEAD and ranges from the ETag set here.
func (h *Handler) serveSpec(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		methodNotAllowed(w, http.MethodGet, http.MethodHead)
		return
	}
	d, err := h.current()
	if err != nil {
		h.logger.Error("Encoding the spec document failed", "error", err)
		writeError(w, http.StatusInternalServerError, "internal", "the spec document could not be encoded")
		return
	}
	hdr := w.Header()
	hdr.Set("ETag", d.etag)
	hdr.Set("Content-Type", "application/json")
	// Revalidate every time: the document changes whenever a tool does,
	// and a 304 costs next to nothing.
	hdr.Set("Cache-Control", "no-cache")
	hdr.Set("X-Content-Type-Options", "nosniff")
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(d.body))
}
