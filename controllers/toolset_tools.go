package controllers

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/toolplane/toolplane/api/v1alpha1"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// toolNameRE is the tool name rule of MCP (SEP-986), applied to the
// published name.
var toolNameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)

// maxReasonLen bounds one tool's reason in status, so that a schema
// compiler's long error cannot bloat the object.
const maxReasonLen = 256

// maxStatusNameLen bounds a rejected tool's names in status: room for any
// honest mistake, and limits.maxTools of them still fit in one object.
const maxStatusNameLen = 512

// podDoc is the last document a Pod served, kept for conditional GETs.
type podDoc struct {
	uid types.UID
	url string
	doc *spec.Document
	// from is what url was built from: a round that builds it from the
	// same takes it as it is.
	from urlSource
}

// podDocs is the last document of each Pod of a ToolSet, sorted by UID.
// Most ToolSets have one Pod, for which a slice of one costs a tenth of a
// map (about 1.4 KiB a ToolSet, 7 MB at 5,000).
type podDocs []podDoc

// get returns the document remembered for the Pod uid.
func (p podDocs) get(uid types.UID) (podDoc, bool) {
	i, ok := slices.BinarySearchFunc(p, uid, comparePodUID)
	if !ok {
		return podDoc{}, false
	}
	return p[i], true
}

// comparePodUID orders podDocs.
func comparePodUID(d podDoc, uid types.UID) int { return strings.Compare(string(d.uid), string(uid)) }

// lookup is get's document, the zero podDoc for a Pod not remembered.
func (p podDocs) lookup(uid types.UID) podDoc {
	d, _ := p.get(uid)
	return d
}

// urlSource is what a Pod's scrape URL is built from: the Pod object as the
// cache lists it (never changed, replaced by a new one when the Pod is),
// and the spec's scheme, path and port.
type urlSource struct {
	pod          *corev1.Pod
	scheme, path string
	port         intstr.IntOrString
}

// assembly is what one round of scrapes makes of a ToolSet's tools.
type assembly struct {
	// revision is the revision most of the scraped Pods serve.
	revision string
	// tools are the valid tools that every scraped Pod serves and the
	// filters let through, in the form most Pods serve, under their
	// published names, sorted.
	tools []spec.TableTool
	// rejected are the tools that are not offered, with the reason:
	// Filtered, Skewed or Invalid.
	rejected []v1alpha1.ToolStatus
	// skew describes replicas that serve different revisions; empty when
	// they agree.
	skew string
}

func (a *assembly) count(state v1alpha1.ToolState) int {
	n := 0
	for _, t := range a.rejected {
		if t.State == state {
			n++
		}
	}
	return n
}

// served is one tool name across the scraped Pods.
type served struct {
	pods      int
	duplicate bool
	forms     map[string]*form
}

type form struct {
	tool  spec.Tool
	pods  int
	bytes string
}

// assemble merges the documents of the ready Pods into the tools to offer:
// those scraped now, and the last known ones of Pods whose scrape failed.
// blind counts ready Pods whose scrape failed and that never served a
// document: they may lack any tool. Agents must never be offered a tool
// that some ready replica cannot serve, so a tool is offered only when
// every document has it and no Pod is blind, in the form that most
// documents give (ties broken by the form's bytes, so that the outcome never
// depends on the order of the Pods). clusterDomain names the Services in
// the endpoints ("" means DefaultClusterDomain).
func assemble(ts *v1alpha1.ToolSet, docs []*spec.Document, blind int, clusterDomain string) assembly {
	return assembleWithin(ts, docs, blind, defaultToolBounds, clusterDomain)
}

