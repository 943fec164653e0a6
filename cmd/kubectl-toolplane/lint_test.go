package main

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/toolplane/toolplane/controllers/ownership"
)

// TestSettle checks lint's use of the operator's ownership rule, policies
// included, without an API server.
func TestSettle(t *testing.T) {
	day := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	crm := types.NamespacedName{Namespace: "crm", Name: "crm-tools"}
	shop := types.NamespacedName{Namespace: "shop", Name: "shop-tools"}
	pay := types.NamespacedName{Namespace: "payments", Name: "refunds"}
	payments := []ownership.Policy{{Name: "payments", Names: []string{"refund", "payments_*"}, Namespaces: []string{"payments"}}}
	for _, tc := range []struct {
		name     string
		policies []ownership.Policy
		owner    types.NamespacedName
		others   map[types.NamespacedName]ownership.Claimant
		self     types.NamespacedName
		want     ownership.State
		wantWho  string // the owner for Conflicted, the policy for Denied
	}{
		{name: "a free name", self: crm, want: ownership.Owned},
		{name: "owned by another that still claims it", owner: shop, others: map[types.NamespacedName]ownership.Claimant{shop: {Created: day.Add(time.Hour)}}, self: crm, want: ownership.Conflicted, wantWho: "shop/shop-tools"},
		{name: "self owns it now", owner: crm, others: map[types.NamespacedName]ownership.Claimant{crm: {Created: day}}, self: crm, want: ownership.Owned},
		{name: "free, an earlier-created claimant takes it", others: map[types.NamespacedName]ownership.Claimant{shop: {Created: day.Add(-time.Hour)}}, self: crm, want: ownership.Conflicted, wantWho: "shop/shop-tools"},
		{name: "reserved by a policy for another namespace", policies: payments, self: shop, want: ownership.Denied, wantWho: "payments"},
		{name: "a policy comes before the first claim", policies: payments, owner: shop, others: map[types.NamespacedName]ownership.Claimant{shop: {Created: day}}, self: pay, want: ownership.Owned},
		{name: "a claimant denied now stays denied", others: map[types.NamespacedName]ownership.Claimant{shop: {Created: day.Add(-time.Hour), Denied: &ownership.Denial{Policy: "status", Reason: "OverBudget"}}}, self: crm, want: ownership.Owned},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rule, err := ownership.NewRule(tc.policies)
			if err != nil {
				t.Fatal(err)
			}
			name := "refund"
			cl := &claims{owners: map[string]types.NamespacedName{}, claimants: map[string]map[types.NamespacedName]ownership.Claimant{name: tc.others}}
			if tc.owner != (types.NamespacedName{}) {
				cl.owners[name] = tc.owner
			}
			v := settle(rule, cl, name, tc.self, day)
			if v.State != tc.want {
				t.Fatalf("state = %s, want %s (%+v)", v.State, tc.want, v)
			}
			switch tc.want {
			case ownership.Conflicted:
				if v.Owner.String() != tc.wantWho {
					t.Fatalf("owner = %s, want %s", v.Owner, tc.wantWho)
				}
			case ownership.Denied:
				if v.Policy != tc.wantWho {
					t.Fatalf("policy = %s, want %s", v.Policy, tc.wantWho)
				}
			}
		})
	}
}
