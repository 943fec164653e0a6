package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolplane/toolplane/api/v1alpha1"
	"github.com/toolplane/toolplane/test/harness"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// pollInterval is how often waitSettled looks again.
const pollInterval = 200 * time.Millisecond

// settled is the cluster's state once the table and the ToolSets agree with
// what the workloads expose.
type settled struct {
	// table is the tool table, decoded as an agent would.
	table *spec.Table
	// configMaps are the ConfigMaps of the table, as published.
	configMaps []corev1.ConfigMap
	// toolSets are the demo's ToolSets, in the workloads' order.
	toolSets []v1alpha1.ToolSet
}

// waitSettled waits, until ctx is done, for the table to hold exactly the
// tools that wls expose, each owned by the first workload that exposes it
// and reachable at its Service, and for every ToolSet to be Ready for its
// generation, with each name it lost shown Conflicted with its owner.
func waitSettled(ctx context.Context, c client.Reader, wls []*workload) (*settled, error) {
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		st, err := check(ctx, c, wls)
		if err == nil {
			return st, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for the tool table: %w; last seen: %w", ctx.Err(), err)
		case <-tick.C:
		}
	}
}

// errNotYet says what waitSettled is still waiting for.
var errNotYet = errors.New("not settled")

func notYet(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errNotYet, fmt.Sprintf(format, args...))
}

func check(ctx context.Context, c client.Reader, wls []*workload) (*settled, error) {
	var list corev1.ConfigMapList
	if err := c.List(ctx, &list, client.InNamespace(tableNamespace)); err != nil {
		return nil, err
	}
	st := &settled{}
	for _, cm := range list.Items {
		if cm.Name == tableName || strings.HasPrefix(cm.Name, tableName+"-") {
			st.configMaps = append(st.configMaps, cm)
		}
	}
	tbl, _, err := harness.DecodeConfigMaps(st.configMaps, tableName)
	if err != nil {
		return nil, notYet("reading ConfigMap %s/%s: %v", tableNamespace, tableName, err)
	}
	st.table = tbl

	want := owners(wls)
	if len(tbl.Tools) != len(want) {
		return nil, notYet("the table holds %d tools, want %d", len(tbl.Tools), len(want))
	}
	for _, t := range tbl.Tools {
		owner, ok := want[t.Name]
		if !ok {
			return nil, notYet("the table holds %s, which no demo workload exposes as such", t.Name)
		}
		if t.ToolSet != owner.ref() {
			return nil, notYet("%s is owned by %s, want %s", t.Name, t.ToolSet, owner.ref())
		}
		invoke := "http://" + owner.serviceHost() + spec.InvokePrefix + t.SourceName
		if t.Endpoints == nil || t.Endpoints.Invoke != invoke {
			return nil, notYet("%s has endpoints %+v, want invoke %s", t.Name, t.Endpoints, invoke)
		}
	}

	for _, wl := range wls {
		var ts v1alpha1.ToolSet
		if err := c.Get(ctx, client.ObjectKey{Namespace: wl.namespace, Name: wl.name}, &ts); err != nil {
			return nil, err
		}
		if ts.Status.ObservedGeneration != ts.Generation || !apimeta.IsStatusConditionTrue(ts.Status.Conditions, v1alpha1.ConditionReady) {
			return nil, notYet("ToolSet %s is not Ready yet", wl.ref())
		}
		for _, tool := range wl.only {
			name := wl.prefix + tool
			i := slices.IndexFunc(ts.Status.Tools, func(s v1alpha1.ToolStatus) bool { return s.Name == name })
			if i < 0 {
				return nil, notYet("ToolSet %s has no status for %s", wl.ref(), name)
			}
			got, owner := ts.Status.Tools[i], want[name]
			if owner == wl && got.State != v1alpha1.ToolPublished {
				return nil, notYet("ToolSet %s has %s %s, want Published", wl.ref(), name, got.State)
			}
			if owner != wl && (got.State != v1alpha1.ToolConflicted || got.Owner != owner.ref().String()) {
				return nil, notYet("ToolSet %s has %s %s (owner %q), want Conflicted with owner %s", wl.ref(), name, got.State, got.Owner, owner.ref())
			}
		}
		st.toolSets = append(st.toolSets, ts)
	}
	return st, nil
}
