package gateway

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"sort"
	"strings"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// CatalogPath serves the catalog: a search box and the tools found, and a
// page per tool (CatalogPath + "/tool?name=NAME"), for the people who run
// and use the cluster.
const CatalogPath = "/catalog"

// Bounds of a catalog page.
const (
	// catalogBrowseLimit is the most tools the catalog lists without a
	// query, by name; a query finds the others.
	catalogBrowseLimit = 100
	// maxSchemaRows bounds the parameter rows of a tool page, and
	// maxSchemaDepth how deep into nested objects they go: a schema is a
	// tenant's input.
	maxSchemaRows  = 300
	maxSchemaDepth = 8
)

//go:embed templates/*.html templates/*.css
var catalogFiles embed.FS

var (
	catalogTemplates = template.Must(template.New("").Funcs(template.FuncMap{
		"join": strings.Join,
	}).ParseFS(catalogFiles, "templates/*.html"))
	catalogCSS = func() string {
		b, err := catalogFiles.ReadFile("templates/catalog.css")
		if err != nil {
			panic(err)
		}
		return string(b)
	}()
	// catalogCSP allows the page's one inline stylesheet by its hash and
	// nothing else: no script, no image, no frame, no other origin, and
	// forms that submit only to the gateway.
	catalogCSP = func() string {
		sum := sha256.Sum256([]byte(catalogCSS))
		return "default-src 'none'; style-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'; " +
			"form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
	}()
)

// catalogHandler serves the catalog's pages.
func (g *Gateway) catalogHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(CatalogPath, g.serveCatalog)
	mux.HandleFunc(CatalogPath+"/tool", g.serveCatalogTool)
	mux.HandleFunc(CatalogPath+"/", func(w http.ResponseWriter, r *http.Request) {
		g.renderCatalog(w, r, http.StatusNotFound, "notfound", catalogPage{Title: "Not found"})
	})
	return mux
}

// catalogPage is what every catalog template gets.
type catalogPage struct {
	Title    string
	CSS      template.CSS
	Revision string
	Query    string
	// Results and Tool are the search page's and the tool page's.
	Results []catalogRow
	Note    string
	Tool    *catalogTool
}

type catalogRow struct {
	Name, Owner, Description, State string
	Score                           string
}

type catalogTool struct {
	spec.TableTool
	State, StateDetail string
	Category           string
	Params             []schemaRow
	ParamsCut          bool
	InputJSON          string
	OutputJSON         string
	Hints              []string
}

// serveCatalog serves the search page: the tools that match the query
// (q), best first, or the first by name without one.
func (g *Gateway) serveCatalog(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "use GET", http.StatusMethodNotAllowed)
		return
	}
	s := g.snapshot()
	page := catalogPage{Title: "Tools", Revision: s.table.Revision, Query: r.URL.Query().Get("q")}
	caller := callerFromRequest(r)
	if strings.TrimSpace(page.Query) != "" {
		q := searchQuery{text: page.Query, limit: MaxSearchLimit, unroutable: true}
		if err := checkQuery(&q); err != nil {
			page.Note = strings.TrimPrefix(err.Error(), errBadQuery.Error()+": ")
			g.renderCatalog(w, r, http.StatusBadRequest, "search", page)
			return
		}
		hits, err := g.search(r.Context(), caller, s, q)
		if err != nil {
			g.catalogUnavailable(w, r, err)
			return
		}
		for _, h := range hits {
			page.Results = append(page.Results, g.catalogRow(s, h.i, fmt.Sprintf("%.2f", h.score)))
		}
		page.Title = "Tools for “" + clip(page.Query, 80) + "”"
		if len(hits) == 0 {
			page.Note = "No tool found. Try other words, or fewer."
		}
	} else {
		idx, more, err := g.browse(r.Context(), caller, s)
		if err != nil {
			g.catalogUnavailable(w, r, err)
			return
		}
		for _, i := range idx {
			page.Results = append(page.Results, g.catalogRow(s, i, ""))
		}
		switch {
		case len(idx) == 0:
			page.Note = "No tools to show."
		case more:
			page.Note = fmt.Sprintf("The first %d tools by name; search to find the others.", len(idx))
		}
	}
	g.renderCatalog(w, r, http.StatusOK, "search", page)
}