// assembleWithin is assemble under the admin's bounds of each tool.
func assembleWithin(ts *v1alpha1.ToolSet, docs []*spec.Document, blind int, bounds toolBounds, clusterDomain string) assembly {
	var a assembly
	byName := map[string]*served{}
	revisions := map[string]int{}
	for _, doc := range docs {
		revisions[doc.Revision]++
		seen := map[string]bool{}
		for _, t := range doc.Tools {
			s := byName[t.Name]
			if s == nil {
				s = &served{forms: map[string]*form{}}
				byName[t.Name] = s
			}
			if seen[t.Name] {
				s.duplicate = true
				continue
			}
			seen[t.Name] = true
			s.pods++
			b, err := json.Marshal(t)
			if err != nil {
				b = []byte(err.Error())
			}
			f := s.forms[string(b)]
			if f == nil {
				f = &form{tool: t, bytes: string(b)}
				s.forms[string(b)] = f
			}
			f.pods++
		}
	}
	a.revision, a.skew = majorityRevision(revisions)
	var extensions []string
	if ts.Spec.IsMCP() {
		// A toolkit workload's document names none; one that did would be
		// claiming what toolkit does not serve.
		extensions = commonExtensions(docs)
	}

	names := make([]string, 0, len(byName))
	for name := range byName {
		names = append(names, name)
	}
	slices.Sort(names)
	// Room for every name at once: the assembly is held until the next
	// change, and growing it by appends would hold up to twice the room.
	a.tools = make([]spec.TableTool, 0, len(names))
	ep := endpointsOf(ts, clusterDomain)
	for _, name := range names {
		s := byName[name]
		published := ts.Spec.Prefix + name
		reject := func(state v1alpha1.ToolState, reason string) {
			// A Pod may serve any name, up to the whole response size; the
			// status must still fit in one API request.
			a.rejected = append(a.rejected, v1alpha1.ToolStatus{
				Name: truncate(published, maxStatusNameLen), SourceName: truncate(name, maxStatusNameLen), State: state, Reason: truncate(reason, maxReasonLen),
			})
		}
		if reason, ok := filtered(ts.Spec.Include, ts.Spec.Exclude, name); !ok {
			reject(v1alpha1.ToolFiltered, reason)
			continue
		}
		if s.pods < len(docs) {
			reject(v1alpha1.ToolSkewed, fmt.Sprintf("served by %d of %d ready Pods; published once every ready Pod serves it", s.pods, len(docs)+blind))
			continue
		}
		if blind > 0 {
			reject(v1alpha1.ToolSkewed, fmt.Sprintf("served by %d of %d ready Pods; %s never scraped; published once every ready Pod serves it",
				s.pods, len(docs)+blind, plural(blind, "Pod")))
			continue
		}
		if s.duplicate {
			reject(v1alpha1.ToolInvalid, "the name is served more than once")
			continue
		}
		t := majorityForm(s.forms)
		if err := validateTool(published, t, ts.Spec.Limits, bounds); err != nil {
			reject(v1alpha1.ToolInvalid, err.Error())
			continue
		}
		tt := tableTool(ts, ep, published, t)
		tt.Extensions = extensions
		a.tools = append(a.tools, tt)
	}
	if len(a.tools) == 0 {
		// As before there was room: no valid tool, no slice.
		a.tools = nil
	}
	slices.SortFunc(a.rejected, func(x, y v1alpha1.ToolStatus) int { return strings.Compare(x.Name, y.Name) })
	return a
}

func majorityRevision(revisions map[string]int) (revision, skew string) {
	type rc struct {
		rev  string
		pods int
	}
	var all []rc
	for rev, n := range revisions {
		all = append(all, rc{rev, n})
	}
	slices.SortFunc(all, func(x, y rc) int {
		if x.pods != y.pods {
			return y.pods - x.pods
		}
		return strings.Compare(x.rev, y.rev)
	})
	if len(all) == 0 {
		return "", ""
	}
	if len(all) == 1 {
		return all[0].rev, ""
	}
	parts := make([]string, len(all))
	for i, r := range all {
		parts[i] = fmt.Sprintf("%s (%s)", shortRevision(r.rev), plural(r.pods, "Pod"))
	}
	return all[0].rev, fmt.Sprintf("ready Pods serve %d revisions: %s; only the tools every Pod serves are published, in the form most Pods serve",
		len(all), strings.Join(parts, ", "))
}

func majorityForm(forms map[string]*form) spec.Tool {
	var best *form
	for _, f := range forms {
		if best == nil || f.pods > best.pods || (f.pods == best.pods && f.bytes < best.bytes) {
			best = f
		}
	}
	return best.tool
}

// filtered says whether include and exclude let a source name through, and
// if not, why.
func filtered(include, exclude []string, name string) (string, bool) {
	for _, p := range exclude {
		if ok, _ := path.Match(p, name); ok {
			return fmt.Sprintf("excluded by spec.exclude pattern %q", p), false
		}
	}
	if len(include) == 0 {
		return "", true
	}
	for _, p := range include {
		if ok, _ := path.Match(p, name); ok {
			return "", true
		}
	}
	return "matches no spec.include pattern", false
}

// errTokenOverHTTP refuses a bearer token with scheme http: it would cross
// the network in the clear.
var errTokenOverHTTP = errors.New("spec.authorization requires spec.scheme https: a bearer token is never sent over plain http")

