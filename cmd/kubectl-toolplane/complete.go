package main

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolplane/toolplane/api/v1alpha1"
)

// Shell completion. kubectl completes a plugin's arguments by running
// kubectl_complete-toolplane (on the PATH beside kubectl-toolplane), which
// runs `kubectl-toolplane __complete ARGS...`: cobra's hidden command, which
// calls the functions below. They read the cluster with the flags given so
// far (--kubeconfig, --context, -n), bounded in time: a slow API server must
// not hang the shell.

// completionTimeout bounds what one completion reads from the cluster.
const completionTimeout = 5 * time.Second

// maxCompletions bounds the candidates one completion offers.
const maxCompletions = 1000

func registerCompletions(root *cobra.Command, o *options) {
	_ = root.RegisterFlagCompletionFunc("namespace", func(cmd *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		return o.completeNamespaces(cmd.Context(), toComplete), cobra.ShellCompDirectiveNoFileComp
	})
	_ = root.RegisterFlagCompletionFunc("table-namespace", func(cmd *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		return o.completeNamespaces(cmd.Context(), toComplete), cobra.ShellCompDirectiveNoFileComp
	})
}

func (o *options) completionClient(ctx context.Context) (context.Context, context.CancelFunc, client.Client, bool) {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, completionTimeout)
	c, err := o.newClient()
	if err != nil {
		cobra.CompDebugln("completion: "+err.Error(), true)
		cancel()
		return nil, nil, nil, false
	}
	return ctx, cancel, c, true
}

func (o *options) completeNamespaces(ctx context.Context, prefix string) []string {
	ctx, cancel, c, ok := o.completionClient(ctx)
	if !ok {
		return nil
	}
	defer cancel()
	var list corev1.NamespaceList
	if err := c.List(ctx, &list, client.Limit(maxCompletions)); err != nil {
		cobra.CompDebugln("completion: "+err.Error(), true)
		return nil
	}
	var out []string
	for _, ns := range list.Items {
		out = appendMatch(out, ns.Name, prefix)
	}
	return out
}

// completeToolSets offers the ToolSets of the namespace (-n, or the
// context's).
func (o *options) completeToolSets(ctx context.Context, prefix string) []string {
	ns, err := o.namespace()
	if err != nil {
		return nil
	}
	ctx, cancel, c, ok := o.completionClient(ctx)
	if !ok {
		return nil
	}
	defer cancel()
	var list v1alpha1.ToolSetList
	if err := c.List(ctx, &list, client.InNamespace(ns), client.Limit(maxCompletions)); err != nil {
		cobra.CompDebugln("completion: "+err.Error(), true)
		return nil
	}
	var out []string
	for _, ts := range list.Items {
		out = appendMatch(out, ts.Name, prefix)
	}
	return out
}

// completeTools offers the published names of the tool table: names are
// cluster-wide, so every namespace's.
func (o *options) completeTools(ctx context.Context, prefix string) []string {
	ctx, cancel, c, ok := o.completionClient(ctx)
	if !ok {
		return nil
	}
	defer cancel()
	t, err := o.readTable(ctx, c)
	if err != nil {
		cobra.CompDebugln("completion: "+err.Error(), true)
		return nil
	}
	var out []string
	for _, tool := range t.Tools {
		out = appendMatch(out, tool.Name, prefix)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func appendMatch(out []string, name, prefix string) []string {
	if len(out) < maxCompletions && strings.HasPrefix(name, prefix) {
		out = append(out, name)
	}
	return out
}

// toolArg completes a command's one tool-name argument.
func (o *options) toolArg(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return o.completeTools(cmd.Context(), toComplete), cobra.ShellCompDirectiveNoFileComp
}