// browse returns the first tools of s by name that c may call, at most
// catalogBrowseLimit, and whether there may be more.
func (g *Gateway) browse(ctx context.Context, c *Caller, s *snapshot) ([]int, bool, error) {
	all := make([]int, 0, min(len(s.table.Tools), maxScanFactor*catalogBrowseLimit))
	for i := range s.table.Tools {
		if len(all) == cap(all) {
			break
		}
		all = append(all, i)
	}
	ctx = withReviewBudget(ctx, g.opts.MaxReviewsPerRequest)
	ok, err := g.permitted(ctx, c, s, all)
	switch {
	case errors.Is(err, ErrReviewBudget):
		// The tools decided so far, and a note that there may be more.
		var out []int
		for k, i := range all {
			if ok[k] && len(out) < catalogBrowseLimit {
				out = append(out, i)
			}
		}
		return out, true, nil
	case err != nil:
		return nil, false, err
	}
	var out []int
	for k, i := range all {
		if ok[k] {
			if len(out) == catalogBrowseLimit {
				return out, true, nil
			}
			out = append(out, i)
		}
	}
	return out, len(all) < len(s.table.Tools), nil
}

func (g *Gateway) catalogRow(s *snapshot, i int, score string) catalogRow {
	t := &s.table.Tools[i]
	state, _ := toolState(s, i)
	return catalogRow{Name: t.Name, Owner: t.ToolSet.String(), Description: clip(firstLine(t.Description), 300), State: state, Score: score}
}

// toolState is what the catalog says of a tool: Published, or Unroutable
// (and why) when the gateway cannot call it.
func toolState(s *snapshot, i int) (string, string) {
	if s.routes[i] != "" {
		return "Published", ""
	}
	if _, err := invokeRoute(&s.table.Tools[i], s.clusterDomain); err != nil {
		return "Unroutable", err.Error()
	}
	return "Unroutable", ""
}

// serveCatalogTool serves the page of one tool: its description, owner,
// endpoints, annotations and schemas. A tool the caller may not call is as
// absent as an unknown one.
func (g *Gateway) serveCatalogTool(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "use GET", http.StatusMethodNotAllowed)
		return
	}
	s := g.snapshot()
	name := r.URL.Query().Get("name")
	i, ok := s.byName[name]
	if ok {
		allowed, err := g.permits(r.Context(), callerFromRequest(r), s, i)
		if err != nil {
			g.catalogUnavailable(w, r, err)
			return
		}
		ok = allowed
	}
	if !ok {
		g.renderCatalog(w, r, http.StatusNotFound, "notfound", catalogPage{Title: "No tool " + clip(name, 128), Revision: s.table.Revision})
		return
	}
	t := s.table.Tools[i]
	ct := &catalogTool{TableTool: t, InputJSON: indentJSON(t.InputSchema), OutputJSON: indentJSON(t.OutputSchema)}
	ct.State, ct.StateDetail = toolState(s, i)
	if c, ok := t.Meta[spec.MetaCategory].(string); ok {
		ct.Category = c
	}
	ct.Params, ct.ParamsCut = schemaRows(t.InputSchema)
	if a := t.Annotations; a != nil {
		for _, h := range []struct {
			on   *bool
			name string
		}{{a.ReadOnlyHint, "read-only"}, {a.DestructiveHint, "destructive"}, {a.IdempotentHint, "idempotent"}, {a.OpenWorldHint, "open world"}} {
			if h.on != nil && *h.on {
				ct.Hints = append(ct.Hints, h.name)
			}
		}
	}
	g.renderCatalog(w, r, http.StatusOK, "tool", catalogPage{Title: t.Name, Revision: s.table.Revision, Tool: ct})
}

func (g *Gateway) catalogUnavailable(w http.ResponseWriter, r *http.Request, err error) {
	g.logger.Error("Authorizing the catalog failed", "error", err)
	g.renderCatalog(w, r, http.StatusServiceUnavailable, "notfound", catalogPage{Title: "Authorization is unavailable"})
}