// validateSpec checks what the API server checks at admission again, the
// include and exclude globs among them, for objects stored before those
// rules (validation ratcheting keeps them): a user's mistake that no scrape
// can fix. TestGlobRuleAgreesWithPathMatch holds the CRD's glob rule to
// validatePatterns.
func validateSpec(s *v1alpha1.ToolSetSpec) error {
	if s.Authorization != nil && s.Scheme != "https" {
		return errTokenOverHTTP
	}
	if svc := s.Service; svc != nil {
		if errs := validation.IsDNS1035Label(svc.Name); len(errs) > 0 {
			return fmt.Errorf("spec.service.name %q is not a Service name: %s", truncate(svc.Name, 80), strings.Join(errs, "; "))
		}
		if svc.Scheme != "" && svc.Scheme != "http" && svc.Scheme != "https" {
			return fmt.Errorf("spec.service.scheme %q is not http or https", truncate(svc.Scheme, 80))
		}
	}
	return validatePatterns(s)
}

// validatePatterns checks the include and exclude globs.
func validatePatterns(s *v1alpha1.ToolSetSpec) error {
	check := func(field string, patterns []string) error {
		for _, p := range patterns {
			if _, err := path.Match(p, ""); err != nil {
				return fmt.Errorf("%s pattern %q: %w", field, p, err)
			}
		}
		return nil
	}
	if err := check("spec.include", s.Include); err != nil {
		return err
	}
	return check("spec.exclude", s.Exclude)
}

// validateTool checks one tool against the rules of the table: the
// published name, the schemas and the limits.
func validateTool(published string, t spec.Tool, limits v1alpha1.Limits, bounds toolBounds) error {
	if !toolNameRE.MatchString(published) {
		// The rule before the name: a long name is cut from the reason, and
		// status.tools[].name shows it anyway.
		return fmt.Errorf("name does not match %s: %q", toolNameRE, published)
	}
	if t.Name == "." || t.Name == ".." {
		return fmt.Errorf("name %q cannot be addressed in an invoke URL", t.Name)
	}
	if err := bounds.check(&t); err != nil {
		return err
	}
	if err := t.Execution.Validate(); err != nil {
		return fmt.Errorf("%w, not %q", err, truncate(t.Execution.TaskSupport, 80))
	}
	if err := validateSchema("inputSchema", t.InputSchema, limits.MaxSchemaBytes, true); err != nil {
		return err
	}
	return validateSchema("outputSchema", t.OutputSchema, limits.MaxSchemaBytes, false)
}

// errExternalRef refuses every $ref the schema does not resolve itself: the
// operator never reaches the network or the file system for a schema.
var errExternalRef = errors.New("external $ref is not allowed")

type refuseLoader struct{}

func (refuseLoader) Load(string) (any, error) { return nil, errExternalRef }

