package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// corpusFile is what generate.mjs writes.
type corpusFile struct {
	Servers []struct {
		Package string `json:"package"`
		Version string `json:"version"`
		License string `json:"license"`
		Prefix  string `json:"prefix"`
		Tools   []struct {
			Name         string            `json:"name"`
			Title        string            `json:"title"`
			Description  string            `json:"description"`
			InputSchema  json.RawMessage   `json:"inputSchema"`
			OutputSchema json.RawMessage   `json:"outputSchema"`
			Annotations  *spec.Annotations `json:"annotations"`
			Meta         map[string]any    `json:"_meta"`
		} `json:"tools"`
	} `json:"servers"`
}

// task is one entry of tasks.json.
type task struct {
	Task  string   `json:"task"`
	Tool  string   `json:"tool"`
	Also  []string `json:"also"`
	Split string   `json:"split"`
}

var validName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)

// loadTable reads the corpus as the table a cluster running every server as
// a ToolSet would publish: one ToolSet per server, in a namespace of its
// own, its tools under its prefix unless their name already starts with
// the prefix's word.
func loadTable(dir string) (*spec.Table, error) {
	b, err := os.ReadFile(filepath.Join(dir, "tools.json"))
	if err != nil {
		return nil, err
	}
	var c corpusFile
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("tools.json: %w", err)
	}
	var tools []spec.TableTool
	seen := map[string]bool{}
	for _, s := range c.Servers {
		word := strings.TrimRight(strings.ToLower(s.Prefix), "_-")
		ns := strings.ReplaceAll(word, "_", "-")
		for _, t := range s.Tools {
			name := s.Prefix + t.Name
			if l := strings.ToLower(t.Name); strings.HasPrefix(l, word+"_") || strings.HasPrefix(l, word+"-") {
				name = t.Name
			}
			if !validName.MatchString(name) || seen[name] {
				return nil, fmt.Errorf("%s: tool %q: name %q is invalid or taken", s.Package, t.Name, name)
			}
			seen[name] = true
			in := t.InputSchema
			if len(in) == 0 {
				in = json.RawMessage(`{"type":"object"}`)
			}
			tools = append(tools, spec.TableTool{
				Name: name, SourceName: t.Name, Title: t.Title, Description: t.Description,
				InputSchema: in, OutputSchema: t.OutputSchema, Annotations: t.Annotations, Meta: t.Meta,
				SchemaDigest: spec.SchemaDigest(in, t.OutputSchema, t.Annotations, nil),
				ToolSet:      spec.ObjectReference{Namespace: ns, Name: ns + "-mcp"},
				Protocol:     spec.ProtocolMCP,
				Endpoints:    &spec.Endpoints{MCP: "http://" + ns + "-mcp." + ns + ".svc:8080/mcp"},
			})
		}
	}
	spec.SortTableTools(tools)
	return &spec.Table{SchemaVersion: spec.SchemaVersion, Revision: spec.TableRevision(tools), Tools: tools}, nil
}

func loadTasks(dir string, t *spec.Table) ([]task, error) {
	b, err := os.ReadFile(filepath.Join(dir, "tasks.json"))
	if err != nil {
		return nil, err
	}
	var f struct {
		Tasks []task `json:"tasks"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("tasks.json: %w", err)
	}
	names := map[string]bool{}
	for _, tool := range t.Tools {
		names[tool.Name] = true
	}
	for _, k := range f.Tasks {
		for _, n := range append([]string{k.Tool}, k.Also...) {
			if !names[n] {
				return nil, fmt.Errorf("task %q: no tool %q in the corpus", k.Task, n)
			}
		}
		if k.Split != "tune" && k.Split != "heldout" {
			return nil, fmt.Errorf("task %q: split %q", k.Task, k.Split)
		}
	}
	return f.Tasks, nil
}
