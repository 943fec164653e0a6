package controllers

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/toolplane/toolplane/api/v1alpha1"
	"github.com/toolplane/toolplane/controllers/ownership"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// Offer is what one ToolSet exposes for publication: its tools after
// scraping, validation, filtering and prefixing.
type Offer struct {
	// ToolSet is the ToolSet that offers the tools.
	ToolSet types.NamespacedName
	// Created orders claimants: when a name is free, the earliest-created
	// claimant takes it, ties broken by namespace/name.
	Created metav1.Time
	// UID is the ToolSet's UID. An offer under a UID other than the one
	// the publisher knows for the name is a ToolSet deleted and created
	// again: the old one's claims are withdrawn before the new one's are
	// recorded, so it claims afresh, by its own creation time. Empty
	// matches any.
	UID types.UID
	// Tools are the valid tools the ToolSet exposes now, under their
	// published names and sorted by name. Tools held through a scrape outage
	// (Stale) are included until their grace period ends. A caller never
	// changes a slice it offered: offering the very slice of the ToolSet's
	// last offer again, with the same Created and Denied, says that nothing
	// changed, and costs the publisher no comparison.
	Tools []spec.TableTool
	// Denied are names among Tools that the caller denies before the
	// ownership rule runs, with what denies them: the hook for ceilings such
	// as a budget of tools per ToolSet or per namespace (OverBudget). A
	// denied claim never owns the name; an owner denied loses it.
	Denied map[string]ownership.Denial
}

// Publisher keeps every published tool name owned by exactly one ToolSet in
// the cluster and publishes the tool table. The ToolSet reconciler offers
// each ToolSet's tools to it after every scrape.
type Publisher interface {
	// Offer records what a ToolSet exposes now and returns the verdict of
	// the ownership rule on every offered name: Owned, Conflicted (another
	// ToolSet owns it), Denied (a policy or a ceiling forbids it) or Pending
	// (after a restart a name without an owner is handed out once every
	// ToolSet has been heard from). Offering no tools releases every name the
	// ToolSet held.
	Offer(ctx context.Context, offer Offer) (verdicts map[string]ownership.Verdict, err error)
	// Retain records that a ToolSet was heard from without a new offer, as
	// when its spec cannot be acted on: what it claims now stands (its last
	// offer, or after a restart the entries read back from the table). It
	// returns the verdict on every name it claims.
	Retain(ctx context.Context, toolSet types.NamespacedName) (verdicts map[string]ownership.Verdict, err error)
	// Written returns the names a ToolSet claims that the table readers see
	// has under it now: written, or read back at start. A name the verdicts
	// say it owns is Published only once it is in it; until then status
	// says the name awaits the write. Changed tells the ToolSet when its
	// names in that table change.
	Written(toolSet types.NamespacedName) map[string]bool
	// Withdraw releases every name held by a ToolSet that is gone.
	Withdraw(ctx context.Context, toolSet types.NamespacedName) error
	// Changed delivers the ToolSets whose ownership changed through another
	// ToolSet's offer or withdrawal, and those whose names in the table
	// readers see changed with a write, so that their status is brought up
	// to date.
	Changed() <-chan event.TypedGenericEvent[*v1alpha1.ToolSet]
}