// validateSchema checks that raw is an object JSON Schema, within the size
// limit, whose numbers a float64 holds, that compiles under draft 2020-12
// (MCP's default dialect). A schema of the same bytes that passed lately
// passes without being compiled again (compiledSchemas).
func validateSchema(field string, raw json.RawMessage, maxBytes int32, required bool) error {
	if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		if required {
			return fmt.Errorf("%s is missing", field)
		}
		return nil
	}
	if maxBytes > 0 && len(raw) > int(maxBytes) {
		return fmt.Errorf("%s is %d bytes, more than limits.maxSchemaBytes %d", field, len(raw), maxBytes)
	}
	sum := sha256.Sum256(raw)
	if compiledSchemas.has(sum) {
		return nil
	}
	// Before the compiler parses each number exactly: a schema of 40
	// numbers written 1e999999 took 4.5 s of CPU to compile.
	if err := spec.CheckNumbers(raw); err != nil {
		return fmt.Errorf("%s: %w", field, err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return fmt.Errorf("%s is not JSON: %w", field, err)
	}
	obj, ok := doc.(map[string]any)
	if !ok || obj["type"] != "object" {
		return fmt.Errorf(`%s must be a JSON Schema with "type": "object"`, field)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(refuseLoader{})
	const loc = "urn:toolplane:schema"
	if err := c.AddResource(loc, doc); err != nil {
		return fmt.Errorf("%s does not compile: %w", field, err)
	}
	if _, err := c.Compile(loc); err != nil {
		return fmt.Errorf("%s does not compile: %s", field, oneLine(err.Error()))
	}
	compiledSchemas.add(sum)
	return nil
}

// commonExtensions are the extensions every document names, sorted, at
// most spec.MaxExtensions valid names: a Pod that does not advertise one
// may get the call. A document is the workload's word, so its list is
// checked here too.
func commonExtensions(docs []*spec.Document) []string {
	if len(docs) == 0 {
		return nil
	}
	var out []string
	for _, name := range docs[0].Extensions {
		if len(out) == spec.MaxExtensions {
			break
		}
		if !spec.ValidExtensionName(name) || slices.Contains(out, name) {
			continue
		}
		all := true
		for _, d := range docs[1:] {
			if !slices.Contains(d.Extensions[:min(len(d.Extensions), spec.MaxExtensions)], name) {
				all = false
				break
			}
		}
		if all {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// toolSetEndpoints are what the endpoints of a ToolSet's tools have in
// common, made once per assembly rather than once per tool.
type toolSetEndpoints struct {
	// mcp is the MCP endpoint; empty without spec.service.
	mcp string
	// shared are the endpoints of every tool of an MCP ToolSet, which has
	// only the MCP endpoint: one value that every entry points at.
	shared *spec.Endpoints
	// clusterDomain names the Service in the invoke endpoints.
	clusterDomain string
}

func endpointsOf(ts *v1alpha1.ToolSet, clusterDomain string) toolSetEndpoints {
	svc := ts.Spec.Service
	if svc == nil {
		return toolSetEndpoints{}
	}
	if ts.Spec.IsMCP() {
		mcp := serviceURL(ts, svc, ts.Spec.PathOrDefault(), clusterDomain)
		return toolSetEndpoints{mcp: mcp, shared: &spec.Endpoints{MCP: mcp}, clusterDomain: clusterDomain}
	}
	return toolSetEndpoints{mcp: serviceURL(ts, svc, spec.MCPPath, clusterDomain), clusterDomain: clusterDomain}
}

// tableTool is a tool as the table publishes it. Without spec.service it has
// no endpoints: agents can list it but not call it. A tool of an MCP ToolSet
// says so, and has only the MCP endpoint, at the ToolSet's path: the server
// has no invoke endpoint. ep is endpointsOf(ts). The entry shares the
// schemas, annotations and _meta of t, which nothing modifies.
func tableTool(ts *v1alpha1.ToolSet, ep toolSetEndpoints, published string, t spec.Tool) spec.TableTool {
	tt := spec.TableTool{
		Name:         published,
		SourceName:   t.Name,
		Title:        t.Title,
		Description:  t.Description,
		InputSchema:  t.InputSchema,
		OutputSchema: t.OutputSchema,
		Annotations:  t.Annotations,
		Execution:    t.Execution,
		Meta:         t.Meta,
		// Tools alike have one digest: the memo's, one string between them.
		SchemaDigest: toolDigests.of(&t),
		ToolSet:      spec.ObjectReference{Namespace: ts.Namespace, Name: ts.Name},
		ToolSetUID:   string(ts.UID),
	}
	switch svc := ts.Spec.Service; {
	case svc == nil:
	case ep.shared != nil:
		tt.Endpoints = ep.shared
	default:
		tt.Endpoints = &spec.Endpoints{Invoke: serviceURL(ts, svc, spec.InvokePrefix+t.Name, ep.clusterDomain), MCP: ep.mcp}
	}
	if ts.Spec.IsMCP() {
		tt.Protocol = spec.ProtocolMCP
	}
	if n := ts.Spec.Limits.CallsPerMinute; n != nil {
		tt.CallsPerMinute = int(*n)
	}
	return tt
}

// serviceURL is an endpoint of the ToolSet's Service. It is built with
// net/url, the host from the Service name and the ToolSet's own namespace
// only, so that no field a tenant writes can name another host: the API
// server already holds the name to a DNS label, and this holds the rest.
// The scheme is spec.service.scheme, else spec.scheme.
//
// The host is fully qualified, <name>.<namespace>.svc.<clusterDomain>,
// without a final dot: a Pod's resolver (ndots:5) tries a shorter name such
// as <name>.<namespace>.svc under each search domain first, and
// <name>.<namespace>.svc.svc.cluster.local is a Pod's name in a namespace
// called "svc", whoever owns it. The final dot, which would make every
// resolver take the name as it is, is left to the dialer (the gateway's
// adds it): in a URL it would reach the Host header and the TLS server
// name, which Services, certificates and mesh routes do not carry.
func serviceURL(ts *v1alpha1.ToolSet, svc *v1alpha1.ServiceReference, p, clusterDomain string) string {
	scheme := cmp.Or(svc.Scheme, ts.Spec.Scheme, "http")
	u := url.URL{
		Scheme: scheme,
		Host:   net.JoinHostPort(svc.Name+"."+ts.Namespace+".svc."+cmp.Or(clusterDomain, DefaultClusterDomain), strconv.Itoa(int(svc.Port))),
		Path:   p,
	}
	return u.String()
}

func shortRevision(rev string) string {
	if i := strings.IndexByte(rev, ':'); i >= 0 && len(rev) > i+13 {
		return rev[:i+13]
	}
	return rev
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// truncate cuts s to at most n bytes, on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - 3
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