// renderCatalog writes a catalog page with the headers that keep it inert:
// a strict Content-Security-Policy, no sniffing, no framing, no referrer.
func (g *Gateway) renderCatalog(w http.ResponseWriter, r *http.Request, status int, name string, page catalogPage) {
	page.CSS = template.CSS(catalogCSS) //nolint:gosec // our own stylesheet, allowed by its hash
	var buf bytes.Buffer
	if err := catalogTemplates.ExecuteTemplate(&buf, name+".html", page); err != nil {
		g.logger.Error("Rendering a catalog page failed", "error", err)
		http.Error(w, "rendering the page failed", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", catalogCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-cache")
	if g.opts.Auth != nil {
		h.Set("Cache-Control", "private, no-cache")
		h.Set("Vary", "Authorization")
	}
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		_, _ = w.Write(buf.Bytes())
	}
}

func indentJSON(b json.RawMessage) string {
	if len(b) == 0 {
		return ""
	}
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		return string(b)
	}
	return out.String()
}

// schemaRow is one parameter of a tool page: a property of the input
// schema, nested ones under their parent's path.
type schemaRow struct {
	Path        string
	Depth       int
	Type        string
	Required    bool
	Description string
	Constraints []string
}

// schemaRows flattens the properties of an input schema into rows, nested
// objects and array items under their parent (address.city, tags[]),
// bounded by maxSchemaRows and maxSchemaDepth; the second result says
// whether rows were left out.
func schemaRows(raw json.RawMessage) ([]schemaRow, bool) {
	var root map[string]any
	if json.Unmarshal(raw, &root) != nil {
		return nil, false
	}
	var rows []schemaRow
	cut := false
	var walk func(schema map[string]any, prefix string, depth int)
	walk = func(schema map[string]any, prefix string, depth int) {
		props, _ := schema["properties"].(map[string]any)
		required := map[string]bool{}
		if req, ok := schema["required"].([]any); ok {
			for _, r := range req {
				if s, ok := r.(string); ok {
					required[s] = true
				}
			}
		}
		names := make([]string, 0, len(props))
		for n := range props {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			if len(rows) >= maxSchemaRows || depth >= maxSchemaDepth {
				cut = true
				return
			}
			p, _ := props[n].(map[string]any)
			path := n
			if prefix != "" {
				path = prefix + "." + n
			}
			rows = append(rows, schemaRowOf(p, path, depth, required[n]))
			if p == nil {
				continue
			}
			if _, ok := p["properties"]; ok {
				walk(p, path, depth+1)
			}
			if items, ok := p["items"].(map[string]any); ok {
				if _, ok := items["properties"]; ok {
					walk(items, path+"[]", depth+1)
				}
			}
		}
	}
	walk(root, "", 0)
	return rows, cut
}

func schemaRowOf(p map[string]any, path string, depth int, required bool) schemaRow {
	row := schemaRow{Path: path, Depth: depth, Required: required, Type: schemaType(p)}
	if d, ok := p["description"].(string); ok {
		row.Description = clip(d, 1000)
	}
	for _, k := range []string{"enum", "const", "default", "format", "pattern", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
		"minLength", "maxLength", "minItems", "maxItems", "$ref"} {
		v, ok := p[k]
		if !ok {
			continue
		}
		b, _ := json.Marshal(v)
		row.Constraints = append(row.Constraints, k+" "+clip(string(b), 200))
	}
	return row
}

func schemaType(p map[string]any) string {
	switch t := p["type"].(type) {
	case string:
		if t == "array" {
			if items, ok := p["items"].(map[string]any); ok {
				if it := schemaType(items); it != "" {
					return "array of " + it
				}
			}
		}
		return t
	case []any:
		var ts []string
		for _, x := range t {
			if s, ok := x.(string); ok {
				ts = append(ts, s)
			}
		}
		return strings.Join(ts, " | ")
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		if alts, ok := p[k].([]any); ok {
			var ts []string
			for _, a := range alts {
				if m, ok := a.(map[string]any); ok {
					ts = append(ts, schemaType(m))
				}
			}
			return strings.Join(ts, " | ")
		}
	}
	if _, ok := p["$ref"]; ok {
		return "object"
	}
	return "any"
}
