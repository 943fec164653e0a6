package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolplane/toolplane/api/v1alpha1"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// cluster is what the commands read from the API server.
type cluster struct {
	table    *spec.Table
	toolSets []v1alpha1.ToolSet
}

// readTable reads the tool table from its ConfigMaps. Whatever their
// layout, toolkit/spec decodes it: every ConfigMap named as the table or
// as one of its parts is handed to it, and it ignores what is not its own.
func (o *options) readTable(ctx context.Context, c client.Client) (*spec.Table, error) {
	var list corev1.ConfigMapList
	if err := c.List(ctx, &list, client.InNamespace(o.tableNamespace)); err != nil {
		if unreachable, ok := unreachableServer(err); ok {
			return nil, unreachable
		}
		return nil, fmt.Errorf("listing the tool table's ConfigMaps in %s: %w", o.tableNamespace, err)
	}
	var parts []spec.TablePart
	for _, cm := range list.Items {
		if cm.Name == o.tableName || strings.HasPrefix(cm.Name, o.tableName+"-") {
			parts = append(parts, spec.TablePart{Name: cm.Name, Data: cm.Data, BinaryData: cm.BinaryData})
		}
	}
	if len(parts) == 0 {
		return nil, fmt.Errorf("no tool table %s in namespace %s: is the operator running, and are --table-namespace and --table-name right?", o.tableName, o.tableNamespace)
	}
	t, err := spec.DecodeTableParts(parts...)
	if err != nil {
		return nil, fmt.Errorf("reading the tool table %s/%s: %w", o.tableNamespace, o.tableName, err)
	}
	return t, nil
}

// unreachableServer says, as kubectl does, that the API server could not
// be reached, instead of client-go's chain ("failed to get server groups:
// Get …: dial tcp …"): the first thing every command asks is the table.
func unreachableServer(err error) (error, bool) {
	var ue *url.Error
	var op *net.OpError
	if !errors.As(err, &ue) || !errors.As(err, &op) {
		return nil, false
	}
	host := ue.URL
	if u, perr := url.Parse(ue.URL); perr == nil && u.Host != "" {
		host = u.Host
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("the connection to the server %s was refused - did you specify the right host or port?", host), true
	}
	return fmt.Errorf("cannot reach the server %s: %s", host, op.Error()), true
}

// read reads the table and the ToolSets of ns ("" for every namespace).
func (o *options) read(ctx context.Context, ns string) (client.Client, *cluster, error) {
	c, err := o.newClient()
	if err != nil {
		return nil, nil, err
	}
	t, err := o.readTable(ctx, c)
	if err != nil {
		return nil, nil, err
	}
	var list v1alpha1.ToolSetList
	if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return nil, nil, fmt.Errorf("listing ToolSets: %w", err)
	}
	slices.SortFunc(list.Items, func(a, b v1alpha1.ToolSet) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	return c, &cluster{table: t, toolSets: list.Items}, nil
}

// toolSet returns the ToolSet of a reference, if it was read.
func (cl *cluster) toolSet(ref spec.ObjectReference) *v1alpha1.ToolSet {
	for i := range cl.toolSets {
		if ts := &cl.toolSets[i]; ts.Namespace == ref.Namespace && ts.Name == ref.Name {
			return ts
		}
	}
	return nil
}

// claimant is one ToolSet's claim on a name, as its status reports it.
type claimant struct {
	toolSet string
	status  v1alpha1.ToolStatus
}

// claimants lists every ToolSet whose status names the tool, the owner
// first, then by namespace/name.
func (cl *cluster) claimants(name string) []claimant {
	var out []claimant
	for _, ts := range cl.toolSets {
		for _, t := range ts.Status.Tools {
			if t.Name == name {
				out = append(out, claimant{toolSet: ts.Namespace + "/" + ts.Name, status: t})
			}
		}
	}
	slices.SortStableFunc(out, func(a, b claimant) int {
		return stateOrder(a.status.State) - stateOrder(b.status.State)
	})
	return out
}

func stateOrder(s v1alpha1.ToolState) int {
	switch s {
	case v1alpha1.ToolPublished, v1alpha1.ToolStale:
		return 0
	case v1alpha1.ToolConflicted:
		return 1
	}
	return 2
}

// stateOf is the state of a published tool as its owner's status reports
// it: Published, or Stale while held through an outage.
func (cl *cluster) stateOf(t spec.TableTool) string {
	ts := cl.toolSet(t.ToolSet)
	if ts == nil {
		return string(v1alpha1.ToolPublished)
	}
	for _, s := range ts.Status.Tools {
		if s.Name == t.Name {
			return string(s.State)
		}
	}
	return string(v1alpha1.ToolPublished)
}
